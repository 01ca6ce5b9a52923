"""Sinusoidal positional encodings and the rotation that shifts them (chapter 11, syllabus TR2).

Self-attention treats its input as a set; Vaswani et al. (2017) add to each
token embedding a vector that depends on its position ``t``: the sines and
cosines of ``t`` at ``D / 2`` geometrically spaced frequencies
(:func:`positional_encoding`). Shifting every position by ``delta`` is then one
fixed block rotation (:func:`offset_rotation`), the same for every ``t``, which
is why a linear layer can learn to attend a fixed distance away.
:class:`lib.transformer.TransformerEmbedding` adds them to the tokens.

Conventions: rows are positions, ``D`` the model size ``d_model`` (even).

References
----------
.. [1] A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez,
   L. Kaiser, I. Polosukhin. "Attention Is All You Need". NeurIPS 2017.
   arXiv:1706.03762.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lib.validation import require_even, require_instance, require_int

__all__ = ["positional_encoding", "offset_rotation"]


def _check_sizes(length: int, d_model: int, dtype: object, first: str = "max_len") -> None:
    """Check the arguments of both functions: ``first`` is ``max_len`` (>= 1) or ``offset`` (any int)."""
    require_int(first, length, minimum=1 if first == "max_len" else -(2**62))
    require_even("d_model", d_model, "sines and cosines come in pairs")
    require_instance("dtype", dtype, torch.dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype; found {dtype}")


def _frequencies(d_model: int, dtype: torch.dtype) -> Tensor:
    """The angular frequencies ``w_i = 1 / 10000^(2i / d_model)`` of the pairs ``i = 0 .. d/2 - 1``."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)  # (D/2,): 0, 2, 4, ...
    return torch.pow(torch.tensor(10000.0, dtype=dtype), -two_i / d_model)  # (D/2,)


def positional_encoding(max_len: int, d_model: int, dtype: torch.dtype = torch.float32) -> Tensor:
    r"""The sinusoidal positional encodings of Vaswani et al. (2017), one row per position.

    .. math:: P_{t, 2i} = \sin(t\,\omega_i), \qquad P_{t, 2i+1} = \cos(t\,\omega_i),
              \qquad \omega_i = 10000^{-2i / d}

    for positions ``t = 0 .. max_len - 1`` and pairs ``i = 0 .. d/2 - 1``: the
    sine and the cosine of one frequency sit side by side (interleaved). The
    wavelengths grow geometrically from ``2 pi`` to ``10000 * 2 pi``.

    Parameters
    ----------
    max_len : int
        Number of positions (rows).
    d_model : int
        Size ``D`` of each encoding; must be even.
    dtype : torch.dtype, default torch.float32

    Returns
    -------
    Tensor
        The encoding matrix ``P``.

    Shapes
    ------
    output : (max_len, D)
    """
    _check_sizes(max_len, d_model, dtype)
    positions = torch.arange(max_len, dtype=dtype)[:, None]  # (T, 1)
    angles = positions * _frequencies(d_model, dtype)  # (T, D/2): t * w_i
    # Stacking on a last axis of size 2 and flattening interleaves sin and cos.
    return torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).reshape(max_len, d_model)  # (T, D)


def offset_rotation(offset: int, d_model: int, dtype: torch.dtype = torch.float32) -> Tensor:
    r"""The matrix ``R`` with ``P[t + offset] = R @ P[t]`` for every position ``t``.

    Each pair ``(sin t w_i, cos t w_i)`` is rotated by the angle ``offset * w_i``:

    .. math:: \begin{pmatrix} \sin (t+\delta)\omega \\ \cos (t+\delta)\omega \end{pmatrix}
              = \begin{pmatrix} \cos \delta\omega & \sin \delta\omega \\
                                -\sin \delta\omega & \cos \delta\omega \end{pmatrix}
                \begin{pmatrix} \sin t\omega \\ \cos t\omega \end{pmatrix}

    so ``R`` is block-diagonal with one 2 x 2 rotation per pair. It depends on the
    offset only, never on ``t``: a linear layer can learn to look a fixed
    distance back or ahead. Because ``R`` is orthogonal, ``P[t] . P[t + offset]``
    depends on the offset only too.

    Parameters
    ----------
    offset : int
        The shift ``delta`` (negative shifts rotate backwards).
    d_model : int
        Size ``D`` of the encodings; must be even.
    dtype : torch.dtype, default torch.float32

    Returns
    -------
    Tensor
        The block-diagonal rotation ``R``.

    Shapes
    ------
    output : (D, D)
    """
    _check_sizes(offset, d_model, dtype, first="offset")
    angles = offset * _frequencies(d_model, dtype)  # (D/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    blocks = torch.stack((torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2)  # (D/2, 2, 2)
    return torch.block_diag(*blocks)  # (D, D)
