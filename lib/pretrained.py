"""What pretrained models feed in and mix: BERT's inputs and masked LM, ELMo's biLM and layer mix.

Chapter 11 (syllabus TR6-TR7) ends with the models that are pretrained on raw
text and then reused; the Transformer blocks they are built from are in
:mod:`lib.transformer_blocks`. Top to bottom:

1. BERT (Devlin et al., 2019): :func:`bert_input` packs one or two segments as
   ``<cls> A <sep> B <sep>`` with their segment ids; :class:`BertEmbedding` sums
   token, position and segment embeddings; :func:`mask_tokens` draws the
   masked-LM corruption (15 % of the tokens: 80 % masked, 10 % random, 10 % kept).
2. ELMo (Peters et al., 2018): :class:`BiLM`, a forward and a backward LSTM
   language model whose every layer's states are kept, and :class:`ScalarMix`,
   their learned, softmax-weighted and scaled combination.

Conventions: batch-first tensors. ``B`` batch, ``T`` positions, ``D`` the model
size, ``V`` the vocabulary size, ``L`` the number of biLM layers.

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

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from lib.validation import (INTEGER_DTYPES, require_ids, require_int, require_ints, require_same_shape,
                            require_tokens)

__all__ = ["bert_input", "BertEmbedding", "mask_tokens", "BiLM", "ScalarMix"]


def _check_bert_input(first: object, second: object, cls_id: object, sep_id: object) -> None:
    """The argument checks of :func:`bert_input`: texts are lists of ids, ``second`` may be None."""
    for name, text in (("first", first), ("second", second)):
        if text is not None or name == "first":
            require_ids(name, text)
    for name, value in (("cls_id", cls_id), ("sep_id", sep_id)):
        require_int(name, value, minimum=0)


def bert_input(
    first: Sequence[int], second: Optional[Sequence[int]] = None, cls_id: int = 0, sep_id: int = 1
) -> tuple[Tensor, Tensor]:
    """BERT's input sequence and segment ids for one text or a pair of texts.

    One text: ``<cls> first <sep>``, all in segment 0. A pair:
    ``<cls> first <sep> second <sep>``; the second text and its ``<sep>`` are
    segment 1. The output at ``<cls>`` is the representation of the whole
    input that classification tasks use. Positions are ``0 .. L-1``.

    Parameters
    ----------
    first : sequence of int
        Token ids of the first text.
    second : sequence of int, optional
        Token ids of the second text.
    cls_id, sep_id : int
        Ids of ``<cls>`` and ``<sep>``.

    Returns
    -------
    tokens : LongTensor
    segments : LongTensor
        0 for the first text (with ``<cls>`` and its ``<sep>``), 1 for the second.

    Shapes
    ------
    tokens, segments : (L,) with L = len(first) + 2, or len(first) + len(second) + 3
    """
    _check_bert_input(first, second, cls_id, sep_id)
    tokens = [cls_id, *first, sep_id]
    segments = [0] * len(tokens)
    if second is not None:
        tokens += [*second, sep_id]
        segments += [1] * (len(second) + 1)
    return torch.tensor(tokens), torch.tensor(segments)


def _check_bert_batch(embedding: "BertEmbedding", tokens: object, segments: object) -> None:
    """The argument checks of :meth:`BertEmbedding.forward`: ids in range, segments shaped like tokens."""
    require_tokens("tokens", tokens, embedding.vocab_size, embedding.max_len)
    require_tokens("segments", segments, embedding.num_segments)
    require_same_shape("tokens", tokens, segments=segments)


class BertEmbedding(nn.Module):
    """BERT's input embedding: the sum of a token, a segment and a (learned) position embedding.

    Parameters
    ----------
    vocab_size : int
    d_model : int
    max_len : int
    num_segments : int, default 2

    Shapes
    ------
    tokens, segments : (B, L)
    output : (B, L, D)
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, num_segments: int = 2):
        super().__init__()
        require_ints(vocab_size=vocab_size, d_model=d_model, max_len=max_len, num_segments=num_segments)
        self.vocab_size, self.max_len, self.num_segments = vocab_size, max_len, num_segments
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)

    def forward(self, tokens: Tensor, segments: Tensor) -> Tensor:
        _check_bert_batch(self, tokens, segments)
        positions = torch.arange(tokens.shape[1], device=tokens.device)  # (L,)
        return self.token(tokens) + self.segment(segments) + self.position(positions)  # (B, L, D)


def _check_mask_tokens(tokens, mask_id, vocab_size, special_ids, probs, ignore_index) -> None:
    """The argument checks of :func:`mask_tokens`; ``probs`` is ``(select_prob, mask_prob, random_prob)``."""
    if not isinstance(tokens, Tensor) or tokens.dtype not in INTEGER_DTYPES:
        found = tokens.dtype if isinstance(tokens, Tensor) else type(tokens).__name__
        raise TypeError(f"tokens must be an integer torch.Tensor; found {found}")
    require_int("vocab_size", vocab_size)
    require_int("mask_id", mask_id, minimum=0)
    require_int("ignore_index", ignore_index, minimum=-(2**62))
    if not (isinstance(special_ids, (list, tuple)) and not special_ids):  # () is allowed: nothing special
        require_ids("special_ids", special_ids)
    for name, p in zip(("select_prob", "mask_prob", "random_prob"), probs):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"{name} must be a probability in [0, 1]; found {p!r}")
    if probs[1] + probs[2] > 1:
        raise ValueError(f"mask_prob + random_prob must be <= 1; found {probs[1]} + {probs[2]}")
    ordinary = tokens[~torch.isin(tokens, torch.tensor(list(special_ids), dtype=tokens.dtype))]
    if ordinary.numel() and (ordinary.min() < 0 or ordinary.max() >= vocab_size):
        raise ValueError(f"tokens other than special_ids must be ids in [0, vocab_size) = "
                         f"[0, {vocab_size}); found {ordinary.min()}..{ordinary.max()}")


def mask_tokens(
    tokens: Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int] = (),
    generator: Optional[torch.Generator] = None,
    select_prob: float = 0.15,
    mask_prob: float = 0.8,
    random_prob: float = 0.1,
    ignore_index: int = -100,
) -> tuple[Tensor, Tensor]:
    """BERT's masked-LM corruption: pick 15% of the tokens; mask 80% of those, randomise 10%, keep 10%.

    Each position that is not a special token (``<cls>``, ``<sep>``, padding) is
    selected with probability ``select_prob``. A selected token becomes
    ``mask_id`` with probability ``mask_prob``, a token drawn uniformly from
    ``range(vocab_size)`` with probability ``random_prob`` (as in BERT's code,
    the draw may return any id, the original included), and stays unchanged
    otherwise. The model must predict the original token at every selected
    position, so it cannot rely on seeing ``<mask>`` (which never occurs when
    fine-tuning) or on the token in front of it being right.

    Parameters
    ----------
    tokens : LongTensor
        Token ids.
    mask_id : int
        Id of ``<mask>``.
    vocab_size : int
        Random replacements are drawn from ``range(vocab_size)``.
    special_ids : sequence of int
        Ids that are never selected.
    generator : torch.Generator, optional
        Source of randomness (seed it for reproducible corruption).
    select_prob, mask_prob, random_prob : float
        0.15, 0.8 and 0.1 in BERT; ``mask_prob + random_prob <= 1``.
    ignore_index : int, default -100
        Target at unselected positions (``F.cross_entropy``'s default skips it).

    Returns
    -------
    corrupted : LongTensor
        The model's input.
    targets : LongTensor
        The original token where selected, ``ignore_index`` elsewhere.

    Shapes
    ------
    tokens, corrupted, targets : (...) (any shape, e.g. (B, L))
    """
    _check_mask_tokens(tokens, mask_id, vocab_size, special_ids, (select_prob, mask_prob, random_prob),
                       ignore_index)
    selectable = ~torch.isin(tokens, torch.tensor(list(special_ids), dtype=tokens.dtype))
    selected = (torch.rand(tokens.shape, generator=generator) < select_prob) & selectable
    branch = torch.rand(tokens.shape, generator=generator)  # which of the three fates
    to_mask = selected & (branch < mask_prob)
    to_random = selected & (branch >= mask_prob) & (branch < mask_prob + random_prob)
    random_tokens = torch.randint(vocab_size, tokens.shape, generator=generator, dtype=tokens.dtype)
    corrupted = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    corrupted = torch.where(to_random, random_tokens, corrupted)
    return corrupted, torch.where(selected, tokens, torch.full_like(tokens, ignore_index))


class BiLM(nn.Module):
    """ELMo's bidirectional language model, returning the states of every layer.

    Two independent stacks of ``num_layers`` LSTMs read the sentence, one left
    to right and one right to left (each is a language model: Peters et al.
    train them to predict the next and the previous word). Layer ``j``'s
    representation of token ``t`` concatenates the two directions,
    ``[h_fwd; h_bwd]``. Layer 0 is the context-free token embedding, doubled
    ``[x; x]`` to the same width. Each layer is its own one-layer
    ``torch.nn.LSTM`` so that every layer's output is available (a
    multi-layer ``nn.LSTM`` returns the top layer only). Sequences in a batch
    must have the same length (no padding).

    Parameters
    ----------
    vocab_size : int
    dim : int
        Embedding and hidden size of each direction.
    num_layers : int
        ``L``; ELMo uses 2.

    Shapes
    ------
    tokens : (B, T)
    output : (L + 1, B, T, 2 dim)
    """

    def __init__(self, vocab_size: int, dim: int, num_layers: int = 2):
        super().__init__()
        for name, value, maximum in (("vocab_size", vocab_size, None), ("dim", dim, None),
                                     ("num_layers", num_layers, 64)):  # ELMo has 2 layers
            require_int(name, value, maximum=maximum)
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, dim)
        self.forward_layers = nn.ModuleList(nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers))
        self.backward_layers = nn.ModuleList(nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers))

    def forward(self, tokens: Tensor) -> Tensor:
        require_tokens("tokens", tokens, self.vocab_size)
        x = self.embedding(tokens)  # (B, T, dim)
        states = [torch.cat((x, x), dim=-1)]  # layer 0: (B, T, 2 dim)
        forward_h, backward_h = x, x.flip(1)  # the backward LM reads the reversed sentence
        for forward_lstm, backward_lstm in zip(self.forward_layers, self.backward_layers):
            forward_h, _ = forward_lstm(forward_h)  # (B, T, dim)
            backward_h, _ = backward_lstm(backward_h)  # (B, T, dim), in reversed order
            states.append(torch.cat((forward_h, backward_h.flip(1)), dim=-1))  # (B, T, 2 dim)
        return torch.stack(states)  # (L + 1, B, T, 2 dim)


def _check_layers(layers: object, num_layers: int) -> None:
    """The argument check of :meth:`ScalarMix.forward`: a tensor ``(num_layers, ..., D)``."""
    if not isinstance(layers, Tensor) or layers.dim() < 2 or layers.shape[0] != num_layers:
        found = tuple(layers.shape) if isinstance(layers, Tensor) else type(layers).__name__
        raise ValueError(f"layers must have shape (L + 1, ..., D) with L + 1 = {num_layers}; found {found}")


class ScalarMix(nn.Module):
    r"""ELMo's task-specific combination of the biLM layers.

    .. math:: \mathrm{ELMo}_t = \gamma \sum_{j=0}^{L} s_j\, \mathbf{h}_{t,j},
              \qquad \mathbf{s} = \mathrm{softmax}(\mathbf{w})

    ``w`` (start: zeros, an equal mix) and ``gamma`` (start: 1) are the only
    parameters a downstream task trains; the biLM stays frozen.

    Parameters
    ----------
    num_layers : int
        Number of representations mixed, ``L + 1``.

    Shapes
    ------
    layers : (L + 1, ..., D)
    output : (..., D)
    """

    def __init__(self, num_layers: int):
        super().__init__()
        require_int("num_layers", num_layers)
        self.num_layers = num_layers
        self.weights = nn.Parameter(torch.zeros(num_layers))  # w; s = softmax(w)
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers: Tensor) -> Tensor:
        _check_layers(layers, self.num_layers)
        s = torch.softmax(self.weights, dim=0).to(layers.dtype)  # (L + 1,), sums to 1
        return self.gamma * torch.tensordot(s, layers, dims=1)  # (..., D)
