"""The Transformer's blocks: self-attention, layer norm, feed-forward, dropout, encoder and decoder blocks.

Chapter 11 (syllabus TR1-TR4) builds the Transformer from these parts, top to
bottom; :mod:`lib.transformer` assembles them into whole models.

1. :class:`SelfAttention`, one head with its Q, K, V projections; the multi-head
   version with its output projection is :class:`lib.attention.MultiHeadAttention`
   called with the same input three times. Positions enter through
   :mod:`lib.positional` (the sinusoidal encoding).
2. :class:`Dropout` (Srivastava et al. [6]_), :class:`LayerNorm` and
   :class:`FeedForward` (position-wise), the other parts of a block;
   :func:`causal_mask`, the left-to-right mask.
3. :class:`KVCache`: incremental decoding. Each generated position's keys and
   values are kept per layer, so the next step computes only the new
   position's query, key and value instead of re-running the whole prefix
   (Pope et al. [5]_ discuss its cost at scale).
4. :class:`Residual`, how a block wraps each sublayer, and :class:`EncoderBlock` and
   :class:`DecoderBlock`: post-norm, as in the paper
   and in ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer``,
   whose weights they can load, or pre-norm with ``norm_first=True``, as in
   Xiong et al. [4]_. Dropout sits where the paper puts it, on each sublayer's
   output before the residual sum (and, as in torch, on the feed-forward
   network's hidden layer); the attention weights are not dropped.

Conventions: batch-first tensors, rows are positions. ``B`` batch, ``T`` target
(query) positions, ``S`` source (key) positions, ``D`` the model size
``d_model``, ``H`` heads. Boolean masks mean **True = may attend**, as in
:mod:`lib.attention`.

References
----------
.. [1] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
.. [2] J. L. Ba, J. R. Kiros, G. E. Hinton. "Layer Normalization".
   arXiv:1607.06450, 2016.
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

import numbers
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.activations import gelu, relu
from lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lib.validation import require_instance, require_int, require_ints

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


def _check_dropout(p: object, name: str = "dropout") -> None:
    """The argument check of a dropout rate called ``name``: a float ``0 <= p < 1``."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"{name} must be a float in [0, 1); found {type(p).__name__}")
    if not 0 <= p < 1:
        raise ValueError(f"{name} must be a float in [0, 1); found {p}")


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
        _check_dropout(p, "p")
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
        _check_dropout(dropout)  # named as the caller knows it, not as Dropout's p
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

    def attend(self, attention: MultiHeadAttention, h: Tensor) -> tuple[Tensor, Tensor]:
        """Causal self-attention of the new positions ``h`` over the cached positions and themselves.

        The new positions' keys and values are appended to the cache first.

        Shapes
        ------
        h : (B, L, D), positions t .. t + L - 1
        output : (B, L, D)
        weights : (B, H, L, t + L)
        """
        start, new = self.length, h.shape[1]  # t cached positions, L new ones
        queries = attention.split_heads(attention.query_proj(h))  # (B, H, L, Dh)
        # (B, H, t + L, Dh) each: the cached positions' and the new ones'
        keys, values = self.append(attention.split_heads(attention.key_proj(h)),
                                   attention.split_heads(attention.value_proj(h)))
        positions = torch.arange(start, start + new, device=h.device)  # (L,)
        mask = torch.arange(start + new, device=h.device) <= positions[:, None]  # (L, t + L)
        # (B, H, L, Dh), (B, H, L, t + L)
        heads, weights = scaled_dot_product_attention(queries, keys, values, mask)
        return attention.out_proj(attention.merge_heads(heads)), weights  # (B, L, D)


def _check_cache(cache: object, mask: object, valid_lens: object) -> None:
    """With a cache, the block attends causally over cached and new positions: no other mask."""
    if cache is not None:
        require_instance("cache", cache, KVCache)
        if mask is not None or valid_lens is not None:
            raise ValueError("with a cache the attention is causal over all positions; "
                             "mask and valid_lens must be None")


class Residual(nn.Module):
    r"""A sublayer ``f`` wrapped in a residual connection, dropout and a layer norm.

    Post-norm (the paper): :math:`\mathrm{LN}(\mathbf{x} + \mathrm{drop}(f(\mathbf{x})))`.
    Pre-norm (``norm_first``, Xiong et al. 2020):
    :math:`\mathbf{x} + \mathrm{drop}(f(\mathrm{LN}(\mathbf{x})))`, which leaves the path
    from input to output free of normalisation. Dropout (training only) acts on ``f``'s output
    before the sum, the paper's "residual dropout". An attention sublayer returns its weights
    beside its output; they are passed on, so a call returns ``(output, weights or None)``.

    Shapes
    ------
    x : (B, T, D)
    output : (B, T, D)
    """

    def __init__(self, d_model: int, eps: float = 1e-5, norm_first: bool = False, dropout: float = 0.0):
        super().__init__()
        require_instance("norm_first", norm_first, bool)
        _check_dropout(dropout)  # named as the caller knows it, not as Dropout's p
        self.norm, self.dropout, self.norm_first = LayerNorm(d_model, eps), Dropout(dropout), norm_first

    def forward(self, x: Tensor, sublayer: Callable) -> tuple[Tensor, Optional[Tensor]]:
        result = sublayer(self.norm(x) if self.norm_first else x)
        update, weights = result if isinstance(result, tuple) else (result, None)
        update = self.dropout(update)  # (B, T, D)
        return (x + update if self.norm_first else self.norm(x + update)), weights


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


class EncoderBlock(nn.Module):
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
        require_int("d_model", d_model)
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.residual1 = Residual(d_model, eps, norm_first, dropout)  # around self_attn (torch's norm1)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.residual2 = Residual(d_model, eps, norm_first, dropout)  # around ffn (norm2)

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
        _require_float_inputs(self, self.d_model, x=x)
        _check_cache(cache, mask, valid_lens)
        # Self-attention; with a cache, over the cached positions too.
        def self_attention(h: Tensor) -> tuple[Tensor, Tensor]:
            if cache is not None:
                return cache.attend(self.self_attn, h)
            return self.self_attn(h, h, h, mask=mask, valid_lens=valid_lens, average_weights=False)

        # Each sublayer adds to its input (post-norm then normalises the sum).
        z, weights = self.residual1(x, self_attention)
        output, _ = self.residual2(z, self.ffn)
        return output, weights  # (B, T, D), (B, H, T, T) or (B, H, T, t + T) with a cache

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
        _copy_norm(block.residual1.norm, layer.norm1)
        _copy_norm(block.residual2.norm, layer.norm2)
        return block


class DecoderBlock(nn.Module):
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
        require_int("d_model", d_model)
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.residual1 = Residual(d_model, eps, norm_first, dropout)  # around self_attn (torch's norm1)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.residual2 = Residual(d_model, eps, norm_first, dropout)  # around cross_attn (norm2)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.residual3 = Residual(d_model, eps, norm_first, dropout)  # around ffn (norm3)

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
        _require_float_inputs(self, self.d_model, y=y, memory=memory)
        _check_cache(cache, None, None)
        # Causal self-attention; with a cache, over the cached positions too.
        def self_attention(h: Tensor) -> tuple[Tensor, Tensor]:
            if cache is not None:
                return cache.attend(self.self_attn, h)
            mask = causal_mask(h.shape[1], device=h.device)  # (T, T)
            return self.self_attn(h, h, h, mask=mask, average_weights=False)

        # Queries from the decoder, keys and values from the encoder.
        def cross_attention(h: Tensor) -> tuple[Tensor, Tensor]:
            return self.cross_attn(h, memory, memory, valid_lens=memory_valid_lens, average_weights=False)

        z1, self_weights = self.residual1(y, self_attention)
        z2, cross_weights = self.residual2(z1, cross_attention)
        output, _ = self.residual3(z2, self.ffn)
        return output, self_weights, cross_weights

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> "DecoderBlock":
        """A block with the configuration and weights of a ``torch.nn.TransformerDecoderLayer``.

        Torch's ``self_attn`` and ``multihead_attn`` become ``self_attn`` and
        ``cross_attn``; its ``norm1``, ``norm2``, ``norm3`` become the norms of ``residual1``,
        ``residual2``, ``residual3``.
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
        for ours, theirs in zip((block.residual1, block.residual2, block.residual3),
                                (layer.norm1, layer.norm2, layer.norm3)):
            _copy_norm(ours.norm, theirs)
        return block
