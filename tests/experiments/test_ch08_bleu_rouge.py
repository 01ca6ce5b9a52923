"""experiments.ch08_bleu_rouge: each finding holds on a result that shows it and, just past
its threshold, a made-up result fails exactly that finding; the exact runs show their
findings."""
from dataclasses import replace

import pytest
from sacrebleu.metrics import CHRF

from experiments import ch08_bleu_rouge as ch08
from lib.part3_words.metrics import SMOOTHING, sentence_bleu


def says(cls, *ks):
    return [cls.FINDINGS[k].says for k in ks]


@pytest.mark.parametrize("k, changes", [
    (0, {"some_match": (0.0, 0.0)}),  # sacreBLEU's default no higher
    (0, {"some_match": (0.01, 0.3)}),  # ours not 0
    (1, {"no_match": (0.0, 0.01)}),
    (1, {"no_4gram": (0.01, 0.0)}),
])
def test_each_sacrebleu_defaults_finding_fails_just_past_its_threshold(k, changes):
    agreeing = ch08.SacrebleuDefaults((0.0, 0.3), (0.0, 0.0), (0.0, 0.0))
    assert agreeing.failing() == []
    assert replace(agreeing, **changes).failing() == says(ch08.SacrebleuDefaults, k)


def test_sacrebleu_defaults_run():
    assert ch08.sacrebleu_defaults().failing() == []


def test_the_chrf_finding_fails_just_past_its_threshold():
    agreeing = ch08.ChrfAgainstBleu({"13a": 80.0, "none": 80.0}, {"13a": 47.0, "none": 37.0})
    assert agreeing.failing() == []
    changed = replace(agreeing, chrf={"13a": 80.0, "none": 80.0 + 1e-9})
    assert changed.failing() == says(ch08.ChrfAgainstBleu, 0)
    changed = replace(agreeing, bleu={"13a": 47.0, "none": 47.0})
    assert changed.failing() == says(ch08.ChrfAgainstBleu, 0)
    run = ch08.chrf_against_bleu("The cat which sat.", "The cat, which sat.")
    assert run.failing() == []


def test_cat_against_cats():
    """The answer of ex-eval-chrf-solution-start: "cat" against "cats" has chrF2
    100 · 115/167 (chrP = 1, chrR = 23/36), and BLEU 0 under every smoothing."""
    assert abs(CHRF().corpus_score(["cat"], [["cats"]]).score - 100 * 115 / 167) < 1e-9
    for smooth in SMOOTHING:
        assert sentence_bleu(["cat"], [["cats"]], smooth=smooth).score == 0


def decoders(changed=None, **fields):
    every = {"greedy": 0.99, "beam K=3, α=0": 0.95, "beam K=3, α=0.7": 0.96,
             "sampling": 0.3, "top-2 sampling": 0.85}
    scores = {}
    for name, score in every.items():
        scores[name, "every"] = [score, 1.0 if name == "greedy" else score]
        scores[name, "y*"] = [score - 0.1] * 2
    six_15 = {name: ["six"] for name in ch08.DECODERS}
    result = ch08.DecoderBleu((38, 0), {**scores, **(changed or {})}, [46, 48], six_15)
    return replace(result, **fields)


GREEDY, BEAM, NORMALISED = "greedy", "beam K=3, α=0", "beam K=3, α=0.7"


@pytest.mark.parametrize("ks, result", [
    ((0,), decoders(greedy_phrasings=[44, 48])),
    ((0,), decoders(greedy_phrasings=[46, 47])),
    ((1,), decoders({(GREEDY, "every"): [0.99, 1 - 2e-12]})),
    ((2,), decoders(six_15={name: ["quarter"] for name in ch08.DECODERS})),
    ((3,), decoders({(GREEDY, "every"): [0.949, 1.0], (BEAM, "every"): [0.94, 0.95]})),
    ((4,), decoders({(BEAM, "every"): [0.99, 0.95]})),
    ((5,), decoders({(BEAM, "every"): [0.859, 0.95]})),  # 0.101 below the normalised
    ((5,), decoders({(NORMALISED, "every"): [0.96, 0.899]})),  # 0.101 below greedy
    ((6,), decoders({("sampling", "every"): [0.3, 0.5]})),
    ((7,), decoders({("top-2 sampling", "every"): [0.3, 0.85],  # as low as sampling
                     ("top-2 sampling", "y*"): [0.2, 0.75]})),
    ((7,), decoders({("top-2 sampling", "every"): [0.99, 0.85]})),  # as high as greedy
    ((8,), decoders({("top-2 sampling", "y*"): [0.75, 0.85]})),  # as high as every
])
def test_each_decoder_finding_fails_just_past_its_threshold(ks, result):
    assert decoders().failing() == []
    assert result.failing() == says(ch08.DecoderBleu, *ks)


def test_the_decoder_run_works_with_one_model():
    run = ch08.decoder_bleu(seeds=(ch08.CHAPTER_7_SEED,))
    assert run.seeds == (38,) and len(run.bleu["greedy", "y*"]) == 1
    assert run.six_15["beam K=3, α=0"] == ["six"]
