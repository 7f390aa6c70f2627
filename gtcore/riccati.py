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

The module holds the blow-up time and the closed-form covariance; the precision equation's exact solution and
the spectral classes are in :mod:`gtcore.riccati_kernel`, the critical gain in :mod:`gtcore.riccati_gain` (their
public names are importable from here).

References
----------
Alcalde, Ji, Zuazua (2026), *Reachability and asymptotics of Gaussian Transformer dynamics*,
arXiv:2606.07600, eq. (1.1) and the asymptotic results (stabilising and destabilising regimes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gtcore._repr import short_repr
from gtcore._validation import as_float_array, check_covariance, check_positive
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.moments.ode import _moment_rhs
from gtcore.poles import covariance_only, left_eigen_certificate, no_pole_rate, trace_certificate
from gtcore.riccati_gain import GainThreshold, critical_gain, gain_threshold
from gtcore.riccati_gain import _check_gain_domain as _check_gain_domain  # re-exported (stability, studies)
from gtcore.riccati_kernel import (
    _TRUSTED_GROWTH,
    _check_controls,
    _default_t_max,
    _definiteness,
    _fmt_spec,
    _RiccatiKernel,
    _root,
    riccati_quadratic,
)
from gtcore.riccati_kernel import _lyapunov_P as _lyapunov_P  # re-exported (gtcore.stability)
from gtcore.riccati_kernel import _spectrum_class as _spectrum_class  # re-exported (gtcore.stability, studies)
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

    Examples
    --------
    >>> from gtcore import Controls, blowup_time
    >>> bt = blowup_time(np.eye(1), Controls(V=-np.eye(1), B=np.eye(1)))
    >>> bt.t_star, bt.verdict, bt.proved
    (inf, <Verdict.NO_BLOWUP: 'no blow-up'>, True)
    """

    t_star: float
    method: str
    reason: str
    proved: bool = True
    verdict: Verdict | None = None
    crossing_time: float | None = None

    def __post_init__(self) -> None:
        if self.verdict is None:
            verdict = (
                Verdict.BLOWS_UP
                if math.isfinite(self.t_star)
                else Verdict.NO_BLOWUP
                if self.proved
                else Verdict.UNDETERMINED
            )
            object.__setattr__(self, "verdict", verdict)
        if math.isfinite(self.t_star) != (self.verdict is Verdict.BLOWS_UP):
            raise ValueError(
                f"BlowupTime: a finite t_star goes with the verdict 'blows up' only "
                f"(got t_star = {self.t_star}, verdict {self.verdict!r})"
            )
        if self.proved == (self.verdict is Verdict.UNDETERMINED):
            raise ValueError(f"BlowupTime: proved={self.proved} contradicts the verdict {self.verdict!r}")

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    def __float__(self) -> float:
        return float(self.t_star)


def _blowup_closed_form(Sigma0: np.ndarray, controls: Controls, Q: np.ndarray, t_max: float | None) -> BlowupTime:
    A = controls.affine_A
    d = controls.d
    qdef = _definiteness(Q)
    cls, lam = _spectrum_class(A)
    if d == 1:
        a, q, s0 = float(A[0, 0]), float(Q[0, 0]), float(Sigma0[0, 0])
        method = "closed form (d = 1)"
        if s0 == 0 or q <= 0:
            return BlowupTime(
                math.inf,
                method,
                f"sigma' = 2a sigma + q sigma^2 with q = {q:.3g} <= 0 or sigma0 = 0: P = 1/sigma never reaches 0",
            )
        if a == 0:
            return BlowupTime(1.0 / (q * s0), method, "a = 0: t* = 1/(q sigma0)")
        x = 2.0 * a / (q * s0)
        if x <= -1.0:
            return BlowupTime(
                math.inf, method, f"a = {a:.3g} < 0 and q sigma0 = {q * s0:.3g} <= -2a: the decay wins, sigma -> 0"
            )
        return BlowupTime(
            math.log1p(x) / (2.0 * a), method, "t* = log(1 + 2a/(q sigma0)) / (2a), q = 2 sum_h v_h beta_h > 0"
        )
    method = "closed form (V = vI)"
    ker = _RiccatiKernel(A, Q, Sigma0)
    if qdef in ("negative definite", "negative semidefinite", "zero"):
        return BlowupTime(
            math.inf,
            method,
            f"Q = sum_h v_h(B_h + B_h^T) is {qdef}: I - K Y(t) K >= I for all t, P = Sigma^-1 stays positive definite",
        )
    if cls == "Hurwitz" and qdef in ("positive definite", "positive semidefinite"):
        # g is non-increasing with limit 1 - lambda_max(K Y_inf K)
        Y_inf = solve_continuous_lyapunov(A.T, -Q)
        g_inf = ker.g_of(0.5 * (Y_inf + Y_inf.T))
        if g_inf >= -1e-12:
            return BlowupTime(
                math.inf,
                method,
                f"A Hurwitz and Q {qdef}: g(t) decreases to 1 - lambda_max(K Y_inf K) = {g_inf:.3g} >= 0 (no blow-up)",
            )
    horizon = float(t_max) if t_max is not None else _default_t_max(A)
    if qdef in ("positive definite", "positive semidefinite"):
        # monotone: bracket by doubling, then Brent
        t = min(horizon, 1.0 / max(1.0, np.linalg.norm(A, 2) + np.linalg.norm(Q, 2) * np.linalg.norm(Sigma0, 2)))
        lo = 0.0
        while True:
            if ker.g(t) < 0:
                t_star = _root(ker.g, lo, t)
                return BlowupTime(
                    t_star,
                    method,
                    f"Q {qdef} ({_fmt_spec(lam)}): first zero of lambda_min(I - K Y(t) K), g non-increasing",
                )
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
            return _blowup_numerical(
                Sigma0,
                controls,
                horizon,
                note=(f"closed form ill-conditioned beyond t = {k * h:.3g} (|e^(At)|^2 |K|^2 |Q| > 1e12)"),
            )
        if ker.g_of(Y) < 0:
            try:
                t_star = _root(ker.g, (k - 1) * h, k * h)
            except ValueError:
                return _blowup_numerical(Sigma0, controls, horizon, note="no clean sign change of g")
            check = integrate_moments(
                np.zeros(d),
                Sigma0,
                covariance_only(controls),
                (0.0, t_star * (1 + 1e-3) + 1e-9),
                blowup_norm=1e8 * max(float(np.linalg.norm(Sigma0)), 1.0),
            )
            if (
                check.status is not Status.BLOWUP
                or check.crossing_time is None
                or abs(check.crossing_time - t_star) > 1e-4 * t_star
            ):
                return _blowup_numerical(
                    Sigma0,
                    controls,
                    horizon,
                    note=f"candidate zero t = {t_star:.6g} of g not confirmed by integrate_moments",
                )
            return BlowupTime(
                t_star,
                method,
                f"Q indefinite ({_fmt_spec(lam)}): first zero of "
                f"lambda_min(I - K Y(t) K), scanned with step {h:.3g}, confirmed by "
                "integrate_moments",
            )
    return BlowupTime(
        math.inf,
        method,
        f"Q indefinite: g(t) > 0 on a grid of step {h:.3g} up to t_max = {horizon:.3g} (not proved beyond)",
        proved=False,
    )


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
    return (
        _restarted_closed_form_certificate(controls, S, horizon)
        or trace_certificate(controls, S)
        or left_eigen_certificate(controls, S)
    )


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
    traj = integrate_moments(
        np.zeros(d), Sigma0, covariance_only(controls), (0.0, t_max), blowup_norm=1e8 * max(norm0, 1.0)
    )
    crossed = traj.status is Status.BLOWUP
    t_e = traj.crossing_time if crossed else None
    rate = no_pole_rate(controls)
    if rate is not None:
        bound = f"no pole: ||Sigma(t)||_2 <= ||Sigma0||_2 e^(2 L t), L = ||A||_2 + (attention drift bound) = {rate:.3g}"
        if crossed:
            return BlowupTime(
                math.inf,
                "numerical",
                f"{prefix}{bound}; ||Sigma||_F crossed "
                f"{1e8 * max(norm0, 1.0):.3g} at t = {t_e:.6g}: exponential growth",
                verdict=Verdict.GROWS_EXPONENTIALLY,
                crossing_time=t_e,
            )
        return BlowupTime(
            math.inf,
            "numerical",
            f"{prefix}{bound} (integrate_moments on [0, {t_max:.3g}]: status {traj.status})",
            verdict=Verdict.NO_BLOWUP,
        )
    if not crossed:
        return BlowupTime(
            math.inf,
            "numerical",
            f"{prefix}no blow-up on [0, {t_max:.3g}] (integrate_moments, status {traj.status}; not proved beyond)",
            proved=False,
        )
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
        return BlowupTime(
            math.inf,
            "numerical",
            f"{prefix}||Sigma||_F crossed {1e8 * max(norm0, 1.0):.3g} at "
            f"t = {t_e:.6g} (a pole there would be at t = {t_pole:.6g}), but nothing certifies "
            "a pole: the growth may be exponential",
            proved=False,
            crossing_time=t_e,
        )
    T, how = cert
    return BlowupTime(
        min(t_pole, t_cert + T),
        "numerical",
        f"{prefix}integrate_moments (DOP853) to ||Sigma||_F "
        "= 1e8, then the pole correction t* = t_e + ||Sigma|| / (d/dt ||Sigma||); a pole is "
        f"certified at {where}: {how}",
        crossing_time=t_e,
    )


def blowup_time(Sigma0: Any, controls: Controls, *, t_max: float | None = None, method: str = "auto") -> BlowupTime:
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

    Examples
    --------
    >>> from gtcore import Controls, blowup_time
    >>> bt = blowup_time(np.eye(1), Controls(V=np.eye(1), B=np.eye(1)))
    >>> bt.t_star, bt.method
    (0.5, 'closed form (d = 1)')
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
