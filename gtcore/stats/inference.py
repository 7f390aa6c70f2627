r"""Inference for the book's finite-N claims: fitted slopes and their bootstrap standard errors, Hotelling's test,
the null of an ensemble mean, binomial and normal bands.

**Slopes in N.** A finite-N error that decays like :math:`cN^{s}` is read off a log–log fit:
:func:`loglog_slope` (one curve), :func:`pooled_loglog_slope` (D draws, one intercept each, a shared rate).
Their standard errors come from the seeds: :func:`slope_standard_error` and
:func:`slope_difference_standard_error` (one curve, or the difference of two fitted on the same seeds) and
:func:`pooled_slope_standard_error` (D draws) resample the seeds with replacement within each N and refit; a
claim :math:`|\hat s - s_0| < 3\,\mathrm{SE}` is then a 99.7% (normal) statement that the seed-to-seed scatter
allows.

**Signed deviations.** :func:`hotelling_test` tests that R independent deviation vectors have mean zero, with the
spread they show themselves:

.. math::

    T^2 = R\,\bar\delta^\top S^{-1}\bar\delta, \qquad \frac{R - p}{p(R - 1)}\,T^2 \sim F_{p,\,R-p}

for Gaussian :math:`\delta_s` (p the length of :math:`\delta`, S their sample covariance);
:func:`extrapolated_deviations` removes an :math:`O(1/N)` bias from deviations of two cloud sizes (Richardson).

**Nulls and bands.** :func:`mean_of_k_quantile` is the quantile of the mean of k independent values of a
statistic, from its null sample, by resampling; :func:`resample_counts` gives the multiplicities of a bootstrap
over units; :func:`normal_band` the band :math:`m \pm z\,s`; :func:`wilson_interval` Wilson's interval of a
binomial proportion; :func:`magnitude_interval` the image of an interval under :math:`|\cdot|`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import fdtrc, fdtri, ndtri

__all__ = [
    "HotellingTest",
    "extrapolated_deviations",
    "hotelling_test",
    "loglog_slope",
    "magnitude_interval",
    "mean_of_k_quantile",
    "normal_band",
    "pooled_loglog_slope",
    "pooled_slope_standard_error",
    "resample_counts",
    "slope_difference_standard_error",
    "slope_standard_error",
    "wilson_interval",
]


# ------------------------------------------------------------------------------------ slopes in N
def loglog_slope(x: Any, y: Any, x_max: float | None = None) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x`.

    With ``x_max``, only the points with :math:`0 < x \le x_{\max}` and :math:`y > 0` are fitted
    (a short-time or small-N regime); without it every point must be positive.

    Parameters
    ----------
    x, y : (n,) arrays
        The points.
    x_max : float, optional
        The largest :math:`x` fitted.

    Returns
    -------
    float
        The slope.

    Raises
    ------
    ValueError
        Shapes that differ, fewer than 2 usable points, or non-positive values without ``x_max``.

    Examples
    --------
    >>> from gtcore.stats.inference import loglog_slope
    >>> loglog_slope([1.0, 4.0, 16.0], [1.0, 0.5, 0.25])
    -0.5
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D arrays of one length, got shapes {x.shape} and {y.shape}")
    if x_max is not None:
        keep = (x > 0) & (x <= x_max) & (y > 0) & np.isfinite(y)
        if keep.sum() < 2:
            raise ValueError(f"x_max: need at least 2 points with 0 < x <= {x_max} and y > 0")
        x, y = x[keep], y[keep]
    elif x.size < 2 or np.any(x <= 0) or np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("x and y must hold at least 2 points, all positive and finite, for a log-log slope")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def pooled_loglog_slope(Ns: Any, values: Any) -> float:
    r"""Least-squares slope of :math:`\log \bar v_{k,i}` in :math:`\log N_i` with one intercept per draw :math:`k`.

    ``values`` has shape (draws, len(Ns), seeds); :math:`\bar v_{k,i}` is the mean over seeds. With
    :math:`x_i = \log N_i - \overline{\log N}` and :math:`y_{k,i}` centred per draw,

    .. math::

        \hat s = \frac{\sum_{k,i} x_i\,y_{k,i}}{D \sum_i x_i^2} ,

    the common slope of D parallel lines (a draw-specific constant, a shared rate).

    Parameters
    ----------
    Ns : (n,) array
        Positive token counts, n >= 2.
    values : (draws, n, seeds) array
        Positive values.

    Returns
    -------
    float
        :math:`\hat s`.

    Raises
    ------
    ValueError
        A shape that does not match ``Ns``, or values that are not positive and finite.

    Examples
    --------
    >>> from gtcore.stats.inference import pooled_loglog_slope
    >>> Ns = np.array([100, 400])
    >>> values = np.stack([c / np.sqrt(Ns)[:, None] * np.ones((2, 3)) for c in (1.0, 5.0)])
    >>> round(pooled_loglog_slope(Ns, values), 12)
    -0.5
    """
    Ns = np.asarray(Ns, float)
    v = np.asarray(values, float)
    if v.ndim != 3 or v.shape[1] != Ns.size or Ns.size < 2:
        raise ValueError(f"values must have shape (draws, len(Ns) >= 2, seeds), got {v.shape} for {Ns.size} Ns")
    if np.any(Ns <= 0) or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError("Ns and values must be positive and finite for a log-log slope")
    y = np.log(v.mean(axis=2))
    x = np.log(Ns) - np.log(Ns).mean()
    yc = y - y.mean(axis=1, keepdims=True)
    return float((yc @ x).sum() / (y.shape[0] * (x @ x)))


def _check_boot(n_boot: Any) -> int:
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    return int(n_boot)


def pooled_slope_standard_error(Ns: Any, values: Any, *, n_boot: int = 2000, seed: int = 0) -> float:
    r"""Bootstrap standard error of :func:`pooled_loglog_slope`: seeds resampled within each draw and N.

    Each of ``n_boot`` resamples draws, for every draw and every N independently, ``seeds`` of its
    seeds with replacement and refits the pooled slope; the result is the standard deviation
    (ddof = 1) of those slopes.

    Parameters
    ----------
    Ns : (n,) array
        Positive token counts.
    values : (draws, n, seeds) array
        Positive values, seeds >= 2.
    n_boot : int
        Bootstrap resamples (>= 2).
    seed : int
        Seed of the resampling.

    Returns
    -------
    float
        The standard error.

    Raises
    ------
    ValueError
        Fewer than 2 seeds, or a bad ``n_boot``.
    """
    v = np.asarray(values, float)
    if v.ndim != 3 or v.shape[2] < 2:
        raise ValueError(f"values must have shape (draws, n, seeds >= 2), got {v.shape}")
    n_boot = _check_boot(n_boot)
    rng = np.random.default_rng(seed)
    D, n, S = v.shape
    slopes = np.empty(n_boot)
    for k in range(n_boot):
        idx = rng.integers(0, S, size=(D, n, S))
        slopes[k] = pooled_loglog_slope(Ns, np.take_along_axis(v, idx, axis=2))
    return float(slopes.std(ddof=1))


def _resampled_slopes(Ns: np.ndarray, curves: list[np.ndarray], n_boot: int, seed: int) -> list[np.ndarray]:
    """The log-log slope of the mean over seeds of each curve (k, seeds), on ``n_boot`` resamples of the seeds,
    one set of seed indices per N shared by every curve (the pairing kept)."""
    rng = np.random.default_rng(seed)
    k, s = curves[0].shape
    idx = rng.integers(0, s, size=(n_boot, k, s))
    x = np.log(Ns) - np.log(Ns).mean()
    out = []
    for e in curves:
        means = np.take_along_axis(np.broadcast_to(e, (n_boot, k, s)), idx, axis=2).mean(axis=2)
        out.append((np.log(means) @ x) / (x @ x))
    return out


def slope_standard_error(Ns: Any, errors: Any, *, n_boot: int = 2000, seed: int = 0) -> float:
    r"""Bootstrap standard error of the log–log slope of the mean error against N.

    ``errors`` is (k, seeds): for each of ``n_boot`` resamples the seeds are drawn with replacement
    independently for each N, the mean over them is taken, and the slope of its logarithm in
    :math:`\log N` is fitted; the result is the standard deviation (ddof = 1) of those slopes.

    Parameters
    ----------
    Ns : (k,) array
        Positive token counts.
    errors : (k, seeds) array
        Positive errors, seeds >= 2.
    n_boot : int
        Bootstrap resamples (>= 2).
    seed : int
        Seed of the resampling.

    Returns
    -------
    float
        The standard error.

    Raises
    ------
    ValueError
        A shape that does not match ``Ns``, fewer than 2 seeds, or a bad ``n_boot``.
    """
    Ns = np.asarray(Ns, float)
    e = np.asarray(errors, float)
    if e.ndim != 2 or e.shape[0] != Ns.size or e.shape[1] < 2:
        raise ValueError(f"errors must have shape (len(Ns), seeds >= 2), got {e.shape}")
    (slopes,) = _resampled_slopes(Ns, [e], _check_boot(n_boot), seed)
    return float(np.std(slopes, ddof=1))


def slope_difference_standard_error(
    Ns: Any, errors_a: Any, errors_b: Any, *, n_boot: int = 2000, seed: int = 0
) -> float:
    r"""Bootstrap standard error of the difference of two log–log slopes fitted on the same seeds.

    ``errors_a`` and ``errors_b`` are (k, seeds) arrays from paired runs (seed ``s`` of one is the
    sample of seed ``s`` of the other). Each of ``n_boot`` resamples draws one set of seed indices per
    N, with replacement, and applies it to *both* arrays (:func:`slope_standard_error`'s resampling), so the
    pairing (and any correlation it causes between the two slopes) is kept; the result is the standard
    deviation (ddof = 1) of :math:`\hat s_b - \hat s_a` over the resamples.

    Parameters
    ----------
    Ns : (k,) array
        Positive token counts.
    errors_a, errors_b : (k, seeds) arrays
        Positive errors of the paired runs.
    n_boot : int
        Bootstrap resamples (>= 2).
    seed : int
        Seed of the resampling.

    Returns
    -------
    float
        The standard error of :math:`\hat s_b - \hat s_a`.

    Raises
    ------
    ValueError
        Shapes that differ or do not match ``Ns``, fewer than 2 seeds, or a bad ``n_boot``.
    """
    Ns = np.asarray(Ns, float)
    a, b = np.asarray(errors_a, float), np.asarray(errors_b, float)
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] != Ns.size or a.shape[1] < 2:
        raise ValueError(f"errors_a and errors_b must share a shape (len(Ns), seeds >= 2), got {a.shape}, {b.shape}")
    sa, sb = _resampled_slopes(Ns, [a, b], _check_boot(n_boot), seed)
    return float(np.std(sb - sa, ddof=1))


# --------------------------------------------------------------------------- signed deviations
@dataclass(frozen=True)
class HotellingTest:
    r"""Hotelling's test that R deviation vectors have mean zero.

    Attributes
    ----------
    T2 : float
        :math:`R\,\bar\delta^\top S^{-1}\bar\delta`.
    threshold : float
        The ``level`` quantile of :math:`T^2` under the null, :math:`\frac{p(R-1)}{R-p}F_{p,R-p}`.
    p_value : float
        The null probability of a larger :math:`T^2`.
    R, p : int
        Number of vectors and their length.
    level : float
        The quantile of the threshold.
    mean, standard_error : (p,) arrays
        :math:`\bar\delta` and the standard errors :math:`\sqrt{S_{jj}/R}`.
    """

    T2: float
    threshold: float
    p_value: float
    R: int
    p: int
    level: float
    mean: np.ndarray
    standard_error: np.ndarray

    @property
    def ratio(self) -> float:
        r""":math:`T^2 / T^2_{\text{level}}`: below 1 when the null is not rejected at ``level``."""
        return self.T2 / self.threshold

    def __repr__(self) -> str:
        return (
            f"HotellingTest(T2={self.T2:.3g}, threshold={self.threshold:.3g}, ratio={self.ratio:.3g}, "
            f"p_value={self.p_value:.3g}, R={self.R}, p={self.p})"
        )


def hotelling_test(deviations: Any, level: float = 0.99) -> HotellingTest:
    r"""Test that the rows of ``deviations`` (R, p) have mean zero (module docstring).

    Parameters
    ----------
    deviations : (R, p) array
        One signed deviation per independent cloud, R > p.
    level : float
        The quantile of the null distribution used as the threshold (0.99: a 1 % false alarm).

    Returns
    -------
    HotellingTest
        :math:`T^2`, its threshold and p-value.

    Raises
    ------
    ValueError
        For R <= p, a level outside (0, 1), non-finite deviations, or a singular sample covariance
        (a coordinate that does not fluctuate: leave it out).

    Examples
    --------
    With one coordinate, :math:`T^2` is the square of Student's :math:`t` (here :math:`t = 1.25/(s/2)`,
    :math:`s^2 = 5/12`, so :math:`T^2 = 15`) and the threshold the squared :math:`t_{3,\,0.995}`:

    >>> from gtcore.stats.inference import hotelling_test
    >>> x = np.array([[0.5], [1.5], [1.0], [2.0]])
    >>> h = hotelling_test(x)
    >>> round(h.T2, 6), round(h.ratio, 4)
    (15.0, 0.4397)
    """
    X = np.asarray(deviations, float)
    if X.ndim != 2:
        raise ValueError(f"deviations must be a 2-D array (R, p), got shape {X.shape}")
    R, p = X.shape
    if R <= p:
        raise ValueError(f"deviations: need more clouds than coordinates (R > p), got R = {R}, p = {p}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    if not np.all(np.isfinite(X)):
        raise ValueError("deviations must be finite")
    m = X.mean(axis=0)
    S = np.cov(X, rowvar=False, ddof=1).reshape(p, p)
    scale = np.sqrt(np.diag(S))
    if np.any(scale == 0) or np.linalg.cond(S / np.outer(scale, scale)) > 1e12:
        raise ValueError(
            "deviations: their sample covariance is singular (a coordinate that does not "
            "fluctuate, or linearly dependent coordinates); leave such coordinates out"
        )
    T2 = float(R * m @ np.linalg.solve(S, m))
    c = p * (R - 1) / (R - p)
    threshold = float(c * fdtri(p, R - p, level))  # the F(p, R - p) quantile (scipy.stats.f.ppf's own call)
    p_value = float(fdtrc(p, R - p, T2 / c))  # its survival function (scipy.stats.f.sf's)
    return HotellingTest(T2, threshold, p_value, R, p, float(level), m, scale / np.sqrt(R))


def extrapolated_deviations(small: Any, large: Any, n_small: int, n_large: int) -> np.ndarray:
    r"""Richardson-extrapolated deviations that remove an :math:`O(1/N)` bias: one vector per pair of clouds.

    When a finite-N system carries a bias :math:`c/N` on top of a zero-mean fluctuation, the deviations
    :math:`\delta_s^{(N)}` of clouds of two sizes :math:`N_1 < N_2` (independent clouds, paired by index)
    combine into

    .. math::

        z_s = \frac{N_2\,\delta_s^{(N_2)} - N_1\,\delta_s^{(N_1)}}{N_2 - N_1},

    i.i.d. vectors whose mean is the bias-free limit (the :math:`c/N` terms cancel) and whose spread is
    that of the pair: :func:`hotelling_test` on them tests the :math:`N \to \infty` deviation, with the
    :math:`O(1/N^2)` remainder neglected.

    Parameters
    ----------
    small, large : (R, p) arrays
        Deviations of R clouds of ``n_small`` and of ``n_large`` tokens.
    n_small, n_large : int
        The two cloud sizes, ``0 < n_small < n_large``.

    Returns
    -------
    (R, p) ndarray
        :math:`z_s`.

    Raises
    ------
    ValueError
        Shapes that differ, or sizes out of order.

    Examples
    --------
    >>> from gtcore.stats.inference import extrapolated_deviations
    >>> extrapolated_deviations([[0.2]], [[0.05]], 100, 400)
    array([[0.]])
    """
    a, b = np.asarray(small, float), np.asarray(large, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"small and large must be (R, p) arrays of one shape, got {a.shape} and {b.shape}")
    if not 0 < int(n_small) < int(n_large):
        raise ValueError(f"need 0 < n_small < n_large, got {n_small!r} and {n_large!r}")
    return (int(n_large) * b - int(n_small) * a) / (int(n_large) - int(n_small))


# ------------------------------------------------------------------------------ nulls and bands
def mean_of_k_quantile(
    null_values: Any, k: int, level: float = 0.99, *, resamples: int = 20000, seed: int = 0
) -> float:
    r"""The ``level`` quantile of the mean of ``k`` independent draws from the null sample ``null_values``.

    Each of ``resamples`` means averages ``k`` values drawn with replacement from ``null_values``
    (the empirical null distribution of a single value); the result is their ``level`` quantile.

    Parameters
    ----------
    null_values : (n,) array
        Values of the statistic under the null (e.g. over n Gaussian samples).
    k : int
        How many independent values the claimed mean averages.
    level : float
        The quantile, in (0, 1).
    resamples : int
        The number of resampled means.
    seed : int
        Seed of the resampling.

    Returns
    -------
    float
        The quantile.

    Raises
    ------
    ValueError
        Fewer than 2 finite null values, a bad ``k`` or ``level``.
    """
    v = np.asarray(null_values, float).ravel()
    if v.size < 2 or not np.all(np.isfinite(v)):
        raise ValueError(f"null_values must hold at least 2 finite values, got {v.size}")
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(int(resamples), int(k)))].mean(axis=1)
    return float(np.quantile(means, level))


def resample_counts(units: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    r"""The multiplicities of ``units`` units in each of ``n_boot`` bootstrap resamples: ``(n_boot, units)``
    counts of ``units`` draws with replacement (each row sums to ``units``).

    Parameters
    ----------
    units : int
        The number of resampled units (e.g. sequences).
    n_boot : int
        The number of resamples.
    rng : numpy.random.Generator
        The generator (one ``integers`` call per resample).

    Returns
    -------
    (n_boot, units) ndarray of int
        The counts.

    Examples
    --------
    >>> from gtcore.stats.inference import resample_counts
    >>> resample_counts(4, 3, np.random.default_rng(0)).sum(axis=1)
    array([4, 4, 4])
    """
    return np.array([np.bincount(rng.integers(0, units, units), minlength=units) for _ in range(int(n_boot))])


def normal_band(mean: Any, sd: Any, level: float) -> tuple[Any, Any]:
    r"""The central ``level`` band of a normal law: :math:`m \pm z\,s`, :math:`z = \Phi^{-1}((1 + \text{level})/2)`.

    Parameters
    ----------
    mean, sd : float or array
        The mean :math:`m` and the standard deviation :math:`s`.
    level : float
        The band's coverage, in (0, 1).

    Returns
    -------
    lo, hi : float or array
        :math:`m - zs` and :math:`m + zs`.

    Examples
    --------
    >>> from gtcore.stats.inference import normal_band
    >>> [round(v, 4) for v in normal_band(0.0, 1.0, 0.95)]
    [-1.96, 1.96]
    """
    half = float(ndtri(0.5 + level / 2)) * sd
    return mean - half, mean + half


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    r"""Wilson's score interval for a binomial proportion :math:`k/n` (95 % for the default ``z``).

    .. math::

        \frac{\hat p + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat p(1-\hat p)}{n} + \frac{z^2}{4n^2}}}{1 + \frac{z^2}{n}},
        \qquad \hat p = k/n .

    Parameters
    ----------
    k, n : int
        Successes and trials, :math:`0 \le k \le n`, :math:`n \ge 1`.
    z : float
        The normal quantile of the interval.

    Returns
    -------
    (float, float)
        The interval, within [0, 1].

    Raises
    ------
    ValueError
        Unless :math:`0 \le k \le n` and :math:`n \ge 1`.

    Examples
    --------
    >>> from gtcore.stats.inference import wilson_interval
    >>> [round(v, 4) for v in wilson_interval(0, 10)]
    [0.0, 0.2775]
    """
    if not (isinstance(n, (int, np.integer)) and isinstance(k, (int, np.integer)) and n >= 1 and 0 <= k <= n):
        raise ValueError(f"wilson_interval needs integers 0 <= k <= n, n >= 1, got k={k!r}, n={n!r}")
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def magnitude_interval(lo: float, hi: float) -> tuple[float, float]:
    r"""The image of :math:`[lo, hi]` under :math:`|\cdot|`.

    Parameters
    ----------
    lo, hi : float
        The interval, :math:`lo \le hi`.

    Returns
    -------
    (float, float)
        :math:`\{|x| : lo \le x \le hi\}` as an interval.

    Examples
    --------
    >>> from gtcore.stats.inference import magnitude_interval
    >>> magnitude_interval(-0.5, 2.0)
    (0.0, 2.0)
    >>> magnitude_interval(-3.0, -1.0)
    (1.0, 3.0)
    """
    if lo >= 0:
        return lo, hi
    if hi <= 0:
        return -hi, -lo
    return 0.0, max(-lo, hi)
