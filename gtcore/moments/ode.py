r"""The moment ODE, eq. (1.1): its right-hand side and its adaptive integration with blow-up events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from gtcore._linalg import psd_project
from gtcore._validation import (
    as_float_array,
    check_count,
    check_moments,
    check_positive,
    check_span,
)
from gtcore.attention import gaussian_velocity
from gtcore.controls import (
    Controls,
    ControlsLike,
    as_control_function,
    control_breaks,
    evaluate_controls,
)

__all__ = ["MAX_NFEV", "MomentTrajectory", "integrate_moments", "moment_rhs"]


def moment_rhs(mu: Any, Sigma: Any, controls: Controls) -> tuple[np.ndarray, np.ndarray]:
    r"""Right-hand side of the moment ODE (eq. 1.1), heads summed.

    .. math::

        \mu' = (M + G)\mu + b, \qquad \Sigma' = M\Sigma + \Sigma M^\top,

    with :math:`(M, G)` from :func:`gtcore.attention.gaussian_velocity` (for dot-product attention
    :math:`M = A + \sum_h V_h\Sigma B_h`, :math:`G = \sum_h V_h`).

    Parameters
    ----------
    mu : (d,) array
        The mean.
    Sigma : (d, d) symmetric array
        The covariance (positive semidefinite).
    controls : Controls
        One layer's parameters. With a feed-forward block, its identity-activation fold
        (:attr:`~gtcore.controls.Controls.affine_A`, :attr:`~gtcore.controls.Controls.affine_b`) is used.

    Returns
    -------
    dmu : (d,) ndarray
        :math:`\mu'`.
    dSigma : (d, d) ndarray
        :math:`\Sigma'`, exactly symmetric.

    Raises
    ------
    ValueError
        ``mu`` or ``Sigma`` not finite, ``Sigma`` not symmetric positive semidefinite, or dimensions
        that disagree with ``controls``, naming the argument (the moment ODE is defined on covariances
        only: a non-PSD matrix would give a meaningless right-hand side for every attention type).
    """
    mu, Sigma = _checked_moments(mu, Sigma, controls)
    return _moment_rhs(mu, Sigma, controls)


def _checked_moments(mu: Any, Sigma: Any, controls: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, Sigma)`` validated as a Gaussian's moments on the dimension of ``controls``."""
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    if controls.d != mu.shape[0]:
        raise ValueError(f"controls act on dimension d={controls.d}, but mu has d={mu.shape[0]}")
    return mu, Sigma


def _moment_rhs(mu: np.ndarray, Sigma: np.ndarray, controls: Controls) -> tuple[np.ndarray, np.ndarray]:
    """:func:`moment_rhs` without the checks (the integrators' inner loop)."""
    M, G = gaussian_velocity(Sigma, controls)
    dmu = (M + G) @ mu + controls.affine_b
    MS = M @ Sigma
    return dmu, MS + MS.T


def _check_below_blowup(blowup_norm: float, **moments: np.ndarray) -> None:
    """Refuse initial moments already at or beyond ``blowup_norm`` (the start would count as a blow-up)."""
    for name, x in moments.items():
        if np.linalg.norm(x) >= blowup_norm:
            raise ValueError(f"{name} has norm {np.linalg.norm(x):.3g} >= blowup_norm = {blowup_norm:.3g}: "
                             "raise blowup_norm")


@dataclass
class MomentTrajectory:
    r"""The solution of the moment ODE, in the manner of scipy's ``OdeResult``.

    Attributes
    ----------
    t : (n,) ndarray
        The times.
    mu : (n, d) ndarray
        The means.
    Sigma : (n, d, d) ndarray
        The covariances, each exactly symmetric.
    status : str
        ``"completed"``; ``"blowup"`` (:math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed
        ``blowup_norm``); ``"budget"`` (stopped after ``max_nfev`` right-hand-side evaluations, before
        the end of ``t_span``); or ``"failed"`` (the solver gave up).
    crossing_time : float or None
        The time at which :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed ``blowup_norm`` (located by a
        terminal event), or None. For :math:`\Sigma` it precedes the pole :math:`t^*` of the solution
        (:func:`gtcore.riccati.blowup_time`).
    message : str
        What the solver said, or which norm crossed, or where the budget ran out.
    nfev : int
        The number of right-hand-side evaluations.
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: str
    crossing_time: float | None
    message: str
    nfev: int

    @property
    def final(self) -> tuple[np.ndarray, np.ndarray]:
        """The last (mu, Sigma) computed."""
        return self.mu[-1], self.Sigma[-1]


def _segments(t0: float, t1: float, breaks: Sequence[float]) -> list[tuple[float, float]]:
    inner = sorted(b for b in breaks if t0 < b < t1)
    edges = [t0, *inner, t1]
    return list(pairwise(edges))


#: default cap on right-hand-side evaluations of :func:`~gtcore.moments.integrate_moments` (about 15 s at d = 2)
MAX_NFEV = 1_000_000


def integrate_moments(mu0: Any, Sigma0: Any, controls: ControlsLike, t_span: tuple[float, float],
                      t_eval: Any = None, *, rtol: float = 1e-10, atol: float = 1e-12,
                      blowup_norm: float = 1e8, max_nfev: int = MAX_NFEV) -> MomentTrajectory:
    r"""Integrate the moment ODE (eq. 1.1) from :math:`(\mu_0, \Sigma_0)` over ``t_span``.

    Adaptive Dormand–Prince 8(5,3) (``scipy.integrate.solve_ivp``, ``DOP853``) with tight default
    tolerances. Piecewise controls are integrated piece by piece, so their breaks are honoured
    exactly. Finite-time blow-up is a terminal event: integration stops when
    :math:`\|\Sigma(t)\|_F` or :math:`\|\mu(t)\|_2` (a mean can grow exponentially while
    :math:`\Sigma` stays bounded) crosses ``blowup_norm``; the arrays end at that time, and the
    trajectory carries ``status="blowup"`` and ``crossing_time``. No NaN, no warnings.

    The work is bounded: after ``max_nfev`` evaluations of the right-hand side the integration
    stops at the end of the current step with ``status="budget"`` (a long ``t_span`` on a decaying
    system is stiff for this explicit method: its steps stay near :math:`3/|\lambda|`, so
    ``(0, 1e8)`` at rate 0.1 would take millions of steps). Convergence to a fixed point is not
    guessed: shorten ``t_span`` or raise ``max_nfev``.

    :math:`\Sigma(t) = \Phi(t)\Sigma_0\Phi(t)^\top` is positive semidefinite exactly, so every
    returned :math:`\Sigma` is projected onto the PSD matrices (negative eigenvalues, integration
    error of the size of ``atol``, set to 0): a result is always a valid input.

    Parameters
    ----------
    mu0 : (d,) array
        The initial mean.
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite (rank-deficient allowed).
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        The layer's parameters over time.
    t_span : (float, float)
        ``(t0, t1)`` with ``t1 > t0``.
    t_eval : array, optional
        Times at which to report the solution (within ``t_span``, increasing). By default the
        solver's own steps.
    rtol, atol : float
        Tolerances passed to the solver, finite and positive (scipy raises an ``rtol`` below 100
        machine epsilons to that value, with a warning).
    blowup_norm : float
        The threshold on :math:`\|\Sigma\|_F` and on :math:`\|\mu\|_2` that counts as blow-up.
    max_nfev : int
        Budget of right-hand-side evaluations (default :data:`~gtcore.moments.ode.MAX_NFEV`).

    Returns
    -------
    MomentTrajectory
        The times, means and covariances, with the status of the integration.

    Raises
    ------
    ValueError
        Invalid initial moments (shape, finiteness, symmetry, positive semidefiniteness),
        controls of the wrong dimension, a bad time span, tolerance or budget; the message names
        the argument.
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0)
    d = mu0.shape[0]
    fn = as_control_function(controls, d, state_name="mu0")
    t0, t1 = check_span(t_span)
    if t_eval is not None:
        t_eval = as_float_array(t_eval, "t_eval")
        if t_eval.ndim != 1 or not np.all(np.isfinite(t_eval)) or np.any(np.diff(t_eval) <= 0) or (
                t_eval.size and (t_eval[0] < t0 or t_eval[-1] > t1)):
            raise ValueError("t_eval must be finite, strictly increasing and lie inside t_span")
    rtol = check_positive(rtol, "rtol")
    atol = check_positive(atol, "atol")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    max_nfev = check_count(max_nfev, "max_nfev")
    _check_below_blowup(blowup_norm, Sigma0=Sigma0, mu0=mu0)

    def blowup_event(t, y):
        return max(np.linalg.norm(y[d:]), np.linalg.norm(y[:d])) - blowup_norm

    blowup_event.terminal = True  # type: ignore[attr-defined]  # scipy's event attributes
    blowup_event.direction = 1  # type: ignore[attr-defined]

    calls = [0]  # right-hand-side evaluations, all segments together
    budget = {"t_stop": np.inf}

    def budget_event(t, y):
        # called once per accepted step at its end: past the budget, a root exactly at this step's end
        if budget["t_stop"] == np.inf and calls[0] >= max_nfev:
            budget["t_stop"] = t
        return budget["t_stop"] - t

    budget_event.terminal = True  # type: ignore[attr-defined]
    budget_event.direction = -1  # type: ignore[attr-defined]

    ts, mus, Sigmas = [], [], []
    y = np.concatenate([mu0, Sigma0.ravel()])
    status, crossing_time, message, nfev = "completed", None, "", 0
    segments = _segments(t0, t1, control_breaks(controls))
    for k, (a, b) in enumerate(segments):
        last = k == len(segments) - 1
        if isinstance(fn, Controls):
            def at(t, c=fn):
                return c
        else:
            inside = np.nextafter(b, a)

            def at(t, a=a, inside=inside):  # type: ignore[misc]
                return evaluate_controls(fn, min(max(t, a), inside), d=d)

        def rhs(t, y, at=at):
            calls[0] += 1
            Sigma = y[d:].reshape(d, d)
            Sigma = 0.5 * (Sigma + Sigma.T)
            dmu, dS = _moment_rhs(y[:d], Sigma, at(t))
            return np.concatenate([dmu, dS.ravel()])

        solve_eval = keep_eval = None
        if t_eval is not None:
            mask = (t_eval >= a) & ((t_eval <= b) if last else (t_eval < b))
            keep_eval = t_eval[mask]
            solve_eval = np.union1d(keep_eval, [b])  # b is always solved for, to go on from it
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow fails the step, no warning
            sol = solve_ivp(rhs, (a, b), y, method="DOP853", t_eval=solve_eval, rtol=rtol, atol=atol,
                            events=[blowup_event, budget_event])
        nfev += sol.nfev
        message = sol.message
        seg_t, seg_y = sol.t, sol.y.T
        if sol.status == 0:
            y = sol.y[:, -1]
        if keep_eval is not None:
            keep = np.isin(seg_t, keep_eval)
            seg_t, seg_y = seg_t[keep], seg_y[keep]
        elif k > 0:
            seg_t, seg_y = seg_t[1:], seg_y[1:]  # the break is already the previous piece's end
        if sol.status == 1:  # a terminal event fired: blow-up, or the budget ran out
            fired = 0 if len(sol.t_events[0]) else 1
            te, ye = sol.t_events[fired][0], sol.y_events[fired][0]
            before = seg_t < te
            seg_t = np.append(seg_t[before], te)
            seg_y = np.vstack([seg_y[before], ye[None]])
            if fired == 0:
                status, crossing_time = "blowup", float(te)
                which = ("||mu||_2" if np.linalg.norm(ye[:d]) >= np.linalg.norm(ye[d:]) else "||Sigma||_F")
                message = f"{which} crossed blowup_norm = {blowup_norm:.3g} at t = {te:.6g}"
            else:
                status = "budget"
                message = (f"stopped after max_nfev = {max_nfev} right-hand-side evaluations at "
                           f"t = {te:.6g} of t1 = {t1:.6g}: raise max_nfev or shorten t_span")
        elif sol.status < 0:
            status = "failed"
        ts.append(seg_t)
        mus.append(seg_y[:, :d])
        Sigmas.append(seg_y[:, d:].reshape(-1, d, d))
        if sol.status != 0:
            break
    t = np.concatenate(ts)
    Sigma = np.concatenate(Sigmas)
    Sigma = psd_project(0.5 * (Sigma + np.swapaxes(Sigma, 1, 2)))
    return MomentTrajectory(t=t, mu=np.concatenate(mus), Sigma=Sigma, status=status,
                            crossing_time=crossing_time, message=message, nfev=nfev)
