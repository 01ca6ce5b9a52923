"""Tests for lib/part4_attention/pairs.py, with the reversal task's pairs and
lib.part4_attention.seq2seq.greedy_translate: reversal pairs by hand, a disjoint and
reproducible split, seeded training, and greedy decoding against an oracle."""

import pytest
import torch
import torch.nn.functional as F

from lib.part4_attention.pairs import SequencePairs, train_seq2seq
from lib.part4_attention.reversal_task import ReversalTask
from lib.part4_attention.seq2seq import greedy_translate
from lib.part4_attention.transformer import Seq2SeqTransformer, TransformerConfig


def test_reversal_pairs_hand_checked():
    task = ReversalTask(min_len=2, max_len=4)
    pairs = task.pairs([task.encode("314"), task.encode("27")])
    assert pairs.src.tolist() == [[6, 4, 7, 0], [5, 10, 0, 0]]
    assert pairs.src_lens.tolist() == [3, 2]
    assert pairs.tgt_in.tolist() == [[1, 7, 4, 6, 0], [1, 10, 5, 0, 0]]
    assert pairs.tgt_out.tolist() == [[7, 4, 6, 2, 0], [10, 5, 2, 0, 0]]
    assert task.digits(pairs.tgt_out[0].tolist()) == "413"
    with pytest.raises(ValueError, match="sources must have 2 to 4 tokens; found 5"):
        task.pairs([task.encode("12345")])
    with pytest.raises(ValueError, match="digits must be a string of 0-9; found '3a'"):
        task.encode("3a")
    with pytest.raises(ValueError, match="pad, bos and eos must be 0, 1 and 2 .*; found pad = 13, bos = 1, eos = 2"):
        ReversalTask(pad=13)  # ids 3-12 are the digits
    with pytest.raises(ValueError, match="vocab_size must be an int >= 13; found 10"):
        ReversalTask(vocab_size=10)
    with pytest.raises(ValueError, match=r"tokens must be ids below 13 \(9 is id 12\); found 13"):
        task.digits([3, 13])


def test_reversal_split_is_disjoint_and_reproducible():
    task = ReversalTask(min_len=2, max_len=3)  # only 1,100 strings: collisions are certain
    train, test = task.split(300, 200, seed=0)
    as_strings = lambda pairs: [task.digits(row[:n].tolist()) for row, n in zip(pairs.src, pairs.src_lens)]
    assert not set(as_strings(train)) & set(as_strings(test))
    assert len(set(as_strings(test))) == 200
    again, _ = task.split(300, 200, seed=0)
    assert torch.equal(again.src, train.src)
    lengths = train.src_lens.tolist()
    assert set(lengths) == {2, 3}


def test_training_is_deterministic_under_the_seed_and_lowers_the_loss():
    task = ReversalTask(min_len=2, max_len=4)
    train, _ = task.split(96, 1, seed=0)
    logs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = Seq2SeqTransformer(13, 13, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=8))
        logs.append(train_seq2seq(model, train, epochs=3, batch_size=32, lr=1e-2))
    assert logs[0].losses == logs[1].losses
    assert logs[0].losses[-1] < logs[0].losses[0]
    assert len(logs[0].seconds) == 3 and all(s > 0 for s in logs[0].seconds)
    with pytest.raises(TypeError, match=r"(?s)parameter 'data'.*Actual value: \(.*Expected type: <class 'lib.part4_attention.pairs.SequencePairs'>"):
        train_seq2seq(model, (train.src,), epochs=1)


class ReversingOracle(torch.nn.Module):
    """A 'model' whose step function puts all probability on the right next token."""

    def __init__(self, task):
        super().__init__()
        self.task = task

    def step_fn(self, src, src_lens):
        def step(prefixes, sources):
            log_probs = torch.full((len(sources), self.task.vocab_size), -30.0)
            for row, (prefix, s) in enumerate(zip(prefixes.tolist(), sources.tolist())):
                target = src[s, : src_lens[s]].flip(0).tolist() + [self.task.eos]
                log_probs[row, target[len(prefix) - 1]] = 0.0
            return F.log_softmax(log_probs, -1)

        return step


def test_greedy_translate_returns_each_source_s_best_output():
    task = ReversalTask(min_len=2, max_len=5)
    _, test = task.split(5, 6, seed=1)
    outputs = greedy_translate(ReversingOracle(task), test, task.bos, task.eos, task.max_len + 1)
    for output, row, n in zip(outputs, test.tgt_out, test.src_lens):
        assert output == row[: n + 1].tolist()


def test_sequence_pairs_index_like_tensors():
    task = ReversalTask()
    train, _ = task.split(10, 1, seed=0)
    part = train[torch.tensor([3, 1])]
    assert isinstance(part, SequencePairs) and len(part) == 2
    assert torch.equal(part.src[1], train.src[1])


def test_sequence_pairs_refuse_what_their_shapes_cannot_say():
    src, tgt = torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src_lens must lie in \[0, S = 4\]; found -1 to 9"):
        SequencePairs(src, torch.tensor([-1, 9]), tgt, tgt)
    pairs = SequencePairs(src, torch.tensor([4, 0]), tgt, tgt)
    with pytest.raises(TypeError, match=r"(?s)parameter 'index'.*Actual value: 0"):
        pairs[0]  # an int would drop the batch axis
    assert len(pairs[torch.tensor([1])]) == 1 and len(pairs[:1]) == 1
    empty = ReversalTask().pairs([])
    assert len(empty) == 0 and empty.src_lens.dtype == torch.long
    with pytest.raises(ValueError, match="sources must hold digit ids, 3 to 12; found 3 to 99"):
        ReversalTask().pairs([[3, 4, 5, 99]])
    with pytest.raises(ValueError, match="sources must hold digit ids, 3 to 12; found 0 to 5"):
        ReversalTask().pairs([[3, 4, 5, 0]])  # a pad inside a source
    model = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="data must hold at least one pair; found 0"):
        train_seq2seq(model, empty, epochs=1)


def test_a_pad_of_minus_one_scores_every_target():
    """The sorting task's targets use every id from 0, so chapter 10 trains with pad=-1."""
    from lib.part4_attention.pointer import PointerNetwork
    from lib.part4_attention.sorting_task import SortingTask

    data = SortingTask(length=4).sample(16, seed=0)
    torch.manual_seed(0)
    net = PointerNetwork(input_dim=1, hidden_dim=8, attention_dim=8)
    log = train_seq2seq(net, data, epochs=1, batch_size=8, pad=-1)
    assert len(log.losses) == 1 and log.losses[0] > 0
