r"""The regime of constant controls from an initial covariance: converges, collapses to 0, blows up."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gtcore._repr import short_repr
from gtcore._validation import (
    check_covariance,
    check_positive,
)
from gtcore.controls import Controls
from gtcore.moments import integrate_moments, integrate_moments_lanes
from gtcore.riccati import (
    _blowup_closed_form,
    _blowup_numerical,
    _check_controls,
    _default_t_max,
    _definiteness,
    _fmt_spec,
    _lyapunov_P,
    _RiccatiKernel,
    _spectrum_class,
    riccati_quadratic,
)
from gtcore.stability.equilibria import (
    _F,
    NoEquilibriumError,
    equilibrium,
    linear_stability,
)
from gtcore.status import Stability, Status, Verdict

__all__ = ["VERDICTS", "Regime", "classify", "observe_regime", "observe_regimes"]


#: the verdicts of :func:`~gtcore.stability.classify` and :func:`~gtcore.stability.observe_regime`
#: (members of :class:`~gtcore.status.Verdict`)
VERDICTS = (Verdict.CONVERGES, Verdict.COLLAPSES, Verdict.BLOWS_UP, Verdict.GROWS_EXPONENTIALLY, Verdict.UNDETERMINED)


# ------------------------------------------------------------------------------ classify
@dataclass(frozen=True)
class Regime:
    r"""The long-time behaviour of :math:`\Sigma(t)` from :math:`\Sigma_0`.

    Attributes
    ----------
    verdict : Verdict
        :class:`~gtcore.status.Verdict`: ``CONVERGES``, ``COLLAPSES`` (to 0), ``BLOWS_UP`` (a certified
        pole), ``GROWS_EXPONENTIALLY`` (no pole, proved; unbounded) or ``UNDETERMINED``.
    reason : str
        Why (definiteness of V and B, spectrum of A, what was computed).
    Sigma_star : (d, d) ndarray or None
        The limit for ``CONVERGES``, else None.
    t_star : float or None
        The blow-up time for ``BLOWS_UP``, else None.
    method : str
        ``"closed form"`` (:math:`V_h = v_hI`) or ``"numerical"`` (general :math:`V`, or when the
        :math:`V = vI` blow-up search fell back to the integrator, see :class:`~gtcore.riccati.BlowupTime`).

    Examples
    --------
    >>> from gtcore import Controls, classify
    >>> r = classify(Controls(A=np.eye(1), V=np.eye(1), B=np.eye(1)), np.eye(1))
    >>> r.verdict, round(r.t_star, 9), round(float(np.log(2.0) / 2), 9)  # t* = log(1 + 2a/(q sigma0)) / (2a)
    (<Verdict.BLOWS_UP: 'blows up'>, 0.34657359, 0.34657359)
    """

    verdict: Verdict
    reason: str
    Sigma_star: np.ndarray | None = None
    t_star: float | None = None
    method: str = "closed form"

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def _describe(controls: Controls) -> str:
    Vs = [_definiteness(V) for V in controls.V]
    Bs = [_definiteness(B) for B in controls.B]
    return (
        f"V {'/'.join(Vs)}, B {'/'.join(Bs)} (symmetric parts), "
        f"{_spectrum_class(controls.affine_A)[0]} A with {_fmt_spec(np.linalg.eigvals(controls.affine_A))}"
    )


def classify(controls: Controls, Sigma0: Any, *, t_max: float | None = None) -> Regime:
    r"""Classify the covariance's fate: converges (to which :math:`\Sigma^*`), collapses to 0,
    blows up (at which :math:`t^*`), or undetermined.

    With every :math:`V_h = v_hI` (:math:`Q = \sum_h v_h(B_h + B_h^\top)`) the verdict is exact:

    * finite :func:`~gtcore.riccati.blowup_time` (a certified pole) :math:`\Rightarrow` "blows up";
    * :math:`A` anti-stable and :math:`P^*A + A^\top P^* = -Q` with :math:`P^* \succ 0`,
      :math:`\Sigma_0 \succ 0` :math:`\Rightarrow` "converges" to :math:`(P^*)^{-1}`
      (:math:`P(t) - P^* = e^{-A^\top t}(P_0 - P^*)e^{-At} \to 0`);
    * :math:`A` Hurwitz and :math:`I - KY_\infty K \succ 0` :math:`\Rightarrow` "collapses to 0";
    * :math:`A` anti-stable, :math:`Q \preceq 0` and :math:`P^*` singular :math:`\Rightarrow` "grows
      exponentially" (:math:`P(t) \succeq e^{-A^\top t}P_0e^{-At}` keeps :math:`\Sigma(t) \preceq
      e^{At}\Sigma_0e^{A^\top t}`, while :math:`\lambda_{\min}(P(t)) \to 0`);
    * otherwise "undetermined" (spectrum of :math:`A` on both sides of, or on, the imaginary
      axis; rank-deficient :math:`\Sigma_0` with anti-stable :math:`A`; a singular limit).

    For general :math:`V` the verdict is numerical: the ODE is integrated to ``t_max`` and
    compared with the Newton equilibrium and its linear stability. It agrees with
    :func:`~gtcore.riccati.blowup_time`: "blows up" only for a certified pole, "grows exponentially" when the
    threshold is crossed but the attention's drift is bounded (no pole is possible), and
    "undetermined" for a crossing that nothing certifies either way.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters.
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite.
    t_max : float, optional
        Horizon of the numerical checks (default as in :func:`~gtcore.riccati.blowup_time`).

    Returns
    -------
    Regime
        The verdict, its reason, the limit or the blow-up time, and how it was obtained.

    Examples
    --------
    >>> from gtcore import Controls, classify
    >>> classify(Controls(A=np.eye(2), V=-np.eye(2), B=np.eye(2)), np.eye(2)).verdict
    <Verdict.CONVERGES: 'converges'>
    >>> classify(Controls(A=-np.eye(2), V=np.eye(2), B=np.eye(2)), 0.1 * np.eye(2)).verdict
    <Verdict.COLLAPSES: 'collapses to 0'>
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    if t_max is not None:
        t_max = check_positive(t_max, "t_max")
    A = controls.affine_A
    desc = _describe(controls)
    Q = riccati_quadratic(controls)
    if Q is None:
        return _classify_numerical(controls, S0, t_max, desc)
    bt = _blowup_closed_form(S0, controls, Q, t_max)
    qd = _definiteness(Q)
    # the verdict rests on the blow-up search: numerical when that search fell back to the integrator
    meth = "numerical" if bt.method == "numerical" else "closed form"
    if math.isfinite(bt.t_star):
        return Regime(
            Verdict.BLOWS_UP, f"{desc}; Q = sum v_h(B_h + B_h^T) {qd}: {bt.reason}", t_star=bt.t_star, method=meth
        )
    if bt.crossing_time is not None:  # the numerical fallback saw unbounded growth: say what it proved
        return Regime(
            bt.verdict if bt.verdict is Verdict.GROWS_EXPONENTIALLY else Verdict.UNDETERMINED,
            f"{desc}; Q {qd}: {bt.reason}",
            method=meth,
        )
    cls, lam = _spectrum_class(A)
    full_rank = np.linalg.eigvalsh(S0)[0] > 1e-12 * max(float(np.linalg.norm(S0)), 1e-300)
    if cls == "anti-stable":
        if not full_rank:
            return Regime(
                Verdict.UNDETERMINED,
                f"{desc}; rank(Sigma0) < d is invariant, so there is no positive-definite limit",
                method=meth,
            )
        P = _lyapunov_P(A, Q)
        assert P is not None  # A anti-stable: the Lyapunov equation has a unique solution
        w = np.linalg.eigvalsh(P)
        if w[0] > 0:
            S = np.linalg.inv(P)
            return Regime(
                Verdict.CONVERGES,
                f"{desc}; Q {qd}: A anti-stable, so P(t) = Sigma(t)^-1 -> P* "
                f"at rate 2 min Re spec(A) = {2 * lam.real.min():.3g}, and P* > 0 "
                f"(lambda_min {w[0]:.3g})",
                Sigma_star=0.5 * (S + S.T),
                method=meth,
            )
        if bt.proved and qd in ("negative definite", "negative semidefinite", "zero"):
            return Regime(
                Verdict.GROWS_EXPONENTIALLY,
                f"{desc}; Q {qd}, A anti-stable and the limit P* is "
                f"singular (lambda_min {w[0]:.3g}): no pole, Sigma(t) <= e^(At) Sigma0 e^(A^T t) and "
                "lambda_min(P(t)) -> 0, so Sigma grows without bound, at most exponentially",
                method=meth,
            )
        return Regime(
            Verdict.UNDETERMINED,
            f"{desc}; A anti-stable but the limit P* is singular (lambda_min {w[0]:.3g}): Sigma grows without bound",
            method=meth,
        )
    if cls == "Hurwitz":
        ker = _RiccatiKernel(A, Q, S0)
        Y_inf = solve_continuous_lyapunov(A.T, -Q)
        g_inf = ker.g_of(0.5 * (Y_inf + Y_inf.T))
        if g_inf > 1e-12:
            return Regime(
                Verdict.COLLAPSES,
                f"{desc}; Q {qd}: A Hurwitz and I - K Y_inf K > 0 "
                f"(lambda_min {g_inf:.3g}), so Sigma(t) -> 0 like e^(2 max Re spec(A) t) "
                f"= e^({2 * lam.real.max():.3g} t)",
                method=meth,
            )
        return Regime(
            Verdict.UNDETERMINED,
            f"{desc}; A Hurwitz and I - K Y_inf K is singular "
            f"(lambda_min {g_inf:.3g}): the boundary between collapse and blow-up",
            method=meth,
        )
    return Regime(
        Verdict.UNDETERMINED,
        f"{desc}; Q {qd}: spectrum of A on both sides of or on the imaginary axis, no blow-up found ({bt.reason})",
        method=meth,
    )


def _classify_numerical(controls: Controls, S0: np.ndarray, t_max: float | None, desc: str) -> Regime:
    horizon = t_max if t_max is not None else _default_t_max(controls.affine_A)
    bt = _blowup_numerical(S0, controls, horizon)
    if math.isfinite(bt.t_star):
        return Regime(Verdict.BLOWS_UP, f"{desc}; {bt.reason}", t_star=bt.t_star, method="numerical")
    if bt.crossing_time is not None:  # past the threshold: exponential growth (proved) or not certified
        verdict = bt.verdict if bt.verdict is Verdict.GROWS_EXPONENTIALLY else Verdict.UNDETERMINED
        return Regime(verdict, f"{desc}; {bt.reason}", method="numerical")
    obs = observe_regime(controls, S0, horizon)
    if obs is Verdict.CONVERGES:
        try:
            eq = equilibrium(controls)
        except NoEquilibriumError as exc:
            return Regime(Verdict.UNDETERMINED, f"{desc}; the ODE settles numerically but {exc}", method="numerical")
        traj = integrate_moments(np.zeros(controls.d), S0, controls, (0.0, horizon))
        S_end = traj.Sigma[-1]
        ls = linear_stability(controls, eq.Sigma)
        if np.linalg.norm(S_end - eq.Sigma) <= 1e-6 * np.linalg.norm(eq.Sigma) and ls.verdict is Stability.STABLE:
            return Regime(
                Verdict.CONVERGES,
                f"{desc}; numerically: Sigma(t_max) is within 1e-6 of the Newton "
                f"equilibrium, which is linearly stable (abscissa {ls.max_real:.3g})",
                Sigma_star=eq.Sigma,
                method="numerical",
            )
        return Regime(
            Verdict.UNDETERMINED,
            f"{desc}; the ODE settles, but not at a linearly stable Newton equilibrium",
            method="numerical",
        )
    if obs is Verdict.COLLAPSES:
        return Regime(Verdict.COLLAPSES, f"{desc}; numerically ||Sigma(t_max)|| < 1e-8 ||Sigma0||", method="numerical")
    return Regime(
        Verdict.UNDETERMINED,
        f"{desc}; no blow-up, equilibrium or collapse observed by t_max = {horizon:.3g}",
        method="numerical",
    )


# ------------------------------------------------------------------- observation and map
def observe_regime(
    controls: Controls,
    Sigma0: Any,
    t_max: float,
    *,
    rtol: float = 1e-10,
    settle_tol: float = 1e-6,
    collapse_tol: float = 1e-8,
) -> Verdict:
    r"""The outcome seen by integrating the ODE alone (no theory): a :class:`~gtcore.status.Verdict`.

    "blows up" (what is observed: a crossing, not a certified pole) when
    :func:`gtcore.moments.integrate_moments` stops on its blow-up event before ``t_max``;
    "collapses to 0" when :math:`\|\Sigma(t_{\max})\| \le` ``collapse_tol`` :math:`\|\Sigma_0\|`;
    "converges" when :math:`\Sigma(t_{\max}) \succ 0` is stationary,
    :math:`\|F(\Sigma)\| \le` ``settle_tol`` :math:`\|\Sigma\|`, with
    :math:`\lambda_{\min}(\Sigma) >` ``settle_tol`` :math:`\|\Sigma\|`; else "undetermined".

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters.
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite.
    t_max : float
        The horizon of the integration.
    rtol : float
        The integrator's relative tolerance (its absolute tolerance is :math:`10^{-14}\|\Sigma_0\|`).
    settle_tol : float
        The relative size of :math:`F(\Sigma)` (and the smallest relative eigenvalue) of a settled end point.
    collapse_tol : float
        The relative size of a collapsed end point.

    Returns
    -------
    str
        ``"converges"``, ``"collapses to 0"``, ``"blows up"`` or ``"undetermined"``.
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    t_max = check_positive(t_max, "t_max")
    settle_tol, collapse_tol = check_positive(settle_tol, "settle_tol"), check_positive(collapse_tol, "collapse_tol")
    n0 = float(np.linalg.norm(S0))
    traj = integrate_moments(
        np.zeros(controls.d),
        S0,
        controls,
        (0.0, t_max),
        rtol=rtol,
        atol=1e-30 + 1e-14 * n0,
        blowup_norm=1e8 * max(n0, 1.0),
    )
    return _observed_verdict(controls, traj.status, traj.Sigma[-1], n0, settle_tol, collapse_tol)


def _observed_verdict(
    controls: Controls, status: Status, S: np.ndarray, n0: float, settle_tol: float, collapse_tol: float
) -> Verdict:
    """:func:`observe_regime`'s verdict from the integration's status and end point."""
    if status == Status.BLOWUP:
        return Verdict.BLOWS_UP
    nS = float(np.linalg.norm(S))
    if nS <= collapse_tol * n0:
        return Verdict.COLLAPSES
    if np.linalg.norm(_F(controls, S)) <= settle_tol * nS and np.linalg.eigvalsh(S)[0] > settle_tol * nS:
        return Verdict.CONVERGES
    return Verdict.UNDETERMINED


def observe_regimes(
    controls: Sequence[Controls],
    Sigma0: Any,
    t_max: float,
    *,
    rtol: float = 1e-10,
    settle_tol: float = 1e-6,
    collapse_tol: float = 1e-8,
) -> list[Verdict]:
    r""":func:`observe_regime` for many controls at once: the same integration (tolerances, blow-up
    threshold) and the same verdicts, with every point's moment ODE stepped side by side by
    :func:`gtcore.moments.integrate_moments_lanes` (each with its own DOP853 steps; dot-product
    attention; other attention types fall back to :func:`observe_regime` point by point).

    Parameters
    ----------
    controls : sequence of Controls
        The time-invariant parameters of each point.
    Sigma0 : (d, d) array
        The initial covariance, common to all points.
    t_max : float
        The horizon of the integration.
    rtol, settle_tol, collapse_tol : float
        As in :func:`observe_regime`.

    Returns
    -------
    list of str
        One verdict of :data:`~gtcore.stability.regimes.VERDICTS` per point.
    """
    ctls = [_check_controls(c, f"controls[{k}]") for k, c in enumerate(controls)]
    if not ctls:
        return []
    S0 = check_covariance(Sigma0, "Sigma0", ctls[0].d)
    t_max = check_positive(t_max, "t_max")
    settle_tol, collapse_tol = check_positive(settle_tol, "settle_tol"), check_positive(collapse_tol, "collapse_tol")
    if any(c.attention != "dot" for c in ctls):
        return [observe_regime(c, S0, t_max, rtol=rtol, settle_tol=settle_tol, collapse_tol=collapse_tol) for c in ctls]
    n0 = float(np.linalg.norm(S0))
    ends = integrate_moments_lanes(
        np.zeros(ctls[0].d), S0, ctls, (0.0, t_max), rtol=rtol, atol=1e-30 + 1e-14 * n0, blowup_norm=1e8 * max(n0, 1.0)
    )
    return [
        _observed_verdict(c, st, S, n0, settle_tol, collapse_tol)
        for c, st, S in zip(ctls, ends.status, ends.Sigma, strict=True)
    ]
