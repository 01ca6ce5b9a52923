"""Checkers for the exercises of chapter 1 (activation functions and loss functions)."""
from __future__ import annotations

import math

import torch

from lib.part1_blocks.activations import gelu_grad
from courseware.checks.core import Check, Measured, Slip


# ---- the derivative of GELU -------------------------------------------------------------
def gelu_grad_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(x,)`` for :data:`check_gelu_grad`: float64 tensors of 1 to 3
    axes, with entries up to ±6 and always the points 0 and 1 (where φ(x) and a
    slipped exponent differ clearly, however far out the random entries fall)."""
    cases = []
    for trial in range(trials):
        shape = tuple(int(n) for n in torch.randint(2, 6, (1 + trial % 3,), generator=generator))
        x = 3 * torch.randn(*shape, generator=generator, dtype=torch.float64)
        x.view(-1)[:2] = torch.tensor([0.0, 1.0], dtype=torch.float64)
        cases.append((x.clamp(-6, 6),))
    return cases


def _cdf(x: torch.Tensor) -> torch.Tensor:
    """Φ(x), the standard normal distribution function."""
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


check_gelu_grad = Check(
    "GELU'(x) = Φ(x) + x φ(x) agrees with lib.part1_blocks.activations.gelu_grad on 10 fresh random tensors",
    gelu_grad_cases, gelu_grad,
    describe=lambda x: f"x of shape {tuple(x.shape)}",
    compared_with="Φ(x) + x φ(x)", noun="derivative", layout="x.shape",
    slips=(
        Slip(_cdf, "you returned Φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
        Slip(lambda x: x * torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi),
             "you returned x φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
        Slip(lambda x: gelu_grad(x, "tanh"),
             "that is the derivative of the tanh approximation; differentiate the exact x Φ(x)"),
        Slip(lambda x: gelu_grad(x, "sigmoid"), "that is the derivative of the sigmoid approximation x σ(1.702x); "
                                                "differentiate the exact x Φ(x)"),
        Slip(lambda x: _cdf(x) + x * torch.exp(-(x**2)) / math.sqrt(2 * math.pi),
             "the normal density is φ(x) = exp(-x²/2) / √(2π): check the exponent"),
        Slip(lambda x: _cdf(x) + x * torch.exp(-0.5 * x**2),
             "you left out the factor 1/√(2π) of the normal density: φ(x) = exp(-x²/2) / √(2π), which "
             "makes it integrate to 1"),
    ),
    shape_hint=lambda shape, x: ": it must have the shape of x (the derivative is taken element by element)",
    tolerance=dict(atol=1e-10, rtol=0.0),
    forbidden=("torch.nn.functional.gelu", "torch.autograd", "torch.func", ".backward"),
)


# ---- the gradient of softmax cross-entropy with respect to the logits --------------------
def cross_entropy_grad_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(logits, targets)`` for :data:`check_cross_entropy_grad`.

    Logits ``(B, C)`` in float64 with ``B != C`` (so that dividing by C, or by B·C, instead of
    B is a different answer). Two cases in three, the first among them, have logits of size
    about 2, where every named slip differs from the right answer. Every third case has logits
    in the hundreds, shifted so that the rows' maxima alternate between 1000 and -1000 within
    the batch, where exp overflows (or underflows to 0) unless each row's own maximum is
    subtracted first: a softmax without the shift, and one shift by the largest logit of the
    whole batch, give NaN on every seed. Targets are class indices ``(B,)``.
    """
    cases = []
    for trial in range(trials):
        batch, classes = (int(n) for n in torch.randperm(6, generator=generator)[:2] + 2)
        scale = 400.0 if trial % 3 == 2 else 2.0
        logits = scale * torch.randn(batch, classes, generator=generator, dtype=torch.float64)
        if trial % 3 == 2:  # row maxima +1000 and -1000 in turn, the first one's sign by trial
            tops = (1000.0 if trial % 2 else -1000.0) * (-1.0) ** torch.arange(batch, dtype=torch.float64)
            logits += tops[:, None] - logits.max(-1, keepdim=True).values
        targets = torch.randint(0, classes, (batch,), generator=generator)
        cases.append((logits, targets))
    return cases


def cross_entropy_grad_by_autograd(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The reference: ``∂L/∂logits`` by autograd through ``torch.nn.functional.cross_entropy`` (the
    mean over the batch), in float64.

    Shapes
    ------
    logits : (B, C); targets : (B,); output : (B, C)
    """
    leaf = logits.detach().to(torch.float64).requires_grad_()
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(torch.nn.functional.cross_entropy(leaf, targets), leaf)
    return grad  # (B, C)


def _softmax_and_one_hot(logits: torch.Tensor, targets: torch.Tensor, dim: int = 1) -> tuple:
    """``(q, p)``: the softmax of ``logits`` over ``dim`` (1, the classes, or 0, the batch: a slip)
    and the one-hot rows of ``targets``, both ``(B, C)``."""
    q = torch.softmax(logits, dim=dim)
    p = torch.nn.functional.one_hot(targets, logits.shape[1]).to(logits.dtype)
    return q, p


def _slip(formula):
    """A slip written as ``formula(q, p, B, C)`` of the softmax ``q`` and the one-hot ``p``."""
    def answer(logits, targets):
        q, p = _softmax_and_one_hot(logits, targets)
        return formula(q, p, *logits.shape)
    return answer


def _batch_softmax(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A slip: (q - p) / B with the softmax taken over the batch (each column) instead of each row."""
    q, p = _softmax_and_one_hot(logits, targets, dim=0)
    return (q - p) / logits.shape[0]


def _columns_shifted(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A slip: (q - p) / B with the softmax of each row taken after subtracting each column's maximum
    (``max(dim=0)``) instead of the row's own: a shift that differs from class to class changes q."""
    shifted = logits - logits.max(dim=0, keepdim=True).values  # (B, C)
    exps = shifted.exp()
    q = exps / exps.sum(dim=1, keepdim=True)
    return (q - torch.nn.functional.one_hot(targets, logits.shape[1]).to(q.dtype)) / logits.shape[0]


def _two_class_formula_grad(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """A slip: the gradient of the notes' binary formula -Σ_c (p log q + (1-p) log(1-q)), summed over
    the classes and averaged over the batch."""
    leaf = logits.detach().to(torch.float64).requires_grad_()
    with torch.enable_grad():
        q = torch.softmax(leaf, dim=1)
        p = torch.nn.functional.one_hot(targets, logits.shape[1]).to(q.dtype)
        loss = -(p * torch.log(q) + (1 - p) * torch.log1p(-q)).sum() / logits.shape[0]
        (grad,) = torch.autograd.grad(loss, leaf)
    return grad


_WITH_RESPECT_TO_Q = ("that is ∂L/∂q, the gradient with respect to the probabilities q = softmax(z); the "
                      "question asks for the logits z: chain it through the softmax, ∂q_k/∂z_c = q_k (δ_kc - q_c)")


def _cross_entropy_grad_rules(found, expected, logits, targets) -> str | None:
    """The property every right answer has: each row sums to 0 (the softmax and the one-hot row
    both sum to 1; equivalently, adding one number to every logit of a row changes nothing)."""
    sums = found.sum(dim=1)  # (B,)
    off = (sums.abs() > 1e-3).nonzero()
    if len(off):
        row = int(off[0])  # the first row that does not sum to 0
        return (f"row {row} of your gradient sums to {float(sums[row]):.3g}; every row of ∂L/∂z sums to 0, "
                "because adding one number to every logit of a row leaves its softmax, and so the loss, "
                "unchanged")
    return None


def _cross_entropy_grad_shape_hint(shape, logits, targets) -> str:
    batch, classes = logits.shape
    return {
        (batch,): ": you returned one number per example; return one per logit, ∂L/∂z[i, c]",
        (): ": you returned the loss or one number; return one entry per logit, ∂L/∂z[i, c]",
        (classes, batch): ": you returned the transpose; row i must hold example i's C entries",
    }.get(tuple(shape), "")


check_cross_entropy_grad = Check(
    "∂L/∂z of the mean softmax cross-entropy agrees with autograd through torch.nn.functional.cross_entropy "
    "on 12 fresh random batches, large logits included",
    cross_entropy_grad_cases, cross_entropy_grad_by_autograd,
    describe=lambda logits, targets: f"logits of shape {tuple(logits.shape)}",
    compared_with="autograd's", noun="gradient", layout="(B, C)",
    slips=(
        Slip(_slip(lambda q, p, batch, classes: q - p),
             "that is the gradient of the summed loss; the loss is the mean over the batch, so divide by B"),
        Slip(_slip(lambda q, p, batch, classes: (p - q) / batch),
             "your gradient has the wrong sign: raising the true class's logit lowers the loss, so its entry "
             "∂L/∂z_y must be negative"),
        Slip(_slip(lambda q, p, batch, classes: p - q),
             "your gradient has the wrong sign (raising the true class's logit lowers the loss, so its entry "
             "must be negative), and the loss is the mean over the batch: divide by B"),
        Slip(_slip(lambda q, p, batch, classes: (q - p) / classes),
             "you divided by C, the number of classes; the loss is the mean over the B examples of the batch"),
        Slip(_slip(lambda q, p, batch, classes: (q - p) / (batch * classes)),
             "you divided by B × C, the number of logits; the loss is the mean over the B examples, not over "
             "every logit"),
        Slip(_slip(lambda q, p, batch, classes: -p / batch),
             "-p/B is the derivative of the -z_y term alone; log Σ_k exp(z_k) depends on every logit too, and "
             "its derivative is the softmax"),
        Slip(_slip(lambda q, p, batch, classes: q / batch),
             "q/B is the derivative of the log-sum-exp term alone; the term -z_y adds -1 at the true class"),
        Slip(_slip(lambda q, p, batch, classes: (q - p) * p / batch),
             "you kept only the true class's entry; the other logits enter the loss through log Σ_k exp(z_k), "
             "so their entries are not 0"),
        Slip(_slip(lambda q, p, batch, classes: -p / q / batch), _WITH_RESPECT_TO_Q),
        Slip(_slip(lambda q, p, batch, classes: -p / q), _WITH_RESPECT_TO_Q + "; and divide by B (the mean)"),
        Slip(_batch_softmax, "your softmax runs over the batch; it must run over the classes (each row)"),
        Slip(_columns_shifted,
             "you shifted each column by its maximum (over the batch, dim=0); the shift must be each row's own "
             "maximum, over the classes (dim=1): one number per row leaves its softmax unchanged, but a shift "
             "that differs from class to class changes it"),
        Slip(_two_class_formula_grad,
             "that is the gradient of the two-class formula -Σ (p log q + (1-p) log(1-q)) summed over the "
             "classes; for C classes the cross-entropy is -Σ p log q = -log q_y (only the true class counts)"),
    ),
    shape_hint=_cross_entropy_grad_shape_hint,
    nan_hint=": exp overflows or underflows; subtract each row's maximum before exponentiating, each row its "
             "own: one shift for the whole batch is not enough when the rows' maxima lie far apart",
    error_hint=("; if the sizes clash: a row's maximum or sum over the classes has shape (B,), so keep its "
                "axis (keepdim=True, or [:, None]) to combine it with the (B, C) logits"),
    rules=_cross_entropy_grad_rules,
    tolerance=dict(atol=1e-10, rtol=1e-10),
    forbidden=("torch.autograd", "torch.func", ".backward", "torch.nn.functional", "torch.nn.CrossEntropyLoss",
               "torch.softmax", "torch.log_softmax", "torch.logsumexp", "torch.logaddexp", "torch.logcumsumexp",
               "torch.nn.Softmin", "torch.distributions", ".softmax", ".log_softmax", ".logsumexp", ".logaddexp",
               ".logcumsumexp"),
)


# ---- experiment: bring a dead ReLU network back to life ----------------------------------
def relu_init_cases(generator: torch.Generator, trials: int = 6) -> list[tuple]:
    """Fresh ``(depth, width, seed)`` for :data:`check_relu_init`: 6 layers of 96 to 160 units,
    wide enough that He-initialised layers keep their second moment within a factor 4 and their
    gradient within a factor 2 on every seed."""
    return [(6, int(torch.randint(96, 161, (), generator=generator)),
             int(torch.randint(0, 2**31, (), generator=generator))) for _ in range(trials)]


def he_init(depth: int, width: int, seed: int) -> torch.Tensor:
    """The book's answer: He-normal weights, variance 2/width, and zero biases, stacked as
    ``(depth, width + 1, width)``: layer ``l`` maps ``x`` to ``relu(x @ W[l, :-1] + W[l, -1])``."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(depth, width + 1, width, generator=generator, dtype=torch.float64)  # (L, W + 1, W)
    weights *= math.sqrt(2 / width)
    weights[:, -1] = 0.0
    return weights


def relu_network_health(weights: torch.Tensor, seed: int, samples: int = 512) -> tuple[float, float, float]:
    """Run ``samples`` N(0, 1) inputs through the ReLU network ``weights`` (see :func:`he_init`),
    and a gradient back through it.

    Returns three measurements: the fraction of all hidden units that output 0 on every
    input (dead); the second moment E[a²] of the last layer's pre-activations divided by the
    first layer's; and, for a gradient with N(0, 1) entries placed on the last layer's
    pre-activations and back-propagated to the first layer's, the mean square it arrives
    with divided by the one it started with. A positive bias adds the same amount to E[a²]
    for every input, so it can hold the second moment up while the weights are too small;
    it cannot hold the gradient up, which crosses each layer only through its weights and its
    active units.

    Shapes
    ------
    weights ``(L, W + 1, W)``; inputs and gradients ``(samples, W)``
    """
    weights = weights.to(torch.float64)
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(samples, weights.shape[-1], generator=generator, dtype=torch.float64)  # (N, W)
    dead, moments, slopes = 0, [], []
    for layer in weights:
        pre = x @ layer[:-1] + layer[-1]  # (N, W)
        x = torch.relu(pre)
        dead += int((x == 0).all(dim=0).sum())
        moments.append(float(pre.pow(2).mean()))
        slopes.append((pre > 0).to(torch.float64))  # ReLU'(a): 1 where the unit is active
    grad = torch.randn(samples, weights.shape[-1], generator=generator, dtype=torch.float64)  # ∂ℓ/∂a_L
    start = float(grad.pow(2).mean())
    for layer, slope in zip(reversed(weights[1:]), reversed(slopes[:-1])):
        grad = (grad @ layer[:-1].T) * slope  # ∂ℓ/∂a_(l-1) = (∂ℓ/∂a_l W_l^T) ⊙ ReLU'(a_(l-1))
    return dead / weights.shape[0] / weights.shape[-1], moments[-1] / moments[0], float(grad.pow(2).mean()) / start


# ReLU zeroes about half of each pre-activation: the advice for weights of the wrong scale.
_HE_ADVICE = "ReLU zeroes about half of each pre-activation, so the weight variance must be twice LeCun's 1/fan_in"


def _init_causes(found: torch.Tensor, shrinks: bool, gradient: bool) -> str:
    """What in ``found`` makes the second moment (or, with ``gradient``, the gradient's mean square)
    shrink (``shrinks``) or grow: biases away from 0, weights of the wrong scale, or both, with what
    to do about it. The bias rows are read first, so that He weights with nonzero biases are not
    told that their weights are wrong."""
    width = found.shape[-1]
    gain = float(found[:, :-1].pow(2).mean()) * width  # fan_in · E[W²]: LeCun's 1, He's 2
    bias_mean, bias_size = float(found[:, -1].mean()), float(found[:, -1].abs().mean())
    nonzero, causes = bias_size > 0.05, []
    if nonzero and shrinks and bias_mean < 0:
        causes.append(f"the biases are negative (their mean is {bias_mean:.2g}): a negative bias pushes every "
                      "pre-activation down, so fewer units fire at each layer")
    elif nonzero and shrinks and gradient and bias_mean > 0:
        causes.append(f"the biases are positive (their mean is {bias_mean:.2g}): a positive bias keeps units alive "
                      "and props up the second moment (it adds the same amount for every input), but the gradient "
                      "crosses each layer only through the weights of its active units")
    elif nonzero and not shrinks and bias_mean > 0:
        causes.append(f"the biases are positive (their mean is {bias_mean:.2g}): a positive bias adds the same "
                      "amount to every pre-activation, at every layer")
    biased = bool(causes)
    if shrinks and gain < 1.5:
        causes.append(f"the weights are too small: their variance is {gain:.2g}/fan_in")
    elif not shrinks and gain > 2.5:
        causes.append(f"the weights are too large: their variance is {gain:.2g}/fan_in")
    weights = len(causes) > biased
    if not causes:  # neither the scale nor the biases: something else in how the weights are drawn
        causes.append(f"the weights are too {'small' if shrinks else 'large'} for ReLU")
        weights = True
    if not weights:
        advice = "Start the biases at 0"
    else:
        advice = (_HE_ADVICE if shrinks else "Use He's variance, 2/fan_in") + (", with biases at 0" if nonzero else "")
    return f"{'; and '.join(causes)}. {advice}"


def _relu_init_rules(found: torch.Tensor, expected: torch.Tensor, depth: int, width: int, seed: int) -> str | None:
    """What is wrong with the network ``found`` builds: too many dead units, a second moment that
    shrinks or grows by more than 4 through the layers, or a gradient whose mean square shrinks or
    grows by more than 2 on its way back, each with its cause (:func:`_init_causes`); None when it
    is healthy."""
    dead, moment, gradient = relu_network_health(found, seed)
    if dead > 0.1:
        if float(found[:, -1].mean()) < -0.05:
            cause = "A negative bias pushes a unit's pre-activation below 0 for every input: start the biases at 0"
        else:
            cause = ("A unit whose pre-activation is negative for every input gets no gradient: draw the weights "
                     "with mean 0, and start the biases at 0")
        return f"{dead:.0%} of the units are dead (0 on all 512 inputs); at most 10% may be. {cause}"
    if moment < 0.25:
        return (f"the second moment of the pre-activations shrinks {1 / moment:.3g}-fold from layer 1 to layer "
                f"{depth}: {_init_causes(found, shrinks=True, gradient=False)}")
    if moment > 4:
        return (f"the second moment of the pre-activations grows {moment:.3g}-fold from layer 1 to layer {depth}: "
                f"{_init_causes(found, shrinks=False, gradient=False)}")
    if gradient < 0.5:
        return (f"the gradient's mean square shrinks {1 / gradient:.3g}-fold on its way back from layer {depth} to "
                f"layer 1: {_init_causes(found, shrinks=True, gradient=True)}")
    if gradient > 2:
        return (f"the gradient's mean square grows {gradient:.3g}-fold on its way back from layer {depth} to "
                f"layer 1: {_init_causes(found, shrinks=False, gradient=True)}")
    return None


check_relu_init = Measured(
    "on 6 fresh networks of 6 layers, at most 10% of the units are dead, and from layer 1 to layer 6 the "
    "second moment stays within a factor 4 and the gradient's mean square within a factor 2",
    relu_init_cases, he_init,
    describe=lambda depth, width, seed: f"depth {depth}, width {width}, seed {seed}",
    compared_with="He initialisation", noun="weights", layout="(depth, width + 1, width)",
    shape_hint=lambda shape, depth, width, seed: (
        ": the last row of each layer is its bias" if shape == (depth, width, width) else ""),
    rules=_relu_init_rules,
    forbidden=("torch.nn.init",),
)
