"""Tests for lib/training.py: the training step shared by the language-model trainers of
chapters 3 and 6, against the same steps written out with torch."""

import pytest
import torch
import torch.nn.functional as F


def test_train_step_equals_the_steps_written_out_with_torch():
    from functools import partial

    from lib.part2_recurrent.rnn import clip_grad_norm
    from lib.training import train_step

    def setup():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(6, 4), torch.nn.Linear(4, 5)).double()
        return model, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    tokens = torch.tensor([[1, 2, 3], [4, 5, 0]])
    targets = torch.tensor([[2, 3, -100], [0, 1, 4]])  # one padded position
    model, optimizer = setup()
    reference, reference_optimizer = setup()
    for _ in range(3):
        loss = train_step(optimizer, model(tokens), targets, clip=partial(clip_grad_norm, max_norm=0.1))
        expected = F.cross_entropy(reference(tokens).reshape(6, 5), targets.reshape(6), ignore_index=-100)
        reference_optimizer.zero_grad()
        expected.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.1)
        reference_optimizer.step()
        assert loss == expected.item()
        for got, want in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(got, want, atol=1e-14, rtol=0)
    # Without clip the step is not clipped: the two models part.
    train_step(optimizer, model(tokens), targets)
    expected = F.cross_entropy(reference(tokens).reshape(6, 5), targets.reshape(6), ignore_index=-100)
    reference_optimizer.zero_grad()
    expected.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.1)
    reference_optimizer.step()
    assert not torch.allclose(model[1].weight, reference[1].weight)
    with pytest.raises(TypeError, match=r"(?s)parameter 'optimizer'.*Actual value: Sequential.*Optimizer"):
        train_step(model, model(tokens), targets)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*i64\[2,2\].*Int64\[Tensor, 'B \*positions'\]"):
        train_step(optimizer, model(tokens), targets[:, :2])
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*i32\[2,3\].*Int64\[Tensor"):
        train_step(optimizer, model(tokens), targets.int())
    with pytest.raises(TypeError, match=r"(?s)parameter 'logits'.*f64\[5\].*Float\[Tensor, 'B \*positions V'\]"):
        train_step(optimizer, model(tokens)[0, 0], targets[0, 0])
    with pytest.raises(TypeError, match=r"(?s)parameter 'clip'.*Actual value: 1.0.*Callable"):
        train_step(optimizer, model(tokens), targets, clip=1.0)


def test_train_step_refuses_targets_outside_the_vocabulary_before_stepping():
    from lib.training import train_step

    model = torch.nn.Linear(3, 5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    logits = model(torch.ones(2, 3))
    before = model.weight.clone()
    for bad, found in (([0, 5], "from 0 to 5"), ([-1, 4], "from -1 to 4")):
        with pytest.raises(ValueError, match=rf"targets must hold ids in \[0, 5\) or ignore_index \(-100\); found ids {found}"):
            train_step(optimizer, logits, torch.tensor(bad))
    assert torch.equal(model.weight, before)  # nothing was stepped
    # The edges are ids, and ignore_index may lie outside [0, V).
    train_step(optimizer, model(torch.ones(2, 3)), torch.tensor([0, 4]))
    train_step(optimizer, model(torch.ones(2, 3)), torch.tensor([7, 4]), ignore_index=7)
