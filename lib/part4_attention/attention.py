"""Attention: scoring functions, softmax pooling, hard attention, multi-head attention.

In the order the chapter teaches it (syllabus ATT2-ATT7): a *score* compares every
query ``(B, T, Dq)`` with every key ``(B, S, Dk)`` (additive [1], dot-product and
bilinear [2], scaled dot-product [4]); :func:`masked_softmax` turns the scores into
weights, ignoring padded keys; :func:`attention` averages the values with them and
:func:`hard_attention` picks one value instead [3]; :func:`scaled_dot_product_attention`
and :class:`MultiHeadAttention` are the Transformer's blocks [4], tested against
torch's.

Tensors are batch-first: ``B`` batch, ``T`` queries, ``S`` keys and values, ``H``
heads. :func:`attention`, :func:`hard_attention`,
:func:`scaled_dot_product_attention` and :class:`MultiHeadAttention` return the weights
with the output; ``need_weights=False`` (torch's name) skips them and lets torch's fused
kernel attend (FlashAttention [5] for ``(B, H, T, D)`` inputs whose values have the key
size), which never stores them.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate". ICLR 2015. arXiv:1409.0473.
.. [2] M.-T. Luong, H. Pham, C. D. Manning. "Effective Approaches to
   Attention-based Neural Machine Translation". EMNLP 2015. arXiv:1508.04025.
.. [3] K. Xu et al. "Show, Attend and Tell: Neural Image Caption Generation with
   Visual Attention". ICML 2015. arXiv:1502.03044.
.. [4] A. Vaswani et al. "Attention Is All You Need". NeurIPS 2017. arXiv:1706.03762.
.. [5] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Ré. "FlashAttention: Fast and
   Memory-Efficient Exact Attention with IO-Awareness". NeurIPS 2022. arXiv:2205.14135.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, Optional, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn

from lib.checked import IntegerDtype, Positive, PositiveInt, same_dtype

__all__ = [
    "AdditiveScore",
    "DotScore",
    "ScaledDotScore",
    "BilinearScore",
    "make_score",
    "SCORE_NAMES",
    "masked_softmax",
    "attention",
    "hard_attention",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
]

ScoreFunction = Callable[
    [Tensor, Tensor], Tensor
]  # (B, T, Dq), (B, S, Dk) -> (B, T, S)
ScoreName = Literal["additive", "dot", "scaled_dot", "bilinear"]
SCORE_NAMES = ("additive", "dot", "scaled_dot", "bilinear")
# One length per batch element, or one per query.
ValidLens = IntegerDtype[Tensor, "B"] | IntegerDtype[Tensor, "B Q"]


# ---------------------------------------------------------------------------
# Scoring functions: (B, T, Dq) queries x (B, S, Dk) keys -> (B, T, S) scores.
# ---------------------------------------------------------------------------


@no_type_check  # the scores' forward checked the ranks; a decoder scores every step
def _check_sizes(score: nn.Module, queries: Tensor, keys: Tensor) -> None:
    """Refuse feature sizes other than the module's. They are read from the module here:
    "{self.query_dim}" in a signature would cost 40 µs a call."""
    if queries.shape[-1] != score.query_dim:
        raise ValueError(
            f"queries must have shape (B, T, Dq) with Dq = query_dim = "
            f"{score.query_dim}; found {tuple(queries.shape)}"
        )
    if keys.shape[-1] != score.key_dim:
        raise ValueError(
            f"keys must have shape (B, S, Dk) with Dk = key_dim = {score.key_dim}; "
            f"found {tuple(keys.shape)}"
        )


class AdditiveScore(nn.Module):
    r"""Additive score of Bahdanau et al. (2015), :math:`v^\top \tanh(W_q q + W_k k)`,
    without biases; queries and keys may have different sizes."""

    def __init__(
        self, query_dim: PositiveInt, key_dim: PositiveInt, hidden_dim: PositiveInt
    ):
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W_q
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=False)  # W_k
        self.score_proj = nn.Linear(hidden_dim, 1, bias=False)  # v

    def forward(
        self,
        queries: Float[Tensor, "B T Dq"],
        keys: Float[Tensor, "B S Dk"],
    ) -> Float[Tensor, "B T S"]:
        _check_sizes(self, queries, keys)
        same_dtype(parameters=self.score_proj.weight, queries=queries, keys=keys)
        # Broadcasting pairs every query with every key without a Python loop.
        projected_queries = self.query_proj(queries).unsqueeze(2)  # (B, T, 1, hidden)
        projected_keys = self.key_proj(keys).unsqueeze(1)  # (B, 1, S, hidden)
        features = torch.tanh(projected_queries + projected_keys)  # (B, T, S, hidden)
        return self.score_proj(features).squeeze(-1)  # (B, T, S)


class DotScore(nn.Module):
    r"""Dot-product score of Luong et al. (2015), :math:`q^\top k`: no parameters, so
    queries and keys have one size ``D``."""

    def forward(
        self, queries: Float[Tensor, "B T D"], keys: Float[Tensor, "B S D"]
    ) -> Float[Tensor, "B T S"]:
        same_dtype(queries=queries, keys=keys)
        return queries @ keys.transpose(1, 2)  # (B, T, S)


@no_type_check  # the callers checked the arguments; it runs at every decoding step
def _scaled_dot_scores(
    queries: Float[Tensor, "*batch T D"], keys: Float[Tensor, "*batch S D"]
) -> Float[Tensor, "*batch T S"]:
    # Scaling the queries (T x D numbers) is cheaper than scaling the scores (T x S).
    return (queries / math.sqrt(queries.shape[-1])) @ keys.transpose(-2, -1)


class ScaledDotScore(nn.Module):
    r"""Scaled dot-product score of Vaswani et al. (2017), :math:`q^\top k / \sqrt{D}`.

    For entries of mean 0 and variance 1, :math:`q^\top k` sums ``D`` terms of variance
    1: dividing by :math:`\sqrt{D}` keeps its variance at 1 whatever ``D``, so the
    softmax does not saturate towards one-hot and its gradients do not vanish.
    """

    def forward(
        self, queries: Float[Tensor, "B T D"], keys: Float[Tensor, "B S D"]
    ) -> Float[Tensor, "B T S"]:
        same_dtype(queries=queries, keys=keys)
        return _scaled_dot_scores(queries, keys)  # (B, T, S)


class BilinearScore(nn.Module):
    r"""Bilinear ("general") score of Luong et al. (2015), :math:`q^\top W k`.

    With ``rank=r``, :math:`W = U^\top V` (``query_factor``, ``key_factor``, ``r x Dq``
    and ``r x Dk``): ``r (Dq + Dk)`` parameters instead of ``Dq Dk``.
    """

    def __init__(
        self,
        query_dim: PositiveInt,
        key_dim: PositiveInt,
        rank: Optional[PositiveInt] = None,
    ):
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.rank = rank
        if rank is None:
            self.weight = nn.Parameter(torch.empty(query_dim, key_dim))  # W
            nn.init.xavier_uniform_(self.weight)
        else:
            self.query_factor = nn.Linear(query_dim, rank, bias=False)  # U
            self.key_factor = nn.Linear(key_dim, rank, bias=False)  # V

    def forward(
        self,
        queries: Float[Tensor, "B T Dq"],
        keys: Float[Tensor, "B S Dk"],
    ) -> Float[Tensor, "B T S"]:
        _check_sizes(self, queries, keys)
        same_dtype(parameters=next(self.parameters()), queries=queries, keys=keys)
        if self.rank is None:
            return (queries @ self.weight) @ keys.transpose(1, 2)  # (B, T, S)
        # Projecting both sides to r dimensions never builds the Dq x Dk matrix.
        u_q = self.query_factor(queries)  # (B, T, r)
        return u_q @ self.key_factor(keys).transpose(1, 2)  # (B, T, S)


def make_score(
    name: ScoreName,
    query_dim: PositiveInt,
    key_dim: PositiveInt,
    hidden_dim: Optional[PositiveInt] = None,
    rank: Optional[PositiveInt] = None,
) -> nn.Module:
    """The score module called ``name``; ``hidden_dim`` is the additive score's width
    (required), ``rank`` the bilinear score's (optional); the others ignore them."""
    if name == "additive":
        if hidden_dim is None:
            raise ValueError(
                "the 'additive' score needs hidden_dim (an int > 0); found None"
            )
        return AdditiveScore(query_dim, key_dim, hidden_dim)
    if name == "bilinear":
        return BilinearScore(query_dim, key_dim, rank=rank)
    if query_dim != key_dim:
        raise ValueError(
            f"the {name!r} score needs query_dim == key_dim; "
            f"found query_dim={query_dim}, key_dim={key_dim}"
        )
    return DotScore() if name == "dot" else ScaledDotScore()


# ---------------------------------------------------------------------------
# From scores to weights.
# ---------------------------------------------------------------------------


@no_type_check  # the callers checked the dtype, it checks shape and range; once a step
def _keep_from_valid_lens(
    valid_lens: ValidLens, scores_shape: tuple[int, ...]
) -> Bool[Tensor, "..."]:
    """True where a key's position is below its row's valid length, broadcastable to
    ``scores_shape = (B, ..., Q, K)``."""
    batch, num_queries, num_keys = scores_shape[0], scores_shape[-2], scores_shape[-1]
    ndim = len(scores_shape)
    allowed = [(batch,)] + ([(batch, num_queries)] if ndim >= 3 else [])
    if tuple(valid_lens.shape) not in allowed:
        raise ValueError(
            f"valid_lens must have shape (B,) = ({batch},) or (B, Q) = ({batch}, "
            f"{num_queries}) for scores of shape {scores_shape}; "
            f"found {tuple(valid_lens.shape)}"
        )
    if valid_lens.numel() and int(valid_lens.min()) < 0:
        raise ValueError(
            f"valid_lens must be >= 0; found minimum {int(valid_lens.min())}"
        )
    if valid_lens.numel() and int(valid_lens.max()) > num_keys:
        raise ValueError(
            f"valid_lens must be <= the number of keys K = {num_keys}; "
            f"found maximum {int(valid_lens.max())}"
        )
    if valid_lens.dim() == 1:  # every query of a batch element shares one length
        lens = valid_lens.reshape(batch, *[1] * (ndim - 1))  # (B, 1, ..., 1)
    else:
        lens = valid_lens.reshape(
            batch, *[1] * (ndim - 3), num_queries, 1
        )  # (B, ..., Q, 1)
    positions = torch.arange(num_keys, device=valid_lens.device)  # (K,)
    return positions < lens  # (B, 1, ..., 1 or Q, K)


@no_type_check  # the callers checked the arguments; it runs at every decoding step
def _softmax_over_kept(
    scores: Float[Tensor, "*batch Q K"], keep: Optional[Bool[Tensor, "..."]]
) -> Float[Tensor, "*batch Q K"]:
    """Softmax over the last axis where ``keep`` is True; 0 elsewhere, and a row with
    nothing kept gets zeros, not the NaN of 0/0."""
    masked = scores if keep is None else scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    # torch's fused softmax gives NaN exactly when a row has NaN, +inf or nothing kept;
    # one reduction finds it, and only then does the written-out softmax answer.
    if not bool(torch.isnan(weights.sum())):
        return weights
    return _softmax_reference(masked)


def _softmax_reference(
    masked: Float[Tensor, "*batch Q K"],
) -> Float[Tensor, "*batch Q K"]:
    """The softmax written out, for scores masked with -inf (the tests hold the fused
    softmax to it)."""
    if bool((torch.isnan(masked) | (masked == float("inf"))).any()):
        raise ValueError(
            "scores must be finite or -inf at attended positions; found NaN or +inf"
        )
    # Subtracting the row maximum keeps exp() from overflowing (exp(1e4) = inf). The
    # shift cancels in the ratio, so no gradient needs to flow through it.
    row_max = masked.detach().amax(dim=-1, keepdim=True)  # (..., Q, 1)
    # A row with nothing to attend to has maximum -inf, and -inf - (-inf) is NaN.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exponentials = torch.exp(masked - row_max)  # (..., Q, K); 0 where masked
    totals = exponentials.sum(dim=-1, keepdim=True)  # (..., Q, 1); >= 1 unless empty
    # An empty row has total 0 and zero exponentials: dividing by 1 keeps it at 0.
    return exponentials / torch.where(totals > 0, totals, torch.ones_like(totals))


def masked_softmax(
    scores: Float[Tensor, "*batch Q K"], valid_lens: Optional[ValidLens] = None
) -> Float[Tensor, "*batch Q K"]:
    """Softmax over the last axis; keys at positions >= ``valid_lens`` (one per batch
    element ``B = scores.shape[0]``, or per query) and -inf scores get weight 0."""
    if scores.shape[-1] == 0:
        raise ValueError(
            "scores must have at least one key (K >= 1); "
            f"found shape {tuple(scores.shape)}"
        )
    keep = None
    if valid_lens is not None:
        keep = _keep_from_valid_lens(valid_lens, tuple(scores.shape))
    return _softmax_over_kept(scores, keep)


# ---------------------------------------------------------------------------
# Soft and hard attention pooling with a pluggable score.
# ---------------------------------------------------------------------------


def attention(
    queries: Float[Tensor, "B T Dq"],
    keys: Float[Tensor, "B S Dk"],
    values: Float[Tensor, "B S Dv"],
    score: ScoreFunction,
    valid_lens: Optional[ValidLens] = None,
    temperature: Positive = 1.0,
) -> tuple[Float[Tensor, "B T Dv"], Float[Tensor, "B T S"]]:
    """Soft attention: each query's output is the average of the values weighted by
    softmax(score(queries, keys) / temperature); returns the outputs and weights."""
    same_dtype(queries=queries, keys=keys, values=values)
    scores = score(queries, keys)
    expected = (queries.shape[0], queries.shape[1], keys.shape[1])
    if not isinstance(scores, Tensor) or tuple(scores.shape) != expected:
        found = (
            tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
        )
        raise ValueError(
            f"score(queries, keys) must return shape (B, T, S) = {expected}; "
            f"found {found}"
        )
    weights = masked_softmax(scores / temperature, valid_lens)  # (B, T, S)
    return weights @ values, weights  # (B, T, Dv), (B, T, S)


def hard_attention(
    queries: Float[Tensor, "B T Dq"],
    keys: Float[Tensor, "B S Dk"],
    values: Float[Tensor, "B S Dv"],
    score: ScoreFunction,
    mode: Literal["argmax", "sample"] = "argmax",
    valid_lens: Optional[ValidLens] = None,
    generator: Optional[torch.Generator] = None,
) -> tuple[Float[Tensor, "B T Dv"], Float[Tensor, "B T S"]]:
    """Hard attention (Xu et al., 2015): each query takes one value, the most likely
    (ties to the lowest index) or one drawn from the weights; only ``values`` get a
    gradient, since the choice is piecewise constant in the scores."""
    _, probabilities = attention(queries, keys, values, score, valid_lens)  # (B, T, S)
    batch, num_queries, num_keys = probabilities.shape
    has_valid_key = probabilities.sum(dim=-1, keepdim=True) > 0  # (B, T, 1)
    if mode == "argmax":
        index = probabilities.argmax(dim=-1)  # (B, T)
    else:
        # multinomial refuses all-zero rows: empty rows draw uniformly, zeroed below.
        uniform = torch.ones_like(probabilities)
        sampling = torch.where(has_valid_key, probabilities, uniform).detach()
        flat = sampling.reshape(batch * num_queries, num_keys)  # (B*T, S)
        drawn = torch.multinomial(flat, 1, generator=generator)  # (B*T, 1)
        index = drawn.reshape(batch, num_queries)  # (B, T)
    one_hot = F.one_hot(index, num_keys).to(probabilities.dtype)  # (B, T, S)
    weights = one_hot * has_valid_key  # (B, T, S)
    return weights @ values, weights  # (B, T, Dv), (B, T, S)


# ---------------------------------------------------------------------------
# Transformer attention.
# ---------------------------------------------------------------------------


def _broadcasts(shape: torch.Size, target: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` without growing it."""
    pairs = zip(reversed(shape), reversed(target))
    return len(shape) <= len(target) and all(m in (1, t) for m, t in pairs)


Weights = Float[Tensor, "B *heads T S"]  # (B, T, S), or (B, H, T, S) with heads


def scaled_dot_product_attention(
    q: Float[Tensor, "B *heads T D"],
    k: Float[Tensor, "B *heads S D"],
    v: Float[Tensor, "B *heads S Dv"],
    mask: Optional[Bool[Tensor, "..."]] = None,
    need_weights: bool = True,
) -> tuple[Float[Tensor, "B *heads T Dv"], Optional[Weights]]:
    """softmax(q kᵀ / √D) v, as torch's scaled_dot_product_attention (no dropout), with
    the weights. ``mask`` is True where a query may attend (the masks of
    torch.nn.MultiheadAttention say the opposite); a row with nothing to attend to gives
    zeros."""
    same_dtype(q=q, k=k, v=v)
    if k.shape[-2] == 0:  # the weights of a query over no key do not exist
        raise ValueError(
            f"k must hold at least one key (S >= 1); found {tuple(k.shape)}"
        )
    scores_shape = (*q.shape[:-1], k.shape[-2])  # (..., T, S)
    if mask is not None and not _broadcasts(mask.shape, scores_shape):
        raise ValueError(
            f"mask must be broadcastable to (..., T, S) = {scores_shape}; "
            f"found {tuple(mask.shape)}"
        )
    if not need_weights:
        output = _fused_attention(q, k, v, mask)  # None if it has a NaN anywhere
        if output is not None:
            return output, None
    scores = _scaled_dot_scores(q, k)  # (..., T, S)
    weights = _softmax_over_kept(scores, mask)  # (..., T, S)
    return weights @ v, (weights if need_weights else None)  # (..., T, Dv)


@no_type_check  # its caller checked the arguments; it runs at every attention call
def _fused_attention(
    q: Float[Tensor, "*batch T D"],
    k: Float[Tensor, "*batch S D"],
    v: Float[Tensor, "*batch S Dv"],
    keep: Optional[Bool[Tensor, "..."]],
) -> Optional[Float[Tensor, "*batch T Dv"]]:
    """torch's fused attention (same True = may attend, same 1/√D), or None where the
    written-out path must answer: torch gives NaN for NaN or +inf scores, and (in some
    versions) for rows with nothing to attend to."""
    # torch wants a mask of at least 2 dimensions: (S,) becomes (1, S), () (1, 1).
    attn_mask = (
        None if keep is None else torch.atleast_2d(keep)
    )  # (..., T or 1, S or 1)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    # One reduction and one sync: a NaN anywhere makes the total NaN.
    return None if bool(torch.isnan(output.sum())) else output  # (..., T, Dv)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017) with torch's parameters, without
    dropout, add_bias_kv or add_zero_attn; H heads of size E / H share each E x E."""

    def __init__(
        self,
        embed_dim: PositiveInt,
        num_heads: PositiveInt,
        bias: bool = True,
        kdim: Optional[PositiveInt] = None,
        vdim: Optional[PositiveInt] = None,
    ):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(
                "embed_dim must be divisible by num_heads; "
                f"found embed_dim={embed_dim}, num_heads={num_heads} "
                f"(remainder {embed_dim % num_heads})"
            )
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim  # default E
        self.has_bias = bias
        self.query_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W_q
        self.key_proj = nn.Linear(self.kdim, embed_dim, bias=bias)  # W_k
        self.value_proj = nn.Linear(self.vdim, embed_dim, bias=bias)  # W_v
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W_o

    def forward(
        self,
        query: Float[Tensor, "B T E"],
        key: Float[Tensor, "B S Ek"],
        value: Float[Tensor, "B S Ev"],
        mask: Optional[Bool[Tensor, "..."]] = None,
        valid_lens: Optional[ValidLens] = None,
        average_weights: bool = True,
        need_weights: bool = True,
    ) -> tuple[Float[Tensor, "B T E"], Optional[Weights]]:
        """All heads attend at once, where both ``mask`` and ``valid_lens`` allow."""
        same_dtype(parameters=self.out_proj.weight, query=query, key=key, value=value)
        # Sizes read from the module, checked here: "{self.embed_dim}" in the signature
        # would cost 40 µs a call, as much as the attention itself for short sequences.
        if query.shape[-1] != self.embed_dim:
            raise ValueError(
                "query must have shape (B, T, E) with E = embed_dim = "
                f"{self.embed_dim}; found {tuple(query.shape)}"
            )
        if key.shape[-1] != self.kdim or key.shape[1] == 0:
            raise ValueError(
                f"key must have shape (B, S, Ek) with S >= 1, Ek = kdim = {self.kdim}; "
                f"found {tuple(key.shape)}"
            )
        if value.shape[-1] != self.vdim:
            raise ValueError(
                f"value must have shape (B, S, Ev) with Ev = vdim = {self.vdim}; "
                f"found {tuple(value.shape)}"
            )
        shape = (query.shape[0], query.shape[1], key.shape[1])  # (B, T, S)
        if mask is not None and not _broadcasts(mask.shape, shape):
            raise ValueError(
                f"mask must be broadcastable to (B, T, S) = {shape}; "
                f"found {tuple(mask.shape)}"
            )
        if valid_lens is not None:
            within = _keep_from_valid_lens(valid_lens, shape)  # (B, 1 or T, S)
            mask = within if mask is None else mask & within
        # One mask for every head: a singleton head axis.
        head_mask = None if mask is None else mask.broadcast_to(shape).unsqueeze(1)
        q = self.split_heads(self.query_proj(query))  # (B, H, T, Dh)
        k = self.split_heads(self.key_proj(key))  # (B, H, S, Dh)
        v = self.split_heads(self.value_proj(value))  # (B, H, S, Dh)
        heads, weights = scaled_dot_product_attention(q, k, v, head_mask, need_weights)
        output = self.out_proj(self.merge_heads(heads))  # (B, T, E)
        if average_weights and weights is not None:
            weights = weights.mean(dim=1)  # (B, T, S)
        return output, weights

    @no_type_check  # four calls a forward: a checked call costs more than the reshape
    def split_heads(
        self, projected: Float[Tensor, "B L {self.embed_dim}"]
    ) -> Float[Tensor, "B {self.num_heads} L {self.head_dim}"]:
        _require_float_tensor(projected, "projected")
        if projected.dim() != 3 or projected.shape[-1] != self.embed_dim:
            raise ValueError(
                f"projected must have shape (B, L, E) with E = embed_dim = "
                f"{self.embed_dim}; found {tuple(projected.shape)}"
            )
        # Head h is its own slice of E: (B, L, E) -> (B, L, H, Dh) -> (B, H, L, Dh).
        per_head = projected.unflatten(-1, (self.num_heads, self.head_dim))
        return per_head.transpose(1, 2)

    @no_type_check  # as split_heads
    def merge_heads(
        self, heads: Float[Tensor, "B {self.num_heads} L {self.head_dim}"]
    ) -> Float[Tensor, "B L {self.embed_dim}"]:
        _require_float_tensor(heads, "heads")
        if (
            heads.dim() != 4
            or heads.shape[1] != self.num_heads
            or heads.shape[3] != self.head_dim
        ):
            raise ValueError(
                f"heads must have shape (B, H, L, Dh) = (B, {self.num_heads}, L, "
                f"{self.head_dim}); found {tuple(heads.shape)}"
            )
        # The heads side by side: (B, H, L, Dh) -> (B, L, H, Dh) -> (B, L, E).
        return heads.transpose(1, 2).flatten(2)

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A module with the configuration, weights, device and dtype of ``mha``."""
        bias = mha.in_proj_bias is not None
        module = cls(mha.embed_dim, mha.num_heads, bias, kdim=mha.kdim, vdim=mha.vdim)
        return module.to(mha.out_proj.weight).load_torch_weights(mha)

    @torch.no_grad()
    def load_torch_weights(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of ``mha`` (packed in ``in_proj_weight`` or not) here."""
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                "torch modules with add_bias_kv=True or add_zero_attn=True are not "
                f"supported; found add_bias_kv={mha.bias_k is not None}, "
                f"add_zero_attn={mha.add_zero_attn}"
            )
        ours = (self.embed_dim, self.num_heads, self.kdim, self.vdim, self.has_bias)
        bias = mha.in_proj_bias is not None
        theirs = (mha.embed_dim, mha.num_heads, mha.kdim, mha.vdim, bias)
        if theirs != ours:
            raise ValueError(
                "mha must have (embed_dim, num_heads, kdim, vdim, bias) = "
                f"{ours}; found {theirs}"
            )
        layers = (self.query_proj, self.key_proj, self.value_proj, self.out_proj)
        if mha.in_proj_weight is not None:
            weights = mha.in_proj_weight.chunk(3)  # three (E, E) blocks: q, k, v
        else:
            weights = (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
        for layer, weight in zip(layers, (*weights, mha.out_proj.weight)):
            layer.weight.copy_(weight)
        if self.has_bias:
            biases = (*mha.in_proj_bias.chunk(3), mha.out_proj.bias)  # each (E,)
            for layer, bias in zip(layers, biases):
                layer.bias.copy_(bias)
        return self


@no_type_check  # from the per-step methods left unchecked: one isinstance, one test
def _require_float_tensor(value: object, name: str) -> None:
    if not isinstance(value, Tensor) or not value.is_floating_point():
        found = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a float tensor; found {found}")
