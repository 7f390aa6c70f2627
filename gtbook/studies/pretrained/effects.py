r"""The effect sizes of chapter 5's criterion: how far a token cloud is from Gaussian, with an interval.

The criterion (:mod:`gtbook.studies.pretrained.criterion`, registered in issue 23 before any run)
compares, layer by layer, the **debiased effect size** :math:`\Delta_s` of a model's token cloud with that
of a fixed, moderate departure. This module computes those effect sizes. For each statistic :math:`s`
of :data:`STATISTICS`, computed **within sequences** (each of the :math:`S` sequences of :math:`T` tokens
centred on its own mean, the sampling unit being the sequence; :func:`cloud_statistics`):

* :math:`\Delta_s`: the statistic minus its mean under true Gaussian samples of the same shape
  :math:`(S, T)` and rank :math:`r` (:func:`null_moments`); for the sliced :math:`W_2`,
  :math:`\Delta = \sqrt{\max(0,\, SW_2^2 - \mathbb{E}[SW_{2,\mathrm{null}}^2])}`; with a 95% confidence
  interval from a bootstrap over sequences (:func:`effect_sizes`);
* the reference: the same effect size for i.i.d. moment-matched multivariate Student-:math:`t` tokens of
  the same shape and rank (:func:`student_t_cloud`, :func:`reference_effect_sizes`).

Readings this module had to make, fixed before any model was run
----------------------------------------------------------------
* **Effect sizes are magnitudes.** For the two kurtosis statistics the debiased difference
  :math:`\theta_s = s - \mathbb{E}_{\mathrm{null}}[s]` can be negative (lighter tails than Gaussian);
  :math:`\Delta_s = |\theta_s|`, and the interval of :math:`\Delta_s` is the image of
  :math:`\theta_s`'s interval under :math:`|\cdot|` (:math:`[0, \max(-lo, hi)]` when it contains 0). A
  light-tailed departure is a departure: a signed comparison would call any strongly light-tailed
  cloud "close". For the sliced :math:`W_2`, :math:`\theta = SW_2^2 - \mathbb{E}[SW^2_{2,\mathrm{null}}]`
  and :math:`\Delta = \sqrt{\max(0, \theta)}` (the issue's formula), interval mapped the same way.
* **The interval** is the bootstrap-standard-error interval over sequences:
  :math:`B` replicates resample the :math:`S` sequences with replacement and recompute the whole
  statistic (whitening included); each replicate is debiased like the estimate, by the mean of the
  same statistic over :math:`P` Gaussian samples resampled with the *same multiplicities*
  (``NullMoments.resampled``), :math:`\theta^*_b = g(x^{*b}) - \bar g_{\rm null}(c_b)`; then
  :math:`\theta \pm t_{S-1,\,0.975}\,\mathrm{se}` with
  :math:`\mathrm{se}^2 = \frac{S}{S-1}\mathrm{Var}_B(\theta^*) + \mathrm{Var}_{\mathrm{null}}/R`: the
  factor :math:`S/(S-1)` and the :math:`t` quantile because only :math:`S` units are resampled (8 in the
  small run), the last term for the Monte Carlo error of the null mean over :math:`R` Gaussian
  samples. A percentile interval would need the same null and undercovers with 8 units.

  *Why the replicates are debiased.* A resample repeats sequences, and in dimension :math:`r = 383`
  with :math:`n = 4096` tokens the statistics of a sample with repeated points depend strongly on the
  pattern of repeats (whitening with a covariance of fewer distinct points). Without the
  pattern-matched null, the bootstrap standard error of a *Gaussian* cloud was 10 (sliced :math:`W_2`)
  to 70 (Mardia) times its actual sampling spread at :math:`S = 8`, :math:`d = 384` (measured on
  Gaussian samples, before any model was run), so wide that an exact Gaussian was not "close" to the
  reference; with it, 1.3-2.8 times (conservative: the :math:`P` pooled samples add their own noise).
  This was found and fixed before any model was run.

  *Coverage, measured* (``tests/studies/test_pretrained_criterion.py``, before any model was run): with tokens
  coupled within each sequence by a softmax attention layer and a nonlinearity, :math:`S = 8`, the
  intervals cover 91-97% of the time. When sequences differ strongly in scale (a per-sequence factor
  :math:`e^{0.35 g}`, :math:`g \sim N(0,1)`), the effects are a variance of :math:`S` lognormal draws,
  their sampling law is very skewed, and these intervals (like the jackknife's) cover only 74-82%, at
  :math:`S = 8` and :math:`S = 32` alike: intervals are then too short.
* **Ranks.** A layer's statistics use the numerical rank of its centred covariance; the null and the
  reference are drawn in that rank, ranks within 1% of each other (a post-LayerNorm :math:`d - 1` and an
  input :math:`d`) sharing the first one met.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import t as student_t
from threadpoolctl import threadpool_limits

from gtbook.cache import disk_cache
from gtbook.studies.traced import Sides, collect, merge, predicted
from gtcore._linalg import RANK_RTOL
from gtcore._progress import progress as progress_bar
from gtcore.stats.gaussianity import _normal_quantile_weights
from gtcore.stats.inference import magnitude_interval, normal_band, resample_counts

#: the three statistics of the criterion, in table order: name -> short label
STATISTICS = {
    "sliced_w2": "sliced W2",
    "mardia_excess": "Mardia kurtosis excess",
    "coord_kurtosis": "mean |coordinate excess kurtosis|",
}
#: the reference law's degrees of freedom (the registered criterion) and the sensitivity values


# named streams of one seed (numpy SeedSequence([seed, stream, ...])): never plain seed offsets
_TOKENS, _DIRECTIONS, _BOOTSTRAP, _NULL, _REFERENCE, _CONTROL = range(1, 7)


def stream(seed: int, *keys: int) -> np.random.SeedSequence:
    """The seed sequence of a named stream of ``seed`` (inputs, directions, bootstrap, null, reference)."""
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.SeedSequence([int(seed), *map(int, keys)])


@dataclass(frozen=True)
class Settings:
    r"""How the effect sizes are computed (not the criterion itself, which is fixed).

    Attributes
    ----------
    n_projections : int
        Directions :math:`K` of the sliced :math:`W_2`.
    n_boot : int
        Bootstrap replicates :math:`B` over sequences.
    null_repeats : int
        Gaussian samples :math:`R` for the null mean.
    null_pool : int
        How many of those Gaussian samples are resampled with each replicate's multiplicities, to debias
        the replicate (:math:`P \le R`).
    level : float
        Central probability of the confidence intervals (0.95 in the criterion).
    """

    n_projections: int = 128
    n_boot: int = 64
    null_repeats: int = 32
    null_pool: int = 4
    level: float = 0.95

    def __post_init__(self):
        if (
            isinstance(self.null_pool, bool)
            or int(self.null_pool) != self.null_pool
            or not (1 <= self.null_pool <= self.null_repeats)
        ):
            raise ValueError(f"null_pool must be an integer in [1, null_repeats], got {self.null_pool!r}")
        for name in ("n_projections", "n_boot", "null_repeats"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 2:
                raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")


# ======================================================================== the statistics of one cloud
@dataclass
class _Cloud:
    """A centred (S, T, d) sample with what every replicate needs precomputed."""

    z32: np.ndarray  # (S, T, d) float32, each sequence centred on its own mean
    scatter: np.ndarray  # (S, d, d) float64, per-sequence sum of z z^T
    m2: np.ndarray  # (S, d) per-sequence sums of z_a^2
    m4: np.ndarray  # (S, d) per-sequence sums of z_a^4
    theta: np.ndarray  # (d, K) Gaussian directions in the ambient space
    rank: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.z32.shape


def _cloud(x: Any, n_projections: int, seed: int, per_sequence: bool = True) -> _Cloud:
    """The centred cloud with what the replicates need; ``per_sequence=False`` keeps only the totals (a cloud of
    one "sequence" of all S T centred tokens: the same statistics with unit weights, no resampling)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"x must have shape (S, T, d) with S >= 2 and T >= 2, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must be finite")
    S, T, d = arr.shape
    z = arr - arr.mean(axis=1, keepdims=True)
    if not per_sequence:
        z = z.reshape(1, S * T, d)
    scatter = np.matmul(z.transpose(0, 2, 1), z)  # every BLAS thread: clouds are built outside the workers
    sq = z * z
    w = np.linalg.eigvalsh(scatter.sum(axis=0) / (S * T))
    if w[-1] <= 0:
        raise ValueError("x has zero within-sequence covariance: nothing to whiten")
    rank = int(np.sum(w > RANK_RTOL * w[-1]))
    theta = np.random.default_rng(stream(seed, _DIRECTIONS)).standard_normal((d, int(n_projections)))
    return _Cloud(z.astype(np.float32), scatter, sq.sum(axis=1), (sq * sq).sum(axis=1), theta, rank)


def _values(cl: _Cloud, counts: np.ndarray) -> np.ndarray:
    r"""The three statistics of the multiset of sequences with multiplicities ``counts``."""
    _, T, d = cl.shape
    idx = np.flatnonzero(counts)
    c = counts[idx].astype(np.float64)
    n = int(counts.sum()) * T
    r = cl.rank
    # sum_s c_s scatter_s / n as one matrix-vector product over the flattened scatters (absent ones weigh 0)
    w, U = np.linalg.eigh((counts.astype(np.float64) @ cl.scatter.reshape(len(counts), d * d)).reshape(d, d) / n)
    w, U = w[-r:], U[:, -r:]
    W = U / np.sqrt(w)  # y = W^T z: whitened coordinates on the range
    Th = U.T @ cl.theta  # the directions seen in those coordinates, unit length
    Th /= np.linalg.norm(Th, axis=0)
    zu = cl.z32[idx].reshape(-1, d)
    Y = zu @ W.astype(np.float32)  # (len(idx) T, r)
    q = np.einsum("ij,ij->i", Y, Y, dtype=np.float64).reshape(len(idx), T)
    b2 = float(c @ (q * q).sum(axis=1)) / n
    mardia = (b2 - r * (r + 2)) / (r * (r + 2))
    P = (W @ Th).T.astype(np.float32) @ zu.T  # (K, len(idx) T): one projection per row
    P = np.repeat(P.reshape(-1, len(idx), T), counts[idx], axis=1).reshape(P.shape[0], n)
    P.sort(axis=1)  # standardising each row (below) is increasing affine: it keeps the order
    P = P.astype(np.float64)
    m = P.mean(axis=1)  # ~0: every sequence is centred; the variance from the second moment loses nothing
    sd = np.sqrt(np.maximum(np.einsum("ij,ij->i", P, P) / n - m * m, 0.0))
    wts = _normal_quantile_weights(n)
    # W2^2 of the standardised row p~ = (p - m)/sd to N(0, 1): mean(p~^2) - 2 p~ . wts + 1, mean(p~^2) = 1
    w2 = 2.0 - 2.0 * (P @ wts - m * wts.sum()) / np.where(sd > 0, sd, 1.0)
    sw2 = math.sqrt(max(float(np.mean(w2)), 0.0))
    m2, m4 = c @ cl.m2[idx], c @ cl.m4[idx]
    ok = m2 > 0
    kurt = n * m4[ok] / m2[ok] ** 2 - 3.0
    return np.array([sw2, mardia, float(np.mean(np.abs(kurt))) if kurt.size else math.nan])


def cloud_statistics(x: Any, *, n_projections: int = 128, seed: int = 0) -> dict[str, float]:
    r"""The three statistics of :data:`STATISTICS` of an :math:`(S, T, d)` cloud, within sequences.

    With :math:`z_{s,t} = x_{s,t} - \bar x_s` pooled (:math:`n = ST`), :math:`\hat\Sigma = \frac1n
    \sum z z^\top = U \Lambda U^\top` on its numerical range (rank :math:`r`),
    :math:`y = \Lambda_r^{-1/2} U_r^\top z`:

    .. math::

        SW_2 = \Big(\frac1K\sum_k W_2^2\big(\mathrm{std}(\vartheta_k^\top y), N(0,1)\big)\Big)^{1/2},\quad
        \kappa_M = \frac{\frac1n\sum\|y\|^4 - r(r+2)}{r(r+2)},\quad
        \bar\kappa = \frac1d\sum_a\Big|\frac{\frac1n\sum z_a^4}{(\frac1n\sum z_a^2)^2} - 3\Big|,

    with :math:`\vartheta_k = U_r^\top\theta_k/\|U_r^\top\theta_k\|`, :math:`\theta_k \sim N(0, I_d)` seeded
    (uniform on the range's sphere, whatever basis ``eigh`` returns), and the exact 1-D :math:`W_2` of
    :func:`gtcore.stats.gaussianity.w2_to_standard_normal`. Matrix products run in float32, sums in float64.

    Parameters
    ----------
    x : (S, T, d) array, S >= 2 sequences of T >= 2 tokens
    n_projections : int
        Directions :math:`K`.
    seed : int
        Seed of the directions (stream ``directions`` of :func:`stream`).

    Returns
    -------
    dict statistic -> float
    """
    cl = _cloud(x, n_projections, seed)
    with threadpool_limits(limits=1, user_api="blas"):
        return dict(zip(STATISTICS, map(float, _values(cl, np.ones(cl.shape[0], dtype=np.int64))), strict=True))


def _square(values: np.ndarray) -> np.ndarray:
    """The debiased scale: :math:`SW_2^2` and the kurtosis statistics as they are (last axis)."""
    out = np.array(values, dtype=np.float64)
    out[..., 0] = out[..., 0] ** 2
    return out


def _workers() -> int:
    try:
        import torch

        return max(1, int(torch.get_num_threads()))
    except ImportError:  # pragma: no cover - torch is a dependency
        return max(1, min(2, os.cpu_count() or 1))


def _evaluate(
    tasks: Sequence[tuple[_Cloud, np.ndarray]], progress: bool = False, desc: str = "bootstrap"
) -> np.ndarray:
    """The statistics of each ``(cloud, counts)`` task, in order (threads over tasks, one BLAS thread each)."""
    tasks = list(tasks)
    with threadpool_limits(limits=1, user_api="blas"):
        n_workers = min(_workers(), len(tasks))
        if n_workers <= 1:
            rows = [_values(cl, c) for cl, c in progress_bar(tasks, desc, enabled=progress)]
        else:
            with ThreadPoolExecutor(n_workers) as ex:
                rows = list(
                    progress_bar(ex.map(lambda t: _values(*t), tasks), desc, enabled=progress, total=len(tasks))
                )
    return np.array(rows)


def _replicates(cl: _Cloud, counts: np.ndarray, progress: bool = False, desc: str = "bootstrap") -> np.ndarray:
    """The statistics of each resample ``counts[b]`` of one cloud (:func:`_evaluate`)."""
    return _evaluate([(cl, c) for c in counts], progress, desc)


# ================================================================================= null and effects
@dataclass(frozen=True)
class NullMoments:
    r"""The statistics over :math:`R` true Gaussian samples :math:`N(0, I_r)` of shape :math:`(S, T)`,
    centred within sequences like the data.

    Attributes
    ----------
    sequences, tokens, rank, repeats : int
    mean, sd : dict statistic -> float
        Mean and standard deviation (ddof 1) of the statistic itself (the old noise band).
    mean_sq, sd_sq : dict statistic -> float
        The same on the debiased scale (:math:`SW_2^2`; the kurtosis statistics unchanged).
    resampled : (B, 3) array
        For each bootstrap replicate :math:`b` of ``seed`` (:func:`bootstrap_counts`): the mean, over the
        first :math:`P` of the Gaussian samples, of the statistics (debiased scale) of the sample
        resampled with replicate :math:`b`'s multiplicities: the null mean of that replicate.
    sides : Sides
        The traced side that computed it, predicted (:mod:`gtbook.studies.traced`; kept with the disk cache's copy).
    """

    sequences: int
    tokens: int
    rank: int
    repeats: int
    mean: dict
    sd: dict
    mean_sq: dict
    sd_sq: dict
    resampled: np.ndarray = field(repr=False)
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def band(self, statistic: str, level: float = 0.99) -> tuple[float, float]:
        r"""The old noise band :math:`\text{mean} \pm z\,\text{sd}`, :math:`z = \Phi^{-1}((1+\text{level})/2)`."""
        return normal_band(self.mean[statistic], self.sd[statistic], level)

    def __repr__(self) -> str:
        return (
            f"NullMoments(S={self.sequences}, T={self.tokens}, r={self.rank}, R={self.repeats}, "
            f"E[SW2^2]={self.mean_sq['sliced_w2']:.3g})"
        )


@functools.lru_cache(maxsize=64)
def null_moments(sequences: int, tokens: int, rank: int, *, seed: int, settings: Settings = Settings()) -> NullMoments:
    r"""The statistics of :data:`STATISTICS` over ``settings.null_repeats`` Gaussian samples.

    Each sample is :math:`x_{s,t} \sim N(0, I_r)` i.i.d., :math:`s \le S`, :math:`t \le T` (stream
    ``null`` of ``seed``), through :func:`cloud_statistics` (every statistic is affine invariant, and
    the per-coordinate kurtosis of a Gaussian does not depend on its covariance, so :math:`N(0, I_r)`
    stands for every Gaussian of rank :math:`r`). Cached per process and on disk (:func:`gtbook.cache.disk_cache`,
    keyed like the trained weights: the arguments, the sources this module runs and the package versions), so the
    null of a shape is computed once for every model, mode and rerun that needs it.

    Parameters
    ----------
    sequences, tokens, rank : int
        :math:`S \ge 2`, :math:`T \ge 2`, :math:`r \ge 1`.
    seed : int
    settings : Settings

    Returns
    -------
    NullMoments
    """
    for name, v, low in (("sequences", sequences, 2), ("tokens", tokens, 2), ("rank", rank, 1)):
        if isinstance(v, bool) or int(v) != v or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    stream(seed)  # a valid seed, checked before the cache
    return _null_moments(int(sequences), int(tokens), int(rank), seed=int(seed), settings=settings)


@disk_cache
def _null_moments(sequences: int, tokens: int, rank: int, *, seed: int, settings: Settings) -> NullMoments:
    """:func:`null_moments` on checked arguments (the disk-cached computation)."""
    with collect() as sides, predicted():  # the null: Gaussian samples and the statistics on them
        rng = np.random.default_rng(stream(seed, _NULL, rank))
        one = np.ones(int(sequences), dtype=np.int64)
        counts = bootstrap_counts(int(sequences), settings.n_boot, seed)
        rows: list[np.ndarray] = []
        pooled: list[np.ndarray] = []
        batch: list[_Cloud] = []  # unpooled samples, evaluated a few at a time (bounded memory)
        for k in range(settings.null_repeats):
            pool = k < settings.null_pool  # resampled below: keep the per-sequence sums
            cl = _cloud(
                rng.standard_normal((int(sequences), int(tokens), int(rank))),
                settings.n_projections,
                seed,
                per_sequence=pool,
            )
            if pool:  # the sample itself, then its B resamples
                own = _evaluate([(cl, one), *((cl, c) for c in counts)])
                rows.append(own[0])
                pooled.append(_square(own[1:]))
            else:
                batch.append(cl)
            if batch and (len(batch) == 2 * _workers() or k == settings.null_repeats - 1):
                rows.extend(_evaluate([(b, one[:1]) for b in batch]))
                batch = []
        vals = np.array(rows)
        sq = _square(vals)
        names = list(STATISTICS)
    return NullMoments(
        int(sequences),
        int(tokens),
        int(rank),
        settings.null_repeats,
        dict(zip(names, vals.mean(0), strict=True)),
        dict(zip(names, vals.std(0, ddof=1), strict=True)),
        dict(zip(names, sq.mean(0), strict=True)),
        dict(zip(names, sq.std(0, ddof=1), strict=True)),
        np.mean(pooled, axis=0),
        sides,
    )


def bootstrap_counts(sequences: int, n_boot: int, seed: int) -> np.ndarray:
    r"""The multiplicities of the :math:`S` sequences in each of :math:`B` bootstrap replicates: ``(B, S)``
    counts of :math:`S` draws with replacement (stream ``bootstrap`` of ``seed``; the same for every layer)."""
    return resample_counts(sequences, n_boot, np.random.default_rng(stream(seed, _BOOTSTRAP)))


@dataclass
class EffectSizes:
    r"""The debiased effect sizes of one cloud, with confidence intervals.

    Attributes
    ----------
    raw : dict statistic -> float
        The statistic of :func:`cloud_statistics`.
    theta, se : dict statistic -> float
        :math:`\theta_s` on the debiased scale (:math:`SW_2^2 - \mathbb{E}_{\rm null}`, kurtosis
        statistics minus their null mean) and its standard error.
    value, low, high : dict statistic -> float
        :math:`\Delta_s` and its interval (see the module's readings).
    sequences, tokens, rank, n_boot : int
    level : float
    sides : Sides
        For a reference law's effect sizes, the traced side that computed them, predicted (its samples, their
        statistics and the null; :mod:`gtbook.studies.traced`); empty for a model's layer (the statistic there is
        the comparison).
    """

    raw: dict
    theta: dict
    se: dict
    value: dict
    low: dict
    high: dict
    sequences: int
    tokens: int
    rank: int
    n_boot: int
    level: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def __repr__(self) -> str:
        cells = ", ".join(f"{s}={self.value[s]:.3g} [{self.low[s]:.3g}, {self.high[s]:.3g}]" for s in STATISTICS)
        return f"EffectSizes(S={self.sequences}, T={self.tokens}, r={self.rank}: {cells})"


def _effects(cl: _Cloud, null: NullMoments, seed: int, settings: Settings, progress: bool = False) -> EffectSizes:
    S = cl.shape[0]
    counts = bootstrap_counts(S, settings.n_boot, seed)
    if null.resampled.shape[0] != len(counts):
        raise ValueError(f"null was computed for {null.resampled.shape[0]} replicates, settings ask {len(counts)}")
    rows = _replicates(cl, np.vstack([np.ones(S, dtype=np.int64), counts]), progress)  # the cloud, then B resamples
    raw = rows[0]
    # each replicate debiased like the estimate: minus the null mean of a sample resampled the same way
    boot = _square(rows[1:]) - null.resampled
    g = _square(raw)
    tq = float(student_t.ppf(0.5 + settings.level / 2, S - 1))
    out: dict[str, dict] = {k: {} for k in ("raw", "theta", "se", "value", "low", "high")}
    for j, s in enumerate(STATISTICS):
        theta = float(g[j] - null.mean_sq[s])
        se = math.sqrt(S / (S - 1) * float(np.var(boot[:, j], ddof=1)) + null.sd_sq[s] ** 2 / null.repeats)
        lo, hi = theta - tq * se, theta + tq * se
        if s == "sliced_w2":
            value = math.sqrt(max(theta, 0.0))
            low, high = math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))
        else:
            value = abs(theta)
            low, high = magnitude_interval(lo, hi)
        for k, v in zip(out, (float(raw[j]), theta, se, value, low, high), strict=True):
            out[k][s] = v
    return EffectSizes(
        out["raw"],
        out["theta"],
        out["se"],
        out["value"],
        out["low"],
        out["high"],
        sequences=S,
        tokens=cl.shape[1],
        rank=cl.rank,
        n_boot=settings.n_boot,
        level=settings.level,
    )


def effect_sizes(
    x: Any, *, seed: int, settings: Settings = Settings(), null: NullMoments | None = None, progress: bool = False
) -> EffectSizes:
    r"""The debiased effect sizes :math:`\Delta_s` of an :math:`(S, T, d)` cloud with bootstrap intervals.

    .. math::

        \theta_s = g_s(x) - \mathbb{E}_{\rm null}[g_s], \qquad
        \mathrm{se}_s^2 = \frac{S}{S-1}\,\mathrm{Var}_B\big(g_s(x^{*b})\big) + \frac{\mathrm{Var}_{\rm null}(g_s)}{R},
        \qquad \theta_s \pm t_{S-1,(1+\text{level})/2}\,\mathrm{se}_s,

    :math:`g = SW_2^2` for the sliced :math:`W_2` (:math:`\Delta = \sqrt{\max(0,\theta)}`) and the statistic
    itself for the kurtosis statistics (:math:`\Delta = |\theta|`), :math:`x^{*b}` the cloud of :math:`S`
    sequences drawn with replacement (stream ``bootstrap`` of ``seed``), every statistic recomputed,
    whitening included.

    Parameters
    ----------
    x : (S, T, d) array
    seed : int
        Seed of the directions, the resampling and (when ``null`` is not given) the null samples.
    settings : Settings
    null : NullMoments, optional
        The null of the same shape and rank (default :func:`null_moments` at the cloud's rank).
    progress : bool
        A bar over the replicates.

    Returns
    -------
    EffectSizes
    """
    cl = _cloud(x, settings.n_projections, seed)
    S, T, _ = cl.shape
    if null is None:
        null = null_moments(S, T, cl.rank, seed=seed, settings=settings)
    elif (null.sequences, null.tokens) != (S, T):
        raise ValueError(f"null must have the cloud's shape (S, T) = ({S}, {T}), got ({null.sequences}, {null.tokens})")
    return _effects(cl, null, seed, settings, progress)


def student_t_cloud(sequences: int, tokens: int, dim: int, nu: float, seed: np.random.SeedSequence | int) -> np.ndarray:
    r""":math:`(S, T, r)` i.i.d. multivariate Student-:math:`t` tokens with identity covariance.

    :math:`x = \sqrt{(\nu-2)/\nu}\; z/\sqrt{g/\nu}`, :math:`z \sim N(0, I_r)`, :math:`g \sim \chi^2_\nu`:
    mean 0, covariance :math:`I_r`, every coordinate with excess kurtosis :math:`6/(\nu-4)` and Mardia
    relative excess :math:`2/(\nu-4)`.
    """
    if not nu > 4:
        raise ValueError(f"nu must exceed 4 (a finite kurtosis), got {nu!r}")
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((int(sequences), int(tokens), int(dim)))
    g = rng.chisquare(nu, size=(int(sequences), int(tokens), 1))
    return np.sqrt((nu - 2) / nu) * z / np.sqrt(g / nu)


@functools.lru_cache(maxsize=64)
def reference_effect_sizes(
    nu: float,
    sequences: int,
    tokens: int,
    rank: int,
    *,
    seed: int,
    settings: Settings = Settings(),
    control: bool = False,
) -> EffectSizes:
    r"""The effect sizes of moment-matched Student-:math:`t` tokens (:func:`student_t_cloud`) of shape
    :math:`(S, T)` in dimension ``rank``, with their intervals: the reference of the criterion
    (:math:`\nu = 20`) or of its sensitivity (:math:`\nu = 10, 50`).

    Stream ``reference`` of ``seed`` (``control=True``: an independent draw of the same law, stream
    ``control``, for the power control). Cached per process and on disk, like :func:`null_moments`.
    """
    stream(seed)  # a valid seed, checked before the cache
    if not float(nu) > 4:
        raise ValueError(f"nu must exceed 4 (a finite kurtosis), got {nu!r}")
    return _reference_effect_sizes(
        float(nu), int(sequences), int(tokens), int(rank), seed=int(seed), settings=settings, control=bool(control)
    )


@disk_cache
def _reference_effect_sizes(
    nu: float, sequences: int, tokens: int, rank: int, *, seed: int, settings: Settings, control: bool
) -> EffectSizes:
    """:func:`reference_effect_sizes` on checked arguments (the disk-cached computation)."""
    ss = stream(seed, _CONTROL if control else _REFERENCE, round(float(nu) * 1000), int(rank))
    with collect() as sides, predicted():  # the reference law: its samples, their statistics and the null
        x = student_t_cloud(sequences, tokens, rank, float(nu), ss)
        null = null_moments(int(sequences), int(tokens), int(rank), seed=seed, settings=settings)
        out = effect_sizes(x, seed=seed, settings=settings, null=null)
    out.sides = merge(sides, null.sides)
    return out


__all__ = [
    "STATISTICS",
    "EffectSizes",
    "NullMoments",
    "Settings",
    "bootstrap_counts",
    "cloud_statistics",
    "effect_sizes",
    "magnitude_interval",
    "null_moments",
    "reference_effect_sizes",
    "stream",
    "student_t_cloud",
]
