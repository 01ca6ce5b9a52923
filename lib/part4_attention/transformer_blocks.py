"""The Transformer's blocks: self-attention, layer norm, feed-forward, dropout, blocks.

Chapter 11 (syllabus TR1-TR4) builds the Transformer from these parts, top to bottom;
:mod:`lib.part4_attention.transformer` assembles them into whole models.

1. :class:`SelfAttention`, one head; the multi-head version is
   :class:`lib.part4_attention.attention.MultiHeadAttention` called with the same input
   three times.
2. :class:`Dropout` (Srivastava et al. [6]_), :class:`LayerNorm` (Ba et al. [2]_),
   :class:`FeedForward` and :func:`causal_mask`, the other parts of a block.
3. :class:`KVCache`: incremental decoding keeps each layer's keys and values, so a step
   computes the new position only (Pope et al. [5]_ discuss its cost at scale).
4. :class:`Residual`, how a block wraps each sublayer, and :class:`EncoderBlock` and
   :class:`DecoderBlock`: post-norm, as in the paper and in torch's
   ``TransformerEncoderLayer``/``TransformerDecoderLayer`` (whose weights they load),
   or pre-norm with ``norm_first=True`` (Xiong et al. [4]_). Dropout acts on each
   sublayer's output before the residual sum and on the FFN's hidden layer, as in
   torch; the attention weights are not dropped.

Conventions: batch-first tensors, rows are positions. ``B`` batch, ``T`` target (query)
positions, ``S`` source (key) positions, ``D`` the model size, ``H`` heads,
``Dh = D / H``.
Boolean masks mean **True = may attend**, as in :mod:`lib.part4_attention.attention`.

References
----------
.. [1] A. Vaswani et al. "Attention Is All You Need". NeurIPS 2017. arXiv:1706.03762.
.. [2] J. L. Ba, J. R. Kiros, G. E. Hinton. "Layer Normalization". arXiv:1607.06450.
.. [4] R. Xiong et al. "On Layer Normalization in the Transformer Architecture".
   ICML 2020. arXiv:2002.04745.
.. [5] R. Pope et al. "Efficiently Scaling Transformer Inference". MLSys 2023.
   arXiv:2211.05102.
.. [6] N. Srivastava, G. Hinton, A. Krizhevsky, I. Sutskever, R. Salakhutdinov.
   "Dropout: A Simple Way to Prevent Neural Networks from Overfitting". JMLR 15, 2014.
"""

from __future__ import annotations

from typing import Callable, Literal, Optional, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from lib.part1_blocks.activations import gelu, relu
from lib.part4_attention.attention import (
    MultiHeadAttention,
    _require_float_tensor,
    scaled_dot_product_attention,
)
from lib.checked import Device, DropoutRate, Positive, PositiveInt, same_dtype

__all__ = [
    "SelfAttention",
    "Dropout",
    "LayerNorm",
    "FeedForward",
    "causal_mask",
    "KVCache",
    "Residual",
    "EncoderBlock",
    "DecoderBlock",
]

ActivationName = Literal["relu", "gelu"]
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": relu, "gelu": gelu}


# ---------------------------------------------------------------------------
# The parts of a block.
# ---------------------------------------------------------------------------


class Dropout(nn.Module):
    r"""Inverted dropout: in training, zero each entry with probability ``p``.

    .. math:: \tilde{\mathbf{x}} = \mathbf{m} \odot \mathbf{x} / (1 - p), \qquad
              m_i \sim \mathrm{Bernoulli}(1 - p)

    Dividing by ``1 - p`` keeps each entry's expected value, so in eval mode the layer
    is the identity. ``torch.nn.Dropout`` computes the same (with its own draws).
    """

    def __init__(self, p: DropoutRate = 0.0):
        super().__init__()
        self.p = float(p)

    @no_type_check  # run per sublayer and step: the calling block checked x
    def forward(self, x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
        _require_float_tensor(x, "x")
        if not self.training or self.p == 0:
            return x
        keep = torch.rand_like(x) >= self.p  # Bernoulli(1 - p) mask, the shape of x
        return x * keep / (1 - self.p)


class SelfAttention(nn.Module):
    r"""One head of self-attention: queries, keys and values all project the input.

    .. math:: \mathbf{H} = \mathrm{softmax}\big(\mathbf{X}\mathbf{W}_q
              (\mathbf{X}\mathbf{W}_k)^\top / \sqrt{d_k}\big)\, \mathbf{X}\mathbf{W}_v

    The weights are computed from the input, not stored, so one layer handles
    sequences of any length. ``mask``: True = may attend, broadcastable to (B, T, T).
    """

    def __init__(self, d_model: PositiveInt, d_k: PositiveInt, d_v: PositiveInt):
        super().__init__()
        self.d_model = d_model
        self.query_proj = nn.Linear(d_model, d_k, bias=False)  # W_q
        self.key_proj = nn.Linear(d_model, d_k, bias=False)  # W_k
        self.value_proj = nn.Linear(d_model, d_v, bias=False)  # W_v

    def forward(
        self, x: Float[Tensor, "B T D"], mask: Optional[Bool[Tensor, "*mask"]] = None
    ) -> tuple[Float[Tensor, "B T dv"], Float[Tensor, "B T T"]]:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, D) with D = {self.d_model}; "
                f"found {tuple(x.shape)}"
            )
        same_dtype(parameters=self.query_proj.weight, x=x)
        q, k, v = self.query_proj(x), self.key_proj(x), self.value_proj(x)  # all from x
        return scaled_dot_product_attention(q, k, v, mask=mask)  # (B, T, dv), (B, T, T)


class LayerNorm(nn.Module):
    r"""Layer normalisation: normalise each position's vector over its ``D`` features.

    .. math:: \mathrm{LN}(\mathbf{z}) = \boldsymbol{\gamma} \odot
              (\mathbf{z} - \mu) / \sqrt{\sigma^2 + \epsilon} + \boldsymbol{\beta}

    The statistics come from one vector alone (not the batch). The variance is the
    biased one, and ``weight`` (gamma) and ``bias`` (beta) are named as in
    ``torch.nn.LayerNorm``.
    """

    def __init__(self, d_model: PositiveInt, eps: Positive = 1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    @no_type_check  # per sublayer and decoding step: the check below costs less
    def forward(self, z: Float[Tensor, "*batch D"]) -> Float[Tensor, "*batch D"]:
        _require_float_tensor(z, "z")
        if z.dim() == 0 or z.shape[-1] != self.d_model:
            raise ValueError(
                f"z must be a float tensor of shape (..., D) with D = {self.d_model}; "
                f"found {z.dtype} of shape {tuple(z.shape)}"
            )
        mean = z.mean(dim=-1, keepdim=True)  # (..., 1)
        variance = ((z - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        return self.weight * (z - mean) / torch.sqrt(variance + self.eps) + self.bias


class FeedForward(nn.Module):
    r"""The position-wise feed-forward network: one two-layer MLP at every position.

    .. math:: \mathrm{FFN}(\mathbf{z}) = \mathbf{W}_2\, f(\mathbf{W}_1 \mathbf{z} +
              \mathbf{b}_1) + \mathbf{b}_2

    ``f`` is ReLU in the original Transformer, GELU in GPT and BERT. ``dropout`` acts
    on the hidden layer, as in ``torch.nn.TransformerEncoderLayer``.
    """

    def __init__(
        self,
        d_model: PositiveInt,
        d_ff: PositiveInt,
        activation: ActivationName = "relu",
        dropout: DropoutRate = 0.0,
    ):
        super().__init__()
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1 (torch's names)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2

    @no_type_check  # run per sublayer and step: the calling block checked x
    def forward(self, z: Float[Tensor, "*batch D"]) -> Float[Tensor, "*batch D"]:
        _require_float_tensor(z, "z")
        weight = self.linear1.weight  # (d_ff, D)
        if z.dtype != weight.dtype or z.dim() == 0 or z.shape[-1] != weight.shape[1]:
            raise ValueError(
                f"z must have shape (..., D) with D = {weight.shape[1]} and the "
                f"dtype {weight.dtype}; found {z.dtype} of shape {tuple(z.shape)}"
            )
        hidden = ACTIVATIONS[self.activation](self.linear1(z))  # (..., d_ff)
        return self.linear2(self.dropout(hidden))  # (..., D)


def causal_mask(
    length: PositiveInt, device: Optional[Device] = None
) -> Bool[Tensor, "T T"]:
    """The left-to-right mask: ``mask[t, s] = s <= t`` (True = may attend)."""
    positions = torch.arange(length, device=device)  # (T,)
    return positions[None, :] <= positions[:, None]  # (T, T)


def _torch_activation_name(layer: nn.Module) -> ActivationName:
    """ "relu" or "gelu" (exact) for a torch Transformer layer, or a ValueError."""
    activation = layer.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    exact_gelu = isinstance(activation, nn.GELU) and activation.approximate == "none"
    if activation is F.gelu or exact_gelu:
        return "gelu"
    raise ValueError(
        f"only relu and exact gelu activations can be copied; found {activation!r}"
    )


@torch.no_grad()
def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    if theirs.weight is None or theirs.bias is None:
        raise ValueError(
            "the torch layer norm must have elementwise_affine=True and bias=True"
        )
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)
    ours.eps = theirs.eps


# ---------------------------------------------------------------------------
# Encoder and decoder blocks.
# ---------------------------------------------------------------------------


class KVCache:
    """The keys and values of one self-attention layer at every position decoded so far.

    Under the causal mask the keys and values of past positions never change, so a
    block called with a cache computes those of the new positions only and appends
    them here: a step costs time proportional to ``t``, not a re-run of the prefix.
    ``keys`` and ``values`` are (B, H, t, Dh), or None before the first step.
    """

    def __init__(self):
        self.keys: Optional[Tensor] = None
        self.values: Optional[Tensor] = None

    @property
    @no_type_check  # read at every decoding step
    def length(self) -> int:
        """The number of positions cached so far, ``t``."""
        return 0 if self.keys is None else self.keys.shape[2]

    @no_type_check  # per layer and decoding step: attend made keys and values
    def append(
        self, keys: Float[Tensor, "B H L Dh"], values: Float[Tensor, "B H L Dh"]
    ) -> tuple[Float[Tensor, "B H S Dh"], Float[Tensor, "B H S Dh"]]:
        """Add the L new positions' keys and values; return those of all t + L."""
        _require_float_tensor(keys, "keys")
        _require_float_tensor(values, "values")
        if keys.dim() != 4 or keys.shape != values.shape:
            raise ValueError(
                "keys and values must have one shape (B, H, L, Dh); "
                f"found {tuple(keys.shape)} and {tuple(values.shape)}"
            )
        if self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=2)  # (B, H, t + L, Dh)
            values = torch.cat([self.values, values], dim=2)  # (B, H, t + L, Dh)
        self.keys, self.values = keys, values
        return keys, values

    @no_type_check  # per layer and decoding step: the calling block checked h
    def attend(
        self, attention: MultiHeadAttention, h: Float[Tensor, "B L D"]
    ) -> tuple[Float[Tensor, "B L D"], Float[Tensor, "B H L S"]]:
        """Causal self-attention of the new positions ``h`` (t .. t + L - 1) over the
        cached positions and themselves; their keys and values are appended first."""
        if not isinstance(attention, MultiHeadAttention):
            raise TypeError(
                f"attention must be a MultiHeadAttention; found {attention!r}"
            )
        _require_float_tensor(h, "h")
        weight = attention.query_proj.weight  # (E, E)
        if h.dtype != weight.dtype or h.dim() != 3 or h.shape[-1] != weight.shape[1]:
            raise ValueError(
                f"h must have shape (B, L, E) with E = {weight.shape[1]} and the "
                f"dtype {weight.dtype}; found {h.dtype} of shape {tuple(h.shape)}"
            )
        start, new = self.length, h.shape[1]  # t cached positions, L new ones
        queries = attention.split_heads(attention.query_proj(h))  # (B, H, L, Dh)
        # (B, H, t + L, Dh) each: the cached positions' and the new ones'
        keys, values = self.append(
            attention.split_heads(attention.key_proj(h)),
            attention.split_heads(attention.value_proj(h)),
        )
        positions = torch.arange(start, start + new, device=h.device)  # (L,)
        # (L, t + L): new position t + i sees positions 0 .. t + i
        mask = torch.arange(start + new, device=h.device) <= positions[:, None]
        # (B, H, L, Dh), (B, H, L, t + L)
        heads, weights = scaled_dot_product_attention(queries, keys, values, mask)
        return attention.out_proj(attention.merge_heads(heads)), weights  # (B, L, D)


class Residual(nn.Module):
    r"""A sublayer ``f`` wrapped in a residual connection, dropout and a layer norm.

    Post-norm (the paper): :math:`\mathrm{LN}(x + \mathrm{drop}(f(x)))`; pre-norm
    (``norm_first``): :math:`x + \mathrm{drop}(f(\mathrm{LN}(x)))`,
    which leaves the path from input to output free of normalisation. A call returns
    ``(output, weights)``: an attention sublayer's weights, or None.
    """

    def __init__(
        self,
        d_model: PositiveInt,
        eps: Positive = 1e-5,
        norm_first: bool = False,
        dropout: DropoutRate = 0.0,
    ):
        super().__init__()
        self.norm, self.dropout = LayerNorm(d_model, eps), Dropout(dropout)
        self.norm_first = norm_first

    @no_type_check  # run per sublayer and step: the calling block checked x
    def forward(
        self, x: Float[Tensor, "B T D"], sublayer: Callable
    ) -> tuple[Float[Tensor, "B T D"], Optional[Float[Tensor, "B H T S"]]]:
        _require_float_tensor(x, "x")
        if x.dim() != 3:
            raise ValueError(f"x must have shape (B, T, D); found {tuple(x.shape)}")
        if not callable(sublayer):
            raise TypeError(f"sublayer must be callable; found {sublayer!r}")
        result = sublayer(self.norm(x) if self.norm_first else x)
        update, weights = result if isinstance(result, tuple) else (result, None)
        update = self.dropout(update)  # (B, T, D)
        return (x + update if self.norm_first else self.norm(x + update)), weights


def _block_from_torch(cls, layer):
    """A block of ``cls`` sized like torch's ``layer``, its attention and FFN copied."""
    attention = layer.self_attn
    block = cls(
        attention.embed_dim,
        attention.num_heads,
        layer.linear1.out_features,
        _torch_activation_name(layer),
        layer.norm1.eps,
        norm_first=layer.norm_first,
        dropout=layer.dropout.p,
    )
    block.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    block.self_attn.load_torch_weights(attention)
    with torch.no_grad():
        block.ffn.linear1.load_state_dict(layer.linear1.state_dict())
        block.ffn.linear2.load_state_dict(layer.linear2.state_dict())
    return block


class EncoderBlock(nn.Module):
    r"""One encoder layer: multi-head self-attention, then the FFN, each in a
    :class:`Residual`.

    .. math:: \mathbf{Z} = \mathrm{LN}\big(\mathbf{H} + \mathrm{MultiHead}(\mathbf{H},
              \mathbf{H}, \mathbf{H})\big), \qquad
              \mathbf{H}' = \mathrm{LN}\big(\mathbf{Z} + \mathrm{FFN}(\mathbf{Z})\big)

    Post-norm as in ``torch.nn.TransformerEncoderLayer``, pre-norm with ``norm_first``.
    ``num_heads`` must divide ``d_model``. Keys beyond ``valid_lens`` and where ``mask``
    is False are ignored; with a causal ``mask`` the block is a GPT block. With a
    ``cache``, ``x`` holds the positions after the cached ones, attending causally.
    """

    def __init__(
        self,
        d_model: PositiveInt,
        num_heads: PositiveInt,
        d_ff: PositiveInt,
        activation: ActivationName = "relu",
        eps: Positive = 1e-5,
        norm_first: bool = False,
        dropout: DropoutRate = 0.0,
    ):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.residual1 = Residual(d_model, eps, norm_first, dropout)  # torch's norm1
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.residual2 = Residual(d_model, eps, norm_first, dropout)  # norm2

    def forward(
        self,
        x: Float[Tensor, "B T D"],
        valid_lens: Optional[Int[Tensor, "B *queries"]] = None,
        mask: Optional[Bool[Tensor, "*mask"]] = None,
        cache: Optional[KVCache] = None,
    ) -> tuple[Float[Tensor, "B T D"], Float[Tensor, "B H T S"]]:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, D) with D = {self.d_model}; "
                f"found {tuple(x.shape)}"
            )
        same_dtype(parameters=self.ffn.linear1.weight, x=x)
        if cache is not None and (mask is not None or valid_lens is not None):
            raise ValueError(
                "with a cache the attention is causal over all positions; "
                f"mask and valid_lens must be None; found {mask=}, {valid_lens=}"
            )

        # Self-attention; with a cache, over the cached positions too.
        @no_type_check  # made anew at every call: a checker's wrapper would cost more
        def self_attention(h):
            if cache is not None:
                return cache.attend(self.self_attn, h)
            return self.self_attn(
                h, h, h, mask=mask, valid_lens=valid_lens, average_weights=False
            )

        z, weights = self.residual1(x, self_attention)  # (B, T, D), (B, H, T, S)
        output, _ = self.residual2(z, self.ffn)
        return output, weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderBlock:
        """A block with the configuration and weights of torch's ``layer``, on its
        device and dtype (the dropout draws differ from torch's)."""
        block = _block_from_torch(cls, layer)
        _copy_norm(block.residual1.norm, layer.norm1)
        _copy_norm(block.residual2.norm, layer.norm2)
        return block


class DecoderBlock(nn.Module):
    r"""One decoder layer: causal self-attention, encoder-decoder attention, the FFN.

    .. math:: Z_1 = \mathrm{LN}\big(Y + \mathrm{MultiHead}_{\text{causal}}(Y, Y, Y)
              \big), \quad Z_2 = \mathrm{LN}\big(Z_1 + \mathrm{MultiHead}(Z_1, M, M)
              \big), \quad Y' = \mathrm{LN}\big(Z_2 + \mathrm{FFN}(Z_2)\big)

    ``M`` is the encoder's output, the *memory*: in the second sublayer the queries come
    from the decoder and the keys and values from the encoder. The causal mask lets the
    whole target be fed at once (teacher forcing). Layouts as in :class:`EncoderBlock`.
    """

    def __init__(
        self,
        d_model: PositiveInt,
        num_heads: PositiveInt,
        d_ff: PositiveInt,
        activation: ActivationName = "relu",
        eps: Positive = 1e-5,
        norm_first: bool = False,
        dropout: DropoutRate = 0.0,
    ):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.residual1 = Residual(d_model, eps, norm_first, dropout)  # torch's norm1
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.residual2 = Residual(d_model, eps, norm_first, dropout)  # norm2
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.residual3 = Residual(d_model, eps, norm_first, dropout)  # norm3

    def forward(
        self,
        y: Float[Tensor, "B T D"],
        memory: Float[Tensor, "B S D"],
        memory_valid_lens: Optional[Int[Tensor, "B *queries"]] = None,
        cache: Optional[KVCache] = None,
    ) -> tuple[
        Float[Tensor, "B T D"], Float[Tensor, "B H T Tk"], Float[Tensor, "B H T S"]
    ]:
        if y.shape[-1] != self.d_model:
            raise ValueError(
                f"y must have shape (B, T, D) with D = {self.d_model}; "
                f"found {tuple(y.shape)}"
            )
        same_dtype(parameters=self.ffn.linear1.weight, y=y, memory=memory)

        # Causal self-attention; with a cache, over the cached positions too.
        @no_type_check  # made anew at every call: a checker's wrapper would cost more
        def self_attention(h):
            if cache is not None:
                return cache.attend(self.self_attn, h)
            mask = causal_mask(h.shape[1], device=h.device)  # (T, T)
            return self.self_attn(h, h, h, mask=mask, average_weights=False)

        # Queries from the decoder, keys and values from the memory M.
        @no_type_check  # made anew at every call: a checker's wrapper would cost more
        def cross_attention(h):
            return self.cross_attn(
                h, memory, memory, valid_lens=memory_valid_lens, average_weights=False
            )

        # z1 and z2 (B, T, D); the weights (B, H, T, Tk) and (B, H, T, S)
        z1, self_weights = self.residual1(y, self_attention)
        z2, cross_weights = self.residual2(z1, cross_attention)
        output, _ = self.residual3(z2, self.ffn)
        return output, self_weights, cross_weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """A block with the configuration and weights of torch's ``layer``: its
        ``multihead_attn`` becomes ``cross_attn``, its ``norm1..3`` the residuals'
        norms.
        """
        block = _block_from_torch(cls, layer)
        block.cross_attn.load_torch_weights(layer.multihead_attn)
        residuals = (block.residual1, block.residual2, block.residual3)
        for ours, theirs in zip(residuals, (layer.norm1, layer.norm2, layer.norm3)):
            _copy_norm(ours.norm, theirs)
        return block
