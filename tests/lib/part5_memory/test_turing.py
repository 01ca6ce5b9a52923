"""Tests for lib/part5_memory/turing.py: the notes' worked example move by move, the 7-tuple's
conditions, and properties of the example machine on every input."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part5_memory.turing import TuringMachine, notes_example

FAST = settings(max_examples=40, deadline=None, database=None)
NOTES_RULES = [("q0", "a", "q0", "b", "R"), ("q0", "b", "q0", "b", "R"), ("q0", "□", "q1", "□", "L")]


def machine(**changes):
    """The notes' machine with some parts of the 7-tuple replaced."""
    parts = dict(states={"q0", "q1"}, input_alphabet={"a", "b"}, tape_alphabet={"a", "b", "□"},
                 rules=NOTES_RULES, start="q0", blank="□", finals={"q1"})
    return TuringMachine(**{**parts, **changes})


def test_notes_example_on_aa_moves_as_in_linz():
    # q0 aa ⊢ b q0 a ⊢ bb q0 □ ⊢ b q1 b: each a becomes b, the blank sends the head back, q1 halts.
    run = notes_example().run("aa")
    assert [str(c) for c in run.configurations] == ["q0 a a", "b q0 a", "b b q0 □", "b q1 b"]
    assert run.halted and run.accepted and run.output == "bb"
    assert [c.head for c in run.configurations] == [0, 1, 2, 1]


def test_trace_prints_the_tape_with_the_head_in_brackets():
    assert notes_example().run("aa").trace() == "\n".join([
        " 0  q0  [a] a  □    q0 a a",
        " 1  q0   b [a] □    b q0 a",
        " 2  q0   b  b [□]   b b q0 □",
        " 3  q1   b [b] □    b q1 b",
    ])


def test_empty_input_reads_a_blank_and_halts_after_one_move():
    run = notes_example().run("")
    assert [str(c) for c in run.configurations] == ["q0 □", "q1 □"]
    assert run.accepted and run.output == ""
    assert run.configurations[-1].head == -1


@FAST
@given(st.text(alphabet="ab", max_size=12))
def test_example_turns_every_a_into_b_in_len_plus_one_moves(word):
    run = notes_example().run(word)
    assert run.output == "b" * len(word)
    assert len(run.configurations) == len(word) + 2  # the start and len(word) + 1 moves
    last = run.configurations[-1]
    assert last.state == "q1" and last.head == len(word) - 1 and run.accepted


def test_delta_is_a_partial_function_one_move_per_state_and_symbol():
    # Erratum (note 001): delta is not "a finite subset" with set values {q0, b, R}; it is a partial
    # function. A second move for (q0, a) is rejected, and the machine halts where delta is undefined.
    with pytest.raises(ValueError, match=r"delta is a function: at most one move per \(state, symbol\)"):
        machine(rules=NOTES_RULES + [("q0", "a", "q1", "a", "L")])
    example = notes_example()
    assert example.delta[("q0", "a")] == ("q0", "b", "R")
    assert ("q1", "b") not in example.delta and example.run("ab").halted


def test_a_machine_that_halts_outside_f_does_not_accept():
    run = machine(rules=NOTES_RULES[:2]).run("ab")  # no move on the blank: halts in q0
    assert run.halted and not run.accepted
    assert str(run.configurations[-1]) == "b b q0 □"


def test_max_steps_stops_a_machine_that_never_halts():
    endless = machine(rules=[("q0", "a", "q0", "a", "R"), ("q0", "□", "q0", "□", "R")])
    run = endless.run("a", max_steps=5)
    assert not run.halted and not run.accepted and len(run.configurations) == 6


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"start": "q9"}, "the start state must be one of Q"),
        ({"finals": {"q2"}}, "F must be a subset of Q"),
        ({"blank": "_"}, "the blank must be in the tape alphabet"),
        ({"input_alphabet": {"a", "□"}}, "must not be an input symbol"),
        ({"input_alphabet": {"a", "c"}}, r"Sigma must be a subset of Gamma; found input symbols \['c'\]"),
        ({"rules": [("q0", "a", "q0", "b", "S")]}, "must move 'L' or 'R'; found 'S'"),
        ({"rules": [("q0", "a", "q7", "b", "R")]}, "uses a state outside Q"),
        ({"rules": [("q0", "c", "q0", "b", "R")]}, "uses a symbol outside Gamma"),
        ({"rules": [("q0", "a", "q0")]}, "must be a 5-tuple"),
    ],
)
def test_an_invalid_7_tuple_is_rejected_saying_which_part(changes, message):
    with pytest.raises(ValueError, match=message):
        machine(**changes)


def test_bad_inputs_are_rejected():
    with pytest.raises(TypeError, match="states must be a collection"):
        machine(states="q0")
    with pytest.raises(ValueError, match=r"the input must use Sigma = \['a', 'b'\]; found \['c'\]"):
        notes_example().run("abc")
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_steps'.*Actual value: -1.*is_at_least_0"):
        notes_example().run("a", max_steps=-1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_steps'.*Actual value: 2.0.*Integral"):
        notes_example().run("a", max_steps=2.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'word'.*Actual value: <generator.*str \| list\[str\]"):
        notes_example().run(symbol for symbol in "aa")


def test_a_list_of_symbols_runs_like_the_string():
    assert notes_example().run(["a", "a"]).trace() == notes_example().run("aa").trace()


def test_every_item_of_a_set_is_checked_not_one_drawn_at_random():
    for name, good in (("states", ["q0", "q1"]), ("input_alphabet", ["a", "b"]),
                       ("tape_alphabet", ["a", "b", "□"]), ("finals", ["q1"])):
        for _ in range(10):  # the signature's random draw would miss the 7 now and then
            with pytest.raises(TypeError, match=rf"{name}"):
                machine(**{name: [*good, 7]})
    # The body's own check, which the draw cannot skip:
    with pytest.raises(TypeError, match=r"states must hold str items; found 7"):
        machine(states=iter(["q0", "q1", 7]))
    assert machine(states=iter(["q0", "q1"])).states == {"q0", "q1"}  # an iterator is read once


def test_a_configuration_takes_ints_not_bools_and_str_cells():
    from lib.part5_memory.turing import Configuration

    last = notes_example().run("ab").configurations[-1]  # head at 1, cells 0..2
    assert last.cell(-1) == "□" and last.cell(0) == "b"  # negative positions are cells
    assert last.tape_line([-1, 0, 1]) == " □  b [b]"
    for call, name in ((lambda: Configuration("q1", ("b",), True, 0, "□"), "first"),
                       (lambda: Configuration("q1", ("b",), 0, True, "□"), "head"),
                       (lambda: last.cell(True), "position"),
                       (lambda: last.tape_line([0, True]), "positions"),
                       (lambda: Configuration("q1", ("b", 7), 0, 0, "□"), "tape"),
                       (lambda: Configuration("q1", "bb", 0, 0, "□"), "tape")):
        for _ in range(5):
            with pytest.raises(TypeError, match=rf"(?s)parameter '{name}'"):
                call()
