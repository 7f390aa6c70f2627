r"""How Gaussian is a token cloud? Moments, distances and the noise floor of a true Gaussian.

The paper's reduction (eq. 1.1) holds when the token distribution stays Gaussian. This module
measures how far an empirical cloud :math:`x_1, \dots, x_N \in \mathbb{R}^d` is from that:

* :func:`empirical_moments`: mean and the :math:`1/N` covariance;
* :func:`bures_wasserstein`: the closed-form :math:`W_2` distance between two Gaussians;
* :func:`sliced_w2`: the sliced :math:`W_2` distance between the sample and its moment-matched
  Gaussian, in whitened coordinates (scale-free);
* :func:`mardia_skewness`, :func:`mardia_kurtosis`, :func:`mardia_kurtosis_excess` and
  :func:`excess_kurtosis_per_coordinate`: classical moment tests;
* :func:`noise_floor`: the same statistic on true Gaussian samples of the same size and
  dimension, so that every figure can show the band a perfect Gaussian would give.

Whitening (used by every scale-free statistic) is restricted to the numerical range of the
covariance: with :math:`\hat\Sigma = U \Lambda U^\top`, the rank :math:`r` is the number of
eigenvalues :math:`\lambda_k > 10^{-10}\lambda_{\max}`, and

.. math::

    y_i = \Lambda_r^{-1/2} U_r^\top (x_i - \hat\mu) \in \mathbb{R}^r,

so rank-deficient clouds (LayerNorm outputs, rank :math:`d-1`; a Gaussian of deficient rank,
whose rank the dynamics preserve) are handled; statistics are then those of an
:math:`r`-dimensional sample.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from gtcore._linalg import empirical_moments as _empirical_moments
from gtcore._linalg import psd_sqrt, whiten
from gtcore._progress import progress as progress_bar
from gtcore._repr import short_repr
from gtcore._validation import as_generator, check_integer, check_moments, check_tokens
from gtcore.stats.inference import normal_band

#: memory budget (bytes) for the temporary blocks of the chunked statistics
_CHUNK_BYTES = 128 * 2**20


# ------------------------------------------------------------------------------- helpers
def _samples(x: Any, name: str = "x") -> np.ndarray:
    """A finite (N, d) float64 array with N >= 2, or ValueError naming ``name``."""
    return check_tokens(x, name, min_n=2)


def _chunk_rows(n_rows: int, row_bytes: int) -> int:
    return int(max(1, min(n_rows, _CHUNK_BYTES // max(row_bytes, 1))))


# -------------------------------------------------------------------------------- moments
def empirical_moments(x: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""Empirical mean and covariance (normalised by :math:`N`, as the particle system's).

    .. math::

        \hat\mu = \frac1N \sum_i x_i, \qquad
        \hat\Sigma = \frac1N \sum_i (x_i - \hat\mu)(x_i - \hat\mu)^\top .

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2

    Returns
    -------
    mu : (d,) float64 array
    Sigma : (d, d) float64 array, exactly symmetric

    Examples
    --------
    >>> from gtcore import empirical_moments
    >>> mu, Sigma = empirical_moments(np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]]))
    >>> mu
    array([1., 1.])
    >>> Sigma
    array([[1., 0.],
           [0., 1.]])
    """
    return _empirical_moments(_samples(x))


def bures_wasserstein(mu1: Any, Sigma1: Any, mu2: Any, Sigma2: Any) -> float:
    r"""The 2-Wasserstein distance between :math:`N(\mu_1, \Sigma_1)` and :math:`N(\mu_2, \Sigma_2)`.

    .. math::

        W_2^2 = \|\mu_1 - \mu_2\|^2 + \operatorname{tr}\Sigma_1 + \operatorname{tr}\Sigma_2
            - 2 \operatorname{tr}\big(\Sigma_1^{1/2} \Sigma_2 \Sigma_1^{1/2}\big)^{1/2} .

    Parameters
    ----------
    mu1, mu2 : (d,) arrays
    Sigma1, Sigma2 : (d, d) symmetric PSD arrays (rank-deficient allowed)

    Returns
    -------
    float
        :math:`W_2` (not squared), :math:`\ge 0`.

    References
    ----------
    Dowson & Landau (1982); Givens & Shortt (1984); POT ``ot.gaussian.bures_wasserstein_distance``.

    Examples
    --------
    >>> from gtcore import bures_wasserstein
    >>> bures_wasserstein([0.0, 0.0], np.eye(2), [3.0, 4.0], np.eye(2))
    5.0
    >>> round(bures_wasserstein(np.zeros(1), np.eye(1), np.zeros(1), 4.0 * np.eye(1)), 12)
    1.0
    """
    m1, S1 = check_moments(mu1, Sigma1, "mu1", "Sigma1")
    m2, S2 = check_moments(mu2, Sigma2, "mu2", "Sigma2", d=m1.shape[0])
    r1 = psd_sqrt(S1)
    cross = r1 @ S2 @ r1
    cross_tr = np.sqrt(np.clip(np.linalg.eigvalsh(0.5 * (cross + cross.T)), 0.0, None)).sum()
    w2sq = float(np.sum((m1 - m2) ** 2) + np.trace(S1) + np.trace(S2) - 2.0 * cross_tr)
    return float(np.sqrt(max(w2sq, 0.0)))


# ------------------------------------------------------------------------------ sliced W2
@functools.lru_cache(maxsize=32)
def _normal_quantile_weights(n: int) -> np.ndarray:
    r""":math:`\varphi(z_{i-1}) - \varphi(z_i)`, :math:`z_i = \Phi^{-1}(i/n)`, :math:`i = 1..n`."""
    z = ndtri(np.arange(1, n) / n)
    phi = np.concatenate([[0.0], np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi), [0.0]])
    out = phi[:-1] - phi[1:]
    out.setflags(write=False)
    return out


def w2_to_standard_normal(p: np.ndarray) -> np.ndarray:
    r"""Exact squared :math:`W_2` between 1-D empirical samples and :math:`N(0, 1)`, columnwise.

    For a sample sorted as :math:`p_{(1)} \le \dots \le p_{(n)}` (mass :math:`1/n` each) the
    monotone coupling sends :math:`p_{(i)}` to the normal mass on
    :math:`[z_{i-1}, z_i]`, :math:`z_i = \Phi^{-1}(i/n)`, so

    .. math::

        W_2^2 = \frac1n\sum_i p_{(i)}^2
            - 2 \sum_i p_{(i)} \big(\varphi(z_{i-1}) - \varphi(z_i)\big) + 1 .

    Parameters
    ----------
    p : (n,) or (n, k) array: one sample per column (not necessarily sorted)

    Returns
    -------
    float or (k,) array
    """
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    s = np.sort(p, axis=0)
    wts = _normal_quantile_weights(n)
    wts = wts if s.ndim == 1 else wts[:, None]
    return np.mean(s**2, axis=0) - 2.0 * np.sum(s * wts, axis=0) + 1.0


def sliced_w2(x: Any, n_projections: int = 128, seed: int | np.random.Generator | None = 0) -> float:
    r"""Sliced :math:`W_2` between a sample and its moment-matched Gaussian (scale-free).

    The sample is whitened (:math:`y_i \in \mathbb{R}^r`, see the module notes), projected on
    ``n_projections`` seeded uniform directions :math:`\theta_k \in S^{r-1}`, each projection is
    standardised to mean 0 and variance 1, and compared with :math:`N(0,1)` exactly
    (:func:`w2_to_standard_normal`):

    .. math::

        SW_2(x) = \Big(\frac1K \sum_{k=1}^K
            W_2^2\big(\mathrm{std}(\theta_k^\top y),\, N(0,1)\big)\Big)^{1/2} .

    It is invariant under affine maps of :math:`x`, zero only for a sample whose projections are
    all exactly Gaussian, and of order :math:`\sqrt{\log N / N}` for a true Gaussian sample
    (compare with :func:`noise_floor`).

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2
    n_projections : int
        Number of random directions K (at least 1).
    seed : int or numpy Generator
        Seed of the directions; the same seed gives the same directions.

    Returns
    -------
    float

    Examples
    --------
    >>> from gtcore import gaussian_tokens, sliced_w2
    >>> round(sliced_w2(gaussian_tokens(20_000, np.zeros(2), np.eye(2), seed=1)), 2)
    0.01
    >>> bool(sliced_w2(np.random.default_rng(0).uniform(size=(20_000, 2))) > 0.02)
    True
    """
    x = _samples(x)
    n_projections = check_integer(n_projections, "n_projections", 1)
    return sliced_w2_of_whitened(whiten(x), int(n_projections), seed)


def sliced_w2_of_whitened(y: np.ndarray, n_projections: int = 128, seed: int | np.random.Generator | None = 0) -> float:
    r""":func:`sliced_w2` of a sample already whitened by ``gtcore._linalg.whiten`` (shape (N, r)).

    Lets a caller that evaluates several statistics of one sample whiten it once; the value is
    the one :func:`sliced_w2` returns on the raw sample.

    Parameters
    ----------
    y : (N, r) array
        The whitened sample (mean 0, covariance :math:`I_r`).
    n_projections : int
        The number of random directions.
    seed : int or numpy Generator
        The seed of the directions.

    Returns
    -------
    float
        The sliced :math:`W_2` distance to :math:`N(0, I_r)`.
    """
    n, r = y.shape
    n_projections = check_integer(n_projections, "n_projections", 1)
    rng = as_generator(seed)
    theta = rng.standard_normal((r, int(n_projections)))
    theta /= np.linalg.norm(theta, axis=0)
    k = _chunk_rows(int(n_projections), 8 * n * 3)
    total = 0.0
    wts = _normal_quantile_weights(n)
    for start in range(0, int(n_projections), k):
        # one projection per row (contiguous): sorting rows is ~2x faster than sorting columns; the
        # rows then go through w2_to_standard_normal's formula
        p = theta[:, start : start + k].T @ y.T
        p -= p.mean(axis=1, keepdims=True)
        sd = p.std(axis=1, keepdims=True)
        p /= np.where(sd > 0, sd, 1.0)
        p.sort(axis=1)
        total += float(np.sum(np.mean(p * p, axis=1) - 2.0 * (p @ wts) + 1.0))
    return float(np.sqrt(max(total / n_projections, 0.0)))


# -------------------------------------------------------------------------------- Mardia
def mardia_skewness(x: Any, *, method: str = "auto") -> float:
    r"""Mardia's multivariate skewness :math:`b_{1,r}` of the whitened sample.

    .. math::

        b_{1,r} = \frac{1}{N^2} \sum_{i,j} (y_i^\top y_j)^3 = \sum_{a,b,c=1}^{r} m_{abc}^2,
        \qquad m_{abc} = \frac1N \sum_i y_{ia} y_{ib} y_{ic} .

    For a Gaussian sample :math:`N b_{1,r}/6 \sim \chi^2_{r(r+1)(r+2)/6}` asymptotically, so
    :math:`\mathbb{E}\, b_{1,r} \approx r(r+1)(r+2)/N`.

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2
    method : {"auto", "tensor", "pairwise"}
        ``"tensor"``: the third-moment tensor, :math:`O(N r^3)` time, :math:`O(N r)` memory.
        ``"pairwise"``: the double sum in row blocks, :math:`O(N^2 r)` time, blocks under
        128 MiB. ``"auto"`` takes the tensor form when :math:`r^2 \le N`.

    Returns
    -------
    float

    Examples
    --------
    >>> from gtcore import gaussian_tokens, mardia_skewness
    >>> round(mardia_skewness(gaussian_tokens(20_000, np.zeros(2), np.eye(2), seed=0)), 3)
    0.0
    >>> round(mardia_skewness(np.random.default_rng(0).exponential(size=(20_000, 1))), 1)  # gamma_1^2 = 4
    4.0
    """
    x = _samples(x)
    if method not in ("auto", "tensor", "pairwise"):
        raise ValueError(f"method must be 'auto', 'tensor' or 'pairwise', got {method!r}")
    y = whiten(x)
    n, r = y.shape
    if method == "tensor" or (method == "auto" and r * r <= n):
        total = 0.0
        for a in range(r):
            m_a = (y * y[:, a : a + 1]).T @ y / n  # m_{a b c}
            total += float(np.sum(m_a**2))
        return total
    k = _chunk_rows(n, 8 * n * 2)
    total = 0.0
    for start in range(0, n, k):
        g = y[start : start + k] @ y.T
        total += float(np.vdot(g * g, g))  # sum of cubes; g**3 (pow) is ~20x slower
    return total / n**2


def mardia_kurtosis(x: Any) -> float:
    r"""Mardia's multivariate kurtosis :math:`b_{2,r}` of the whitened sample.

    .. math::

        b_{2,r} = \frac1N \sum_i \|y_i\|^4 ,

    with expectation :math:`r(r+2)(N-1)/(N+1)` and variance :math:`\approx 8r(r+2)/N` for a
    Gaussian sample.

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2

    Returns
    -------
    float

    Examples
    --------
    >>> from gtcore import gaussian_tokens, mardia_kurtosis
    >>> round(mardia_kurtosis(gaussian_tokens(100_000, np.zeros(2), np.eye(2), seed=0)), 1)
    8.0
    """
    return _mardia_b2(whiten(_samples(x)))


def _mardia_b2(y: np.ndarray) -> float:
    return float(np.mean(np.sum(y**2, axis=1) ** 2))


def mardia_kurtosis_excess(x: Any) -> float:
    r"""Relative excess of Mardia's kurtosis over its Gaussian value.

    .. math::

        \kappa = \frac{b_{2,r} - r(r+2)}{r(r+2)},

    with :math:`r` the numerical rank of the covariance. Zero for a Gaussian (up to sampling
    error of order :math:`\sqrt{8/(r(r+2)N)}`), negative for light tails (a uniform cloud),
    positive for heavy tails.

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2

    Returns
    -------
    float

    Examples
    --------
    >>> from gtcore import gaussian_tokens, mardia_kurtosis_excess
    >>> round(mardia_kurtosis_excess(gaussian_tokens(100_000, np.zeros(2), np.eye(2), seed=0)), 2)
    0.0
    >>> round(mardia_kurtosis_excess(np.random.default_rng(0).uniform(size=(100_000, 1))), 2)  # (1.8 - 3) / 3
    -0.4
    """
    return mardia_kurtosis_excess_of_whitened(whiten(_samples(x)))


def mardia_kurtosis_excess_of_whitened(y: np.ndarray) -> float:
    r""":func:`mardia_kurtosis_excess` of a sample already whitened by ``gtcore._linalg.whiten``.

    Parameters
    ----------
    y : (N, r) array
        The whitened sample (mean 0, covariance :math:`I_r`).

    Returns
    -------
    float
        :math:`(b_{2,r} - r(r+2))/(r(r+2))`.
    """
    r = y.shape[1]
    return (_mardia_b2(y) - r * (r + 2)) / (r * (r + 2))


def excess_kurtosis_per_coordinate(x: Any) -> np.ndarray:
    r"""Excess kurtosis of each coordinate (no whitening).

    .. math::

        \kappa_a = \frac{\frac1N\sum_i (x_{ia} - \hat\mu_a)^4}{\hat\Sigma_{aa}^2} - 3 .

    Parameters
    ----------
    x : (N, d) array (numpy or torch), N >= 2

    Returns
    -------
    (d,) float64 array
        NaN for a coordinate that is constant over the sample (its kurtosis is undefined).

    Examples
    --------
    >>> from gtcore import excess_kurtosis_per_coordinate
    >>> x = np.random.default_rng(0).uniform(size=(100_000, 2))
    >>> np.round(excess_kurtosis_per_coordinate(x), 2)  # a uniform law: -6/5
    array([-1.2, -1.2])
    """
    x = _samples(x)
    xc = x - x.mean(axis=0)
    sq = xc * xc
    m2 = np.mean(sq, axis=0)
    m4 = np.mean(sq * sq, axis=0)  # not xc**4: pow is ~10x slower than two products
    out = np.full(x.shape[1], np.nan)
    ok = m2 > 0
    out[ok] = m4[ok] / m2[ok] ** 2 - 3.0
    return out


# --------------------------------------------------------------------------- noise floor
_STATISTICS: dict[str, Callable[[np.ndarray], Any]] = {
    "sliced_w2": sliced_w2,
    "mardia_skewness": mardia_skewness,
    "mardia_kurtosis": mardia_kurtosis,
    "mardia_kurtosis_excess": mardia_kurtosis_excess,
    "excess_kurtosis_per_coordinate": excess_kurtosis_per_coordinate,
}


@dataclass(frozen=True)
class NoiseFloor:
    r"""The distribution of a statistic over true Gaussian samples of a given size and dimension.

    Attributes
    ----------
    values : (repeats, ...) array
        The statistic on each of the ``repeats`` Gaussian samples.
    mean, std : float or array
        Mean and standard deviation (ddof = 1) of ``values`` over the repeats.
    n, d : int
        Sample size and dimension.

    Examples
    --------
    >>> from gtcore import noise_floor
    >>> floor = noise_floor('mardia_kurtosis', 500, 2, repeats=200, seed=0)
    >>> lo, hi = floor.band(0.9)
    >>> bool(lo < 8.0 < hi), round(float(np.mean((floor.values >= lo) & (floor.values <= hi))), 2)
    (True, 0.9)
    """

    values: np.ndarray
    n: int
    d: int

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    @property
    def mean(self) -> Any:
        """The mean of ``values`` over the repeats (a float for a scalar statistic)."""
        m = np.mean(self.values, axis=0)
        return float(m) if np.ndim(m) == 0 else m

    @property
    def std(self) -> Any:
        """The standard deviation (ddof = 1) of ``values`` over the repeats."""
        s = np.std(self.values, axis=0, ddof=1)
        return float(s) if np.ndim(s) == 0 else s

    def band(self, level: float = 0.99, method: str = "quantile") -> tuple[Any, Any]:
        r"""The central ``level`` band of the statistic over true Gaussian samples.

        ``method="quantile"``: empirical quantiles :math:`(1\mp\text{level})/2` of ``values``
        (``numpy.quantile``, linear interpolation). With ``repeats`` values, quantiles beyond
        :math:`1/\text{repeats}` from the ends lie between the extreme observed values, so a 0.99
        band needs a few hundred repeats to be sharp.

        ``method="normal"``: :math:`\text{mean} \pm z\,\text{std}` with
        :math:`z = \Phi^{-1}((1 + \text{level})/2)` (2.576 for 0.99): a normal approximation whose
        coverage does not shrink with few repeats, for expensive statistics.

        Parameters
        ----------
        level : float
            The band's coverage, in (0, 1).
        method : "quantile" or "normal"
            Empirical quantiles, or the normal approximation.

        Returns
        -------
        lo, hi : float or array
            The band's ends (arrays for an array statistic).

        Raises
        ------
        ValueError
            ``level`` outside (0, 1), or an unknown ``method``.
        """
        level = float(level)
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        if method == "quantile":
            lo, hi = np.quantile(self.values, [(1 - level) / 2, (1 + level) / 2], axis=0)
        elif method == "normal":
            lo, hi = normal_band(np.asarray(self.mean), np.asarray(self.std), level)
        else:
            raise ValueError(f"method must be 'quantile' or 'normal', got {method!r}")
        if np.ndim(lo) == 0:
            return float(lo), float(hi)
        return lo, hi

    def contains(self, value: Any, level: float = 0.99, method: str = "quantile") -> Any:
        """Whether ``value`` lies inside :meth:`band` (elementwise for array statistics).

        Parameters
        ----------
        value : float or array
            The statistic of the sample under test.
        level : float
            The band's coverage.
        method : "quantile" or "normal"
            As in :meth:`band`.

        Returns
        -------
        bool or array of bool
            ``lo <= value <= hi``.
        """
        lo, hi = self.band(level, method)
        inside = (np.asarray(value) >= lo) & (np.asarray(value) <= hi)
        return bool(inside) if np.ndim(inside) == 0 else inside


def noise_floor(
    statistic: Callable[[np.ndarray], Any] | str,
    n: int,
    d: int,
    *,
    repeats: int = 64,
    seed: int | np.random.Generator | None = 0,
    progress: bool = False,
) -> NoiseFloor:
    r"""A statistic's values on true Gaussian samples of size ``n`` in dimension ``d``.

    Draws ``repeats`` seeded samples :math:`z^{(k)} \in \mathbb{R}^{n \times d}`,
    :math:`z^{(k)}_i \sim N(0, I_d)` i.i.d., and evaluates ``statistic`` on each. Every
    statistic of this module is affine invariant, so :math:`N(0, I_d)` stands for every
    non-degenerate Gaussian; for a cloud of rank :math:`r < d` pass ``d = r``.

    Parameters
    ----------
    statistic : callable (N, d) array -> float or array, or the name of one of this module's
        statistics (``"sliced_w2"``, ``"mardia_skewness"``, ``"mardia_kurtosis"``,
        ``"mardia_kurtosis_excess"``, ``"excess_kurtosis_per_coordinate"``)
    n : int
        Sample size (at least 2).
    d : int
        Dimension (at least 1).
    repeats : int
        Number of Gaussian samples (at least 2).
    seed : int or numpy Generator
        The seed of the Gaussian samples.
    progress : bool
        Show a progress bar (tqdm) over the repeats.

    Returns
    -------
    NoiseFloor
        ``.mean``, ``.std``, ``.values`` and ``.band(level)``.

    Examples
    --------
    >>> from gtcore import noise_floor
    >>> floor = noise_floor('mardia_kurtosis', 500, 2, repeats=200, seed=0)
    >>> bool(abs(floor.mean - 8.0) < 0.2), floor.values.shape  # E = d(d + 2)
    (True, (200,))
    """
    if isinstance(statistic, str):
        if statistic not in _STATISTICS:
            raise ValueError(f"statistic must be a callable or one of {sorted(_STATISTICS)}, got {statistic!r}")
        statistic = _STATISTICS[statistic]
    elif not callable(statistic):
        raise ValueError(f"statistic must be callable, got {type(statistic).__name__}")
    for name, val, low in (("n", n, 2), ("d", d, 1), ("repeats", repeats, 2)):
        check_integer(val, name, low)
    rng = as_generator(seed)
    values = [
        np.asarray(statistic(rng.standard_normal((int(n), int(d)))), dtype=np.float64)
        for _ in progress_bar(range(int(repeats)), "noise floor", enabled=progress)
    ]
    return NoiseFloor(values=np.stack(values), n=int(n), d=int(d))


__all__ = [
    "NoiseFloor",
    "bures_wasserstein",
    "empirical_moments",
    "excess_kurtosis_per_coordinate",
    "mardia_kurtosis",
    "mardia_kurtosis_excess",
    "mardia_kurtosis_excess_of_whitened",
    "mardia_skewness",
    "noise_floor",
    "sliced_w2",
    "sliced_w2_of_whitened",
    "w2_to_standard_normal",
]
