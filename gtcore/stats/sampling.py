r"""Seeded sampling of Gaussian tokens, and of non-Gaussian token clouds with the same two moments.

:func:`moment_matched_tokens` draws the contrasts every power check needs: clouds whose population
mean and covariance are exactly :math:`(\mu, \Sigma)`, but whose law is not Gaussian,

.. math::

    x = \mu + L y, \qquad LL^\top = \Sigma, \qquad \mathbb{E}\,y = 0,\ \operatorname{Cov} y = I,

with :math:`y` one of

* ``"gaussian"``: :math:`y \sim N(0, I)`;
* ``"uniform"``: i.i.d. coordinates uniform on :math:`[-\sqrt3, \sqrt3]` (excess kurtosis
  :math:`-1.2` per coordinate);
* ``"student_t"``: the elliptical Student-t with :math:`\nu > 2` degrees of freedom,
  :math:`y = \sqrt{(\nu-2)/\nu}\; z / \sqrt{w/\nu}`, :math:`z \sim N(0, I)`, :math:`w \sim \chi^2_\nu`;
* ``"mixture"``: two Gaussian components with weights :math:`(p, 1-p)`, means
  :math:`a_1 e_1 = s\sqrt{(1-p)/p}\,e_1` and :math:`a_2 e_1 = -s\sqrt{p/(1-p)}\,e_1`, and common
  covariance :math:`I - s^2 e_1e_1^\top` (:math:`0 < s < 1`): mean 0 and covariance :math:`I`
  exactly, skewness :math:`s^3 (1-2p)/\sqrt{p(1-p)}` along :math:`e_1` when :math:`p \ne \tfrac12`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gtcore._linalg import psd_factor
from gtcore._validation import as_generator, check_integer, check_moments, show


def gaussian_tokens(n: int, mu: Any, Sigma: Any, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    r"""``n`` i.i.d. tokens :math:`x_i = \mu + L z_i`, :math:`z_i \sim N(0, I)`, :math:`LL^\top = \Sigma`.

    Parameters
    ----------
    n : int
        Number of tokens (at least 1).
    mu : (d,) array
        The mean.
    Sigma : (d, d) array
        The covariance, symmetric PSD; rank-deficient is allowed (the tokens then lie in
        :math:`\mu + \operatorname{range}\Sigma`).
    seed : int or numpy Generator
        The same seed gives the same tokens.

    Returns
    -------
    (n, d) float64 ndarray
        The tokens.

    Raises
    ------
    ValueError
        ``n`` not a positive integer, or invalid moments.

    Examples
    --------
    >>> from gtcore import gaussian_tokens
    >>> x = gaussian_tokens(100_000, [1.0, -1.0], np.diag([4.0, 1.0]), seed=0)
    >>> x.shape, np.round(x.mean(axis=0), 1), np.round(x.var(axis=0), 1)
    ((100000, 2), array([ 1., -1.]), array([4., 1.]))
    """
    if (
        isinstance(n, (bool, np.bool_))
        or not isinstance(n, (int, np.integer, float, np.floating))
        or not np.isfinite(n)
        or int(n) != n
        or n < 1
    ):
        raise ValueError(f"n must be a positive integer (a token count), got {show(n)}")
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    rng = as_generator(seed)
    z = rng.standard_normal((int(n), mu.shape[0]))
    return mu + z @ psd_factor(Sigma).T


def _real(value: Any, name: str) -> float:
    """A real number (not a bool, not a string), else ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {show(value)}")
    return float(value)


#: the laws :func:`moment_matched_tokens` draws
LAWS = ("gaussian", "uniform", "student_t", "mixture")


def _standard(
    law: str, n: int, d: int, rng: np.random.Generator, dof: float, weight: float, separation: float
) -> np.ndarray:
    if law == "gaussian":
        return rng.standard_normal((n, d))
    if law == "uniform":
        return rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), (n, d))
    if law == "student_t":
        z = rng.standard_normal((n, d))
        w = rng.chisquare(dof, n)
        return np.sqrt((dof - 2.0) / dof) * z / np.sqrt(w / dof)[:, None]
    # two-component mixture along e_1
    p, s = weight, separation
    first = rng.random(n) < p
    y = rng.standard_normal((n, d))
    y[:, 0] *= np.sqrt(1.0 - s * s)
    y[:, 0] += np.where(first, s * np.sqrt((1 - p) / p), -s * np.sqrt(p / (1 - p)))
    return y


def moment_matched_tokens(
    law: str,
    n: int,
    mu: Any,
    Sigma: Any,
    seed: int | np.random.Generator | None = 0,
    *,
    dof: float = 5.0,
    weight: float = 0.5,
    separation: float = 0.9,
) -> np.ndarray:
    r"""``n`` i.i.d. tokens of a law with mean ``mu`` and covariance ``Sigma`` (module docstring).

    Parameters
    ----------
    law : str
        One of :data:`LAWS`.
    n : int
        The number of tokens (at least 1).
    mu, Sigma : (d,) and (d, d) arrays
        The population moments (``Sigma`` PSD; rank-deficient allowed).
    seed : int or numpy Generator
        The same seed gives the same tokens.
    dof : float
        Student-t degrees of freedom, > 2 (finite covariance); > 4 for a finite kurtosis.
    weight : float
        Mixture weight p of the first component, in (0, 1).
    separation : float
        Mixture separation s in (0, 1): the share :math:`s^2` of the variance along :math:`e_1`
        (whitened) carried by the distance between the component means.

    Returns
    -------
    (n, d) float64 ndarray
        The tokens.

    Raises
    ------
    ValueError
        An unknown ``law``, or ``n``, ``dof``, ``weight``, ``separation`` or the moments out of range.
    """
    if law not in LAWS:
        raise ValueError(f"law must be one of {', '.join(LAWS)}, got {law!r}")
    n = check_integer(n, "n", 1)
    dof, weight, separation = (_real(v, k) for v, k in ((dof, "dof"), (weight, "weight"), (separation, "separation")))
    if not 2 < dof < np.inf:
        raise ValueError(f"dof must be a finite number above 2 (a finite covariance), got {dof!r}")
    if not 0 < weight < 1:
        raise ValueError(f"weight must lie in (0, 1), got {weight!r}")
    if not 0 < separation < 1:
        raise ValueError(f"separation must lie in (0, 1), got {separation!r}")
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    rng = as_generator(seed)
    y = _standard(law, int(n), mu.shape[0], rng, float(dof), float(weight), float(separation))
    return mu + y @ psd_factor(Sigma).T
