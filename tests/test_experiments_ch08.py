"""experiments.ch08_bleu_rouge: each finding holds on a result that shows it and fails on one
that contradicts it (made-up numbers); the exact runs show their findings."""
from dataclasses import replace

from experiments import ch08_bleu_rouge as ch08


def failing(result):
    """The sentences of the findings that do not hold for ``result``."""
    return [f.says for f in result.FINDINGS if not f.holds(result)]


def test_sacrebleu_defaults_findings():
    agreeing = ch08.SacrebleuDefaults((0.0, 0.3), (0.0, 0.0), (0.0, 0.0))
    assert failing(agreeing) == []
    assert len(failing(replace(agreeing, some_match=(0.0, 0.0)))) == 1
    assert len(failing(replace(agreeing, no_4gram=(0.0, 0.5)))) == 1
    assert failing(ch08.sacrebleu_defaults()) == []


def test_chrf_findings():
    smoothing = dict.fromkeys(("none", "floor", "add-k", "exp"), 0.0)
    agreeing = ch08.ChrfAgainstBleu(100 * 115 / 167, smoothing, {"13a": 80.0, "none": 80.0},
                                    {"13a": 47.0, "none": 37.0})
    assert failing(agreeing) == []
    assert len(failing(replace(agreeing, bleu_stem={**smoothing, "add-k": 0.1}))) == 1
    assert len(failing(replace(agreeing, chrf={"13a": 80.0, "none": 79.0}))) == 1
    run = ch08.chrf_against_bleu("The cat which sat.", "The cat, which sat.")
    assert failing(run) == []


def decoders(changed=None):
    every = {"greedy": 0.99, "beam K=3, α=0": 0.95, "beam K=3, α=0.7": 0.96,
             "sampling": 0.3, "top-2 sampling": 0.85}
    scores = {}
    for name, score in every.items():
        scores[name, "every"] = [score, 1.0 if name == "greedy" else score]
        scores[name, "y*"] = [score - 0.1] * 2
    six_15 = {name: ["six"] for name in ch08.DECODERS}
    return ch08.DecoderBleu((38, 0), {**scores, **(changed or {})}, [46, 48], six_15)


def test_decoder_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(decoders()) == []
    # plain sampling as good as top-2 on one model
    assert len(failing(decoders({("sampling", "every"): [0.3, 0.9]}))) == 2
    assert len(failing(replace(decoders(), greedy_phrasings=[44, 48]))) == 1


def test_the_decoder_run_works_with_one_model():
    run = ch08.decoder_bleu(seeds=(38,))
    assert run.seeds == (38,) and len(run.bleu["greedy", "y*"]) == 1
    assert run.six_15["beam K=3, α=0"] == ["six"]
