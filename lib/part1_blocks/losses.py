"""Loss functions, and the risks built from them.

A *loss* scores one prediction against one target; a *risk* averages losses over a
data set, and a *structural* risk adds a penalty on the parameters (syllabus
LOSS1-LOSS2). This module has

* the 0-1, hinge, log, exponential, squared and absolute losses as functions of the
  *margin* ``m = y f(x)`` for labels ``y ∈ {-1, +1}`` (:data:`MARGIN_LOSSES`,
  :func:`margin_loss`), the form in which they are compared; the squared loss
  ``(y - f)²`` of regression (:func:`squared_loss`); and the soft-margin SVM
  objective (Cortes & Vapnik, 1995), hinge losses plus a penalty;
* cross-entropy: :func:`binary_cross_entropy` (the two-class form the lecture
  notes call "standard"), :func:`distribution_cross_entropy` (``-Σ p log q``, the
  multi-class form), and :func:`cross_entropy` on logits, which equals
  :func:`log_softmax` followed by :func:`nll_loss`, as in PyTorch;
* :func:`empirical_risk`, :func:`structural_risk` and :func:`ridge_fit`, the
  minimiser of the structural risk of the squared loss.

Shapes named alike in a signature must agree (``y`` and ``f`` of :func:`squared_loss`),
and ``reduction`` is one of ``"mean"``, ``"sum"``, ``"none"``. The tests compare with
``torch.nn.functional`` (``cross_entropy``, ``nll_loss``,
``binary_cross_entropy``, ...), with the formulas written out, and with autograd.

References
----------
.. [1] C. Cortes, V. Vapnik. "Support-Vector Networks". Machine Learning 20(3), 1995.
.. [2] V. Vapnik. "The Nature of Statistical Learning Theory". Springer, 1995.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, Union

import torch
from jaxtyping import Float, Int
from torch import Tensor

from lib.checked import (
    Axis,
    Float32Or64,
    NonNegative,
    NonNegativeInt,
    Positive,
    Reduction,
    same_dtype,
)

__all__ = [
    "squared_loss",
    "svm_objective",
    "MARGIN_LOSSES",
    "margin_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "distribution_cross_entropy",
    "log_softmax",
    "nll_loss",
    "cross_entropy",
    "empirical_risk",
    "structural_risk",
    "polynomial_features",
    "ridge_fit",
]

Losses = Float[
    Tensor, "..."
]  # one loss per entry (reduction="none"), or their mean or sum


def _require_probabilities(name: str, values: Tensor, hint: str = "") -> None:
    outside = ~((values >= 0) & (values <= 1))  # NaN too
    if outside.any():
        found = values[outside][0].item()
        raise ValueError(f"{name} must lie in [0, 1]; found {found:.6g}{hint}")


def _reduce(losses: Float[Tensor, "..."], reduction: Reduction) -> Float[Tensor, "..."]:
    if reduction == "mean" and losses.numel() == 0:
        raise ValueError(
            "reduction='mean' needs at least one loss; found an empty batch "
            "(the mean of nothing is undefined; reduction='sum' gives 0)"
        )
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses


# ---------------------------------------------------------------------------
# Label forms: one target y and one prediction f per entry, element-wise.
# ---------------------------------------------------------------------------


def squared_loss(
    y: Float[Tensor, "*shape"], f: Float[Tensor, "*shape"]
) -> Float[Tensor, "*shape"]:
    """(y - f)², entry by entry."""
    same_dtype(y=y, f=f)
    return (y - f) ** 2


def svm_objective(
    weight: Float[Tensor, "D"],
    bias: Float[Tensor, ""],
    inputs: Float[Tensor, "N D"],
    y: Float[Tensor, "N"],
    c: Positive,
) -> Float[Tensor, ""]:
    """The soft-margin SVM objective ½‖w‖² + C Σ_i max(0, 1 - y_i (w·x_i + b)).

    It is a structural risk: hinge losses (labels y_i in {-1, +1}) plus an L2 penalty;
    dividing by C N gives the mean hinge loss plus ‖w‖² / (2 C N).
    """
    same_dtype(weight=weight, bias=bias, inputs=inputs, y=y)
    scores = inputs @ weight + bias  # (N,)
    return 0.5 * weight @ weight + c * MARGIN_LOSSES["hinge"](y * scores).sum()


# ---------------------------------------------------------------------------
# Margin forms. With y ∈ {-1, +1}, (y - f)² = (1 - y f)² and |y - f| = |1 - y f|,
# so every loss above is a function of the margin m = y f alone.
# ---------------------------------------------------------------------------


def _zero_one_margin(m: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    return (m <= 0).to(m.dtype)  # m = 0 (on the boundary) counts as an error


def _log_margin(m: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    # log(1 + e^{-m}) = max(-m, 0) + log(1 + e^{-|m|}): no overflow for large |m|.
    return (-m).clamp_min(0.0) + torch.log1p(torch.exp(-m.abs()))


MARGIN_LOSSES: dict[str, Callable[[Tensor], Tensor]] = {
    "0-1": _zero_one_margin,
    "hinge": lambda m: (1.0 - m).clamp_min(0.0),
    "log": _log_margin,  # the logistic loss, -log σ(m)
    "exponential": lambda m: torch.exp(-m),
    "squared": lambda m: (1.0 - m) ** 2,
    "absolute": lambda m: (1.0 - m).abs(),
}
MarginLoss = Literal["0-1", "hinge", "log", "exponential", "squared", "absolute"]


def margin_loss(
    name: MarginLoss, margin: Float[Tensor, "*shape"]
) -> Float[Tensor, "*shape"]:
    """The margin loss ``name`` of :data:`MARGIN_LOSSES` at margins m = y f(x)."""
    return MARGIN_LOSSES[name](margin)


# ---------------------------------------------------------------------------
# Cross-entropy.
# ---------------------------------------------------------------------------


def binary_cross_entropy(
    q: Float[Tensor, "*shape"],
    p: Float[Tensor, "*shape"],
    reduction: Reduction = "mean",
) -> Float[Tensor, "..."]:
    """-(p log q + (1 - p) log(1 - q)): two classes, with probabilities q and 1 - q.

    q is the predicted probability of class 1, in [0, 1]; p the target's (a label 0 or
    1, or a soft target).
    """
    same_dtype(q=q, p=p)
    _require_probabilities("q", q, " (pass logits to binary_cross_entropy_with_logits)")
    _require_probabilities("p", p)
    # 0 log 0 = 0: xlogy gives 0 where the target weight is 0, even if log q = -inf.
    losses = -(torch.xlogy(p, q) + torch.xlogy(1.0 - p, 1.0 - q))
    return _reduce(losses, reduction)


def binary_cross_entropy_with_logits(
    logits: Float[Tensor, "*shape"],
    p: Float[Tensor, "*shape"],
    reduction: Reduction = "mean",
) -> Float[Tensor, "..."]:
    """:func:`binary_cross_entropy` of q = σ(z), computed from the logit z as
    max(z, 0) - p z + log(1 + e^{-|z|}), which never overflows."""
    same_dtype(logits=logits, p=p)
    _require_probabilities("p", p)
    losses = logits.clamp_min(0.0) - p * logits + torch.log1p(torch.exp(-logits.abs()))
    return _reduce(losses, reduction)


def distribution_cross_entropy(
    p: Float[Tensor, "*batch C"], q: Float[Tensor, "*batch C"]
) -> Float[Tensor, "*batch"]:
    """H(p, q) = -Σ_c p_c log q_c over the last axis: the multi-class form."""
    same_dtype(p=p, q=q)
    _require_probabilities("p", p)
    return -torch.xlogy(p, q).sum(-1)


def log_softmax(logits: Float[Tensor, "..."], dim: Axis = -1) -> Float[Tensor, "..."]:
    """log softmax(z)_c = z_c - log Σ_k exp z_k along ``dim``, without overflow."""
    if not -logits.dim() <= dim < logits.dim() or logits.shape[dim] == 0:
        raise ValueError(
            f"dim must pick a non-empty axis of logits {tuple(logits.shape)}; "
            f"found dim = {dim}"
        )
    # Shifting by the maximum changes nothing mathematically and keeps exp <= 1.
    shifted = logits - logits.amax(dim=dim, keepdim=True).detach()
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def nll_loss(
    log_probs: Float[Tensor, "B C"],
    targets: Int[Tensor, "B"],
    reduction: Reduction = "mean",
) -> Float[Tensor, "..."]:
    """Negative log-likelihood -log q_{y_i}, picked from the log-probabilities."""
    classes = log_probs.shape[1]
    if targets.numel() and (targets.min() < 0 or targets.max() >= classes):
        raise ValueError(
            f"targets must be class indices in [0, C), C = {classes} (the columns of "
            f"log_probs); found {targets.min()}..{targets.max()}"
        )
    picked = log_probs.gather(1, targets.long()[:, None])[:, 0]  # (B,)
    return _reduce(-picked, reduction)


def cross_entropy(
    logits: Float[Tensor, "B C"],
    targets: Union[Int[Tensor, "B"], Float[Tensor, "B C"]],
    reduction: Reduction = "mean",
) -> Float[Tensor, "..."]:
    """Softmax cross-entropy from logits, against class indices or target distributions.

    With class indices y, nll_loss(log_softmax(z), y); with distributions p,
    -Σ_c p_c log softmax(z)_c. This is torch.nn.CrossEntropyLoss without its class
    weights, label smoothing and ignored index.
    """
    log_q = log_softmax(logits, dim=-1)  # (B, C)
    if targets.is_floating_point():
        same_dtype(logits=logits, targets=targets)
        _require_probabilities("targets", targets)
        return _reduce(-(targets * log_q).sum(-1), reduction)
    return nll_loss(log_q, targets, reduction)


# ---------------------------------------------------------------------------
# Risks.
# ---------------------------------------------------------------------------


def empirical_risk(losses: Float[Tensor, "N"]) -> Float[Tensor, ""]:
    """The average loss over the N >= 1 training examples, (1/N) Σ_i L(y_i, f(x_i))."""
    if losses.numel() == 0:
        raise ValueError("losses must hold at least one loss; found none")
    return losses.mean()


def structural_risk(
    losses: Float[Tensor, "N"], parameters: Iterable[Tensor], penalty: NonNegative
) -> Float[Tensor, ""]:
    """Empirical risk plus an L2 penalty: (1/N) Σ_i L_i + λ Σ_j ‖w_j‖², λ = penalty."""
    return empirical_risk(losses) + penalty * sum((w**2).sum() for w in parameters)


def polynomial_features(
    x: Float[Tensor, "N"], degree: NonNegativeInt
) -> Float[Tensor, "N _"]:
    """The columns 1, x, x², ..., x^degree."""
    return x[:, None] ** torch.arange(degree + 1, dtype=x.dtype)  # (N, degree + 1)


def ridge_fit(
    features: Float32Or64[Tensor, "N D"],
    targets: Float32Or64[Tensor, "N"],
    penalty: NonNegative,
) -> Float32Or64[Tensor, "D"]:
    """The weights minimising (1/N) ‖X w - y‖² + λ ‖w‖² (structural risk, squared loss).

    Setting the gradient (2/N) Xᵀ(X w - y) + 2 λ w to zero gives the normal equations
    (XᵀX / N + λ I) w = Xᵀ y / N; λ = 0 is least squares (empirical risk minimisation),
    solved by least squares for stability.
    """
    same_dtype(features=features, targets=targets)
    n, d = features.shape
    if n == 0:
        raise ValueError("features must have at least one row (N >= 1); found none")
    if penalty == 0:
        return torch.linalg.lstsq(features, targets[:, None]).solution[:, 0]  # (D,)
    identity = torch.eye(d, dtype=features.dtype)  # (D, D)
    gram = features.T @ features / n + penalty * identity  # (D, D)
    return torch.linalg.solve(gram, features.T @ targets / n)  # (D,)
