r"""The attention strength :math:`\kappa` evaluated from its definition, by direct maximisation.

For one head, tokens :math:`y \sim N(\mu, \Sigma)` and a query :math:`x`, the softmax weight
:math:`w = e^{y^\top Bx}` has :math:`\mathbb{E}_y w^2 / (\mathbb{E}_y w)^2 = e^{x^\top B^\top\Sigma Bx}`, and
averaged over Gaussian queries :math:`x \sim N(m, \Sigma)` this is finite iff the exponent
:math:`x^\top B^\top\Sigma Bx - \tfrac12 x^\top\Sigma^{-1}x` is negative definite, i.e. iff

.. math::

    \kappa = \sup_{x \ne 0} \frac{x^\top B^\top \Sigma B x}{x^\top \Sigma^{-1} x} < \tfrac12 .

The library computes :math:`\kappa` in closed form, as :math:`\lambda_{\max}(B^\top\Sigma B\Sigma)`
(:meth:`gtcore.attention.DotProduct.sampling_strength`); :func:`kappa_by_maximisation` evaluates the
supremum itself (random directions, then a quasi-Newton refinement), with no eigenvalue problem, so a
closed form of the wrong matrix shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from gtcore.attention import ATTENTION_TYPES

__all__ = ["StrengthCheck", "kappa_by_maximisation", "strength_draws"]


def kappa_by_maximisation(
    Sigma: np.ndarray, B: np.ndarray, *, seed: int, directions: int = 4096, starts: int = 4
) -> float:
    r""":math:`\sup_x x^\top B^\top\Sigma Bx / x^\top\Sigma^{-1}x` by direct maximisation.

    Parameters
    ----------
    Sigma : (d, d) array
        The tokens' covariance (positive definite).
    B : (d, d) array
        The head's query-key matrix.
    seed : int
        Seeds the random directions.
    directions, starts : int
        Random unit directions tried, and how many of the best are refined by BFGS.

    Returns
    -------
    float
    """
    S = np.asarray(Sigma, dtype=float)
    B = np.asarray(B, dtype=float)
    M = B.T @ S @ B
    P = np.linalg.solve(S, np.eye(S.shape[0]))

    def ratio(x: np.ndarray) -> float:
        return float(x @ M @ x) / float(x @ P @ x)

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((directions, S.shape[0]))
    r = np.einsum("ni,ij,nj->n", X, M, X) / np.einsum("ni,ij,nj->n", X, P, X)
    best = -np.inf
    for k in np.argsort(r)[-starts:]:
        res = minimize(lambda x: -ratio(x), X[k], method="BFGS", options={"gtol": 1e-13})
        best = max(best, ratio(res.x), float(r[k]))
    return best


@dataclass(frozen=True)
class StrengthCheck:
    """The library's :math:`\\kappa` and the maximised one, per draw."""

    closed: np.ndarray
    direct: np.ndarray

    @property
    def max_relative_error(self) -> float:
        return float(np.max(np.abs(self.closed - self.direct) / np.abs(self.direct)))

    def __repr__(self) -> str:
        return f"StrengthCheck({len(self.closed)} draws, max relative error {self.max_relative_error:.2e})"


def strength_draws(draws: int, d: int, *, seed: int) -> StrengthCheck:
    r""":math:`\kappa` in closed form and by maximisation over ``draws`` seeded draws: :math:`\Sigma = WW^\top/d +
    0.2I`, :math:`B` Ginibre (entries :math:`N(0, 1/d)`, non-symmetric).

    Parameters
    ----------
    draws, d : int
    seed : int

    Returns
    -------
    StrengthCheck
    """
    rng = np.random.default_rng(seed)
    closed, direct = [], []
    dot = ATTENTION_TYPES["dot"]
    for k in range(draws):
        W = rng.standard_normal((d, d))
        S = W @ W.T / d + 0.2 * np.eye(d)
        B = rng.standard_normal((d, d)) / np.sqrt(d)
        closed.append(dot.sampling_strength(S, B))
        direct.append(kappa_by_maximisation(S, B, seed=seed + 1 + k))
    return StrengthCheck(np.array(closed), np.array(direct))
