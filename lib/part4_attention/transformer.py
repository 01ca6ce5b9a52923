"""The Transformer as whole models: the encoder-decoder and the decoder-only LM.

Chapter 11 (syllabus TR4-TR7) assembles the blocks of
:mod:`lib.part4_attention.transformer_blocks` into models, top to bottom:

1. :class:`TransformerConfig`, the sizes and options, declared once, and
   :class:`TransformerEmbedding`, tokens plus positions (the rest of the paper's
   training recipe is in :mod:`lib.part4_attention.transformer_recipe`).
2. :class:`TransformerStack`, embedding, blocks and final norm: every stack of the
   chapter is one of these.
3. :class:`Seq2SeqTransformer`, the encoder-decoder model of Vaswani et al. [1]_, and
   :class:`DecoderOnlyLM`, the GPT-style language model (Radford et al. [3]_); both
   generate greedily with or without a
   :class:`~lib.part4_attention.transformer_blocks.KVCache`. :func:`teacher_forced_loss`
   measures a model on held-out pairs.
4. :func:`critical_path_length` counts the operations that must run one after
   another, the quantity behind the parallelism argument.

Conventions: batch-first tensors, rows are positions. ``B`` batch, ``T`` target
positions, ``S`` source positions, ``D`` the model size, ``H`` heads, ``V`` the
vocabulary size.

References
----------
.. [1] A. Vaswani et al. "Attention Is All You Need". NeurIPS 2017. arXiv:1706.03762.
.. [3] A. Radford, K. Narasimhan, T. Salimans, I. Sutskever. "Improving Language
   Understanding by Generative Pre-Training". OpenAI technical report, 2018.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Union, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int, Shaped
from torch import Tensor, nn

from lib.checked import DropoutRate, NonNegative, NonNegativeInt, PositiveInt
from lib.part4_attention.positional import positional_encoding
from lib.part4_attention.pairs import SequencePairs
from lib.part4_attention.transformer_blocks import (
    ActivationName,
    DecoderBlock,
    Dropout,
    EncoderBlock,
    KVCache,
    LayerNorm,
    causal_mask,
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
    """The sizes of a Transformer; its annotations are its rules, checked once here.

    ``num_layers`` blocks in the encoder and as many in the decoder (the paper: 6
    layers, ``d_model = 512``, 8 heads, ``d_ff = 2048``). ``learned_positions``
    trains a position embedding (GPT, BERT) instead of the sinusoidal encoding;
    ``norm_first`` builds pre-norm blocks and a final layer norm; ``scale_embedding``
    multiplies token embeddings by ``sqrt(d_model)``; ``dropout`` is the rate on the
    embeddings and in every block (0.1 in the paper), in training mode only.
    """

    d_model: PositiveInt = 32
    num_heads: PositiveInt = 4
    d_ff: PositiveInt = 64
    num_layers: PositiveInt = 2
    max_len: PositiveInt = 32
    activation: ActivationName = "relu"
    learned_positions: bool = False
    norm_first: bool = False
    scale_embedding: bool = False
    dropout: DropoutRate = 0.0

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(
                "d_model must be divisible by num_heads; "
                f"found d_model={self.d_model}, num_heads={self.num_heads}"
            )
        if not self.learned_positions and self.d_model % 2:
            raise ValueError(
                "d_model must be even (sines and cosines come in pairs) unless "
                f"learned_positions; found {self.d_model}"
            )


class TransformerEmbedding(nn.Module):
    """Token embedding plus position: ``e_{x_t} + p_t`` for every position ``t``.

    The positions are the fixed :func:`positional_encoding` or, with
    ``learned_positions``, a trained ``nn.Embedding``. With ``scale``, the token
    embedding is multiplied by ``sqrt(D)`` first, as in Vaswani et al., whose embedding
    is shared with the output layer and so has entries of about ``1 / sqrt(D)``; here
    nothing is shared, so the option only rescales. ``dropout`` acts on the sum.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        d_model: PositiveInt,
        max_len: PositiveInt,
        learned_positions: bool = False,
        scale: bool = False,
        dropout: DropoutRate = 0.0,
    ):
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_scale = math.sqrt(d_model) if scale else 1.0
        self.token = nn.Embedding(vocab_size, d_model)
        self.dropout = Dropout(dropout)
        if learned_positions:
            self.position = nn.Embedding(max_len, d_model)
        else:
            # A buffer, not a parameter: it moves with .to() but is never trained.
            encoding = positional_encoding(max_len, d_model)
            self.register_buffer("encoding", encoding, persistent=False)

    def forward(
        self, tokens: Int[Tensor, "B T"], start: NonNegativeInt = 0
    ) -> Float[Tensor, "B T D"]:
        """Embed ``tokens`` at positions ``start .. start + T - 1`` (``start`` > 0 when
        decoding with a cache)."""
        end = start + tokens.shape[1]
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"tokens must hold ids in [0, {self.vocab_size}); "
                f"found ids from {int(tokens.min())} to {int(tokens.max())}"
            )
        if end > self.max_len:
            raise ValueError(
                "tokens at positions start .. start + T - 1 must fit in "
                f"max_len = {self.max_len} positions; found start = {start}, "
                f"T = {tokens.shape[1]}"
            )
        if hasattr(self, "position"):
            # (T, D)
            positions = self.position(torch.arange(start, end, device=tokens.device))
        else:
            positions = self.encoding[start:end]  # (T, D)
        embedded = self.token_scale * self.token(tokens)  # (B, T, D)
        return self.dropout(embedded + positions.to(self.token.weight.dtype))


def embedding(
    vocab_size: PositiveInt, config: TransformerConfig
) -> TransformerEmbedding:
    """A :class:`TransformerEmbedding` of ``vocab_size`` tokens, as ``config`` says."""
    c = config
    return TransformerEmbedding(
        vocab_size,
        c.d_model,
        c.max_len,
        c.learned_positions,
        c.scale_embedding,
        c.dropout,
    )


class TransformerStack(nn.Module):
    """Token embedding, ``config.num_layers`` blocks and, in pre-norm, a final norm.

    One class builds every stack of the chapter: the encoder (:class:`EncoderBlock`),
    the decoder (:class:`DecoderBlock`) and the decoder-only LM's (:class:`EncoderBlock`
    under a causal mask). A pre-norm block leaves its last residual sum unnormalised,
    so a pre-norm stack ends with a layer norm, as in GPT-2. A call returns the output
    and, per block, a tuple of what it returns beside (its attention weights).
    """

    def __init__(
        self,
        embed: TransformerEmbedding,
        config: TransformerConfig,
        block: type[Union[EncoderBlock, DecoderBlock]] = EncoderBlock,
    ):
        super().__init__()
        if embed.token.embedding_dim != config.d_model:
            raise ValueError(
                f"embed must have config.d_model = {config.d_model} features; "
                f"found {embed.token.embedding_dim}"
            )
        self.config = c = config
        self.embed = embed
        self.blocks = nn.ModuleList(
            block(
                c.d_model,
                c.num_heads,
                c.d_ff,
                c.activation,
                norm_first=c.norm_first,
                dropout=c.dropout,
            )
            for _ in range(c.num_layers)
        )
        self.final_norm = LayerNorm(c.d_model) if c.norm_first else nn.Identity()

    def forward(
        self,
        tokens: Int[Tensor, "B T"],
        cache: Optional[list[KVCache]] = None,
        **context: Optional[Tensor],
    ) -> tuple[Float[Tensor, "B T D"], list[tuple[Tensor, ...]]]:
        """``context`` goes to every block (``valid_lens`` or ``mask`` to encoder
        blocks, ``memory`` and ``memory_valid_lens`` to decoder blocks). With ``cache``
        (from :meth:`new_cache`), ``tokens`` continue the cached positions."""
        if cache is not None and len(cache) != len(self.blocks):
            raise TypeError(
                f"cache must be a list of {len(self.blocks)} KVCache objects "
                f"(from new_cache()); found {cache!r}"
            )
        caches = cache or [None] * len(self.blocks)
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
    """The encoder-decoder Transformer of Vaswani et al. (2017), small."""

    def __init__(
        self,
        src_vocab_size: PositiveInt,
        tgt_vocab_size: PositiveInt,
        config: TransformerConfig = TransformerConfig(),
    ):
        super().__init__()
        self.config = config
        # Both embeddings first, then the stacks: the order in which the layers are
        # made decides which random numbers a seed gives each of them.
        src_embed = embedding(src_vocab_size, config)
        tgt_embed = embedding(tgt_vocab_size, config)
        self.encoder = TransformerStack(src_embed, config, EncoderBlock)
        self.decoder = TransformerStack(tgt_embed, config, DecoderBlock)
        self.output = nn.Linear(config.d_model, tgt_vocab_size)

    def encode(
        self, src: Int[Tensor, "B S"], src_valid_lens: Optional[Int[Tensor, "B"]] = None
    ) -> tuple[Float[Tensor, "B S D"], list[Float[Tensor, "B H S S"]]]:
        memory, weights = self.encoder(src, valid_lens=src_valid_lens)  # (B, S, D)
        return memory, [w for (w,) in weights]  # one (B, H, S, S) per layer

    def decode(
        self,
        tgt: Int[Tensor, "B T"],
        memory: Float[Tensor, "B S D"],
        src_valid_lens: Optional[Int[Tensor, "B"]] = None,
        cache: Optional[list[KVCache]] = None,
    ) -> tuple[Float[Tensor, "B T V"], list[Tensor], list[Tensor]]:
        # With a cache (from new_cache), tgt holds the positions after the cached ones.
        context = dict(memory=memory, memory_valid_lens=src_valid_lens)
        h, weights = self.decoder(tgt, cache, **context)  # (B, T, D)
        # one (B, H, T, T) self-attention and one (B, H, T, S) cross-attention per layer
        self_weights, cross_weights = ([w[i] for w in weights] for i in (0, 1))
        return self.output(h), self_weights, cross_weights

    def new_cache(self) -> list[KVCache]:
        return self.decoder.new_cache()  # one KVCache per decoder layer

    @torch.no_grad()
    def greedy_decode(
        self,
        src: Int[Tensor, "B S"],
        bos: NonNegativeInt,
        steps: PositiveInt,
        src_valid_lens: Optional[Int[Tensor, "B"]] = None,
        use_cache: bool = True,
    ) -> tuple[Int[Tensor, "B _"], Float[Tensor, "B _ V"]]:
        if bos >= (vocab_size := self.output.out_features):
            raise ValueError(f"bos must be a target id < {vocab_size}; found {bos}")
        memory, _ = self.encode(src, src_valid_lens)  # (B, S, D)
        start = torch.full((len(src), 1), bos, dtype=torch.long, device=src.device)

        # The logits (B, t, V) of the tokens fed, against this memory.
        @no_type_check  # made anew at every call: a checker's wrapper would cost more
        def logits_of(tokens, cache):
            return self.decode(tokens, memory, src_valid_lens, cache)[0]

        # bos and steps greedy tokens, and the logits each was chosen from
        return _greedy(logits_of, start, steps, self.new_cache() if use_cache else None)

    def forward(
        self,
        src: Int[Tensor, "B S"],
        tgt: Int[Tensor, "B T"],
        src_valid_lens: Optional[Int[Tensor, "B"]] = None,
    ) -> Float[Tensor, "B T V"]:
        memory, _ = self.encode(src, src_valid_lens)
        return self.decode(tgt, memory, src_valid_lens)[0]  # (B, T, V)

    @torch.no_grad()
    def attention_maps(
        self,
        src: Int[Tensor, "B S"],
        tgt: Int[Tensor, "B T"],
        src_valid_lens: Optional[Int[Tensor, "B"]] = None,
    ) -> dict[str, Float[Tensor, "L B H _ _"]]:
        memory, encoder = self.encode(src, src_valid_lens)
        _, decoder, cross = self.decode(tgt, memory, src_valid_lens)
        maps = dict(encoder=encoder, decoder=decoder, cross=cross)
        # every layer's weights, for plotting: (L, B, H, S, S), (L, B, H, T, T), ...
        return {name: torch.stack(layers) for name, layers in maps.items()}

    @torch.no_grad()
    def step_fn(
        self, src: Int[Tensor, "B S"], src_valid_lens: Optional[Int[Tensor, "B"]] = None
    ) -> Callable[[Tensor, Tensor], Tensor]:
        # For lib.part3_words.decoding.beam_search_batch: the sources are encoded once,
        # and each prefix is decoded against the memory of its source.
        memory, _ = self.encode(src, src_valid_lens)  # (B, S, D)

        @torch.no_grad()
        def step(prefixes: Tensor, sources: Tensor) -> Tensor:
            lens = None if src_valid_lens is None else src_valid_lens[sources]  # (N,)
            logits = self.decode(prefixes, memory[sources], lens)[0]  # (N, t, V)
            return F.log_softmax(logits[:, -1], dim=-1)  # (N, V)

        return step


class DecoderOnlyLM(nn.Module):
    """A GPT-style language model: embeddings, causally masked blocks, logits.

    A GPT block is a decoder block without encoder-decoder attention: an
    :class:`EncoderBlock` under :func:`causal_mask`. Position ``t`` sees tokens
    ``0 .. t`` only, so the output at ``t`` predicts token ``t + 1``.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        config: TransformerConfig = TransformerConfig(learned_positions=True),
    ):
        super().__init__()
        self.config = config
        embed = embedding(vocab_size, config)
        self.stack = TransformerStack(embed, config, EncoderBlock)  # GPT blocks
        self.output = nn.Linear(config.d_model, vocab_size)

    def forward(
        self, tokens: Int[Tensor, "B T"], cache: Optional[list[KVCache]] = None
    ) -> Float[Tensor, "B T V"]:
        """Next-token logits at every position; with ``cache`` (from
        :meth:`new_cache`), ``tokens`` continue the cached positions."""
        mask = None if cache else causal_mask(tokens.shape[1], device=tokens.device)
        h, _ = self.stack(tokens, cache, mask=mask)  # (B, T, D)
        return self.output(h)  # (B, T, V)

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each block."""
        return self.stack.new_cache()

    @torch.no_grad()
    def generate(
        self, prompt: Int[Tensor, "B P"], steps: PositiveInt, use_cache: bool = True
    ) -> tuple[Int[Tensor, "B _"], Float[Tensor, "B _ V"]]:
        """The prompt continued greedily by ``steps`` tokens, and the logits each new
        token was chosen from."""
        return _greedy(self, prompt, steps, self.new_cache() if use_cache else None)

    @torch.no_grad()
    def step(self, prefixes: Int[Tensor, "N t"]) -> Float[Tensor, "N V"]:
        """Next-token log-probabilities: a step function for
        :mod:`lib.part3_words.decoding`."""
        return F.log_softmax(self(prefixes)[:, -1], dim=-1)  # (N, V)


def _greedy(logits_of: Callable, tokens: Tensor, steps: int, cache: Optional[list]):
    """Append ``steps`` greedy tokens; ``logits_of(tokens, cache)`` gives logits at
    every position fed. With a cache, the first call feeds all of ``tokens`` and each
    later one only the token chosen last; without, the whole sequence so far."""
    new, chosen_from = tokens, []
    for _ in range(steps):
        logits = logits_of(new if cache is not None else tokens, cache)[:, -1]  # (B, V)
        chosen_from.append(logits)
        new = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, new], dim=1)  # (B, t + 1)
    return tokens, torch.stack(chosen_from, dim=1)  # (B, P + steps), (B, steps, V)


@torch.no_grad()
def teacher_forced_loss(
    model: Seq2SeqTransformer, data: SequencePairs, pad: NonNegativeInt = 0
) -> NonNegative:
    """The mean next-token cross-entropy (nats per target token, ``pad`` not scored)
    on ``data`` in eval mode, without updating the model; its mode is restored."""
    scored, vocab_size = data.tgt_out[data.tgt_out != pad], model.output.out_features
    if not scored.numel() or scored.min() < 0 or scored.max() >= vocab_size:
        found = f"{scored.min()}..{scored.max()}" if scored.numel() else "only pad"
        raise ValueError(
            f"data.tgt_out must hold target ids in [0, {vocab_size}) besides "
            f"pad = {pad}; found {found}"
        )
    was_training = model.training
    model.eval()
    logits = model(data.src, data.tgt_in, data.src_lens)  # (N, T, V)
    model.train(was_training)
    logits, targets = logits.flatten(0, 1), data.tgt_out.flatten()  # (N T, V), (N T,)
    return F.cross_entropy(logits, targets, ignore_index=pad).item()


# ---------------------------------------------------------------------------
# How sequential is a computation?
# ---------------------------------------------------------------------------


def critical_path_length(output: Shaped[Tensor, "..."]) -> PositiveInt:
    """The number of operations on the longest chain of the autograd graph ending at
    ``output``: they must run one after another however many processors there are.
    A recurrent network's chain grows with the sequence length; a Transformer's does
    not."""
    if output.grad_fn is None:
        raise ValueError(
            "output must be a tensor computed with autograd (with a grad_fn); "
            "found a tensor without grad_fn"
        )
    length: dict = {}
    stack = [(output.grad_fn, False)]
    # An explicit stack, not recursion: a long recurrent graph is thousands deep.
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
