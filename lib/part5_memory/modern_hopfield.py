"""Modern Hopfield networks with continuous states: retrieval is attention.

Syllabus MEM5, continued. Ramsauer et al. (2021) store ``P`` patterns
``x_1, ..., x_P`` of ``N`` numbers, the rows of ``patterns`` (the columns of their
``X``), and give a state ``xi`` the energy (their equation 2)

    ``E(xi) = -lse(beta, X^T xi) + 1/2 xi^T xi + log(P) / beta + 1/2 M^2``,

with ``lse(beta, z) = log(sum_mu exp(beta z_mu)) / beta`` and ``M`` the largest
norm of a pattern (:func:`modern_energy`). Its update (their equation 3)

    ``xi_new = X softmax(beta X^T xi)``

(:func:`modern_update`, with the weights :func:`retrieval_weights`) is one step of
the concave-convex procedure on ``E``: the energy never rises (their Theorem 1). It
is chapter 9's attention with the state as the query, the patterns as keys and
values and ``beta`` in place of ``1/sqrt(d)``. A pattern well separated from the
others (:func:`separation`, ``Delta_i``) is retrieved in one update with an error
exponentially small in ``beta Delta_i`` (their Theorem 4), and exponentially many
patterns in ``N`` can be stored that way (their Theorem 3). Small ``beta`` gives
near-uniform weights: the update returns an average of patterns, a metastable or
global fixed point (their section 2).

Conventions: ``patterns`` is ``(P, N)``, one pattern per row as in
:mod:`lib.part5_memory.hopfield`; states are ``(..., N)``, any batch in front.

References
----------
.. [1] H. Ramsauer, B. Schaefl, J. Lehner, P. Seidl, M. Widrich, T. Adler,
   L. Gruber, M. Holzleitner, M. Pavlovic, G. K. Sandve, V. Greiff, D. Kreil,
   M. Kopp, G. Klambauer, J. Brandstetter, S. Hochreiter. "Hopfield Networks is
   All You Need". ICLR 2021 (arXiv:2008.02217).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from lib.checked import Positive, same_dtype

__all__ = [
    "modern_energy",
    "modern_update",
    "retrieval_weights",
    "separation",
]


def retrieval_weights(
    patterns: Float[Tensor, "P N"], states: Float[Tensor, "*batch N"], beta: Positive
) -> Float[Tensor, "*batch P"]:
    r"""The weights :math:`\mathbf{p} = \operatorname{softmax}(\beta X^\top
    \boldsymbol{\xi})` of each state over the stored patterns."""
    same_dtype(patterns=patterns, states=states)
    return torch.softmax(beta * states @ patterns.T, dim=-1)  # (*batch, P)


def modern_update(
    patterns: Float[Tensor, "P N"], states: Float[Tensor, "*batch N"], beta: Positive
) -> Float[Tensor, "*batch N"]:
    r"""One update :math:`\boldsymbol{\xi}^{\text{new}} = X \operatorname{softmax}
    (\beta X^\top \boldsymbol{\xi})` of each state: the patterns averaged with the
    retrieval weights."""
    return retrieval_weights(patterns, states, beta) @ patterns  # (*batch, N)


def modern_energy(
    patterns: Float[Tensor, "P N"], states: Float[Tensor, "*batch N"], beta: Positive
) -> Float[Tensor, "*batch"]:
    r""":math:`E = -\operatorname{lse}(\beta, X^\top\boldsymbol{\xi}) + \tfrac12
    \boldsymbol{\xi}^\top\boldsymbol{\xi} + \beta^{-1}\log P + \tfrac12 M^2` of each
    state, :math:`M` the largest norm of a pattern."""
    same_dtype(patterns=patterns, states=states)
    lse = torch.logsumexp(beta * states @ patterns.T, dim=-1) / beta  # (*batch,)
    largest = patterns.norm(dim=-1).max()  # M
    constant = math.log(patterns.shape[0]) / beta + 0.5 * largest**2
    return -lse + 0.5 * (states * states).sum(-1) + constant


def separation(patterns: Float[Tensor, "P N"]) -> Float[Tensor, "P"]:
    r"""Each pattern's separation from the others, :math:`\Delta_i =
    \mathbf{x}_i^\top\mathbf{x}_i - \max_{j \ne i} \mathbf{x}_i^\top\mathbf{x}_j`."""
    if patterns.shape[0] < 2:
        raise ValueError(
            f"patterns must hold at least 2 rows to be separated; found "
            f"{tuple(patterns.shape)}"
        )
    dots = patterns @ patterns.T  # (P, P)
    own = dots.diagonal().clone()  # (P,)
    others = dots.fill_diagonal_(-math.inf).amax(dim=-1)  # (P,)
    return own - others
