"""The Transformer paper's training recipe (chapter 11, after Rush's *The Annotated
Transformer*, 2018): :func:`label_smoothed_cross_entropy` over ``N`` positions and
``V`` tokens (Szegedy et al. [2]_; Vaswani et al. [1]_ use ``epsilon = 0.1``), and
:func:`warmup_rate` and :func:`warmup_lambda`, a linear warm-up then an
inverse-square-root decay; and :func:`ffn_gradient_norms`, the gradient norms per
layer at initialisation with which Xiong et al. [3]_ (Section 3) explain why a
post-norm Transformer needs the warm-up. The third
item, embeddings scaled by ``sqrt(D)``, is an option of
:class:`lib.part4_attention.transformer.TransformerEmbedding`.

.. [1] A. Vaswani et al. "Attention Is All You Need". NeurIPS 2017. arXiv:1706.03762.
.. [2] C. Szegedy, V. Vanhoucke, S. Ioffe, J. Shlens, Z. Wojna. "Rethinking the
   Inception Architecture for Computer Vision". CVPR 2016.
.. [3] R. Xiong et al. "On Layer Normalization in the Transformer Architecture".
   ICML 2020. arXiv:2002.04745.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from lib.checked import Fraction, IdDtype, NonNegativeInt, Positive, PositiveInt

__all__ = [
    "label_smoothed_cross_entropy",
    "warmup_rate",
    "warmup_lambda",
    "ffn_gradient_norms",
]


def label_smoothed_cross_entropy(
    logits: Float[Tensor, "N V"],
    targets: IdDtype[Tensor, "N"],
    epsilon: Fraction,
    ignore_index: Optional[NonNegativeInt] = None,
) -> Float[Tensor, ""]:
    """The mean over the counted positions (``targets != ignore_index``; NaN if none) of
    ``(1 - epsilon) (-log p_y) + epsilon * mean_k (-log p_k)``: the cross-entropy
    against ``1 - epsilon`` on the label plus ``epsilon`` spread over the ``V`` tokens.
    Equal to ``F.cross_entropy(logits, targets, label_smoothing=epsilon)``."""
    if not len(targets):
        raise ValueError("logits and targets must hold at least one position; found 0")
    if targets.min() < 0 or targets.max() >= logits.shape[1]:
        raise ValueError(
            f"targets must hold ids in [0, {logits.shape[1]}); "
            f"found ids from {int(targets.min())} to {int(targets.max())}"
        )
    log_p = F.log_softmax(logits, dim=-1)  # (N, V)
    if ignore_index is None:
        keep = torch.ones_like(targets, dtype=torch.bool)  # (N,)
    else:
        keep = targets != ignore_index  # (N,)
    nll = -log_p.gather(1, targets[:, None]).squeeze(1)  # (N,) -log p_y
    uniform = -log_p.mean(dim=-1)  # (N,) the cross-entropy against the uniform
    loss = (1 - epsilon) * nll + epsilon * uniform  # (N,)
    return loss[keep].mean()


def warmup_rate(
    step: PositiveInt, d_model: PositiveInt, warmup: PositiveInt = 4000
) -> Positive:
    """The learning rate of Vaswani et al. at ``step`` (counted from 1):
    ``d_model^-1/2 min(step^-1/2, step warmup^-3/2)``, a linear warm-up for ``warmup``
    steps, then a decay like ``step^-1/2``."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_lambda(
    d_model: PositiveInt, warmup: PositiveInt = 4000
) -> Callable[[int], float]:
    """The factor ``f(k) = warmup_rate(k + 1, d_model, warmup)`` for
    ``torch.optim.lr_scheduler.LambdaLR``, which counts ``k`` from 0: an optimiser made
    with ``lr=1`` follows the paper's schedule from step 1."""
    return lambda k: warmup_rate(k + 1, d_model, warmup)


def ffn_gradient_norms(
    loss: Float[Tensor, ""], blocks: nn.ModuleList
) -> Float[Tensor, "L"]:
    """``||d loss / d W_2^l||_F`` for each block ``l`` of ``blocks`` (each with an
    ``ffn.linear2``, the FFN's output weight ``W_2``): the quantity Xiong et al. bound
    and measure (their Section 3). The graph of ``loss`` is kept; no ``.grad`` is
    written."""
    if not len(blocks) or not all(hasattr(b, "ffn") for b in blocks):
        raise TypeError(
            f"blocks must hold at least one block with an ffn; found {blocks}"
        )
    if not loss.requires_grad:
        raise ValueError("loss must depend on the blocks' weights; found a constant")
    weights = [block.ffn.linear2.weight for block in blocks]  # W_2 of each block
    grads = torch.autograd.grad(loss, weights, retain_graph=True, allow_unused=True)
    if any(grad is None for grad in grads):
        raise ValueError("loss must depend on every block's W_2; found one it does not")
    return torch.stack([grad.norm() for grad in grads])  # (L,)
