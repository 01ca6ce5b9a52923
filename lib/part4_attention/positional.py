"""Sinusoidal positional encodings and the rotation that shifts them (chapter 11).

Self-attention treats its input as a set, so Vaswani et al. (2017) add to each token
embedding the sines and cosines of its position; a shift is one fixed rotation, so a
linear layer can learn to attend a fixed distance away. ``T`` positions (rows), ``D``
the model size (even).

References: A. Vaswani et al. "Attention Is All You Need". NeurIPS 2017.
arXiv:1706.03762.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from lib.checked import AnyInt, FloatDtype, PositiveInt

__all__ = ["positional_encoding", "offset_rotation"]


def _frequencies(d_model: PositiveInt, dtype: FloatDtype) -> Float[Tensor, "pairs"]:
    """The angular frequencies ``w_i = 10000^(-2i / D)``, ``i = 0 .. D/2 - 1``."""
    if d_model % 2:
        raise ValueError(
            f"d_model must be even (sines and cosines come in pairs); found {d_model}"
        )
    two_i = torch.arange(0, d_model, 2, dtype=dtype)  # (D/2,): 0, 2, 4, ...
    return torch.pow(torch.tensor(10000.0, dtype=dtype), -two_i / d_model)  # (D/2,)


def positional_encoding(
    max_len: PositiveInt, d_model: PositiveInt, dtype: FloatDtype = torch.float32
) -> Float[Tensor, "T D"]:
    """The encodings ``P[t, 2i] = sin(t w_i)``, ``P[t, 2i+1] = cos(t w_i)`` of the
    positions ``t = 0 .. max_len - 1``: the sine and cosine of one frequency side by
    side, at wavelengths from ``2 pi`` to below ``10000 * 2 pi``."""
    positions = torch.arange(max_len, dtype=dtype)[:, None]  # (T, 1)
    angles = positions * _frequencies(d_model, dtype)  # (T, D/2): t * w_i
    # Stacking on a last axis of size 2 and flattening interleaves sin and cos.
    pairs = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1)  # (T, D/2, 2)
    return pairs.reshape(max_len, d_model)  # (T, D)


def offset_rotation(
    offset: AnyInt, d_model: PositiveInt, dtype: FloatDtype = torch.float32
) -> Float[Tensor, "D D"]:
    """The matrix ``R`` with ``P[t + offset] = R @ P[t]`` for every position ``t``.

    Each pair ``(sin t w, cos t w)`` turns by the angle ``offset * w``, so ``R`` is
    block-diagonal, one 2 x 2 rotation per pair, and does not depend on ``t``.
    """
    angles = offset * _frequencies(d_model, dtype)  # (D/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    rows = torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)  # 2 x (D/2, 2)
    blocks = torch.stack(rows, -2)  # (D/2, 2, 2)
    return torch.block_diag(*blocks)  # (D, D)
