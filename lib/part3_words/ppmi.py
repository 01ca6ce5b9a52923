"""Count vectors: shifted positive PMI of a word-context matrix, factorised by SVD.

Levy and Goldberg (2014b, section 3.1) show that skip-gram with negative sampling,
given enough dimensions, drives each score ``u_o . v_w`` to the pointwise mutual
information of the pair shifted by ``log K``. The same corpus can be turned into such
a matrix directly, by counting:

1. :func:`cooccurrence_counts`: ``#(w, o)``, how often word ``o`` is in the window of
   word ``w``, with word2vec's shrunk windows in expectation (a context at distance
   ``d`` counts ``(m - d + 1) / m``; Levy, Goldberg and Dagan 2015, section 3.1,
   "dynamic context window");
2. :func:`pmi`: ``log(#(w, o) |D| / (#(w) #(o)))``, with the contexts' counts raised to
   a power ``alpha`` as word2vec's noise distribution does ("context distribution
   smoothing", Levy et al. 2015, section 3.2);
3. :func:`shifted_ppmi`: ``max(PMI - log k, 0)``, the sparse count-based stand-in for
   skip-gram's ``PMI - log k`` (Levy and Goldberg 2014b, section 4.1; PPMI, which sets
   ``PMI = -inf`` to 0, is their section 3.3);
4. :func:`svd_vectors`: the first ``d`` left singular vectors scaled by the singular
   values to the power ``p``, ``U_d Σ_d^p`` (Levy and Goldberg 2014b, section 4.2, use
   ``p = 0.5``; Levy et al. 2015, section 3.3, eigenvalue weighting, compare ``p = 1``,
   the textbook factorisation, with ``0.5`` and ``0``).

The matrices are sparse (``torch.sparse_coo``): a pair never seen has no entry, and its
PPMI is 0. ``V`` is the vocabulary size.

References
----------
.. [1] O. Levy, Y. Goldberg. "Neural Word Embedding as Implicit Matrix Factorization".
   NeurIPS 2014. (2014b)
.. [2] O. Levy, Y. Goldberg, I. Dagan. "Improving Distributional Similarity with
   Lessons Learned from Word Embeddings". TACL 3, 2015.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import torch
from jaxtyping import Float, Float64, Real
from torch import Tensor

from lib.checked import Fraction, Positive, PositiveInt
from lib.part3_words.word2vec import EncodedCorpus

__all__ = ["cooccurrence_counts", "pmi", "shifted_ppmi", "svd_vectors"]


def cooccurrence_counts(
    corpus: EncodedCorpus, vocab_size: PositiveInt, window: PositiveInt
) -> Float64[Tensor, "V V"]:
    """``#(w, o)`` as a sparse ``(V, V)`` float64 matrix: every pair of positions of one
    sentence at distance ``d <= window`` adds ``(window - d + 1) / window`` to
    ``(centre, context)``, the expected count under word2vec's shrunk windows."""
    if len(corpus) and int(corpus.ids.max()) >= vocab_size:
        raise ValueError(
            f"vocab_size must exceed every id of corpus ({int(corpus.ids.max())}); "
            f"found {vocab_size}"
        )
    rows, cols, weights = [], [], []
    for d in range(1, window + 1):
        left, right = corpus.ids[:-d], corpus.ids[d:]  # positions t and t + d
        same = corpus.sentence[:-d] == corpus.sentence[d:]
        weight = (window - d + 1) / window
        for centre, context in ((left, right), (right, left)):  # both directions
            rows.append(centre[same])
            cols.append(context[same])
            weights.append(torch.full((int(same.sum()),), weight, dtype=torch.float64))
    indices = torch.stack([torch.cat(rows), torch.cat(cols)])  # (2, P)
    size = (vocab_size, vocab_size)
    return torch.sparse_coo_tensor(
        indices, torch.cat(weights), size, check_invariants=False
    ).coalesce()


def _as_counts(counts: Real[Tensor, "V C"]) -> Float64[Tensor, "V C"]:
    """``counts`` as a coalesced sparse float64 matrix; a ValueError names it if it is
    not a 2-D matrix of finite counts >= 0 with at least one positive."""
    if counts.dim() != 2:
        raise ValueError(f"counts must be a (V, C) matrix; found {counts.dim()} axes")
    if counts.is_floating_point() is False and counts.dtype != torch.long:
        raise TypeError(f"counts must be float or long; found {counts.dtype}")
    sparse = (counts if counts.is_sparse else counts.to_sparse()).coalesce().double()
    values = sparse.values()
    if not torch.isfinite(values).all() or (values < 0).any():
        raise ValueError("counts must be finite and >= 0; found a negative or NaN")
    if not (values > 0).any():
        raise ValueError("counts must hold at least one positive count; found none")
    return sparse


def pmi(counts: Real[Tensor, "V C"], alpha: Positive = 1.0) -> Float64[Tensor, "V C"]:
    """The PMI of every pair seen, sparse like ``counts``: ``log(#(w, o) / (#(w)
    P_alpha(o)) )`` with ``P_alpha(o) = #(o)^alpha / Σ #(o')^alpha``; ``alpha = 1`` is
    plain PMI, ``log(#(w, o) |D| / (#(w) #(o)))``. Unseen pairs (PMI = -inf) stay out.
    """
    if not math.isfinite(alpha):
        raise ValueError(f"alpha must be finite; found {alpha}")
    sparse = _as_counts(counts)
    seen = sparse.values() > 0
    indices, values = sparse.indices()[:, seen], sparse.values()[seen]
    per_word = torch.zeros(sparse.shape[0], dtype=torch.float64)
    per_word.index_add_(0, indices[0], values)  # #(w)
    per_context = torch.zeros(sparse.shape[1], dtype=torch.float64)
    per_context.index_add_(0, indices[1], values)  # #(o)
    smoothed = per_context**alpha
    context_share = smoothed / smoothed.sum()  # P_alpha(o)
    word_total = per_word[indices[0]]  # #(w) of each entry
    scores = torch.log(values / (word_total * context_share[indices[1]]))
    return torch.sparse_coo_tensor(
        indices, scores, sparse.shape, check_invariants=False
    ).coalesce()


def shifted_ppmi(
    counts: Real[Tensor, "V C"], k: Positive = 1.0, alpha: Positive = 1.0
) -> Float64[Tensor, "V C"]:
    """``max(PMI - log k, 0)``, sparse: only the positive entries are stored."""
    if not math.isfinite(k):
        raise ValueError(f"k must be finite; found {k}")
    scores = pmi(counts, alpha)
    shifted = scores.values() - math.log(k)
    keep = shifted > 0
    indices = scores.indices()[:, keep]
    return torch.sparse_coo_tensor(
        indices, shifted[keep], scores.shape, check_invariants=False
    ).coalesce()


def svd_vectors(
    matrix: Float[Tensor, "V C"], dim: PositiveInt, p: Fraction = 0.5
) -> Float64[Tensor, "V dim"]:
    """``U_d Σ_d^p``: the ``dim`` leading left singular vectors of ``matrix`` (sparse
    or dense), scaled by their singular values to the power ``p``, largest first.
    ARPACK starts from a fixed vector, so the result is deterministic."""
    if matrix.dim() != 2:
        raise ValueError(f"matrix must be 2-D; found {matrix.dim()} axes")
    if dim >= min(matrix.shape):
        raise ValueError(
            f"dim must be below min(V, C) = {min(matrix.shape)}; found {dim}"
        )
    sparse = (matrix if matrix.is_sparse else matrix.to_sparse()).coalesce().double()
    if not torch.isfinite(sparse.values()).all():
        raise ValueError("matrix must be finite; found NaN or inf")
    if not (sparse.values() != 0).any():
        raise ValueError(
            "matrix must have a non-zero entry to factorise; found all zeros"
        )
    rows, cols = sparse.indices().numpy()
    csr = scipy.sparse.csr_matrix(
        (sparse.values().numpy(), (rows, cols)), shape=tuple(sparse.shape)
    )
    start = np.ones(min(csr.shape))  # ARPACK's v0: fixed, not random
    u, s, _ = scipy.sparse.linalg.svds(csr, k=dim, v0=start)
    order = np.argsort(-s)  # svds returns the smallest first
    u, s = torch.from_numpy(u[:, order].copy()), torch.from_numpy(s[order].copy())
    return u * s**p
