r"""Seeded sampling of Gaussian tokens (and of other token clouds used as contrasts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import check_moments


def covariance_factor(Sigma: np.ndarray) -> np.ndarray:
    r"""A factor :math:`L` with :math:`LL^\top = \Sigma`, through the eigendecomposition.

    Works for rank-deficient :math:`\Sigma`, where a Cholesky factorisation would fail:
    eigenvalues within round-off of zero (:math:`\le 10\,d\,\varepsilon\,\lambda_{\max}`) are set
    to 0, so samples lie exactly in :math:`\operatorname{range}\Sigma` rather than :math:`\sqrt{\varepsilon}`
    away from it.
    """
    w, U = np.linalg.eigh(Sigma)
    if w.size:
        w = np.where(w <= 10 * w.size * np.finfo(float).eps * max(w[-1], 0.0), 0.0, w)
    return U * np.sqrt(w)


def gaussian_tokens(n: int, mu: Any, Sigma: Any, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    r"""``n`` i.i.d. tokens :math:`x_i = \mu + L z_i`, :math:`z_i \sim N(0, I)`, :math:`LL^\top = \Sigma`.

    Parameters
    ----------
    n : int
        Number of tokens (at least 1).
    mu : (d,) array
    Sigma : (d, d) symmetric PSD array; rank-deficient is allowed (the tokens then lie in
        :math:`\mu + \operatorname{range}\Sigma`).
    seed : int or numpy Generator
        The same seed gives the same tokens.

    Returns
    -------
    (n, d) float64 array
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    z = rng.standard_normal((int(n), mu.shape[0]))
    return mu + z @ covariance_factor(Sigma).T
