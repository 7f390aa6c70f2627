r"""Many independent ODEs at once: the DOP853 method of ``scipy.integrate.solve_ivp``, one lane each.

A *lane* is one initial-value problem :math:`y_k' = f_k(t, y_k)`, :math:`y_k(t_0) = y_{k,0}`.
:func:`integrate_lanes` advances every lane with the explicit Runge–Kutta 8(5,3) pair of Dormand and
Prince (the coefficients of :mod:`scipy.integrate`'s ``DOP853``, copied in ``gtcore.moments._dop853``)
and **its own adaptive step**: the initial-step heuristic, the step-size controller (safety 0.9, factors
in :math:`[0.2, 10]`, no growth right after a rejection), the error norm

.. math::

    \text{err} = |h|\,\frac{\|e_5\|^2}{\sqrt{(\|e_5\|^2 + 0.01\,\|e_3\|^2)\, m}}, \qquad
    e_{3,5} = \frac{K^\top E_{3,5}}{\text{atol} + \text{rtol}\max(|y|, |y_{\rm new}|)},

and the "step too small" failure are those of ``solve_ivp(method="DOP853")``, lane by lane. Only the
right-hand side is evaluated for all active lanes in one vectorised call, so a grid of a thousand small
systems costs a few thousand NumPy calls instead of millions of Python calls. Results agree with
``solve_ivp`` to round-off (the sums of the stages are ordered differently), not bit for bit.

A lane stops at ``t_span[1]`` ("completed"), when ``stop`` becomes true after an accepted step
("stopped": the analogue of a terminal event with direction +1, detected at the end of the step, so the
reported time is the end of that step, not a located root), when its step falls below ten units in
the last place of :math:`t` ("failed"), or, with ``max_nfev``, once it has used that many
right-hand-side evaluations ("budget", at the end of its last accepted step: a stiff lane, whose
explicit steps stay tiny, no longer holds the others up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._repr import short_repr
from gtcore._validation import as_float_array
from gtcore.moments import _dop853 as _dop  # SciPy's DOP853 tables, copied (a private SciPy module)
from gtcore.status import Status

__all__ = ["LaneSolution", "integrate_lanes"]

_N_STAGES = _dop.N_STAGES
_A = _dop.A
_B = _dop.B
_C = _dop.C
_E3, _E5 = _dop.E3, _dop.E5
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0
_EXPONENT = -1.0 / 8.0  # -1 / (error estimator order 7 + 1)

#: ``fun(t, Y, lanes)``: t (k,), Y (k, m), lanes (k,) indices of the rows -> (k, m) derivatives
LaneFunction = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class LaneSolution:
    """Where each lane ended (see :func:`integrate_lanes`).

    Attributes
    ----------
    t : (n,) ndarray
        The last time of each lane (``t_span[1]`` when completed).
    y : (n, m) ndarray
        The state there.
    status : (n,) object ndarray of Status
        :class:`~gtcore.status.Status` members: ``COMPLETED``, ``STOPPED``, ``FAILED`` or ``BUDGET``.
    steps : (n,) ndarray of int
        The accepted steps of each lane.
    nfev : (n,) ndarray of int
        The right-hand-side evaluations of each lane.
    """

    t: np.ndarray
    y: np.ndarray
    status: np.ndarray
    steps: np.ndarray
    nfev: np.ndarray

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def _rms(x: np.ndarray) -> np.ndarray:
    return np.linalg.norm(x, axis=1) / np.sqrt(x.shape[1])


def _initial_step(fun, t0, y0, f0, lanes, t_bound, rtol, atol):
    """scipy's ``select_initial_step`` for order 7, lane by lane."""
    interval = t_bound - t0
    scale = atol + np.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
    h0 = np.minimum(h0, interval)
    f1 = fun(t0 + h0, y0 + h0[:, None] * f0, lanes)
    d2 = _rms((f1 - f0) / scale) / h0
    small = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = np.where(small, np.maximum(1e-6, h0 * 1e-3), (0.01 / np.where(small, 1.0, np.maximum(d1, d2))) ** (1.0 / 8.0))
    return np.minimum(np.minimum(100 * h0, h1), interval)


def integrate_lanes(
    fun: LaneFunction,
    t_span: tuple[float, float],
    y0: Any,
    *,
    rtol: float = 1e-10,
    atol: Any = 1e-12,
    stop: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    max_iterations: int = 1_000_000,
    max_nfev: int | None = None,
) -> LaneSolution:
    r"""Integrate ``n`` independent systems :math:`y_k' = f(t, y_k)` with DOP853, each with its own step.

    Parameters
    ----------
    fun : callable ``fun(t, Y, lanes)``
        ``t`` (k,) times, ``Y`` (k, m) states and ``lanes`` (k,) the indices (into ``y0``) of the
        rows, for the lanes still running; returns the (k, m) derivatives.
    t_span : (float, float)
        ``(t0, t1)`` with ``t1 > t0``, common to all lanes.
    y0 : (n, m) array
        The initial states.
    rtol : float
        The relative tolerance, in (0, 1).
    atol : float or (n,) array
        The absolute tolerance, a scalar or one per lane.
    stop : callable ``stop(Y, lanes) -> (k,) bool``, optional
        Checked after every accepted step; a lane where it is true stops (``"stopped"``).
    max_iterations : int
        A guard on the number of trial steps of the slowest lane.
    max_nfev : int, optional
        Per-lane budget of right-hand-side evaluations: a lane that has used it stops with status
        ``"budget"`` at its last accepted step (``t`` and ``y`` are that step's). None: no budget.

    Returns
    -------
    LaneSolution
        Where each lane ended, its status, steps and evaluations.

    Raises
    ------
    ValueError
        A bad ``y0``, ``t_span``, ``rtol`` or ``atol``.
    """
    y = as_float_array(y0, "y0").copy()
    if y.ndim != 2 or y.shape[0] < 1 or y.shape[1] < 1:
        raise ValueError(f"y0 must have shape (n, m) with n, m >= 1, got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y0 has non-finite entries (NaN or inf)")
    span = as_float_array(t_span, "t_span")
    if span.shape != (2,) or not np.all(np.isfinite(span)) or span[1] <= span[0]:
        raise ValueError(f"t_span must be (t0, t1) with finite t1 > t0, got {t_span!r}")
    if (
        isinstance(rtol, (bool, np.bool_))
        or not isinstance(rtol, (int, float, np.integer, np.floating))
        or not 0 < rtol < 1
    ):
        raise ValueError(f"rtol must lie in (0, 1), got {rtol!r}")
    if max_nfev is not None and (
        isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) or max_nfev < 1
    ):
        raise ValueError(f"max_nfev must be a positive integer or None, got {max_nfev!r}")
    n, m = y.shape
    try:
        atol_all = np.broadcast_to(as_float_array(atol, "atol"), (n,)).astype(float)
    except ValueError as exc:
        raise ValueError(f"atol must be a number or one per lane ({n}), got shape {np.shape(atol)}") from exc
    if not np.all((atol_all > 0) & np.isfinite(atol_all)):  # atol = 0: a component at 0 has no error scale
        raise ValueError(f"atol must be finite and positive, got {atol!r}")
    t0, t_bound = float(span[0]), float(span[1])

    t = np.full(n, t0)
    status = np.full(n, None, dtype=object)  # None while the lane runs
    steps = np.zeros(n, dtype=int)
    nfev = np.zeros(n, dtype=int)
    lanes = np.arange(n)
    f = fun(t, y, lanes)
    h_abs = _initial_step(fun, t, y, f, lanes, t_bound, rtol, atol_all[:, None])
    nfev += 2
    retry = np.zeros(n, dtype=bool)  # the last trial of this lane was rejected
    active = lanes
    K = np.empty((_N_STAGES + 1, n, m))
    for _ in range(max_iterations):
        if active.size == 0:
            break
        ta, ya, fa = t[active], y[active], f[active]
        min_step = 10 * np.abs(np.nextafter(ta, np.inf) - ta)
        ha = h_abs[active]
        fresh = ~retry[active]
        ha = np.where(fresh, np.maximum(ha, min_step), ha)  # max_step is infinite
        too_small = ha < min_step  # only after rejections
        if np.any(too_small):
            status[active[too_small]] = Status.FAILED
            keep = ~too_small
            active, ta, ya, fa, ha = active[keep], ta[keep], ya[keep], fa[keep], ha[keep]
            if active.size == 0:
                break
        t_new = np.minimum(ta + ha, t_bound)
        h = t_new - ta
        k = active.size
        Ka = K[:, :k]
        Ka[0] = fa
        for s in range(1, _N_STAGES):
            dy = np.tensordot(_A[s, :s], Ka[:s], axes=(0, 0)) * h[:, None]
            Ka[s] = fun(ta + _C[s] * h, ya + dy, active)
        y_new = ya + h[:, None] * np.tensordot(_B, Ka[:-1], axes=(0, 0))
        f_new = fun(t_new, y_new, active)
        Ka[-1] = f_new
        nfev[active] += _N_STAGES
        scale = atol_all[active, None] + np.maximum(np.abs(ya), np.abs(y_new)) * rtol
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            e5 = np.sum((np.tensordot(_E5, Ka, axes=(0, 0)) / scale) ** 2, axis=1)
            e3 = np.sum((np.tensordot(_E3, Ka, axes=(0, 0)) / scale) ** 2, axis=1)
            zero = (e5 == 0) & (e3 == 0)
            err = np.where(zero, 0.0, np.abs(h) * e5 / np.sqrt(np.where(zero, 1.0, e5 + 0.01 * e3) * m))
            accept = err < 1
            grow = np.where(
                err == 0, _MAX_FACTOR, np.minimum(_MAX_FACTOR, _SAFETY * np.where(err > 0, err, 1.0) ** _EXPONENT)
            )
            grow = np.where(retry[active], np.minimum(1.0, grow), grow)
            shrink = np.maximum(_MIN_FACTOR, _SAFETY * err**_EXPONENT)  # nan err: rejected, nan step
        shrink = np.where(np.isfinite(shrink), shrink, _MIN_FACTOR)
        h_abs[active] = np.where(accept, h * grow, h * shrink)
        retry[active] = ~accept
        done = active[accept]
        t[done], y[done], f[done] = t_new[accept], y_new[accept], f_new[accept]
        steps[done] += 1
        ended = np.zeros(k, dtype=bool)
        if stop is not None and done.size:
            hit = np.asarray(stop(y[done], done), dtype=bool)
            status[done[hit]] = Status.STOPPED
            ended[np.flatnonzero(accept)[hit]] = True
        finished = accept & ~ended & (t_new >= t_bound)
        status[active[finished]] = Status.COMPLETED
        if max_nfev is not None:
            spent = ~(ended | finished) & (nfev[active] >= max_nfev)
            status[active[spent]] = Status.BUDGET
            finished = finished | spent
        active = active[~(ended | finished)]
    else:
        raise RuntimeError(f"integrate_lanes: {active.size} lane(s) still running after {max_iterations} iterations")
    return LaneSolution(t=t, y=y, status=status, steps=steps, nfev=nfev)
