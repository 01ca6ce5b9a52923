"""experiments.ch07_decoding: each finding holds on a result that shows it and fails on one
that contradicts it (made-up numbers); cheap runs show their findings."""
from dataclasses import replace

import pytest
import torch

from experiments import ch07_decoding as ch07
from lib.decoding import ClockTask


def failing(result):
    """The sentences of the findings that do not hold for ``result``."""
    return [f.says for f in result.FINDINGS if not f.holds(result)]


@pytest.fixture(scope="module")
def clock():
    task = ClockTask(seed=38)
    return task, task.fit_model(per_time=200, delta=1.0, seed=38)


def test_probabilities_845_findings(clock):
    agreeing = ch07.Probabilities845({"quarter to nine": (0.29, 0.14),
                                      "quarter of nine": (0.31, 0.10),
                                      "eight forty five": (0.37, 0.19)})
    assert failing(agreeing) == []
    swapped = {**agreeing.probabilities, "quarter of nine": (0.31, 0.15)}
    assert len(failing(replace(agreeing, probabilities=swapped))) == 1
    assert failing(ch07.probabilities_845(*clock)) == []


def test_length_scores_800_findings(clock):
    scores = {("eight", 0.0): -0.876, ("eight o'clock", 0.0): -1.146}
    agreeing = ch07.LengthScores800(scores, {"eight": 0.49, "eight o'clock": 0.51})
    assert failing(agreeing) == []
    assert len(failing(replace(agreeing, true_p={"eight": 0.4, "eight o'clock": 0.6}))) == 1
    late = {**scores, ("eight o'clock", 0.0): -2.0}  # α* = log(2 / 0.876) / log 1.5 > 2
    assert len(failing(replace(agreeing, scores=late))) == 1
    run = ch07.length_scores_800(*clock)
    assert failing(run) == [] and 0.5 < run.alpha_star() < 0.7


FIVE = (38, 0, 1, 2, 3)


def sweep(**changed):
    """Five models whose numbers agree with every finding of the beam sweep: the
    chapter's (38) and four copies of one other (0)."""
    right, length = {}, {}
    for seed in FIVE:
        greedy, wide, normalised, over = (44, 40, 45, 44) if seed == 38 else (43, 41, 42, 39)
        for k in ch07.BEAMS:
            right[seed, k, 0.0] = greedy if k == 1 else wide
            right[seed, k, 0.7] = greedy if k == 1 else normalised
            right[seed, k, 1.0] = greedy if k == 1 else over
            length[seed, k, 0.0] = 3.7 if k == 1 else 3.4
            length[seed, k, 0.7] = 3.7 if k == 1 else 3.77
            length[seed, k, 1.0] = 3.7 if k == 1 else 3.85
    result = ch07.BeamSweep(
        seeds=FIVE, outputs={}, right=right, length=length,
        best_length=dict.fromkeys(FIVE, 3.67), unreadable=dict.fromkeys(FIVE, 3),
        log_probs={(s, k): [-1.0, -2.0] if k == 1 else [-1.0, -1.5]
                   for s in FIVE for k in ch07.BEAMS},
        search_errors=dict.fromkeys(FIVE, 0),
        new_errors={38: [], **{s: [("half past nine thirty", "half past nine")]
                               for s in FIVE[1:]}},
        said={"4:15": "four", "6:15": "six"},
    )
    return replace(result, **changed)


def test_beam_sweep_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(sweep()) == []
    assert len(failing(sweep(search_errors={**sweep().search_errors, 0: 1}))) == 1
    assert len(failing(sweep(said={"4:15": "four fifteen", "6:15": "six"}))) == 1
    wrong_way = dict(sweep().log_probs)
    wrong_way[0, 3] = [-1.0, -2.5]  # K = 3 finds a less probable output than greedy
    assert len(failing(sweep(log_probs=wrong_way))) == 1
    shorter = {**sweep().new_errors, 3: [("six", "six fifteen")]}
    assert len(failing(sweep(new_errors=shorter))) == 1
    # α = 1 as good as α = 0.7 with every model: no over-correction
    same = {key: sweep().right[key[0], key[1], 0.7] if key[2] == 1.0 else n
            for key, n in sweep().right.items()}
    assert len(failing(sweep(right=same))) == 1


def test_the_beam_sweep_runs_with_one_model():
    run = ch07.beam_sweep(seeds=(38,))
    assert run.said == {"4:15": "four", "6:15": "six"}
    assert run.right[38, 1, 0.0] == 43 and run.new_errors[38] == []


def test_pooled_rows_findings(clock):
    run = ch07.pooled_rows(*clock)
    assert failing(run) == []
    assert len(failing(replace(run, p_fifteen=0.6))) == 1
    assert len(failing(replace(run, after_quarter_445={"to": -2.0, "of": -1.0}))) == 1


def tail(**changed):
    result = ch07.SamplingTail(
        seeds=(38, 0, 1), not_a_phrasing={None: [0.55, 0.5, 0.6], 2: [0.1, 0.15, 0.03]},
        not_a_reading={None: [0.55, 0.46, 0.58], 2: [0.03, 0.02, 0.03]},
        unlisted_top2=[14, 26, 5], mistakes={"quarter of", "eight forty five a"},
        readings={"quarter of nine", "eight forty five", "a quarter of nine"},
        second_kept=["<eos>", "a"],
    )
    return replace(result, **changed)


def test_sampling_tail_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(tail()) == []
    assert len(failing(tail(second_kept=["<eos>", "nine"]))) == 1
    # a mistake that is no reading cut short or run on, and none that runs on
    assert len(failing(tail(mistakes={"quarter of", "seven"}))) == 2
    assert len(failing(tail(not_a_reading={None: [0.7, 0.5, 0.5], 2: [0.03, 0.0, 0.03]}))) == 2


def test_sampling_tail_runs_at_a_tiny_size():
    run = ch07.sampling_tail(seeds=(38,), num_samples=20)
    assert len(run.not_a_phrasing[2]) == 1 and set(run.second_kept) <= {"<eos>", "a"}


def test_first_words_845_findings(clock):
    run = ch07.first_words_845(*clock)
    assert failing(run) == []
    # a fourth word above the pseudo-count: the tail is no longer tied
    lifted = run.log_probs.clone()
    lifted[run.others[0]] += 0.5
    order = torch.sort(lifted, descending=True, stable=True).indices
    assert len(failing(ch07.FirstWords845(lifted, order))) == 1


def test_explorer_suggestions_findings(clock):
    run = ch07.explorer_suggestions(*clock)
    assert failing(run) == []
    assert len(failing(replace(run, finished_at=[1, 2, 5]))) == 1
    assert len(failing(replace(run, kept_at_step_1=["eight", "quarter"]))) == 1
    answers = {**run.answers, ("8:00", 4, 0.5): "eight o'clock"}
    assert len(failing(replace(run, answers=answers))) == 1
