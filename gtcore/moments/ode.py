r"""The moment ODE, eq. (1.1): its right-hand side and its adaptive integration with blow-up events."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from scipy.integrate import DOP853
from scipy.optimize import brentq

from gtcore._linalg import psd_project
from gtcore._repr import short_repr
from gtcore._validation import (
    as_float_array,
    check_count,
    check_moments,
    check_positive,
    check_span,
)
from gtcore.attention import attention_of
from gtcore.controls import (
    Controls,
    ControlsLike,
    as_control_function,
    control_breaks,
    evaluate_controls,
)
from gtcore.status import Status

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

    Examples
    --------
    >>> from gtcore import Controls, moment_rhs
    >>> dmu, dSigma = moment_rhs(np.ones(2), np.eye(2), Controls(V=np.eye(2), B=np.eye(2)))
    >>> dmu
    array([2., 2.])
    >>> dSigma
    array([[2., 0.],
           [0., 2.]])
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
    """:func:`moment_rhs` without the checks."""
    att = attention_of(controls)
    parts = att.gaussian_parts_function(controls.V, att.params(controls))
    return _moment_field(mu, Sigma, controls.affine_A, controls.affine_b, parts)


def _moment_field(
    mu: np.ndarray,
    Sigma: np.ndarray,
    A: np.ndarray,
    b: np.ndarray,
    parts: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    r"""Eq. (1.1), the one place it is written: :math:`(\mu', \Sigma')` from the affine fold and the attention's parts.

    :math:`M = A + \sum_h V_hM_h(\Sigma)` (the velocity's linear part), :math:`G = \sum_h V_hC_h(\Sigma)`, both from
    ``parts`` (:meth:`~gtcore.attention.AttentionType.gaussian_parts_function`), :math:`\mu' = (M + G)\mu + b`,
    :math:`\Sigma' = M\Sigma + (M\Sigma)^\top`.
    """
    linear, G = parts(Sigma)
    M = A + linear
    dmu = (M + G) @ mu + b
    MS = M @ Sigma
    return dmu, MS + MS.T


def _check_below_blowup(blowup_norm: float, **moments: np.ndarray) -> None:
    """Refuse initial moments already at or beyond ``blowup_norm`` (the start would count as a blow-up).

    The norm is taken of ``x / max|x|`` and scaled back, so finite entries near the largest float (``1e300``)
    give their norm (or ``inf``) without an overflow in the sum of squares.
    """
    for name, x in moments.items():
        scale = float(np.max(np.abs(x), initial=0.0))
        with np.errstate(over="ignore"):
            norm = scale * float(np.linalg.norm(x / scale)) if scale > 0 else 0.0
        if norm >= blowup_norm:
            raise ValueError(f"{name} has norm {norm:.3g} >= blowup_norm = {blowup_norm:.3g}: raise blowup_norm")


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
    status : Status
        :class:`~gtcore.status.Status`: ``COMPLETED``; ``BLOWUP`` (:math:`\|\Sigma\|_F` or
        :math:`\|\mu\|_2` crossed ``blowup_norm``); ``BUDGET`` (stopped after ``max_nfev`` right-hand-side
        evaluations, before the end of ``t_span``); or ``FAILED`` (the solver gave up).
    crossing_time : float or None
        The time at which :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed ``blowup_norm`` (located by a
        terminal event), or None. For :math:`\Sigma` it precedes the pole :math:`t^*` of the solution
        (:func:`gtcore.riccati.blowup_time`).
    message : str
        What the solver said, or which norm crossed, or where the budget ran out.
    nfev : int
        The number of right-hand-side evaluations.

    Examples
    --------
    >>> from gtcore import Controls, integrate_moments
    >>> tr = integrate_moments(np.zeros(1), np.eye(1), Controls(V=np.eye(1), B=np.eye(1)), (0.0, 1.0))
    >>> tr.status, round(tr.crossing_time, 6)  # sigma' = 2 sigma^2: the pole at t = 1/2
    (<Status.BLOWUP: 'blowup'>, 0.5)
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: Status
    crossing_time: float | None
    message: str
    nfev: int

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

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

#: ``f(mu, Sigma) -> (d + d*d,)``: the moment ODE's right-hand side, flat (the state's layout)
_FlatRhs = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _flat_rhs(controls: Controls) -> _FlatRhs:
    r""":func:`_moment_field` for one constant :class:`Controls`, flat, with everything constant set up once.

    The fast path of :func:`integrate_moments`: the affine fold :math:`(A, b)` and the attention's parts for the
    fixed heads (:meth:`~gtcore.attention.AttentionType.gaussian_parts_function`: for the dot product
    :math:`\sum_h V_h` once) are set up here instead of at every evaluation; the arithmetic is
    :func:`_moment_field`'s, the same as :func:`moment_rhs`'s, so results are bit for bit its.
    """
    att = attention_of(controls)
    A, b = controls.affine_A, controls.affine_b
    parts = att.gaussian_parts_function(controls.V, att.params(controls))

    def f(mu: np.ndarray, S: np.ndarray) -> np.ndarray:
        dmu, dS = _moment_field(mu, S, A, b, parts)
        return np.concatenate((dmu, dS.ravel()))

    return f


class _BudgetSpent(Exception):
    """Raised by a right-hand side of :func:`_piece_rhs` asked for an evaluation beyond its limit ``calls[1]``."""


def _piece_rhs(fn: Any, a: float, b: float, d: int, calls: list[float]) -> Callable[[float, np.ndarray], np.ndarray]:
    r"""The flat right-hand side ``rhs(t, y)`` on the piece ``[a, b]``, counting evaluations in ``calls[0]``.

    Constant controls take the fast path (:func:`_flat_rhs`, set up once); time-varying ones are read
    inside the piece (at :math:`\min(\max(t, a), b^-)`), so a jump at ``b`` belongs to the next piece.
    The state's :math:`\Sigma` is symmetrised first, as :math:`(\Sigma^\top + \Sigma)/2` (the bits of
    :math:`(\Sigma + \Sigma^\top)/2`, with a faster transpose: a gather of the flat state for small :math:`d`, a
    contiguous copy for larger).

    ``calls[1]`` is a limit on ``calls[0]``: an evaluation that would start at or beyond it raises
    :class:`_BudgetSpent` instead (set by :func:`_dop853` for the duration of one step; ``inf`` otherwise).
    """
    if isinstance(fn, Controls):
        flat = _flat_rhs(fn)
        if d <= 8:  # few numpy calls matter most: the transpose as a gather of the flat state
            transpose = np.arange(d * d).reshape(d, d).T.ravel()

            def rhs(t: float, y: np.ndarray) -> np.ndarray:
                if calls[0] >= calls[1]:
                    raise _BudgetSpent
                calls[0] += 1
                S = y[d:]
                return flat(y[:d], ((S[transpose] + S) * 0.5).reshape(d, d))
        else:  # a contiguous copy of the transpose reads memory faster

            def rhs(t: float, y: np.ndarray) -> np.ndarray:
                if calls[0] >= calls[1]:
                    raise _BudgetSpent
                calls[0] += 1
                S = y[d:].reshape(d, d)
                sym = S.T.copy()
                sym += S
                sym *= 0.5
                return flat(y[:d], sym)

        return rhs

    def symmetric(y: np.ndarray) -> np.ndarray:
        S = y[d:].reshape(d, d)
        return (S.T + S) * 0.5

    inside = np.nextafter(b, a)
    last: list[Any] = [None, None]  # the last Controls read and its right-hand side

    def varying(t: float, y: np.ndarray) -> np.ndarray:
        if calls[0] >= calls[1]:
            raise _BudgetSpent
        calls[0] += 1
        c = evaluate_controls(fn, min(max(t, a), inside), d=d)
        if c is not last[0]:
            last[:] = [c, _flat_rhs(c)]
        return last[1](y[:d], symmetric(y))

    return varying


def _norm(x: np.ndarray) -> float:
    """``np.linalg.norm(x)`` of a 1-D float array (the same ``sqrt(x . x)``), without its dispatch."""
    return math.sqrt(x.dot(x))


def _stop_events(d: int, blowup_norm: float, max_nfev: int, calls: list[float], t_end: float) -> list[Callable]:
    """The two terminal events of :func:`integrate_moments`: the blow-up threshold, and the budget.

    The budget fires at the end of the first accepted step that ends with ``max_nfev`` or more evaluations
    spent, unless that step ends the integration (at ``t_end``): then it is complete, not out of budget.
    """

    def blowup_event(t, y):
        return max(_norm(y[d:]), _norm(y[:d])) - blowup_norm

    blowup_event.terminal = True  # type: ignore[attr-defined]  # scipy's event attributes
    blowup_event.direction = 1  # type: ignore[attr-defined]

    budget = {"t_stop": np.inf}

    def budget_event(t, y):
        # called once per accepted step at its end: past the budget, a root exactly at this step's end
        if budget["t_stop"] == np.inf and calls[0] >= max_nfev and t != t_end:
            budget["t_stop"] = t
        return budget["t_stop"] - t

    budget_event.terminal = True  # type: ignore[attr-defined]
    budget_event.direction = -1  # type: ignore[attr-defined]
    return [blowup_event, budget_event]


#: what ``solve_ivp`` says when a piece ends (its ``MESSAGES`` for statuses 0 and 1)
_MESSAGES = {
    0: "The solver successfully reached the end of the integration interval.",
    1: "A termination event occurred.",
}
_EPS = np.finfo(float).eps


@dataclass
class _Solution:
    """The fields of ``scipy.integrate.solve_ivp``'s result that :func:`_piece_points` reads."""

    t: np.ndarray
    y: np.ndarray
    t_events: list[np.ndarray]
    y_events: list[np.ndarray]
    nfev: int
    status: int
    message: str


def _dop853(
    fun: Callable,
    a: float,
    b: float,
    y0: np.ndarray,
    rtol: float,
    atol: float,
    t_eval: np.ndarray | None,
    events: list[Callable],
    budget: tuple[list[float], int, int] | None = None,
) -> _Solution:
    r"""``solve_ivp(fun, (a, b), y0, method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol, events=events)`` for
    terminal events, step for step and bit for bit, without its per-step generality.

    The same solver (:class:`scipy.integrate.DOP853`, built as ``solve_ivp`` builds it) takes the same steps; after
    each step the events are evaluated at its end and compared with their previous values (a sign change in the
    event's direction), and only when one fires is the step's dense output built and the root located as
    ``solve_ivp`` locates it (Brent's method with ``xtol = rtol = 4 eps`` on the interpolant); the earliest root
    ends the piece there. The points kept (every step, or the ``t_eval`` inside each step through the dense
    output) are ``solve_ivp``'s.

    ``budget = (calls, max_nfev, k)`` (``fun`` from :func:`_piece_rhs`, counting in ``calls[0]``) bounds the work
    within a step, which ``solve_ivp`` does not: a step whose trial is rejected tries again with a smaller one,
    each trial ``n_stages`` evaluations, as often as it takes. No trial may start once ``max_nfev`` evaluations
    are spent (``calls[1]`` is set to the first such trial's start): the trial running when the budget runs out
    finishes, and if it is rejected the piece ends at the last accepted step, as if event ``k`` (the budget's)
    had fired there. Runs that never start a trial past the budget are unchanged.
    """
    solver = DOP853(fun, a, y0, b, rtol=rtol, atol=atol)
    directions = [float(e.direction) for e in events]  # type: ignore[attr-defined]  # scipy's event attributes
    g = [e(a, y0) for e in events]
    t_events: list[list[float]] = [[] for _ in events]
    y_events: list[list[np.ndarray]] = [[] for _ in events]
    ts: list[Any] = [a] if t_eval is None else []
    ys: list[Any] = [y0] if t_eval is None else []
    i_eval = 0
    status = None
    message = ""
    while status is None:
        if budget is not None:
            calls, max_nfev, k_budget = budget
            trial = solver.n_stages  # evaluations per trial step
            calls[1] = calls[0] + trial * max(0, -((calls[0] - max_nfev) // trial))
            try:
                message = solver.step()
            except _BudgetSpent:  # no trial left: stop at the last accepted step
                solver.nfev -= 1  # the refused call evaluated nothing
                t_events[k_budget].append(solver.t)
                y_events[k_budget].append(solver.y)
                status = 1
                break
            finally:
                calls[1] = np.inf
        else:
            message = solver.step()
        if solver.status == "finished":
            status = 0
        elif solver.status == "failed":
            status = -1
            break
        t_old, t, y = solver.t_old, solver.t, solver.y
        sol = None
        g_new = [e(t, y) for e in events]
        active = [
            k
            for k, (g0, g1, s) in enumerate(zip(g, g_new, directions, strict=True))
            if (s >= 0 and g0 <= 0 <= g1) or (s <= 0 and g0 >= 0 >= g1)
        ]
        if active:
            sol = solver.dense_output()
            roots = [
                brentq(lambda u, e=events[k], s=sol: e(u, s(u)), t_old, t, xtol=4 * _EPS, rtol=4 * _EPS) for k in active
            ]
            first = int(np.argsort(roots)[0])  # terminal events: the earliest root ends the piece
            t_events[active[first]].append(roots[first])
            y_events[active[first]].append(sol(roots[first]))
            status = 1
            t = roots[first]
            y = sol(t)
        g = g_new
        if t_eval is None:
            ts.append(t)
            ys.append(y)
        else:
            i_new = int(np.searchsorted(t_eval, t, side="right"))
            step = t_eval[i_eval:i_new]
            if step.size:
                if sol is None:
                    sol = solver.dense_output()
                ts.append(step)
                ys.append(sol(step))
                i_eval = i_new
    if t_eval is None:
        t_out, y_out = np.array(ts), np.vstack(ys).T
    elif ts:
        t_out, y_out = np.hstack(ts), np.hstack(ys)
    else:
        t_out, y_out = np.array([]), np.zeros((y0.size, 0))
    return _Solution(
        t=t_out,
        y=y_out,
        t_events=[np.asarray(te) for te in t_events],
        y_events=[np.asarray(ye) for ye in y_events],
        nfev=solver.nfev,
        status=status,
        message=_MESSAGES.get(status, message),
    )


@dataclass
class _Piece:
    """What one piece of :func:`integrate_moments` produced: its kept points and how it ended."""

    t: np.ndarray
    y: np.ndarray
    status: Status
    crossing_time: float | None
    message: str


def _piece_points(
    sol: Any, keep_eval: np.ndarray | None, first: bool, d: int, blowup_norm: float, max_nfev: int, t1: float
) -> _Piece:
    """The points of one ``solve_ivp`` piece that the trajectory keeps, and its status."""
    # with t_eval and a terminal event before its first time, solve_ivp returns empty lists
    seg_t = np.asarray(sol.t, dtype=float)
    seg_y = np.asarray(sol.y, dtype=float).reshape(d + d * d, -1).T
    if keep_eval is not None:
        keep = np.isin(seg_t, keep_eval)
        seg_t, seg_y = seg_t[keep], seg_y[keep]
    elif not first:
        seg_t, seg_y = seg_t[1:], seg_y[1:]  # the break is already the previous piece's end
    status, crossing_time, message = Status.COMPLETED, None, sol.message
    if sol.status == 1:  # a terminal event fired: blow-up, or the budget ran out
        fired = 0 if len(sol.t_events[0]) else 1
        te, ye = sol.t_events[fired][0], sol.y_events[fired][0]
        before = seg_t < te
        seg_t = np.append(seg_t[before], te)
        seg_y = np.vstack([seg_y[before], ye[None]])
        if fired == 0:
            status, crossing_time = Status.BLOWUP, float(te)
            which = "||mu||_2" if np.linalg.norm(ye[:d]) >= np.linalg.norm(ye[d:]) else "||Sigma||_F"
            message = f"{which} crossed blowup_norm = {blowup_norm:.3g} at t = {te:.6g}"
        else:
            status = Status.BUDGET
            message = (
                f"stopped after max_nfev = {max_nfev} right-hand-side evaluations at "
                f"t = {te:.6g} of t1 = {t1:.6g}: raise max_nfev or shorten t_span"
            )
    elif sol.status < 0:
        status = Status.FAILED
    return _Piece(seg_t, seg_y, status, crossing_time, message)


def _checked_t_eval(t_eval: Any, t0: float, t1: float) -> np.ndarray | None:
    if t_eval is None:
        return None
    t_eval = as_float_array(t_eval, "t_eval")
    if (
        t_eval.ndim != 1
        or not np.all(np.isfinite(t_eval))
        or np.any(np.diff(t_eval) <= 0)
        or (t_eval.size and (t_eval[0] < t0 or t_eval[-1] > t1))
    ):
        raise ValueError("t_eval must be finite, strictly increasing and lie inside t_span")
    return t_eval


def integrate_moments(
    mu0: Any,
    Sigma0: Any,
    controls: ControlsLike,
    t_span: tuple[float, float],
    t_eval: Any = None,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    blowup_norm: float = 1e8,
    max_nfev: int = MAX_NFEV,
) -> MomentTrajectory:
    r"""Integrate the moment ODE (eq. 1.1) from :math:`(\mu_0, \Sigma_0)` over ``t_span``.

    Adaptive Dormand–Prince 8(5,3) (``scipy.integrate.solve_ivp``, ``DOP853``) with tight default
    tolerances. Piecewise controls are integrated piece by piece, so their breaks are honoured
    exactly. Finite-time blow-up is a terminal event: integration stops when
    :math:`\|\Sigma(t)\|_F` or :math:`\|\mu(t)\|_2` (a mean can grow exponentially while
    :math:`\Sigma` stays bounded) crosses ``blowup_norm``; the arrays end at that time, and the
    trajectory carries ``status="blowup"`` and ``crossing_time``. No NaN, no warnings.

    The work is bounded: after ``max_nfev`` evaluations of the right-hand side the integration
    stops at the end of the current step with ``status="budget"`` (or, when that step's trial is
    rejected, at the end of the previous one: no trial step starts once the budget is spent, so at
    most one trial and one dense output go beyond it; a last step that reaches ``t_span[1]`` completes
    the integration, ``status="completed"``) (a long ``t_span`` on a decaying
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

    Examples
    --------
    >>> from gtcore import Controls, integrate_moments
    >>> tr = integrate_moments(np.zeros(1), np.eye(1), Controls(A=-np.eye(1)), (0.0, 1.0))
    >>> tr.status
    <Status.COMPLETED: 'completed'>
    >>> round(float(tr.Sigma[-1, 0, 0]), 9), round(float(np.exp(-2.0)), 9)  # Sigma(t) = e^(-2t)
    (0.135335283, 0.135335283)
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0)
    d = mu0.shape[0]
    fn = as_control_function(controls, d, state_name="mu0")
    t0, t1 = check_span(t_span)
    t_eval = _checked_t_eval(t_eval, t0, t1)
    rtol = check_positive(rtol, "rtol")
    atol = check_positive(atol, "atol")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    max_nfev = check_count(max_nfev, "max_nfev")
    _check_below_blowup(blowup_norm, Sigma0=Sigma0, mu0=mu0)

    calls: list[float] = [0, np.inf]  # right-hand-side evaluations, all pieces together, and their limit in a step
    events = _stop_events(d, blowup_norm, max_nfev, calls, t1)
    pieces: list[_Piece] = []
    y = np.concatenate([mu0, Sigma0.ravel()])
    nfev = 0
    segments = _segments(t0, t1, control_breaks(controls))
    for k, (a, b) in enumerate(segments):
        solve_eval = keep_eval = None
        if t_eval is not None:
            last = k == len(segments) - 1
            mask = (t_eval >= a) & ((t_eval <= b) if last else (t_eval < b))
            keep_eval = t_eval[mask]
            solve_eval = np.union1d(keep_eval, [b])  # b is always solved for, to go on from it
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow fails the step, no warning
            sol = _dop853(
                _piece_rhs(fn, a, b, d, calls), a, b, y, rtol, atol, solve_eval, events, budget=(calls, max_nfev, 1)
            )
        nfev += sol.nfev
        if sol.status == 0:
            y = sol.y[:, -1]
        pieces.append(_piece_points(sol, keep_eval, k == 0, d, blowup_norm, max_nfev, t1))
        if sol.status != 0:
            break
    t = np.concatenate([p.t for p in pieces])
    Y = np.concatenate([p.y for p in pieces])
    if t.size > 1 and t[-1] <= t[-2]:  # an event located at a break (to round-off): the event's state replaces
        t, Y = np.delete(t, -2), np.delete(Y, -2, axis=0)  # the break's, so times stay strictly increasing
    Sigma = Y[:, d:].reshape(-1, d, d)
    Sigma = psd_project(0.5 * (Sigma + np.swapaxes(Sigma, 1, 2)))
    end = pieces[-1]
    return MomentTrajectory(
        t=t,
        mu=np.ascontiguousarray(Y[:, :d]),
        Sigma=Sigma,
        status=end.status,
        crossing_time=end.crossing_time,
        message=end.message,
        nfev=nfev,
    )
