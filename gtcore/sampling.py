r"""Seeded sampling of Gaussian tokens (and of other token clouds used as contrasts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._linalg import psd_factor
from ._validation import check_moments, show


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
    if (isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer, float, np.floating))
            or not np.isfinite(n) or int(n) != n or n < 1):
        raise ValueError(f"n must be a positive integer (a token count), got {show(n)}")
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    z = rng.standard_normal((int(n), mu.shape[0]))
    return mu + z @ psd_factor(Sigma).T
