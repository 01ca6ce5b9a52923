"""The Transformer as whole models: the encoder-decoder and the decoder-only LM.

Chapter 11 (syllabus TR4-TR7) assembles the blocks of
:mod:`lib.transformer_blocks` into models, top to bottom:

1. :class:`TransformerConfig`, the sizes (and ``norm_first``, ``dropout``,
   ``scale_embedding``, the ``sqrt(D)`` scaling of token embeddings; the rest of
   the paper's training recipe is in :mod:`lib.transformer_recipe`), and
   :class:`TransformerEmbedding`, tokens plus positions.
2. :class:`TransformerStack`, embedding, blocks and final norm: every stack of the
   chapter is one of these.
3. :class:`Seq2SeqTransformer`, the encoder-decoder model of Vaswani et al. [1]_,
   and :class:`DecoderOnlyLM`, the GPT-style language model (Radford et al. [3]_);
   both generate greedily with or without a :class:`~lib.transformer_blocks.KVCache`.
   :func:`teacher_forced_loss` measures a model on held-out pairs.
4. :func:`critical_path_length` counts the operations that must run one after
   another, the quantity behind the parallelism argument.

What pretrained models build from these blocks is in :mod:`lib.pretrained` and
:mod:`lib.pretraining`. The chapter's experiment (reverse a digit string,
:class:`lib.tasks.ReversalTask`) trains :class:`Seq2SeqTransformer` and chapter
10's encoder-decoder without attention (:class:`lib.seq2seq.Seq2Seq` with a
:class:`lib.seq2seq.PlainDecoder`) with :func:`lib.training.train_seq2seq` and
decodes them with :func:`lib.seq2seq.greedy_translate`.

Conventions: batch-first tensors, rows are positions. ``B`` batch, ``T`` target
positions, ``S`` source positions, ``D`` the model size ``d_model``, ``V`` the
vocabulary size.

References
----------
.. [1] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
.. [3] A. Radford, K. Narasimhan, T. Salimans, I. Sutskever. "Improving Language
   Understanding by Generative Pre-Training". OpenAI technical report, 2018.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.positional import positional_encoding
from lib.training import SequencePairs
# The blocks' own argument checks: a config is checked as the blocks it builds would be.
from lib.transformer_blocks import (
    DecoderBlock, Dropout, EncoderBlock, KVCache, LayerNorm, _check_dropout, _require_activation, causal_mask,
)
from lib.validation import (
    require_choice, require_even, require_instance, require_int, require_ints, require_tokens,
)

__all__ = [
    "TransformerConfig",
    "TransformerEmbedding",
    "embedding",
    "TransformerStack",
    "Seq2SeqTransformer",
    "DecoderOnlyLM",
    "teacher_forced_loss",
    "critical_path_length",
]


# ---------------------------------------------------------------------------
# Whole models.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformerConfig:
    """The sizes of a Transformer.

    ``num_layers`` blocks in the encoder and as many in the decoder (``N`` in
    the paper, which uses ``N = 6``, ``d_model = 512``, ``num_heads = 8``,
    ``d_ff = 2048``). ``learned_positions`` replaces the sinusoidal encoding by
    a trained embedding of each position, as GPT and BERT do. ``norm_first``
    builds pre-norm blocks, and then a final layer norm closes each stack, as
    in GPT-2 (``torch.nn.Transformer`` ends each stack so in both layouts). ``scale_embedding``
    multiplies token embeddings by ``sqrt(d_model)``, as the paper does.
    ``dropout`` is the rate of :class:`Dropout` on the embeddings and in every
    block (0.1 in the paper's base model); it acts in training mode only.
    """

    d_model: int = 32
    num_heads: int = 4
    d_ff: int = 64
    num_layers: int = 2
    max_len: int = 32
    activation: str = "relu"
    learned_positions: bool = False
    norm_first: bool = False
    scale_embedding: bool = False
    dropout: float = 0.0

    def __post_init__(self):
        _check_config(self)


def _check_model(config: object, **vocab_sizes: object) -> None:
    """The argument checks of the whole models: a :class:`TransformerConfig` and vocabulary sizes."""
    require_instance("config", config, TransformerConfig)
    require_ints(**vocab_sizes)


def _check_config(c: TransformerConfig) -> None:
    """The argument checks of :class:`TransformerConfig`: positive sizes that fit together."""
    require_ints(d_model=c.d_model, num_heads=c.num_heads, d_ff=c.d_ff, num_layers=c.num_layers,
                 max_len=c.max_len)
    if c.d_model % c.num_heads:
        raise ValueError(
            f"d_model must be divisible by num_heads; found d_model={c.d_model}, num_heads={c.num_heads}"
        )
    if not c.learned_positions:
        require_even("d_model", c.d_model, "sines and cosines come in pairs")
    _require_activation(c.activation)
    require_instance("norm_first", c.norm_first, bool)
    require_instance("scale_embedding", c.scale_embedding, bool)
    _check_dropout(c.dropout)


def _check_embedding_input(tokens: object, start: object, vocab_size: int, max_len: int) -> None:
    """The argument checks of :meth:`TransformerEmbedding.forward`: token ids that fit after ``start``."""
    require_int("start", start, 0, max_len)
    require_tokens("tokens", tokens, vocab_size, max_len)
    if start + tokens.shape[1] > max_len:
        raise ValueError(f"tokens at positions start .. start + T - 1 must fit in max_len = {max_len} positions; "
                         f"found start = {start}, T = {tokens.shape[1]}")


class TransformerEmbedding(nn.Module):
    """Token embedding plus position: ``e_{x_t} + p_t`` for every position ``t``.

    The position vectors are the fixed :func:`positional_encoding` or, with
    ``learned_positions``, a trained ``nn.Embedding`` of the positions. With
    ``scale``, the token embedding is multiplied by ``sqrt(D)`` first, as in
    Vaswani et al.: their embedding matrix is shared with the output layer,
    which keeps its entries small (about ``1 / sqrt(D)``), and the factor
    brings the token vectors back to the size of the positions' (entries of
    size about 1). This module shares nothing, so the option only rescales.

    Parameters
    ----------
    vocab_size : int
    d_model : int
    max_len : int
        Longest sequence the module accepts.
    learned_positions : bool, default False
    scale : bool, default False
        Multiply the token embedding by ``sqrt(d_model)``.
    dropout : float, default 0.0
        :class:`Dropout` on the sum, as in the paper.

    Shapes
    ------
    tokens : (B, T), start + T <= max_len
    output : (B, T, D)
    """

    def __init__(
        self, vocab_size: int, d_model: int, max_len: int, learned_positions: bool = False, scale: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        require_ints(vocab_size=vocab_size, d_model=d_model, max_len=max_len), require_instance("scale", scale, bool)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_scale = math.sqrt(d_model) if scale else 1.0
        self.token = nn.Embedding(vocab_size, d_model)
        _check_dropout(dropout)  # named as the caller knows it, not as Dropout's p
        self.dropout = Dropout(dropout)
        if learned_positions:
            self.position = nn.Embedding(max_len, d_model)
        else:
            # A buffer, not a parameter: it moves with .to() but is never trained.
            self.register_buffer("encoding", positional_encoding(max_len, d_model), persistent=False)

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        """Embed ``tokens`` that sit at positions ``start .. start + T - 1`` (``start`` > 0 when decoding with a cache)."""
        _check_embedding_input(tokens, start, self.vocab_size, self.max_len)
        end = start + tokens.shape[1]
        if hasattr(self, "position"):
            positions = self.position(torch.arange(start, end, device=tokens.device))  # (T, D)
        else:
            positions = self.encoding[start:end]  # (T, D)
        return self.dropout(self.token_scale * self.token(tokens) + positions.to(self.token.weight.dtype))  # (B, T, D)


def embedding(vocab_size: int, config: TransformerConfig) -> TransformerEmbedding:
    """A :class:`TransformerEmbedding` of ``vocab_size`` tokens, sized and set as ``config`` says."""
    _check_model(config, vocab_size=vocab_size)
    c = config
    return TransformerEmbedding(vocab_size, c.d_model, c.max_len, c.learned_positions, c.scale_embedding, c.dropout)


class TransformerStack(nn.Module):
    """Token embedding, ``config.num_layers`` blocks and, in pre-norm, a final layer norm.

    One class builds every stack of the chapter: the encoder (:class:`EncoderBlock`), the
    decoder of :class:`Seq2SeqTransformer` (:class:`DecoderBlock`) and the decoder-only LM's
    (:class:`EncoderBlock` under a causal mask: a GPT block); the masked language model of
    :mod:`lib.pretraining` uses an encoder stack. A pre-norm block leaves its last residual sum
    unnormalised, so a pre-norm stack ends with a layer norm, as in GPT-2 and
    ``torch.nn.Transformer`` (which adds it in both layouts).

    Parameters
    ----------
    embed : TransformerEmbedding
        Of the model size ``config.d_model`` (:func:`embedding` makes one from a config).
    config : TransformerConfig
    block : EncoderBlock or DecoderBlock (the class), default EncoderBlock

    Shapes
    ------
    tokens : (B, T)
    output : (B, T, D)
    weights : one tuple per block of what it returns beside its output (its attention weights)
    """

    def __init__(self, embed: TransformerEmbedding, config: TransformerConfig, block: type = EncoderBlock):
        super().__init__()
        require_instance("embed", embed, TransformerEmbedding), require_instance("config", config, TransformerConfig)
        require_choice("block", block, (EncoderBlock, DecoderBlock))
        if embed.token.embedding_dim != config.d_model:
            raise ValueError(f"embed must have config.d_model = {config.d_model} features; "
                             f"found {embed.token.embedding_dim}")
        self.config = c = config
        self.embed = embed
        self.blocks = nn.ModuleList(
            block(c.d_model, c.num_heads, c.d_ff, c.activation, norm_first=c.norm_first, dropout=c.dropout)
            for _ in range(c.num_layers)
        )
        self.final_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()

    def forward(
        self, tokens: Tensor, cache: Optional[list[KVCache]] = None, **context: Optional[Tensor]
    ) -> tuple[Tensor, list[tuple[Tensor, ...]]]:
        """Run the stack; ``context`` goes to every block (``valid_lens`` or ``mask`` for encoder
        blocks, ``memory`` and ``memory_valid_lens`` for decoder blocks). With ``cache`` (from
        :meth:`new_cache`), ``tokens`` continue the cached positions."""
        caches = _check_caches(cache, len(self.blocks))
        h = self.embed(tokens, start=caches[0].length if cache else 0)  # (B, T, D)
        weights = []
        for block, layer_cache in zip(self.blocks, caches):
            h, *block_weights = block(h, cache=layer_cache, **context)
            weights.append(tuple(block_weights))
        return self.final_norm(h), weights

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each block."""
        return [KVCache() for _ in self.blocks]


class Seq2SeqTransformer(nn.Module):
    """The encoder-decoder Transformer of Vaswani et al. (2017), small; dropout is ``config.dropout``.

    The encoder maps the source to a memory ``(B, S, D)``; the decoder reads its
    own prefix (causally) and the memory, and a linear layer gives next-token
    logits. :meth:`step_fn` plugs the model into :mod:`lib.decoding`.

    Parameters
    ----------
    src_vocab_size, tgt_vocab_size : int
        Source and target vocabulary sizes.
    config : TransformerConfig

    Shapes
    ------
    src : (B, S)
    tgt : (B, T), starting with the begin-of-sequence token
    src_valid_lens : (B,)
    output : (B, T, V_tgt)
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, config: TransformerConfig = TransformerConfig()):
        super().__init__()
        require_ints(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
        self.config = config
        # Both embeddings first, then the stacks: the order in which the layers are made decides
        # which random numbers a seed gives each of them.
        src_embed, tgt_embed = embedding(src_vocab_size, config), embedding(tgt_vocab_size, config)
        self.encoder = TransformerStack(src_embed, config, EncoderBlock)
        self.decoder = TransformerStack(tgt_embed, config, DecoderBlock)
        self.output = nn.Linear(config.d_model, tgt_vocab_size)

    def encode(self, src: Tensor, src_valid_lens: Optional[Tensor] = None) -> tuple[Tensor, list[Tensor]]:
        """The memory and every encoder layer's attention weights.

        Shapes
        ------
        src : (B, S)
        memory : (B, S, D)
        weights : list of num_layers tensors (B, H, S, S)
        """
        memory, weights = self.encoder(src, valid_lens=src_valid_lens)  # (B, S, D)
        return memory, [w for (w,) in weights]

    def decode(
        self, tgt: Tensor, memory: Tensor, src_valid_lens: Optional[Tensor] = None,
        cache: Optional[list[KVCache]] = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Next-token logits at every target position, and the decoder's attention weights.

        With ``cache`` (from :meth:`new_cache`), ``tgt`` holds only the target
        positions after the cached ones; their keys and values are appended.

        Shapes
        ------
        tgt : (B, T)
        memory : (B, S, D)
        logits : (B, T, V_tgt)
        self_weights : list of num_layers tensors (B, H, T, T), or (B, H, T, t + T) with a cache
        cross_weights : list of num_layers tensors (B, H, T, S)
        """
        h, weights = self.decoder(tgt, cache, memory=memory, memory_valid_lens=src_valid_lens)  # (B, T, D)
        self_weights, cross_weights = ([w[i] for w in weights] for i in (0, 1))
        return self.output(h), self_weights, cross_weights

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each decoder layer."""
        return self.decoder.new_cache()

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, bos: int, steps: int, src_valid_lens: Optional[Tensor] = None, use_cache: bool = True
    ) -> tuple[Tensor, Tensor]:
        """Greedy decoding for a fixed number of steps, with or without a :class:`KVCache`.

        Both ways compute the same logits; with the cache each step feeds the
        decoder the newest token only, without it the whole prefix.

        Returns
        -------
        tokens : Tensor
            ``bos`` followed by the ``steps`` chosen tokens.
        logits : Tensor
            The logits each token was chosen from.

        Shapes
        ------
        src : (B, S)
        tokens : (B, steps + 1)
        logits : (B, steps, V_tgt)
        """
        require_int("bos", bos, 0, self.output.out_features - 1)
        memory, _ = self.encode(src, src_valid_lens)  # (B, S, D)
        start = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)  # (B, 1)
        return _greedy(
            lambda tokens, cache: self.decode(tokens, memory, src_valid_lens, cache)[0],
            start, steps, self.new_cache() if use_cache else None,
        )

    def forward(self, src: Tensor, tgt: Tensor, src_valid_lens: Optional[Tensor] = None) -> Tensor:
        memory, _ = self.encode(src, src_valid_lens)
        return self.decode(tgt, memory, src_valid_lens)[0]  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt: Tensor, src_valid_lens: Optional[Tensor] = None) -> dict[str, Tensor]:
        """Every head's attention weights in every layer, for plotting.

        Returns
        -------
        dict
            ``"encoder"``: encoder self-attention, ``"decoder"``: causal decoder
            self-attention, ``"cross"``: encoder-decoder attention, each stacked
            over the layers.

        Shapes
        ------
        src : (B, S)
        tgt : (B, T)
        "encoder" : (L, B, H, S, S)
        "decoder" : (L, B, H, T, T)
        "cross" : (L, B, H, T, S)
        """
        memory, encoder_weights = self.encode(src, src_valid_lens)
        _, self_weights, cross_weights = self.decode(tgt, memory, src_valid_lens)
        return {
            "encoder": torch.stack(encoder_weights),  # (L, B, H, S, S)
            "decoder": torch.stack(self_weights),  # (L, B, H, T, T)
            "cross": torch.stack(cross_weights),  # (L, B, H, T, S)
        }

    @torch.no_grad()
    def step_fn(self, src: Tensor, src_valid_lens: Optional[Tensor] = None) -> Callable[[Tensor, Tensor], Tensor]:
        """A batched step function for :func:`lib.decoding.beam_search_batch`.

        The sources are encoded once; each call decodes the given prefixes
        against the memory of the source each row continues.

        Shapes
        ------
        src : (B, S)
        prefixes passed to the step function : (N, t)
        sources passed to the step function : (N,), values in range(B)
        step function output : (N, V_tgt) log-probabilities of the next token
        """
        memory, _ = self.encode(src, src_valid_lens)  # (B, S, D)

        @torch.no_grad()
        def step(prefixes: Tensor, sources: Tensor) -> Tensor:
            lens = None if src_valid_lens is None else src_valid_lens[sources]  # (N,)
            logits = self.decode(prefixes, memory[sources], lens)[0]  # (N, t, V)
            return F.log_softmax(logits[:, -1], dim=-1)  # (N, V)

        return step


class DecoderOnlyLM(nn.Module):
    """A GPT-style language model: embeddings, causally masked blocks, next-token logits.

    A GPT block is a decoder block without encoder-decoder attention, which is
    an :class:`EncoderBlock` run with :func:`causal_mask`. Position ``t`` sees
    tokens ``0 .. t`` only, so the output at ``t`` predicts token ``t + 1``.
    The model uses ``config.num_layers`` blocks.

    Parameters
    ----------
    vocab_size : int
    config : TransformerConfig

    Shapes
    ------
    tokens : (B, T)
    output : (B, T, V)
    """

    def __init__(self, vocab_size: int, config: TransformerConfig = TransformerConfig(learned_positions=True)):
        super().__init__()
        self.config = config
        # Encoder blocks under a causal mask: GPT blocks.
        self.stack = TransformerStack(embedding(vocab_size, config), config, EncoderBlock)
        self.output = nn.Linear(config.d_model, vocab_size)

    def forward(self, tokens: Tensor, cache: Optional[list[KVCache]] = None) -> Tensor:
        """Next-token logits at every position.

        With ``cache`` (from :meth:`new_cache`), ``tokens`` continue the cached
        positions and only their logits are computed.

        Shapes
        ------
        tokens : (B, T)
        output : (B, T, V)
        """
        mask = None if cache else causal_mask(tokens.shape[1], device=tokens.device)  # (T, T)
        h, _ = self.stack(tokens, cache, mask=mask)  # (B, T, D)
        return self.output(h)  # (B, T, V)

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each block."""
        return self.stack.new_cache()

    @torch.no_grad()
    def generate(self, prompt: Tensor, steps: int, use_cache: bool = True) -> tuple[Tensor, Tensor]:
        """Continue ``prompt`` greedily by ``steps`` tokens, with or without a :class:`KVCache`.

        Returns
        -------
        tokens : Tensor
            The prompt followed by the chosen tokens.
        logits : Tensor
            The logits each new token was chosen from.

        Shapes
        ------
        prompt : (B, P)
        tokens : (B, P + steps)
        logits : (B, steps, V)
        """
        return _greedy(self, prompt, steps, self.new_cache() if use_cache else None)

    @torch.no_grad()
    def step(self, prefixes: Tensor) -> Tensor:
        """Next-token log-probabilities: a step function for :mod:`lib.decoding`.

        Shapes
        ------
        prefixes : (N, t)
        output : (N, V)
        """
        return F.log_softmax(self(prefixes)[:, -1], dim=-1)  # (N, V)


def _check_caches(cache: object, num_layers: int) -> list:
    """One :class:`KVCache` per layer, or ``[None] * num_layers`` without a cache."""
    if cache is None:
        return [None] * num_layers
    if not isinstance(cache, list) or len(cache) != num_layers or not all(isinstance(c, KVCache) for c in cache):
        raise TypeError(f"cache must be a list of {num_layers} KVCache objects (from new_cache()); found {cache!r}")
    return cache


def _greedy(
    logits_of: Callable[[Tensor, Optional[list[KVCache]]], Tensor], tokens: Tensor, steps: int,
    cache: Optional[list[KVCache]],
) -> tuple[Tensor, Tensor]:
    """Append ``steps`` greedy tokens; ``logits_of(tokens, cache)`` returns logits for every position given.

    With a cache, the first call feeds all of ``tokens`` (the cache is filled)
    and each later call only the token chosen last; without, every call feeds
    the whole sequence so far.

    Shapes
    ------
    tokens : (B, P)
    output : (B, P + steps) tokens, (B, steps, V) logits
    """
    require_int("steps", steps)
    new, chosen_from = tokens, []
    for _ in range(steps):
        logits = logits_of(new if cache is not None else tokens, cache)[:, -1]  # (B, V)
        chosen_from.append(logits)
        new = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, new], dim=1)  # (B, t + 1)
    return tokens, torch.stack(chosen_from, dim=1)  # (B, P + steps), (B, steps, V)


@torch.no_grad()
def teacher_forced_loss(model: Seq2SeqTransformer, data: SequencePairs, pad: int = 0) -> float:
    """The mean next-token cross-entropy on ``data`` in eval mode (no dropout), padding skipped.

    The quantity :func:`lib.training.train_seq2seq` minimises, measured
    without updating the model: on the training pairs it shows how well the
    model fits them, on held-out pairs how well it generalises. The model's
    training/eval mode is restored afterwards.

    Parameters
    ----------
    model : Seq2SeqTransformer
    data : SequencePairs
    pad : int, default 0
        Target id that is not scored.

    Returns
    -------
    float
        Nats per scored target token.

    Shapes
    ------
    data.src : (N, S)
    data.tgt_in, data.tgt_out : (N, T)
    """
    require_instance("model", model, Seq2SeqTransformer), require_instance("data", data, SequencePairs)
    was_training = model.training
    model.eval()
    logits = model(data.src, data.tgt_in, data.src_lens)  # (N, T, V)
    model.train(was_training)
    return F.cross_entropy(logits.flatten(0, 1), data.tgt_out.flatten(), ignore_index=pad).item()


# ---------------------------------------------------------------------------
# How sequential is a computation?
# ---------------------------------------------------------------------------


def critical_path_length(output: Tensor) -> int:
    """The number of operations on the longest chain of the autograd graph that ends at ``output``.

    Operations on this chain depend on each other, so they must run one after
    another however many processors there are: it measures how sequential a
    computation is. A recurrent network's chain grows with the sequence
    length (step ``t`` needs step ``t - 1``); a Transformer's does not.

    Parameters
    ----------
    output : Tensor
        A tensor computed with autograd (``output.grad_fn`` is not None).

    Returns
    -------
    int
        Nodes on the longest path from ``output.grad_fn`` to a leaf.

    Shapes
    ------
    output : any
    """
    if not isinstance(output, Tensor) or output.grad_fn is None:
        found = type(output).__name__ if not isinstance(output, Tensor) else "a tensor without grad_fn"
        raise ValueError(f"output must be a tensor computed with autograd (with a grad_fn); found {found}")
    length: dict = {}
    stack = [(output.grad_fn, False)]
    # An explicit stack, not recursion: a long recurrent graph is thousands of nodes deep.
    while stack:
        node, inputs_done = stack.pop()
        if node in length:
            continue
        inputs = [child for child, _ in node.next_functions if child is not None]
        if inputs_done:
            length[node] = 1 + max((length[child] for child in inputs), default=0)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in inputs if child not in length)
    return length[output.grad_fn]
