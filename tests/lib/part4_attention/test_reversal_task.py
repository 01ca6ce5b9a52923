"""Tests for lib.part4_attention.reversal_task.CopyTask: copy pairs by hand, and the same sources as ReversalTask under a seed."""

import pytest
import torch

from lib.part4_attention.reversal_task import CopyTask, ReversalTask


def test_copy_pairs_hand_checked():
    task = CopyTask(min_len=2, max_len=4)
    pairs = task.pairs([task.encode("314"), task.encode("27")])
    assert pairs.src.tolist() == [[6, 4, 7, 0], [5, 10, 0, 0]] and pairs.src_lens.tolist() == [3, 2]
    assert pairs.tgt_in.tolist() == [[1, 6, 4, 7, 0], [1, 5, 10, 0, 0]]
    assert pairs.tgt_out.tolist() == [[6, 4, 7, 2, 0], [5, 10, 2, 0, 0]]
    with pytest.raises(ValueError, match="sources must have 2 to 4 tokens; found 5"):
        task.pairs([task.encode("12345")])


def test_copy_split_draws_the_reversal_sources_and_copies_them():
    copy_train, copy_test = CopyTask(min_len=3, max_len=8).split(200, 100, seed=3)
    rev_train, rev_test = ReversalTask(min_len=3, max_len=8).split(200, 100, seed=3)
    for copy, rev in ((copy_train, rev_train), (copy_test, rev_test)):
        assert torch.equal(copy.src, rev.src) and torch.equal(copy.src_lens, rev.src_lens)
        for row, n, target in zip(copy.src, copy.src_lens, copy.tgt_out):
            assert target[:n].tolist() == row[:n].tolist() and target[n] == 2  # the source, then <eos>
        # the reversal targets are the copy targets reversed (before <eos>)
        for copied, reversed_, n in zip(copy.tgt_out, rev.tgt_out, rev.src_lens):
            assert reversed_[:n].tolist() == copied[:n].flip(0).tolist()


def test_gold_alignments_by_hand_and_every_gold_digit_is_the_output():
    """Copying "314" and "27": output t reads source t; reversing, source n - 1 - t; the <eos> step
    (t = n) and the padding read nothing. And for 50 random strings of each task, the gold source digit
    of every output step is that step's output digit (its target)."""
    for task, first, second in ((CopyTask(min_len=2, max_len=4), [0, 1, 2], [0, 1]),
                                (ReversalTask(min_len=2, max_len=4), [2, 1, 0], [1, 0])):
        pairs = task.pairs([task.encode("314"), task.encode("27")])
        gold = task.gold_alignment(pairs)
        assert gold.shape == (2, 5, 4) and gold.dtype == torch.bool
        expected = torch.zeros(2, 5, 4, dtype=torch.bool)
        for i, positions in enumerate((first, second)):
            for t, s in enumerate(positions):
                expected[i, t, s] = True
        assert torch.equal(gold, expected)
        _, test = task.split(10, 50, seed=4)
        gold = task.gold_alignment(test)
        for i in range(50):
            n = int(test.src_lens[i])
            assert gold[i].sum() == n and not gold[i, n:].any()  # one link per digit step, none after
            for t in range(n):
                (s,) = gold[i, t].nonzero()[0].tolist()
                assert test.src[i, s] == test.tgt_out[i, t]
