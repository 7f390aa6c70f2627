r"""Where Gaussian invariance ends: Gaussian mixtures, labelled tokens, and a cloud followed in time.

The paper proves that a Gaussian stays Gaussian under self-attention with an affine feed-forward
layer, because the attention average against :math:`N(\mu, \Sigma)` is affine in the query,
:math:`\mu + \Sigma B x`. Against a Gaussian mixture
:math:`\rho = \sum_k w_k N(\mu_k, \Sigma_k)` it is a softmax-gated blend of such affine maps,

.. math::

    \frac{\int y\, e^{y^\top B x}\, d\rho(y)}{\int e^{y^\top B x}\, d\rho(y)}
        = \sum_k \pi_k(x)\,(\mu_k + \Sigma_k B x), \qquad
    \pi_k(x) = \frac{w_k\, e^{\mu_k^\top B x + \frac12 x^\top B^\top \Sigma_k B x}}
        {\sum_l w_l\, e^{\mu_l^\top B x + \frac12 x^\top B^\top \Sigma_l B x}},

which is not affine in :math:`x`: mixtures are not an invariant class, and each component
stops being Gaussian. This module samples mixtures with component labels, evaluates that exact
attention average, measures statistics per label (each against its own noise floor), follows a
token cloud at prescribed times, and compares the cloud's moments with the moment ODE
(eq. 1.1) of the identity-activation layer (the affine fold).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from ._progress import progress as progress_bar
from ._validation import as_float_array, check_covariance, check_finite, check_positive, check_tokens
from .controls import ControlsLike
from .gaussianity import NoiseFloor, _STATISTICS, bures_wasserstein, noise_floor
from .moments import integrate_moments
from .particles import simulate
from .sampling import covariance_factor

#: tolerance on the sum of the mixture weights
WEIGHT_ATOL = 1e-12


# ---------------------------------------------------------------------------- mixtures
@dataclass(frozen=True, eq=False)
class GaussianMixture:
    r"""A Gaussian mixture :math:`\rho = \sum_{k=1}^K w_k N(\mu_k, \Sigma_k)` on :math:`\mathbb{R}^d`.

    Parameters
    ----------
    weights : (K,) array
        Non-negative, summing to 1 (to 1e-12).
    means : (K, d) array, or a sequence of K (d,) vectors
    covariances : (K, d, d) array, or a sequence of K (d, d) symmetric PSD matrices
        (rank-deficient allowed)

    Raises
    ------
    ValueError
        Negative weights, weights not summing to 1, or components of mismatched dimension (the
        message names ``weights``, ``means`` or ``covariances``).
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray

    def __init__(self, weights: Any, means: Any, covariances: Any) -> None:
        w = as_float_array(weights, "weights")
        if w.ndim != 1 or w.size < 1:
            raise ValueError(f"weights must be a non-empty vector of shape (K,), got shape {w.shape}")
        check_finite(w, "weights")
        if np.any(w < 0):
            raise ValueError(f"weights must be non-negative, got {w.tolist()}")
        if abs(w.sum() - 1.0) > WEIGHT_ATOL:
            raise ValueError(f"weights must sum to 1, got sum {w.sum():.15g}")
        K = w.size
        means_list = _components(means, "means", K, ndim=1)
        covs_list = _components(covariances, "covariances", K, ndim=2)
        d = means_list[0].shape[0]
        for k, m in enumerate(means_list):
            if m.shape != (d,):
                raise ValueError(f"means: component {k} has dimension {m.shape[0]}, component 0 has {d}")
        for k, S in enumerate(covs_list):
            if S.shape != (d, d):
                raise ValueError(f"covariances: component {k} has shape {S.shape}, the means need ({d}, {d})")
        mu = np.stack([np.asarray(m, float) for m in means_list])
        check_finite(mu, "means")
        Sig = np.stack([check_covariance(S, f"covariances[{k}]") for k, S in enumerate(covs_list)])
        for name, arr in (("weights", w), ("means", mu), ("covariances", Sig)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def d(self) -> int:
        """Dimension of the tokens."""
        return self.means.shape[1]

    @property
    def components(self) -> int:
        """Number of components K."""
        return self.weights.size

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Mean and covariance of the mixture (those of its moment-matched Gaussian).

        .. math::

            \mu = \sum_k w_k \mu_k, \qquad
            \Sigma = \sum_k w_k \big(\Sigma_k + (\mu_k - \mu)(\mu_k - \mu)^\top\big).
        """
        mu = self.weights @ self.means
        dm = self.means - mu
        S = np.einsum("k,kij->ij", self.weights, self.covariances) + np.einsum("k,ki,kj->ij", self.weights, dm, dm)
        return mu, 0.5 * (S + S.T)

    def sample(self, n: int, seed: int | np.random.Generator | None = 0) -> "LabelledTokens":
        r"""``n`` i.i.d. tokens with their component labels.

        Labels are drawn i.i.d. from ``weights`` (so component sizes are multinomial), then
        :math:`x_i = \mu_{k_i} + L_{k_i} z_i` with :math:`L_k L_k^\top = \Sigma_k`,
        :math:`z_i \sim N(0, I)`. The same seed gives the same tokens and labels.
        """
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        labels = rng.choice(self.components, size=int(n), p=self.weights)
        z = rng.standard_normal((int(n), self.d))
        x = np.empty((int(n), self.d))
        for k in range(self.components):
            idx = labels == k
            x[idx] = self.means[k] + z[idx] @ covariance_factor(self.covariances[k]).T
        return LabelledTokens(tokens=x, labels=labels)

    def attention_average(self, x: Any, B: Any) -> np.ndarray:
        r"""The exact attention average against the mixture, :math:`\sum_k \pi_k(x)(\mu_k + \Sigma_k B x)`.

        See the module docstring for :math:`\pi_k`. For one component it is the affine map
        :math:`\mu + \Sigma B x` of the paper's Gaussian tilt.

        Parameters
        ----------
        x : (n, d) array of query tokens
        B : (d, d) query-key matrix (logits :math:`y^\top B x`)

        Returns
        -------
        (n, d) array
        """
        x = check_tokens(x, "x", self.d)
        B = as_float_array(B, "B")
        if B.shape != (self.d, self.d):
            raise ValueError(f"B must have shape ({self.d}, {self.d}), got shape {B.shape}")
        check_finite(B, "B")
        q = x @ B.T                                                   # B x
        logits = (np.log(np.where(self.weights > 0, self.weights, 1.0))[None, :]
                  + q @ self.means.T
                  + 0.5 * np.einsum("ni,kij,nj->nk", q, self.covariances, q))
        logits[:, self.weights == 0] = -np.inf
        pi = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        tilts = self.means[None] + np.einsum("kij,nj->nki", self.covariances, q)
        return np.einsum("nk,nki->ni", pi, tilts)


def _components(x: Any, name: str, K: int, ndim: int) -> list[np.ndarray]:
    if isinstance(x, (list, tuple)):
        parts = [as_float_array(p, f"{name}[{k}]") for k, p in enumerate(x)]
    else:
        arr = as_float_array(x, name)
        if arr.ndim != ndim + 1:
            raise ValueError(f"{name} must hold one {'vector' if ndim == 1 else 'matrix'} per component, "
                             f"got shape {arr.shape}")
        parts = list(arr)
    if len(parts) != K:
        raise ValueError(f"{name} must hold one entry per weight: {K} expected, got {len(parts)}")
    for k, p in enumerate(parts):
        if p.ndim != ndim:
            raise ValueError(f"{name}: component {k} must have {ndim} dimension(s), got shape {p.shape}")
    return parts


@dataclass(frozen=True)
class LabelledTokens:
    """Tokens (N, d) with an integer label per token (N,)."""

    tokens: np.ndarray
    labels: np.ndarray

    def counts(self) -> np.ndarray:
        """Number of tokens per label 0..K-1."""
        return np.bincount(self.labels)


# -------------------------------------------------------------------- per-label statistics
def _statistic(statistic: Callable[[np.ndarray], Any] | str) -> Callable[[np.ndarray], Any]:
    if isinstance(statistic, str):
        if statistic not in _STATISTICS:
            raise ValueError(f"statistic must be a callable or one of {sorted(_STATISTICS)}, got {statistic!r}")
        return _STATISTICS[statistic]
    if not callable(statistic):
        raise ValueError(f"statistic must be callable, got {type(statistic).__name__}")
    return statistic


def _labels(labels: Any, n: int) -> np.ndarray:
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) (one per token), got shape {lab.shape}")
    if lab.size and (not np.issubdtype(lab.dtype, np.integer) or lab.min() < 0):
        raise ValueError("labels must be non-negative integers")
    return lab.astype(np.int64)


def per_label_statistic(tokens: Any, labels: Any, statistic: Callable[[np.ndarray], Any] | str) -> np.ndarray:
    r"""A statistic of each labelled sub-cloud: :math:`s(\{x_i : k_i = k\})` for :math:`k = 0..K-1`.

    Parameters
    ----------
    tokens : (N, d) array, or (T, N, d) for the same tokens at T times
    labels : (N,) non-negative integers (every label 0..K-1 must hold at least 2 tokens)
    statistic : callable or the name of a :mod:`gtcore.gaussianity` statistic

    Returns
    -------
    (K,) array, or (T, K) for a time series of clouds
    """
    fn = _statistic(statistic)
    x = as_float_array(tokens, "tokens")
    if x.ndim not in (2, 3):
        raise ValueError(f"tokens must have shape (N, d) or (T, N, d), got shape {x.shape}")
    lab = _labels(labels, x.shape[-2])
    counts = np.bincount(lab)
    if np.any(counts < 2):
        raise ValueError(f"labels: every label 0..{counts.size - 1} needs at least 2 tokens, got counts {counts.tolist()}")
    frames = x[None] if x.ndim == 2 else x
    out = np.array([[float(fn(f[lab == k])) for k in range(counts.size)] for f in frames])
    return out[0] if x.ndim == 2 else out


def per_label_noise_floor(statistic: Callable[[np.ndarray], Any] | str, labels: Any, d: int, *,
                          repeats: int = 64, seed: int = 0) -> list[NoiseFloor]:
    """The noise floor of ``statistic`` for each label, at that label's sample size.

    Label ``k`` with :math:`n_k` tokens gets ``noise_floor(statistic, n_k, d, repeats=repeats,
    seed=seed + k)``: the band a true Gaussian sample of the same size would give.
    """
    lab = _labels(labels, np.asarray(labels).shape[0])
    counts = np.bincount(lab)
    return [noise_floor(statistic, int(n_k), d, repeats=repeats, seed=seed + k) for k, n_k in enumerate(counts)]


def statistic_path(tokens: Any, statistic: Callable[[np.ndarray], Any] | str) -> np.ndarray:
    """A statistic of the whole cloud at each time: ``tokens`` (T, N, d) -> (T,) array."""
    fn = _statistic(statistic)
    x = as_float_array(tokens, "tokens")
    if x.ndim != 3:
        raise ValueError(f"tokens must have shape (T, N, d), got shape {x.shape}")
    return np.array([float(fn(f)) for f in x])


# ------------------------------------------------------------------- a cloud in time
@dataclass
class CloudPath:
    """Tokens at prescribed times.

    Attributes
    ----------
    t : (T,) times (the first is the initial time)
    tokens : (T, N, d) tokens at those times
    mu, Sigma : (T, d), (T, d, d) empirical (1/N) moments
    status : "completed" or "blowup" (the arrays then stop at the last finite time)
    steps : total number of integrator steps taken
    """

    t: np.ndarray
    tokens: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: str
    steps: int


def cloud_at_times(x0: Any, controls: ControlsLike, times: Sequence[float], *, max_step: float = 0.05,
                   method: str = "rk4", ff: str = "identity", attention: str = "empirical",
                   dtype: torch.dtype = torch.float64, device: str = "auto",
                   progress: bool = False) -> CloudPath:
    r"""Move tokens with :func:`gtcore.particles.simulate` and keep them at the given times.

    The interval :math:`[0, t_1]` and each :math:`[t_{k-1}, t_k]` is one call of ``simulate``
    with :math:`\lceil (t_k - t_{k-1}) / \text{max\_step} \rceil` steps, so log-spaced times
    (short-time behaviour on log–log axes) cost few extra steps.

    Parameters
    ----------
    x0 : (N, d) tokens at time 0
    controls : Controls, PiecewiseControls or callable t -> Controls
    times : increasing positive times
    max_step : largest integrator step
    method, ff, attention, dtype, device : passed to :func:`gtcore.particles.simulate`
    progress : show a progress bar over the times

    Returns
    -------
    CloudPath
        Times ``[0, *times]`` and the tokens there.
    """
    x = check_tokens(x0, "x0")
    ts = as_float_array(times, "times")
    if ts.ndim != 1 or ts.size < 1 or ts[0] <= 0 or np.any(np.diff(ts) <= 0):
        raise ValueError("times must be a non-empty increasing sequence of positive times")
    check_finite(ts, "times")
    check_positive(max_step, "max_step")
    grid = np.concatenate([[0.0], ts])
    frames, status, total = [x.copy()], "completed", 0
    for k in progress_bar(range(ts.size), "cloud", enabled=progress):
        a, b = grid[k], grid[k + 1]
        steps = int(np.ceil((b - a) / max_step - 1e-12))
        traj = simulate(frames[-1], controls, (a, b), steps, method=method, ff=ff, attention=attention,
                        dtype=dtype, device=device, keep_tokens=True, record_every=steps)
        total += steps
        if traj.status != "completed":
            status = traj.status
            break
        frames.append(traj.tokens[-1])
    tokens = np.stack(frames)
    mu = tokens.mean(axis=1)
    xc = tokens - mu[:, None]
    Sigma = np.einsum("tni,tnj->tij", xc, xc) / tokens.shape[1]
    return CloudPath(t=grid[: len(frames)], tokens=tokens, mu=mu, Sigma=0.5 * (Sigma + Sigma.transpose(0, 2, 1)),
                     status=status, steps=total)


def gaussian_prediction_error(t: Any, mu: Any, Sigma: Any, controls: ControlsLike) -> np.ndarray:
    r"""Relative Bures–Wasserstein error of the moment ODE's Gaussian prediction along a cloud's path.

    The prediction :math:`(\bar\mu(t), \bar\Sigma(t))` integrates eq. (1.1) with the layer's affine
    fold (:attr:`Controls.affine_A`, :attr:`Controls.affine_b`: the identity-activation
    feed-forward; not a linearisation of the ReLU) from the cloud's initial moments; the error is

    .. math::

        e(t) = \frac{W_2\big(N(\hat\mu(t), \hat\Sigma(t)),\, N(\bar\mu(t), \bar\Sigma(t))\big)}
                    {\sqrt{\operatorname{tr}\bar\Sigma(t)}} .

    Parameters
    ----------
    t : (T,) increasing times, ``t[0]`` the initial time
    mu, Sigma : (T, d), (T, d, d) the cloud's moments at those times

    Returns
    -------
    (T,) array
    """
    t = as_float_array(t, "t")
    mu = as_float_array(mu, "mu")
    Sigma = as_float_array(Sigma, "Sigma")
    if t.ndim != 1 or mu.shape[:1] != t.shape or Sigma.shape[:1] != t.shape:
        raise ValueError(f"t, mu and Sigma must share their first dimension, got {t.shape}, {mu.shape}, {Sigma.shape}")
    err = np.full(t.shape, np.inf)  # inf where the prediction has blown up
    if t.size == 1:
        err[0] = 0.0
        return err
    pred = integrate_moments(mu[0], Sigma[0], controls, (t[0], t[-1]), t_eval=t)
    for k in np.flatnonzero(np.isin(t, pred.t)):  # a blow-up event time is not one of t
        j = int(np.searchsorted(pred.t, t[k]))
        S = pred.Sigma[j]
        err[k] = bures_wasserstein(mu[k], Sigma[k], pred.mu[j], S) / np.sqrt(np.trace(S))
    return err


def time_within(t: Any, values: Any, tol: float) -> float:
    r"""The last time before ``values`` first exceeds ``tol``: :math:`\max\{t_k : v_j \le \text{tol}\ \forall j \le k\}`.

    Returns ``t[-1]`` when ``values`` never exceeds ``tol`` and ``nan`` when already ``values[0]`` does.
    """
    t = as_float_array(t, "t")
    v = as_float_array(values, "values")
    if t.shape != v.shape or t.ndim != 1:
        raise ValueError(f"t and values must be vectors of one length, got {t.shape} and {v.shape}")
    above = np.nonzero(~(v <= tol))[0]
    if above.size == 0:
        return float(t[-1])
    if above[0] == 0:
        return float("nan")
    return float(t[above[0] - 1])


@dataclass
class GaussianityPath:
    """A token cloud's Gaussianity over time (see :func:`track_gaussianity`).

    Attributes
    ----------
    t : (T,) times, ``t[0] = 0``
    mu, Sigma : (T, d), (T, d, d) empirical moments of the whole cloud
    statistics : dict name -> (T,) array (whole cloud) or (T, K) array (per label)
    prediction_error : (T,) relative Bures–Wasserstein error of the identity-activation moment ODE
        (:func:`gaussian_prediction_error`)
    final_tokens : (N, d) tokens at the last time
    status : "completed" or "blowup"
    steps : integrator steps taken
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    statistics: dict
    prediction_error: np.ndarray
    final_tokens: np.ndarray
    status: str
    steps: int


def track_gaussianity(x0: Any, controls: ControlsLike, times: Sequence[float], *, labels: Any = None,
                      statistics: Sequence[str] = ("sliced_w2", "mardia_kurtosis_excess"),
                      max_step: float = 0.05, method: str = "rk4", ff: str = "identity",
                      attention: str = "empirical", dtype: torch.dtype = torch.float64,
                      device: str = "auto", progress: bool = False) -> GaussianityPath:
    r"""Move tokens through a layer and measure, at each time, how Gaussian the cloud is.

    Runs :func:`cloud_at_times`, evaluates each named statistic of :mod:`gtcore.gaussianity`
    on the whole cloud (``labels=None``) or on each labelled sub-cloud
    (:func:`per_label_statistic`), and the error of the identity-activation moment ODE's prediction
    (:func:`gaussian_prediction_error`).

    Parameters
    ----------
    x0 : (N, d) tokens at time 0
    controls : the layer (constant, piecewise or callable controls)
    times : increasing positive times (log-spaced for short-time behaviour)
    labels : (N,) integer labels, optional
    statistics : names of :mod:`gtcore.gaussianity` statistics
    max_step, method, ff, attention, dtype, device, progress : see :func:`cloud_at_times`

    Returns
    -------
    GaussianityPath
    """
    for name in statistics:
        _statistic(name)
    path = cloud_at_times(x0, controls, times, max_step=max_step, method=method, ff=ff,
                          attention=attention, dtype=dtype, device=device, progress=progress)
    if labels is None:
        stats = {name: statistic_path(path.tokens, name) for name in statistics}
    else:
        stats = {name: per_label_statistic(path.tokens, labels, name) for name in statistics}
    err = gaussian_prediction_error(path.t, path.mu, path.Sigma, controls)
    return GaussianityPath(t=path.t, mu=path.mu, Sigma=path.Sigma, statistics=stats, prediction_error=err,
                           final_tokens=path.tokens[-1], status=path.status, steps=path.steps)


def noise_floors(statistics: Sequence[str], n: int, d: int, *, labels: Any = None, repeats: int = 64,
                 seed: int = 0) -> dict:
    """Noise floors of several statistics: one :class:`NoiseFloor` each (size ``n``), or with
    ``labels`` a list with one per label (at that label's size; ``n`` is then ignored)."""
    out = {}
    for i, name in enumerate(statistics):
        s = seed + 1000 * i
        if labels is None:
            out[name] = noise_floor(name, n, d, repeats=repeats, seed=s)
        else:
            out[name] = per_label_noise_floor(name, labels, d, repeats=repeats, seed=s)
    return out


__all__ = [
    "CloudPath",
    "GaussianityPath",
    "noise_floors",
    "track_gaussianity",
    "GaussianMixture",
    "LabelledTokens",
    "cloud_at_times",
    "gaussian_prediction_error",
    "per_label_noise_floor",
    "per_label_statistic",
    "statistic_path",
    "time_within",
]
