r"""Chapter harnesses: one module per chapter, each returning result dataclasses.

* :mod:`~gtbook.studies.invariance.harness` (chapter 1): the N-token Transformer against the moment ODE;
* :mod:`~gtbook.studies.beyond.harness` (chapter 2): a cloud followed in time, mixtures, ReLU;
* :mod:`~gtbook.studies.reachability.harness` (chapter 3): rank invariance along the ODE, steered tokens;
* :mod:`~gtbook.studies.stability.harness` (chapter 4): the planar rotating family, regime maps.

Chapter 5's harness is :func:`gtbook.studies.pretrained.statistics.layer_statistics`. Figures for each
chapter live in its study package (``figures.py``) and take these dataclasses.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def loglog_slope(x: Any, y: Any, x_max: float | None = None) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x`.

    With ``x_max``, only the points with :math:`0 < x \le x_{\max}` and :math:`y > 0` are fitted
    (a short-time or small-N regime); without it every point must be positive.
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
    Ns : (n,) positive token counts, n >= 2
    values : (draws, n, seeds) positive values

    Returns
    -------
    float
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


def pooled_slope_standard_error(Ns: Any, values: Any, *, n_boot: int = 2000, seed: int = 0) -> float:
    r"""Bootstrap standard error of :func:`pooled_loglog_slope`: seeds resampled within each draw and N.

    Each of ``n_boot`` resamples draws, for every draw and every N independently, ``seeds`` of its
    seeds with replacement and refits the pooled slope; the result is the standard deviation
    (ddof = 1) of those slopes. A claim :math:`|\hat s - s_0| < 3\,\mathrm{SE}` is then a 99.7% (normal)
    statement that the seed-to-seed scatter allows.
    """
    v = np.asarray(values, float)
    if v.ndim != 3 or v.shape[2] < 2:
        raise ValueError(f"values must have shape (draws, n, seeds >= 2), got {v.shape}")
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    rng = np.random.default_rng(seed)
    D, n, S = v.shape
    slopes = np.empty(int(n_boot))
    for k in range(int(n_boot)):
        idx = rng.integers(0, S, size=(D, n, S))
        slopes[k] = pooled_loglog_slope(Ns, np.take_along_axis(v, idx, axis=2))
    return float(slopes.std(ddof=1))


__all__ = ["loglog_slope", "pooled_loglog_slope", "pooled_slope_standard_error"]
