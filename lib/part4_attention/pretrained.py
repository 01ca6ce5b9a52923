"""What pretrained models feed in and mix: BERT's inputs and masked LM, ELMo's biLM.

Chapter 11 ends with the models that are pretrained on raw text and then reused; the
Transformer blocks they are built from are in
:mod:`lib.part4_attention.transformer_blocks`. Top to bottom:

1. BERT (Devlin et al., 2019): :func:`bert_input` packs one or two segments as
   ``<cls> A <sep> B <sep>`` with their segment ids; :class:`BertEmbedding` sums
   token, position and segment embeddings; :func:`mask_tokens` draws the masked-LM
   corruption (15 % of the tokens: 80 % masked, 10 % random, 10 % kept).
2. ELMo (Peters et al., 2018): :class:`BiLM`, a forward and a backward LSTM language
   model whose every layer's states are kept, and :class:`ScalarMix`, their learned,
   softmax-weighted and scaled combination.

Conventions: batch-first tensors. ``B`` batch, ``T`` positions, ``D`` the model size,
``V`` the vocabulary size; a biLM of ``L`` LSTM layers (``num_layers``) has
``layers = L + 1`` representations, each of size ``D2 = 2 dim``.

References
----------
.. [1] J. Devlin, M.-W. Chang, K. Lee, K. Toutanova. "BERT: Pre-training of Deep
   Bidirectional Transformers for Language Understanding". NAACL 2019.
   arXiv:1810.04805.
.. [2] M. E. Peters, M. Neumann, M. Iyyer, M. Gardner, C. Clark, K. Lee,
   L. Zettlemoyer. "Deep Contextualized Word Representations". NAACL 2018.
   arXiv:1802.05365.
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float, Int64
from torch import Tensor, nn

from lib.checked import (
    AnyInt,
    Fraction,
    IdDtype,
    IntegerDtype,
    PositiveInt,
    TokenId,
    each,
    positive_int_at_most,
)

__all__ = ["bert_input", "BertEmbedding", "mask_tokens", "BiLM", "ScalarMix"]


def bert_input(
    first: each(TokenId),
    second: Optional[each(TokenId)] = None,
    cls_id: TokenId = 0,
    sep_id: TokenId = 1,
) -> tuple[Int64[Tensor, "T"], Int64[Tensor, "T"]]:
    """BERT's input ``<cls> first <sep>`` (segment 0), or for a pair
    ``<cls> first <sep> second <sep>``, whose second text and its ``<sep>`` are segment
    1; returns the tokens and their segment ids. Classifiers read the output at
    ``<cls>``."""
    if not first or (second is not None and not second):
        raise ValueError(
            "first and second must each hold at least one token id; "
            f"found first={first!r}, second={second!r}"
        )
    tokens = [cls_id, *first, sep_id]
    segments = [0] * len(tokens)
    if second is not None:
        tokens += [*second, sep_id]
        segments += [1] * (len(second) + 1)
    return torch.tensor(tokens), torch.tensor(segments)


class BertEmbedding(nn.Module):
    """BERT's input embedding: the sum of a token, a segment and a (learned) position
    embedding."""

    def __init__(
        self,
        vocab_size: PositiveInt,
        d_model: PositiveInt,
        max_len: PositiveInt,
        num_segments: PositiveInt = 2,
    ):
        super().__init__()
        self.vocab_size, self.max_len, self.num_segments = (
            vocab_size,
            max_len,
            num_segments,
        )
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)

    def forward(
        self, tokens: IdDtype[Tensor, "B T"], segments: IdDtype[Tensor, "B T"]
    ) -> Float[Tensor, "B T D"]:
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"tokens must hold ids in [0, {self.vocab_size}); "
                f"found ids from {int(tokens.min())} to {int(tokens.max())}"
            )
        if segments.numel() and (
            segments.min() < 0 or segments.max() >= self.num_segments
        ):
            raise ValueError(
                f"segments must hold ids in [0, {self.num_segments}); "
                f"found ids from {int(segments.min())} to {int(segments.max())}"
            )
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"tokens may have at most max_len = {self.max_len} positions; "
                f"found {tokens.shape[1]}"
            )
        positions = torch.arange(tokens.shape[1], device=tokens.device)  # (T,)
        embedded = self.token(tokens) + self.segment(segments)  # (B, T, D)
        return embedded + self.position(positions)  # (B, T, D)


def mask_tokens(
    tokens: IntegerDtype[Tensor, "*shape"],
    mask_id: TokenId,
    vocab_size: PositiveInt,
    special_ids: each(TokenId) = (),
    generator: Optional[torch.Generator] = None,
    select_prob: Fraction = 0.15,
    mask_prob: Fraction = 0.8,
    random_prob: Fraction = 0.1,
    ignore_index: AnyInt = -100,
) -> tuple[IntegerDtype[Tensor, "*shape"], IntegerDtype[Tensor, "*shape"]]:
    """BERT's masked-LM corruption; returns the corrupted tokens and the targets.

    Each token not in ``special_ids`` is selected with probability ``select_prob``;
    a selected token becomes ``mask_id`` with probability ``mask_prob``, a uniform
    draw from ``range(vocab_size)`` (the original included, as in BERT's code) with
    probability ``random_prob``, and stays otherwise. The target is the original token
    where selected, ``ignore_index`` elsewhere.
    """
    if mask_prob + random_prob > 1:
        raise ValueError(
            f"mask_prob + random_prob must be <= 1; found {mask_prob} + {random_prob}"
        )
    special = torch.tensor(list(special_ids), dtype=tokens.dtype)
    selectable = ~torch.isin(tokens, special)  # (*shape)
    # Special ids may lie at or above vocab_size (a <pad> after the vocabulary); the
    # others may not.
    ordinary = tokens[selectable]
    if ordinary.numel() and (ordinary.min() < 0 or ordinary.max() >= vocab_size):
        raise ValueError(
            "tokens other than special_ids must be ids in [0, vocab_size) = "
            f"[0, {vocab_size}); found {ordinary.min()}..{ordinary.max()}"
        )
    draw = torch.rand(tokens.shape, generator=generator)  # (*shape)
    selected = (draw < select_prob) & selectable
    branch = torch.rand(tokens.shape, generator=generator)  # which of the three fates
    to_mask = selected & (branch < mask_prob)
    to_random = selected & (branch >= mask_prob) & (branch < mask_prob + random_prob)
    random_tokens = torch.randint(
        vocab_size, tokens.shape, generator=generator, dtype=tokens.dtype
    )
    corrupted = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    corrupted = torch.where(to_random, random_tokens, corrupted)
    return corrupted, torch.where(
        selected, tokens, torch.full_like(tokens, ignore_index)
    )


class BiLM(nn.Module):
    """ELMo's bidirectional language model, returning the states of every layer.

    Two stacks of ``num_layers`` LSTMs read the sentence, one left to right and one
    right to left; layer ``j`` of token ``t`` is ``[h_fwd; h_bwd]``, and layer 0 the
    token embedding doubled, ``[x; x]``. Each layer is its own one-layer ``nn.LSTM``,
    since a multi-layer one returns the top layer only. ELMo has 2 layers.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        dim: PositiveInt,
        num_layers: positive_int_at_most(64) = 2,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, dim)
        self.forward_layers = nn.ModuleList(
            nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers)
        )
        self.backward_layers = nn.ModuleList(
            nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers)
        )

    def forward(self, tokens: IdDtype[Tensor, "B T"]) -> Float[Tensor, "layers B T D2"]:
        if not tokens.numel():  # an LSTM cannot read an empty batch
            shape = tuple(tokens.shape)
            raise ValueError(
                f"tokens must hold at least one token; found shape {shape}"
            )
        if tokens.min() < 0 or tokens.max() >= self.vocab_size:
            raise ValueError(
                f"tokens must hold ids in [0, {self.vocab_size}); "
                f"found ids from {int(tokens.min())} to {int(tokens.max())}"
            )
        x = self.embedding(tokens)  # (B, T, dim)
        states = [torch.cat((x, x), dim=-1)]  # layer 0: (B, T, 2 dim)
        forward_h, backward_h = x, x.flip(1)  # the backward LM reads it reversed
        for forward_lstm, backward_lstm in zip(
            self.forward_layers, self.backward_layers
        ):
            forward_h, _ = forward_lstm(forward_h)  # (B, T, dim)
            backward_h, _ = backward_lstm(backward_h)  # (B, T, dim), reversed order
            both = torch.cat((forward_h, backward_h.flip(1)), dim=-1)  # (B, T, 2 dim)
            states.append(both)
        return torch.stack(states)  # (L + 1, B, T, 2 dim)


class ScalarMix(nn.Module):
    """ELMo's task-specific mix of the biLM layers, ``gamma sum_j s_j h_j`` with
    ``s = softmax(w)``: ``w`` (start: zeros, an equal mix) and ``gamma`` (start: 1)
    are all a downstream task trains; the biLM stays frozen."""

    def __init__(self, num_layers: PositiveInt):
        super().__init__()
        self.num_layers = num_layers
        self.weights = nn.Parameter(torch.zeros(num_layers))  # w; s = softmax(w)
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(
        self, layers: Float[Tensor, "layers *rest D"]
    ) -> Float[Tensor, "*rest D"]:
        if len(layers) != self.num_layers:
            raise ValueError(
                "layers must have shape (L + 1, ..., D) with L + 1 = "
                f"{self.num_layers}; found {tuple(layers.shape)}"
            )
        s = torch.softmax(self.weights, dim=0).to(layers.dtype)  # (L + 1,), sums to 1
        return self.gamma * torch.tensordot(s, layers, dims=1)  # (..., D)
