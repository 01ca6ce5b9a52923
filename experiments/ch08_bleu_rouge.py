"""Chapter 8's experiments: BLEU against sacreBLEU's defaults and chrF, and the decoders
of chapter 7 scored with BLEU.

* :func:`sacrebleu_defaults`: BLEU without smoothing against sacreBLEU's ``BLEU()``
  (Post, 2018), whose default smoothing is Chen and Cherry's (2014) ``exp``.
* :func:`chrf_against_bleu`: chrF (Popović, 2015) and BLEU (Papineni et al., 2002) on
  two tokenisations of one sentence.
* :func:`decoder_bleu`: greedy search, beam search with and without length normalisation
  (Wu et al., 2016), sampling and top-k sampling (Fan et al., 2018) on chapter 7's clock
  task, scored by corpus BLEU against every phrasing and against the most probable one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from experiments.findings import Finding, Result
from lib.part3_words.decoding import ClockTask, beam_search_batch, sample
from lib.part3_words.metrics import corpus_bleu


def _ours_and_theirs(candidate, reference):
    """Ours without smoothing and sacreBLEU's BLEU() defaults, on a one-sentence
    corpus."""
    ours = corpus_bleu([candidate.split()], [[reference.split()]]).score
    theirs = BLEU(tokenize="none").corpus_score([candidate], [[reference]]).score / 100
    return ours, theirs


@dataclass
class SacrebleuDefaults(Result):
    some_match: tuple[float, float]  # (ours, sacreBLEU's): no 3- or 4-gram matches
    no_match: tuple[float, float]  # no word of the candidate in the reference
    no_4gram: tuple[float, float]  # a three-word candidate

    FINDINGS = (
        Finding(
            "With an order that has n-grams but no match, and some other match, "
            "sacreBLEU's default scores higher than BLEU without smoothing.",
            backs=("bleu-default-smoothing",),
            holds=lambda r: r.some_match[1] > r.some_match[0] == 0,
        ),
        Finding(
            "With no match at all, or no 4-gram in the candidate, both score 0.",
            backs=("bleu-default-smoothing",),
            holds=lambda r: r.no_match == r.no_4gram == (0.0, 0.0),
        ),
    )


def sacrebleu_defaults() -> SacrebleuDefaults:
    cat = "the cat sat on the mat"
    return SacrebleuDefaults(
        _ours_and_theirs("the cat lay on a rug", cat),
        _ours_and_theirs("dogs bark at night now", cat),
        _ours_and_theirs("the dog barked", "the dog barked loudly"),
    )


@dataclass
class ChrfAgainstBleu(Result):
    chrf: dict[str, float]  # tokeniser ("13a" or "none") -> chrF2 of the comma example
    bleu: dict[str, float]  # tokeniser -> sacreBLEU's BLEU of the comma example

    FINDINGS = (
        Finding(
            "On the comma example chrF of the 13a tokens equals chrF of the raw "
            "strings, while BLEU differs.",
            backs=("sacrebleu-tokenize-read", "ex-eval-chrf-solution-start"),
            holds=lambda r: r.chrf["13a"] == r.chrf["none"]
            and r.bleu["13a"] != r.bleu["none"],
        ),
    )


def chrf_against_bleu(hypothesis, reference) -> ChrfAgainstBleu:
    """chrF and BLEU of ``hypothesis`` against ``reference`` under sacreBLEU's two
    tokenisers (chrF on pre-split 13a tokens)."""
    split_13a = Tokenizer13a()
    chrf = {
        tokenize: CHRF().corpus_score([split(hypothesis)], [[split(reference)]]).score
        for tokenize, split in (("13a", split_13a), ("none", str))
    }
    bleu = {
        tokenize: BLEU(tokenize=tokenize)
        .corpus_score([hypothesis], [[reference]])
        .score
        for tokenize in ("13a", "none")
    }
    return ChrfAgainstBleu(chrf, bleu)


CHAPTER_7_SEED = 38  # the seed of chapter 7's clock data and model

DECODERS = ("greedy", "beam K=3, α=0", "beam K=3, α=0.7", "sampling", "top-2 sampling")


def _decoder_outputs(task, model, generator):
    """Each decoder's output for every time, as a list of words."""

    def beam(beam_size, alpha):
        results = beam_search_batch(
            model.step, len(task.times), model.bos, task.eos, beam_size, 6, alpha
        )
        return [hypotheses[0][0] for hypotheses in results]

    def sampled(top_k):
        return [
            sample(
                model.for_source(t),
                model.bos,
                task.eos,
                6,
                top_k=top_k,
                generator=generator,
            )[0][0]
            for t in range(len(task.times))
        ]

    outputs = (beam(1, 0.0), beam(3, 0.0), beam(3, 0.7), sampled(None), sampled(2))
    return {
        name: [task.decode(tokens).split() for tokens in out]
        for name, out in zip(DECODERS, outputs)
    }


def _every_model(r, test):
    """``test(b)`` for each model, ``b(decoder, references="every")`` its BLEU."""
    return all(
        test(lambda name, references="every": r.bleu[name, references][k])
        for k in range(len(r.seeds))
    )


@dataclass
class DecoderBleu(Result):
    seeds: tuple[int, ...]
    bleu: dict[tuple[str, str], list[float]]  # (decoder, "every" or "y*") -> (seeds,)
    greedy_phrasings: list[int]  # (seeds,) greedy outputs, of 48, that are phrasings
    # decoder -> its 6:15 output with chapter 7's model (CHAPTER_7_SEED)
    six_15: dict[str, list[str]]

    FINDINGS = (
        Finding(
            "At least 45 of greedy search's 48 outputs are phrasings, for every model, "
            "and all 48 with some.",
            backs=("decoders-read",),
            holds=lambda r: min(r.greedy_phrasings) >= 45
            and max(r.greedy_phrasings) == 48,
        ),
        Finding(
            "Greedy search scores 1 against every phrasing with some model.",
            backs=("decoders-read",),
            holds=lambda r: max(r.bleu["greedy", "every"]) > 1 - 1e-12,
        ),
        Finding(
            "The unnormalised beam says 'six' for 6:15 with chapter 7's model.",
            backs=("decoders-read",),
            holds=lambda r: r.six_15.get("beam K=3, α=0") == ["six"],
        ),
        Finding(
            "Greedy search scores at least 0.95 against every phrasing, for every "
            "model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(r, lambda b: b("greedy") >= 0.95),
        ),
        Finding(
            "The unnormalised beam scores below greedy search against every phrasing, "
            "for every model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(r, lambda b: b("beam K=3, α=0") < b("greedy")),
        ),
        Finding(
            "The normalised beam is within 0.1 of greedy search and of the "
            "unnormalised beam, for every model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(
                r,
                lambda b: abs(b("beam K=3, α=0.7") - b("greedy")) <= 0.1
                and abs(b("beam K=3, α=0.7") - b("beam K=3, α=0")) <= 0.1,
            ),
        ),
        Finding(
            "Plain sampling scores below 0.5 against every phrasing, for every model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(r, lambda b: b("sampling") < 0.5),
        ),
        Finding(
            "Top-2 sampling scores between plain sampling and greedy search, for every "
            "model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(
                r, lambda b: b("sampling") < b("top-2 sampling") < b("greedy")
            ),
        ),
        Finding(
            "Every decoder scores lower against y* alone than against every phrasing, "
            "for every model.",
            backs=("decoders-read",),
            holds=lambda r: _every_model(
                r, lambda b: all(b(name, "y*") < b(name) for name in DECODERS)
            ),
        ),
    )


def decoder_bleu(seeds=(CHAPTER_7_SEED, 0, 1, 2, 3)) -> DecoderBleu:
    """For each seed, chapter 7's clock data and counted model (CHAPTER_7_SEED is the
    chapter's), every decoder's outputs for the 48 times, scored against every phrasing
    and y*."""
    bleu = {(name, refs): [] for name in DECODERS for refs in ("every", "y*")}
    greedy_phrasings, six_15 = [], {}
    for seed in seeds:
        task = ClockTask(seed=seed)
        model = task.fit_model(per_time=200, delta=1.0, seed=seed)
        times = range(len(task.times))
        every_phrasing = [
            [task.decode(p).split() for p in task.phrasings[t]] for t in times
        ]
        most_probable = [[task.decode(task.best(t)).split()] for t in times]
        outputs_of = _decoder_outputs(task, model, torch.Generator().manual_seed(0))
        if seed == CHAPTER_7_SEED:
            six_15 = {
                name: out[task.times.index("6:15")] for name, out in outputs_of.items()
            }
        greedy_phrasings.append(
            sum(out in every_phrasing[t] for t, out in enumerate(outputs_of["greedy"]))
        )
        for name, outputs in outputs_of.items():
            bleu[name, "every"].append(corpus_bleu(outputs, every_phrasing).score)
            bleu[name, "y*"].append(corpus_bleu(outputs, most_probable).score)
    return DecoderBleu(tuple(seeds), bleu, greedy_phrasings, six_15)
