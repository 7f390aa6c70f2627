r"""Thresholds calibrated to the actual null of a statistic, for the chapters' finite-N claims.

Two situations recur in the book.

**A prediction started from the cloud's own moments.** When the Gaussian prediction (the moment ODE
or the exact layer map) is started from each cloud's empirical moments, the initial sampling error
cancels and what is left, the *dynamic error*, is the finite-N attention's own fluctuation: far
smaller than the sampling noise of a fresh sample, so a band built from fresh samples is much too
wide (a 10 % error in the prediction would pass it). Its actual null is that the signed deviations
of R independent clouds,

.. math::

    \delta_s = \Big(\frac{\hat\mu_s - \mu_s}{\|\Sigma_s\|_2^{1/2}},\
        \frac{\operatorname{vech}(\hat\Sigma_s - \Sigma_s)}{\|\Sigma_s\|_F}\Big), \qquad s = 1..R,

have mean zero (up to the :math:`O(1/N)` bias of a self-normalised softmax average), while a wrong
prediction gives them a common non-zero mean. :func:`hotelling_test` tests exactly that, with the
spread the clouds themselves show: Hotelling's

.. math::

    T^2 = R\,\bar\delta^\top S^{-1}\bar\delta, \qquad
    \frac{R - p}{p(R - 1)}\,T^2 \sim F_{p,\,R-p}

for Gaussian :math:`\delta_s` (p the length of :math:`\delta`, S their sample covariance). The
claims use the ratio :math:`T^2 / T^2_{0.99}`: below 1 for a prediction the clouds are consistent
with, above 1 for a near-miss prediction they reject.

**A statistic averaged over an ensemble of draws.** :func:`mean_of_k_quantile` gives the quantile
of the mean of k independent values of a statistic from its null sample (e.g. k Gaussian samples'
sliced :math:`W_2`), by resampling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import observed, predicted
from gtcore.controls import ControlsLike
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.sampling import gaussian_tokens

__all__ = ["HotellingTest", "extrapolated_deviations", "extrapolated_flow_deviations", "flow_deviations",
           "hotelling_test", "mean_of_k_quantile", "signed_deviation"]


def signed_deviation(mu_hat: Any, Sigma_hat: Any, mu: Any, Sigma: Any, *, mean: bool = True) -> np.ndarray:
    r"""The signed, scale-free deviation of a cloud's moments from a prediction (module docstring).

    Parameters
    ----------
    mu_hat, Sigma_hat : (d,), (d, d)
        The cloud's empirical moments.
    mu, Sigma : (d,), (d, d)
        The prediction.
    mean : bool
        Include the mean's part (drop it when the mean is exact by construction, e.g. a symmetric cloud).

    Returns
    -------
    (d + d(d+1)/2,) array, or (d(d+1)/2,) without the mean
        :math:`(\hat\mu - \mu)/\|\Sigma\|_2^{1/2}` then the upper triangle (row by row) of
        :math:`(\hat\Sigma - \Sigma)/\|\Sigma\|_F`.
    """
    mu_hat, mu = np.asarray(mu_hat, float), np.asarray(mu, float)
    Sigma_hat, Sigma = np.asarray(Sigma_hat, float), np.asarray(Sigma, float)
    d = Sigma.shape[0]
    if Sigma.shape != (d, d) or Sigma_hat.shape != (d, d) or mu.shape != (d,) or mu_hat.shape != (d,):
        raise ValueError(f"moments must have shapes (d,), (d, d): got mu_hat {mu_hat.shape}, Sigma_hat "
                         f"{Sigma_hat.shape}, mu {mu.shape}, Sigma {Sigma.shape}")
    iu = np.triu_indices(d)
    cov = ((Sigma_hat - Sigma) / np.linalg.norm(Sigma))[iu]
    if not mean:
        return cov
    return np.concatenate([(mu_hat - mu) / np.sqrt(np.linalg.norm(Sigma, 2)), cov])


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
    R, p : int
        Number of vectors and their length.
    level : float
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
        return (f"HotellingTest(T2={self.T2:.3g}, threshold={self.threshold:.3g}, ratio={self.ratio:.3g}, "
                f"p_value={self.p_value:.3g}, R={self.R}, p={self.p})")


def hotelling_test(deviations: Any, level: float = 0.99) -> HotellingTest:
    r"""Test that the rows of ``deviations`` (R, p) have mean zero (module docstring).

    Parameters
    ----------
    deviations : (R, p) array
        One signed deviation per independent cloud (:func:`signed_deviation`), R > p.
    level : float
        The quantile of the null distribution used as the threshold (0.99: a 1 % false alarm).

    Returns
    -------
    HotellingTest

    Raises
    ------
    ValueError
        For R <= p, a level outside (0, 1), non-finite deviations, or a singular sample covariance
        (a coordinate that does not fluctuate: leave it out).
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
        raise ValueError("deviations: their sample covariance is singular (a coordinate that does not "
                         "fluctuate, or linearly dependent coordinates); leave such coordinates out")
    T2 = float(R * m @ np.linalg.solve(S, m))
    c = p * (R - 1) / (R - p)
    threshold = float(c * stats.f.ppf(level, p, R - p))
    p_value = float(stats.f.sf(T2 / c, p, R - p))
    return HotellingTest(T2, threshold, p_value, R, p, float(level), m, scale / np.sqrt(R))


def mean_of_k_quantile(null_values: Any, k: int, level: float = 0.99, *, resamples: int = 20000,
                       seed: int = 0) -> float:
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
    resamples : int
    seed : int

    Returns
    -------
    float
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


def flow_deviations(controls: ControlsLike, mu0: Any, Sigma0: Any, T: float, n_tokens: int, seeds: int, steps: int, *,
                    predictions: Mapping[str, ControlsLike], ff: str = "identity", seed: int = 0,
                    method: str = "rk4", mean: bool = True,
                    kernel_dtype: Any = STUDY_KERNEL_DTYPE) -> dict[str, np.ndarray]:
    r"""Signed deviations of R finite clouds from moment-ODE predictions started at their own moments.

    Cloud ``s < seeds``: ``n_tokens`` tokens from :math:`N(\mu_0, \Sigma_0)` (seed ``seed + s``) moved by
    ``controls`` over :math:`[0, T]` (``steps`` steps of ``method``, activation ``ff``,
    :func:`gtcore.particles.simulate`). For each named prediction (controls whose moment ODE,
    :func:`gtcore.moments.integrate_moments`, is the prediction; for a ReLU layer that is the ODE of its
    identity-activation fold) the ODE starts from the cloud's empirical moments at :math:`t = 0`, and
    :func:`signed_deviation` of the cloud's final moments from the ODE's is recorded. Inside a
    :func:`gtbook.studies.traced.collect` block the token runs are traced as the observed side and the moment
    ODEs as the predicted one.

    Parameters
    ----------
    controls : the layer that moves the tokens
    mu0, Sigma0 : the input Gaussian
    T : horizon
    n_tokens, seeds, steps : int
    predictions : mapping name -> controls
    ff, method, kernel_dtype : passed to :func:`gtcore.particles.simulate`
    seed : int
    mean : bool
        Include the mean's part of the deviation.

    Returns
    -------
    dict name -> (seeds, p) array, ready for :func:`hotelling_test`
    """
    if isinstance(seeds, bool) or int(seeds) != seeds or seeds < 2:
        raise ValueError(f"seeds must be an integer >= 2, got {seeds!r}")
    if not predictions:
        raise ValueError("predictions must name at least one prediction")
    out: dict[str, list] = {name: [] for name in predictions}
    for s in range(int(seeds)):
        with observed():
            x0 = gaussian_tokens(int(n_tokens), mu0, Sigma0, int(seed) + s)
            tr = simulate(x0, controls, (0.0, float(T)), int(steps), method=method, ff=ff, record_every=int(steps),
                          device="cpu", kernel_dtype=kernel_dtype)
        if tr.status != "completed":
            raise ValueError(f"the token run of seed {int(seed) + s} did not complete ({tr.status})")
        for name, pred in predictions.items():
            with predicted():
                ode = integrate_moments(tr.mu[0], tr.Sigma[0], pred, (0.0, float(T)))
            if ode.status != "completed":
                raise ValueError(f"prediction {name!r}: the moment ODE did not complete ({ode.status})")
            out[name].append(signed_deviation(tr.mu[-1], tr.Sigma[-1], *ode.final, mean=mean))
    return {name: np.array(v) for name, v in out.items()}


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

    Returns
    -------
    (R, p) array
    """
    a, b = np.asarray(small, float), np.asarray(large, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"small and large must be (R, p) arrays of one shape, got {a.shape} and {b.shape}")
    if not 0 < int(n_small) < int(n_large):
        raise ValueError(f"need 0 < n_small < n_large, got {n_small!r} and {n_large!r}")
    return (int(n_large) * b - int(n_small) * a) / (int(n_large) - int(n_small))


def extrapolated_flow_deviations(controls: ControlsLike, mu0: Any, Sigma0: Any, T: float, n_tokens: int, seeds: int,
                                 steps: int, *, predictions: Mapping[str, ControlsLike], ratio: int = 3,
                                 seed: int = 0, small_seed_offset: int = 50,
                                 kernel_dtype: Any = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    r"""Covariance deviations of clouds of :math:`N_2` and :math:`N_1 = \lfloor N_2/\text{ratio}\rfloor` tokens,
    Richardson-extrapolated to remove an :math:`O(1/N)` bias.

    :func:`flow_deviations` (covariance part only) for ``seeds`` clouds of ``n_tokens`` tokens (seeds
    ``seed + s``) and ``seeds`` clouds of ``n_tokens // ratio`` tokens (seeds ``seed + small_seed_offset + s``),
    paired by index and combined by :func:`extrapolated_deviations`.

    Parameters
    ----------
    controls, mu0, Sigma0, T, steps, predictions, kernel_dtype : as in :func:`flow_deviations`
    n_tokens : int
        :math:`N_2`, the larger clouds' size.
    seeds : int
        Clouds of each size (at most ``small_seed_offset``, so the two sets of seeds do not overlap).
    ratio : int
        :math:`N_2 / N_1` (at least 2).
    seed, small_seed_offset : int

    Returns
    -------
    (extrapolated, large) : two dicts name -> (seeds, p) array
        The extrapolated deviations, and the plain ones of the :math:`N_2`-token clouds.
    """
    if isinstance(ratio, bool) or int(ratio) != ratio or ratio < 2:
        raise ValueError(f"ratio must be an integer >= 2, got {ratio!r}")
    if int(seeds) > int(small_seed_offset):
        raise ValueError(f"seeds ({seeds!r}) must not exceed small_seed_offset ({small_seed_offset!r}): "
                         "the two sets of clouds would share seeds")
    n_large, n_small = int(n_tokens), int(n_tokens) // int(ratio)
    large = flow_deviations(controls, mu0, Sigma0, T, n_large, seeds, steps, predictions=predictions, seed=seed,
                            mean=False, kernel_dtype=kernel_dtype)
    small = flow_deviations(controls, mu0, Sigma0, T, n_small, seeds, steps, predictions=predictions,
                            seed=int(seed) + int(small_seed_offset), mean=False, kernel_dtype=kernel_dtype)
    return {k: extrapolated_deviations(small[k], large[k], n_small, n_large) for k in predictions}, large
