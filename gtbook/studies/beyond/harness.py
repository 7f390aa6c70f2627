r"""Chapter 2 (beyond invariance): a token cloud followed in time, and how Gaussian it stays.

:func:`track_gaussianity` moves tokens through a layer (:func:`gtcore.particles.simulate` with
``t_eval``), measures Gaussianity statistics of the whole cloud or of each labelled sub-cloud
(:mod:`gtcore.stats.mixtures`), and the error of the moment ODE's Gaussian prediction (eq. 1.1 of the
linearised layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._linalg import empirical_moments
from gtcore._validation import as_float_array, check_finite, check_positive, check_tokens
from gtcore.controls import ControlsLike
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.gaussianity import bures_wasserstein, noise_floor
from gtcore.stats.mixtures import _statistic, per_label_noise_floor, per_label_statistic, statistic_path


def gaussian_prediction_error(t: Any, mu: Any, Sigma: Any, controls: ControlsLike) -> np.ndarray:
    r"""Relative Bures–Wasserstein error of the moment ODE's Gaussian prediction along a cloud's path.

    The prediction :math:`(\bar\mu(t), \bar\Sigma(t))` integrates eq. (1.1) with the layer's affine
    fold (:attr:`~gtcore.controls.Controls.affine_A`, :attr:`~gtcore.controls.Controls.affine_b`: the
    identity-activation, i.e. linearised, feed-forward) from the cloud's initial moments; the error is

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
    r"""The last time before ``values`` first exceeds ``tol``:
    :math:`\max\{t_k : v_j \le \text{tol}\ \forall j \le k\}`.

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
    prediction_error : (T,) relative Bures–Wasserstein error of the linearised moment ODE
        (:func:`gaussian_prediction_error`)
    final_tokens : (N, d) tokens at the last time
    status : "completed" or "blowup"
    steps : integrator steps taken
    sides : the library functions that moved the tokens (observed) and that integrated the moment ODE of
        ``prediction_error`` (predicted) (:mod:`gtbook.studies.traced`); the statistics are comparisons, traced
        on neither side
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    statistics: dict
    prediction_error: np.ndarray
    final_tokens: np.ndarray
    status: str
    steps: int
    sides: Sides = field(default_factory=Sides.empty)


def track_gaussianity(
    x0: Any,
    controls: ControlsLike,
    times: Sequence[float],
    *,
    labels: Any = None,
    statistics: Sequence[str] = ("sliced_w2", "mardia_kurtosis_excess"),
    max_step: float = 0.05,
    method: str = "rk4",
    ff: str = "identity",
    average: str = "empirical",
    dtype: torch.dtype = torch.float64,
    device: str = "auto",
    progress: bool = False,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
) -> GaussianityPath:
    r"""Move tokens through a layer and measure, at each time, how Gaussian the cloud is.

    Moves the tokens with :func:`gtcore.particles.simulate` (``t_eval=times``: it steps exactly to
    each time, with :math:`\lceil (t_k - t_{k-1}) / \text{max\_step} \rceil` steps between two,
    so log-spaced times cost few extra steps), evaluates each named statistic of :mod:`gtcore.stats.gaussianity`
    on the whole cloud (``labels=None``) or on each labelled sub-cloud
    (:func:`~gtcore.stats.mixtures.per_label_statistic`), and the error of the linearised moment ODE's prediction
    (:func:`gaussian_prediction_error`).

    Parameters
    ----------
    x0 : (N, d) tokens at time 0
    controls : the layer (constant, piecewise or callable controls)
    times : increasing positive times (log-spaced for short-time behaviour)
    labels : (N,) integer labels, optional
    statistics : names of :mod:`gtcore.stats.gaussianity` statistics
    max_step : largest integrator step
    method, ff, average, dtype, device, progress, kernel_dtype : passed to :func:`gtcore.particles.simulate`
        (the softmax kernel in :data:`gtbook.studies.precision.STUDY_KERNEL_DTYPE`, float32, by default: see there)

    Returns
    -------
    GaussianityPath
    """
    for name in statistics:
        _statistic(name)
    x = check_tokens(x0, "x0")
    ts = as_float_array(times, "times")
    if ts.ndim != 1 or ts.size < 1 or ts[0] <= 0 or np.any(np.diff(ts) <= 0):
        raise ValueError("times must be a non-empty increasing sequence of positive times")
    check_finite(ts, "times")
    check_positive(max_step, "max_step")
    with collect() as sides:  # the statistics below are comparisons: traced on neither side
        with observed():
            path = simulate(
                x,
                controls,
                (0.0, float(ts[-1])),
                t_eval=ts,
                max_step=max_step,
                method=method,
                ff=ff,
                average=average,
                dtype=dtype,
                device=device,
                keep_tokens=True,
                progress=progress,
                kernel_dtype=kernel_dtype,
            )
        keep = np.isin(path.t, np.concatenate([[0.0], ts]))  # on blow-up: up to the last time reached
        assert path.tokens is not None  # keep_tokens=True
        tokens = path.tokens[keep]
        mu, Sigma = empirical_moments(tokens)  # of the float64 tokens, one stack
        path = replace(path, t=path.t[keep], mu=mu, Sigma=Sigma, tokens=tokens)
        if labels is None:
            stats = {name: statistic_path(path.tokens, name) for name in statistics}
        else:
            stats = {name: per_label_statistic(path.tokens, labels, name) for name in statistics}
        with predicted():
            err = gaussian_prediction_error(path.t, path.mu, path.Sigma, controls)
    return GaussianityPath(
        t=path.t,
        mu=path.mu,
        Sigma=path.Sigma,
        statistics=stats,
        prediction_error=err,
        final_tokens=tokens[-1],
        status=path.status,
        steps=path.steps,
        sides=sides,
    )


def noise_floors(
    statistics: Sequence[str], n: int, d: int, *, labels: Any = None, repeats: int = 64, seed: int = 0
) -> dict:
    """Noise floors of several statistics: one :class:`~gtcore.stats.gaussianity.NoiseFloor` each (size ``n``), or with
    ``labels`` a list with one per label (at that label's size; ``n`` is then ignored)."""
    out: dict[str, Any] = {}
    for i, name in enumerate(statistics):
        s = seed + 1000 * i
        if labels is None:
            out[name] = noise_floor(name, n, d, repeats=repeats, seed=s)
        else:
            out[name] = per_label_noise_floor(name, labels, d, repeats=repeats, seed=s)
    return out


__all__ = ["GaussianityPath", "gaussian_prediction_error", "noise_floors", "time_within", "track_gaussianity"]
