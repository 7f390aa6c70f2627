r"""The training loss and its floor: the squared 2-Wasserstein distance of two empirical measures, by an
optimal assignment, and the least distance from a Gaussian (or a sample) to the measures carried by an
:math:`r`-dimensional affine subspace (derived in :mod:`gtcore.training`'s docstring, which re-exports
every name of this module).

NumPy and SciPy only: the distances need no torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from gtcore._linalg import empirical_moments, psd_project
from gtcore._validation import check_covariance, check_integer, check_moments, check_tokens

__all__ = ["best_rank_approximation", "empirical_rank_floor", "optimal_assignment", "rank_floor", "w2_squared"]


# ------------------------------------------------------------------------------- distances
def optimal_assignment(x: Any, y: Any) -> np.ndarray:
    r"""The permutation :math:`\sigma` minimising :math:`\sum_i \|x_i - y_{\sigma(i)}\|^2`.

    Parameters
    ----------
    x, y : (N, d) arrays of the same shape

    Returns
    -------
    (N,) int array
        ``y[sigma]`` is matched to ``x``.
    """
    x, y = _pair(x, y)
    cost = (np.sum(x * x, 1)[:, None] + np.sum(y * y, 1)[None, :]) - 2.0 * x @ y.T
    rows, cols = linear_sum_assignment(cost)
    sigma = np.empty_like(cols)
    sigma[rows] = cols
    return sigma


def w2_squared(x: Any, y: Any) -> float:
    r"""Squared 2-Wasserstein distance between two empirical measures of N equally weighted points.

    .. math::

        W_2^2 = \min_{\sigma \in S_N} \frac1N \sum_{i=1}^N \|x_i - y_{\sigma(i)}\|^2,

    by an optimal assignment (:func:`optimal_assignment`).

    Parameters
    ----------
    x, y : (N, d) arrays of the same shape, finite

    Returns
    -------
    float
    """
    x, y = _pair(x, y)
    sigma = optimal_assignment(x, y)
    return float(np.mean(np.sum((x - y[sigma]) ** 2, axis=1)))


def _pair(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    x = check_tokens(x, "x")
    y = check_tokens(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape (N, d), got {x.shape} and {y.shape}")
    return x, y


def rank_floor(Sigma: Any, r: int) -> float:
    r"""The squared :math:`W_2` distance from :math:`N(\mu, \Sigma)` to the measures carried by
    :math:`r`-dimensional affine subspaces (rank-:math:`r` Gaussians among them).

    .. math::

        F_r(\Sigma) = \sum_{k=r+1}^{d} \lambda_k(\Sigma), \qquad \lambda_1 \ge \dots \ge \lambda_d .

    Parameters
    ----------
    Sigma : (d, d) symmetric positive semidefinite array
    r : int, 0 <= r <= d

    Returns
    -------
    float
        0 when ``r = d``.
    """
    S = check_covariance(Sigma, "Sigma")
    d = S.shape[0]
    r = check_integer(r, "r", 0, d)
    w = np.clip(np.linalg.eigvalsh(S), 0.0, None)  # ascending
    return float(np.sum(w[: d - int(r)]))


def best_rank_approximation(mu: Any, Sigma: Any, r: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The rank-:math:`r` Gaussian nearest :math:`N(\mu, \Sigma)` in :math:`W_2`: :math:`N(\mu, P\Sigma P)`.

    :math:`P` is the orthogonal projection on the eigenvectors of the :math:`r` largest eigenvalues;
    :math:`W_2^2(N(\mu, \Sigma), N(\mu, P\Sigma P)) = F_r(\Sigma)` (:func:`rank_floor`).

    Parameters
    ----------
    mu : (d,) array
        The mean.
    Sigma : (d, d) array
        The covariance, symmetric positive semidefinite.
    r : int
        The rank, :math:`0 \le r \le d`.

    Returns
    -------
    mu : (d,) array
        The same mean.
    Sigma_r : (d, d) array
        :math:`P\Sigma P`, of rank at most r (exactly symmetric).

    Raises
    ------
    ValueError
        Invalid moments, or ``r`` not an integer in :math:`[0, d]`.
    """
    m, S = check_moments(mu, Sigma, "mu", "Sigma")
    d = m.shape[0]
    r = check_integer(r, "r", 0, d)
    w, U = np.linalg.eigh(S)
    top = U[:, d - int(r) :]
    Sr = (top * np.clip(w[d - int(r) :], 0.0, None)) @ top.T
    return m.copy(), 0.5 * (Sr + Sr.T)


def empirical_rank_floor(y: Any, r: int) -> float:
    r""":math:`F_r(\hat\Sigma_Y)`: the least :math:`W_2^2` from the sample ``y`` to any measure carried by an
    :math:`r`-dimensional affine subspace (``hat Sigma_Y`` its :math:`1/N` covariance, :func:`rank_floor`).

    Parameters
    ----------
    y : (N, d) array
        The sample.
    r : int
        The dimension of the subspaces, :math:`0 \le r \le d`.

    Returns
    -------
    float
        :math:`\sum_{k > r}\lambda_k(\hat\Sigma_Y)`.
    """
    y = check_tokens(y, "y", min_n=2)
    return rank_floor(psd_project(empirical_moments(y)[1]), r)
