"""Recurrent networks: RNN, GRU and LSTM cells and layers, and BPTT made visible.

The module follows chapters 3 and 4 (syllabus RNN1-RNN6, GATE1-GATE4):

1. *Cells* compute one time step from their equations: :class:`RNNCell`
   (Elman, 1990), :class:`GRUCell` (Cho et al., 2014) with the reset gate applied
   after the hidden matrix product (PyTorch) or before it (Cho et al. and the
   lecture notes), and :class:`LSTMCell` (Hochreiter & Schmidhuber, 1997, with
   the forget gate of Gers et al., 2000).
2. *Layers* (:class:`RNN`, :class:`GRU`, :class:`LSTM`) run a cell over a
   sequence, stacked in layers and optionally bidirectional (Schuster & Paliwal,
   1997). Their parameters have PyTorch's names and layout, so ``from_torch``
   loads the weights of ``torch.nn.RNN`` / ``GRU`` / ``LSTM`` and the tests
   check that outputs and final states then agree. A layer projects the whole
   input sequence in one matrix product before its time loop; the step-by-step
   form (``reference=True``) stays, and the tests check that both agree.
3. *Backpropagation through time made visible*: :func:`rnn_jacobian_norms` and
   :func:`jacobian_norms` return how strongly the last hidden state depends on
   the state at every earlier step, the product of one-step Jacobians that
   vanishes or explodes (Bengio et al., 1994; Pascanu et al., 2013), and
   :func:`bptt_terms` splits the gradient of the recurrent weights into the
   contribution of every step;
   :func:`clip_grad_norm` clips gradients by their global norm, exactly as
   ``torch.nn.utils.clip_grad_norm_``.
4. :func:`parameter_count` gives the size of each layer from its formula.

What the chapters train these layers on lives elsewhere: the character-level
language model in :mod:`lib.char_lm` (chapter 3), the long-range memory task in
:mod:`lib.tasks.recall` and its experiment in :mod:`lib.gating` (chapter 4).

Conventions. Formulas use rows, as the code: a batch of inputs ``x`` is
``(B, D)``, weights are stored as PyTorch stores them, ``(out, in)``, so a
pre-activation reads ``x W_ih^T + b_ih + h W_hh^T + b_hh``. Layers are
batch-first by default (``(B, T, D)``); ``batch_first=False`` takes ``(T, B, D)``
as PyTorch's default does. States are ``(L * directions, B, H)`` either way.
An LSTM's state is the pair ``(h, c)``; the other cells' state is ``h``. The
layers have no dropout between layers: they equal the PyTorch modules in
evaluation mode.

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
from typing import Iterable, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.validation import check_module_dtype, require_choice, require_float_tensor, require_instance, require_int

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

State = Union[Tensor, tuple[Tensor, Tensor]]

# Blocks of rows in weight_ih / weight_hh, in PyTorch's order: the number of gates.
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
NONLINEARITIES = ("tanh", "relu", "linear")
RESET_MODES = ("after", "before")

_ACTIVATION = {"tanh": torch.tanh, "relu": torch.relu, "linear": lambda a: a}
# f'(a) written with the output h = f(a): what the RNN Jacobian needs, without storing a.
_DERIVATIVE_FROM_OUTPUT = {
    "tanh": lambda h: 1.0 - h**2,
    "relu": lambda h: (h > 0).to(h.dtype),
    "linear": torch.ones_like,
}


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


# A bound on stacked layers: each layer builds its cells at once, so a huge count would
# allocate without end instead of failing.
MAX_LAYERS = 1000


def _check_sizes(input_size: object, hidden_size: object, bias: object) -> None:
    require_int("input_size", input_size), require_int("hidden_size", hidden_size)
    require_instance("bias", bias, bool)


def _check_stack(num_layers: object, batch_first: object, bidirectional: object) -> None:
    require_int("num_layers", num_layers, maximum=MAX_LAYERS)
    require_instance("batch_first", batch_first, bool), require_instance("bidirectional", bidirectional, bool)


def _check_shape(name: str, tensor: object, expected: tuple, layout: str) -> None:
    require_float_tensor(name, tensor)
    if tuple(tensor.shape) != tuple(expected):
        raise ValueError(f"{name} must have shape {layout} = {tuple(expected)}; found {tuple(tensor.shape)}")


# ---------------------------------------------------------------------------
# Cells: one time step. Parameters are named and laid out as PyTorch's.
# ---------------------------------------------------------------------------


def _affine(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``x W^T + b`` for rows ``x`` of any leading shape (no bias if ``bias`` is None).

    ``F.linear`` adds the bias inside the matrix product, and a ``(B, T, D)`` input
    becomes one ``(B*T, D)`` product: no separate pass over the result to add ``b``.
    """
    return F.linear(x, weight, bias)


class _Cell(nn.Module):
    """Parameters of a cell with ``G = GATES[kind]`` blocks of ``H`` rows, initialised as PyTorch does.

    A cell's ``forward(x, state)`` is two parts: :meth:`project`, the share of the
    pre-activations that does not depend on the state (``x W_ih^T`` and biases),
    and ``step(x_part, state)``, which adds the state's share and applies the
    gates. ``forward`` is one step as the equations write it; a layer projects a
    whole sequence in one matrix product and calls ``step`` at every time step
    (see :meth:`_Recurrent.forward`).
    """

    kind = ""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        _check_sizes(input_size, hidden_size, bias)
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = GATES[self.kind] * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))  # (G*H, D)
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))  # (G*H, H)
        self.bias_ih = nn.Parameter(torch.empty(rows)) if bias else None  # (G*H,)
        self.bias_hh = nn.Parameter(torch.empty(rows)) if bias else None  # (G*H,)
        bound = 1.0 / math.sqrt(hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    def project(self, x: Tensor) -> Tensor:
        """``x W_ih^T + b_ih + b_hh``: what the pre-activations owe to the input and the biases.

        Shapes
        ------
        x : (..., D)
        output : (..., G*H)
        """
        bias = None if self.bias_ih is None else self.bias_ih + self.bias_hh  # (G*H,)
        return _affine(x, self.weight_ih, bias)

    @property
    def state_size(self) -> int:
        """Length of the state vector: ``H``, or ``2H`` for the LSTM's ``(h, c)``."""
        return self.hidden_size

    def zero_state(self, batch_size: int, like: Tensor) -> State:
        """The state every sequence starts from when none is given: zeros."""
        return like.new_zeros(batch_size, self.hidden_size)

    def check_input(self, x: object, state: object) -> None:
        """Raise if ``x`` is not ``(B, D)`` or the state not ``(B, H)`` (LSTM: a pair of them)."""
        require_float_tensor("x", x)
        if x.dim() != 2 or x.shape[1] != self.input_size:
            raise ValueError(f"x must have shape (B, D) with D = {self.input_size}; found {tuple(x.shape)}")
        check_module_dtype("x", x, self)
        expected = (x.shape[0], self.hidden_size)
        if self.kind == "lstm":
            if not isinstance(state, tuple) or len(state) != 2:
                raise TypeError(f"the LSTM state must be a pair (h, c); found {type(state).__name__}")
            _check_shape("h", state[0], expected, "(B, H)")
            _check_shape("c", state[1], expected, "(B, H)")
        else:
            _check_shape("h", state, expected, "(B, H)")

    @classmethod
    def from_torch(cls, module: nn.Module, **options) -> "_Cell":
        """A cell with the weights of ``torch.nn.RNNCell`` / ``GRUCell`` / ``LSTMCell``.

        ``options`` are extra arguments of this class (``reset`` for :class:`GRUCell`).
        """
        expected = {"rnn": nn.RNNCell, "gru": nn.GRUCell, "lstm": nn.LSTMCell}[cls.kind]
        if not isinstance(module, expected):
            raise TypeError(f"{cls.__name__}.from_torch expects a {expected.__name__}; found {type(module).__name__}")
        if cls.kind == "rnn":
            options.setdefault("nonlinearity", module.nonlinearity)
        cell = cls(module.input_size, module.hidden_size, bias=module.bias, **options)
        _copy_parameters(cell, module, suffix="")
        return cell


def _copy_parameters(cell: _Cell, module: nn.Module, suffix: str) -> None:
    """Copy ``weight_ih<suffix>`` etc. of a torch module into ``cell`` (dtype included)."""
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            target = getattr(cell, name)
            if target is not None:
                source = getattr(module, name + suffix)
                target.data = source.detach().clone()


class RNNCell(_Cell):
    r"""One step of a simple (Elman) recurrent network.

    .. math:: \mathbf{h}_t = f(\mathbf{x}_t \mathbf{W}_{ih}^\top + \mathbf{b}_{ih}
              + \mathbf{h}_{t-1} \mathbf{W}_{hh}^\top + \mathbf{b}_{hh})

    Parameters
    ----------
    input_size, hidden_size : int
        ``D`` and ``H``.
    nonlinearity : {"tanh", "relu", "linear"}
        ``f``. PyTorch offers the first two; ``"linear"`` (no nonlinearity) is the
        simplified network that the lecture notes use to derive vanishing gradients.
    bias : bool
        Whether to add ``b_ih`` and ``b_hh``.

    Shapes
    ------
    x : (B, D)
    h : (B, H)
    output : (B, H), the new state
    weight_ih : (H, D); weight_hh : (H, H); bias_ih, bias_hh : (H,)
    """

    kind = "rnn"

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh", bias: bool = True):
        require_choice("nonlinearity", nonlinearity, NONLINEARITIES)
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = nonlinearity

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        self.check_input(x, h)
        return self.step(self.project(x), h)

    def step(self, x_part: Tensor, h: Tensor) -> Tensor:
        """The step from ``x_part = x W_ih^T + b_ih + b_hh`` (:meth:`project`), computed beforehand.

        The inputs are not checked: :meth:`forward` and the layers check them once.

        Shapes
        ------
        x_part, h, output : (B, H)
        """
        f = _ACTIVATION[self.nonlinearity]
        a = torch.addmm(x_part, h, self.weight_hh.T)  # x_part + h W_hh^T in one call: (B, H)
        return f(a)


class GRUCell(_Cell):
    r"""One step of a gated recurrent unit, with the reset gate after or before ``W_hn``.

    With the rows of the weights split into reset (r), update (z) and
    candidate (n) blocks, as PyTorch orders them:

    .. math::
        \mathbf{r} &= \sigma(\mathbf{x} \mathbf{W}_{ir}^\top + \mathbf{b}_{ir}
                      + \mathbf{h} \mathbf{W}_{hr}^\top + \mathbf{b}_{hr}) \\
        \mathbf{z} &= \sigma(\mathbf{x} \mathbf{W}_{iz}^\top + \mathbf{b}_{iz}
                      + \mathbf{h} \mathbf{W}_{hz}^\top + \mathbf{b}_{hz}) \\
        \mathbf{n} &= \tanh(\mathbf{x} \mathbf{W}_{in}^\top + \mathbf{b}_{in}
                      + \mathbf{r} \odot (\mathbf{h} \mathbf{W}_{hn}^\top + \mathbf{b}_{hn}))
                      \quad \text{(reset="after", PyTorch)} \\
        \mathbf{n} &= \tanh(\mathbf{x} \mathbf{W}_{in}^\top + \mathbf{b}_{in}
                      + (\mathbf{r} \odot \mathbf{h}) \mathbf{W}_{hn}^\top + \mathbf{b}_{hn})
                      \quad \text{(reset="before", Cho et al. and the notes)} \\
        \mathbf{h}' &= (1 - \mathbf{z}) \odot \mathbf{n} + \mathbf{z} \odot \mathbf{h}

    ``z`` is the fraction of the old state that is *kept*. The lecture notes'
    update gate is :math:`\Gamma_u = 1 - \mathbf{z}`, the fraction that is
    replaced: :math:`\mathbf{c}' = \Gamma_u \odot \tilde{\mathbf{c}} + (1 - \Gamma_u) \odot \mathbf{c}`.
    Because :math:`1 - \sigma(a) = \sigma(-a)`, negating the update gate's
    weights and biases turns one convention into the other.

    Parameters
    ----------
    input_size, hidden_size : int
        ``D`` and ``H``.
    bias : bool
        Whether to add the biases.
    reset : {"after", "before"}
        Where the reset gate acts. The two are different functions of the same weights.

    Shapes
    ------
    x : (B, D)
    h : (B, H)
    output : (B, H)
    weight_ih : (3H, D); weight_hh : (3H, H); bias_ih, bias_hh : (3H,), blocks in the order r, z, n
    """

    kind = "gru"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, reset: str = "after"):
        require_choice("reset", reset, RESET_MODES)
        super().__init__(input_size, hidden_size, bias)
        self.reset = reset

    def project(self, x: Tensor) -> Tensor:
        """``x W_ih^T + b_ih``; ``b_hh`` stays with ``h W_hh^T``, since ``r`` scales ``h W_hn^T + b_hn``.

        Shapes
        ------
        x : (..., D)
        output : (..., 3H)
        """
        return _affine(x, self.weight_ih, self.bias_ih)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        self.check_input(x, h)
        return self.step(self.project(x), h)

    def step(self, x_part: Tensor, h: Tensor) -> Tensor:
        """The step from ``x_part = x W_ih^T + b_ih`` (:meth:`project`), computed beforehand.

        The inputs are not checked: :meth:`forward` and the layers check them once.

        Shapes
        ------
        x_part : (B, 3H), blocks r, z, n
        h, output : (B, H)
        """
        x_r, x_z, x_n = x_part.chunk(3, dim=-1)  # (B, H) each
        h_r, h_z, h_n = _affine(h, self.weight_hh, self.bias_hh).chunk(3, dim=-1)  # (B, H) each
        r = torch.sigmoid(x_r + h_r)  # reset gate
        z = torch.sigmoid(x_z + h_z)  # update gate: the share of h that is kept
        if self.reset == "after":
            n = torch.tanh(x_n + r * h_n)  # r scales W_hn h + b_hn
        else:
            W_hn = self.weight_hh[2 * self.hidden_size:]  # (H, H)
            b_hn = None if self.bias_hh is None else self.bias_hh[2 * self.hidden_size:]  # (H,)
            n = torch.tanh(x_n + _affine(r * h, W_hn, b_hn))  # r scales h itself
        return (1 - z) * n + z * h  # (B, H)


class LSTMCell(_Cell):
    r"""One step of a long short-term memory cell.

    With the rows of the weights split into input (i), forget (f), candidate
    (g) and output (o) blocks, as PyTorch orders them, and
    :math:`\mathbf{a} = \mathbf{x} \mathbf{W}_{ih}^\top + \mathbf{b}_{ih}
    + \mathbf{h} \mathbf{W}_{hh}^\top + \mathbf{b}_{hh}`:

    .. math::
        \mathbf{i} = \sigma(\mathbf{a}_i),\quad \mathbf{f} = \sigma(\mathbf{a}_f),\quad
        \mathbf{g} = \tanh(\mathbf{a}_g),\quad \mathbf{o} = \sigma(\mathbf{a}_o) \\
        \mathbf{c}' = \mathbf{f} \odot \mathbf{c} + \mathbf{i} \odot \mathbf{g}, \qquad
        \mathbf{h}' = \mathbf{o} \odot \tanh(\mathbf{c}')

    The lecture notes write :math:`\mathbf{h}' = \mathbf{o} \odot \mathbf{c}'`; the
    ``tanh`` is part of the LSTM (and of PyTorch's): it keeps ``h`` in (-1, 1)
    however large the cell grows.

    Parameters
    ----------
    input_size, hidden_size : int
        ``D`` and ``H``.
    bias : bool
        Whether to add the biases.

    Shapes
    ------
    x : (B, D)
    state : a pair (h, c), each (B, H)
    output : the new pair (h, c), each (B, H)
    weight_ih : (4H, D); weight_hh : (4H, H); bias_ih, bias_hh : (4H,), blocks in the order i, f, g, o
    """

    kind = "lstm"

    @property
    def state_size(self) -> int:
        return 2 * self.hidden_size

    def zero_state(self, batch_size: int, like: Tensor) -> State:
        zeros = like.new_zeros(batch_size, self.hidden_size)
        return zeros, zeros

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        self.check_input(x, state)
        return self.step(self.project(x), state)

    def step(self, x_part: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """The step from ``x_part = x W_ih^T + b_ih + b_hh`` (:meth:`project`), computed beforehand.

        The inputs are not checked: :meth:`forward` and the layers check them once.

        Shapes
        ------
        x_part : (B, 4H), blocks i, f, g, o
        state, output : pairs (h, c), each (B, H)
        """
        h, c = state
        a = torch.addmm(x_part, h, self.weight_hh.T)  # x_part + h W_hh^T in one call: (B, 4H)
        a_i, a_f, a_g, a_o = a.chunk(4, dim=-1)  # (B, 4H) -> four blocks of (B, H)
        i, f, g, o = torch.sigmoid(a_i), torch.sigmoid(a_f), torch.tanh(a_g), torch.sigmoid(a_o)
        c = f * c + i * g  # forget part of the old memory, write part of the candidate
        h = o * torch.tanh(c)  # tanh bounds h in (-1, 1); the notes' o * c would not
        return h, c


def _hidden(state: State) -> Tensor:
    """The hidden state ``h`` of a state (the first of an LSTM's pair)."""
    return state[0] if isinstance(state, tuple) else state


# ---------------------------------------------------------------------------
# Layers: a cell run over time, stacked in layers, in one or two directions.
# ---------------------------------------------------------------------------


class _Recurrent(nn.Module):
    """A stack of ``num_layers`` layers of cells; see :class:`RNN` for the interface."""

    cell_class: type = _Cell
    torch_class: type = nn.Module

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = True, bidirectional: bool = False, **cell_options):
        super().__init__()
        _check_stack(num_layers, batch_first, bidirectional)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.bidirectional = batch_first, bidirectional
        self.num_directions = 2 if bidirectional else 1
        # cells[layer * num_directions + direction], as PyTorch orders h_n; a layer above
        # the first reads the concatenated outputs of both directions below it.
        self.cells = nn.ModuleList(
            self.cell_class(input_size if layer == 0 else hidden_size * self.num_directions, hidden_size,
                            bias=bias, **cell_options)
            for layer in range(num_layers)
            for _ in range(self.num_directions)
        )

    def forward(self, x: Tensor, state: Optional[State] = None, reference: bool = False) -> tuple[Tensor, State]:
        self._check_forward(x, reference)
        if not self.batch_first:
            x = x.transpose(0, 1)  # (T, B, D) -> (B, T, D)
        batch_size, steps = x.shape[0], x.shape[1]
        initial = self._initial_states(state, batch_size, x)
        finals = []
        layer_input = x  # (B, T, D), then (B, T, directions * H)
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                cell, s = self.cells[index], initial[index]
                if reference:  # the cell's forward, as the equations write it, at every step
                    inputs, step = layer_input.unbind(1), cell  # T tensors (B, D)
                else:
                    # x_t W_ih^T and the biases do not depend on the state: one product of
                    # B*T rows computes them for every step, so the loop only multiplies
                    # the state by W_hh (as torch.nn does).
                    projected = cell.project(layer_input)  # (B, T, G*H)
                    inputs, step = projected.unbind(1), cell.step  # T tensors (B, G*H)
                hidden = [None] * steps
                # The backward direction reads the sequence from its end; its output at
                # step t still sits at position t, beside the forward one.
                for t in (range(steps) if direction == 0 else reversed(range(steps))):
                    s = step(inputs[t], s)
                    hidden[t] = _hidden(s)
                outputs.append(torch.stack(hidden, dim=1))  # (B, T, H)
                finals.append(s)
            layer_input = torch.cat(outputs, dim=-1)  # (B, T, directions * H)
        output = layer_input if self.batch_first else layer_input.transpose(0, 1)
        return output, self._stack_states(finals)

    def _check_forward(self, x: object, reference: object) -> None:
        require_instance("reference", reference, bool), require_float_tensor("x", x)
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            layout = "(B, T, D)" if self.batch_first else "(T, B, D)"
            raise ValueError(f"x must have shape {layout} with D = {self.input_size}; found {tuple(x.shape)}")
        check_module_dtype("x", x, self)

    def _initial_states(self, state: Optional[State], batch_size: int, like: Tensor) -> list[State]:
        """One initial state per cell, from ``(L * directions, B, H)`` tensors or zeros."""
        if state is None:
            return [cell.zero_state(batch_size, like) for cell in self.cells]
        expected = (len(self.cells), batch_size, self.hidden_size)
        if self.cell_class is LSTMCell:
            if not isinstance(state, tuple) or len(state) != 2:
                raise TypeError(f"the LSTM state must be a pair (h_0, c_0); found {type(state).__name__}")
            _check_shape("h_0", state[0], expected, "(L * directions, B, H)")
            _check_shape("c_0", state[1], expected, "(L * directions, B, H)")
            return list(zip(state[0], state[1]))
        _check_shape("h_0", state, expected, "(L * directions, B, H)")
        return list(state)

    def _stack_states(self, finals: list[State]) -> State:
        if self.cell_class is LSTMCell:
            return torch.stack([h for h, _ in finals]), torch.stack([c for _, c in finals])  # (L*dirs, B, H) each
        return torch.stack(finals)  # (L * directions, B, H)

    @classmethod
    def from_torch(cls, module: nn.Module, **options) -> "_Recurrent":
        """A layer with the configuration and weights of a PyTorch module of the same kind.

        The result computes the same outputs and final states as ``module`` in
        evaluation mode. ``options`` are extra cell arguments (``reset`` of :class:`GRU`).
        """
        if not isinstance(module, cls.torch_class):
            expected = cls.torch_class.__name__
            raise TypeError(f"{cls.__name__}.from_torch expects a torch.nn.{expected}; found {type(module).__name__}")
        if getattr(module, "proj_size", 0):
            raise ValueError(f"LSTM projections are not supported: expected proj_size = 0; found {module.proj_size}")
        if cls is RNN:
            options.setdefault("nonlinearity", module.nonlinearity)
        layer = cls(module.input_size, module.hidden_size, num_layers=module.num_layers, bias=module.bias,
                    batch_first=module.batch_first, bidirectional=module.bidirectional, **options)
        for layer_index in range(layer.num_layers):
            for direction in range(layer.num_directions):
                suffix = f"_l{layer_index}" + ("_reverse" if direction else "")
                _copy_parameters(layer.cells[layer_index * layer.num_directions + direction], module, suffix)
        return layer


class RNN(_Recurrent):
    """A (multi-layer, optionally bidirectional) simple recurrent network.

    Each layer computes its inputs' share of the pre-activations, ``x_t W_ih^T``
    and the biases, for all steps in one matrix product before its time loop;
    ``forward(x, h_0, reference=True)`` instead calls the cell on one ``x_t`` at
    a time, as the equations are written. Both give the same results up to
    rounding; the first is the faster (the Benchmarks page compares it with ``torch.nn``).

    Parameters
    ----------
    input_size, hidden_size : int
        ``D`` and ``H``.
    num_layers : int
        ``L``: layer ``l > 0`` reads the outputs of layer ``l - 1``.
    bias : bool
        Whether the cells have biases.
    batch_first : bool
        True (the book's convention): inputs and outputs are ``(B, T, ...)``;
        False (PyTorch's default): ``(T, B, ...)``.
    bidirectional : bool
        Run a second cell per layer from the end of the sequence to its start
        and concatenate both outputs.
    nonlinearity : {"tanh", "relu", "linear"}
        The cells' ``f``.

    Returns
    -------
    output : Tensor
        ``forward(x, h_0=None)`` returns the last layer's hidden state at every
        step (both directions concatenated, forward first) ...
    h_n : Tensor
        ... and the final state of every cell: for the backward direction that
        is its state after reading the first element.

    Shapes
    ------
    x : (B, T, D), or (T, B, D) if not batch_first
    h_0, h_n : (L * directions, B, H), ordered layer by layer, forward direction first
    output : (B, T, directions * H), or (T, B, directions * H) if not batch_first
    """

    cell_class, torch_class = RNNCell, nn.RNN

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = True, bidirectional: bool = False):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, bidirectional,
                         nonlinearity=nonlinearity)


class GRU(_Recurrent):
    """A (multi-layer, optionally bidirectional) GRU; arguments as :class:`RNN`, plus ``reset``.

    ``reset="after"`` (default) is PyTorch's GRU; ``"before"`` is Cho et al.'s
    (see :class:`GRUCell`).

    Shapes
    ------
    As :class:`RNN`.
    """

    cell_class, torch_class = GRUCell, nn.GRU

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = True, bidirectional: bool = False, reset: str = "after"):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, bidirectional, reset=reset)


class LSTM(_Recurrent):
    """A (multi-layer, optionally bidirectional) LSTM; arguments as :class:`RNN`.

    ``forward(x, (h_0, c_0))`` returns ``output, (h_n, c_n)``.

    Shapes
    ------
    x, output : as :class:`RNN`
    h_0, c_0, h_n, c_n : (L * directions, B, H)
    """

    cell_class, torch_class = LSTMCell, nn.LSTM

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = True, bidirectional: bool = False):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, bidirectional)


# ---------------------------------------------------------------------------
# Backpropagation through time, made visible.
# ---------------------------------------------------------------------------


def _check_sequence(cell: object, x: object, state: object) -> State:
    if not isinstance(cell, _Cell):
        raise TypeError(f"cell must be an RNNCell, GRUCell or LSTMCell; found {type(cell).__name__}")
    require_float_tensor("x", x)
    if x.dim() != 3 or x.shape[-1] != cell.input_size:
        raise ValueError(f"x must have shape (B, T, D) with D = {cell.input_size}; found {tuple(x.shape)}")
    return cell.zero_state(x.shape[0], x) if state is None else state


def rnn_jacobian_norms(cell: RNNCell, x: Tensor, h: Optional[Tensor] = None) -> Tensor:
    r"""How much the last hidden state of a simple RNN depends on each earlier one.

    Differentiating :math:`\mathbf{h}_t = f(\mathbf{a}_t)`, with
    :math:`\mathbf{a}_t = \mathbf{x}_t \mathbf{W}_{ih}^\top + \mathbf{h}_{t-1} \mathbf{W}_{hh}^\top + \mathbf{b}`,
    gives the one-step Jacobian
    :math:`\partial \mathbf{h}_t / \partial \mathbf{h}_{t-1} = \operatorname{diag}(f'(\mathbf{a}_t))\, \mathbf{W}_{hh}`,
    and the chain rule multiplies them:

    .. math:: \frac{\partial \mathbf{h}_T}{\partial \mathbf{h}_k}
              = \prod_{t=T}^{k+1} \operatorname{diag}(f'(\mathbf{a}_t))\, \mathbf{W}_{hh}.

    Every gradient that back-propagation sends from step ``T`` to step ``k``
    passes through this matrix; its spectral norm bounds how much of it arrives.

    Parameters
    ----------
    cell : RNNCell
    x : Tensor
        A batch of input sequences.
    h : Tensor, optional
        The state before the first input (zeros if None).

    Returns
    -------
    Tensor
        ``norms[b, k]`` is the spectral norm :math:`\lVert \partial \mathbf{h}_T / \partial \mathbf{h}_k \rVert_2`
        for sequence ``b`` and ``k = 0 .. T`` (``norms[:, T]`` is 1, the identity).

    Shapes
    ------
    x : (B, T, D)
    h : (B, H)
    output : (B, T + 1)
    """
    if not isinstance(cell, RNNCell):
        raise TypeError(f"cell must be an RNNCell (use jacobian_norms for other cells); found {type(cell).__name__}")
    h = _check_sequence(cell, x, h)
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


def bptt_terms(cell: RNNCell, x: Tensor, grad: Tensor, h: Optional[Tensor] = None) -> Tensor:
    r"""The contribution of every step to the gradient of a simple RNN's recurrent weights.

    :math:`\mathbf{W}_{hh}` acts at every step, so the gradient of a loss :math:`L` of the last
    state is a sum over the steps :math:`k` at which it acts (backpropagation through time):

    .. math:: \frac{\partial L}{\partial \mathbf{W}_{hh}}
              = \sum_{k=1}^{T} \frac{\partial L}{\partial \mathbf{h}_T}
                \frac{\partial \mathbf{h}_T}{\partial \mathbf{h}_k}
                \frac{\partial^{+} \mathbf{h}_k}{\partial \mathbf{W}_{hh}}
              = \sum_{k=1}^{T} \boldsymbol{\delta}_k \mathbf{h}_{k-1}^\top,

    where :math:`\partial^{+}` holds :math:`\mathbf{h}_{k-1}` fixed and
    :math:`\boldsymbol{\delta}_k = \partial L / \partial \mathbf{a}_k` is carried back one step at a time:
    :math:`\boldsymbol{\delta}_T = f'(\mathbf{a}_T) \odot \mathbf{g}` and
    :math:`\boldsymbol{\delta}_{k-1} = f'(\mathbf{a}_{k-1}) \odot \mathbf{W}_{hh}^\top \boldsymbol{\delta}_k`,
    with :math:`\mathbf{g} = (\partial L / \partial \mathbf{h}_T)^\top`. Term :math:`k` is what step
    :math:`k` learns from the loss; the terms of early steps carry the vanishing (or exploding)
    product :math:`\partial \mathbf{h}_T / \partial \mathbf{h}_k` of :func:`rnn_jacobian_norms`.

    Parameters
    ----------
    cell : RNNCell
    x : Tensor
        A batch of input sequences.
    grad : Tensor
        :math:`\mathbf{g}`, the gradient of the loss with respect to the last state of each sequence
        (the loss is :math:`\sum_b \mathbf{g}_b \cdot \mathbf{h}_{T,b}` up to terms without the weights).
    h : Tensor, optional
        The state before the first input (zeros if None).

    Returns
    -------
    Tensor
        ``terms[b, k - 1]`` is step ``k``'s term for sequence ``b``, laid out as ``cell.weight_hh``:
        entry ``[i, j]`` belongs to the weight from unit ``j`` to unit ``i``. Summed over ``b`` and
        ``k`` they give ``cell.weight_hh.grad`` of that loss.

    Shapes
    ------
    x : (B, T, D)
    grad : (B, H)
    h : (B, H)
    output : (B, T, H, H)
    """
    if not isinstance(cell, RNNCell):
        raise TypeError(f"cell must be an RNNCell; found {type(cell).__name__}")
    h = _check_sequence(cell, x, h)
    _check_shape("grad", grad, (x.shape[0], cell.hidden_size), "(B, H)")
    with torch.no_grad():
        states = [h]
        for t in range(x.shape[1]):
            states.append(cell(x[:, t], states[-1]))  # h_0 .. h_T, each (B, H)
        slopes = _DERIVATIVE_FROM_OUTPUT[cell.nonlinearity]
        weight_hh = cell.weight_hh.detach()  # (H, H)
        terms = []
        delta = slopes(states[-1]) * grad  # (B, H): ∂L/∂a_T
        for k in range(x.shape[1], 0, -1):  # k = T .. 1
            terms.append(delta[:, :, None] * states[k - 1][:, None, :])  # δ_k h_(k-1)^T: (B, H, H)
            delta = slopes(states[k - 1]) * (delta @ weight_hh)  # ∂L/∂a_(k-1): (B, H)
    return torch.stack(terms[::-1], dim=1)  # (B, T, H, H), k = 1 first


def _flatten(state: State) -> Tensor:
    return torch.cat(state, dim=-1) if isinstance(state, tuple) else state  # (B, S)


def _unflatten(cell: _Cell, flat: Tensor) -> State:
    return tuple(flat.split(cell.hidden_size, dim=-1)) if isinstance(cell, LSTMCell) else flat


def jacobian_norms(cell: _Cell, x: Tensor, state: Optional[State] = None) -> Tensor:
    r"""How much the last hidden state depends on the whole state at each earlier step, for any cell.

    The state :math:`\mathbf{s}_t` is :math:`\mathbf{h}_t` for the RNN and GRU cells and
    :math:`[\mathbf{h}_t; \mathbf{c}_t]` for the LSTM cell, whose memory ``c`` is
    part of what it carries. Each one-step Jacobian
    :math:`\partial \mathbf{s}_t / \partial \mathbf{s}_{t-1}` comes from autograd
    (``torch.func.jacrev``); the chain rule multiplies them, and the rows of
    ``h`` are kept:

    .. math:: \frac{\partial \mathbf{h}_T}{\partial \mathbf{s}_k}
              = \mathbf{P}_h \prod_{t=T}^{k+1} \frac{\partial \mathbf{s}_t}{\partial \mathbf{s}_{t-1}}.

    For an :class:`RNNCell` this equals :func:`rnn_jacobian_norms`.

    Parameters
    ----------
    cell : RNNCell, GRUCell or LSTMCell
    x : Tensor
        A batch of input sequences.
    state : Tensor or (Tensor, Tensor), optional
        The state before the first input (zeros if None).

    Returns
    -------
    Tensor
        ``norms[b, k]`` = :math:`\lVert \partial \mathbf{h}_T / \partial \mathbf{s}_k \rVert_2`
        for ``k = 0 .. T`` (``norms[:, T]`` is 1 for RNN and GRU cells).

    Shapes
    ------
    x : (B, T, D)
    state : (B, H), or a pair of (B, H) for an LSTM cell
    output : (B, T + 1)
    """
    state = _check_sequence(cell, x, state)

    def step(flat_state: Tensor, x_t: Tensor) -> Tensor:  # one sequence: (S,), (D,) -> (S,)
        return _flatten(cell(x_t[None], _unflatten(cell, flat_state[None])))[0]

    one_step_jacobian = torch.func.vmap(torch.func.jacrev(step))  # (B, S), (B, D) -> (B, S, S)
    flat = _flatten(state).detach()  # (B, S)
    jacobians = []
    for t in range(x.shape[1]):
        jacobians.append(one_step_jacobian(flat, x[:, t]).detach())  # ∂s_{t+1}/∂s_t: (B, S, S)
        with torch.no_grad():
            flat = _flatten(cell(x[:, t], _unflatten(cell, flat)))
    with torch.no_grad():
        rows = torch.eye(cell.hidden_size, cell.state_size, dtype=x.dtype)  # P_h: the h rows of s
        product = rows.expand(x.shape[0], -1, -1)  # (B, H, S): ∂h_T/∂s_T
        norms = [torch.linalg.matrix_norm(product, ord=2)]
        for jacobian in reversed(jacobians):
            product = product @ jacobian  # (B, H, S): one step further back
            norms.append(torch.linalg.matrix_norm(product, ord=2))
    return torch.stack(norms[::-1], dim=1)  # (B, T + 1)


def _checked_parameters(parameters: object, max_norm: object, norm_type: object) -> list[Tensor]:
    """``parameters`` as a list of tensors (a generator is read once), after checking the arguments."""
    if not isinstance(parameters, (Tensor, Iterable)) or isinstance(parameters, str):
        raise TypeError(f"parameters must be a Tensor or an iterable of Tensors; found {type(parameters).__name__}")
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for parameter in parameters:
        if not isinstance(parameter, Tensor):
            raise TypeError(f"parameters must be tensors; found {type(parameter).__name__}")
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) or not max_norm >= 0:
        raise ValueError(f"max_norm must be a number >= 0; found {max_norm!r}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
        raise ValueError(f"norm_type must be a number > 0 or math.inf; found {norm_type!r}")
    return parameters


def clip_grad_norm(parameters: Union[Tensor, Iterable[Tensor]], max_norm: float,
                   norm_type: float = 2.0, error_if_nonfinite: bool = False) -> Tensor:
    r"""Rescale all gradients together so that their global norm is at most ``max_norm``.

    The global norm treats every gradient of every parameter as one long vector,
    :math:`\lVert \mathbf{g} \rVert = (\sum_p \lVert \mathbf{g}_p \rVert^{q})^{1/q}`
    for ``norm_type`` :math:`q` (the largest entry for ``inf``). Every gradient is
    multiplied by :math:`\min(1, \text{max\_norm} / (\lVert \mathbf{g} \rVert + 10^{-6}))`,
    so the direction of the update is kept and only its length is capped. This
    is ``torch.nn.utils.clip_grad_norm_``, bit for bit, including its behaviour
    for non-finite gradients: a NaN norm turns every gradient into NaN, an
    infinite one zeroes the finite entries (``error_if_nonfinite=True`` raises
    instead).

    Parameters
    ----------
    parameters : Tensor or iterable of Tensors
        Parameters whose ``.grad`` is clipped in place (those without a gradient are skipped).
    max_norm : float
        Largest allowed global norm, >= 0.
    norm_type : float
        The ``q`` of the norm, > 0, or ``math.inf``.
    error_if_nonfinite : bool
        Raise a RuntimeError, as PyTorch does, when the global norm is NaN or infinite.

    Returns
    -------
    Tensor
        The global norm *before* clipping (a 0-d tensor; 0 when no parameter has a gradient).

    Shapes
    ------
    Any parameter shapes; the result is a scalar ().
    """
    parameters = _checked_parameters(parameters, max_norm, norm_type)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    q = float(norm_type)
    norms = torch.stack([torch.linalg.vector_norm(g, q) for g in grads])  # one per parameter
    total = torch.linalg.vector_norm(norms, q)
    if error_if_nonfinite and not bool(torch.isfinite(total)):
        raise RuntimeError(
            f"the global gradient norm must be finite to be clipped; found {float(total)} "
            "(pass error_if_nonfinite=False to scale by it anyway, as PyTorch does)"
        )
    # 1e-6 keeps the division finite for zero gradients; the coefficient is capped at 1,
    # so gradients that are small enough are multiplied by exactly 1.
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    with torch.no_grad():
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total


def parameter_count(kind: str, input_size: int, hidden_size: int, num_layers: int = 1,
                    bidirectional: bool = False, bias: bool = True) -> int:
    r"""The number of parameters of an RNN, GRU or LSTM layer, from its formula.

    A cell with :math:`G` gate blocks (1, 3, 4) has
    :math:`G(H D_\text{in} + H^2 + 2H)` parameters: :math:`\mathbf{W}_{ih}`,
    :math:`\mathbf{W}_{hh}` and PyTorch's two bias vectors. The first layer reads
    :math:`D_\text{in} = D`; the others read the outputs below,
    :math:`D_\text{in} = H` times the number of directions.

    Parameters
    ----------
    kind : {"rnn", "gru", "lstm"}
    input_size, hidden_size, num_layers : int
    bidirectional, bias : bool

    Returns
    -------
    int

    Shapes
    ------
    Scalars in and out.
    """
    require_choice("kind", kind, tuple(GATES)), _check_sizes(input_size, hidden_size, bias), _check_stack(
        num_layers, False, bidirectional)
    directions = 2 if bidirectional else 1
    total = 0
    for layer in range(num_layers):
        reads = input_size if layer == 0 else hidden_size * directions
        per_cell = GATES[kind] * (hidden_size * reads + hidden_size * hidden_size + (2 * hidden_size if bias else 0))
        total += directions * per_cell
    return total
