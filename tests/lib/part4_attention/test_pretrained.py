"""Tests for lib/part4_attention/pretrained.py: BERT's input packing and embedding by hand, binomial statistics for
its 15/80/10/10 masking, and ELMo's biLM against torch.nn.LSTM with copied weights."""

import math

import pytest
import torch
from torch import nn

from lib.part4_attention.pretrained import BertEmbedding, BiLM, ScalarMix, bert_input, mask_tokens


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------
# BERT: input and masked language model.
# ---------------------------------------------------------------------------


def test_bert_input_for_one_text_and_for_a_pair():
    tokens, segments = bert_input([7, 8, 9], cls_id=1, sep_id=2)
    assert tokens.tolist() == [1, 7, 8, 9, 2] and segments.tolist() == [0, 0, 0, 0, 0]
    tokens, segments = bert_input([7, 8], [5, 6, 4], cls_id=1, sep_id=2)
    assert tokens.tolist() == [1, 7, 8, 2, 5, 6, 4, 2]
    assert segments.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(TypeError, match=r"(?s)parameter 'second'.*Actual value: 'ab'.*is_a_token_id"):
        bert_input([1], "ab")
    with pytest.raises(TypeError, match=r"(?s)parameter 'first'.*Actual value: \[1, -2\].*is_a_token_id"):
        bert_input([1, -2])
    with pytest.raises(ValueError, match=r"first and second must each hold at least one token id; found first=\[1\], second=\[\]"):
        bert_input([1], [])


def test_bert_embedding_is_the_sum_of_token_segment_and_position_embeddings():
    torch.manual_seed(0)
    embed = BertEmbedding(vocab_size=12, d_model=5, max_len=10)
    tokens, segments = bert_input([7, 8], [5], cls_id=1, sep_id=2)
    output = embed(tokens[None], segments[None])[0]
    for position, (token, segment) in enumerate(zip(tokens.tolist(), segments.tolist())):
        expected = embed.token.weight[token] + embed.segment.weight[segment] + embed.position.weight[position]
        torch.testing.assert_close(output[position], expected)
    with pytest.raises(ValueError, match=r"segments must hold ids in \[0, 2\)"):
        embed(tokens[None], torch.full_like(tokens, 2)[None])
    with pytest.raises(TypeError, match=r"(?s)parameter 'segments'.*Actual value: i64\[1,3\].*IdDtype\[Tensor, 'B T'\].*T=6"):
        embed(tokens[None], segments[None, :3])


def test_mask_tokens_frequencies_are_bert_s_15_80_10_10():
    vocab_size, mask_id, cls_id, sep_id = 50, 3, 1, 2
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, vocab_size, (400, 250), generator=generator)
    tokens[:, 0], tokens[:, -1] = cls_id, sep_id
    corrupted, targets = mask_tokens(tokens, mask_id, vocab_size, special_ids=(cls_id, sep_id),
                                     generator=torch.Generator().manual_seed(1))
    selectable = 400 * 248
    selected = targets != -100
    n = int(selected.sum())
    # Binomial proportions: a 5-sigma tolerance fails by chance with probability < 1e-6.
    sigma = math.sqrt(0.15 * 0.85 / selectable)
    assert abs(n / selectable - 0.15) < 5 * sigma
    # Among the selected: <mask> with prob 0.8 (+ 0.1/V from a random draw hitting mask_id),
    # unchanged with prob 0.1 (+ 0.1/V from a random draw hitting the original), other tokens otherwise.
    expected = {"mask": 0.8 + 0.1 / vocab_size, "kept": 0.1 + 0.1 / vocab_size, "random": 0.1 * (1 - 2 / vocab_size)}
    found = {
        "mask": int((corrupted[selected] == mask_id).sum()) / n,
        "kept": int((corrupted[selected] == tokens[selected]).sum()) / n,
        "random": int(((corrupted[selected] != mask_id) & (corrupted[selected] != tokens[selected])).sum()) / n,
    }
    for fate, p in expected.items():
        assert abs(found[fate] - p) < 5 * math.sqrt(p * (1 - p) / n), (fate, found[fate], p)
    assert torch.equal(targets[selected], tokens[selected])
    assert torch.equal(corrupted[~selected], tokens[~selected]), "unselected tokens are never changed"
    assert not selected[:, 0].any() and not selected[:, -1].any(), "special tokens are never selected"


def test_mask_tokens_is_reproducible_with_a_seeded_generator_and_checks_its_input():
    tokens = torch.randint(4, 30, (5, 40), generator=torch.Generator().manual_seed(0))
    first = mask_tokens(tokens, 3, 30, generator=torch.Generator().manual_seed(7))
    second = mask_tokens(tokens, 3, 30, generator=torch.Generator().manual_seed(7))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    everything, targets = mask_tokens(tokens, 3, 30, select_prob=1.0, mask_prob=1.0, random_prob=0.0)
    assert (everything == 3).all() and torch.equal(targets, tokens)
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: f32\[5,40\].*IntegerDtype\[Tensor, '\*shape'\]"):
        mask_tokens(tokens.float(), 3, 30)
    with pytest.raises(ValueError, match="mask_prob \\+ random_prob must be <= 1; found 0.8 \\+ 0.3"):
        mask_tokens(tokens, 3, 30, random_prob=0.3)
    with pytest.raises(ValueError, match=r"tokens other than special_ids must be ids in \[0, vocab_size\) = \[0, 30\); found -1"):
        mask_tokens(torch.tensor([[-1, 2]]), 3, 30)
    with pytest.raises(ValueError, match=r"= \[0, 30\); found 2..30$"):
        mask_tokens(torch.tensor([[30, 2]]), 3, 30)
    mask_tokens(torch.tensor([[30, 2]]), 3, 30, special_ids=(30,))  # a special id may lie outside
    with pytest.raises(TypeError, match=r"(?s)parameter 'special_ids'.*Actual value: \(30, -1\).*is_a_token_id"):
        mask_tokens(tokens, 3, 30, special_ids=(30, -1))  # every item is checked
    with pytest.raises(TypeError, match=r"(?s)parameter 'select_prob'.*Actual value: 1.5.*is_a_fraction"):
        mask_tokens(tokens, 3, 30, select_prob=1.5)


# ---------------------------------------------------------------------------
# ELMo: the biLM's layers and their scalar mix.
# ---------------------------------------------------------------------------


def test_bilm_layers_match_torch_multilayer_lstms_in_each_direction():
    torch.manual_seed(0)
    bilm = BiLM(vocab_size=10, dim=4, num_layers=2)
    tokens = torch.randint(0, 10, (3, 6))
    with torch.no_grad():
        layers = bilm(tokens)  # (3, B, T, 8)
        x = bilm.embedding(tokens)
    assert layers.shape == (3, 3, 6, 8)
    torch.testing.assert_close(layers[0], torch.cat((x, x), -1))
    for direction, stack, inputs, flip in (("forward", bilm.forward_layers, x, False),
                                           ("backward", bilm.backward_layers, x.flip(1), True)):
        for depth in (1, 2):
            reference = nn.LSTM(4, 4, num_layers=depth, batch_first=True)
            with torch.no_grad():
                for k in range(depth):
                    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                        getattr(reference, f"{name}_l{k}").copy_(getattr(stack[k], f"{name}_l0"))
                out, _ = reference(inputs)
            out = out.flip(1) if flip else out
            half = slice(0, 4) if direction == "forward" else slice(4, 8)
            torch.testing.assert_close(layers[depth][..., half], out)


def test_bilm_directions_see_only_their_own_side():
    torch.manual_seed(0)
    bilm = BiLM(vocab_size=10, dim=3, num_layers=2)
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    changed = tokens.clone()
    changed[0, 2] = 9
    with torch.no_grad():
        a, b = bilm(tokens), bilm(changed)
    torch.testing.assert_close(a[1:, :, :2, :3], b[1:, :, :2, :3])  # forward states before position 2
    torch.testing.assert_close(a[1:, :, 3:, 3:], b[1:, :, 3:, 3:])  # backward states after position 2
    assert not torch.allclose(a[1:, :, 3:, :3], b[1:, :, 3:, :3])


def test_scalar_mix_is_gamma_times_softmax_weighted_sum_of_layers():
    mix = ScalarMix(3).double()
    layers = randn(3, 2, 4, 5)
    torch.testing.assert_close(mix(layers), layers.mean(0))  # zero weights: an equal mix
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.7)
    s = torch.exp(mix.weights) / torch.exp(mix.weights).sum()
    by_hand = 1.7 * (s[0] * layers[0] + s[1] * layers[1] + s[2] * layers[2])
    torch.testing.assert_close(mix(layers), by_hand)
    with pytest.raises(ValueError, match=r"layers must have shape \(L \+ 1, \.\.\., D\) with L \+ 1 = 3; found \(2, 4\)"):
        mix(torch.randn(2, 4))


def test_a_frozen_bilm_leaves_only_the_mix_to_train():
    torch.manual_seed(0)
    bilm, mix = BiLM(10, 3, 2), ScalarMix(3)
    bilm.requires_grad_(False)
    mix(bilm(torch.tensor([[1, 2, 3]]))).sum().backward()
    assert all(p.grad is None for p in bilm.parameters())
    assert mix.weights.grad is not None and mix.gamma.grad is not None
