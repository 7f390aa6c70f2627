r"""Chapter 9's measurements and noise floors, computed without the trainer's code.

The network of chapter 9 is trained (:func:`gtcore.training.train_transformer`) on the squared 2-Wasserstein
distance between token clouds, by the optimal assignment of :func:`gtcore.training.optimal_assignment`, and
the trainer records the Bures–Wasserstein distance of its output's moments
(:func:`gtcore.stats.gaussianity.bures_wasserstein`). A noise floor built with that same code would share the
trained model's code path (a wrong assignment would make a collapsed network and the floor agree; the
claims' traced sides, :mod:`gtbook.sides`, refuse it). So the book measures the trained networks and
builds every floor they are compared with by the two functions here, which compute the same quantities by
another route:

* :func:`w2_squared`: the cost matrix by :func:`scipy.spatial.distance.cdist` and the assignment by
  :func:`scipy.optimize.linear_sum_assignment` on it (:math:`W_2^2` between two clouds of N equally weighted
  tokens is an assignment problem);
* :func:`gaussian_w2`: the Bures term from the eigenvalues of :math:`\Sigma_1\Sigma_2` (similar to
  :math:`\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}`, so they are real and non-negative), no matrix square root.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

__all__ = ["gaussian_w2", "w2_squared"]


def w2_squared(x: Any, y: Any) -> float:
    r"""Squared 2-Wasserstein distance between two clouds of N equally weighted tokens,

    .. math::

        W_2^2 = \min_{\sigma \in S_N} \frac1N \sum_{i=1}^N \|x_i - y_{\sigma(i)}\|^2,

    the optimal assignment found by :func:`scipy.optimize.linear_sum_assignment` on the squared Euclidean
    costs of :func:`scipy.spatial.distance.cdist`.

    Parameters
    ----------
    x, y : (N, d) arrays
        The two clouds (the same shape, finite).

    Returns
    -------
    float
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 2 or x.shape != y.shape or x.shape[0] < 1:
        raise ValueError(f"x and y must be (N, d) arrays of one shape, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("x and y must be finite")
    rows, cols = linear_sum_assignment(cdist(x, y, "sqeuclidean"))
    return float(np.mean(np.sum((x[rows] - y[cols]) ** 2, axis=1)))


def gaussian_w2(mu1: Any, Sigma1: Any, mu2: Any, Sigma2: Any) -> float:
    r"""The 2-Wasserstein distance between :math:`N(\mu_1, \Sigma_1)` and :math:`N(\mu_2, \Sigma_2)`,

    .. math::

        W_2^2 = \|\mu_1 - \mu_2\|^2 + \operatorname{tr}\Sigma_1 + \operatorname{tr}\Sigma_2
            - 2 \sum_k \sqrt{\lambda_k(\Sigma_1\Sigma_2)},

    since :math:`\operatorname{tr}(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2})^{1/2}` is the sum of the square roots of
    the eigenvalues of :math:`\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}`, which :math:`\Sigma_1\Sigma_2` shares
    (rank-deficient covariances allowed: their round-off eigenvalues are clipped at 0).

    Parameters
    ----------
    mu1, mu2 : (d,) arrays
        The means.
    Sigma1, Sigma2 : (d, d) arrays
        The covariances, symmetric positive semidefinite.

    Returns
    -------
    float
        :math:`W_2` (not squared), :math:`\ge 0`.
    """
    m1, m2 = np.asarray(mu1, float), np.asarray(mu2, float)
    S1, S2 = np.asarray(Sigma1, float), np.asarray(Sigma2, float)
    d = m1.shape[0] if m1.ndim == 1 else -1
    if d < 1 or m2.shape != (d,) or S1.shape != (d, d) or S2.shape != (d, d):
        raise ValueError(
            f"mu1, mu2 must be (d,) and Sigma1, Sigma2 (d, d) arrays of one d, got {m1.shape}, "
            f"{m2.shape}, {S1.shape}, {S2.shape}"
        )
    lam = np.clip(np.linalg.eigvals(S1 @ S2).real, 0.0, None)
    w2sq = float(np.sum((m1 - m2) ** 2) + np.trace(S1) + np.trace(S2) - 2.0 * np.sqrt(lam).sum())
    return float(np.sqrt(max(w2sq, 0.0)))
