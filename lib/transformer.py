"""Self-attention and the Transformer: its blocks, the encoder-decoder and the decoder-only LM.

The module follows chapter 11 (syllabus TR1-TR7), top to bottom:

1. Positions enter through :mod:`lib.positional` (the sinusoidal encoding).
2. :class:`SelfAttention`, one head with its Q, K, V projections; the multi-head
   version with its output projection is :class:`lib.attention.MultiHeadAttention`
   called with the same input three times.
3. :class:`LayerNorm` and :class:`FeedForward` (position-wise), the other two
   parts of a block; :func:`causal_mask`, the left-to-right mask.
4. :class:`EncoderBlock` and :class:`DecoderBlock` (post-norm, as in the paper
   and in ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer``,
   whose weights they can load, or pre-norm with ``norm_first=True``, as in
   Xiong et al. [4]_); :class:`Seq2SeqTransformer`, the
   encoder-decoder model, and :class:`DecoderOnlyLM`, the GPT-style language
   model (Radford et al., 2018). :func:`critical_path_length` counts the
   operations that must run one after another, the quantity behind the
   parallelism argument.
5. :class:`Dropout` (Srivastava et al. [6]_), where the paper puts it: on the
   sum of embeddings and positions and on each sublayer's output before the
   residual sum (``TransformerConfig.dropout``). The ``sqrt(D)`` scaling of
   token embeddings (``scale_embedding``); the rest
   of the paper's training recipe is in :mod:`lib.transformer_recipe`.
6. :class:`KVCache`: incremental decoding. Each generated position's keys and
   values are kept per layer, so the next step computes only the new
   position's query, key and value instead of re-running the whole prefix
   (Pope et al. [5]_ discuss its cost at scale).

What pretrained models build from these blocks is in :mod:`lib.pretrained`.
The chapter's experiment (reverse a digit string, :class:`lib.tasks.ReversalTask`)
trains :class:`Seq2SeqTransformer` and chapter 10's encoder-decoder without
attention (:class:`lib.seq2seq.Seq2Seq` with a :class:`lib.seq2seq.PlainDecoder`)
with :func:`lib.training.train_seq2seq` and decodes them with
:func:`lib.seq2seq.greedy_translate`.

Conventions: batch-first tensors, rows are positions. ``B`` batch, ``T`` target
(query) positions, ``S`` source (key) positions, ``D`` the model size
``d_model``, ``H`` heads, ``V`` the vocabulary size. Boolean masks mean
**True = may attend**, as in :mod:`lib.attention`.

References
----------
.. [1] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
.. [2] J. L. Ba, J. R. Kiros, G. E. Hinton. "Layer Normalization".
   arXiv:1607.06450, 2016.
.. [3] A. Radford, K. Narasimhan, T. Salimans, I. Sutskever. "Improving Language
   Understanding by Generative Pre-Training". OpenAI technical report, 2018.
.. [4] R. Xiong, Y. Yang, D. He, K. Zheng, S. Zheng, C. Xing, H. Zhang, Y. Lan,
   L. Wang, T.-Y. Liu. "On Layer Normalization in the Transformer
   Architecture". ICML 2020. arXiv:2002.04745.
.. [5] R. Pope, S. Douglas, A. Chowdhery, J. Devlin, J. Bradbury, A. Levskaya,
   J. Heek, K. Xiao, S. Agrawal, J. Dean. "Efficiently Scaling Transformer
   Inference". MLSys 2023. arXiv:2211.05102.
.. [6] N. Srivastava, G. Hinton, A. Krizhevsky, I. Sutskever, R. Salakhutdinov.
   "Dropout: A Simple Way to Prevent Neural Networks from Overfitting". JMLR 15,
   2014.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.activations import gelu, relu
from lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lib.positional import positional_encoding
from lib.training import SequencePairs
from lib.validation import require_even, require_instance, require_int, require_ints, require_tokens

__all__ = [
    "SelfAttention",
    "Dropout",
    "LayerNorm",
    "FeedForward",
    "causal_mask",
    "EncoderBlock",
    "DecoderBlock",
    "KVCache",
    "TransformerConfig",
    "TransformerEmbedding",
    "Seq2SeqTransformer",
    "DecoderOnlyLM",
    "critical_path_length",
    "teacher_forced_loss",
]

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": relu, "gelu": gelu}



# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_float_inputs(module: nn.Module, size: int, **tensors: object) -> None:
    """Raise unless each ``name=value`` is a float ``(B, T, size)`` tensor of ``module``'s dtype."""
    for name, value in tensors.items():
        if not isinstance(value, Tensor) or not value.is_floating_point():
            found = value.dtype if isinstance(value, Tensor) else type(value).__name__
            raise TypeError(f"{name} must be a floating-point torch.Tensor; found {found}")
        if value.dim() != 3 or value.shape[-1] != size:
            raise ValueError(f"{name} must have shape (B, T, D) with D = {size}; found {tuple(value.shape)}")
        parameter = next(module.parameters())
        if value.dtype != parameter.dtype:
            raise TypeError(
                f"{name} must have the dtype of the module's parameters ({parameter.dtype}); "
                f"found {value.dtype}"
            )


def _check_model(config: object, **vocab_sizes: object) -> None:
    """The argument checks of the whole models: a :class:`TransformerConfig` and vocabulary sizes."""
    require_instance("config", config, TransformerConfig)
    require_ints(**vocab_sizes)


def _check_causal_mask(length: object, device: object) -> None:
    """The argument checks of :func:`causal_mask`: ``device`` is None, a ``torch.device`` or a
    string that ``torch.device`` understands."""
    require_int("length", length)
    try:
        if device is not None and not isinstance(device, torch.device):
            torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be a torch.device or a device string such as 'cpu'; found {device!r}"
        ) from None


def _require_torch_module(name: str, value: object, expected: type) -> None:
    if not isinstance(value, expected):
        raise TypeError(f"{name} must be a {expected.__module__}.{expected.__name__}; found {type(value).__name__}")


def _check_dropout(p: object) -> None:
    """The argument check of :class:`Dropout`: a float rate ``0 <= p < 1``."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout must be a float in [0, 1); found {type(p).__name__}")
    if not 0 <= p < 1:
        raise ValueError(f"dropout must be a float in [0, 1); found {p}")


# ---------------------------------------------------------------------------
# The parts of a block.
# ---------------------------------------------------------------------------


class Dropout(nn.Module):
    r"""Inverted dropout (Srivastava et al., 2014): in training, zero each entry with probability ``p``.

    .. math:: \tilde{\mathbf{x}} = \frac{\mathbf{m} \odot \mathbf{x}}{1 - p}, \qquad
              m_i \sim \mathrm{Bernoulli}(1 - p)

    Dividing by ``1 - p`` keeps the expected value of each entry equal to the
    entry, so in evaluation mode (``model.eval()``) the layer is the identity
    and nothing has to be rescaled. Each unit must work without the others it
    usually relies on, which discourages co-adaptation; the network trained
    is, in effect, an average of many thinned networks. ``torch.nn.Dropout``
    computes the same thing (with its own random draws).

    Parameters
    ----------
    p : float, default 0.0
        Probability of zeroing an entry, ``0 <= p < 1``.

    Shapes
    ------
    x : any
    output : same as x
    """

    def __init__(self, p: float = 0.0):
        super().__init__()
        _check_dropout(p)
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.rand_like(x) >= self.p  # Bernoulli(1 - p) mask, the shape of x
        return x * keep / (1 - self.p)


class SelfAttention(nn.Module):
    r"""One head of self-attention: queries, keys and values are projections of the same input.

    .. math:: \mathbf{Q} = \mathbf{X}\mathbf{W}_q,\ \mathbf{K} = \mathbf{X}\mathbf{W}_k,\
              \mathbf{V} = \mathbf{X}\mathbf{W}_v, \qquad
              \mathbf{H} = \mathrm{softmax}\!\left(\frac{\mathbf{Q}\mathbf{K}^\top}{\sqrt{d_k}}\right)\mathbf{V}

    (rows are positions; in the column convention of the notes this is
    :math:`\mathbf{V}\,\mathrm{softmax}(\mathbf{K}^\top\mathbf{Q}/\sqrt{d_k})`). The
    weight between positions ``t`` and ``s`` is computed from the input, not
    stored, so one layer handles sequences of any length.

    Parameters
    ----------
    d_model : int
        Size ``D`` of each input vector.
    d_k : int
        Size of queries and keys (the scores are divided by ``sqrt(d_k)``).
    d_v : int
        Size of values and outputs.

    Shapes
    ------
    x : (B, T, D)
    mask : boolean, broadcastable to (B, T, T); True = may attend
    output : (B, T, d_v)
    weights : (B, T, T)
    """

    def __init__(self, d_model: int, d_k: int, d_v: int):
        super().__init__()
        require_ints(d_model=d_model, d_k=d_k, d_v=d_v)
        self.d_model = d_model
        self.query_proj = nn.Linear(d_model, d_k, bias=False)  # W_q
        self.key_proj = nn.Linear(d_model, d_k, bias=False)  # W_k
        self.value_proj = nn.Linear(d_model, d_v, bias=False)  # W_v

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        _require_float_inputs(self, self.d_model, x=x)
        q, k, v = self.query_proj(x), self.key_proj(x), self.value_proj(x)  # all from x
        return scaled_dot_product_attention(q, k, v, mask=mask)  # (B, T, d_v), (B, T, T)


def _check_features(z: object, d_model: int) -> None:
    """The argument check of :meth:`LayerNorm.forward`: a float tensor ``(..., D)``."""
    if not isinstance(z, Tensor) or not z.is_floating_point() or z.dim() == 0 or z.shape[-1] != d_model:
        found = tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(f"z must be a float tensor of shape (..., D) with D = {d_model}; found {found}")


def _check_layer_norm(d_model: object, eps: object) -> None:
    """The argument checks of :class:`LayerNorm`: a size and a positive ``eps``."""
    require_int("d_model", d_model)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"eps must be a number > 0; found {eps!r}")


def _require_activation(activation: object) -> None:
    """Raise unless ``activation`` names one of :data:`ACTIVATIONS`."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; found {activation!r}")


def _check_feed_forward(d_model: object, d_ff: object, activation: object) -> None:
    """The argument checks of :class:`FeedForward`: two sizes and an activation name."""
    require_ints(d_model=d_model, d_ff=d_ff)
    _require_activation(activation)


def _check_block(d_model: object, norm_first: object) -> None:
    """The argument checks of the blocks' own arguments (the parts check the rest)."""
    require_int("d_model", d_model)
    require_instance("norm_first", norm_first, bool)


class LayerNorm(nn.Module):
    r"""Layer normalisation (Ba et al., 2016): normalise each position's vector over its features.

    .. math:: \mathrm{LN}(\mathbf{z}) = \boldsymbol{\gamma} \odot
              \frac{\mathbf{z} - \mu}{\sqrt{\sigma^2 + \epsilon}} + \boldsymbol{\beta},
              \qquad \mu = \frac{1}{D}\sum_j z_j,\ \ \sigma^2 = \frac{1}{D}\sum_j (z_j - \mu)^2

    Unlike batch normalisation, the statistics come from one vector alone, so
    the result does not depend on the batch or on the other positions. The
    variance is the biased one (divide by ``D``), as in ``torch.nn.LayerNorm``,
    whose parameter names (``weight`` = gamma, ``bias`` = beta) this module keeps.

    Parameters
    ----------
    d_model : int
        Size ``D`` of the normalised (last) axis.
    eps : float, default 1e-5
        Added to the variance so that a constant vector does not divide by 0.

    Shapes
    ------
    z : (..., D)
    output : (..., D)
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        _check_layer_norm(d_model, eps)
        self.d_model, self.eps = d_model, float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, z: Tensor) -> Tensor:
        _check_features(z, self.d_model)
        mean = z.mean(dim=-1, keepdim=True)  # (..., 1)
        variance = ((z - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        return self.weight * (z - mean) / torch.sqrt(variance + self.eps) + self.bias


class FeedForward(nn.Module):
    r"""The position-wise feed-forward network: the same two-layer MLP at every position.

    .. math:: \mathrm{FFN}(\mathbf{z}) = \mathbf{W}_2\, f(\mathbf{W}_1 \mathbf{z} + \mathbf{b}_1) + \mathbf{b}_2

    with ``f`` = ReLU in the original Transformer and GELU in GPT and BERT. As
    no position sees another, it is a 1 x 1 convolution over the sequence.

    Parameters
    ----------
    d_model : int
        Size ``D`` of the input and output.
    d_ff : int
        Width of the hidden layer (4 D in the paper).
    activation : {"relu", "gelu"}, default "relu"
    dropout : float, default 0.0
        :class:`Dropout` on the hidden layer, after the activation, as in
        ``torch.nn.TransformerEncoderLayer``.

    Shapes
    ------
    z : (..., D)
    output : (..., D)
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        _check_feed_forward(d_model, d_ff, activation)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1 (torch's names)
        self.dropout = Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2

    def forward(self, z: Tensor) -> Tensor:
        return self.linear2(self.dropout(ACTIVATIONS[self.activation](self.linear1(z))))  # (..., D)


def causal_mask(length: int, device: Optional[torch.device] = None) -> Tensor:
    """The left-to-right mask: position ``t`` may attend to positions ``0 .. t`` only.

    Parameters
    ----------
    length : int
        Number of positions ``T``.
    device : torch.device, optional

    Returns
    -------
    Tensor
        Boolean, lower triangular: ``mask[t, s] = s <= t`` (True = may attend).

    Shapes
    ------
    output : (T, T)
    """
    _check_causal_mask(length, device)
    positions = torch.arange(length, device=device)  # (T,)
    return positions[None, :] <= positions[:, None]  # (T, T)


def _torch_activation_name(layer: nn.Module) -> str:
    """"relu" or "gelu" (exact) for a torch Transformer layer, or a ValueError."""
    activation = layer.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ValueError(f"only relu and exact gelu activations can be copied; found {activation!r}")


@torch.no_grad()
def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    if theirs.weight is None or theirs.bias is None:
        raise ValueError("the torch layer norm must have elementwise_affine=True and bias=True")
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)
    ours.eps = theirs.eps


@torch.no_grad()
def _copy_ffn(ours: FeedForward, layer: nn.Module) -> None:
    ours.activation = _torch_activation_name(layer)
    ours.linear1.load_state_dict(layer.linear1.state_dict())
    ours.linear2.load_state_dict(layer.linear2.state_dict())


# ---------------------------------------------------------------------------
# Encoder and decoder blocks.
# ---------------------------------------------------------------------------


class KVCache:
    """The keys and values of one self-attention layer at every position decoded so far.

    Generating token ``t + 1`` needs the keys and values of positions
    ``0 .. t`` in every layer. Those of positions ``0 .. t - 1`` were already
    computed at the earlier steps and, under the causal mask, they never change,
    so a block called with a cache computes them for the new positions only and
    appends them here. A step then costs time proportional to ``t`` instead of
    re-running the whole prefix. A model keeps one cache per decoder layer
    (:meth:`DecoderOnlyLM.new_cache`, :meth:`Seq2SeqTransformer.new_cache`).

    Shapes
    ------
    keys : (B, H, t, D / H), or None before the first step
    values : (B, H, t, D / H), or None before the first step
    """

    def __init__(self):
        self.keys: Optional[Tensor] = None
        self.values: Optional[Tensor] = None

    @property
    def length(self) -> int:
        """The number of positions cached so far, ``t``."""
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' keys and values; return those of all positions.

        Shapes
        ------
        keys, values : (B, H, L, D / H), the L new positions
        output : two tensors (B, H, t + L, D / H)
        """
        if self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=2)  # (B, H, t + L, Dh)
            values = torch.cat([self.values, values], dim=2)  # (B, H, t + L, Dh)
        self.keys, self.values = keys, values
        return keys, values


def _check_cache(cache: object, mask: object, valid_lens: object) -> None:
    """With a cache, the block attends causally over cached and new positions: no other mask."""
    if cache is not None:
        require_instance("cache", cache, KVCache)
        if mask is not None or valid_lens is not None:
            raise ValueError("with a cache the attention is causal over all positions; "
                             "mask and valid_lens must be None")


def _cached_self_attention(attention: MultiHeadAttention, h: Tensor, cache: KVCache) -> tuple[Tensor, Tensor]:
    """Causal self-attention of the new positions ``h`` over the cached positions and themselves.

    Shapes
    ------
    h : (B, L, D), positions t .. t + L - 1
    output : (B, L, D)
    weights : (B, H, L, t + L)
    """
    start, new = cache.length, h.shape[1]  # t cached positions, L new ones
    keys, values = cache.append(
        attention._split_heads(attention.key_proj(h)),  # (B, H, L, Dh)
        attention._split_heads(attention.value_proj(h)),
    )  # (B, H, t + L, Dh) each: the cached positions' and the new ones'
    queries = attention._split_heads(attention.query_proj(h))  # (B, H, L, Dh)
    positions = torch.arange(start, start + new, device=h.device)  # (L,)
    mask = torch.arange(start + new, device=h.device) <= positions[:, None]  # (L, t + L)
    heads, weights = scaled_dot_product_attention(queries, keys, values, mask)
    merged = heads.transpose(1, 2).reshape(h.shape[0], new, attention.embed_dim)  # (B, L, D)
    return attention.out_proj(merged), weights


class _ResidualBlock(nn.Module):
    r"""What encoder and decoder blocks share: how a sublayer ``f`` is wrapped.

    Post-norm (the paper): :math:`\mathrm{LN}(\mathbf{x} + f(\mathbf{x}))`.
    Pre-norm (``norm_first``): :math:`\mathbf{x} + f(\mathrm{LN}(\mathbf{x}))`,
    which leaves the residual path from input to output free of normalisation.
    In training, :class:`Dropout` acts on ``f``'s output before the sum.
    """

    norm_first: bool
    dropout: Dropout

    def _sublayer_input(self, x: Tensor, norm: LayerNorm) -> Tensor:
        return norm(x) if self.norm_first else x  # (B, T, D)

    def _residual(self, x: Tensor, update: Tensor, norm: LayerNorm) -> Tensor:
        update = self.dropout(update)  # the paper's "residual dropout", before the sum
        return x + update if self.norm_first else norm(x + update)  # (B, T, D)


def _block_from_torch(cls, layer, torch_class):
    """A block of ``cls`` sized like torch's ``layer``, with its self-attention and FFN copied."""
    _require_torch_module("layer", layer, torch_class)
    block = cls(
        layer.self_attn.embed_dim, layer.self_attn.num_heads, layer.linear1.out_features,
        _torch_activation_name(layer), layer.norm1.eps, norm_first=layer.norm_first, dropout=layer.dropout.p,
    )
    block.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    block.self_attn.load_torch_weights(layer.self_attn)
    _copy_ffn(block.ffn, layer)
    return block


class EncoderBlock(_ResidualBlock):
    r"""One encoder layer: multi-head self-attention, then the FFN, each with a residual and a layer norm.

    .. math:: \mathbf{Z} = \mathrm{LN}\big(\mathbf{H} + \mathrm{MultiHead}(\mathbf{H}, \mathbf{H}, \mathbf{H})\big),
              \qquad \mathbf{H}' = \mathrm{LN}\big(\mathbf{Z} + \mathrm{FFN}(\mathbf{Z})\big)

    This is the post-norm layout of Vaswani et al. and of
    ``torch.nn.TransformerEncoderLayer(norm_first=False)``, whose weights
    :meth:`from_torch` copies. With ``norm_first=True`` each sublayer reads
    the normalised input and adds to the raw one,
    :math:`\mathbf{Z} = \mathbf{H} + \mathrm{MultiHead}(\mathrm{LN}(\mathbf{H}))`
    (pre-norm, Xiong et al. 2020), as ``norm_first=True`` in torch. With
    ``dropout`` > 0 each sublayer's output is dropped before the residual sum
    and the FFN's hidden layer after its activation, as in torch; unlike
    torch, the attention weights are not dropped. With a causal ``mask`` the same block is a GPT block (a decoder
    block without encoder-decoder attention).

    Parameters
    ----------
    d_model : int
        Model size ``D``.
    num_heads : int
        Number of heads ``H``; must divide ``D``.
    d_ff : int
        Hidden width of the feed-forward network.
    activation : {"relu", "gelu"}, default "relu"
    eps : float, default 1e-5
        Layer-norm epsilon.
    norm_first : bool, default False
        Pre-norm instead of the paper's post-norm.
    dropout : float, default 0.0
        Dropout rate in training (see :class:`Dropout`); none in eval mode.

    Shapes
    ------
    x : (B, T, D)
    output : (B, T, D)
    weights : (B, H, T, T)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, activation: str = "relu", eps: float = 1e-5,
                 norm_first: bool = False, dropout: float = 0.0):
        super().__init__()
        _check_block(d_model, norm_first)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = LayerNorm(d_model, eps)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.dropout = Dropout(dropout)
        self.norm2 = LayerNorm(d_model, eps)

    def forward(
        self, x: Tensor, valid_lens: Optional[Tensor] = None, mask: Optional[Tensor] = None,
        cache: Optional[KVCache] = None,
    ) -> tuple[Tensor, Tensor]:
        """Encode ``x``; keys beyond ``valid_lens`` (padding) and where ``mask`` is False are ignored.

        Parameters
        ----------
        x : Tensor
            Float input, one row per position.
        valid_lens : Tensor, optional
            Integer number of real (non-padding) positions per sequence.
        mask : Tensor, optional
            Boolean, True = may attend (e.g. :func:`causal_mask`).
        cache : KVCache, optional
            Decode incrementally (a GPT block): ``x`` holds the positions
            after those in the cache, which attend causally to the cached
            positions and to each other. ``mask`` and ``valid_lens`` must be None.

        Returns
        -------
        output : Tensor
        weights : Tensor
            Every head's attention weights.

        Shapes
        ------
        x : (B, T, D)
        valid_lens : (B,)
        mask : broadcastable to (B, T, T)
        output : (B, T, D)
        weights : (B, H, T, T), or (B, H, T, t + T) with t positions cached
        """
        _require_float_inputs(self, self.d_model, x=x), _check_cache(cache, mask, valid_lens)
        h = self._sublayer_input(x, self.norm1)  # x itself in post-norm
        if cache is None:
            attended, weights = self.self_attn(h, h, h, mask=mask, valid_lens=valid_lens, average_weights=False)
        else:
            attended, weights = _cached_self_attention(self.self_attn, h, cache)
        z = self._residual(x, attended, self.norm1)  # residual: a direct path for signal and gradient
        output = self._residual(z, self.ffn(self._sublayer_input(z, self.norm2)), self.norm2)
        return output, weights  # (B, T, D), (B, H, T, T)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> "EncoderBlock":
        """A block with the configuration and weights of a ``torch.nn.TransformerEncoderLayer``.

        ``batch_first`` only changes how torch lays out its inputs. The
        dropout rate is copied; the random draws differ from torch's, so the
        outputs agree with torch's when its dropout is 0 or both are in eval
        mode.

        Parameters
        ----------
        layer : torch.nn.TransformerEncoderLayer
            With a ReLU or GELU activation; its ``norm_first`` is kept.

        Returns
        -------
        EncoderBlock
            On the device and with the dtype of ``layer``.

        Shapes
        ------
        The block's ``D``, ``H`` and FFN width equal the layer's.
        """
        block = _block_from_torch(cls, layer, nn.TransformerEncoderLayer)
        _copy_norm(block.norm1, layer.norm1)
        _copy_norm(block.norm2, layer.norm2)
        return block


class DecoderBlock(_ResidualBlock):
    r"""One decoder layer: causal self-attention, encoder-decoder attention, then the FFN.

    .. math:: \mathbf{Z}_1 = \mathrm{LN}\big(\mathbf{Y} + \mathrm{MultiHead}_{\text{causal}}(\mathbf{Y}, \mathbf{Y}, \mathbf{Y})\big),\quad
              \mathbf{Z}_2 = \mathrm{LN}\big(\mathbf{Z}_1 + \mathrm{MultiHead}(\mathbf{Z}_1, \mathbf{M}, \mathbf{M})\big),\quad
              \mathbf{Y}' = \mathrm{LN}\big(\mathbf{Z}_2 + \mathrm{FFN}(\mathbf{Z}_2)\big)

    ``M`` is the encoder's output (the *memory*): in the second sublayer the
    queries come from the decoder and the keys and values from the encoder.
    The causal mask lets position ``t`` see target positions ``<= t`` only, so
    training can feed the whole target at once (teacher forcing) and still
    predict every token from its prefix. Post-norm, as
    ``torch.nn.TransformerDecoderLayer(norm_first=False)``; pre-norm with
    ``norm_first=True``; dropout as in :class:`EncoderBlock`.

    Parameters
    ----------
    d_model, num_heads, d_ff, activation, eps, norm_first, dropout
        As in :class:`EncoderBlock`.

    Shapes
    ------
    y : (B, T, D)
    memory : (B, S, D)
    output : (B, T, D)
    self_weights : (B, H, T, T)
    cross_weights : (B, H, T, S)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, activation: str = "relu", eps: float = 1e-5,
                 norm_first: bool = False, dropout: float = 0.0):
        super().__init__()
        _check_block(d_model, norm_first)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = LayerNorm(d_model, eps)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = LayerNorm(d_model, eps)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.dropout = Dropout(dropout)
        self.norm3 = LayerNorm(d_model, eps)

    def forward(
        self, y: Tensor, memory: Tensor, memory_valid_lens: Optional[Tensor] = None,
        cache: Optional[KVCache] = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Decode ``y`` (the shifted target) while reading ``memory`` (the encoder's output).

        Parameters
        ----------
        y : Tensor
            Float decoder input, one row per target position.
        memory : Tensor
            The encoder's output.
        memory_valid_lens : Tensor, optional
            Number of real source positions per sequence; padding is ignored.
        cache : KVCache, optional
            Decode incrementally: ``y`` holds the target positions after those
            in the cache (see :class:`KVCache`).

        Returns
        -------
        output, self_weights, cross_weights : Tensor

        Shapes
        ------
        y : (B, T, D)
        memory : (B, S, D)
        memory_valid_lens : (B,)
        output : (B, T, D)
        self_weights : (B, H, T, T), or (B, H, T, t + T) with t positions cached
        cross_weights : (B, H, T, S)
        """
        _require_float_inputs(self, self.d_model, y=y, memory=memory), _check_cache(cache, None, None)
        h = self._sublayer_input(y, self.norm1)  # y itself in post-norm
        if cache is None:
            mask = causal_mask(y.shape[1], device=y.device)  # (T, T)
            attended, self_weights = self.self_attn(h, h, h, mask=mask, average_weights=False)
        else:
            attended, self_weights = _cached_self_attention(self.self_attn, h, cache)
        z1 = self._residual(y, attended, self.norm1)
        context, cross_weights = self.cross_attn(
            self._sublayer_input(z1, self.norm2), memory, memory, valid_lens=memory_valid_lens,
            average_weights=False,
        )  # queries from the decoder, keys and values from the encoder
        z2 = self._residual(z1, context, self.norm2)
        output = self._residual(z2, self.ffn(self._sublayer_input(z2, self.norm3)), self.norm3)
        return output, self_weights, cross_weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "DecoderBlock":
        """A block with the configuration and weights of a ``torch.nn.TransformerDecoderLayer``.

        Torch's ``self_attn`` and ``multihead_attn`` become ``self_attn`` and
        ``cross_attn``; its ``norm1``, ``norm2``, ``norm3`` keep their names.
        Run torch with a causal ``tgt_mask`` to get the same outputs.

        Parameters
        ----------
        layer : torch.nn.TransformerDecoderLayer
            With a ReLU or GELU activation; its ``norm_first`` is kept.

        Returns
        -------
        DecoderBlock
            On the device and with the dtype of ``layer``.

        Shapes
        ------
        The block's ``D``, ``H`` and FFN width equal the layer's.
        """
        block = _block_from_torch(cls, layer, nn.TransformerDecoderLayer)
        block.cross_attn.load_torch_weights(layer.multihead_attn)
        for ours, theirs in ((block.norm1, layer.norm1), (block.norm2, layer.norm2), (block.norm3, layer.norm3)):
            _copy_norm(ours, theirs)
        return block


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
    in GPT-2 and ``torch.nn.Transformer(norm_first=True)``. ``scale_embedding``
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


def _final_norm(c: TransformerConfig) -> nn.Module:
    """The layer norm that closes a pre-norm stack (whose last residual sum is not normalised)."""
    return LayerNorm(c.d_model) if c.norm_first else nn.Identity()


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
        _check_model(config, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
        self.config = config
        c = config
        self.src_embed = TransformerEmbedding(src_vocab_size, c.d_model, c.max_len, c.learned_positions,
                                              c.scale_embedding, c.dropout)
        self.tgt_embed = TransformerEmbedding(tgt_vocab_size, c.d_model, c.max_len, c.learned_positions,
                                              c.scale_embedding, c.dropout)
        self.encoder = nn.ModuleList(
            EncoderBlock(c.d_model, c.num_heads, c.d_ff, c.activation, norm_first=c.norm_first, dropout=c.dropout)
            for _ in range(c.num_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderBlock(c.d_model, c.num_heads, c.d_ff, c.activation, norm_first=c.norm_first, dropout=c.dropout)
            for _ in range(c.num_layers)
        )
        self.encoder_norm, self.decoder_norm = _final_norm(c), _final_norm(c)
        self.output = nn.Linear(c.d_model, tgt_vocab_size)

    def encode(self, src: Tensor, src_valid_lens: Optional[Tensor] = None) -> tuple[Tensor, list[Tensor]]:
        """The memory and every encoder layer's attention weights.

        Shapes
        ------
        src : (B, S)
        memory : (B, S, D)
        weights : list of num_layers tensors (B, H, S, S)
        """
        h = self.src_embed(src)  # (B, S, D)
        weights = []
        for block in self.encoder:
            h, w = block(h, valid_lens=src_valid_lens)
            weights.append(w)
        return self.encoder_norm(h), weights

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
        caches = _check_caches(cache, len(self.decoder))
        h = self.tgt_embed(tgt, start=caches[0].length if cache else 0)  # (B, T, D)
        self_weights, cross_weights = [], []
        for block, layer_cache in zip(self.decoder, caches):
            h, w_self, w_cross = block(h, memory, memory_valid_lens=src_valid_lens, cache=layer_cache)
            self_weights.append(w_self)
            cross_weights.append(w_cross)
        return self.output(self.decoder_norm(h)), self_weights, cross_weights

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each decoder layer."""
        return [KVCache() for _ in self.decoder]

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
        _check_model(config, vocab_size=vocab_size)
        self.config = c = config
        self.embed = TransformerEmbedding(vocab_size, c.d_model, c.max_len, c.learned_positions, c.scale_embedding,
                                          c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.num_heads, c.d_ff, c.activation, norm_first=c.norm_first, dropout=c.dropout)
            for _ in range(c.num_layers)
        )
        self.final_norm = _final_norm(c)
        self.output = nn.Linear(c.d_model, vocab_size)

    def forward(self, tokens: Tensor, cache: Optional[list[KVCache]] = None) -> Tensor:
        """Next-token logits at every position.

        With ``cache`` (from :meth:`new_cache`), ``tokens`` continue the cached
        positions and only their logits are computed.

        Shapes
        ------
        tokens : (B, T)
        output : (B, T, V)
        """
        caches = _check_caches(cache, len(self.blocks))
        h = self.embed(tokens, start=caches[0].length if cache else 0)  # (B, T, D)
        mask = None if cache else causal_mask(tokens.shape[1], device=tokens.device)  # (T, T)
        for block, layer_cache in zip(self.blocks, caches):
            h, _ = block(h, mask=mask, cache=layer_cache)
        return self.output(self.final_norm(h))  # (B, T, V)

    def new_cache(self) -> list[KVCache]:
        """An empty :class:`KVCache` for each block."""
        return [KVCache() for _ in self.blocks]

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
