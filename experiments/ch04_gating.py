"""Chapter 4's experiments: how far back plain and gated recurrent layers remember.

* :func:`update_gate_decay` and :func:`keep_gate_reach`: the gradient's reach at
  initialisation, as the bias of the gate that keeps the state (a GRU's update gate, Cho
  et al., 2014; an LSTM's forget gate, Hochreiter and Schmidhuber, 1997) opens it.
* :func:`memory_sweep`: an RNN, a GRU and an LSTM, their keep gate open as Jozefowicz et
  al. (2015) recommend, trained on :class:`lib.part2_recurrent.recall_task.MemoryTask`
  over seeds and gaps; the plain RNN fails once the gap is long, the gated layers carry
  the symbol.
* :func:`closed_forget_gate`: the ablation: an LSTM whose forget gate starts half shut
  fails as the RNN does.
* :func:`gradient_reach`: the trained models' gradients, against their initial ones.
* :func:`forget_bias_reach`: the forget-gate bias that exercise ``ex-gate-remember``
  asks for, over every length its checker draws.

References
----------
.. [1] S. Hochreiter, J. Schmidhuber. "Long Short-Term Memory". Neural
   Computation 9(8), 1997.
.. [2] K. Cho, B. van Merrienboer, C. Gulcehre, D. Bahdanau, F. Bougares,
   H. Schwenk, Y. Bengio. "Learning Phrase Representations using RNN
   Encoder-Decoder for Statistical Machine Translation". EMNLP 2014.
.. [3] R. Jozefowicz, W. Zaremba, I. Sutskever. "An Empirical Exploration of
   Recurrent Network Architectures". ICML 2015.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from experiments.findings import Finding, Result
from lib.part2_recurrent.gating import MemoryRun, train_memory_task
from lib.part2_recurrent.rnn import GRUCell, Kind, LSTMCell, RNNCell, jacobian_norms
from lib.part2_recurrent.recall_task import MemoryTask


@dataclass
class UpdateGateDecay(Result):
    """A GRU's ``‖∂h_50/∂h_k‖`` at initialisation for each update-gate bias."""

    norms: dict[float, Tensor]  # bias -> (51,), k = 0 .. 50

    @staticmethod
    def kept(k: int) -> float:
        """σ(3)^(50 - k): what the update gate at bias 3 alone keeps from step k."""
        return (1 / (1 + math.exp(-3.0))) ** (50 - k)

    FINDINGS = (
        Finding(
            "With z ≈ 0.95 the dependence after 10 and 50 steps is within 30% of "
            "σ(3)^10 and σ(3)^50.",
            backs=("gru-gradient-read",),
            holds=lambda r: all(
                abs(r.norms[3.0][k] / r.kept(k) - 1) < 0.3 for k in (40, 0)
            ),
        ),
        Finding(
            "With the update-gate bias at 0 or -3 the dependence on h_0 is below "
            "1e-14.",
            backs=("gru-gradient-read",),
            holds=lambda r: max(r.norms[-3.0][0], r.norms[0.0][0]) < 1e-14,
        ),
    )


def update_gate_decay(
    x: Tensor, biases: tuple[float, ...] = (-3.0, 0.0, 3.0)
) -> UpdateGateDecay:
    """``‖∂h_T/∂h_k‖`` of a 4-unit GRU (float64, ``torch.manual_seed(1)``) reading one
    sequence ``x`` of 3 features, for each bias of its update gate z."""
    norms = {}
    for bias in biases:
        torch.manual_seed(1)
        cell = GRUCell(3, 4).double()
        with torch.no_grad():
            cell.bias_ih[4:8], cell.bias_hh[4:8] = bias, 0.0  # rows 4..7: the z block
        norms[bias] = jacobian_norms(cell, x)[0]
    return UpdateGateDecay(norms)


def _typical(norms: Tensor) -> Tensor:
    """The geometric mean over the sequences (the norms span many decades)."""
    return norms.log().mean(dim=0).exp()


@dataclass
class KeepGateReach(Result):
    """``‖∂h_T/∂s_k‖`` at initialisation, geometric mean over the sequences."""

    norms: dict[tuple[Kind, float | None], Tensor]  # (kind, keep bias) -> (T + 1,)

    FINDINGS = (
        Finding(
            "With the keep-gate bias at 0, the RNN, GRU and LSTM depend on s_0 below "
            "1e-10.",
            backs=("why-gating-note",),
            holds=lambda r: max(
                norms[0] for (_, bias), norms in r.norms.items() if bias != 5.0
            )
            < 1e-10,
        ),
        Finding(
            "With the bias at 5 the GRU and the LSTM depend on s_0 with a norm of 0.1 "
            "or more.",
            backs=("why-gating-note",),
            holds=lambda r: min(r.norms[kind, 5.0][0] for kind in ("gru", "lstm"))
            >= 0.1,
        ),
        Finding(
            "The open LSTM depends more on s_0 than on s_50, by a factor above 2.",
            backs=("why-gating-note",),
            holds=lambda r: r.norms["lstm", 5.0][0] > 2 * r.norms["lstm", 5.0][50],
        ),
    )


def keep_gate_reach(x: Tensor, hidden_size: int = 32) -> KeepGateReach:
    """An RNN, a GRU and an LSTM cell (``torch.manual_seed(0)``, float64) reading the
    sequences ``x`` of 6 features, the gated ones with their keep gate's bias at 0 and
    then at 5."""
    torch.manual_seed(0)
    cells = {
        "rnn": RNNCell(6, hidden_size),
        "gru": GRUCell(6, hidden_size),
        "lstm": LSTMCell(6, hidden_size),
    }
    keep = slice(hidden_size, 2 * hidden_size)  # the keep gate: z or f, rows H..2H
    norms = {}
    for kind, cell in cells.items():
        cell.double()
        for bias in (0.0, 5.0) if kind != "rnn" else (None,):
            if bias is not None:
                with torch.no_grad():
                    cell.bias_ih[keep], cell.bias_hh[keep] = bias, 0.0
            norms[kind, bias] = _typical(jacobian_norms(cell, x))
    return KeepGateReach(norms)


def _steps_to_learn(losses: list[float], window: int = 20) -> float:
    """The first step at which the mean of ``window`` losses is below 0.1 (inf if none,
    or if there are fewer than ``window`` losses)."""
    if len(losses) < window:
        return math.inf
    below = (torch.tensor(losses).unfold(0, window, 1).mean(dim=1) < 0.1).nonzero()
    return int(below[0]) + window if len(below) else math.inf


def _distinct(symbols: Tensor) -> set[tuple[int, ...]]:
    """The sequences of a run, as a set."""
    return set(map(tuple, symbols.tolist()))


@dataclass
class MemorySweep(Result):
    """Test accuracy and learning speed of each kind of layer, per gap and seed."""

    accuracy: dict[tuple[Kind, int], list[float]]  # (kind, T) -> (seeds,)
    learned: dict[tuple[Kind, int], list[float]]  # gated (kind, T) -> steps, (seeds,)
    runs: dict[tuple[Kind, int, int], MemoryRun] = field(repr=False)  # (kind, T, seed)

    @property
    def gated(self) -> list[float]:
        """The accuracy of every GRU and LSTM run."""
        return [
            a for (kind, _), acc in self.accuracy.items() if kind != "rnn" for a in acc
        ]

    FINDINGS = (
        Finding(
            "No test sequence of any run occurs in its training batches.",
            backs=("memory-setup",),
            holds=lambda r: all(
                _distinct(run.train_symbols).isdisjoint(_distinct(run.test_symbols))
                for run in r.runs.values()
            ),
        ),
        Finding(
            "A test draw repeats a training sequence only a few times per run (at most "
            "20 of 1,000).",
            backs=("memory-setup",),
            holds=lambda r: all(
                len(run.test_symbols) == 1000 for run in r.runs.values()
            )
            and max(run.replaced for run in r.runs.values()) <= 20,
        ),
        Finding(
            "The RNN usually learns the task at T = 10: median at least 90%, every "
            "seed far above chance (40%).",
            backs=("memory-results",),
            holds=lambda r: sorted(r.accuracy["rnn", 10])[1] >= 0.9
            and min(r.accuracy["rnn", 10]) >= 0.4,
        ),
        Finding(
            "The RNN is at chance at T = 40 for every seed (below 35%).",
            backs=("memory-results",),
            holds=lambda r: max(r.accuracy["rnn", 40]) < 0.35,
        ),
        Finding(
            "The GRU and the LSTM solve the task at every length for every seed (at "
            "least 95%).",
            backs=("memory-results",),
            holds=lambda r: min(r.gated) >= 0.95,
        ),
        Finding(
            "Every gated run brings its loss below 0.1 within the 300 steps.",
            backs=("memory-results",),
            holds=lambda r: all(
                len(run.losses) == 300
                for (kind, _, _), run in r.runs.items()
                if kind != "rnn"
            )
            and max(max(steps) for steps in r.learned.values()) <= 300,
        ),
        Finding(
            "For every seed, the GRU and the LSTM need more steps at T = 40 than at "
            "T = 10.",
            backs=("memory-results",),
            holds=lambda r: all(
                long > short
                for kind in ("gru", "lstm")
                for short, long in zip(r.learned[kind, 10], r.learned[kind, 40])
            ),
        ),
    )


def memory_sweep(
    seeds: tuple[int, ...],
    lengths: tuple[int, ...] = (10, 40),
    kinds: tuple[Kind, ...] = ("rnn", "gru", "lstm"),
    **training,
) -> MemorySweep:
    """One model of each kind per gap ``T`` and seed, the gated ones with their keep
    gate open (bias 5); ``training`` overrides the run's sizes (a smaller test, say)."""
    runs = {
        (kind, T, seed): train_memory_task(
            kind, T, keep_bias=0.0 if kind == "rnn" else 5.0, seed=seed, **training
        )
        for kind in kinds
        for T in lengths
        for seed in seeds
    }
    accuracy = {
        (kind, T): [runs[kind, T, seed].accuracy for seed in seeds]
        for kind in kinds
        for T in lengths
    }
    learned = {
        (kind, T): [_steps_to_learn(runs[kind, T, seed].losses) for seed in seeds]
        for kind in kinds
        if kind != "rnn"
        for T in lengths
    }
    return MemorySweep(accuracy, learned, runs)


@dataclass
class ClosedGate(Result):
    """An LSTM trained with its forget-gate bias at 0."""

    accuracy: list[float]  # (seeds,) on test sequences none of which it trained on

    FINDINGS = (
        Finding(
            "With its forget bias at 0 the LSTM stays at chance at T = 40 for every "
            "seed (below 35%).",
            backs=("memory-results",),
            holds=lambda r: max(r.accuracy) < 0.35,
        ),
    )


def closed_forget_gate(
    seeds: tuple[int, ...], length: int = 40, **training
) -> ClosedGate:
    """The LSTM of :func:`memory_sweep` with its forget gate not opened (bias 0)."""
    return ClosedGate(
        [
            train_memory_task(
                "lstm", length, keep_bias=0.0, seed=seed, **training
            ).accuracy
            for seed in seeds
        ]
    )


@dataclass
class GradientReach(Result):
    """``‖∂h_42/∂s_k‖`` (geometric mean over 16 sequences of ``T = 40``) of each kind of
    layer of :func:`memory_sweep`, at its initialisation and after training."""

    # (kind, "untrained" or "trained") -> (seeds, 43), k = 0 .. 42
    curves: dict[tuple[Kind, str], list[Tensor]]

    def at_step(self, k: int) -> dict[tuple[Kind, str], list[float]]:
        """``‖∂h_42/∂s_k‖`` of each seed."""
        return {
            key: [c[k].item() for c in curves] for key, curves in self.curves.items()
        }

    FINDINGS = (
        Finding(
            "The untrained RNN's final state depends on its first step with a norm "
            "below 1e-5 for every seed.",
            backs=("memory-gradients-discussion",),
            holds=lambda r: max(r.at_step(1)["rnn", "untrained"]) < 1e-5,
        ),
        Finding(
            "For every seed, the untrained RNN depends on step 41 at least 1e4 times "
            "more than on step 1.",
            backs=("memory-gradients-discussion",),
            holds=lambda r: all(
                last > 1e4 * first
                for first, last in zip(
                    r.at_step(1)["rnn", "untrained"], r.at_step(41)["rnn", "untrained"]
                )
            ),
        ),
        Finding(
            "The untrained gated networks depend on their first step with norms of "
            "order 1 (0.1 to 30).",
            backs=("memory-gradients-discussion",),
            holds=lambda r: all(
                0.1 < value < 30
                for kind in ("gru", "lstm")
                for value in r.at_step(1)[kind, "untrained"]
            ),
        ),
        Finding(
            "After training the gated networks still depend on the first step, with "
            "norms between 0.01 and 100.",
            backs=("memory-gradients-discussion",),
            holds=lambda r: all(
                0.01 < value < 100
                for kind in ("gru", "lstm")
                for value in r.at_step(1)[kind, "trained"]
            ),
        ),
        Finding(
            "After training the RNN's dependence on the first step is still tiny "
            "(below 1e-3) for every seed.",
            backs=("memory-gradients-discussion",),
            holds=lambda r: max(r.at_step(1)["rnn", "trained"]) < 1e-3,
        ),
    )


def gradient_reach(sweep: MemorySweep, seeds: tuple[int, ...]) -> GradientReach:
    """The models of ``sweep`` at ``T = 40``, loaded into lib's cells (float64), and the
    same models as they were initialised (:attr:`MemoryRun.untrained`)."""
    x, _ = MemoryTask(40).batch(16, torch.Generator().manual_seed(5))  # (16, 42, 6)
    curves = {}
    for kind in ("rnn", "gru", "lstm"):
        for seed in seeds:
            run = sweep.runs[kind, 40, seed]
            untrained, trained = run.untrained, run.model
            for model, when in ((untrained, "untrained"), (trained, "trained")):
                cell = model.lib_layer().double().cells[0]
                norms = jacobian_norms(cell, x.double()).clamp_min(1e-30)
                curves.setdefault((kind, when), []).append(_typical(norms))
    return GradientReach(curves)


@dataclass
class ForgetBiasReach(Result):
    """The checker's ratio ρ (first input's gradient over the last's) for constant
    biases and for ``ln 2T``, over every length the checker draws."""

    lengths: list[int]
    least_reach: float  # the least ρ the checker accepts
    rho: dict[float | str, list[float]]  # bias (1, 2, 3 or "ln 2T") -> (lengths,)
    least: dict[int, float]  # length -> the least bias that passes, to 0.01
    reach_55: float  # ρ of the bias 2 at T = 55, the checker's first length
    other_models: list[float]  # ρ(2, 55) of ten other random models

    @property
    def passes(self) -> dict[float | str, list[bool]]:
        return {
            b: [value >= self.least_reach for value in values]
            for b, values in self.rho.items()
        }

    @property
    def factors(self) -> list[float]:
        """ρ over σ(b)^T, what the memory path alone keeps, for b = 1, 2 and 3."""
        return [
            r / (1 / (1 + math.exp(-b))) ** n
            for b in (1.0, 2.0, 3.0)
            for r, n in zip(self.rho[b], self.lengths)
        ]

    FINDINGS = (
        Finding(
            "The least passing bias is not monotone in T: it falls from T = 20 to 21 "
            "and from 51 to 60, by more than 0.05 each time.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: r.least[20] > r.least[21] + 0.05
            and r.least[51] > r.least[60] + 0.05,
        ),
        Finding(
            "Every least passing bias is below 3, so the constant 3 passes on every "
            "length.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: max(r.least.values()) < 3.0 and all(r.passes[3.0]),
        ),
        Finding(
            "For b = 1, 2 and 3, ρ exceeds σ(b)^T on every length.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: min(r.factors) > 1,
        ),
        Finding(
            "For b = ln 2T, ρ exceeds 1 on some length.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: max(r.rho["ln 2T"]) > 1,
        ),
        Finding(
            "A forget bias of b = 1 passes on none of the lengths from 20 to 60.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: r.lengths == list(range(20, 61)) and not any(r.passes[1.0]),
        ),
        Finding(
            "A forget bias of b = 2 passes on some lengths but not all.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: 0 < sum(r.passes[2.0]) < len(r.lengths),
        ),
        Finding(
            "A forget bias of b = 2 gives ρ below a tenth at T = 55.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: r.reach_55 < r.least_reach,
        ),
        Finding(
            "The reach ρ(2, 55) changes at least threefold over ten other random "
            "models, across 0.1.",
            backs=("ex-gate-remember", "ex-gate-remember-solution-start"),
            holds=lambda r: len(r.other_models) == 10
            and max(r.other_models) > 3 * min(r.other_models)
            and min(r.other_models) < r.least_reach < max(r.other_models),
        ),
        Finding(
            "Forget biases b = 3 and b = ln 2T pass on every length from 20 to 60.",
            backs=("ex-gate-remember-solution-start",),
            holds=lambda r: r.lengths == list(range(20, 61))
            and all(r.passes[3.0])
            and all(r.passes["ln 2T"]),
        ),
    )


def forget_bias_reach(
    reach: Callable[..., float],
    least_reach: float,
    lengths: range = range(20, 61),
) -> ForgetBiasReach:
    """ρ = ``reach(bias, length)``, the checker's measure (passed in: experiments do not
    import courseware), for b = 1, 2, 3 and ln 2T on every length, the least bias that
    passes on each length (bisection on ρ itself, between 1 and 3, to 0.01), and ρ(2,
    55)
    of ten other random models (``seed=0 .. 9``)."""
    rho = {b: [reach(b, n) for n in lengths] for b in (1.0, 2.0, 3.0)}
    rho["ln 2T"] = [reach(math.log(2 * n), n) for n in lengths]

    def least_passing_bias(n: int, low: float = 1.0, high: float = 3.0) -> float:
        while high - low > 0.01:
            middle = (low + high) / 2
            passes = reach(middle, n) >= least_reach
            low, high = (low, middle) if passes else (middle, high)
        return high

    least = {n: least_passing_bias(n) for n in lengths}
    other_models = [reach(2.0, 55, seed=seed) for seed in range(10)]
    return ForgetBiasReach(
        list(lengths), least_reach, rho, least, reach(2.0, 55), other_models
    )
