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

The tests compare with ``torch.nn.functional`` (``cross_entropy``, ``nll_loss``,
``binary_cross_entropy``, ...), with the formulas written out, and with autograd.

References
----------
.. [1] C. Cortes, V. Vapnik. "Support-Vector Networks". Machine Learning 20(3), 1995.
.. [2] V. Vapnik. "The Nature of Statistical Learning Theory". Springer, 1995.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import Tensor

from lib.validation import (
    INTEGER_DTYPES, require_choice, require_float_tensor, require_float_tensors, require_int, require_same_dtype,
    require_same_shape,
)

__all__ = [
    "squared_loss", "svm_objective", "MARGIN_LOSSES", "margin_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "distribution_cross_entropy",
    "log_softmax", "nll_loss", "cross_entropy",
    "empirical_risk", "structural_risk", "polynomial_features", "ridge_fit",
]

REDUCTIONS = ("mean", "sum", "none")


def _reduce(losses: Tensor, reduction: str, source: str) -> Tensor:
    require_choice("reduction", reduction, REDUCTIONS)
    if reduction == "mean" and losses.numel() == 0:
        raise ValueError(f"reduction='mean' needs at least one loss; found an empty batch in {source} "
                         "(the mean of nothing is undefined; reduction='sum' gives 0)")
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses


# ---------------------------------------------------------------------------
# Label forms: one target y and one prediction f per entry, element-wise.
# ---------------------------------------------------------------------------


def squared_loss(y: Tensor, f: Tensor) -> Tensor:
    """``(y - f)²``.

    Shapes
    ------
    ``(...), (...) -> (...)``
    """
    require_float_tensors(y=y, f=f), require_same_shape("y", y, f=f)
    return (y - f) ** 2


def svm_objective(weight: Tensor, bias: Tensor, inputs: Tensor, y: Tensor, c: float) -> Tensor:
    """The soft-margin SVM objective ``½‖w‖² + C Σ_i max(0, 1 - y_i (w·x_i + b))``.

    It is a structural risk: the sum of hinge losses plus an L2 penalty (dividing
    by ``C N`` gives the mean hinge loss plus ``‖w‖² / (2 C N)``).

    Parameters
    ----------
    weight : Tensor
        ``w``, shape ``(D,)``.
    bias : Tensor
        ``b``, a scalar tensor.
    inputs : Tensor
        ``x_i`` as rows, shape ``(N, D)``.
    y : Tensor
        Labels in {-1, +1}, shape ``(N,)``.
    c : float
        ``C > 0``, the price of a margin violation.

    Shapes
    ------
    ``(D,), (), (N, D), (N,) -> ()``
    """
    require_float_tensors(weight=weight, bias=bias, inputs=inputs, y=y)
    if inputs.dim() != 2 or weight.shape != (inputs.shape[1],) or y.shape != (inputs.shape[0],):
        raise ValueError(
            "expected weight (D,), inputs (N, D) and y (N,); found "
            f"{tuple(weight.shape)}, {tuple(inputs.shape)} and {tuple(y.shape)}"
        )
    if not c > 0:
        raise ValueError(f"c must be positive; found {c!r}")
    scores = inputs @ weight + bias  # (N,)
    return 0.5 * weight @ weight + c * MARGIN_LOSSES["hinge"](y * scores).sum()


# ---------------------------------------------------------------------------
# Margin forms. With y ∈ {-1, +1}, (y - f)² = (1 - y f)² and |y - f| = |1 - y f|,
# so every loss above is a function of the margin m = y f alone.
# ---------------------------------------------------------------------------


def _zero_one_margin(m: Tensor) -> Tensor:
    return (m <= 0).to(m.dtype)  # m = 0 (on the boundary) counts as an error


def _log_margin(m: Tensor) -> Tensor:
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


def margin_loss(name: str, margin: Tensor) -> Tensor:
    """A margin loss of :data:`MARGIN_LOSSES` at margins ``m = y f(x)``.

    Parameters
    ----------
    name : {"0-1", "hinge", "log", "exponential", "squared", "absolute"}
    margin : Tensor
        Any shape.

    Shapes
    ------
    ``(...) -> (...)``
    """
    if name not in MARGIN_LOSSES:
        raise ValueError(f"name must be one of {tuple(MARGIN_LOSSES)}; found {name!r}")
    require_float_tensor("margin", margin)
    return MARGIN_LOSSES[name](margin)


# ---------------------------------------------------------------------------
# Cross-entropy.
# ---------------------------------------------------------------------------


def binary_cross_entropy(q: Tensor, p: Tensor, reduction: str = "mean") -> Tensor:
    """``-(p log q + (1 - p) log(1 - q))``: two classes, probabilities ``q`` and ``1 - q``.

    Parameters
    ----------
    q : Tensor
        Predicted probability of class 1, in [0, 1].
    p : Tensor
        Target probability of class 1 (a label 0/1 or a soft target), same shape.
    reduction : {"mean", "sum", "none"}

    Shapes
    ------
    ``(...), (...) -> ()`` or ``(...)`` with ``reduction="none"``
    """
    require_float_tensors(q=q, p=p), require_same_shape("q", q, p=p)
    if ((q < 0) | (q > 1)).any():
        raise ValueError("q must lie in [0, 1]; found values outside it "
                         "(pass logits to binary_cross_entropy_with_logits)")
    # 0 log 0 = 0: xlogy gives 0 where the target weight is 0, even if log q = -inf.
    losses = -(torch.xlogy(p, q) + torch.xlogy(1.0 - p, 1.0 - q))
    return _reduce(losses, reduction, "q")


def binary_cross_entropy_with_logits(logits: Tensor, p: Tensor, reduction: str = "mean") -> Tensor:
    """:func:`binary_cross_entropy` of ``q = σ(z)``, computed from the logit ``z``.

    ``-(p log σ(z) + (1 - p) log σ(-z)) = max(z, 0) - p z + log(1 + e^{-|z|})``,
    which never overflows.

    Shapes
    ------
    ``(...), (...) -> ()`` or ``(...)`` with ``reduction="none"``
    """
    require_float_tensors(logits=logits, p=p), require_same_shape("logits", logits, p=p)
    losses = logits.clamp_min(0.0) - p * logits + torch.log1p(torch.exp(-logits.abs()))
    return _reduce(losses, reduction, "logits")


def distribution_cross_entropy(p: Tensor, q: Tensor) -> Tensor:
    """``H(p, q) = -Σ_c p_c log q_c`` over the last axis: the multi-class form.

    Parameters
    ----------
    p : Tensor
        Target distributions, shape ``(..., C)``, rows summing to 1.
    q : Tensor
        Predicted distributions, same shape.

    Shapes
    ------
    ``(..., C), (..., C) -> (...)``
    """
    require_float_tensors(p=p, q=q), require_same_shape("p", p, q=q)
    return -torch.xlogy(p, q).sum(-1)


def _check_axis(logits: Tensor, dim: int) -> None:
    require_float_tensor("logits", logits), require_int("dim", dim, -max(logits.dim(), 1))
    if logits.dim() == 0 or dim >= logits.dim() or logits.shape[dim] == 0:
        raise ValueError(f"dim must pick a non-empty axis of logits {tuple(logits.shape)}; found dim = {dim}")


def log_softmax(logits: Tensor, dim: int = -1) -> Tensor:
    """``log softmax(z)_c = z_c - log Σ_k exp z_k``, computed without overflow.

    Shapes
    ------
    ``(..., C, ...) -> (..., C, ...)``
    """
    _check_axis(logits, dim)
    # Shifting by the maximum changes nothing mathematically and keeps exp <= 1.
    shifted = logits - logits.amax(dim=dim, keepdim=True).detach()
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def _check_class_targets(targets: Tensor, batch: int, classes: int) -> None:
    if not isinstance(targets, Tensor) or targets.dtype not in INTEGER_DTYPES:
        found = targets.dtype if isinstance(targets, Tensor) else type(targets).__name__
        raise TypeError(f"targets must be a tensor of integer class indices; found {found}")
    if targets.shape != (batch,):
        raise ValueError(f"targets must have shape (B,) = ({batch},); found {tuple(targets.shape)}")
    if batch and (targets.min() < 0 or targets.max() >= classes):
        raise ValueError(f"targets must lie in [0, {classes - 1}]; found {targets.min()}..{targets.max()}")


def nll_loss(log_probs: Tensor, targets: Tensor, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood ``-log q_{y_i}``, picked from log-probabilities.

    Parameters
    ----------
    log_probs : Tensor
        Shape ``(B, C)``: log-probabilities of the ``C`` classes.
    targets : Tensor
        Shape ``(B,)``: integer class indices.
    reduction : {"mean", "sum", "none"}

    Shapes
    ------
    ``(B, C), (B,) -> ()`` or ``(B,)`` with ``reduction="none"``
    """
    require_float_tensor("log_probs", log_probs)
    if log_probs.dim() != 2:
        raise ValueError(f"log_probs must have shape (B, C); found {tuple(log_probs.shape)}")
    _check_class_targets(targets, *log_probs.shape)
    picked = log_probs.gather(1, targets.long()[:, None])[:, 0]  # (B,)
    return _reduce(-picked, reduction, "log_probs")


def _check_cross_entropy(logits: Tensor, targets: Tensor) -> None:
    """Logits ``(B, C)``; float targets are distributions of the same shape (class indices
    are checked by :func:`nll_loss`)."""
    require_float_tensor("logits", logits)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, C); found {tuple(logits.shape)}")
    if not isinstance(targets, Tensor):
        raise TypeError(f"targets must be a torch.Tensor; found {type(targets).__name__}")
    if targets.is_floating_point():
        require_same_shape("logits", logits, **{"targets (as distributions)": targets})


def cross_entropy(logits: Tensor, targets: Tensor, reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy from logits: :func:`log_softmax`, then the loss.

    With class indices, ``nll_loss(log_softmax(z), y)``; with target
    distributions ``p``, ``-Σ_c p_c log softmax(z)_c``. This is what
    ``torch.nn.CrossEntropyLoss`` computes (without its class weights, label
    smoothing and ignored index).

    Parameters
    ----------
    logits : Tensor
        Shape ``(B, C)``.
    targets : Tensor
        Integer class indices of shape ``(B,)``, or float distributions ``(B, C)``.
    reduction : {"mean", "sum", "none"}

    Shapes
    ------
    ``(B, C), (B,) or (B, C) -> ()`` or ``(B,)`` with ``reduction="none"``
    """
    _check_cross_entropy(logits, targets)
    log_q = log_softmax(logits, dim=-1)  # (B, C)
    if targets.is_floating_point():
        return _reduce(-(targets * log_q).sum(-1), reduction, "logits")
    return nll_loss(log_q, targets, reduction)


# ---------------------------------------------------------------------------
# Risks.
# ---------------------------------------------------------------------------


def empirical_risk(losses: Tensor) -> Tensor:
    """The average loss over the training examples, ``(1/N) Σ_i L(y_i, f(x_i))``.

    Shapes
    ------
    ``(N,) -> ()``
    """
    require_float_tensor("losses", losses)
    if losses.dim() != 1 or losses.numel() == 0:
        raise ValueError(f"losses must have shape (N,) with N >= 1; found {tuple(losses.shape)}")
    return losses.mean()


def structural_risk(losses: Tensor, parameters: Iterable[Tensor], penalty: float) -> Tensor:
    """Empirical risk plus an L2 penalty, ``(1/N) Σ_i L_i + λ Σ_j ‖w_j‖²``.

    Parameters
    ----------
    losses : Tensor
        Shape ``(N,)``: one loss per training example.
    parameters : iterable of Tensor
        The penalised parameters.
    penalty : float
        ``λ >= 0``.

    Shapes
    ------
    ``(N,) -> ()``
    """
    if not penalty >= 0:
        raise ValueError(f"penalty must be >= 0; found {penalty!r}")
    return empirical_risk(losses) + penalty * sum((w**2).sum() for w in parameters)


def polynomial_features(x: Tensor, degree: int) -> Tensor:
    """The columns ``1, x, x², ..., x^degree``.

    Shapes
    ------
    ``(N,) -> (N, degree + 1)``
    """
    require_float_tensor("x", x)
    if x.dim() != 1:
        raise ValueError(f"x must have shape (N,); found {tuple(x.shape)}")
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
        raise ValueError(f"degree must be an int >= 0; found {degree!r}")
    return x[:, None] ** torch.arange(degree + 1, dtype=x.dtype)  # (N, degree + 1)


def _check_ridge(features: Tensor, targets: Tensor, penalty: float) -> None:
    require_float_tensors(features=features, targets=targets), require_same_dtype("features", features, targets=targets)
    if features.dim() != 2 or targets.shape != (features.shape[0],):
        raise ValueError(
            f"expected features (N, D) and targets (N,); found {tuple(features.shape)} and {tuple(targets.shape)}"
        )
    if not penalty >= 0:
        raise ValueError(f"penalty must be >= 0; found {penalty!r}")


def ridge_fit(features: Tensor, targets: Tensor, penalty: float) -> Tensor:
    """The weights minimising ``(1/N) ‖X w - y‖² + λ ‖w‖²`` (structural risk, squared loss).

    Setting the gradient ``(2/N) Xᵀ(X w - y) + 2 λ w`` to zero gives the normal
    equations ``(XᵀX / N + λ I) w = Xᵀ y / N``; ``λ = 0`` is least squares
    (empirical risk minimisation), solved by least squares for stability.

    Shapes
    ------
    ``(N, D), (N,) -> (D,)``
    """
    _check_ridge(features, targets, penalty)
    n, d = features.shape
    if penalty == 0:
        return torch.linalg.lstsq(features, targets[:, None]).solution[:, 0]  # (D,)
    gram = features.T @ features / n + penalty * torch.eye(d, dtype=features.dtype)  # (D, D)
    return torch.linalg.solve(gram, features.T @ targets / n)  # (D,)
