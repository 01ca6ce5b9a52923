"""The training recipe of the Transformer paper: label smoothing and the warm-up schedule.

Chapter 11 (its section on the training recipe, after *The Annotated
Transformer* of Rush, 2018):

1. :func:`label_smoothed_cross_entropy`: cross-entropy against a target that
   keeps ``1 - epsilon`` on the label and spreads ``epsilon`` evenly (Szegedy
   et al. [2]_; Vaswani et al. [1]_ use ``epsilon = 0.1``).
2. :func:`warmup_rate`: the paper's learning rate, a linear warm-up followed by
   an inverse-square-root decay, and :func:`warmup_lambda`, the same as a
   factor for ``torch.optim.lr_scheduler.LambdaLR``.

The third item of the recipe, the ``sqrt(D)`` scaling of the embeddings, is an
option of :class:`lib.transformer.TransformerEmbedding`.

References
----------
.. [1] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
.. [2] C. Szegedy, V. Vanhoucke, S. Ioffe, J. Shlens, Z. Wojna. "Rethinking the
   Inception Architecture for Computer Vision". CVPR 2016.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.validation import require_int, require_ints, require_tokens

__all__ = ["label_smoothed_cross_entropy", "warmup_rate", "warmup_lambda"]


def _check_smoothing(logits: object, targets: object, epsilon: object, ignore_index: object) -> None:
    """The argument checks of :func:`label_smoothed_cross_entropy`."""
    if not isinstance(logits, Tensor) or not logits.is_floating_point() or logits.dim() != 2:
        found = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a float tensor of shape (N, V); found {found}")
    require_tokens("targets", targets.unsqueeze(0) if isinstance(targets, Tensor) and targets.dim() == 1
                   else targets, logits.shape[1])
    if targets.dim() != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"targets must have shape (N,) with N = {logits.shape[0]}; found {tuple(targets.shape)}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 <= epsilon <= 1:
        raise ValueError(f"epsilon must be a number in [0, 1]; found {epsilon!r}")
    if ignore_index is not None:
        require_int("ignore_index", ignore_index, 0)


def label_smoothed_cross_entropy(
    logits: Tensor, targets: Tensor, epsilon: float, ignore_index: Optional[int] = None
) -> Tensor:
    r"""Cross-entropy against a smoothed target: mass ``1 - epsilon`` on the label, ``epsilon`` spread evenly.

    .. math:: q_k = (1 - \varepsilon)\,[k = y] + \frac{\varepsilon}{V}, \qquad
              \ell = -\sum_{k=1}^{V} q_k \log p_k
              = (1 - \varepsilon)(-\log p_y) + \varepsilon \cdot \frac{1}{V}\sum_k (-\log p_k)

    The model is never asked for probability 1, so its logits stay bounded;
    Vaswani et al. use ``epsilon = 0.1``. Equal to
    ``F.cross_entropy(logits, targets, label_smoothing=epsilon)``.

    Parameters
    ----------
    logits : Tensor
    targets : Tensor
        Integer labels in ``[0, V)``.
    epsilon : float
        Smoothing, in ``[0, 1]``; 0 is the ordinary cross-entropy.
    ignore_index : int, optional
        Targets with this value (padding) do not count.

    Returns
    -------
    Tensor
        The mean loss over the counted positions (a scalar).

    Shapes
    ------
    logits : (N, V)
    targets : (N,)
    output : ()
    """
    _check_smoothing(logits, targets, epsilon, ignore_index)
    log_p = F.log_softmax(logits, dim=-1)  # (N, V)
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index  # (N,)
    nll = -log_p.gather(1, targets[:, None]).squeeze(1)  # (N,) -log p_y
    uniform = -log_p.mean(dim=-1)  # (N,) the cross-entropy against the uniform distribution
    loss = (1 - epsilon) * nll + epsilon * uniform  # (N,)
    return loss[keep].mean()


def _check_warmup(step: object, d_model: object, warmup: object) -> None:
    """The argument checks of :func:`warmup_rate`: three positive integers."""
    require_ints(step=step, d_model=d_model, warmup=warmup)


def warmup_rate(step: int, d_model: int, warmup: int = 4000) -> float:
    r"""The learning rate of Vaswani et al. at training step ``step`` (counted from 1).

    .. math:: \mathrm{lrate}(t) = d_{\text{model}}^{-1/2}\,
              \min\big(t^{-1/2},\ t \cdot \mathrm{warmup}^{-3/2}\big)

    The rate grows linearly for the first ``warmup`` steps, peaks at
    :math:`(d_{\text{model}} \cdot \mathrm{warmup})^{-1/2}` and then decays like
    :math:`t^{-1/2}`. The paper uses ``warmup = 4000`` with Adam
    (``beta2 = 0.98``).

    Parameters
    ----------
    step : int
        Training step ``t >= 1``.
    d_model : int
    warmup : int, default 4000

    Returns
    -------
    float

    Shapes
    ------
    scalars only
    """
    _check_warmup(step, d_model, warmup)
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def warmup_lambda(d_model: int, warmup: int = 4000) -> Callable[[int], float]:
    """The factor for ``torch.optim.lr_scheduler.LambdaLR`` that gives :func:`warmup_rate`.

    ``LambdaLR`` multiplies the optimiser's learning rate by ``f(k)`` after
    ``k`` calls of ``scheduler.step()``, starting at ``k = 0``; the returned
    ``f(k)`` is ``warmup_rate(k + 1, d_model, warmup)``, so an optimiser
    created with ``lr=1`` follows the paper's schedule from step 1.

    Parameters
    ----------
    d_model : int
    warmup : int, default 4000

    Returns
    -------
    callable
        ``f(k) -> float`` for ``k = 0, 1, 2, ...``

    Shapes
    ------
    scalars only
    """
    _check_warmup(1, d_model, warmup)
    return lambda k: warmup_rate(k + 1, d_model, warmup)
