"""A Turing machine: the 7-tuple definition and a simulator that prints every move.

Syllabus MEM4. A Turing machine (Turing, 1937) is a finite control that reads and
writes one cell of an unbounded tape at a time and moves one cell left or right.
The formal definition follows Linz, the source of the lecture notes' example:

.. math:: M = (Q, \\Sigma, \\Gamma, \\delta, q_0, \\square, F)

with states ``Q``, input alphabet ``Sigma``, tape alphabet ``Gamma`` (which holds
``Sigma`` and the blank ``□``, and ``□`` is not an input symbol), the transition
function ``delta: Q x Gamma -> Q x Gamma x {L, R}``, the start state ``q_0`` and the
final states ``F``. ``delta`` is a *partial function*: for each (state, symbol) pair
there is at most one move, and the machine halts when there is none.

The Neural Turing Machine (Graves et al., 2014, :mod:`lib.part5_memory.ntm`) keeps the
picture: a controller, a memory, and heads that read and write it, with every
discrete choice made soft so that it can be trained by gradient descent.

References
----------
.. [1] A. M. Turing. "On Computable Numbers, with an Application to the
   Entscheidungsproblem". Proceedings of the London Mathematical Society
   s2-42(1), 1937.
.. [2] P. Linz. "An Introduction to Formal Languages and Automata". Jones &
   Bartlett, chapter 9 (Turing machines).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Optional

from beartype.vale import Is

from lib.checked import AnyInt, NonNegativeInt, each, is_not_a_str

__all__ = ["MOVES", "Configuration", "Run", "TuringMachine", "notes_example"]

MOVES = ("L", "R")
Rule = tuple[str, str, str, str, str]  # (state, read, next state, write, move)
Symbols = Annotated[each(str), Is[is_not_a_str]]  # ("a", "b"), every one a str


@dataclass(frozen=True)
class Configuration:
    """An instantaneous description: the state, the tape and where the head is.

    ``tape`` holds the cells from ``first`` to ``first + len(tape) - 1``; every
    other cell is blank. ``head`` is the absolute position of the head.
    """

    state: str
    tape: Symbols
    first: AnyInt
    head: AnyInt
    blank: str

    def cell(self, position: AnyInt) -> str:
        index = position - self.first
        return self.tape[index] if 0 <= index < len(self.tape) else self.blank

    def window(self) -> range:
        """From the leftmost non-blank cell (or the head) to the rightmost one (or the
        head)."""
        written = [self.first + i for i, s in enumerate(self.tape) if s != self.blank]
        return range(min(written + [self.head]), max(written + [self.head]) + 1)

    def __str__(self) -> str:
        """Linz's notation: the symbols left of the head, the state, then the head's
        symbol onwards."""
        left = [self.cell(p) for p in self.window() if p < self.head]
        right = [self.cell(p) for p in self.window() if p >= self.head]
        return " ".join(left + [self.state] + right)

    def tape_line(self, positions: Optional[each(AnyInt)] = None) -> str:
        """The cells at ``positions`` (default :meth:`window`), the head's cell in
        brackets: ``b [a] □``."""
        positions = self.window() if positions is None else positions
        cells = (
            f"[{self.cell(p)}]" if p == self.head else f" {self.cell(p)} "
            for p in positions
        )
        return "".join(cells).rstrip()


@dataclass(frozen=True)
class Run:
    """What :meth:`TuringMachine.run` returns: every configuration, and how the run
    ended."""

    configurations: list[Configuration]
    halted: bool  # no move was defined for the last configuration
    accepted: bool  # halted in a final state

    @property
    def output(self) -> str:
        """The tape's non-blank contents after the last move."""
        last = self.configurations[-1]
        return "".join(symbol for symbol in last.tape if symbol != last.blank)

    def trace(self) -> str:
        """One line per move: step, state, the tape (head in brackets) and the
        description."""
        windows = [c.window() for c in self.configurations]
        # One range of positions for every line, so that the columns align.
        positions = range(min(w.start for w in windows), max(w.stop for w in windows))
        width = 3 * len(positions)
        return "\n".join(
            f"{step:>2}  {c.state:<3} {c.tape_line(positions):<{width}}   {c}"
            for step, c in enumerate(self.configurations)
        )


class TuringMachine:
    """A deterministic Turing machine ``(Q, Sigma, Gamma, delta, q0, blank, F)``.

    ``rules`` are 5-tuples ``(q, X, p, Y, D)``, ``delta(q, X) = (p, Y, D)``: in state
    ``q`` reading ``X``, write ``Y``, move ``D`` (``"L"`` or ``"R"``) and go to state
    ``p``. At most one rule per ``(q, X)``: the machine halts where ``delta`` is
    undefined. A tuple that breaks the definition raises a ``ValueError`` naming the
    part; a set given as one string, a ``TypeError``.
    """

    def __init__(
        self,
        states: Iterable[str],
        input_alphabet: Iterable[str],
        tape_alphabet: Iterable[str],
        rules: Iterable[Sequence[str]],  # 5-tuples, checked below
        start: str,
        blank: str,
        finals: Iterable[str],
    ):
        sets = dict(
            states=states,
            input_alphabet=input_alphabet,
            tape_alphabet=tape_alphabet,
            finals=finals,
            rules=rules,
        )
        for name, value in sets.items():
            if isinstance(value, str):  # an Iterable[str], but a set of characters
                raise TypeError(
                    f"{name} must be a collection (e.g. a set); "
                    f"found the string {value!r}"
                )
            if name != "rules":  # the signature looks at one item, drawn at random
                value = sets[name] = tuple(value)  # an iterator is read once
                odd = next((item for item in value if not isinstance(item, str)), None)
                if odd is not None:
                    raise TypeError(f"{name} must hold str items; found {odd!r}")
        self.states, self.finals = frozenset(sets["states"]), frozenset(sets["finals"])
        self.input_alphabet = frozenset(sets["input_alphabet"])
        self.tape_alphabet = frozenset(sets["tape_alphabet"])
        self.rules: tuple[Rule, ...] = tuple(tuple(rule) for rule in rules)
        self.start, self.blank = start, blank
        Q, Gamma = sorted(self.states), sorted(self.tape_alphabet)
        if start not in self.states:
            raise ValueError(f"the start state must be one of Q = {Q}; found {start!r}")
        if not self.finals <= self.states:
            raise ValueError(
                f"F must be a subset of Q = {Q}; found {sorted(self.finals)}"
            )
        if blank not in self.tape_alphabet:
            raise ValueError(
                f"the blank must be in the tape alphabet {Gamma}; found {blank!r}"
            )
        if blank in self.input_alphabet:
            raise ValueError(
                f"the blank {blank!r} must not be an input symbol; found it in Sigma"
            )
        if not self.input_alphabet <= self.tape_alphabet:
            raise ValueError(
                "Sigma must be a subset of Gamma; found input symbols "
                f"{sorted(self.input_alphabet - self.tape_alphabet)} not in Gamma"
            )
        self.delta = self._transition_function()  # (q, X) -> (p, Y, D)

    def _transition_function(self) -> dict[tuple[str, str], tuple[str, str, str]]:
        """``delta`` as a dict, each rule checked against Q, Gamma and the moves."""
        delta: dict[tuple[str, str], tuple[str, str, str]] = {}
        Q, Gamma = sorted(self.states), sorted(self.tape_alphabet)
        for rule in self.rules:
            if len(rule) != 5:
                raise ValueError(
                    f"a rule must be a 5-tuple (q, X, p, Y, move); found {rule!r}"
                )
            state, read, target, write, move = rule
            if state not in self.states or target not in self.states:
                raise ValueError(f"rule {rule!r} uses a state outside Q = {Q}")
            if read not in self.tape_alphabet or write not in self.tape_alphabet:
                raise ValueError(f"rule {rule!r} uses a symbol outside Gamma = {Gamma}")
            if move not in MOVES:
                raise ValueError(f"rule {rule!r} must move 'L' or 'R'; found {move!r}")
            if (state, read) in delta:
                raise ValueError(
                    "delta is a function: at most one move per (state, symbol); found "
                    f"two for ({state}, {read}): {(state, read, *delta[state, read])} "
                    f"and {rule!r}"
                )
            delta[state, read] = (target, write, move)
        return delta

    def run(
        self, word: str | list[str] | tuple[str, ...], max_steps: NonNegativeInt = 1000
    ) -> Run:
        """Run the machine on ``word``, head on its first symbol, until it halts or
        ``max_steps`` moves are made (``Run.halted`` is then False)."""
        unknown = sorted(set(word) - self.input_alphabet)
        if unknown:
            raise ValueError(
                f"the input must use Sigma = {sorted(self.input_alphabet)}; "
                f"found {unknown}"
            )
        tape = dict(enumerate(word))  # position -> symbol; missing cells are blank
        state, head = self.start, 0
        configurations = [self._configuration(state, tape, head)]
        for _ in range(max_steps):
            move = self.delta.get((state, tape.get(head, self.blank)))
            if move is None:
                break
            state, tape[head], direction = move
            head += 1 if direction == "R" else -1
            configurations.append(self._configuration(state, tape, head))
        halted = (state, tape.get(head, self.blank)) not in self.delta
        accepted = halted and state in self.finals
        return Run(configurations, halted=halted, accepted=accepted)

    def _configuration(
        self, state: str, tape: dict[int, str], head: AnyInt
    ) -> Configuration:
        first, last = min([*tape, head]), max([*tape, head])
        cells = tuple(tape.get(p, self.blank) for p in range(first, last + 1))
        return Configuration(state, cells, first, head, self.blank)


def notes_example() -> TuringMachine:
    """The machine of the lecture notes (Linz's example): it turns every ``a`` into
    ``b``: ``delta(q0, a) = (q0, b, R)``, ``delta(q0, b) = (q0, b, R)``,
    ``delta(q0, □) = (q1, □, L)``, with ``F = {q1}``."""
    return TuringMachine(
        states={"q0", "q1"},
        input_alphabet={"a", "b"},
        tape_alphabet={"a", "b", "□"},
        rules=[
            ("q0", "a", "q0", "b", "R"),
            ("q0", "b", "q0", "b", "R"),
            ("q0", "□", "q1", "□", "L"),
        ],
        start="q0",
        blank="□",
        finals={"q1"},
    )
