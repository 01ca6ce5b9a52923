"""The checkers of chapter 5: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch
import torch.nn.functional as F

from lib.checks import CHECKS, CheckFailed, check_keep_probabilities, check_negative_sampling_loss


def test_the_checks_are_registered():
    assert CHECKS["check_negative_sampling_loss"] is check_negative_sampling_loss
    assert CHECKS["check_keep_probabilities"] is check_keep_probabilities


# ---- the negative-sampling loss ----------------------------------------------------------
def sgns_with_einsum(centre, context, noise):
    positive = torch.einsum("bd,bd->b", centre, context)
    negative = torch.einsum("bkd,bd->bk", noise, centre)
    return -F.logsigmoid(positive) - F.logsigmoid(-negative).sum(dim=1)


def sgns_with_a_loop(centre, context, noise):
    losses = []
    for h, u, n in zip(centre, context, noise):
        loss = -math.log(1 / (1 + math.exp(-float(u @ h))))
        for u_k in n:
            loss -= math.log(1 / (1 + math.exp(float(u_k @ h))))
        losses.append(loss)
    return torch.tensor(losses, dtype=torch.float32)  # float32 is accepted


def sgns_as_binary_cross_entropy(centre, context, noise):
    rows = torch.cat([context[:, None], noise], dim=1)  # (B, 1 + K, D)
    logits = (rows @ centre[:, :, None]).squeeze(-1)
    labels = torch.zeros_like(logits)
    labels[:, 0] = 1
    return F.binary_cross_entropy_with_logits(logits, labels, reduction="none").sum(dim=1)


@pytest.mark.parametrize("answer", [sgns_with_einsum, sgns_with_a_loop, sgns_as_binary_cross_entropy])
def test_negative_sampling_accepts_right_answers(answer, capsys):
    check_negative_sampling_loss(answer)
    assert capsys.readouterr().out.startswith("✓ your negative-sampling losses agree with lib.word2vec")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda h, u, n: -F.logsigmoid((h * u).sum(1)) - F.logsigmoid(torch.einsum("bkd,bd->bk", n, h)).sum(1),
         "flip the sign of their scores"),
        (lambda h, u, n: -F.logsigmoid((h * u).sum(1)) - F.logsigmoid(-torch.einsum("bkd,bd->bk", n, h)).mean(1),
         "you averaged them"),
        (lambda *a: -sgns_with_einsum(*a), "put a minus sign in front"),
        (lambda h, u, n: -torch.log_softmax(torch.cat([(h * u).sum(1, keepdim=True),
                                                       torch.einsum("bkd,bd->bk", n, h)], 1), 1)[:, 0],
         "one sigmoid per word"),
        (lambda *a: sgns_with_einsum(*a).mean(), "not their sum or mean"),
        (lambda h, u, n: -F.logsigmoid(-torch.einsum("bkd,bd->bk", n, h)), "add the K noise terms"),
        (lambda *a: sgns_with_einsum(*a) + 1e-3, "differs from lib.word2vec's by up to 0.001"),
        (lambda *a: sgns_with_einsum(*a).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_negative_sampling_explains_wrong_answers(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_negative_sampling_loss(answer)


# ---- subsampling ---------------------------------------------------------------------------
def keep_from_the_formula(counts, sample):
    f = counts.double() / counts.sum()
    return torch.clamp((torch.sqrt(f / sample) + 1) * sample / f, max=1.0)


def keep_with_a_loop(counts, sample):
    total = int(counts.sum())
    return torch.tensor([min(1.0, math.sqrt(sample * total / c) + sample * total / c) for c in counts.tolist()])


@pytest.mark.parametrize("answer", [keep_from_the_formula, keep_with_a_loop])
def test_keep_probabilities_accept_right_answers(answer, capsys):
    check_keep_probabilities(answer)
    assert capsys.readouterr().out.startswith("✓ your keep probabilities agree with lib.word2vec")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda c, s: torch.clamp(torch.sqrt(s * c.sum() / c.double()), max=1.0), "the paper's sqrt"),
        (lambda c, s: (torch.sqrt(c.double() / c.sum() / s) + 1) * s * c.sum() / c.double(), "cap the probabilities at 1"),
        (lambda c, s: 1 - keep_from_the_formula(c, s), "probability of discarding"),
        (lambda c, s: torch.clamp(torch.sqrt(s / c.double()) + s / c.double(), max=1.0), "count / total"),
        (lambda c, s: keep_from_the_formula(c, s)[:-1], r"has shape \(\d+,\); expected \(V,\)"),
        (lambda c, s: keep_from_the_formula(c, s) * 0.99, "differs from lib.word2vec's"),
        (lambda c, s: float("nan") * keep_from_the_formula(c, s), "NaN"),
    ],
)
def test_keep_probabilities_explain_wrong_answers(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_keep_probabilities(answer)


def test_not_implemented_is_reported_as_such():
    def stub(*args):
        raise NotImplementedError("write the body")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_keep_probabilities(stub)


# ---- fairness: right answers written from the statements, the likeliest wrong ones -----------------
def sgns_noise_scores_not_negated(centre, context, noise):
    return -F.logsigmoid((centre * context).sum(1)) - F.logsigmoid(torch.einsum("bkd,bd->bk", noise, centre)).sum(1)


def sgns_noise_terms_averaged(centre, context, noise):
    return -F.logsigmoid((centre * context).sum(1)) - F.logsigmoid(-torch.einsum("bkd,bd->bk", noise, centre)).mean(1)


def sgns_log_likelihood_not_loss(centre, context, noise):
    return -sgns_with_einsum(centre, context, noise)


def sgns_softmax_over_true_and_noise(centre, context, noise):
    scores = torch.cat([(centre * context).sum(1, keepdim=True), torch.einsum("bkd,bd->bk", noise, centre)], 1)
    return -torch.log_softmax(scores, 1)[:, 0]


def sgns_summed_over_the_batch(centre, context, noise):
    return sgns_with_einsum(centre, context, noise).sum()


def keep_literal_first_form(counts, sample):
    """The statement's min(1, sqrt(s/f) + s/f), f = count / total, in float32 as torch divides longs."""
    f = counts / counts.sum()
    return torch.minimum(torch.ones_like(f), torch.sqrt(sample / f) + sample / f)


def keep_the_papers_formula(counts, sample):
    return torch.clamp(torch.sqrt(sample * counts.sum() / counts.double()), max=1.0)


def keep_without_the_cap(counts, sample):
    ratio = sample * counts.sum() / counts.double()
    return ratio.sqrt() + ratio


def keep_discard_probability(counts, sample):
    return 1 - keep_from_the_formula(counts, sample)


def keep_with_raw_counts(counts, sample):
    ratio = sample / counts.double()
    return torch.clamp(ratio.sqrt() + ratio, max=1.0)


FAIRNESS = {
    "check_negative_sampling_loss": {
        "right": [sgns_with_a_loop, sgns_as_binary_cross_entropy],
        "wrong": [
            (sgns_noise_scores_not_negated, "flip the sign of their scores"),
            (sgns_noise_terms_averaged, "sum the K noise terms; you averaged them"),
            (sgns_log_likelihood_not_loss, "put a minus sign in front"),
            (sgns_softmax_over_true_and_noise, "one sigmoid per word"),
            (sgns_summed_over_the_batch, "one loss per example, not their sum or mean"),
        ],
    },
    "check_keep_probabilities": {
        "right": [keep_with_a_loop, keep_literal_first_form],
        "wrong": [
            (keep_the_papers_formula, "the paper's sqrt"),
            (keep_without_the_cap, "cap the probabilities at 1"),
            (keep_discard_probability, "probability of discarding"),
            (keep_with_raw_counts, "count / total"),
        ],
    },
}
