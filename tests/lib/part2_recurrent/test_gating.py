"""Tests for lib/part2_recurrent/recall_task.py and lib/part2_recurrent/gating.py: the task's layout by hand, the keep-gate bias and
the lib layer that computes the same function, a short gap that an LSTM learns reproducibly, and a
test set that never repeats a training sequence."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.part2_recurrent.gating import MemoryClassifier, sequence_symbols, train_memory_task, unseen_batch
from lib.part2_recurrent.recall_task import MemoryTask

pytestmark = pytest.mark.usefixtures("one_thread")


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def test_memory_task_batch_layout():
    task = MemoryTask(length=3, symbols=4)
    x, y = task.batch(5, torch.Generator().manual_seed(0))
    assert x.shape == (5, 5, 6) and y.shape == (5,)
    torch.testing.assert_close(x[:, 0, :4], F.one_hot(y, 4).float())
    assert (x[:, 0, 4] == 1).all() and (x[:, 1:, 4] == 0).all(), "store flag on the first step only"
    assert (x[:, -1, 5] == 1).all() and (x[:, :-1, 5] == 0).all(), "recall flag on the last step only"
    assert (x[:, 1:4, :4].sum(-1) == 1).all() and (x[:, -1, :4] == 0).all()
    with pytest.raises(TypeError, match=r"(?s)parameter 'length'.*Actual value: -1.*is_at_least_0"):
        MemoryTask(-1)


def test_memory_classifier_keep_bias_and_lib_layer():
    model = MemoryClassifier("lstm", 6, 3, 4, keep_bias=5.0)
    forget = slice(3, 6)
    assert torch.equal(model.recurrent.bias_ih_l0[forget] + model.recurrent.bias_hh_l0[forget], torch.full((3,), 5.0))
    x = randn(2, 7, 6, dtype=torch.float32)
    layer = model.lib_layer()
    torch.testing.assert_close(layer(x)[0][:, -1], model.recurrent(x)[0][:, -1], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="a plain RNN has no gate"):
        MemoryClassifier("rnn", 6, 3, 4, keep_bias=1.0)
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps of D = 6 features; found shape \(2, 7, 5\)"):
        model(x[..., :5])
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps of D = 6 features; found shape \(2, 0, 6\)"):
        model(x[:, :0])
    with pytest.raises(TypeError, match=r"x must be torch.float32, as the weights; found torch.float64"):
        model(x.double())
    with pytest.raises(TypeError, match=r"(?s)parameter 'x'.*Actual value: i64\[2,7\]"):
        model(torch.zeros(2, 7, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'kind'.*Actual value: 'cnn'.*Literal\['rnn'"):
        MemoryClassifier("cnn", 6, 3, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'hidden_size'.*Actual value: 0.*is_at_least_1"):
        MemoryClassifier("gru", 6, 0, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'keep_bias'.*Actual value: nan.*is_finite"):
        MemoryClassifier("gru", 6, 3, 4, keep_bias=float("nan"))
    with pytest.raises(ValueError, match=r"MemoryClassifier of input_size=6, hidden_size=1000000, classes=4 would hold 4e\+12"):
        MemoryClassifier("lstm", 6, 10**6, 4)
    with pytest.raises(ValueError, match=r"x must have T >= 1 steps and D = symbols \+ 2 = 6 features; found shape \(2, 7, 5\)"):
        sequence_symbols(x[..., :5], 4)
    with pytest.raises(ValueError, match=r"x must have T >= 1 steps and D = symbols \+ 2 = 6 features; found shape \(2, 0, 6\)"):
        sequence_symbols(x[:, :0], 4)
    # numpy sizes are ints too (the parameter count and torch's layers took only int)
    assert MemoryClassifier("gru", 6, np.int64(3), 4).recurrent.hidden_size == 3


def test_unseen_batch_keeps_the_fresh_draws_in_order_and_counts_the_replaced_ones():
    task = MemoryTask(3)
    x, y = task.batch(6, torch.Generator().manual_seed(0))
    rows = [tuple(r) for r in sequence_symbols(x, 4).tolist()]
    assert len(set(rows)) == 6
    seen = {rows[1], rows[4]}  # two of the first six draws are "training" sequences
    kept, answers, replaced = unseen_batch(task, 4, torch.Generator().manual_seed(0), seen)
    # the first four fresh draws of the same stream: rows 0, 2, 3 and 5; rows 1 and 4 were replaced
    assert torch.equal(kept, x[[0, 2, 3, 5]]) and torch.equal(answers, y[[0, 2, 3, 5]]) and replaced == 2
    same, _, none = unseen_batch(task, 6, torch.Generator().manual_seed(0), set())
    assert torch.equal(same, x) and none == 0


def test_unseen_batch_refuses_a_seen_collection_that_is_not_a_set():
    with pytest.raises(TypeError, match=r"(?s)parameter 'seen'.*Actual value: \[\]"):
        unseen_batch(MemoryTask(2), 4, torch.Generator(), [])


def test_a_task_too_small_for_an_unseen_batch_is_refused():
    seen = set(itertools.product(range(4), repeat=3))  # all 4^3 sequences of 2 distractors
    with pytest.raises(ValueError, match=r"only 0 sequences outside the 64 seen.*4\^3"):
        unseen_batch(MemoryTask(2), 4, torch.Generator().manual_seed(0), seen)


@pytest.fixture(scope="module")
def short_gap_run():
    return train_memory_task("lstm", length=6, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)


def test_train_memory_task_solves_a_short_gap_and_is_reproducible(short_gap_run):
    assert short_gap_run.accuracy > 0.95
    first = train_memory_task("lstm", length=6, steps=20, hidden_size=16, keep_bias=1.0, lr=1e-2)
    again = train_memory_task("lstm", length=6, steps=20, hidden_size=16, keep_bias=1.0, lr=1e-2)
    assert first.losses == again.losses and first.accuracy == again.accuracy


def test_the_untrained_copy_is_the_model_as_the_seed_initialised_it(short_gap_run):
    torch.manual_seed(0)
    fresh = MemoryClassifier("lstm", 6, 16, 4, keep_bias=1.0)
    untrained, trained = short_gap_run.untrained.state_dict(), short_gap_run.model.state_dict()
    assert all(torch.equal(untrained[name], value) for name, value in fresh.state_dict().items())
    assert not torch.equal(untrained["output.weight"], trained["output.weight"])


def test_the_test_sequences_never_occur_in_training(short_gap_run):
    """With 6 distractors there are only 4^7 = 16,384 sequences and training draws 7,680: hundreds of
    test draws repeat a training sequence, and every one of them is replaced."""
    run = short_gap_run
    train = set(map(tuple, run.train_symbols.tolist()))
    test = list(map(tuple, run.test_symbols.tolist()))
    assert run.train_symbols.shape == (120 * 64, 7) and run.test_symbols.shape == (1000, 7)
    assert train.isdisjoint(test) and run.replaced > 100
    # the training sequences are the ones the training generator drew
    task, generator = MemoryTask(6), torch.Generator().manual_seed(1)
    drawn = torch.cat([sequence_symbols(task.batch(64, generator)[0], 4) for _ in range(120)])
    assert torch.equal(drawn, run.train_symbols)


def test_train_memory_task_refuses_a_negative_length_and_no_steps():
    with pytest.raises(TypeError, match=r"(?s)parameter 'length'.*Actual value: -1.*is_at_least_0"):
        train_memory_task("lstm", length=-1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'steps'.*Actual value: 0.*is_at_least_1"):
        train_memory_task("lstm", length=2, steps=0)
