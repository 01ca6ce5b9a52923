"""Recurrent networks: RNN, GRU and LSTM cells and layers, and BPTT made visible.

Chapters 3 and 4 (syllabus RNN1-RNN6, GATE1-GATE4). *Cells* compute one time step from
their equations: :class:`RNNCell` (Elman, 1990), :class:`GRUCell` (Cho et al., 2014),
with the reset gate after the hidden product (PyTorch) or before it (Cho et al. and the
notes), and :class:`LSTMCell` (Hochreiter & Schmidhuber, 1997; forget gate of Gers et
al., 2000). *Layers* (:class:`RNN`, :class:`GRU`, :class:`LSTM`) run a cell over a
sequence, stacked and optionally bidirectional (Schuster & Paliwal, 1997); parameters
have PyTorch's names and layout, so ``from_torch`` loads ``torch.nn``'s weights and the
tests compare outputs. :func:`rnn_jacobian_norms`, :func:`jacobian_norms` and
:func:`bptt_terms` make backpropagation through time visible (Bengio et al., 1994;
Pascanu et al., 2013); :func:`clip_grad_norm` is ``torch.nn.utils.clip_grad_norm_``.

Conventions: rows, as the code: ``x`` is ``(B, D)``, weights are ``(out, in)``, so a
pre-activation reads ``x W_ih^T + b_ih + h W_hh^T + b_hh``. Layers are batch-first by
default; ``batch_first=False`` takes ``(T, B, D)``. Layer states are
``(L * directions, B, H)``; an LSTM's state is the pair ``(h, c)``. No dropout between
layers: the layers equal PyTorch's in evaluation mode.

References
----------
.. [1] J. L. Elman. "Finding Structure in Time". Cognitive Science 14(2), 1990.
.. [2] K. Cho, B. van Merrienboer, C. Gulcehre, D. Bahdanau, F. Bougares,
   H. Schwenk, Y. Bengio. "Learning Phrase Representations using RNN
   Encoder-Decoder for Statistical Machine Translation". EMNLP 2014.
.. [3] S. Hochreiter, J. Schmidhuber. "Long Short-Term Memory". Neural
   Computation 9(8), 1997.
.. [4] F. A. Gers, J. Schmidhuber, F. Cummins. "Learning to Forget: Continual
   Prediction with LSTM". Neural Computation 12(10), 2000.
.. [5] M. Schuster, K. K. Paliwal. "Bidirectional Recurrent Neural Networks".
   IEEE Transactions on Signal Processing 45(11), 1997.
.. [6] Y. Bengio, P. Simard, P. Frasconi. "Learning Long-Term Dependencies with
   Gradient Descent is Difficult". IEEE Transactions on Neural Networks 5(2), 1994.
.. [7] R. Pascanu, T. Mikolov, Y. Bengio. "On the Difficulty of Training
   Recurrent Neural Networks". ICML 2013. arXiv:1211.5063.
.. [8] R. Jozefowicz, W. Zaremba, I. Sutskever. "An Empirical Exploration of
   Recurrent Network Architectures". ICML 2015. (A positive forget-gate bias.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, Optional, Union, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from lib.checked import (
    NonNegativeInt,
    NonNegativeOrInf,
    PositiveInt,
    PositiveOrInf,
    same_dtype,
)

__all__ = [
    "RNNCell",
    "GRUCell",
    "LSTMCell",
    "RNN",
    "GRU",
    "LSTM",
    "GATES",
    "NONLINEARITIES",
    "RESET_MODES",
    "rnn_jacobian_norms",
    "bptt_terms",
    "jacobian_norms",
    "clip_grad_norm",
    "parameter_count",
]

# A cell's state: h, or the LSTM's pair (h, c); a layer's: the same with a first axis
# of L * directions.
State = Union[Float[Tensor, "B H"], tuple[Float[Tensor, "B H"], Float[Tensor, "B H"]]]
Stacked = Float[Tensor, "LD B H"]
LayerState = Union[Stacked, tuple[Stacked, Stacked]]

# Blocks of rows in weight_ih / weight_hh, in PyTorch's order: the number of gates.
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
MAX_PARAMETERS = 2**31  # 8 GiB of float32: more than a laptop holds
NONLINEARITIES = ("tanh", "relu", "linear")
RESET_MODES = ("after", "before")
Kind = Literal["rnn", "gru", "lstm"]
Nonlinearity = Literal["tanh", "relu", "linear"]
Reset = Literal["after", "before"]

_ACTIVATION = {"tanh": torch.tanh, "relu": torch.relu, "linear": lambda a: a}
# f'(a) written with the output h = f(a): what the Jacobian needs, without storing a.
_DERIVATIVE_FROM_OUTPUT = {
    "tanh": lambda h: 1.0 - h**2,
    "relu": lambda h: (h > 0).to(h.dtype),
    "linear": torch.ones_like,
}


# ---------------------------------------------------------------------------
# Cells: one time step. Parameters are named and laid out as PyTorch's.
# ---------------------------------------------------------------------------


class _Cell(nn.Module):
    """A cell with ``G = GATES[kind]`` blocks of ``H`` rows, initialised as PyTorch's.

    ``forward(x, state)`` is ``step(project(x), state)``: ``project`` is the share of
    the pre-activations that does not depend on the state, so a layer computes it for
    every time step at once and only calls ``step`` in its loop.
    """

    kind = ""

    def __init__(self, input_size: PositiveInt, hidden_size: PositiveInt, bias: bool):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = GATES[self.kind] * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))  # (G*H, D)
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))  # (G*H, H)
        self.bias_ih = nn.Parameter(torch.empty(rows)) if bias else None  # (G*H,)
        self.bias_hh = nn.Parameter(torch.empty(rows)) if bias else None  # (G*H,)
        bound = 1.0 / math.sqrt(hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    def forward(self, x: Float[Tensor, "B D"], state: State) -> State:
        """One step, as the equations write it."""
        pair = self.kind == "lstm"
        if isinstance(state, tuple) != pair:
            expected = "a pair (h, c)" if pair else "a tensor h"
            raise TypeError(f"state must be {expected}; found {type(state).__name__}")
        h = state[0] if pair else state  # (B, H)
        if (x.shape[1], h.shape[1]) != (self.input_size, self.hidden_size):
            raise ValueError(
                f"x and h must be (B, {self.input_size}) and (B, {self.hidden_size}); "
                f"found {tuple(x.shape)} and {tuple(h.shape)}"
            )
        parts = {"h": h, "c": state[1]} if pair else {"h": h}
        same_dtype(weight_ih=self.weight_ih, x=x, **parts)  # torch would not say which
        return self.step(self.project(x), state)

    @no_type_check  # once a layer, or a step of forward; checks x cheaply itself
    def project(self, x: Float[Tensor, "*batch D"]) -> Float[Tensor, "*batch GH"]:
        """``x W_ih^T + b_ih + b_hh``: the input's and the biases' share."""
        weight_ih = self.weight_ih  # (G*H, D)
        _check_input(weight_ih, x)
        bias = None if self.bias_ih is None else self.bias_ih + self.bias_hh  # (G*H,)
        return F.linear(x, weight_ih, bias)  # one product, bias added inside

    @property
    def state_size(self) -> int:
        """Length of the state vector: ``H``, or ``2H`` for the LSTM's ``(h, c)``."""
        return self.hidden_size

    def zero_state(
        self, batch_size: NonNegativeInt, like: Float[Tensor, "..."]
    ) -> State:
        """The state every sequence starts from when none is given: zeros."""
        return like.new_zeros(batch_size, self.hidden_size)

    @classmethod
    def from_torch(cls, module: nn.Module, **options: str) -> _Cell:
        """A cell with the weights of ``torch.nn.RNNCell`` / ``GRUCell`` / ``LSTMCell``
        (``options``: ``reset`` of :class:`GRUCell`)."""
        expected = {"rnn": nn.RNNCell, "gru": nn.GRUCell, "lstm": nn.LSTMCell}[cls.kind]
        if not isinstance(module, expected):
            raise TypeError(
                f"{cls.__name__}.from_torch expects a {expected.__name__}; "
                f"found {type(module).__name__}"
            )
        if cls.kind == "rnn":
            options.setdefault("nonlinearity", module.nonlinearity)
        cell = cls(module.input_size, module.hidden_size, bias=module.bias, **options)
        _copy_parameters(cell, module, suffix="")
        return cell


@no_type_check  # in each project: a few comparisons
def _check_input(weight_ih: Tensor, x: Tensor) -> None:
    """Raise unless ``x`` is ``(..., D)`` of the dtype of ``weight_ih`` (G*H, D)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor; found {type(x).__name__}")
    if x.dtype != weight_ih.dtype:
        raise TypeError(
            f"x must have the cell's dtype {weight_ih.dtype}; found {x.dtype}"
        )
    if x.dim() == 0 or x.shape[-1] != weight_ih.shape[1]:
        raise ValueError(
            f"x must have shape (..., D) = (..., {weight_ih.shape[1]}); "
            f"found {tuple(x.shape)}"
        )


@no_type_check  # per time step: each cell's step calls it (a few comparisons)
def _check_step(
    weight_hh: Tensor, x_part: Tensor, names: tuple[str, ...], *state: Tensor
) -> None:
    """Raise unless ``x_part`` is ``(B, G*H)`` and each tensor of ``state`` (called
    ``names``) is ``(B, H)``, all of the dtype of ``weight_hh`` (``(G*H, H)``): torch
    would say "mat1 and mat2", or broadcast a missing axis silently."""
    dtype, (rows, size) = weight_hh.dtype, weight_hh.shape
    if isinstance(x_part, Tensor) and x_part.dtype == dtype and x_part.dim() == 2:
        batch, width = x_part.shape
        for tensor in state:
            if not isinstance(tensor, Tensor) or tensor.dtype != dtype:
                break
            if tensor.shape != (batch, size):
                break
        else:
            if width == rows:
                return
    # Something is wrong: find what, and say it.
    batch = "B"
    for tensor in (state[0], x_part):  # B as h gives it, else as x_part does
        if isinstance(tensor, Tensor) and tensor.dim() == 2:
            batch = len(tensor)
            break
    wanted = [("x_part", x_part, rows, "G*H")]
    wanted += [(name, tensor, size, "H") for name, tensor in zip(names, state)]
    for name, tensor, width, letters in wanted:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{name} must be a tensor; found {type(tensor).__name__}")
        if tensor.dtype != dtype:
            raise TypeError(
                f"{name} must have the cell's dtype {dtype}; found {tensor.dtype}"
            )
        if tensor.shape != (batch, width):
            raise ValueError(
                f"{name} must have shape (B, {letters}) = ({batch}, {width}); "
                f"found {tuple(tensor.shape)}"
            )


def _copy_parameters(cell: _Cell, module: nn.Module, suffix: str) -> None:
    """Copy ``weight_ih<suffix>`` etc. of a torch module into ``cell`` (dtype too)."""
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            target = getattr(cell, name)
            if target is not None:
                target.data = getattr(module, name + suffix).detach().clone()


class RNNCell(_Cell):
    r"""One step of a simple (Elman) recurrent network, with ``f`` its nonlinearity.

    .. math:: \mathbf{h}_t = f(\mathbf{x}_t \mathbf{W}_{ih}^\top + \mathbf{b}_{ih}
              + \mathbf{h}_{t-1} \mathbf{W}_{hh}^\top + \mathbf{b}_{hh})

    ``"linear"`` (no ``f``, not in PyTorch) is the network the notes use to derive
    vanishing gradients.
    """

    kind = "rnn"

    def __init__(
        self,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        nonlinearity: Nonlinearity = "tanh",
        bias: bool = True,
    ):
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = nonlinearity

    @no_type_check  # per time step in a layer's loop; checks cheaply itself
    def step(
        self, x_part: Float[Tensor, "B GH"], h: Float[Tensor, "B H"]
    ) -> Float[Tensor, "B H"]:
        """The step from ``x_part = project(x)``, computed beforehand."""
        weight_hh = self.weight_hh  # (H, H)
        _check_step(weight_hh, x_part, ("h",), h)
        f = _ACTIVATION[self.nonlinearity]
        a = torch.addmm(x_part, h, weight_hh.T)  # x_part + h W_hh^T in one call
        return f(a)


class GRUCell(_Cell):
    r"""One step of a gated recurrent unit; PyTorch's row blocks are r, z, n.

    .. math::
        \mathbf{r} &= \sigma(\mathbf{x} \mathbf{W}_{ir}^\top + \mathbf{b}_{ir}
                      + \mathbf{h} \mathbf{W}_{hr}^\top + \mathbf{b}_{hr}),\quad
        \mathbf{z} = \sigma(\ldots\text{ the same with } z) \\
        \mathbf{n} &= \tanh(\mathbf{x} \mathbf{W}_{in}^\top + \mathbf{b}_{in}
            + \mathbf{r} \odot (\mathbf{h} \mathbf{W}_{hn}^\top + \mathbf{b}_{hn}))
                      \quad \text{(reset="after", PyTorch)} \\
        \mathbf{n} &= \tanh(\mathbf{x} \mathbf{W}_{in}^\top + \mathbf{b}_{in}
            + (\mathbf{r} \odot \mathbf{h}) \mathbf{W}_{hn}^\top + \mathbf{b}_{hn})
                      \quad \text{(reset="before", Cho et al., the notes)} \\
        \mathbf{h}' &= (1 - \mathbf{z}) \odot \mathbf{n} + \mathbf{z} \odot \mathbf{h}

    ``z`` is the share of the old state that is kept; the notes' update gate is
    :math:`\Gamma_u = 1 - \mathbf{z} = \sigma(-\ldots)`.
    """

    kind = "gru"

    def __init__(
        self,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        bias: bool = True,
        reset: Reset = "after",
    ):
        super().__init__(input_size, hidden_size, bias)
        self.reset = reset

    @no_type_check  # once a layer, or a step of forward; checks x cheaply itself
    def project(self, x: Float[Tensor, "*batch D"]) -> Float[Tensor, "*batch GH"]:
        """``x W_ih^T + b_ih``: ``b_hh`` stays with ``h W_hh^T``, which r scales."""
        weight_ih = self.weight_ih  # (3H, D)
        _check_input(weight_ih, x)
        return F.linear(x, weight_ih, self.bias_ih)

    @no_type_check  # per time step in a layer's loop; checks cheaply itself
    def step(
        self, x_part: Float[Tensor, "B GH"], h: Float[Tensor, "B H"]
    ) -> Float[Tensor, "B H"]:
        """The step from ``x_part = project(x)``, computed beforehand."""
        weight_hh = self.weight_hh  # (3H, H)
        _check_step(weight_hh, x_part, ("h",), h)
        x_r, x_z, x_n = x_part.chunk(3, dim=-1)  # (B, H) each
        h_part = F.linear(h, weight_hh, self.bias_hh)  # (B, 3H)
        h_r, h_z, h_n = h_part.chunk(3, dim=-1)  # (B, H) each
        r = torch.sigmoid(x_r + h_r)  # reset gate
        z = torch.sigmoid(x_z + h_z)  # update gate: the share of h that is kept
        if self.reset == "after":
            n = torch.tanh(x_n + r * h_n)  # r scales h W_hn^T + b_hn
        else:
            W_hn = weight_hh[2 * self.hidden_size :]  # (H, H)
            b_hn = (
                None if self.bias_hh is None else self.bias_hh[2 * self.hidden_size :]
            )
            n = torch.tanh(x_n + F.linear(r * h, W_hn, b_hn))  # r scales h itself
        return (1 - z) * n + z * h


class LSTMCell(_Cell):
    r"""One step of a long short-term memory cell; PyTorch's row blocks are i, f, g, o.

    With :math:`\mathbf{a} = \mathbf{x} \mathbf{W}_{ih}^\top + \mathbf{b}_{ih}
    + \mathbf{h} \mathbf{W}_{hh}^\top + \mathbf{b}_{hh}`:

    .. math::
        \mathbf{i}, \mathbf{f}, \mathbf{o} = \sigma(\mathbf{a}_{i,f,o}),\quad
        \mathbf{g} = \tanh(\mathbf{a}_g),\quad
        \mathbf{c}' = \mathbf{f} \odot \mathbf{c} + \mathbf{i} \odot \mathbf{g},\quad
        \mathbf{h}' = \mathbf{o} \odot \tanh(\mathbf{c}')

    The notes write :math:`\mathbf{h}' = \mathbf{o} \odot \mathbf{c}'`; PyTorch's tanh
    keeps ``h`` in (-1, 1) however large the cell grows.
    """

    kind = "lstm"

    def __init__(
        self, input_size: PositiveInt, hidden_size: PositiveInt, bias: bool = True
    ):
        super().__init__(input_size, hidden_size, bias)

    @property
    def state_size(self) -> int:
        return 2 * self.hidden_size

    def zero_state(
        self, batch_size: NonNegativeInt, like: Float[Tensor, "..."]
    ) -> State:
        zeros = like.new_zeros(batch_size, self.hidden_size)
        return zeros, zeros

    @no_type_check  # per time step in a layer's loop; checks cheaply itself
    def step(
        self,
        x_part: Float[Tensor, "B GH"],
        state: tuple[Float[Tensor, "B H"], Float[Tensor, "B H"]],
    ) -> tuple[Float[Tensor, "B H"], Float[Tensor, "B H"]]:
        """The step from ``x_part = project(x)``, computed beforehand."""
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(f"state must be a pair (h, c); found {state!r:.60}")
        h, c = state
        weight_hh = self.weight_hh  # (4H, H)
        _check_step(weight_hh, x_part, ("state's h", "state's c"), h, c)
        a = torch.addmm(x_part, h, weight_hh.T)  # x_part + h W_hh^T: (B, 4H)
        a_i, a_f, a_g, a_o = a.chunk(4, dim=-1)  # four blocks of (B, H)
        i, f, o = torch.sigmoid(a_i), torch.sigmoid(a_f), torch.sigmoid(a_o)
        g = torch.tanh(a_g)
        c = f * c + i * g  # forget part of the old memory, write part of the candidate
        h = o * torch.tanh(c)  # tanh bounds h in (-1, 1); the notes' o * c would not
        return h, c


# ---------------------------------------------------------------------------
# Layers: a cell run over time, stacked in layers, in one or two directions.
# ---------------------------------------------------------------------------


class _Recurrent(nn.Module):
    """A stack of ``num_layers`` layers of cells; see :class:`RNN` for the interface."""

    cell_class: type = _Cell
    torch_class: type = nn.Module

    # RNN, GRU and LSTM declare the rules of these arguments; this does not repeat them.
    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers,
        bias,
        batch_first,
        bidirectional,
        **cell,
    ):
        super().__init__()
        size = parameter_count(
            self.cell_class.kind,
            input_size,
            hidden_size,
            num_layers,
            bidirectional,
            bias,
        )
        if size > MAX_PARAMETERS:  # torch would try to allocate them, or loop for hours
            raise ValueError(
                f"{type(self).__name__} of num_layers={num_layers}, hidden_size="
                f"{hidden_size} would hold {size:.3g} parameters; at most 2**31 fit"
            )
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.batch_first = num_layers, batch_first
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        # cells[layer * directions + direction], as PyTorch orders h_n; a layer above
        # the first reads the outputs of both directions below it.
        widths = [input_size] + [hidden_size * self.num_directions] * (num_layers - 1)
        self.cells = nn.ModuleList(
            self.cell_class(width, hidden_size, bias=bias, **cell)
            for width in widths
            for _ in range(self.num_directions)
        )

    def forward(
        self,
        x: Float[Tensor, "_ _ D"],
        state: Optional[LayerState] = None,
        reference: bool = False,
    ) -> tuple[Float[Tensor, "_ _ _"], LayerState]:
        """``output, h_n`` (an LSTM: ``output, (h_n, c_n)``); see :class:`RNN`."""
        if not self.batch_first:
            x = x.transpose(0, 1)  # (T, B, D) -> (B, T, D)
        batch_size, steps, width = x.shape
        if width != self.input_size or steps == 0:
            raise ValueError(
                f"x must hold T >= 1 steps of D = {self.input_size} features; "
                f"found T = {steps}, D = {width}"
            )
        same_dtype(parameters=self.cells[0].weight_ih, x=x)
        initial = _initial_states(self, state, x)
        finals = []
        layer_input = x  # (B, T, D), then (B, T, directions * H)
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                cell, s = self.cells[index], initial[index]
                if reference:  # the cell's forward, as the equations write it
                    inputs, step = layer_input.unbind(1), cell  # T tensors (B, D)
                else:
                    # x_t W_ih^T and the biases do not depend on the state: one product
                    # of B*T rows computes them for every step (as torch.nn does).
                    projected = cell.project(layer_input)  # (B, T, G*H)
                    inputs, step = projected.unbind(1), cell.step  # T tensors (B, G*H)
                hidden = [None] * steps
                # The backward direction reads from the end; its output at step t
                # still sits at position t, beside the forward one.
                for t in range(steps) if direction == 0 else reversed(range(steps)):
                    s = step(inputs[t], s)
                    hidden[t] = s[0] if isinstance(s, tuple) else s  # h of (h, c)
                outputs.append(torch.stack(hidden, dim=1))  # (B, T, H)
                finals.append(s)
            layer_input = torch.cat(outputs, dim=-1)  # (B, T, directions * H)
        output = layer_input if self.batch_first else layer_input.transpose(0, 1)
        return output, _stacked(finals)

    @classmethod
    def from_torch(cls, module: nn.Module, **options: str) -> _Recurrent:
        """A layer with the configuration and weights of a PyTorch module of its kind
        (``options``: ``reset`` of :class:`GRU`)."""
        if not isinstance(module, cls.torch_class):
            expected, found = cls.torch_class.__name__, type(module).__name__
            raise TypeError(
                f"{cls.__name__}.from_torch expects a torch.nn.{expected}; "
                f"found {found}"
            )
        if getattr(module, "proj_size", 0):
            raise ValueError(
                "LSTM projections are not supported: expected proj_size = 0; "
                f"found {module.proj_size}"
            )
        if cls is RNN:
            options.setdefault("nonlinearity", module.nonlinearity)
        names = ("input_size", "hidden_size", "num_layers", "bias", "batch_first")
        config = {name: getattr(module, name) for name in names + ("bidirectional",)}
        layer = cls(**config, **options)
        for index, cell in enumerate(layer.cells):
            number, direction = divmod(index, layer.num_directions)
            suffix = f"_l{number}" + ("_reverse" if direction else "")
            _copy_parameters(cell, module, suffix)
        return layer


def _initial_states(
    layer: _Recurrent, state: Optional[LayerState], x: Float[Tensor, "_ _ _"]
) -> list[State]:
    """One initial state per cell, from ``(L * directions, B, H)`` tensors or zeros."""
    if state is None:
        return [cell.zero_state(x.shape[0], x) for cell in layer.cells]
    pair = layer.cell_class is LSTMCell
    if isinstance(state, tuple) != pair:
        expected = "a pair (h_0, c_0)" if pair else "a tensor h_0"
        raise TypeError(f"state must be {expected}; found {type(state).__name__}")
    expected = (len(layer.cells), x.shape[0], layer.hidden_size)
    for name, tensor in zip(("h_0", "c_0"), state if pair else (state,)):
        if tuple(tensor.shape) != expected:
            found = tuple(tensor.shape)
            raise ValueError(
                f"{name} must be (L * directions, B, H) = {expected}; found {found}"
            )
        same_dtype(x=x, **{name: tensor})
    return list(zip(state[0], state[1])) if pair else list(state)


def _stacked(finals: list[State]) -> LayerState:
    """The cells' final states as one ``(L * directions, B, H)`` (an LSTM: a pair)."""
    if isinstance(finals[0], tuple):
        return torch.stack([h for h, _ in finals]), torch.stack([c for _, c in finals])
    return torch.stack(finals)


class RNN(_Recurrent):
    """A (multi-layer, optionally bidirectional) simple recurrent network.

    ``forward(x, h_0=None)`` returns the last layer's ``h`` at every step (both
    directions concatenated, forward first) and ``h_n``, every cell's final state
    (``L * directions`` of them, layer by layer; the backward one's is after reading
    the first element). ``x`` and ``output`` are ``(B, T, ...)``, or ``(T, B, ...)`` if
    not ``batch_first``. A layer projects every ``x_t`` in one product before its time
    loop; ``reference=True`` calls the cell at every step instead, as the equations
    read (same results up to rounding).
    """

    cell_class, torch_class = RNNCell, nn.RNN

    def __init__(
        self,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        num_layers: PositiveInt = 1,
        nonlinearity: Nonlinearity = "tanh",
        bias: bool = True,
        batch_first: bool = True,
        bidirectional: bool = False,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            bidirectional,
            nonlinearity=nonlinearity,
        )


class GRU(_Recurrent):
    """A GRU layer; arguments as :class:`RNN`, plus ``reset`` (:class:`GRUCell`)."""

    cell_class, torch_class = GRUCell, nn.GRU

    def __init__(
        self,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        num_layers: PositiveInt = 1,
        bias: bool = True,
        batch_first: bool = True,
        bidirectional: bool = False,
        reset: Reset = "after",
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            bidirectional,
            reset=reset,
        )


class LSTM(_Recurrent):
    """An LSTM layer; arguments as :class:`RNN`, states the pairs ``(h, c)``."""

    cell_class, torch_class = LSTMCell, nn.LSTM

    def __init__(
        self,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        num_layers: PositiveInt = 1,
        bias: bool = True,
        batch_first: bool = True,
        bidirectional: bool = False,
    ):
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, bidirectional
        )


# ---------------------------------------------------------------------------
# Backpropagation through time, made visible.
# ---------------------------------------------------------------------------


def rnn_jacobian_norms(
    cell: RNNCell, x: Float[Tensor, "B T D"], h: Optional[Float[Tensor, "B H"]] = None
) -> Float[Tensor, "B T+1"]:
    r"""``norms[b, k]`` = :math:`\lVert \partial \mathbf{h}_T / \partial \mathbf{h}_k
    \rVert_2` for ``k = 0 .. T``: the spectral norm of the product of the one-step
    Jacobians :math:`\operatorname{diag}(f'(\mathbf{a}_t))\, \mathbf{W}_{hh}`, which
    bounds how much of a gradient from step ``T`` reaches step ``k``."""
    if x.shape[2] != cell.input_size or x.shape[1] == 0:
        raise ValueError(
            f"x must hold T >= 1 steps of D = {cell.input_size} features; "
            f"found shape {tuple(x.shape)}"
        )
    h = cell.zero_state(x.shape[0], x) if h is None else h
    with torch.no_grad():
        hidden = []
        for t in range(x.shape[1]):
            h = cell(x[:, t], h)
            hidden.append(h)  # h_1 .. h_T, each (B, H)
    slopes = _DERIVATIVE_FROM_OUTPUT[cell.nonlinearity]
    weight_hh = cell.weight_hh.detach()  # (H, H)
    identity = torch.eye(cell.hidden_size, dtype=x.dtype)
    product = identity.expand(x.shape[0], -1, -1)  # (B, H, H): ∂h_T/∂h_T
    norms = [torch.linalg.matrix_norm(product, ord=2)]
    for h_t in reversed(hidden):  # t = T .. 1
        jacobian = slopes(h_t)[:, :, None] * weight_hh  # diag(f'(a_t)) W_hh: (B, H, H)
        product = product @ jacobian  # ∂h_T/∂h_{t-1}
        norms.append(torch.linalg.matrix_norm(product, ord=2))
    return torch.stack(norms[::-1], dim=1)  # (B, T + 1), k = 0 first


def bptt_terms(
    cell: RNNCell,
    x: Float[Tensor, "B T D"],
    grad: Float[Tensor, "B H"],
    h: Optional[Float[Tensor, "B H"]] = None,
) -> Float[Tensor, "B T H H"]:
    r"""Every step's term of the gradient of :math:`\sum_b \mathbf{g}_b \cdot
    \mathbf{h}_{T,b}` (``g = grad``) with respect to the recurrent weights.

    :math:`\partial L / \partial \mathbf{W}_{hh} = \sum_{k=1}^{T} \boldsymbol{\delta}_k
    \mathbf{h}_{k-1}^\top`, with :math:`\boldsymbol{\delta}_T = f'(\mathbf{a}_T) \odot
    \mathbf{g}` and :math:`\boldsymbol{\delta}_{k-1} = f'(\mathbf{a}_{k-1}) \odot
    \mathbf{W}_{hh}^\top \boldsymbol{\delta}_k`. ``terms[b, k - 1]`` is laid out as
    ``cell.weight_hh``; summed over ``b`` and ``k`` it is ``cell.weight_hh.grad``.
    """
    if grad.shape[1] != cell.hidden_size:
        raise ValueError(
            f"grad must be (B, {cell.hidden_size}); found {tuple(grad.shape)}"
        )
    if x.shape[1] == 0:
        raise ValueError(f"x must hold T >= 1 steps; found {tuple(x.shape)}")
    same_dtype(x=x, grad=grad)
    with torch.no_grad():
        states = [cell.zero_state(x.shape[0], x) if h is None else h]
        for t in range(x.shape[1]):
            states.append(cell(x[:, t], states[-1]))  # h_0 .. h_T, each (B, H)
        slopes = _DERIVATIVE_FROM_OUTPUT[cell.nonlinearity]
        weight_hh = cell.weight_hh.detach()  # (H, H)
        terms = []
        delta = slopes(states[-1]) * grad  # (B, H): ∂L/∂a_T
        for k in range(x.shape[1], 0, -1):  # k = T .. 1
            h_before = states[k - 1][:, None, :]  # (B, 1, H)
            terms.append(delta[:, :, None] * h_before)  # δ_k h_(k-1)^T: (B, H, H)
            delta = slopes(states[k - 1]) * (delta @ weight_hh)  # (B, H): ∂L/∂a_(k-1)
    return torch.stack(terms[::-1], dim=1)  # (B, T, H, H), k = 1 first


def jacobian_norms(
    cell: Union[RNNCell, GRUCell, LSTMCell],
    x: Float[Tensor, "B T D"],
    state: Optional[State] = None,
) -> Float[Tensor, "B T+1"]:
    r"""``norms[b, k]`` = :math:`\lVert \partial \mathbf{h}_T / \partial \mathbf{s}_k
    \rVert_2` for any cell, with the state :math:`\mathbf{s}` the LSTM's
    :math:`[\mathbf{h}; \mathbf{c}]` (else ``h``) and the one-step Jacobians from
    autograd; for an :class:`RNNCell` it equals :func:`rnn_jacobian_norms`."""
    state = cell.zero_state(x.shape[0], x) if state is None else state
    pair = isinstance(cell, LSTMCell)
    if isinstance(state, tuple) != pair:
        expected = "a pair (h, c)" if pair else "a tensor h"
        raise TypeError(f"state must be {expected}; found {type(state).__name__}")
    if x.shape[1] == 0:
        raise ValueError(f"x must hold T >= 1 steps; found shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():  # torch.linalg would fail on the NaN Jacobians
        raise ValueError("x must be finite; found NaN or inf")

    def flatten(state):  # (h, c) -> [h, c]: (B, S)
        return torch.cat(state, dim=-1) if pair else state

    def unflatten(flat):  # (B, S) -> (h, c)
        return tuple(flat.split(cell.hidden_size, dim=-1)) if pair else flat

    def step(flat_state, x_t):  # one sequence: (S,), (D,) -> (S,)
        state = unflatten(flat_state[None])  # checked by the loop's cell call
        return flatten(cell.step(cell.project(x_t[None]), state))[0]

    one_step_jacobian = torch.func.vmap(torch.func.jacrev(step))  # -> (B, S, S)
    flat = flatten(state).detach()  # (B, S)
    jacobians = []
    for t in range(x.shape[1]):
        with torch.no_grad():
            after = flatten(cell(x[:, t], unflatten(flat)))  # checks x and the state
        jacobians.append(one_step_jacobian(flat, x[:, t]).detach())  # ∂s_{t+1}/∂s_t
        flat = after
    with torch.no_grad():
        rows = torch.eye(cell.hidden_size, cell.state_size, dtype=x.dtype)  # the h rows
        product = rows.expand(x.shape[0], -1, -1)  # (B, H, S): ∂h_T/∂s_T
        norms = [torch.linalg.matrix_norm(product, ord=2)]
        for jacobian in reversed(jacobians):
            product = product @ jacobian  # (B, H, S): one step further back
            norms.append(torch.linalg.matrix_norm(product, ord=2))
    return torch.stack(norms[::-1], dim=1)  # (B, T + 1)


def clip_grad_norm(
    parameters: Union[Float[Tensor, "..."], Iterable[Float[Tensor, "..."]]],
    max_norm: NonNegativeOrInf,
    norm_type: PositiveOrInf = 2.0,
    error_if_nonfinite: bool = False,
) -> Float[Tensor, ""]:
    r"""Scale all gradients by :math:`\min(1, \text{max\_norm} / (\lVert \mathbf{g}
    \rVert_q + 10^{-6}))`, the norm of all of them as one vector; return that norm.

    ``torch.nn.utils.clip_grad_norm_`` bit for bit, non-finite norms included.
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for parameter in parameters:  # a generator is read once, into the list
        if not isinstance(parameter, Tensor):
            found = type(parameter).__name__
            raise TypeError(f"parameters must be tensors; found {found}")
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    q = float(norm_type)
    norms = torch.stack([torch.linalg.vector_norm(g, q) for g in grads])  # (P,)
    total = torch.linalg.vector_norm(norms, q)
    if error_if_nonfinite and not bool(torch.isfinite(total)):
        raise RuntimeError(
            "the global gradient norm must be finite to be clipped; found "
            f"{float(total)} (pass error_if_nonfinite=False to scale by it anyway, "
            "as PyTorch does)"
        )
    # 1e-6 keeps the division finite for zero gradients; the coefficient is capped at
    # 1, so gradients that are small enough are multiplied by exactly 1.
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    with torch.no_grad():
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total


def parameter_count(
    kind: Kind,
    input_size: PositiveInt,
    hidden_size: PositiveInt,
    num_layers: PositiveInt = 1,
    bidirectional: bool = False,
    bias: bool = True,
) -> PositiveInt:
    r"""The parameters of an RNN, GRU or LSTM layer: :math:`G(H D_\text{in} + H^2 + 2H)`
    a cell, with :math:`D_\text{in} = D` in the first layer, ``directions * H`` above.
    """
    directions = 2 if bidirectional else 1
    biases = 2 * hidden_size if bias else 0

    def per_cell(reads: PositiveInt) -> PositiveInt:
        return GATES[kind] * (hidden_size * reads + hidden_size**2 + biases)

    upper = per_cell(hidden_size * directions)  # a layer above the first
    return directions * (per_cell(input_size) + (num_layers - 1) * upper)
