"""Tests for lib/tasks/recall.py and lib/gating.py: the task's layout by hand, the keep-gate bias and
the lib layer that computes the same function, and a short gap that an LSTM learns reproducibly."""

import pytest
import torch
import torch.nn.functional as F

from lib.gating import MemoryClassifier, train_memory_task
from lib.tasks import MemoryTask


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
    with pytest.raises(ValueError, match="length must be an int >= 0; found -1"):
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


def test_train_memory_task_solves_a_short_gap_and_is_reproducible():
    first = train_memory_task("lstm", length=2, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)
    again = train_memory_task("lstm", length=2, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)
    assert first.accuracy > 0.95
    assert first.losses == again.losses and first.accuracy == again.accuracy
