r"""The chapter's closed forms over a seeded ensemble of general parameters, against eq. (1.1) itself.

Every check here compares a formula derived from the statement (the closed-form covariance, the
collapse/blow-up criterion, the Lyapunov equilibrium, the linearisation at an equilibrium) with a
direct integration of eq. (1.1): *derivation* checks, over draws with a non-normal :math:`A`, a
non-symmetric :math:`B` and :math:`d = 3` (so that a transposed exponential, a transposed Lyapunov
equation or a dropped term changes the answer; with a normal :math:`A` and a symmetric :math:`B` most of
them would not).

**The draws** (:func:`riccati_draws`). :math:`G` Ginibre (entries :math:`N(0, 1/d)`), so :math:`A` is
non-normal almost surely; :math:`B = HH^\top/d + 0.2I + (S - S^\top)/2` (positive-definite symmetric part,
non-symmetric), :math:`\Sigma_{\text{base}} = WW^\top/d + 0.2I`. The closed forms need :math:`V = vI`
(every head a multiple of the identity): that is the setting of the Riccati form, and it is the only
scalar choice here.

* ``"stabilising"``: :math:`A = a(G + (\max|\operatorname{Re}\operatorname{spec}G| + 0.3)I)` anti-stable,
  :math:`v = -0.8` (opposite definiteness of :math:`V` and :math:`B`);
* ``"collapse"`` / ``"blowup"``: :math:`A = -a(G + (\ldots)I)` Hurwitz, :math:`v = +0.5` (same
  definiteness), :math:`\Sigma_0 = s\Sigma_{\text{base}}` with :math:`s` such that
  :math:`\rho = \lambda_{\max}(KY_\infty K)` (:math:`K = \Sigma_0^{1/2}`,
  :math:`A^\top Y_\infty + Y_\infty A = -v(B + B^\top)`) is drawn uniformly from :math:`[0.6, 0.95]`
  (collapse predicted) or :math:`[1.05, 2]` (blow-up predicted), near the boundary :math:`\rho = 1`, where a
  wrong criterion errs. :math:`Y_\infty` is computed here by a
  Kronecker solve, not by the library's Lyapunov solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from gtcore._linalg import symmetric_basis
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.riccati import blowup_time, closed_form_covariance, critical_gain
from gtcore.stability import classify, equilibrium, linear_stability, observe_regime
from gtcore.status import Verdict

__all__ = [
    "RiccatiDraw",
    "closed_form_error",
    "critical_gain_verdict",
    "flow_map_spectrum",
    "isotropic_pole_errors",
    "linearisation_error",
    "lyapunov_equilibrium_error",
    "regime_agreement",
    "riccati_draws",
]

_RTOL, _ATOL = 1e-12, 1e-14


@dataclass(frozen=True)
class RiccatiDraw:
    """One draw: its kind, controls (``V = vI``), initial covariance and the criterion's :math:`\\rho`."""

    kind: str
    controls: Controls
    Sigma0: np.ndarray
    rho: float

    def __repr__(self) -> str:
        return f"RiccatiDraw({self.kind}, rho={self.rho:.3g})"


def _kron_lyapunov(A: np.ndarray, Q: np.ndarray) -> np.ndarray:
    r""":math:`Y` with :math:`A^\top Y + Y A = -Q`, from the Kronecker form (row-major vec)."""
    d = A.shape[0]
    eye = np.eye(d)
    L = np.kron(A.T, eye) + np.kron(eye, A.T)
    Y = np.linalg.solve(L, -Q.reshape(-1)).reshape(d, d)
    return 0.5 * (Y + Y.T)


def _sqrtm_psd(S: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(S)
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def riccati_draws(draws: int, d: int, *, seed: int, a_scale: float = 0.5) -> list[RiccatiDraw]:
    r"""``draws`` draws of each kind of the module docstring, in the order stabilising, collapse, blow-up.

    Parameters
    ----------
    draws, d : int
        Draws per kind, and the dimension.
    seed : int
        Seeds everything.
    a_scale : float
        The scale :math:`a` of :math:`A`.

    Returns
    -------
    list of RiccatiDraw
        ``3 * draws`` draws.
    """
    rng = np.random.default_rng(seed)
    out: list[RiccatiDraw] = []
    for kind in ("stabilising", "collapse", "blowup"):
        for _ in range(draws):
            G = rng.standard_normal((d, d)) / np.sqrt(d)
            A = a_scale * (G + (np.abs(np.linalg.eigvals(G).real).max() + 0.3) * np.eye(d))
            H, S, W = (rng.standard_normal((d, d)) for _ in range(3))
            B = H @ H.T / d + 0.2 * np.eye(d) + 0.5 * (S - S.T)
            base = W @ W.T / d + 0.2 * np.eye(d)
            if kind == "stabilising":
                out.append(RiccatiDraw(kind, Controls(A=A, V=-0.8 * np.eye(d), B=B), base, float("nan")))
                continue
            A, v = -A, 0.5
            Y = _kron_lyapunov(A, v * (B + B.T))
            Kb = _sqrtm_psd(base)
            lam = float(np.linalg.eigvalsh(Kb @ Y @ Kb).max())
            rho = float(rng.uniform(0.6, 0.95) if kind == "collapse" else rng.uniform(1.05, 2.0))
            out.append(RiccatiDraw(kind, Controls(A=A, V=v * np.eye(d), B=B), (rho / lam) * base, rho))
    return out


def closed_form_error(draw: RiccatiDraw, times: int = 9) -> float:
    r"""Largest relative Frobenius error of :func:`gtcore.riccati.closed_form_covariance` against eq. (1.1).

    The times are ``times`` equally spaced points of :math:`(0, T]`, :math:`T = 0.9\,t^*` for a draw that
    blows up (the certified :math:`t^*`), else :math:`T = 4/\max|\operatorname{Re}\operatorname{spec}A|` (long
    enough for :math:`\Sigma` to move by its own size, short enough that :math:`e^{At}` of an anti-stable
    :math:`A` stays far from the closed form's round-off range).

    Parameters
    ----------
    draw : RiccatiDraw
    times : int
        How many comparison times.

    Returns
    -------
    float
        :math:`\max_t \|\Sigma_{\text{closed}}(t) - \Sigma_{\text{ODE}}(t)\|_F / \|\Sigma_{\text{ODE}}(t)\|_F`.
    """
    ctl, S0 = draw.controls, draw.Sigma0
    t_star = blowup_time(S0, ctl).t_star
    T = 0.9 * t_star if np.isfinite(t_star) else 4.0 / float(np.abs(np.linalg.eigvals(ctl.affine_A).real).max())
    grid = np.linspace(0.0, T, times + 1)[1:]
    ode = integrate_moments(np.zeros(ctl.d), S0, ctl, (0.0, T), t_eval=grid, rtol=_RTOL, atol=_ATOL, blowup_norm=1e12)
    closed = closed_form_covariance(S0, ctl, ode.t)
    return float(max(np.linalg.norm(c - s) / np.linalg.norm(s) for c, s in zip(closed, ode.Sigma, strict=True)))


def regime_agreement(draw: RiccatiDraw) -> tuple[Verdict, Verdict]:
    r"""(:func:`gtcore.stability.classify`'s verdict, the verdict seen by integrating eq. (1.1)).

    The integration (:func:`gtcore.stability.observe_regime`) runs to :math:`30/\alpha`,
    :math:`\alpha = -\max\operatorname{Re}\operatorname{spec}A`, by which time a collapsing covariance is
    below :math:`10^{-8}\|\Sigma_0\|` (it decays like :math:`e^{-2\alpha t}` times the bounded factor
    :math:`(I - KY(t)K)^{-1} \preceq (1 - \rho)^{-1}I`).
    """
    ctl = draw.controls
    alpha = -float(np.linalg.eigvals(ctl.affine_A).real.max())
    return classify(ctl, draw.Sigma0).verdict, observe_regime(ctl, draw.Sigma0, 30.0 / alpha)


def critical_gain_verdict(draw: RiccatiDraw) -> Verdict:
    r"""The verdict the threshold :math:`v_c` of :func:`gtcore.riccati.critical_gain` predicts for a
    Hurwitz draw with :math:`V = vI`: collapse when :math:`v < v_c`, blow-up when :math:`v > v_c`.

    The draw's :math:`\rho = v/v_c` (:math:`v_c = 1/\lambda_{\max}(KY_\infty K)`,
    :math:`A^\top Y_\infty + Y_\infty A = -(B + B^\top)`), so a wrong :math:`v_c` (a factor in the quadratic
    term, a transposed Lyapunov equation) flips the prediction of the draws near :math:`\rho = 1`; compare
    with the second element of :func:`regime_agreement`, the integrated verdict.
    """
    ctl = draw.controls
    v = float(ctl.V[0][0, 0])
    if not np.allclose(ctl.V[0], v * np.eye(ctl.d), rtol=0.0, atol=0.0) or v <= 0:
        raise ValueError("critical_gain_verdict needs V = vI with v > 0 (a collapse or blow-up draw)")
    return Verdict.COLLAPSES if v < critical_gain(ctl.affine_A, ctl.B[0], draw.Sigma0) else Verdict.BLOWS_UP


def isotropic_pole_errors(draws: int, d: int, *, seed: int) -> np.ndarray:
    r"""Relative errors of :func:`gtcore.riccati.blowup_time` on draws with a general :math:`V` and a known pole.

    Each draw has :math:`A` skew, :math:`B = I`, :math:`V = vI + S` with :math:`S` skew (so :math:`V` is not a
    multiple of :math:`I` and no closed form of the library applies: ``blowup_time`` integrates, then caps
    its pole estimate by a certificate) and :math:`\Sigma_0 = sI`, with :math:`v` and :math:`s` uniform on
    :math:`[0.3, 1]`. Then :math:`\Sigma(t) = s(t)I` solves eq. (1.1): :math:`A\Sigma + \Sigma A^\top = 0` and
    :math:`V\Sigma B\Sigma + \Sigma B^\top\Sigma V^\top = s^2(V + V^\top) = 2vs^2I`, so :math:`s' = 2vs^2` and
    the pole is at :math:`t^* = 1/(2vs)`.

    Returns
    -------
    (draws,) ndarray
        :math:`|t^*_{\text{blowup\_time}} - 1/(2vs)|\,2vs` per draw.
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        P, S = rng.standard_normal((d, d)), rng.standard_normal((d, d))
        v, s = rng.uniform(0.3, 1.0, size=2)
        ctl = Controls(A=0.5 * (P - P.T), V=v * np.eye(d) + 0.5 * (S - S.T), B=np.eye(d))
        exact = 1.0 / (2.0 * v * s)
        out.append(abs(blowup_time(s * np.eye(d), ctl).t_star - exact) / exact)
    return np.array(out)


def lyapunov_equilibrium_error(draw: RiccatiDraw) -> tuple[float, str]:
    r"""Relative distance from eq. (1.1)'s end point to :func:`gtcore.stability.equilibrium`, and its method.

    From :math:`\Sigma_0` the ODE runs to :math:`T = 15/\min\operatorname{Re}\operatorname{spec}A`: the
    precision approaches :math:`P^*` like :math:`e^{-2\min\operatorname{Re}\operatorname{spec}A\,t}`, so
    the transient is :math:`e^{-30} \approx 10^{-13}` times the (non-normal) transient growth factor.
    """
    ctl = draw.controls
    eq = equilibrium(ctl)
    T = 15.0 / float(np.linalg.eigvals(ctl.affine_A).real.min())
    ode = integrate_moments(np.zeros(ctl.d), draw.Sigma0, ctl, (0.0, T), rtol=_RTOL, atol=_ATOL)
    return float(np.linalg.norm(ode.Sigma[-1] - eq.Sigma) / np.linalg.norm(eq.Sigma)), eq.method


def flow_map_spectrum(
    controls: Controls, Sigma_star: np.ndarray, *, eps: float = 1e-4, tau: float | None = None
) -> np.ndarray:
    r"""The spectrum of the linearisation at :math:`\Sigma^*` measured on eq. (1.1) itself.

    The flow map :math:`\Phi_\tau` of the covariance equation is differentiated at :math:`\Sigma^*` by
    central differences along an orthonormal basis :math:`E_k` of the symmetric matrices,
    :math:`D\Phi_\tau E_k \approx (\Phi_\tau(\Sigma^* + \epsilon E_k) - \Phi_\tau(\Sigma^* - \epsilon E_k))/2\epsilon`
    (:math:`\epsilon` relative to :math:`\|\Sigma^*\|_F`; DOP853 at rtol :math:`10^{-12}`); then
    :math:`\lambda_k = \log(\operatorname{eig}D\Phi_\tau)/\tau`. :math:`\tau = 0.5/\|J\|` keeps
    :math:`\tau|\operatorname{Im}\lambda| < \pi` (the principal logarithm) with :math:`\|J\|` bounded by the
    drift's Lipschitz constant :math:`2(\|A\| + 2\sum_h\|V_h\|\|B_h\|\|\Sigma^*\|)`.

    Parameters
    ----------
    controls : Controls
    Sigma_star : (d, d) array
        An equilibrium of eq. (1.1).
    eps : float
        The relative perturbation.
    tau : float, optional
        The flow time (default as above).

    Returns
    -------
    (d(d+1)/2,) complex array
    """
    d = controls.d
    S = np.asarray(Sigma_star, dtype=float)
    h = eps * float(np.linalg.norm(S))
    if tau is None:
        lip = 2.0 * (
            np.linalg.norm(controls.affine_A, 2)
            + 2.0
            * sum(np.linalg.norm(V, 2) * np.linalg.norm(B, 2) for V, B in zip(controls.V, controls.B, strict=True))
            * np.linalg.norm(S, 2)
        )
        tau = 0.5 / float(lip)
    basis = symmetric_basis(d)

    def flow(X: np.ndarray) -> np.ndarray:
        return integrate_moments(np.zeros(d), X, controls, (0.0, tau), rtol=_RTOL, atol=_ATOL * h).Sigma[-1]

    cols = []
    for E in basis:
        D = (flow(S + h * E) - flow(S - h * E)) / (2.0 * h)
        cols.append([float(np.sum(F * D)) for F in basis])
    Phi = np.array(cols).T
    return np.log(np.linalg.eigvals(Phi).astype(complex)) / tau


def linearisation_error(controls: Controls, Sigma_star: np.ndarray) -> float:
    r"""The largest distance between :func:`gtcore.stability.linear_stability`'s eigenvalues and
    :func:`flow_map_spectrum`'s (optimally paired), relative to the largest :math:`|\lambda|`."""
    lam = np.asarray(linear_stability(controls, Sigma_star).eigenvalues, dtype=complex)
    mes = flow_map_spectrum(controls, Sigma_star)
    cost = np.abs(lam[:, None] - mes[None, :])
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].max() / np.abs(mes).max())
