"""Gradient-descent optimisers written from their update equations.

Each class is a drop-in replacement for its namesake in ``torch.optim``: the
same constructor arguments and defaults, parameter groups, ``step(closure=None)``
and ``zero_grad()`` (both inherited semantics of :class:`torch.optim.Optimizer`),
so a training loop, a learning-rate scheduler or ``state_dict()`` work with
either. The tests run each one beside PyTorch's for 50 steps on the same
parameters and gradients, in float64, for several settings (syllabus OPT1-OPT3).
As in ``torch.optim``, ``lr`` and ``betas`` may be one-element tensors (they are read
once, as numbers, when the optimiser is built), and ``foreach=`` is accepted and
ignored: the update is always the readable loop over parameters, which computes
what torch's multi-tensor path computes. Hyper-parameters must be finite.

Where the lecture notes' textbook form differs from PyTorch's, the classes follow
PyTorch and say so:

* :class:`SGD` momentum is ``b ← μ b + (1 - dampening) g`` with ``b_1 = g_1``, not
  the notes' average ``m ← β m + (1 - β) g``; the two differ by the factor
  ``1 - β``, which is absorbed by the learning rate.
* Nesterov momentum in :class:`SGD` is Sutskever et al.'s look-ahead method
  rewritten so that it needs the gradient at the current parameters only;
  :func:`lookahead_momentum` is the look-ahead form of the notes.
* :class:`Adadelta` multiplies Zeiler's update by ``lr`` (default 1, which is
  Zeiler's method).
* :class:`NAdam` warms its momentum up with Dozat's schedule
  ``μ_t = β₁ (1 - ½ 0.96^{t ψ})``, ``ψ = momentum_decay = 0.004``;
  ``momentum_schedule="constant"`` gives the constant ``μ_t = β₁`` of the textbook form.

:class:`MomentOptimizer` is the notes' general template: a first moment
``m_t = φ(g_1..g_t)``, a second moment ``V_t = ψ(g_1..g_t)`` and the step
``w ← w - lr m_t / (√V_t + ε)``; :func:`template` gives the (φ, ψ) of SGD,
momentum, AdaGrad, RMSProp, Adam and NAdam.

The second half of the module holds the chapter's test problems: two 2-D
surfaces (:data:`SURFACES`), :func:`trajectory` on them, an online problem on
which Adam fails (:func:`reddi_problem`), a generated classification set
(:func:`spirals`) and a small training loop (:func:`fit`).

References
----------
.. [1] B. T. Polyak. "Some methods of speeding up the convergence of iteration
   methods". USSR Computational Mathematics and Mathematical Physics 4(5), 1964.
.. [2] I. Sutskever, J. Martens, G. Dahl, G. Hinton. "On the importance of
   initialization and momentum in deep learning". ICML 2013.
.. [3] J. Duchi, E. Hazan, Y. Singer. "Adaptive Subgradient Methods for Online
   Learning and Stochastic Optimization". JMLR 12, 2011.
.. [4] T. Tieleman, G. Hinton. "Lecture 6.5 - RMSProp". COURSERA: Neural Networks
   for Machine Learning, 2012. A. Graves. "Generating Sequences With Recurrent
   Neural Networks". arXiv:1308.0850, 2013 (the centred variant).
.. [5] M. D. Zeiler. "ADADELTA: An Adaptive Learning Rate Method".
   arXiv:1212.5701, 2012.
.. [6] D. P. Kingma, J. Ba. "Adam: A Method for Stochastic Optimization". ICLR 2015.
.. [7] S. J. Reddi, S. Kale, S. Kumar. "On the Convergence of Adam and Beyond".
   ICLR 2018 (AMSGrad).
.. [8] T. Dozat. "Incorporating Nesterov Momentum into Adam". ICLR Workshop 2016.
.. [9] I. Loshchilov, F. Hutter. "Decoupled Weight Decay Regularization". ICLR 2019.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Optional, Union, get_args, no_type_check

import torch
from beartype.door import is_bearable
from jaxtyping import Float, Int, Shaped
from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from lib.checked import (
    DecayRate,
    Finite,
    Fraction,
    NonNegative,
    NonNegativeInt,
    PositiveInt,
    each,
    or_scalar_tensor,
)

__all__ = [
    "SGD",
    "Adagrad",
    "RMSprop",
    "Adadelta",
    "Adam",
    "AdamW",
    "NAdam",
    "OPTIMIZERS",
    "NADAM_SCHEDULES",
    "nadam_momentum",
    "Moment",
    "MomentOptimizer",
    "template",
    "TEMPLATE_NAMES",
    "lookahead_momentum",
    "Surface",
    "SURFACES",
    "trajectory",
    "reddi_problem",
    "spirals",
    "fit",
]

Params = Iterable[Union[Tensor, dict]]  # tensors, or parameter groups (dicts)
Hyper = or_scalar_tensor(NonNegative)  # lr, eps, ...: a finite number >= 0
Beta = or_scalar_tensor(DecayRate)  # the decay of an average, in [0, 1)
NadamSchedule = Literal["warmup", "constant"]
NADAM_SCHEDULES = get_args(NadamSchedule)
Feature = Literal["g", "g²", "1"]
TemplateName = Literal["SGD", "momentum", "AdaGrad", "RMSProp", "Adam", "NAdam"]
TEMPLATE_NAMES = get_args(TemplateName)
# What trajectory asks of the hyper-parameters it passes on (torch.optim checks few):
# the rules of this module's optimisers, by name.
_NUMBER = (Hyper, "a finite number >= 0")
HYPER_RULES = {
    "lr": _NUMBER,
    "momentum": _NUMBER,
    "dampening": _NUMBER,
    "weight_decay": _NUMBER,
    "lr_decay": _NUMBER,
    "initial_accumulator_value": _NUMBER,
    "eps": _NUMBER,
    "momentum_decay": _NUMBER,
    "alpha": (Beta, "a number in [0, 1)"),
    "rho": (or_scalar_tensor(Fraction), "a number in [0, 1]"),
    "betas": (each(Beta), "numbers in [0, 1)"),
}
MAX_CLASSES = 1000  # spirals: more arms than this would not be a picture


def _floats(**values: Union[float, Tensor]) -> dict[str, float]:
    """The hyper-parameters as floats; a one-element tensor is read as its value."""
    return {name: float(value) for name, value in values.items()}


# ---------------------------------------------------------------------------
# The shared loop: closure, parameter groups, state, then one update per parameter.
# ---------------------------------------------------------------------------


class _Optimizer(Optimizer):
    """``step`` as ``torch.optim`` does it; subclasses write the update of one tensor.

    A subclass implements ``_update(param, grad, state, group)``, where ``grad``
    already includes ``maximize`` (the negated gradient) and ``state["step"]`` is
    the number of this step, 1 on the first.
    """

    def __init__(self, params: Params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(
                "params must be an iterable of tensors or of parameter groups "
                f"(e.g. model.parameters()); found {type(params).__name__}"
            )
        params = list(params)  # as torch.optim reads them, a generator once
        if not params:  # torch: "optimizer got an empty parameter list"
            raise ValueError(
                "params must hold a tensor or a parameter group; found none"
            )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Tensor]] = None) -> Optional[Tensor]:
        """Update every parameter that has a gradient; return ``closure()`` if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue  # as in torch.optim: parameters without gradients stay put
                # _update is not checked at the call (it runs once per parameter per
                # step); torch keeps grad to param's shape and dtype, and this keeps
                # both dense and real.
                if param.grad.is_sparse or not param.is_floating_point():
                    kind = "sparse" if param.grad.is_sparse else str(param.dtype)
                    raise TypeError(
                        f"{type(self).__name__} supports dense real tensors; "
                        f"found a {kind} one"
                    )
                grad = -param.grad if group["maximize"] else param.grad
                state = self.state[param]
                state["step"] = state.get("step", 0) + 1
                self._update(param, grad, state, group)
        return loss

    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        raise NotImplementedError


@no_type_check  # in each _update: step() checked every parameter and gradient
def _l2(
    grad: Float[Tensor, "*shape"], param: Float[Tensor, "*shape"], weight_decay: float
) -> Float[Tensor, "*shape"]:
    """``g + λ w``: the gradient of the loss plus ``(λ/2) ‖w‖²`` (coupled decay)."""
    return grad.add(param, alpha=weight_decay) if weight_decay != 0 else grad


@no_type_check  # hot: Adam's and NAdam's _update, checked by step(), call it
def _decayed(grad: Tensor, param: Tensor, group: dict) -> Tensor:
    """Weight decay as the group asks for it: decoupled (AdamW) shrinks ``w`` itself,
    outside the adaptive step, and leaves the gradient; coupled adds ``λ w`` to it."""
    if group["decoupled_weight_decay"]:
        param.mul_(1 - group["lr"] * group["weight_decay"])
        return grad
    return _l2(grad, param, group["weight_decay"])


@no_type_check  # hot: as _decayed
def _moments(
    grad: Tensor, param: Tensor, state: dict, group: dict
) -> tuple[Tensor, Tensor]:
    """Adam's running averages, updated in place: ``m`` of ``g`` and ``v`` of ``g²``
    (both start at 0)."""
    beta1, beta2 = group["betas"]
    if "exp_avg" not in state:
        state["exp_avg"] = torch.zeros_like(param)
        state["exp_avg_sq"] = torch.zeros_like(param)
    m = state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
    v = state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    return m, v


class SGD(_Optimizer):
    """Stochastic gradient descent with optional momentum, dampening and Nesterov.

    With ``g_t`` the gradient (plus ``λ w`` if ``weight_decay = λ``)::

        b_1 = g_1,   b_t = μ b_{t-1} + (1 - dampening) g_t        (momentum buffer)
        d_t = g_t + μ b_t   if nesterov   else   b_t               (d_t = g_t if μ = 0)
        w_t = w_{t-1} - lr d_t

    As ``torch.optim.SGD``. The notes' momentum ``m_t = β m_{t-1} + (1 - β) g_t`` is
    ``b_t`` times ``1 - β`` (with ``dampening = 0``): use ``lr = α (1 - β)``.
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1e-3,
        momentum: Hyper = 0.0,
        dampening: Hyper = 0.0,
        weight_decay: Hyper = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
    ):
        hyper = _floats(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay
        )
        if nesterov and (hyper["momentum"] <= 0 or hyper["dampening"] != 0):
            raise ValueError(
                "nesterov needs momentum > 0 and dampening = 0; "
                f"found momentum={momentum}, dampening={dampening}"
            )
        super().__init__(params, dict(hyper, nesterov=nesterov, maximize=maximize))

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        grad = _l2(grad, param, group["weight_decay"])
        mu = group["momentum"]
        if mu != 0:
            if "momentum_buffer" not in state:
                # b_1 = g_1: no dampening on step 1
                state["momentum_buffer"] = grad.clone()
            else:
                dampening = group["dampening"]
                state["momentum_buffer"].mul_(mu).add_(grad, alpha=1 - dampening)
            buffer = state["momentum_buffer"]
            grad = grad.add(buffer, alpha=mu) if group["nesterov"] else buffer
        param.add_(grad, alpha=-group["lr"])


class Adagrad(_Optimizer):
    """AdaGrad: divide by the root of the sum of all squared gradients so far.

    ::

        s_t = s_{t-1} + g_t²        (s_0 = initial_accumulator_value)
        w_t = w_{t-1} - lr_t g_t / (√s_t + ε),   lr_t = lr / (1 + (t - 1) lr_decay)

    As ``torch.optim.Adagrad`` (Duchi et al., 2011).
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1e-2,
        lr_decay: Hyper = 0.0,
        weight_decay: Hyper = 0.0,
        initial_accumulator_value: Hyper = 0.0,
        eps: Hyper = 1e-10,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
    ):
        hyper = _floats(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        super().__init__(params, dict(hyper, maximize=maximize))

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        grad = _l2(grad, param, group["weight_decay"])
        if "sum" not in state:
            state["sum"] = torch.full_like(param, group["initial_accumulator_value"])
        state["sum"].add_(grad * grad)  # s_t: only ever grows
        lr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        param.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-lr)


class RMSprop(_Optimizer):
    """RMSProp: divide by the root of an exponential average of squared gradients.

    ::

        v_t = α v_{t-1} + (1 - α) g_t²                 (α = alpha, the notes' β₂)
        c_t = α c_{t-1} + (1 - α) g_t,  v_t ← v_t - c_t²   if centered
        d_t = g_t / (√v_t + ε)
        b_t = μ b_{t-1} + d_t,  d_t ← b_t              if momentum μ > 0
        w_t = w_{t-1} - lr d_t

    As ``torch.optim.RMSprop`` (Tieleman & Hinton, 2012; centred: Graves, 2013).
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1e-2,
        alpha: Beta = 0.99,  # [0, 1): at 1 the square average stays 0 (divide by eps)
        eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0,
        momentum: Hyper = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
    ):
        hyper = _floats(
            lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum
        )
        super().__init__(params, dict(hyper, centered=centered, maximize=maximize))

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        grad = _l2(grad, param, group["weight_decay"])
        alpha = group["alpha"]
        if "square_avg" not in state:
            state["square_avg"] = torch.zeros_like(param)
        square_avg = state["square_avg"].mul_(alpha)
        square_avg.addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            if "grad_avg" not in state:
                state["grad_avg"] = torch.zeros_like(param)
            grad_avg = state["grad_avg"].mul_(alpha).add_(grad, alpha=1 - alpha)
            # a standard deviation, not an RMS
            root = (square_avg - grad_avg * grad_avg).sqrt()
        else:
            root = square_avg.sqrt()
        direction = grad / root.add_(group["eps"])
        if group["momentum"] > 0:
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(param)
            buffer = state["momentum_buffer"].mul_(group["momentum"])
            direction = buffer.add_(direction)
        param.add_(direction, alpha=-group["lr"])


class Adadelta(_Optimizer):
    """AdaDelta: RMSProp whose learning rate is the RMS of the recent updates.

    ::

        v_t = ρ v_{t-1} + (1 - ρ) g_t²
        Δ_t = √(u_{t-1} + ε) / √(v_t + ε) · g_t       (u: average of squared updates)
        u_t = ρ u_{t-1} + (1 - ρ) Δ_t²
        w_t = w_{t-1} - lr Δ_t

    Zeiler (2012) has no ``lr``; ``torch.optim.Adadelta``, followed here, multiplies
    by ``lr`` (default 1.0, which is Zeiler's method).
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1.0,
        rho: or_scalar_tensor(Fraction) = 0.9,
        eps: Hyper = 1e-6,
        weight_decay: Hyper = 0.0,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
    ):
        hyper = _floats(lr=lr, eps=eps, weight_decay=weight_decay, rho=rho)
        super().__init__(params, dict(hyper, maximize=maximize))

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        grad = _l2(grad, param, group["weight_decay"])
        rho, eps = group["rho"], group["eps"]
        if "square_avg" not in state:
            state["square_avg"] = torch.zeros_like(param)
            state["acc_delta"] = torch.zeros_like(param)
        square_avg = state["square_avg"].mul_(rho)
        square_avg.addcmul_(grad, grad, value=1 - rho)
        delta = (state["acc_delta"] + eps).sqrt() / (square_avg + eps).sqrt() * grad
        state["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
        param.add_(delta, alpha=-group["lr"])


class Adam(_Optimizer):
    """Adam: bias-corrected averages of the gradient and of its square.

    ::

        m_t = β₁ m_{t-1} + (1 - β₁) g_t,       m̂_t = m_t / (1 - β₁^t)
        v_t = β₂ v_{t-1} + (1 - β₂) g_t²,      v̂_t = v_t / (1 - β₂^t)
        v̂_t ← max(v̂_{t-1}, v̂_t)                              if amsgrad
        w_t = w_{t-1} - lr m̂_t / (√v̂_t + ε)

    ``weight_decay = λ`` adds ``λ w`` to ``g_t`` (L2, "coupled"), or with
    ``decoupled_weight_decay=True`` first shrinks ``w ← (1 - lr λ) w``
    (:class:`AdamW`). As ``torch.optim.Adam`` (Kingma & Ba, 2015; AMSGrad: Reddi
    et al., 2018, with PyTorch's maximum of the uncorrected ``v``).
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1e-3,
        betas: each(Beta) = (0.9, 0.999),
        eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
        foreach: Optional[bool] = None,
    ):
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2); found {betas!r}")
        hyper = _floats(lr=lr, eps=eps, weight_decay=weight_decay)
        defaults = dict(
            hyper,
            betas=(float(betas[0]), float(betas[1])),
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        lr, t = group["lr"], state["step"]
        beta1, beta2 = group["betas"]
        grad = _decayed(grad, param, group)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = torch.zeros_like(param)
        m, v = _moments(grad, param, state, group)
        if group["amsgrad"]:
            v_max = state["max_exp_avg_sq"]
            v = torch.maximum(v_max, v, out=v_max)
        # m and v start at 0, so early averages are too small by 1 - β^t: undo that.
        m_hat = m / (1 - beta1**t)
        v_hat = v / (1 - beta2**t)
        param.addcdiv_(m_hat, v_hat.sqrt().add_(group["eps"]), value=-lr)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``w ← (1 - lr λ) w``, then the Adam step.

    The decay does not pass through ``m̂ / √v̂``, so every weight shrinks by the
    same factor whatever its gradient history (Loshchilov & Hutter, 2019). As
    ``torch.optim.AdamW``: the decay is multiplied by ``lr``, where the paper
    multiplies it by the schedule multiplier ``η_t`` only.
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 1e-3,
        betas: each(Beta) = (0.9, 0.999),
        eps: Hyper = 1e-8,
        weight_decay: Hyper = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            maximize=maximize,
            decoupled_weight_decay=True,
            foreach=foreach,
        )


def nadam_momentum(
    step: NonNegativeInt,
    beta1: DecayRate,
    momentum_decay: NonNegative,
    schedule: NadamSchedule = "warmup",
) -> DecayRate:
    """NAdam's momentum coefficient ``μ_t``.

    ``"warmup"`` (PyTorch, Dozat 2016): ``β₁ (1 - ½ · 0.96^{t ψ})`` with
    ``ψ = momentum_decay``; it starts near ``β₁ / 2`` and approaches ``β₁`` over
    thousands of steps (with ``ψ = 0.004``, ``0.96^{tψ} = ½`` at ``t ≈ 4200``).
    ``"constant"``: ``β₁``.
    """
    return _momentum(step, beta1, momentum_decay, schedule)


# nadam_momentum (checked) is the public entry; NAdam._update calls this twice per
# parameter per step, with t >= 1 counted by step() and beta1, momentum_decay and
# schedule checked by NAdam() (Beta, Hyper, NadamSchedule).
@no_type_check  # in NAdam._update: NAdam() checked the hypers, step() counts t
def _momentum(step, beta1, momentum_decay, schedule):
    if schedule == "constant":
        return beta1
    return beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))


class NAdam(_Optimizer):
    """NAdam: Adam whose momentum step is taken one step ahead, as Nesterov's.

    With ``m_t, v_t`` the averages of :class:`Adam` and ``μ_t`` from
    :func:`nadam_momentum`::

        w_t = w_{t-1} - lr / (√v̂_t + ε) · [ (1 - μ_t) g_t / (1 - Π_{i<=t} μ_i)
                                          + μ_{t+1} m_t / (1 - Π_{i<=t+1} μ_i) ]

    The second term uses the momentum of the *next* step now: Dozat's (2016)
    way to look ahead without a second gradient. As ``torch.optim.NAdam``;
    ``momentum_schedule="constant"`` (``μ_t = β₁``, our option, not PyTorch's)
    gives the textbook form ``(1 - β₁) g_t / (1 - β₁^t) + β₁ m_t / (1 - β₁^{t+1})``.
    """

    def __init__(
        self,
        params: Params,
        lr: Hyper = 2e-3,
        betas: each(Beta) = (0.9, 0.999),
        eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0,
        momentum_decay: Hyper = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        maximize: bool = False,
        momentum_schedule: NadamSchedule = "warmup",
        foreach: Optional[bool] = None,
    ):
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2); found {betas!r}")
        hyper = _floats(lr=lr, eps=eps, weight_decay=weight_decay)
        defaults = dict(
            hyper,
            betas=(float(betas[0]), float(betas[1])),
            momentum_decay=float(momentum_decay),
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            momentum_schedule=momentum_schedule,
        )
        super().__init__(params, defaults)

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        lr, t = group["lr"], state["step"]
        beta1, beta2 = group["betas"]
        grad = _decayed(grad, param, group)
        decay, schedule = group["momentum_decay"], group["momentum_schedule"]
        mu = _momentum(t, beta1, decay, schedule)  # nadam_momentum, unchecked
        mu_next = _momentum(t + 1, beta1, decay, schedule)
        state["mu_product"] = state.get("mu_product", 1.0) * mu  # Π_{i<=t} μ_i
        m, v = _moments(grad, param, state, group)
        denominator = (v / (1 - beta2**t)).sqrt().add_(group["eps"])
        product, product_next = state["mu_product"], state["mu_product"] * mu_next
        param.addcdiv_(grad, denominator, value=-lr * (1 - mu) / (1 - product))
        param.addcdiv_(m, denominator, value=-lr * mu_next / (1 - product_next))


OPTIMIZERS: dict[str, type[Optimizer]] = {
    "SGD": SGD,
    "Adagrad": Adagrad,
    "RMSprop": RMSprop,
    "Adadelta": Adadelta,
    "Adam": Adam,
    "AdamW": AdamW,
    "NAdam": NAdam,
}


# ---------------------------------------------------------------------------
# The notes' template: w ← w - lr φ(g_1..g_t) / (√ψ(g_1..g_t) + ε).
# ---------------------------------------------------------------------------

_FEATURES: dict[str, Callable[[Tensor], Tensor]] = {
    "g": lambda g: g,
    "g²": lambda g: g * g,
    "1": torch.ones_like,
}


@dataclass(frozen=True)
class Moment:
    """A running statistic of the gradients: the φ or the ψ of the template.

    ``s_t = decay · s_{t-1} + weight · feature(g_t)`` with ``s_0 = 0``; the estimate
    is ``s_t``, or ``s_t / (1 - decay^t)`` with ``bias_correction``. With
    ``nesterov`` (first moments only) it is NAdam's look-ahead mix
    ``decay · s_t / (1 - decay^{t+1}) + (1 - decay) g_t / (1 - decay^t)``.
    ``decay = 1, weight = 1`` is a running sum; ``decay = β, weight = 1 - β`` an
    exponential moving average; ``decay = 0, weight = 1`` the latest value.
    """

    feature: Feature
    decay: Finite = 0.0
    weight: Finite = 1.0
    bias_correction: bool = False
    nesterov: bool = False

    def __post_init__(self):
        if (
            self.bias_correction and not 0 <= self.decay < 1
        ):  # it divides by 1 - decay^t
            raise ValueError(
                f"bias_correction needs a decay in [0, 1); found decay={self.decay}"
            )
        look_ahead = self.feature == "g" and self.bias_correction and self.decay < 1
        if self.nesterov and not look_ahead:
            raise ValueError(
                "nesterov needs feature 'g', bias_correction=True and decay < 1; "
                f"found {self!r}"
            )

    def update(
        self,
        buffer: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        step: PositiveInt,
    ) -> Float[Tensor, "*shape"]:
        """Advance ``buffer`` (in place) by one gradient and return the estimate."""
        return self._advance(buffer, grad, step)

    @no_type_check  # hot: MomentOptimizer._update's; step() checked the tensors
    def _advance(self, buffer, grad, step):
        buffer.mul_(self.decay).add_(_FEATURES[self.feature](grad), alpha=self.weight)
        if self.nesterov:
            ahead = self.decay * buffer / (1 - self.decay ** (step + 1))
            return ahead + (1 - self.decay) * grad / (1 - self.decay**step)
        return buffer / (1 - self.decay**step) if self.bias_correction else buffer


class MomentOptimizer(_Optimizer):
    """The template ``w ← w - lr m_t / (√V_t + ε)``, ``m = φ(g..)``, ``V = ψ(g..)``.

    ``phi`` and ``psi`` are the two :class:`Moment` (see :func:`template`); use
    ``eps = 0`` when ``ψ = 1``, so that SGD is exactly SGD.
    """

    def __init__(
        self, params: Params, lr: Hyper, phi: Moment, psi: Moment, eps: Hyper = 1e-8
    ):
        hyper = _floats(lr=lr, eps=eps)
        super().__init__(params, dict(hyper, phi=phi, psi=psi, maximize=False))

    @no_type_check  # hot: once per parameter per step; step() checked the tensors
    def _update(
        self,
        param: Float[Tensor, "*shape"],
        grad: Float[Tensor, "*shape"],
        state: dict,
        group: dict,
    ) -> None:
        if "first" not in state:
            state["first"] = torch.zeros_like(param)
            state["second"] = torch.zeros_like(param)
        m = group["phi"]._advance(state["first"], grad, state["step"])  # .update's body
        v = group["psi"]._advance(state["second"], grad, state["step"])
        param.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-group["lr"])


def template(
    name: TemplateName, beta1: Beta = 0.9, beta2: Beta = 0.999
) -> tuple[Moment, Moment]:
    """The (φ, ψ) of one classic optimiser: SGD ``(g_t, 1)``; momentum (the average of
    ``g``, 1); AdaGrad ``(g_t, Σ g²)``; RMSProp ``(g_t``, the average of ``g²)``; Adam
    (both averages, bias-corrected); NAdam (Adam's, with the first one ahead)."""
    beta1, beta2 = float(beta1), float(beta2)
    latest, one = Moment("g"), Moment("1")
    ema_g, ema_g2 = Moment("g", beta1, 1 - beta1), Moment("g²", beta2, 1 - beta2)
    adam_g2 = Moment("g²", beta2, 1 - beta2, True)
    table = {
        "SGD": (latest, one),
        "momentum": (ema_g, one),
        "AdaGrad": (latest, Moment("g²", 1.0, 1.0)),
        "RMSProp": (latest, ema_g2),
        "Adam": (Moment("g", beta1, 1 - beta1, True), adam_g2),
        "NAdam": (Moment("g", beta1, 1 - beta1, True, nesterov=True), adam_g2),
    }
    return table[name]


def lookahead_momentum(
    grad_fn: Callable[[Tensor], Tensor],
    start: Float[Tensor, "D"],
    lr: NonNegative,
    beta: DecayRate,
    steps: NonNegativeInt,
) -> Float[Tensor, "path D"]:
    """Nesterov momentum in the look-ahead form, in the notes' notation.

    ``SGD(nesterov=True, lr=lr·(1-β), momentum=β)`` visits the look-ahead points
    ``w_t - lr β m_t`` of this path; returns ``w_0, ..., w_steps``.
    """
    w, m = start.clone(), torch.zeros_like(start)
    path = [w.clone()]
    for _ in range(steps):
        g = grad_fn(w - lr * beta * m)  # the gradient where momentum is taking us
        if g.shape != w.shape:  # it would broadcast silently
            raise ValueError(
                f"grad_fn must return a gradient of w's shape {tuple(w.shape)}; "
                f"found {tuple(g.shape)}"
            )
        m = beta * m + (1 - beta) * g
        w = w - lr * m
        path.append(w.clone())
    return torch.stack(path)  # (steps + 1, D)


# ---------------------------------------------------------------------------
# Test problems: 2-D surfaces, an online problem, a classification set.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """A 2-D loss surface with a hand-written gradient, for trajectory plots.

    ``f`` and ``grad`` take points of shape ``(..., 2)``; ``start`` is where the
    trajectories begin, ``minimum`` the minimiser, ``xlim``/``ylim`` the plot window.
    """

    name: str
    f: Callable[[Tensor], Tensor]
    grad: Callable[[Tensor], Tensor]
    start: tuple[float, float]
    minimum: tuple[float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]


def _quadratic(w: Float[Tensor, "*batch 2"]) -> Float[Tensor, "*batch"]:
    return 0.5 * (w[..., 0] ** 2 + 20.0 * w[..., 1] ** 2)  # curvatures 1 and 20


@no_type_check  # hot: once per step of a trajectory; checks w's last size itself
def _quadratic_grad(w: Float[Tensor, "*batch 2"]) -> Float[Tensor, "*batch 2"]:
    if w.shape[-1:] != (2,):
        raise ValueError(f"w must have shape (..., 2); found {tuple(w.shape)}")
    return torch.stack([w[..., 0], 20.0 * w[..., 1]], dim=-1)


def _rosenbrock(w: Float[Tensor, "*batch 2"]) -> Float[Tensor, "*batch"]:
    x, y = w[..., 0], w[..., 1]
    return (1 - x) ** 2 + 100.0 * (y - x**2) ** 2


@no_type_check  # hot: once per step of a trajectory; checks w's last size itself
def _rosenbrock_grad(w: Float[Tensor, "*batch 2"]) -> Float[Tensor, "*batch 2"]:
    if w.shape[-1:] != (2,):
        raise ValueError(f"w must have shape (..., 2); found {tuple(w.shape)}")
    x, y = w[..., 0], w[..., 1]
    dx = -2 * (1 - x) - 400.0 * x * (y - x**2)
    return torch.stack([dx, 200.0 * (y - x**2)], dim=-1)


SURFACES: dict[str, Surface] = {
    "quadratic": Surface(
        "quadratic",
        _quadratic,
        _quadratic_grad,
        start=(-4.5, 1.0),
        minimum=(0.0, 0.0),
        xlim=(-5.0, 1.5),
        ylim=(-1.5, 1.5),
    ),
    "rosenbrock": Surface(
        "rosenbrock",
        _rosenbrock,
        _rosenbrock_grad,
        start=(-1.2, 1.0),
        minimum=(1.0, 1.0),
        xlim=(-1.8, 1.8),
        ylim=(-0.8, 2.2),
    ),
}


def trajectory(
    optimizer: Callable[..., Optimizer],
    surface: Surface,
    steps: NonNegativeInt,
    start: Optional[Union[each(Finite), Shaped[Tensor, "2"]]] = None,
    **hyper,
) -> Float[Tensor, "path 2"]:
    """The points ``optimizer(**hyper)`` visits on ``surface``, from ``start`` (by
    default ``surface.start``); a diverging run is cut at its first non-finite point.
    ``hyper`` must follow this module's rules (:data:`HYPER_RULES`), whichever
    ``optimizer`` takes them (``torch.optim.SGD`` takes ``lr=nan`` and ``lr=True``)."""
    for name in HYPER_RULES.keys() & hyper.keys():
        rule, expected = HYPER_RULES[name]
        if not is_bearable(hyper[name], rule):
            raise TypeError(f"{name} must be {expected}; found {hyper[name]!r}")
    if start is None:
        start = surface.start
    w = torch.as_tensor(start, dtype=torch.float64).clone()  # (2,)
    if w.shape != (2,) or not torch.isfinite(w).all():
        raise ValueError(f"start must be two finite numbers; found {start!r}")
    opt = optimizer([w], **hyper)
    path = [w.clone()]
    for _ in range(steps):
        w.grad = surface.grad(w)
        opt.step()
        if not torch.isfinite(w).all():
            break
        path.append(w.clone())
    return torch.stack(path)  # (<= steps + 1, 2)


def reddi_problem(c: Finite = 3.0) -> Callable[[int, Tensor], Tensor]:
    """The online problem of Reddi et al. (2018, section 3) on which Adam fails.

    On ``x ∈ [-1, 1]`` the loss at step ``t`` (from 1) is ``c x`` when
    ``t mod 3 = 1`` and ``-x`` otherwise; for ``c > 2`` the best point is ``x = -1``.
    Returns the gradient ``(t, x) -> f_t'(x)``, of the shape of ``x``.
    """
    if not c > 2:
        raise ValueError(
            f"c must be > 2 (otherwise -1 is not the optimum); found {c!r}"
        )

    def grad(t: int, x: Tensor) -> Tensor:
        return torch.full_like(x, c if t % 3 == 1 else -1.0)

    return grad


def spirals(
    n_per_class: PositiveInt = 200,
    classes: PositiveInt = 3,
    noise: NonNegative = 0.2,
    generator: Optional[torch.Generator] = None,
) -> tuple[Float[Tensor, "N 2"], Int[Tensor, "N"]]:
    """Interleaved 2-D spirals, one per class: a small set a linear model cannot fit.

    Returns ``classes · n_per_class`` points and their integer classes.
    """
    if classes > MAX_CLASSES:
        raise ValueError(f"classes must be an int <= {MAX_CLASSES}; found {classes}")
    radius = torch.linspace(0.05, 1.0, n_per_class)  # (n,)
    inputs, labels = [], []
    for c in range(classes):
        jitter = noise * torch.randn(n_per_class, generator=generator)
        angle = 4.0 * radius + 2 * math.pi * c / classes + jitter  # (n,)
        xy = [radius * torch.cos(angle), radius * torch.sin(angle)]
        inputs.append(torch.stack(xy, dim=1))  # (n, 2)
        labels.append(torch.full((n_per_class,), c))
    return torch.cat(inputs), torch.cat(labels)


def fit(
    model: torch.nn.Module,
    optimizer: Optimizer,
    inputs: Shaped[Tensor, "N *input"],
    targets: Shaped[Tensor, "N *target"],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    steps: NonNegativeInt,
    batch_size: Optional[PositiveInt] = None,
    generator: Optional[torch.Generator] = None,
    loss_every: PositiveInt = 1,
    scheduler: Optional[LRScheduler] = None,
) -> list[float]:
    """Train for ``steps`` updates; return the loss on the whole set before training and
    after every ``loss_every``-th step (``loss_every`` divides ``steps``).

    ``batch_size=None`` is batch gradient descent, otherwise each step draws a random
    mini-batch. A ``scheduler`` built on ``optimizer`` steps after every update.
    """
    if steps % loss_every:
        raise ValueError(
            "loss_every must divide steps; "
            f"found steps={steps}, loss_every={loss_every}"
        )
    if scheduler is not None and scheduler.optimizer is not optimizer:
        raise ValueError(
            "scheduler must drive the optimizer passed to fit; "
            "found one built on another optimizer"
        )
    n = inputs.shape[0]
    if n == 0:
        raise ValueError("inputs must hold at least one example; found N = 0")
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if inputs.is_floating_point() and dtype is not None and inputs.dtype != dtype:
        raise TypeError(
            f"inputs must have the model's dtype {dtype}; found {inputs.dtype}"
        )
    if targets.dtype == torch.bool:  # no loss of torch's takes them
        raise TypeError("targets must be class ids or numbers; found torch.bool")

    def full_loss() -> float:
        with torch.no_grad():
            return float(loss_fn(model(inputs), targets))

    try:
        losses = [full_loss()]
    except RuntimeError as error:  # e.g. float class ids: torch names no argument
        shapes = f"{tuple(inputs.shape)} and {tuple(targets.shape)}"
        raise ValueError(
            f"loss_fn(model(inputs), targets) failed for inputs and targets of shapes "
            f"{shapes}, dtypes {inputs.dtype} and {targets.dtype}: {error}"
        ) from error
    for step in range(1, steps + 1):
        if batch_size is None:
            rows = slice(None)
        else:
            rows = torch.randint(n, (batch_size,), generator=generator)
        optimizer.zero_grad()
        loss_fn(model(inputs[rows]), targets[rows]).backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if step % loss_every == 0:
            losses.append(full_loss())
    return losses
