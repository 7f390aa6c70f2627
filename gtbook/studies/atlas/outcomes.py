r"""What a constant layer does to the covariance in the long run, decided for many layers at once.

Every lane (one constant layer and one :math:`\Sigma_0`) is integrated with
:func:`gtcore.moments.lanes.integrate_lanes` (DOP853, each lane with its own steps; the covariance equation of
every attention type through :class:`gtcore.moments.batched.LaneStack`) on :math:`[0, T]` and then
:math:`[T, 2T]` (and longer where that decides it, below), stopping a lane when :math:`\|\Sigma\|_F` reaches
``escape`` times :math:`\max(\|\Sigma_0\|_F, 1)`. The verdict (:class:`Outcome`) is decided by two tests, fixed before
any ensemble was run:

**Escaping lanes: the blow-up exponent.** With :math:`q = \tfrac{d}{dt}\|\Sigma\| / \|\Sigma\|^2`
measured where the norm first passes :math:`10^{-2}` ``escape`` (:math:`\Sigma_1`) and at the stop
(:math:`\Sigma_2`), let

.. math::

    \kappa = \frac{\log(q_2/q_1)}{\log(\|\Sigma_2\|/\|\Sigma_1\|)} .

If :math:`\|\Sigma\| \sim c\,(t^* - t)^{-p}` (a pole of order :math:`p`), then
:math:`q \propto \|\Sigma\|^{1/p - 1}`: :math:`\kappa = 1/p - 1`, which is 0 for the simple pole of a
quadratic (Riccati) equation. If :math:`\|\Sigma\| \sim e^{rt}`, :math:`q = r/\|\Sigma\|`:
:math:`\kappa = -1`; polynomial growth :math:`t^m` gives :math:`\kappa = -1 - 1/m < -1`. Decision:
**finite-time blow-up** iff :math:`\kappa > -\tfrac12` (half-way between the simple pole and
exponential growth; any pole of order :math:`p < 2`), **exponential growth** iff
:math:`-\tfrac32 < \kappa \le -\tfrac12`, otherwise **polynomial growth**. A linear bound
:math:`\|\Sigma'\| \le L\|\Sigma\|` (L2 attention with invertible keys, Sinkhorn attention: proved in
:mod:`gtcore.attention`) forces :math:`q_2 \le L/\|\Sigma_2\|`, so such a layer can only be called a
blow-up if :math:`q_1` is tiny: the chapter checks that none is. This is a test of the asymptotic
form, not a proof; where a proof exists (:math:`V = vI`, :func:`gtcore.riccati.blowup_time`'s closed
form) the chapter compares them. Unlike a pole-time extrapolation, it does not "find" a pole in an
exponentially growing covariance.

**Lanes float64 cannot follow** stop when :math:`\lambda_{\min}(\Sigma) < 10^3\epsilon\,\lambda_{\max}(\Sigma)` once
its norm has grown a hundredfold: the covariance collapses across some direction while it grows along others,
faster than round-off can keep. Their outcome is **growth with collapse** (what the lane was seen to do; whether
the growth ends in a pole is not decided). A stiff lane that the implicit method taking over cannot finish
within its budget ends as **integration failed**.

**Non-escaping lanes: the doubling test.** With :math:`\lambda_1 \le \dots \le \lambda_d` the
eigenvalues at :math:`T` and :math:`2T`, :math:`\alpha_i = \log_2(\lambda_i(2T)/\lambda_i(T))`: an
eigenvalue tending to a positive limit has :math:`\alpha_i \to 0`; one decaying algebraically like
:math:`c/t` (the peers' experiment) has :math:`\alpha_i \to -1`; exponential decay gives
:math:`\alpha_i \ll -1`. Eigenvalue :math:`i` *persists* if :math:`\lambda_i(2T) \ge \eta\|\Sigma_0\|`
and :math:`\alpha_i \ge -\tfrac14`, *decays* if :math:`\lambda_i(2T) < \eta\|\Sigma_0\|` or
:math:`\alpha_i \le -\tfrac34` (margins of a quarter on either side of the midpoint
:math:`-\tfrac12`); the test decides when every eigenvalue persists or decays, none grows
(:math:`\alpha_i > \tfrac14`) and the covariance has stopped moving,
:math:`2T\,\|\Sigma'(2T)\|/\|\Sigma(2T)\| \le 2` while some eigenvalue persists (algebraic decay gives 1, a rotating
covariance grows with :math:`T`). The rank of the limit is the number of persisting eigenvalues: :math:`d` is an
**equilibrium**, :math:`0 < r < d` a **lower-rank limit**, 0 a **collapse to 0**.

**An adaptive horizon for what the first doubling leaves undecided.** A lane the test does not decide on
:math:`[T, 2T]` goes on, doubling :math:`T` (:math:`[2T, 4T]`, then :math:`[4T, 8T]`: :data:`EXTENSIONS`), with the
same tests at each stage (an escape is judged by the blow-up exponent). What is still undecided at
:math:`8T` is named by what blocks the decision at the last stage, in this order: a growing eigenvalue
(**undecided at the horizon**: it grows, but has not escaped), an eigenvalue between the bands,
:math:`-\tfrac34 < \alpha_i < -\tfrac14` (**slow algebraic decay**, like :math:`t^{\alpha_i}`), a covariance still
moving with persisting eigenvalues (**rotation**). An escaping lane with :math:`\kappa \le -\tfrac32` is
**polynomial growth**.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from gtcore.controls import Controls
from gtcore.moments.batched import LaneStack, stack_controls
from gtcore.moments.lanes import integrate_lanes

__all__ = ["DECIDED", "EXTENSIONS", "OUTCOMES", "LaneVerdicts", "Outcome", "classify_lanes", "growth_exponent"]


class Outcome(str, Enum):
    """The long-time behaviour of :math:`\\Sigma(t)` (see the module docstring for the tests)."""

    EQUILIBRIUM = "equilibrium"
    LOWER_RANK = "lower-rank limit"
    COLLAPSE = "collapse to 0"
    BLOWUP = "finite-time blow-up"
    EXPONENTIAL = "exponential growth"
    POLYNOMIAL = "polynomial growth"
    GROWTH_COLLAPSE = "growth with collapse"
    ALGEBRAIC = "slow algebraic decay"
    ROTATION = "rotation"
    UNDECIDED = "undecided at the horizon"
    FAILED = "integration failed"


#: the outcomes in the order the book's tables and figures use
OUTCOMES = tuple(Outcome)
#: the verdicts of the two tests (a limit and its rank, or the kind of escape), as strings; the other outcomes
#: say what the lane did where the tests abstain
DECIDED = tuple(
    o.value for o in (Outcome.EQUILIBRIUM, Outcome.LOWER_RANK, Outcome.COLLAPSE, Outcome.BLOWUP, Outcome.EXPONENTIAL)
)
#: further doubling stages for the lanes the first doubling test leaves undecided (:math:`T` up to :math:`8T`)
EXTENSIONS = 2

#: thresholds of the two tests (module docstring), fixed before any ensemble was run
KAPPA_BLOWUP = -0.5
KAPPA_EXPONENTIAL = -1.5
ALPHA_PERSIST = -0.25
ALPHA_DECAY = -0.75
ALPHA_GROW = 0.25
MOVING = 2.0
ETA = 1e-9
#: per-lane budget of DOP853 evaluations per stage before the implicit method takes over
MAX_NFEV = 12_000
#: budget of the implicit method per stiff lane and stage
IMPLICIT_NFEV = 20_000
#: a lane stops as "unresolved" once lambda_min(Sigma) < UNRESOLVED eps lambda_max(Sigma): float64 no longer
#: resolves its smallest eigenvalue (and the square roots of the Sinkhorn gain lose their smoothness)
UNRESOLVED = 1e3


@dataclass
class LaneVerdicts:
    r"""The verdicts of :func:`classify_lanes`, one entry per lane.

    Attributes
    ----------
    outcome : (n,) array of :class:`Outcome` values (strings)
    rank : (n,) rank of the limit (-1 where there is no limit)
    t_end : (n,) time at which the lane stopped (escape), or the end of its last stage (``2T``, later for the lanes
        the first doubling test left undecided)
    t_pole : (n,) for escaping lanes :math:`t_e + \|\Sigma\|/\tfrac{d}{dt}\|\Sigma\|` (the pole time
        if it is a simple pole), else NaN
    kappa : (n,) the blow-up exponent (NaN for non-escaping lanes)
    rate : (n,) :math:`\tfrac{d}{dt}\log\|\Sigma\|` at the stop (escaping lanes), else NaN
    alpha : (n, d) the doubling exponents of the last stage (NaN for escaping lanes)
    moving : (n,) :math:`2T\|\Sigma'\|/\|\Sigma\|` at the end of the last stage (NaN for escaping lanes)
    Sigma : (n, d, d) the last covariance
    failed : (n,) bool, the integrator gave up (step too small) on the lane
    stiff : (n,) bool, the lane went on with the implicit method (see :func:`classify_lanes`)
    unresolved : (n,) bool, the implicit method stopped where float64 no longer resolves
        :math:`\lambda_{\min}(\Sigma)` against :math:`\lambda_{\max}(\Sigma)` (outcome "growth with collapse")
    """

    outcome: np.ndarray
    rank: np.ndarray
    t_end: np.ndarray
    t_pole: np.ndarray
    kappa: np.ndarray
    rate: np.ndarray
    alpha: np.ndarray
    moving: np.ndarray
    Sigma: np.ndarray
    failed: np.ndarray
    stiff: np.ndarray
    unresolved: np.ndarray

    def __len__(self) -> int:
        return self.outcome.size

    def counts(self) -> dict[str, int]:
        """How many lanes ended in each outcome."""
        return {o.value: int(np.sum(self.outcome == o.value)) for o in OUTCOMES}

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}: {v}" for k, v in self.counts().items() if v)
        return f"LaneVerdicts(n={len(self)}; {parts})"


def growth_exponent(norm1: float, q1: float, norm2: float, q2: float) -> float:
    r"""The blow-up exponent :math:`\kappa = \log(q_2/q_1)/\log(\|\Sigma_2\|/\|\Sigma_1\|)` (module docstring)."""
    if not (q1 > 0 and q2 > 0 and norm2 > norm1 > 0):
        return math.nan
    return math.log(q2 / q1) / math.log(norm2 / norm1)


def _norm_rate(S: np.ndarray, dS: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(||Sigma||_F, d/dt ||Sigma||_F) for stacks."""
    n = np.linalg.norm(S, axis=(1, 2))
    return n, np.einsum("kij,kij->k", S, dS) / np.where(n > 0, n, 1.0)


class _OutOfBudget(Exception):
    pass


def _implicit(
    stack: LaneStack,
    lane: int,
    t0: float,
    t1: float,
    y0: np.ndarray,
    level: float,
    rtol: float,
    atol: float,
    seen: np.ndarray,
    first: np.ndarray,
    n0: float,
) -> tuple[float, np.ndarray, str]:
    r"""One stiff lane from ``t0`` with LSODA (stiff BDF once it detects stiffness), the two thresholds as events.

    At most :data:`IMPLICIT_NFEV` evaluations: past them the lane is "failed"; and it stops as
    "unresolved" when :math:`\lambda_{\min}(\Sigma) < 10^3\,\epsilon\,\lambda_{\max}(\Sigma)` (float64 no
    longer holds the smallest eigenvalue): outcomes "integration failed" and "growth with collapse".
    """
    from scipy.integrate import solve_ivp

    d = stack.d
    calls = [0]

    def f(t, y):
        calls[0] += 1
        if calls[0] > IMPLICIT_NFEV:
            raise _OutOfBudget
        S = y.reshape(d, d)
        return stack.covariance_rhs(0.5 * (S + S.T), lane).ravel()

    def passing(t, y):
        return np.linalg.norm(y) - level / 100.0

    def escaping(t, y):
        return np.linalg.norm(y) - level

    def unresolved(t, y):
        w = np.linalg.eigvalsh(0.5 * (y.reshape(d, d) + y.reshape(d, d).T))
        if np.linalg.norm(y) < 100.0 * max(n0, 1.0):
            return -1.0
        return w[-1] * np.finfo(float).eps * UNRESOLVED - w[0]

    passing.direction = escaping.direction = unresolved.direction = 1  # type: ignore[attr-defined]  # scipy events
    escaping.terminal = unresolved.terminal = True  # type: ignore[attr-defined]
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            sol = solve_ivp(
                f, (t0, t1), y0, method="LSODA", rtol=rtol, atol=atol, events=[passing, escaping, unresolved]
            )
    except _OutOfBudget:
        return t0, y0, "failed"
    if len(sol.t_events[0]) and not seen[lane]:
        first[lane] = sol.y_events[0][0].reshape(d, d)
        seen[lane] = True
    if sol.status == 1 and len(sol.t_events[1]):
        return float(sol.t_events[1][0]), sol.y_events[1][0], "stopped"
    if sol.status == 1:
        return float(sol.t_events[2][0]), sol.y_events[2][0], "unresolved"
    return float(sol.t[-1]), sol.y[:, -1], "completed" if sol.status == 0 else "failed"


def _initial_covariances(Sigma0: Any, n: int, d: int, horizon: float, escape: float) -> np.ndarray:
    """``Sigma0`` as (n, d, d), checked (finite, symmetric, positive definite), with ``horizon`` and ``escape``."""
    S0 = np.broadcast_to(np.asarray(Sigma0, float), (n, d, d)).copy()
    if not np.all(np.isfinite(S0)) or not np.allclose(S0, np.swapaxes(S0, 1, 2), rtol=0, atol=1e-12):
        raise ValueError("Sigma0 must be finite and symmetric")
    if np.any(np.linalg.eigvalsh(S0)[:, 0] <= 0):
        raise ValueError("Sigma0 must be positive definite (the rank of the limit is read against d)")
    if not (horizon > 0 and math.isfinite(horizon)):
        raise ValueError(f"horizon must be positive and finite, got {horizon!r}")
    if not escape > 1e2:
        raise ValueError(f"escape must exceed 100 (two thresholds, escape/100 and escape), got {escape!r}")
    return S0


def _escaped_verdicts(
    stack: LaneStack,
    esc: np.ndarray,
    S_end: np.ndarray,
    t_end: np.ndarray,
    seen: np.ndarray,
    first: np.ndarray,
    outcome: np.ndarray,
    t_pole: np.ndarray,
    kappa: np.ndarray,
    rate: np.ndarray,
) -> None:
    """The lanes that escaped: growth rate, pole time, growth exponent and outcome (written in place)."""
    S2 = S_end[esc]
    n2, r2 = _norm_rate(S2, stack.covariance_rhs(S2, esc))
    ok = seen[esc]
    S1 = np.where(ok[:, None, None], first[esc], S2)
    S1 = 0.5 * (S1 + np.swapaxes(S1, 1, 2))
    n1, r1 = _norm_rate(S1, stack.covariance_rhs(S1, esc))
    for j, lane in enumerate(esc):
        rate[lane] = r2[j] / n2[j]
        if r2[j] > 0:
            t_pole[lane] = t_end[lane] + n2[j] / r2[j]
        kappa[lane] = growth_exponent(n1[j], r1[j] / n1[j] ** 2, n2[j], r2[j] / n2[j] ** 2)
        if kappa[lane] > KAPPA_BLOWUP:
            outcome[lane] = Outcome.BLOWUP.value
        elif kappa[lane] > KAPPA_EXPONENTIAL:
            outcome[lane] = Outcome.EXPONENTIAL.value
        elif kappa[lane] <= KAPPA_EXPONENTIAL:
            outcome[lane] = Outcome.POLYNOMIAL.value


def _settled_verdicts(
    stack: LaneStack,
    done: np.ndarray,
    Y_T: np.ndarray,
    S_end: np.ndarray,
    n0: np.ndarray,
    horizon: float,
    outcome: np.ndarray,
    rank: np.ndarray,
    alpha: np.ndarray,
    moving: np.ndarray,
) -> np.ndarray:
    """The doubling test on the lanes that completed :math:`[T, 2T]`: eigenvalue exponents, motion, rank and
    outcome (written in place). Returns, per lane of ``done``, whether the test left it undecided; those lanes'
    outcome is the name of what blocks the decision (module docstring), final only at the last stage."""
    d = stack.d
    ST = Y_T[done].reshape(-1, d, d)
    ST = 0.5 * (ST + np.swapaxes(ST, 1, 2))
    S2 = S_end[done]
    lam1, lam2 = np.linalg.eigvalsh(ST), np.linalg.eigvalsh(S2)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log2(lam2 / lam1)
    a = np.where((lam1 > 0) & (lam2 > 0), a, -np.inf)
    alpha[done] = a
    dS = stack.covariance_rhs(S2, done)
    norm2 = np.linalg.norm(S2, axis=(1, 2))
    mv = 2 * horizon * np.linalg.norm(dS, axis=(1, 2)) / np.where(norm2 > 0, norm2, 1.0)
    moving[done] = mv
    tiny = lam2 < ETA * n0[done, None]
    persist = ~tiny & (a >= ALPHA_PERSIST)
    decay = tiny | (a <= ALPHA_DECAY)
    growing = np.any(~tiny & (a > ALPHA_GROW), axis=1)
    between = ~np.all(persist | decay, axis=1)
    # a covariance that has vanished (every eigenvalue below eta ||Sigma0||) is not tested for motion
    still = (mv <= MOVING) | ~np.any(persist, axis=1)
    decided = ~between & ~growing & still
    for j, lane in enumerate(done):
        if not decided[j]:
            outcome[lane] = (
                Outcome.UNDECIDED if growing[j] else Outcome.ALGEBRAIC if between[j] else Outcome.ROTATION
            ).value
            continue
        r = int(persist[j].sum())
        rank[lane] = r
        outcome[lane] = (Outcome.EQUILIBRIUM if r == d else Outcome.COLLAPSE if r == 0 else Outcome.LOWER_RANK).value
    return ~decided


def classify_lanes(
    controls: Sequence[Controls] | LaneStack,
    Sigma0: Any,
    *,
    horizon: float = 100.0,
    escape: float = 1e6,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    max_nfev: int = MAX_NFEV,
) -> LaneVerdicts:
    r"""Integrate :math:`\Sigma' = F\Sigma + \Sigma F^\top` for every lane and decide its :class:`Outcome`.

    Parameters
    ----------
    controls : n constant :class:`~gtcore.controls.Controls` of one dimension and attention type, or their
        :class:`~gtcore.moments.batched.LaneStack`
    Sigma0 : (d, d) or (n, d, d) initial covariances, symmetric positive definite
    horizon : :math:`T`; lanes are integrated to :math:`2T`, those the doubling test leaves undecided up to
        :math:`2^{1 + E}T` (:data:`EXTENSIONS` :math:`= E`)
    escape : a lane stops when :math:`\|\Sigma\|_F \ge` ``escape`` :math:`\max(\|\Sigma_0\|_F, 1)`
    rtol, atol : DOP853 tolerances (``atol`` relative to :math:`\|\Sigma_0\|_F`)
    max_nfev : per-lane budget of the explicit method on each stage; a lane that spends it
        (stiff: e.g. a covariance growing along a direction where :math:`x^\top Bx = 0` while it
        collapses across it) goes on with LSODA (``solve_ivp``, stiff BDF), same
        tolerances and thresholds (``stiff`` in the result)

    Returns
    -------
    LaneVerdicts
    """
    stack = controls if isinstance(controls, LaneStack) else stack_controls(controls)
    n, d = stack.n, stack.d
    S0 = _initial_covariances(Sigma0, n, d, horizon, escape)
    n0 = np.linalg.norm(S0, axis=(1, 2))
    level = escape * np.maximum(n0, 1.0)
    first = np.full((n, d, d), np.nan)  # the state where the norm first passes level / 100
    seen = np.zeros(n, dtype=bool)
    stiff = np.zeros(n, dtype=bool)
    unres = np.zeros(n, dtype=bool)

    def run(t0, t1, Y, lanes):
        def rhs(t, Yk, k):
            S = Yk.reshape(-1, d, d)
            return stack.covariance_rhs(0.5 * (S + np.swapaxes(S, 1, 2)), lanes[k]).reshape(-1, d * d)

        def stop(Yk, k):
            g = lanes[k]
            norms = np.linalg.norm(Yk, axis=1)
            new = (norms >= level[g] / 100.0) & ~seen[g]
            if np.any(new):
                first[g[new]] = Yk[new].reshape(-1, d, d)
                seen[g[new]] = True
            S = Yk.reshape(-1, d, d)
            w = np.linalg.eigvalsh(0.5 * (S + np.swapaxes(S, 1, 2)))
            lost = (w[:, 0] < UNRESOLVED * np.finfo(float).eps * w[:, -1]) & (norms >= 100.0 * np.maximum(n0[g], 1.0))
            unres[g[lost]] = True
            return (norms >= level[g]) | lost

        sol = integrate_lanes(rhs, (t0, t1), Y, rtol=rtol, atol=atol * n0[lanes], stop=stop, max_nfev=max_nfev)
        t_out, y_out, st = sol.t.copy(), sol.y.copy(), sol.status.astype(object)
        st[(st == "stopped") & unres[lanes]] = "unresolved"
        for j in np.flatnonzero(st == "budget"):  # stiff: an implicit method from where DOP853 gave up
            g = lanes[j]
            stiff[g] = True
            t_out[j], y_out[j], st[j] = _implicit(
                stack, g, t_out[j], t1, y_out[j], level[g], rtol, atol * n0[g], seen, first, float(n0[g])
            )
        return t_out, y_out, st.astype(str)

    outcome = np.full(n, Outcome.UNDECIDED.value, dtype=object)
    rank = np.full(n, -1)
    t_pole = np.full(n, np.nan)
    kappa = np.full(n, np.nan)
    rate = np.full(n, np.nan)
    alpha = np.full((n, d), np.nan)
    moving = np.full(n, np.nan)
    t_end, Y_end, status = run(0.0, horizon, S0.reshape(n, d * d), np.arange(n))
    Y_T = Y_end.copy()
    # the doubling test on [T, 2T]; the lanes it leaves undecided go on to [2T, 4T], ... (EXTENSIONS stages more)
    go, T = np.flatnonzero(status == "completed"), horizon
    for _ in range(1 + EXTENSIONS):
        if go.size == 0:
            break
        Y_T[go] = Y_end[go]
        t_end[go], Y_end[go], status[go] = run(T, 2 * T, Y_T[go], go)
        done = go[status[go] == "completed"]
        S_done = Y_end[done].reshape(-1, d, d)
        S_last = np.zeros((n, d, d))
        S_last[done] = 0.5 * (S_done + np.swapaxes(S_done, 1, 2))
        undecided = (
            _settled_verdicts(stack, done, Y_T, S_last, n0, T, outcome, rank, alpha, moving)
            if done.size
            else np.zeros(0, dtype=bool)
        )
        go, T = done[undecided], 2 * T
    S_end = Y_end.reshape(n, d, d)
    S_end = 0.5 * (S_end + np.swapaxes(S_end, 1, 2))
    failed = status == "failed"
    unresolved = status == "unresolved"
    outcome[failed] = Outcome.FAILED.value
    outcome[unresolved] = Outcome.GROWTH_COLLAPSE.value
    esc = np.flatnonzero(status == "stopped")
    if esc.size:
        alpha[esc], moving[esc], rank[esc] = np.nan, np.nan, -1
        outcome[esc] = Outcome.UNDECIDED.value  # an exponent that cannot be measured decides nothing
        _escaped_verdicts(stack, esc, S_end, t_end, seen, first, outcome, t_pole, kappa, rate)
    return LaneVerdicts(
        outcome=outcome.astype(str),
        rank=rank,
        t_end=t_end,
        t_pole=t_pole,
        kappa=kappa,
        rate=rate,
        alpha=alpha,
        moving=moving,
        Sigma=S_end,
        failed=failed,
        stiff=stiff,
        unresolved=unresolved,
    )
