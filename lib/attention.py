"""Attention: scoring functions, softmax pooling, hard attention, multi-head attention.

The module builds attention from its parts, in the order the chapters teach it
(syllabus ATT2-ATT7):

1. *Scoring functions* compare every query with every key and return a score
   matrix ``(B, T, S)``: additive (Bahdanau et al., 2015), dot-product and
   bilinear "general" (Luong et al., 2015) and scaled dot-product
   (Vaswani et al., 2017).
2. :func:`masked_softmax` turns scores into weights while ignoring padded keys.
3. :func:`attention` pools values with those weights (soft attention). With
   ``values = keys`` it is the plain ``att(X, q) = sum_i alpha_i x_i``.
4. :func:`hard_attention` selects a single value instead of averaging
   (Xu et al., 2015).
5. :func:`scaled_dot_product_attention` and :class:`MultiHeadAttention` are the
   Transformer building blocks (Vaswani et al., 2017). The tests check them
   against PyTorch's own implementations.

Conventions: every tensor is batch-first. ``B`` is the batch size, ``T`` the
number of queries, ``S`` the number of keys and values, ``D`` a feature size,
``H`` the number of heads. Every function returns its attention weights
together with its output, so the weights can be inspected and plotted. A
caller that does not read them passes ``need_weights=False`` (torch's name) to
:func:`scaled_dot_product_attention` or :class:`MultiHeadAttention`: the output
then comes from :func:`torch.nn.functional.scaled_dot_product_attention`. For
four-axis inputs ``(B, H, T, D)`` whose values have the key size, as
:class:`MultiHeadAttention` passes them, torch's CPU kernel implements the
FlashAttention algorithm (Dao et al., 2022): it computes the softmax block by
block and never stores the ``(T, S)`` weights. Other shapes go to torch's plain
kernel, which does. The tests hold both to the written-out path.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate". ICLR 2015. arXiv:1409.0473.
.. [2] M.-T. Luong, H. Pham, C. D. Manning. "Effective Approaches to
   Attention-based Neural Machine Translation". EMNLP 2015. arXiv:1508.04025.
.. [3] K. Xu, J. Ba, R. Kiros, K. Cho, A. Courville, R. Salakhutdinov,
   R. Zemel, Y. Bengio. "Show, Attend and Tell: Neural Image Caption
   Generation with Visual Attention". ICML 2015. arXiv:1502.03044.
.. [4] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
.. [5] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Ré. "FlashAttention: Fast and
   Memory-Efficient Exact Attention with IO-Awareness". NeurIPS 2022.
   arXiv:2205.14135.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.validation import (
    check_module_dtype,
    require_choice,
    require_float_tensor,
    require_float_tensors,
    require_instance,
    require_int,
    require_same_dtype,
)

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

ScoreFunction = Callable[[Tensor, Tensor], Tensor]

SCORE_NAMES = ("additive", "dot", "scaled_dot", "bilinear")

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _shape(tensor: Tensor) -> tuple:
    return tuple(tensor.shape)


def _check_queries_and_keys(queries: Tensor, keys: Tensor) -> None:
    require_float_tensor("queries", queries)
    require_float_tensor("keys", keys)
    if queries.dim() != 3:
        raise ValueError(f"queries must have shape (B, T, Dq); found {_shape(queries)}")
    if keys.dim() != 3 or keys.shape[0] != queries.shape[0]:
        raise ValueError(
            f"keys must have shape (B, S, Dk) with the batch size of queries (B, T, Dq) = "
            f"{_shape(queries)}; found {_shape(keys)}"
        )
    require_same_dtype("queries", queries, keys=keys)


def _check_feature_size(name: str, tensor: Tensor, layout: str, expected: int) -> None:
    if tensor.shape[-1] != expected:
        raise ValueError(
            f"{name} must have shape {layout} with last dimension {expected}; "
            f"found {_shape(tensor)}"
        )


def _check_bool_mask(mask: object, target_shape: tuple, layout: str) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        found = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"mask must be a torch.bool tensor (True = may attend); found {found}")
    try:
        broadcast = tuple(torch.broadcast_shapes(mask.shape, target_shape))
    except RuntimeError:
        broadcast = None
    if broadcast != tuple(target_shape):
        raise ValueError(
            f"mask must be broadcastable to {layout} = {tuple(target_shape)}; found {_shape(mask)}"
        )
    return mask


def _check_scores(scores: object) -> None:
    require_float_tensor("scores", scores)
    if scores.dim() < 2:
        raise ValueError(
            f"scores must have shape (..., Q, K) with at least 2 dimensions; found {_shape(scores)}"
        )
    if scores.shape[-1] == 0:
        raise ValueError(f"scores must have at least one key (K >= 1); found shape {_shape(scores)}")


def _check_qkv(q: object, k: object, v: object) -> None:
    require_float_tensors(q=q, k=k, v=v)
    require_same_dtype("q", q, k=k, v=v)
    if q.dim() < 3:
        raise ValueError(f"q must have shape (B, T, D) or (B, ..., T, D); found {_shape(q)}")
    leading = _shape(q)[:-2]
    if k.dim() != q.dim() or _shape(k)[:-2] != leading or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k must have shape (..., S, D) matching q (..., T, D) = {_shape(q)}; found {_shape(k)}"
        )
    if v.dim() != q.dim() or _shape(v)[:-2] != leading or v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v must have shape (..., S, Dv) matching k (..., S, D) = {_shape(k)}; found {_shape(v)}"
        )


# ---------------------------------------------------------------------------
# Scoring functions: (B, T, Dq) queries x (B, S, Dk) keys -> (B, T, S) scores.
# ---------------------------------------------------------------------------


class AdditiveScore(nn.Module):
    r"""Additive score of Bahdanau et al. (2015): :math:`v^\top \tanh(W_q q + W_k k)`.

    A one-hidden-layer network scores each (query, key) pair, so queries and
    keys may have different sizes. There are no bias terms, as in the paper.

    Parameters
    ----------
    query_dim : int
        Size ``Dq`` of each query.
    key_dim : int
        Size ``Dk`` of each key.
    hidden_dim : int
        Width of the hidden layer (rows of ``W_q`` and ``W_k``, length of ``v``).

    Returns
    -------
    Tensor
        ``forward(queries, keys)`` returns the scores.

    Shapes
    ------
    queries : (B, T, Dq)
    keys : (B, S, Dk)
    output : (B, T, S)
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        for name, value in (("query_dim", query_dim), ("key_dim", key_dim), ("hidden_dim", hidden_dim)):
            require_int(name, value, 1)
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W_q
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=False)  # W_k
        self.score_proj = nn.Linear(hidden_dim, 1, bias=False)  # v

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        _check_queries_and_keys(queries, keys)
        _check_feature_size("queries", queries, "(B, T, Dq)", self.query_dim)
        _check_feature_size("keys", keys, "(B, S, Dk)", self.key_dim)
        check_module_dtype("queries", queries, self)
        # Broadcasting pairs every query with every key without a Python loop.
        projected_queries = self.query_proj(queries).unsqueeze(2)  # (B, T, 1, hidden)
        projected_keys = self.key_proj(keys).unsqueeze(1)  # (B, 1, S, hidden)
        features = torch.tanh(projected_queries + projected_keys)  # (B, T, S, hidden)
        return self.score_proj(features).squeeze(-1)  # (B, T, S)


class DotScore(nn.Module):
    r"""Dot-product score of Luong et al. (2015): :math:`q^\top k`.

    It has no parameters, so queries and keys must have the same size ``D``.

    Returns
    -------
    Tensor
        ``forward(queries, keys)`` returns the scores.

    Shapes
    ------
    queries : (B, T, D)
    keys : (B, S, D)
    output : (B, T, S)
    """

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        _check_queries_and_keys(queries, keys)
        _check_feature_size("keys", keys, "(B, S, D) matching queries (B, T, D)", queries.shape[-1])
        return queries @ keys.transpose(1, 2)  # (B, T, S)


def _scaled_dot_scores(queries: Tensor, keys: Tensor) -> Tensor:
    """Return ``q k^T / sqrt(D)`` over the last two axes; shapes are checked by the caller."""
    # Scaling the queries (T x D numbers) is cheaper than scaling the scores (T x S).
    return (queries / math.sqrt(queries.shape[-1])) @ keys.transpose(-2, -1)  # (..., T, S)


class ScaledDotScore(nn.Module):
    r"""Scaled dot-product score of Vaswani et al. (2017): :math:`q^\top k / \sqrt{d}`.

    Why :math:`\sqrt{d}`: if the entries of ``q`` and ``k`` are independent
    with mean 0 and variance 1, then :math:`q^\top k = \sum_{i=1}^d q_i k_i` is a
    sum of ``d`` independent terms, each with mean 0 and variance
    :math:`E[q_i^2] E[k_i^2] = 1`, so :math:`\mathrm{Var}(q^\top k) = d`.
    Dividing by :math:`\sqrt{d}` brings the variance back to 1 whatever the
    size. Without it, large ``d`` gives large scores, the softmax saturates
    towards one-hot, and its gradients vanish.

    Returns
    -------
    Tensor
        ``forward(queries, keys)`` returns the scores.

    Shapes
    ------
    queries : (B, T, D)
    keys : (B, S, D)
    output : (B, T, S)
    """

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        _check_queries_and_keys(queries, keys)
        _check_feature_size("keys", keys, "(B, S, D) matching queries (B, T, D)", queries.shape[-1])
        return _scaled_dot_scores(queries, keys)  # (B, T, S)


class BilinearScore(nn.Module):
    r"""Bilinear ("general") score of Luong et al. (2015): :math:`q^\top W k`.

    With ``rank=r`` the matrix is factorised as :math:`W = U^\top V` and the
    score is computed as :math:`(U q)^\top (V k)`. Here ``U`` is ``r x Dq``
    (``self.query_factor.weight``) and ``V`` is ``r x Dk``
    (``self.key_factor.weight``). This uses ``r (Dq + Dk)`` parameters instead
    of ``Dq Dk``, and ``W`` has rank at most ``r``.

    Parameters
    ----------
    query_dim : int
        Size ``Dq`` of each query.
    key_dim : int
        Size ``Dk`` of each key.
    rank : int, optional
        If given, use the factorised form with this inner size ``r``.
        Otherwise learn the full ``Dq x Dk`` matrix ``self.weight``.

    Returns
    -------
    Tensor
        ``forward(queries, keys)`` returns the scores.

    Shapes
    ------
    queries : (B, T, Dq)
    keys : (B, S, Dk)
    weight : (Dq, Dk) when ``rank`` is None
    query_factor.weight, key_factor.weight : (r, Dq), (r, Dk) when ``rank=r``
    output : (B, T, S)
    """

    def __init__(self, query_dim: int, key_dim: int, rank: Optional[int] = None):
        super().__init__()
        require_int("query_dim", query_dim, 1)
        require_int("key_dim", key_dim, 1)
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.rank = rank
        if rank is None:
            self.weight = nn.Parameter(torch.empty(query_dim, key_dim))  # W
            nn.init.xavier_uniform_(self.weight)
        else:
            require_int("rank", rank, 1)
            self.query_factor = nn.Linear(query_dim, rank, bias=False)  # U
            self.key_factor = nn.Linear(key_dim, rank, bias=False)  # V

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        _check_queries_and_keys(queries, keys)
        _check_feature_size("queries", queries, "(B, T, Dq)", self.query_dim)
        _check_feature_size("keys", keys, "(B, S, Dk)", self.key_dim)
        check_module_dtype("queries", queries, self)
        if self.rank is None:
            return (queries @ self.weight) @ keys.transpose(1, 2)  # (B, T, Dk) -> (B, T, S)
        # Projecting both sides to r dimensions first never builds the Dq x Dk matrix.
        return self.query_factor(queries) @ self.key_factor(keys).transpose(1, 2)  # (B, T, S)


def make_score(
    name: str,
    query_dim: int,
    key_dim: int,
    hidden_dim: Optional[int] = None,
    rank: Optional[int] = None,
) -> nn.Module:
    """Build a scoring module from its name.

    Parameters
    ----------
    name : {"additive", "dot", "scaled_dot", "bilinear"}
        Which score to build.
    query_dim, key_dim : int
        Sizes ``Dq`` and ``Dk`` of queries and keys. ``"dot"`` and
        ``"scaled_dot"`` need them to be equal.
    hidden_dim : int, optional
        Hidden width. Required by ``"additive"`` and ignored by the other scores.
    rank : int, optional
        Factorisation rank, used by ``"bilinear"`` and ignored by the other
        scores. If None, ``"bilinear"`` learns the full matrix.

    Returns
    -------
    nn.Module
        One of :class:`AdditiveScore`, :class:`DotScore`,
        :class:`ScaledDotScore`, :class:`BilinearScore`.

    Shapes
    ------
    The returned module maps queries ``(B, T, Dq)`` and keys ``(B, S, Dk)`` to
    scores ``(B, T, S)``.
    """
    if name not in SCORE_NAMES:
        raise ValueError(f"score name must be one of {', '.join(map(repr, SCORE_NAMES))}; found {name!r}")
    if name == "additive":
        if hidden_dim is None:
            raise ValueError("the 'additive' score needs hidden_dim (an int > 0); found None")
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


def _keep_from_valid_lens(valid_lens: object, scores_shape: tuple) -> Tensor:
    """Return a boolean mask, True where the key position is below the valid length.

    The mask broadcasts against ``scores_shape = (B, ..., Q, K)``.
    """
    if not isinstance(valid_lens, Tensor):
        raise TypeError(f"valid_lens must be an integer torch.Tensor; found {type(valid_lens).__name__}")
    if valid_lens.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"valid_lens must have an integer dtype (e.g. torch.long); found {valid_lens.dtype}")
    batch, num_queries, num_keys = scores_shape[0], scores_shape[-2], scores_shape[-1]
    ndim = len(scores_shape)
    if _shape(valid_lens) == (batch,):
        # Every query of a batch element shares one length.
        lens = valid_lens.reshape(batch, *([1] * (ndim - 1)))  # (B, 1, ..., 1)
    elif ndim >= 3 and _shape(valid_lens) == (batch, num_queries):
        lens = valid_lens.reshape(batch, *([1] * (ndim - 3)), num_queries, 1)  # (B, 1, ..., Q, 1)
    else:
        raise ValueError(
            f"valid_lens must have shape (B,) = ({batch},) or (B, Q) = ({batch}, {num_queries}) "
            f"for scores of shape {tuple(scores_shape)}; found {_shape(valid_lens)}"
        )
    if valid_lens.numel() and int(valid_lens.min()) < 0:
        raise ValueError(f"valid_lens must be >= 0; found minimum {int(valid_lens.min())}")
    if valid_lens.numel() and int(valid_lens.max()) > num_keys:
        raise ValueError(
            f"valid_lens must be <= the number of keys K = {num_keys}; found maximum {int(valid_lens.max())}"
        )
    positions = torch.arange(num_keys, device=valid_lens.device)  # (K,)
    return positions < lens  # (B, 1, ..., 1 or Q, K)


def _softmax_over_kept(scores: Tensor, keep: Optional[Tensor]) -> Tensor:
    """Softmax over the last axis, using only the positions where ``keep`` is True.

    Positions that are not kept, and -inf scores, get weight exactly 0. A row
    with nothing left gets all-zero weights instead of the NaN of 0/0.

    The fast path is PyTorch's fused softmax. It returns NaN exactly when some row
    has NaN or +inf, or has nothing to attend to; only then does the written-out
    :func:`_softmax_reference` run, to raise the error or give that row zeros.
    """
    masked = scores if keep is None else scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    # One reduction and one sync: a NaN anywhere makes the total NaN.
    if not bool(torch.isnan(weights.sum())):
        return weights
    return _softmax_reference(masked)


def _softmax_reference(masked: Tensor) -> Tensor:
    """The softmax written out, for scores already masked with -inf (the tests hold the fast path to it)."""
    if bool((torch.isnan(masked) | (masked == float("inf"))).any()):
        raise ValueError("scores must be finite or -inf at attended positions; found NaN or +inf")
    # Subtracting the row maximum prevents exp() from overflowing (exp(1e4) = inf).
    # The shift cancels in the ratio, so no gradient needs to flow through it.
    row_max = masked.detach().amax(dim=-1, keepdim=True)  # (..., Q, 1)
    # In a row with nothing to attend to the maximum is -inf, and -inf - (-inf) is NaN, so shift by 0 there.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exponentials = torch.exp(masked - row_max)  # (..., Q, K); exactly 0 at masked positions
    totals = exponentials.sum(dim=-1, keepdim=True)  # (..., Q, 1); >= 1 unless the row is empty
    # An empty row has total 0 and all-zero exponentials. Dividing it by 1 keeps it at zero.
    return exponentials / torch.where(totals > 0, totals, torch.ones_like(totals))


def masked_softmax(scores: Tensor, valid_lens: Optional[Tensor] = None) -> Tensor:
    """Softmax over the last axis that ignores keys beyond each row's valid length.

    Parameters
    ----------
    scores : Tensor
        Float scores. ``-inf`` entries are allowed and get weight 0. NaN or
        ``+inf`` at an attended position raises ``ValueError``.
    valid_lens : Tensor, optional
        Integer tensor with ``0 <= valid_lens <= K``. Shape ``(B,)`` gives one
        length per batch element, shared by every query row. Shape ``(B, Q)``
        gives one length per query row. ``B`` is ``scores.shape[0]``. Key
        positions ``>= valid_len`` get weight exactly 0. If None, every key is
        valid and the result equals ``torch.softmax(scores, -1)``.

    Returns
    -------
    Tensor
        Weights with the shape and dtype of ``scores``. Each row sums to 1.
        A row with valid length 0 (or only ``-inf`` scores) is all zeros,
        never NaN. The row maximum is subtracted before ``exp``, so scores of
        size ``1e4`` do not overflow.

    Shapes
    ------
    scores : (..., Q, K), with the batch axis B first
    valid_lens : (B,) or (B, Q)
    output : (..., Q, K)
    """
    _check_scores(scores)
    keep = None if valid_lens is None else _keep_from_valid_lens(valid_lens, _shape(scores))
    return _softmax_over_kept(scores, keep)


# ---------------------------------------------------------------------------
# Soft and hard attention pooling with a pluggable score.
# ---------------------------------------------------------------------------


def _attention_distribution(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    score: ScoreFunction,
    valid_lens: Optional[Tensor],
    temperature: float,
) -> Tensor:
    """Check the inputs and return softmax(score(q, k) / temperature) of shape (B, T, S)."""
    _check_queries_and_keys(queries, keys)
    require_float_tensor("values", values)
    if values.dim() != 3 or values.shape[:2] != keys.shape[:2]:
        raise ValueError(
            f"values must have shape (B, S, Dv) matching keys (B, S, Dk) = {_shape(keys)}; "
            f"found {_shape(values)}"
        )
    require_same_dtype("queries", queries, values=values)
    if not callable(score):
        raise TypeError(
            "score must be a score module or a callable (queries, keys) -> scores; "
            f"found {type(score).__name__}"
        )
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number; found {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0; found {temperature}")
    scores = score(queries, keys)
    expected = (queries.shape[0], queries.shape[1], keys.shape[1])
    if not isinstance(scores, Tensor) or _shape(scores) != expected:
        found = _shape(scores) if isinstance(scores, Tensor) else type(scores).__name__
        raise ValueError(f"score(queries, keys) must return shape (B, T, S) = {expected}; found {found}")
    return masked_softmax(scores / temperature, valid_lens)  # (B, T, S)


def attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    score: ScoreFunction,
    valid_lens: Optional[Tensor] = None,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    r"""Soft attention pooling: each query's output is a weighted average of the values.

    .. math:: \alpha = \mathrm{softmax}(\mathrm{score}(q, k_{1..S}) / \tau), \qquad
              \mathrm{out}(q) = \sum_i \alpha_i v_i

    With ``values = keys = X`` this is the plain pooling
    :math:`\mathrm{att}(X, q) = \sum_i \alpha_i x_i`.

    Parameters
    ----------
    queries : Tensor
        Float queries.
    keys : Tensor
        Keys, with the dtype of ``queries``.
    values : Tensor
        Values, one per key, with the dtype of ``queries``.
    score : callable
        One of the score modules (for example :class:`ScaledDotScore`), or any
        callable mapping ``(queries, keys)`` to scores ``(B, T, S)``.
    valid_lens : Tensor, optional
        Number of valid keys, as in :func:`masked_softmax`.
    temperature : float, default 1.0
        ``tau > 0``. The scores are divided by it. Small values sharpen the
        weights towards the arg-max, large values flatten them towards uniform.

    Returns
    -------
    output : Tensor
        Attention-weighted averages of the values.
    weights : Tensor
        The attention weights. Each row sums to 1, except rows with valid
        length 0, which are all zeros (and so is their output).

    Shapes
    ------
    queries : (B, T, Dq)
    keys : (B, S, Dk)
    values : (B, S, Dv)
    valid_lens : (B,) or (B, T)
    output : (B, T, Dv)
    weights : (B, T, S)
    """
    weights = _attention_distribution(queries, keys, values, score, valid_lens, temperature)  # (B, T, S)
    return weights @ values, weights  # (B, T, Dv), (B, T, S)


def hard_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    score: ScoreFunction,
    mode: str = "argmax",
    valid_lens: Optional[Tensor] = None,
    generator: Optional[torch.Generator] = None,
) -> tuple[Tensor, Tensor]:
    """Hard attention (Xu et al., 2015): each query returns exactly one value.

    The attention distribution is computed as in :func:`attention`. Then one
    key index is chosen per query: the most likely one (``mode="argmax"``;
    ties go to the lowest index), or one sampled from the distribution with
    :func:`torch.multinomial` (``mode="sample"``).

    This is not differentiable with respect to the queries, keys or score
    parameters. The chosen index is a piecewise-constant function of the
    scores: its derivative is zero almost everywhere and undefined where two
    scores tie. So no gradient flows back through the selection. The returned
    weights are constant one-hot tensors, and only ``values`` receive a
    gradient (through the selected row). Xu et al. train hard attention with
    a REINFORCE-style Monte Carlo estimator instead of backpropagation.

    Parameters
    ----------
    queries, keys, values, score, valid_lens
        As in :func:`attention`.
    mode : {"argmax", "sample"}, default "argmax"
        How the index is chosen.
    generator : torch.Generator, optional
        Random source for ``mode="sample"``; pass a seeded one for
        reproducible draws. Ignored when ``mode="argmax"``.

    Returns
    -------
    output : Tensor
        The selected value row for each query (zeros for rows with valid
        length 0).
    weights : Tensor
        One-hot weights marking the selected key (all zeros for rows with
        valid length 0).

    Shapes
    ------
    queries : (B, T, Dq)
    keys : (B, S, Dk)
    values : (B, S, Dv)
    output : (B, T, Dv)
    weights : (B, T, S)
    """
    require_choice("mode", mode, ("argmax", "sample"))
    probabilities = _attention_distribution(queries, keys, values, score, valid_lens, 1.0)  # (B, T, S)
    batch, num_queries, num_keys = probabilities.shape
    has_valid_key = probabilities.sum(dim=-1, keepdim=True) > 0  # (B, T, 1)
    if mode == "argmax":
        index = probabilities.argmax(dim=-1)  # (B, T)
    else:
        # multinomial rejects all-zero rows. Give empty rows a dummy uniform row; they are zeroed below.
        sampling = torch.where(has_valid_key, probabilities, torch.ones_like(probabilities)).detach()
        flat = sampling.reshape(batch * num_queries, num_keys)  # (B*T, S)
        index = torch.multinomial(flat, 1, generator=generator).reshape(batch, num_queries)  # (B, T)
    weights = F.one_hot(index, num_keys).to(probabilities.dtype) * has_valid_key  # (B, T, S)
    return weights @ values, weights  # (B, T, Dv), (B, T, S)


# ---------------------------------------------------------------------------
# Transformer attention.
# ---------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, need_weights: bool = True
) -> tuple[Tensor, Optional[Tensor]]:
    r"""Scaled dot-product attention of Vaswani et al. (2017).

    .. math:: \mathrm{softmax}\!\left(\frac{q k^\top}{\sqrt{D}}\right) v

    Computes the same output as :func:`torch.nn.functional.scaled_dot_product_attention`
    (without dropout), and also returns the weights. See :class:`ScaledDotScore` for
    why the scores are divided by :math:`\sqrt{D}`.

    Parameters
    ----------
    q : Tensor
        Float queries. Any number of leading dimensions (batch, heads, ...) is
        allowed, and ``k``, ``v`` must have the same leading dimensions.
    k : Tensor
        Keys, with the dtype of ``q``.
    v : Tensor
        Values, with the dtype of ``q``.
    mask : Tensor, optional
        Boolean, broadcastable to ``(..., T, S)``. **True means the query may
        attend to the key**, the convention of
        :func:`torch.nn.functional.scaled_dot_product_attention`. (It is the
        opposite of ``key_padding_mask`` and ``attn_mask`` in
        :class:`torch.nn.MultiheadAttention`, where True means masked.) A
        query row with no True entry gets zero weights and a zero output.
    need_weights : bool, default True
        If False, the weights are not computed and None is returned in their
        place: the output comes from torch's
        :func:`~torch.nn.functional.scaled_dot_product_attention` (for
        ``(B, H, T, D)`` inputs with ``Dv = D`` its FlashAttention kernel, which
        never stores the ``(..., T, S)`` weights). Masks, fully masked rows and
        bad scores behave as on the written-out path, which still answers
        whenever torch's output has a NaN.

    Returns
    -------
    output : Tensor
        Weighted averages of the value rows.
    weights : Tensor or None
        Attention weights; each row sums to 1 (or is all zeros if fully
        masked). None when ``need_weights`` is False.

    Shapes
    ------
    q : (B, T, D) or (B, H, T, D), generally (..., T, D)
    k : (..., S, D)
    v : (..., S, Dv)
    mask : broadcastable to (..., T, S)
    output : (..., T, Dv)
    weights : (..., T, S), or None if not ``need_weights``
    """
    _check_qkv(q, k, v)
    require_instance("need_weights", need_weights, bool)
    scores_shape = (*q.shape[:-1], k.shape[-2])  # (..., T, S)
    keep = None if mask is None else _check_bool_mask(mask, scores_shape, "(..., T, S)")
    if not need_weights:
        output = _fused_attention(q, k, v, keep)  # (..., T, Dv), or None if torch's output has a NaN anywhere
        if output is not None:
            return output, None
    scores = _scaled_dot_scores(q, k)  # (..., T, S)
    weights = _softmax_over_kept(scores, keep)  # (..., T, S)
    return weights @ v, (weights if need_weights else None)  # (..., T, Dv), (..., T, S) or None


def _fused_attention(q: Tensor, k: Tensor, v: Tensor, keep: Optional[Tensor]) -> Optional[Tensor]:
    """The output of :func:`scaled_dot_product_attention` from torch's fused kernel, or None.

    :func:`torch.nn.functional.scaled_dot_product_attention` takes the same
    boolean mask (True = may attend) and the same ``1 / sqrt(D)`` scale. Its
    output has a NaN wherever the written-out path raises (NaN or ``+inf``
    scores at an attended position) or may answer otherwise (NaN scores at
    masked positions, which that path ignores; rows with nothing to attend to,
    in torch versions that give them NaN). So a NaN, found by one reduction,
    makes the answer None: the caller then runs the written-out path, which
    raises or gives its own output. Inputs are checked by the caller.

    Shapes
    ------
    q : (..., T, D); k : (..., S, D); v : (..., S, Dv)
    keep : broadcastable to (..., T, S)
    output : (..., T, Dv)
    """
    # torch wants a mask of at least 2 dimensions: (S,) becomes (1, S), () becomes (1, 1).
    attn_mask = None if keep is None else torch.atleast_2d(keep)  # (..., T or 1, S or 1)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (..., T, Dv)
    # One reduction and one sync: a NaN anywhere makes the total NaN.
    return None if bool(torch.isnan(output.sum())) else output


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention of Vaswani et al. (2017), batch-first.

    .. math:: \mathrm{MHA}(Q, K, V) = \mathrm{concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W_o,
              \qquad \mathrm{head}_h = \mathrm{attention}(Q W_q^{(h)}, K W_k^{(h)}, V W_v^{(h)})

    Each projection is one ``E x E`` linear layer. Its output is split into
    ``H`` heads of size ``E / H``, so all heads cost about as much as one
    full-size head. The heads run in parallel through
    :func:`scaled_dot_product_attention`.

    The math and the parameters are those of :class:`torch.nn.MultiheadAttention`,
    and :meth:`from_torch` copies that module's weights. There is no dropout:
    the module is meant to be read and inspected. A copied torch module gives
    the same results when its dropout is 0 or it is in eval mode.
    ``add_bias_kv`` and ``add_zero_attn`` are not supported.

    Parameters
    ----------
    embed_dim : int
        Model size ``E`` of queries and outputs. It must be divisible by ``num_heads``.
    num_heads : int
        Number of heads ``H``; each head has size ``E / H``.
    bias : bool, default True
        Whether the four projections have bias terms.
    kdim, vdim : int, optional
        Sizes ``Ek``, ``Ev`` of keys and values; default ``embed_dim``.

    Returns
    -------
    tuple of Tensor
        Calling the module returns ``(output, weights)``; see :meth:`forward`.
        With ``need_weights=False`` the weights are None.

    Shapes
    ------
    query : (B, T, E)
    key : (B, S, Ek)
    value : (B, S, Ev)
    mask : boolean, broadcastable to (B, T, S); True = may attend
    valid_lens : (B,) or (B, T) valid key counts, as in :func:`masked_softmax`
    output : (B, T, E)
    weights : (B, T, S) if ``average_weights`` else (B, H, T, S); None if not ``need_weights``
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
    ):
        super().__init__()
        require_int("embed_dim", embed_dim, 1)
        require_int("num_heads", num_heads, 1)
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim must be divisible by num_heads; found embed_dim={embed_dim}, "
                f"num_heads={num_heads} (remainder {embed_dim % num_heads})"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        require_int("kdim", self.kdim, 1)
        require_int("vdim", self.vdim, 1)
        self.has_bias = bias
        self.query_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W_q
        self.key_proj = nn.Linear(self.kdim, embed_dim, bias=bias)  # W_k
        self.value_proj = nn.Linear(self.vdim, embed_dim, bias=bias)  # W_v
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W_o

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Optional[Tensor] = None,
        valid_lens: Optional[Tensor] = None,
        average_weights: bool = True,
        need_weights: bool = True,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Attend from ``query`` to ``key``/``value`` with all heads at once.

        Parameters
        ----------
        query, key, value : Tensor
            Float inputs, with the dtype of the module's parameters.
        mask : Tensor, optional
            Boolean, True = may attend. Broadcastable to ``(B, T, S)``.
        valid_lens : Tensor, optional
            Integer number of valid keys per batch element ``(B,)`` or per
            query ``(B, T)``. It is combined with ``mask`` by logical AND.
        average_weights : bool, default True
            If True, return weights averaged over heads (like
            ``average_attn_weights=True`` in torch). Otherwise return the
            weights of each head.
        need_weights : bool, default True
            If False, return None instead of the weights and let torch's fused
            kernel attend (see :func:`scaled_dot_product_attention`), as
            ``need_weights=False`` does in torch.

        Returns
        -------
        output : Tensor
            The output projection applied to the concatenated heads.
        weights : Tensor or None
            Attention weights. Fully masked rows are zeros, and so are their
            head outputs before the output projection.

        Shapes
        ------
        query : (B, T, E)
        key : (B, S, Ek)
        value : (B, S, Ev)
        output : (B, T, E)
        weights : (B, T, S) if ``average_weights`` else (B, H, T, S); None if not ``need_weights``
        """
        batch, num_queries, num_keys = self._check_inputs(query, key, value)
        scores_shape = (batch, num_queries, num_keys)
        keep = None  # (B, T, S) once a mask or valid_lens is given
        if mask is not None:
            keep = _check_bool_mask(mask, scores_shape, "(B, T, S)").broadcast_to(scores_shape)
        if valid_lens is not None:
            within_length = _keep_from_valid_lens(valid_lens, scores_shape).broadcast_to(scores_shape)
            keep = within_length if keep is None else keep & within_length
        # One mask for every head: insert a singleton head axis.
        head_mask = None if keep is None else keep.unsqueeze(1)  # (B, 1, T, S)

        q = self.split_heads(self.query_proj(query))  # (B, H, T, Dh)
        k = self.split_heads(self.key_proj(key))  # (B, H, S, Dh)
        v = self.split_heads(self.value_proj(value))  # (B, H, S, Dh)
        # (B, H, T, Dh), (B, H, T, S) or None
        heads, weights = scaled_dot_product_attention(q, k, v, mask=head_mask, need_weights=need_weights)
        output = self.out_proj(self.merge_heads(heads))  # (B, T, E)
        if average_weights and weights is not None:
            weights = weights.mean(dim=1)  # (B, T, S)
        return output, weights

    def split_heads(self, projected: Tensor) -> Tensor:
        """A projection ``(B, L, E)`` as ``H`` heads ``(B, H, L, Dh)``, each its own slice of ``E``."""
        batch, length, _ = projected.shape
        per_head = projected.reshape(batch, length, self.num_heads, self.head_dim)  # (B, L, H, Dh)
        return per_head.transpose(1, 2)  # (B, H, L, Dh)

    def merge_heads(self, heads: Tensor) -> Tensor:
        """The heads ``(B, H, L, Dh)`` side by side ``(B, L, E)``, as the output projection reads them."""
        batch, _, length, _ = heads.shape
        return heads.transpose(1, 2).reshape(batch, length, self.embed_dim)  # (B, L, H, Dh) -> (B, L, E)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[int, int, int]:
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            require_float_tensor(name, tensor)
            check_module_dtype(name, tensor, self)
        if query.dim() != 3 or query.shape[-1] != self.embed_dim:
            raise ValueError(
                f"query must have shape (B, T, E) with E = embed_dim = {self.embed_dim}; found {_shape(query)}"
            )
        batch = query.shape[0]
        if key.dim() != 3 or key.shape[0] != batch or key.shape[-1] != self.kdim:
            raise ValueError(
                f"key must have shape (B, S, Ek) with B = {batch} and Ek = kdim = {self.kdim}; "
                f"found {_shape(key)}"
            )
        if value.dim() != 3 or value.shape[:2] != key.shape[:2] or value.shape[-1] != self.vdim:
            raise ValueError(
                f"value must have shape (B, S, Ev) = ({batch}, {key.shape[1]}, {self.vdim}) "
                f"to match key {_shape(key)} and vdim = {self.vdim}; found {_shape(value)}"
            )
        return batch, query.shape[1], key.shape[1]

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Build a module with the same configuration and weights as a torch one.

        Our module is always batch-first. ``mha.batch_first`` only changes how
        torch lays out its inputs, not its weights, so either setting works.

        Parameters
        ----------
        mha : torch.nn.MultiheadAttention
            Source module, without ``add_bias_kv`` or ``add_zero_attn``.

        Returns
        -------
        MultiHeadAttention
            A new module on the device and with the dtype of ``mha``.

        Shapes
        ------
        The new module has ``embed_dim``, ``num_heads``, ``kdim`` and ``vdim``
        equal to those of ``mha``.
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention; found {type(mha).__name__}")
        module = cls(
            mha.embed_dim,
            mha.num_heads,
            bias=mha.in_proj_bias is not None,
            kdim=mha.kdim,
            vdim=mha.vdim,
        )
        reference = mha.out_proj.weight
        module.to(device=reference.device, dtype=reference.dtype)
        return module.load_torch_weights(mha)

    @torch.no_grad()
    def load_torch_weights(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a :class:`torch.nn.MultiheadAttention` into this module, in place.

        Torch keeps the three input projections either packed in one
        ``in_proj_weight`` of shape ``(3E, E)`` (when ``kdim = vdim = E``) or
        separately as ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``.
        Both layouts are handled. The biases are always packed in
        ``in_proj_bias``.

        Parameters
        ----------
        mha : torch.nn.MultiheadAttention
            Source module. It must have this module's ``embed_dim``,
            ``num_heads``, ``kdim``, ``vdim`` and ``bias``.

        Returns
        -------
        MultiHeadAttention
            ``self``, for chaining.

        Shapes
        ------
        in_proj_weight : (3E, E), split into three (E, E) blocks in q, k, v order
        q/k/v_proj_weight : (E, E), (E, Ek), (E, Ev)
        in_proj_bias : (3E,), split into three (E,) blocks
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention; found {type(mha).__name__}")
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                "torch modules with add_bias_kv=True or add_zero_attn=True are not supported; "
                f"found add_bias_kv={mha.bias_k is not None}, add_zero_attn={mha.add_zero_attn}"
            )
        expected = (self.embed_dim, self.num_heads, self.kdim, self.vdim, self.has_bias)
        found = (mha.embed_dim, mha.num_heads, mha.kdim, mha.vdim, mha.in_proj_bias is not None)
        if found != expected:
            raise ValueError(
                f"torch module must have (embed_dim, num_heads, kdim, vdim, bias) = {expected}; found {found}"
            )
        if mha.in_proj_weight is not None:
            query_weight, key_weight, value_weight = mha.in_proj_weight.chunk(3)  # each (E, E)
        else:
            query_weight, key_weight, value_weight = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        self.query_proj.weight.copy_(query_weight)
        self.key_proj.weight.copy_(key_weight)
        self.value_proj.weight.copy_(value_weight)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if self.has_bias:
            query_bias, key_bias, value_bias = mha.in_proj_bias.chunk(3)  # each (E,)
            self.query_proj.bias.copy_(query_bias)
            self.key_proj.bias.copy_(key_bias)
            self.value_proj.bias.copy_(value_bias)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self
