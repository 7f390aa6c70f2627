r"""The V = vI Riccati closed forms: the precision equation, the blow-up time, the critical gain.

With time-invariant parameters the covariance obeys the matrix Riccati-type equation (eq. 1.1)

.. math::

    \Sigma' = F(\Sigma) := A\Sigma + \Sigma A^\top
        + \sum_h \big(V_h \Sigma B_h \Sigma + \Sigma B_h^\top \Sigma V_h^\top\big),

whose equilibria solve the algebraic Bernoulli equation :math:`F(\Sigma^*) = 0` (no constant term).

**The linearisable case.** When every value matrix is a multiple of the identity,
:math:`V_h = v_h I`, the quadratic term is :math:`\Sigma Q \Sigma` with
:math:`Q = \sum_h v_h (B_h + B_h^\top)` symmetric, and :math:`P = \Sigma^{-1}` solves the *linear*
Lyapunov differential equation

.. math::

    P' = -(PA + A^\top P) - Q, \qquad
    P(t) = e^{-A^\top t}\big(P_0 - Y(t)\big)e^{-At}, \qquad
    Y(t) = \int_0^t e^{A^\top s} Q e^{As}\, ds.

Written without :math:`P_0 = \Sigma_0^{-1}` (so that rank-deficient :math:`\Sigma_0` is allowed),
with :math:`K = \Sigma_0^{1/2}`,

.. math::

    \Sigma(t) = e^{At} K \big(I - K Y(t) K\big)^{-1} K e^{A^\top t},

so :math:`\Sigma` blows up at the first zero :math:`t^*` of
:math:`g(t) = \lambda_{\min}(I - K Y(t) K)`, which equals :math:`\lambda_{\min}(P(t))` up to a
positive congruence when :math:`\Sigma_0 \succ 0`. :math:`Y(t)` is computed exactly, also for
singular :math:`A`, from one augmented (Van Loan) exponential

.. math::

    \exp\!\left(t\begin{bmatrix} -A^\top & Q \\ 0 & A \end{bmatrix}\right)
    = \begin{bmatrix} \ast & F_{12} \\ 0 & e^{At} \end{bmatrix}, \qquad
    Y(t) = (e^{At})^\top F_{12}.

References
----------
Alcalde, Ji, Zuazua (2026), *Reachability and asymptotics of Gaussian Transformer dynamics*,
arXiv:2606.07600, eq. (1.1) and the asymptotic results (stabilising and destabilising regimes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import expm, solve_continuous_lyapunov
from scipy.optimize import brentq, minimize_scalar

from gtcore._linalg import psd_sqrt
from gtcore._repr import short_repr
from gtcore._validation import as_float_array, check_count, check_covariance, check_matrix, check_positive
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.moments.ode import _moment_rhs
from gtcore.poles import covariance_only, left_eigen_certificate, no_pole_rate, trace_certificate
from gtcore.status import Status, Verdict

__all__ = [
    "BlowupTime",
    "GainThreshold",
    "blowup_time",
    "closed_form_covariance",
    "critical_gain",
    "gain_threshold",
    "riccati_quadratic",
]

_SCALAR_V_ATOL = 1e-14
_SPECTRUM_TOL = 1e-12


# ------------------------------------------------------------------------------- validation
def _check_controls(controls: Any, name: str = "controls", d: int | None = None) -> Controls:
    if not isinstance(controls, Controls):
        raise ValueError(f"{name} must be constant Controls (time-invariant parameters), "
                         f"got {type(controls).__name__}")
    if d is not None and controls.d != d:
        raise ValueError(f"{name} act on dimension d={controls.d}, but the covariance has d={d}")
    return controls



# ------------------------------------------------------------------- V = vI: the precision equation
def _scalar_values(controls: Controls) -> np.ndarray | None:
    """``v_h`` when every ``V_h = v_h I`` (to 1e-14 relative), else None."""
    d = controls.d
    v = np.trace(controls.V, axis1=1, axis2=2) / d
    scale = max(1.0, float(np.abs(controls.V).max()))
    if np.all(np.abs(controls.V - v[:, None, None] * np.eye(d)) <= _SCALAR_V_ATOL * scale):
        return v
    return None


def riccati_quadratic(controls: Controls) -> np.ndarray | None:
    r"""The quadratic coefficient :math:`Q = \sum_h v_h (B_h + B_h^\top)` of the Riccati equation, when every
    :math:`V_h = v_h I`.

    Then :math:`\Sigma' = A\Sigma + \Sigma A^\top + \Sigma Q \Sigma` and :math:`P = \Sigma^{-1}`
    solves :math:`P' = -(PA + A^\top P) - Q`. Returns None when some :math:`V_h` is not a
    multiple of the identity, or when the attention is not the dot product (no linearising
    substitution is used then).

    Parameters
    ----------
    controls : Controls
        One layer's parameters.

    Returns
    -------
    (d, d) ndarray or None
        :math:`Q`, exactly symmetric; None outside the linearisable case.
    """
    controls = _check_controls(controls)
    v = _scalar_values(controls) if controls.attention == "dot" else None  # the substitution is the dot product's
    if v is None:
        return None
    Q = np.einsum("h,hij->ij", v, controls.B + np.swapaxes(controls.B, 1, 2))
    return 0.5 * (Q + Q.T)


def _definiteness(S: np.ndarray, tol: float = 1e-12) -> str:
    w = np.linalg.eigvalsh(0.5 * (S + S.T))
    if not np.any(w):
        return "zero"
    s = tol * float(np.abs(w).max())
    if np.all(w > s):
        return "positive definite"
    if np.all(w < -s):
        return "negative definite"
    if np.all(w >= -s):
        return "zero" if np.all(np.abs(w) <= s) else "positive semidefinite"
    if np.all(w <= s):
        return "negative semidefinite"
    return "indefinite"


def _spectrum_class(A: np.ndarray) -> tuple[str, np.ndarray]:
    lam = np.linalg.eigvals(A)
    s = _SPECTRUM_TOL * max(1.0, float(np.abs(lam).max()))
    if np.all(lam.real < -s):
        return "Hurwitz", lam
    if np.all(lam.real > s):
        return "anti-stable", lam
    return "mixed", lam


def _fmt_spec(lam: np.ndarray) -> str:
    re = np.sort(lam.real)
    return f"Re spec(A) in [{re[0]:.3g}, {re[-1]:.3g}]"


def _lyapunov_P(A: np.ndarray, Q: np.ndarray) -> np.ndarray | None:
    r"""The unique :math:`P` with :math:`PA + A^\top P = -Q`, or None when it is not unique."""
    lam = np.linalg.eigvals(A)
    sums = np.abs(lam[:, None] + lam[None, :])
    if sums.min() <= 1e-10 * max(1.0, float(np.abs(lam).max())):
        return None
    P = solve_continuous_lyapunov(A.T, -Q)
    return 0.5 * (P + P.T)


# ------------------------------------------------------------------------------ blow-up
@dataclass(frozen=True)
class BlowupTime:
    r"""A predicted blow-up time, what it rests on, and the verdict.

    Attributes
    ----------
    t_star : float
        The blow-up time, finite only when a pole is certified (``verdict`` ``BLOWS_UP``), else ``inf``.
    method : "closed form (d = 1)", "closed form (V = vI)" or "numerical"
        What produced ``t_star``. A closed-form attempt that is abandoned (round-off growth of
        :math:`e^{At}`, a zero of :math:`g` that the integrator does not confirm) returns the
        integrator's number labelled ``"numerical"``, with the reason for the fallback in ``reason``;
        a closed-form label always means the number is the closed form's.
    reason : str
        One sentence: why it blows up (and the certificate), or why it does not (proved, or only up to
        ``t_max``).
    proved : bool
        Whether the verdict is proved: True for ``BLOWS_UP`` (always certified), ``NO_BLOWUP`` and
        ``GROWS_EXPONENTIALLY``; False for ``UNDETERMINED``.
    verdict : Verdict
        :class:`~gtcore.status.Verdict`: ``BLOWS_UP`` (a pole, certified), ``NO_BLOWUP`` (no pole,
        proved), ``GROWS_EXPONENTIALLY`` (no pole, proved, and :math:`\|\Sigma\|` passed the integrator's
        blow-up threshold: unbounded growth at most exponential) or ``UNDETERMINED`` (no certificate
        either way: no pole found up to ``t_max``, or a growth past the threshold with no certificate that
        it is a pole). By default it follows from ``t_star`` and ``proved``.
    crossing_time : float or None
        When the numerical search ran: the time at which :math:`\|\Sigma\|_F` crossed its blow-up
        threshold (``crossing_time`` of :class:`~gtcore.moments.MomentTrajectory`), else None.
    """

    t_star: float
    method: str
    reason: str
    proved: bool = True
    verdict: Verdict | None = None
    crossing_time: float | None = None

    def __post_init__(self) -> None:
        if self.verdict is None:
            verdict = (Verdict.BLOWS_UP if math.isfinite(self.t_star)
                       else Verdict.NO_BLOWUP if self.proved else Verdict.UNDETERMINED)
            object.__setattr__(self, "verdict", verdict)
        if math.isfinite(self.t_star) != (self.verdict is Verdict.BLOWS_UP):
            raise ValueError(f"BlowupTime: a finite t_star goes with the verdict 'blows up' only "
                             f"(got t_star = {self.t_star}, verdict {self.verdict!r})")
        if self.proved == (self.verdict is Verdict.UNDETERMINED):
            raise ValueError(f"BlowupTime: proved={self.proved} contradicts the verdict {self.verdict!r}")

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    def __float__(self) -> float:
        return float(self.t_star)


class _RiccatiKernel:
    r"""Exact :math:`Y(t)` and :math:`g(t) = \lambda_{\min}(I - KY(t)K)` for :math:`V_h = v_hI`."""

    def __init__(self, A: np.ndarray, Q: np.ndarray, Sigma0: np.ndarray) -> None:
        d = A.shape[0]
        self.A, self.Q, self.d = A, Q, d
        self.K = psd_sqrt(Sigma0)
        self.G = np.block([[-A.T, Q], [np.zeros((d, d)), A]])

    def parts(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(e^{At}, Y(t))."""
        d = self.d
        F = expm(self.G * t)
        E = F[d:, d:]
        Y = E.T @ F[:d, d:]
        return E, 0.5 * (Y + Y.T)

    def step_parts(self, E: np.ndarray, Y: np.ndarray, Eh: np.ndarray, Yh: np.ndarray):
        """Semigroup: Y(t + h) = Y(t) + E(t)^T Y(h) E(t), E(t + h) = E(h) E(t)."""
        Y2 = Y + E.T @ Yh @ E
        return Eh @ E, 0.5 * (Y2 + Y2.T)

    def g_of(self, Y: np.ndarray) -> float:
        KYK = self.K @ Y @ self.K
        return float(np.linalg.eigvalsh(np.eye(self.d) - 0.5 * (KYK + KYK.T))[0])

    def g(self, t: float) -> float:
        return self.g_of(self.parts(t)[1])


def _root(fun: Callable[[float], float], a: float, b: float) -> float:
    return brentq(fun, a, b, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=200)


#: beyond this growth of |K|^2 |Q| |e^{At}|^2 the closed form I - K Y K is round-off
_TRUSTED_GROWTH = 1e12


def _default_t_max(A: np.ndarray) -> float:
    cls, lam = _spectrum_class(A)
    if cls == "Hurwitz":  # Y(t) has converged to 1e-16 by then
        return float(min(1e4, max(100.0, 20.0 / abs(lam.real.max()))))
    return 100.0


def _blowup_closed_form(Sigma0: np.ndarray, controls: Controls, Q: np.ndarray,
                        t_max: float | None) -> BlowupTime:
    A = controls.affine_A
    d = controls.d
    qdef = _definiteness(Q)
    cls, lam = _spectrum_class(A)
    if d == 1:
        a, q, s0 = float(A[0, 0]), float(Q[0, 0]), float(Sigma0[0, 0])
        method = "closed form (d = 1)"
        if s0 == 0 or q <= 0:
            return BlowupTime(math.inf, method, f"sigma' = 2a sigma + q sigma^2 with q = {q:.3g} <= 0 "
                              "or sigma0 = 0: P = 1/sigma never reaches 0")
        if a == 0:
            return BlowupTime(1.0 / (q * s0), method, "a = 0: t* = 1/(q sigma0)")
        x = 2.0 * a / (q * s0)
        if x <= -1.0:
            return BlowupTime(math.inf, method, f"a = {a:.3g} < 0 and q sigma0 = {q * s0:.3g} <= -2a: "
                              "the decay wins, sigma -> 0")
        return BlowupTime(math.log1p(x) / (2.0 * a), method,
                          "t* = log(1 + 2a/(q sigma0)) / (2a), q = 2 sum_h v_h beta_h > 0")
    method = "closed form (V = vI)"
    ker = _RiccatiKernel(A, Q, Sigma0)
    if qdef in ("negative definite", "negative semidefinite", "zero"):
        return BlowupTime(math.inf, method, f"Q = sum_h v_h(B_h + B_h^T) is {qdef}: "
                          "I - K Y(t) K >= I for all t, P = Sigma^-1 stays positive definite")
    if cls == "Hurwitz" and qdef in ("positive definite", "positive semidefinite"):
        # g is non-increasing with limit 1 - lambda_max(K Y_inf K)
        Y_inf = solve_continuous_lyapunov(A.T, -Q)
        g_inf = ker.g_of(0.5 * (Y_inf + Y_inf.T))
        if g_inf >= -1e-12:
            return BlowupTime(math.inf, method, f"A Hurwitz and Q {qdef}: g(t) decreases to "
                              f"1 - lambda_max(K Y_inf K) = {g_inf:.3g} >= 0 (no blow-up)")
    horizon = float(t_max) if t_max is not None else _default_t_max(A)
    if qdef in ("positive definite", "positive semidefinite"):
        # monotone: bracket by doubling, then Brent
        t = min(horizon, 1.0 / max(1.0, np.linalg.norm(A, 2) + np.linalg.norm(Q, 2)
                                   * np.linalg.norm(Sigma0, 2)))
        lo = 0.0
        while True:
            if ker.g(t) < 0:
                t_star = _root(ker.g, lo, t)
                return BlowupTime(t_star, method, f"Q {qdef} ({_fmt_spec(lam)}): first zero of "
                                  "lambda_min(I - K Y(t) K), g non-increasing")
            if t >= horizon:
                break
            lo, t = t, min(2.0 * t, horizon)
        proved = False
        reason = f"Q {qdef}: g(t) > 0 on [0, {horizon:.3g}] (t_max; not proved beyond)"
        if cls == "Hurwitz":
            proved, reason = True, f"A Hurwitz, Q {qdef}: g decreases to a non-negative limit"
        return BlowupTime(math.inf, method, reason, proved=proved)
    # indefinite Q: scan with the exact semigroup, then Brent on the first sign change. Y(t) grows
    # like |e^{At}|^2; once |K|^2 |Q| |e^{At}|^2 passes ~1e12, I - K Y K is dominated by round-off
    # and g can change sign spuriously: from there on (and for any candidate root that the
    # integrator does not confirm) the answer is the numerical one.
    n = 4000
    h = horizon / n
    Eh, Yh = ker.parts(h)
    E, Y = np.eye(d), np.zeros((d, d))
    scale = float(np.linalg.norm(ker.K, 2) ** 2 * np.linalg.norm(Q, 2))
    for k in range(1, n + 1):
        E, Y = ker.step_parts(E, Y, Eh, Yh)
        if scale * np.linalg.norm(E, 2) ** 2 > _TRUSTED_GROWTH:
            return _blowup_numerical(Sigma0, controls, horizon, note=(
                f"closed form ill-conditioned beyond t = {k * h:.3g} (|e^(At)|^2 |K|^2 |Q| > 1e12)"))
        if ker.g_of(Y) < 0:
            try:
                t_star = _root(ker.g, (k - 1) * h, k * h)
            except ValueError:
                return _blowup_numerical(Sigma0, controls, horizon, note="no clean sign change of g")
            check = integrate_moments(np.zeros(d), Sigma0, covariance_only(controls),
                                      (0.0, t_star * (1 + 1e-3) + 1e-9),
                                      blowup_norm=1e8 * max(float(np.linalg.norm(Sigma0)), 1.0))
            if (check.status is not Status.BLOWUP or check.crossing_time is None
                    or abs(check.crossing_time - t_star) > 1e-4 * t_star):
                return _blowup_numerical(Sigma0, controls, horizon,
                                         note=f"candidate zero t = {t_star:.6g} of g not confirmed by "
                                              "integrate_moments")
            return BlowupTime(t_star, method, f"Q indefinite ({_fmt_spec(lam)}): first zero of "
                              f"lambda_min(I - K Y(t) K), scanned with step {h:.3g}, confirmed by "
                              "integrate_moments")
    return BlowupTime(math.inf, method, f"Q indefinite: g(t) > 0 on a grid of step {h:.3g} up to "
                      f"t_max = {horizon:.3g} (not proved beyond)", proved=False)


def _restarted_closed_form_certificate(controls: Controls, S: np.ndarray, horizon: float) -> tuple[float, str] | None:
    r"""A pole after :math:`\Sigma = S` within time ``s``, from the :math:`V = vI` closed form restarted at :math:`S`.

    With every :math:`V_h = v_hI` the solution from :math:`S` is
    :math:`e^{As}K(I - KY(s)K)^{-1}Ke^{A^\top s}` (:math:`K = S^{1/2}`, module docstring), exact while
    :math:`g(s) = \lambda_{\min}(I - KY(s)K) > 0`; :math:`g(0) = 1`, so :math:`g(s) < 0` at some ``s``
    proves a pole in :math:`(0, s)`. Tried at ``s`` doubling from :math:`1/(\|K\|^2\|Q\|)` up to
    ``horizon``, while :math:`e^{As}` stays in the closed form's trusted range (as in the scan).
    """
    Q = riccati_quadratic(controls)
    if Q is None or not np.any(Q):
        return None
    ker = _RiccatiKernel(controls.affine_A, Q, S)
    scale = float(np.linalg.norm(ker.K, 2) ** 2 * np.linalg.norm(Q, 2))
    s = 1.0 / max(scale, 1e-300)
    while s <= horizon:
        E, Y = ker.parts(s)
        if scale * np.linalg.norm(E, 2) ** 2 > _TRUSTED_GROWTH:
            return None
        if ker.g_of(Y) < -1e-9:
            return s, f"the V = vI closed form restarted there has lambda_min(I - K Y(s) K) < 0 at s = {s:.3g}"
        s *= 2.0
    return None


def _pole_certificate(controls: Controls, S: np.ndarray, horizon: float) -> tuple[float, str] | None:
    """``(T, how)``: a certificate that the solution from ``S`` has a pole within time ``T``, or None."""
    return (_restarted_closed_form_certificate(controls, S, horizon)
            or trace_certificate(controls, S)
            or left_eigen_certificate(controls, S))


def _blowup_numerical(Sigma0: np.ndarray, controls: Controls, t_max: float, note: str = "") -> BlowupTime:
    r"""The numerical search: integrate to :math:`\|\Sigma\|_F = 10^8\max(\|\Sigma_0\|_F, 1)`, then certify.

    A crossing of the threshold alone proves nothing (an exponential growth crosses it too). The
    verdict is ``BLOWS_UP`` only with a certificate that a pole exists (:func:`_pole_certificate`,
    tried at :math:`\Sigma_0` and at the crossing state :math:`\Sigma(t_e)`); ``t_star`` is then the
    pole correction :math:`t_e + \|\Sigma\|/\tfrac{d}{dt}\|\Sigma\|`, capped by the certified bound. When
    the attention's drift is bounded (:func:`gtcore.poles.no_pole_rate`) there is no pole at all: ``NO_BLOWUP``, or
    ``GROWS_EXPONENTIALLY`` when the threshold was crossed. Otherwise a crossing is ``UNDETERMINED``.
    """
    d = controls.d
    prefix = f"{note}; " if note else ""
    norm0 = max(float(np.linalg.norm(Sigma0)), 1e-300)
    traj = integrate_moments(np.zeros(d), Sigma0, covariance_only(controls), (0.0, t_max),
                             blowup_norm=1e8 * max(norm0, 1.0))
    crossed = traj.status is Status.BLOWUP
    t_e = traj.crossing_time if crossed else None
    rate = no_pole_rate(controls)
    if rate is not None:
        bound = (f"no pole: ||Sigma(t)||_2 <= ||Sigma0||_2 e^(2 L t), L = ||A||_2 + (attention drift bound) "
                 f"= {rate:.3g}")
        if crossed:
            return BlowupTime(math.inf, "numerical", f"{prefix}{bound}; ||Sigma||_F crossed "
                              f"{1e8 * max(norm0, 1.0):.3g} at t = {t_e:.6g}: exponential growth",
                              verdict=Verdict.GROWS_EXPONENTIALLY, crossing_time=t_e)
        return BlowupTime(math.inf, "numerical", f"{prefix}{bound} (integrate_moments on [0, {t_max:.3g}]: "
                          f"status {traj.status})", verdict=Verdict.NO_BLOWUP)
    if not crossed:
        return BlowupTime(math.inf, "numerical", f"{prefix}no blow-up on [0, {t_max:.3g}] (integrate_moments, "
                          f"status {traj.status}; not proved beyond)", proved=False)
    S = traj.Sigma[-1]
    _, dS = _moment_rhs(np.zeros(d), S, controls)
    N = np.linalg.norm(S)
    dN = float(np.sum(S * dS)) / N
    # near a pole ||Sigma|| ~ c / (t* - t): t* = t_e + N / N' + O((t* - t_e)^2)
    t_pole = t_e + N / dN
    cert = _pole_certificate(controls, Sigma0, t_max)
    where, t_cert = "Sigma0", 0.0
    assert t_e is not None  # crossed: the trajectory has a crossing time
    if cert is None:
        cert, where, t_cert = _pole_certificate(controls, S, t_max), f"Sigma(t_e = {t_e:.6g})", t_e
    if cert is None:
        return BlowupTime(math.inf, "numerical", f"{prefix}||Sigma||_F crossed {1e8 * max(norm0, 1.0):.3g} at "
                          f"t = {t_e:.6g} (a pole there would be at t = {t_pole:.6g}), but nothing certifies "
                          "a pole: the growth may be exponential", proved=False, crossing_time=t_e)
    T, how = cert
    return BlowupTime(min(t_pole, t_cert + T), "numerical", f"{prefix}integrate_moments (DOP853) to ||Sigma||_F "
                      "= 1e8, then the pole correction t* = t_e + ||Sigma|| / (d/dt ||Sigma||); a pole is "
                      f"certified at {where}: {how}", crossing_time=t_e)


def blowup_time(Sigma0: Any, controls: Controls, *, t_max: float | None = None,
                method: str = "auto") -> BlowupTime:
    r"""The finite time :math:`t^*` at which :math:`\Sigma(t)` blows up, or ``inf``.

    Closed form when :math:`d = 1`,

    .. math::

        \sigma' = 2a\sigma + q\sigma^2, \qquad
        t^* = \frac{\log\big(1 + 2a/(q\sigma_0)\big)}{2a} \quad (q = 2\textstyle\sum_h v_h\beta_h > 0,
        \ 1 + 2a/(q\sigma_0) > 0),

    and when every :math:`V_h = v_h I`: the first zero of
    :math:`\lambda_{\min}(I - KY(t)K)` (see the module docstring; equal to the first zero of
    :math:`\lambda_{\min}(P(t))`, :math:`P = \Sigma^{-1}`), located with Brent's method to
    machine precision on the exact augmented exponential. Otherwise numerical:
    :func:`gtcore.moments.integrate_moments` up to :math:`\|\Sigma\|_F = 10^8\max(\|\Sigma_0\|_F, 1)` at
    :math:`t_e`, then the pole correction :math:`t^* \approx t_e + \|\Sigma\|/\tfrac{d}{dt}\|\Sigma\|`.

    **Certificates** (derived in :mod:`gtcore.poles`). Crossing a threshold proves nothing:
    :math:`\Sigma' = 2\Sigma` crosses any. A finite ``t_star`` (verdict ``BLOWS_UP``) needs a proof that a
    pole exists: a closed form in its domain (the two above, or the :math:`V = vI` closed form restarted
    at the crossing state), or a Riccati lower bound :math:`\varphi' \ge c(\varphi + \beta)^2 - \delta`,
    :math:`c > 0`, for :math:`\varphi = \operatorname{tr}\Sigma` or :math:`u^\top\Sigma u` (:math:`u` a common left
    eigenvector of the :math:`V_h`), whose comparison solution diverges at a finite :math:`T \ge t^*`
    (tried at :math:`\Sigma_0` and at the crossing; ``t_star`` is the pole correction, capped by
    :math:`T`). A bounded attention drift :math:`\|\sum_hV_hM_h(\Sigma)\Sigma\|_2 \le L\|\Sigma\|_2`
    (:meth:`~gtcore.attention.AttentionType.drift_bound`) proves there is no pole:
    ``GROWS_EXPONENTIALLY`` when the threshold is crossed, else ``NO_BLOWUP``. A crossing neither
    settles is ``UNDETERMINED`` (``t_star = inf``, ``proved = False``).

    Parameters
    ----------
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite (rank-deficient allowed).
    controls : Controls
        The layer's parameters (time-invariant).
    t_max : float, optional
        Search horizon where no certificate is available (default 100, or longer when :math:`A` is
        Hurwitz).
    method : "auto", "closed form" or "numerical"
        ``"auto"`` uses the closed form when every :math:`V_h = v_hI`, else the integrator.

    Returns
    -------
    BlowupTime
        ``t_star`` (``float(result)`` works), ``method`` used, ``reason``, ``verdict`` and ``proved``.

    Raises
    ------
    ValueError
        Bad controls, ``Sigma0`` or ``t_max``, an unknown ``method``, or ``"closed form"`` with some
        :math:`V_h` not a multiple of :math:`I`.
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    if t_max is not None:
        t_max = check_positive(t_max, "t_max")
    if method not in ("auto", "closed form", "numerical"):
        raise ValueError(f"method must be 'auto', 'closed form' or 'numerical', got {method!r}")
    Q = riccati_quadratic(controls)
    if method == "closed form" and Q is None:
        raise ValueError("method='closed form' needs every V_h = v_h I")
    if Q is not None and method != "numerical":
        return _blowup_closed_form(S0, controls, Q, t_max)
    return _blowup_numerical(S0, controls, t_max if t_max is not None else _default_t_max(controls.affine_A))


def closed_form_covariance(Sigma0: Any, controls: Controls, t: Any) -> np.ndarray:
    r"""The exact :math:`\Sigma(t) = e^{At}K(I - KY(t)K)^{-1}Ke^{A^\top t}` when every :math:`V_h = v_hI`.

    Parameters
    ----------
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite.
    controls : Controls
        The layer's parameters, every ``V_h`` a multiple of the identity.
    t : float or (n,) array
        Times in :math:`[0, t^*)`.

    Returns
    -------
    (n, d, d) ndarray
        :math:`\Sigma(t)` at each time (``n = 1`` for a scalar ``t``), exactly symmetric.

    Raises
    ------
    ValueError
        Some ``V_h`` is not a multiple of ``I``, or a time is negative or not before the blow-up.
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    Q = riccati_quadratic(controls)
    if Q is None:
        raise ValueError("controls: closed_form_covariance needs every V_h = v_h I")
    ts = np.atleast_1d(as_float_array(t, "t"))
    if ts.ndim != 1 or not np.all(np.isfinite(ts)) or np.any(ts < 0):
        raise ValueError("t must be finite, non-negative times")
    ker = _RiccatiKernel(controls.affine_A, Q, S0)
    K, d = ker.K, controls.d
    out = []
    for s in ts:
        E, Y = ker.parts(float(s))
        Mid = np.eye(d) - K @ Y @ K
        if np.linalg.eigvalsh(0.5 * (Mid + Mid.T))[0] <= 0:
            raise ValueError(f"t = {s:.6g} is at or after the blow-up time")
        S = E @ K @ np.linalg.solve(Mid, K) @ E.T
        out.append(0.5 * (S + S.T))
    return np.array(out)


def _hurwitz_gain_inputs(A: Any, B: Any, Sigma0: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated ``A`` (Hurwitz: the limit :math:`Y_\\infty` exists), ``B`` and ``Sigma0``."""
    A = check_matrix(A, "A")
    d = A.shape[0]
    B = check_matrix(B, "B", d)
    S0 = check_covariance(Sigma0, "Sigma0", d)
    if _spectrum_class(A)[0] != "Hurwitz":
        raise ValueError("A must be Hurwitz (every eigenvalue with negative real part)")
    return A, B, S0


def critical_gain(A: Any, B: Any, Sigma0: Any) -> float:
    r"""The smallest :math:`v > 0` with which :math:`V = vI` blows up from :math:`\Sigma_0`.

    For Hurwitz :math:`A` and :math:`B + B^\top \succeq 0` (refused otherwise, see Domain):

    .. math::

        v_c = \frac{1}{\lambda_{\max}(K Y_\infty K)}, \qquad
        A^\top Y_\infty + Y_\infty A = -(B + B^\top), \quad K = \Sigma_0^{1/2}:

    for :math:`0 < v < v_c` the covariance collapses to 0, for :math:`v > v_c` it blows up in
    finite time. ``inf`` when :math:`\lambda_{\max}(KY_\infty K) \le 0`.

    Domain. With :math:`Y(t) = \int_0^t e^{A^\top s}(B + B^\top)e^{As}ds`,
    :math:`\Sigma(t) = e^{At}K(I - vKY(t)K)^{-1}Ke^{A^\top t}` blows up iff
    :math:`v\,\lambda_{\max}(KY(t)K)` reaches 1 at some finite :math:`t`, so the exact threshold is
    :math:`1/\sup_{t \ge 0}\lambda_{\max}(KY(t)K)`. When :math:`B + B^\top \succeq 0` the integrand
    is positive semidefinite, :math:`Y(t)` increases in the Loewner order and the supremum is the
    limit :math:`Y_\infty`: the formula above. When :math:`B + B^\top` is indefinite, :math:`Y(t)`
    can overshoot its limit and :math:`v < v_c` can blow up through a transient (e.g.
    :math:`A = -0.1I + J`, :math:`B = \operatorname{diag}(1, -1)`, :math:`\Sigma_0 = I`: the formula
    gives 1.005, the true threshold is 0.579), so that case is refused; :func:`gain_threshold`
    computes the supremum for any :math:`B`.

    Parameters
    ----------
    A : (d, d) array
        The linear part of the feed-forward, Hurwitz.
    B : (d, d) array
        The query-key matrix, with :math:`B + B^\top \succeq 0`.
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite.

    Returns
    -------
    float
        :math:`v_c` (``inf`` when :math:`\lambda_{\max}(KY_\infty K) \le 0`).

    Raises
    ------
    ValueError
        ``A`` is not Hurwitz, ``B + B^T`` is not positive semidefinite (outside the formula's
        domain), or bad shapes, naming the argument.
    """
    A, B, S0 = _hurwitz_gain_inputs(A, B, Sigma0)
    _check_gain_domain(B)
    Y = solve_continuous_lyapunov(A.T, -(B + B.T))
    K = psd_sqrt(S0)
    lmax = float(np.linalg.eigvalsh(K @ (0.5 * (Y + Y.T)) @ K)[-1])
    return 1.0 / lmax if lmax > 0 else math.inf


def _check_gain_domain(B: Any) -> np.ndarray:
    r"""``B``, after checking :math:`B + B^\top \succeq 0` (the domain of :func:`critical_gain`).

    Raises
    ------
    ValueError
        ``B + B^T`` has a negative eigenvalue (below :math:`-10^{-12}` times the largest modulus).
    """
    B = check_matrix(B, "B")
    S = B + B.T
    if _definiteness(S) not in ("positive definite", "positive semidefinite", "zero"):
        w = np.linalg.eigvalsh(0.5 * (S + S.T))
        raise ValueError(f"B: the critical gain v_c = 1/lambda_max(K Y_inf K) needs B + B^T positive "
                         f"semidefinite, but B + B^T has eigenvalues in [{w[0]:.3g}, {w[-1]:.3g}]; with an "
                         "indefinite B + B^T a transient can blow up below that value")
    return B


@dataclass(frozen=True)
class GainThreshold:
    r"""The exact threshold gain of :math:`V = vI` from :math:`\Sigma_0`, and what the formula says.

    Attributes
    ----------
    threshold : float
        :math:`1/\sup_{t\ge0}\lambda_{\max}(KY(t)K)`: below it the covariance never blows up, above
        it it does (``inf`` when the supremum is :math:`\le 0`).
    peak, t_peak : float
        The supremum of :math:`\lambda_{\max}(KY(t)K)` and where it is reached (``inf`` when it is
        the limit :math:`t \to \infty`).
    limit : float
        :math:`\lambda_{\max}(KY_\infty K)`.
    formula : float
        :math:`1/\text{limit}`: :func:`critical_gain`'s formula, evaluated even outside its domain
        (equal to ``threshold`` when :math:`B + B^\top \succeq 0`).
    """

    threshold: float
    peak: float
    t_peak: float
    limit: float
    formula: float

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def gain_threshold(A: Any, B: Any, Sigma0: Any, *, t_max: float | None = None, n_grid: int = 4000) -> GainThreshold:
    r"""The exact threshold :math:`1/\sup_{t \ge 0}\lambda_{\max}(KY(t)K)` of :math:`V = vI`, for any :math:`B`.

    :math:`Y(t) = \int_0^t e^{A^\top s}(B + B^\top)e^{As}ds`, :math:`K = \Sigma_0^{1/2}` (see
    :func:`critical_gain`'s Domain). :math:`Y(t)` is exact (Van Loan exponential, stepped by the
    semigroup on ``n_grid`` steps up to ``t_max``, by default :math:`20/|\max\operatorname{Re}
    \lambda(A)|` capped to [100, 1e4], where :math:`Y` has converged to round-off); the supremum is the
    larger of the limit :math:`\lambda_{\max}(KY_\infty K)` and the grid's maximum refined by a
    bounded scalar search between its neighbours.

    Parameters
    ----------
    A : (d, d) array
        The linear part of the feed-forward, Hurwitz.
    B : (d, d) array
        The query-key matrix (any).
    Sigma0 : (d, d) array
        The initial covariance, symmetric positive semidefinite.
    t_max : float, optional
        The horizon of the grid (default above).
    n_grid : int
        The number of grid steps on :math:`[0, t_{\max}]`.

    Returns
    -------
    GainThreshold
        The threshold, the peak of :math:`\lambda_{\max}(KY(t)K)` and where it is reached, the limit
        and :func:`critical_gain`'s formula.

    Raises
    ------
    ValueError
        ``A`` is not Hurwitz (:math:`Y_\infty` does not exist), or bad shapes, naming the argument.
    """
    A, B, S0 = _hurwitz_gain_inputs(A, B, Sigma0)
    n_grid = check_count(n_grid, "n_grid")
    t_max = None if t_max is None else check_positive(t_max, "t_max")
    Q = B + B.T
    ker = _RiccatiKernel(A, Q, S0)
    lam = lambda Y: 1.0 - ker.g_of(Y)  # noqa: E731  (lambda_max(K Y K))
    Y_inf = solve_continuous_lyapunov(A.T, -Q)
    limit = lam(0.5 * (Y_inf + Y_inf.T))
    horizon = float(t_max) if t_max is not None else _default_t_max(A)
    h = horizon / n_grid
    Eh, Yh = ker.parts(h)
    E, Y = np.eye(A.shape[0]), np.zeros_like(A)
    values = np.empty(n_grid + 1)
    values[0] = lam(Y)
    for k in range(1, n_grid + 1):
        E, Y = ker.step_parts(E, Y, Eh, Yh)
        values[k] = lam(Y)
    k = int(np.argmax(values))
    peak, t_peak = limit, math.inf
    if values[k] > limit:
        best = minimize_scalar(lambda t: -lam(ker.parts(t)[1]), bounds=(max(k - 1, 0) * h, min(k + 1, n_grid) * h),
                               method="bounded", options={"xatol": 1e-10})
        peak, t_peak = (-float(best.fun), float(best.x)) if -best.fun >= values[k] else (float(values[k]), k * h)
    return GainThreshold(threshold=1.0 / peak if peak > 0 else math.inf, peak=peak, t_peak=t_peak, limit=limit,
                         formula=1.0 / limit if limit > 0 else math.inf)
