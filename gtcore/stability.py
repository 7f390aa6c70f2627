r"""Constant controls: equilibria, linearised stability, regime classification, the asymptotic mean.

With time-invariant parameters the covariance obeys the matrix Riccati-type equation (eq. 1.1)

.. math::

    \Sigma' = F(\Sigma) := A\Sigma + \Sigma A^\top
        + \sum_h \big(V_h \Sigma B_h \Sigma + \Sigma B_h^\top \Sigma V_h^\top\big),

whose equilibria solve the algebraic Bernoulli equation :math:`F(\Sigma^*) = 0` (no constant term).

**The linearisable case** :math:`V_h = v_hI` (the precision :math:`P = \Sigma^{-1}` solves a linear
Lyapunov equation; closed-form blow-up time :math:`t^*` and critical gain) is
:mod:`gtcore.riccati`. The attention enters through :func:`gtcore.attention.gaussian_velocity`.

Facts used by :func:`classify` (all for :math:`V_h = v_h I`; they are checked numerically in the
tests and in the book's chapter 4):

* the equilibria with :math:`\Sigma^* \succ 0` are :math:`\Sigma^* = (P^*)^{-1}` with
  :math:`P^*A + A^\top P^* = -Q`; the linearisation at :math:`\Sigma^*` has eigenvalues
  :math:`-(\lambda_i + \lambda_j)`, :math:`\lambda_i \in \operatorname{spec}(A)`, so
  :math:`\Sigma^*` attracts iff :math:`A` is anti-stable (:math:`\operatorname{Re}\lambda > 0`);
  with :math:`Q \prec 0` (e.g. :math:`v < 0` and :math:`B + B^\top \succ 0`: opposite
  definiteness) :math:`P^* \succ 0` exists and every trajectory from :math:`\Sigma_0 \succ 0`
  converges to it;
* with :math:`A` Hurwitz, :math:`Y(t) \to Y_\infty` and :math:`\Sigma(t) \to 0` when
  :math:`I - K Y_\infty K \succ 0` (always when :math:`Q \preceq 0`), otherwise :math:`\Sigma`
  blows up in finite time;
* with :math:`Q \succeq 0` (same definiteness) :math:`g` is non-increasing, and with :math:`A`
  anti-stable and :math:`Q \succ 0` blow-up is certain;
* at any equilibrium :math:`M^* = A + \sum_h V_h\Sigma^*B_h` satisfies
  :math:`M^*\Sigma^* + \Sigma^* M^{*\top} = 0`, so :math:`M^*\Sigma^*` is skew and
  :math:`M^*` has purely imaginary spectrum: the mean's rate comes from :math:`\sum_h V_h`.

References
----------
Alcalde, Ji, Zuazua (2026), *Reachability and asymptotics of Gaussian Transformer dynamics*,
arXiv:2606.07600, eq. (1.1) and the asymptotic results (stabilising and destabilising regimes).
"""


from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from ._validation import check_count, check_covariance, check_positive, check_vector
from .attention import attention_of, gaussian_velocity
from .controls import Controls
from .moments import integrate_moments, integrate_moments_lanes
from .riccati import (
    _RiccatiKernel,
    _blowup_closed_form,
    _blowup_numerical,
    _check_controls,
    _default_t_max,
    _definiteness,
    _fmt_spec,
    _lyapunov_P,
    _spectrum_class,
    riccati_quadratic,
)

__all__ = [
    "Equilibrium",
    "LinearStability",
    "NoEquilibriumError",
    "Regime",
    "VERDICTS",
    "asymptotic_mean",
    "bias_for_mean_target",
    "classify",
    "equilibrium",
    "linear_stability",
    "mean_matrix",
    "observe_regime",
    "observe_regimes",
]

VERDICTS = ("converges", "collapses to 0", "blows up", "undetermined")


class NoEquilibriumError(ValueError):
    """No positive-definite equilibrium was found; the message says why."""


# ------------------------------------------------------------------------------- validation
def _check_pd(Sigma: Any, name: str, d: int) -> np.ndarray:
    S = check_covariance(Sigma, name, d)
    if np.linalg.eigvalsh(S)[0] <= 0:
        raise ValueError(f"{name} must be positive definite")
    return S


# --------------------------------------------------------------------------- the equation
def _F(controls: Controls, Sigma: np.ndarray) -> np.ndarray:
    M, _ = gaussian_velocity(Sigma, controls)
    MS = M @ Sigma
    return MS + MS.T


def _residual_scale(controls: Controls, Sigma: np.ndarray) -> float:
    AS = controls.affine_A @ Sigma
    att = attention_of(controls)
    responses = att.value_responses(Sigma, controls.V, att.params(controls))  # V_h M_h, per head
    quad = sum(np.linalg.norm(R @ Sigma) for R in responses)
    return 2.0 * (np.linalg.norm(AS) + quad)


def _dF(controls: Controls, Sigma: np.ndarray, H: np.ndarray) -> np.ndarray:
    r"""Fréchet derivative :math:`DF(\Sigma)[H]` on symmetric :math:`H`."""
    M, _ = gaussian_velocity(Sigma, controls)
    att = attention_of(controls)
    dR = att.value_responses_derivative(Sigma, H, controls.V, att.params(controls))
    X = M @ H + (dR @ Sigma).sum(axis=0)
    return X + X.T


def _sym_basis(d: int) -> list[np.ndarray]:
    """An orthonormal basis of the symmetric d x d matrices (Frobenius inner product)."""
    basis = []
    for i in range(d):
        for j in range(i, d):
            E = np.zeros((d, d))
            if i == j:
                E[i, i] = 1.0
            else:
                E[i, j] = E[j, i] = 1.0 / math.sqrt(2.0)
            basis.append(E)
    return basis


def _sym_coords(X: np.ndarray) -> np.ndarray:
    iu = np.triu_indices(X.shape[0])
    w = np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0))
    return w * X[iu]


def _sym_matrix(x: np.ndarray, d: int) -> np.ndarray:
    iu = np.triu_indices(d)
    w = np.where(iu[0] == iu[1], 1.0, 1.0 / math.sqrt(2.0))
    X = np.zeros((d, d))
    X[iu] = w * x
    return X + np.triu(X, 1).T


def _jacobian(controls: Controls, Sigma: np.ndarray) -> np.ndarray:
    basis = _sym_basis(Sigma.shape[0])
    return np.stack([_sym_coords(_dF(controls, Sigma, E)) for E in basis], axis=1)


# ----------------------------------------------------------------------------- equilibrium
@dataclass(frozen=True)
class Equilibrium:
    r"""A positive-definite solution of :math:`F(\Sigma^*) = 0`, with its certificate.

    Attributes
    ----------
    Sigma : (d, d) array, symmetric positive definite
    residual : :math:`\|F(\Sigma^*)\|_F`
    relative_residual : ``residual`` divided by the sum of the norms of the terms of :math:`F`
    method : "closed form (Lyapunov)" or "Newton"
    iterations : Newton iterations (0 for the closed form)
    """

    Sigma: np.ndarray
    residual: float
    relative_residual: float
    method: str
    iterations: int


def _certify(controls: Controls, Sigma: np.ndarray, method: str, iterations: int) -> Equilibrium:
    R = _F(controls, Sigma)
    res = float(np.linalg.norm(R))
    scale = _residual_scale(controls, Sigma)
    return Equilibrium(Sigma=Sigma, residual=res,
                       relative_residual=res / scale if scale > 0 else res,
                       method=method, iterations=iterations)


def _newton(controls: Controls, S0: np.ndarray, tol: float, max_iter: int):
    d = controls.d
    S = 0.5 * (S0 + S0.T)
    R = _F(controls, S)
    r = np.linalg.norm(R)
    for k in range(1, max_iter + 1):
        J = _jacobian(controls, S)
        try:
            step = np.linalg.solve(J, -_sym_coords(R))
        except np.linalg.LinAlgError:
            return None, k, "singular Jacobian"
        H = _sym_matrix(step, d)
        lam = 1.0
        while lam > 1e-6:  # backtracking on the residual norm
            S_new = S + lam * H
            R_new = _F(controls, S_new)
            r_new = np.linalg.norm(R_new)
            if r_new < (1 - 1e-4 * lam) * r or r_new <= tol * _residual_scale(controls, S_new):
                break
            lam *= 0.5
        else:
            return None, k, f"no descent (residual stalled at {r:.2e})"
        S, R, r = S_new, R_new, r_new
        if not np.all(np.isfinite(S)):
            return None, k, "diverged"
        scale = _residual_scale(controls, S)
        if r <= tol * max(scale, np.finfo(float).tiny):
            return S, k, "converged"
    return None, max_iter, f"no convergence in {max_iter} iterations (residual {r:.2e})"


#: a Newton limit is accepted as positive definite when its first-order distance to the exact root is
#: below this fraction of its smallest eigenvalue
ROOT_UNCERTAINTY_RATIO = 1e-3


def _root_uncertainty(controls: Controls, S: np.ndarray) -> float:
    r"""A first-order bound on the distance from ``S`` to the exact root of :math:`F`, Frobenius norm.

    :math:`\delta = (\|F(S)\|_F + \varepsilon_F)/\sigma_{\min}(DF(S))`, where
    :math:`\varepsilon_F = 8d\,\epsilon_{\text{mach}}` times the size of the terms of :math:`F` is the
    round-off in evaluating :math:`F` (so a residual that happens to vanish still leaves an
    uncertainty). Near a singular root (:math:`DF` nearly singular, as at :math:`\Sigma = 0` when
    the quadratic term vanishes there) :math:`\delta` is of the order of :math:`\|S\|` itself.
    """
    R = _F(controls, S)
    floor = 8 * controls.d * np.finfo(float).eps * _residual_scale(controls, S)
    smin = float(np.linalg.svd(_jacobian(controls, S), compute_uv=False)[-1])
    if not smin > 0:
        return math.inf
    return (float(np.linalg.norm(R)) + floor) / smin


def _certified_pd(controls: Controls, S: np.ndarray) -> tuple[bool, str]:
    """Whether every matrix within the root's uncertainty of ``S`` is positive definite, and why not."""
    lmin = float(np.linalg.eigvalsh(S)[0])
    delta = _root_uncertainty(controls, S)
    if lmin > delta / ROOT_UNCERTAINTY_RATIO:
        return True, ""
    return False, (f"the limit is not certified positive definite: smallest eigenvalue {lmin:.3e} against "
                   f"a distance {delta:.3e} to the exact root (first order, with round-off); the iterates "
                   "approach a singular solution")


def equilibrium(controls: Controls, Sigma_guess: Any = None, *, tol: float = 1e-13,
                max_iter: int = 60) -> Equilibrium:
    r"""A positive-definite equilibrium :math:`\Sigma^*` of the covariance equation.

    .. math::

        A\Sigma^* + \Sigma^* A^\top + \sum_h \big(V_h \Sigma^* B_h \Sigma^*
            + \Sigma^* B_h^\top \Sigma^* V_h^\top\big) = 0, \qquad \Sigma^* \succ 0.

    ``Sigma_guess``, when given, is tried first (damped Newton from it); it is a hint, never a
    reason to fail: if Newton from it does not end at a certified equilibrium, the other routes
    follow. When every :math:`V_h = v_h I` the closed form is used: :math:`P^* = (\Sigma^*)^{-1}`
    solves the Lyapunov equation :math:`P^*A + A^\top P^* = -\sum_h v_h(B_h + B_h^\top)`
    (``scipy.linalg``). If that equation has a unique solution which is not positive definite
    (smallest eigenvalue at most :math:`100\,d\,\epsilon_{\text{mach}}\|P^*\|`), no positive-definite
    equilibrium exists. Otherwise damped Newton's method on the symmetric matrices, started from
    the closed form for the scalar parts :math:`\operatorname{tr}(V_h)/d`, the end point of the ODE
    from :math:`I`, and multiples of :math:`I`.

    What "exists" means numerically. The equation has no constant term, so :math:`\Sigma = 0` is
    always a root, and where no positive-definite root exists Newton's iterates may shrink toward a
    singular one while the relative residual falls below ``tol`` (e.g. skew :math:`A`,
    :math:`V = -I`, :math:`B = I`: :math:`\Sigma(t) = I/(1 + 2t)`). A Newton limit is therefore
    accepted only when every matrix within its distance to the exact root (first order:
    :math:`\|F\|/\sigma_{\min}(DF)`, with the round-off of :math:`F` as a floor) is positive
    definite, with a factor :data:`ROOT_UNCERTAINTY_RATIO` to spare: :math:`\lambda_{\min}(\Sigma^*)
    > 10^3\,\delta`. Near a singular root :math:`\delta` is of the order of :math:`\|\Sigma\|`.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters (a feed-forward block enters through ``affine_A``).
    Sigma_guess : (d, d) symmetric positive-definite array, optional
    tol : float
        Newton stops when :math:`\|F(\Sigma)\|_F \le \text{tol}` times the size of the terms.
    max_iter : int

    Returns
    -------
    Equilibrium
        The matrix with its residual (the certificate).

    Raises
    ------
    NoEquilibriumError
        No positive-definite solution: the message says why (the Lyapunov solution is not
        positive definite, or every Newton start failed and how).
    ValueError
        Bad input, naming the argument.
    """
    controls = _check_controls(controls)
    tol = check_positive(tol, "tol")
    max_iter = check_count(max_iter, "max_iter")
    d = controls.d
    A = controls.affine_A
    failures = []

    def newton_from(label, S0):
        S, k, why = _newton(controls, S0, tol, max_iter)
        if S is None:
            failures.append(f"from {label}: {why}")
            return None
        S = 0.5 * (S + S.T)
        ok, why = _certified_pd(controls, S)
        if not ok:
            failures.append(f"from {label}: {why}")
            return None
        return _certify(controls, S, "Newton", k)

    if Sigma_guess is not None:
        eq = newton_from("Sigma_guess", _check_pd(Sigma_guess, "Sigma_guess", d))
        if eq is not None:
            return eq
    Q = riccati_quadratic(controls)
    if Q is not None:
        P = _lyapunov_P(A, Q)
        if P is not None:
            w = np.linalg.eigvalsh(P)
            if w[0] <= 100 * d * np.finfo(float).eps * max(abs(w[-1]), abs(w[0])):
                guess_note = f" (Newton {failures[0]})" if failures else ""
                raise NoEquilibriumError(
                    "no positive-definite equilibrium: with V_h = v_h I, Sigma* = P*^-1 where "
                    "P* A + A^T P* = -sum_h v_h (B_h + B_h^T) has the unique solution P*, whose "
                    f"smallest eigenvalue is {w[0]:.3e}, not positive (Q = sum_h v_h(B_h + B_h^T) is "
                    f"{_definiteness(Q)}, {_fmt_spec(np.linalg.eigvals(A))}){guess_note}"
                )
            S = np.linalg.inv(P)
            return _certify(controls, 0.5 * (S + S.T), "closed form (Lyapunov)", 0)
    guesses = []
    v = np.trace(controls.V, axis1=1, axis2=2) / d
    Qs = np.einsum("h,hij->ij", v, controls.B + np.swapaxes(controls.B, 1, 2))
    P = _lyapunov_P(A, 0.5 * (Qs + Qs.T))
    if P is not None and np.linalg.eigvalsh(P)[0] > 0:
        guesses.append(("closed form for the scalar part of V", np.linalg.inv(P)))
    traj = integrate_moments(np.zeros(d), np.eye(d), controls, (0.0, 50.0), blowup_norm=1e6)
    S_end = traj.Sigma[-1]
    if traj.status == "completed" and np.linalg.eigvalsh(S_end)[0] > 1e-6 * np.linalg.norm(S_end):
        guesses.append(("ODE end point from I at t = 50", S_end))
    guesses += [(f"{c:g} I", c * np.eye(d)) for c in (1.0, 0.1, 10.0)]
    for label, S0 in guesses:
        eq = newton_from(label, S0)
        if eq is not None:
            return eq
    raise NoEquilibriumError("no positive-definite equilibrium found by Newton's method: "
                             + "; ".join(failures))


# ------------------------------------------------------------------------ linear stability
@dataclass(frozen=True)
class LinearStability:
    r"""Spectrum of the covariance equation linearised at an equilibrium, on symmetric matrices.

    Attributes
    ----------
    eigenvalues : (d(d+1)/2,) complex array, sorted by decreasing real part
    max_real : the largest real part (the spectral abscissa)
    verdict : "stable" (max_real < 0), "unstable" (> 0) or "marginal" (0 within 1e-10 relative)
    """

    eigenvalues: np.ndarray
    max_real: float
    verdict: str


def linear_stability(controls: Controls, Sigma_star: Any) -> LinearStability:
    r"""Eigenvalues of :math:`H \mapsto DF(\Sigma^*)[H]` on symmetric :math:`H`, and the verdict.

    .. math::

        DF(\Sigma^*)[H] = M^*H + HM^{*\top} + \sum_h\big(V_h H B_h\Sigma^*
            + \Sigma^* B_h^\top H V_h^\top\big), \qquad M^* = A + \sum_h V_h\Sigma^*B_h.

    For :math:`V_h = v_h I` the eigenvalues are :math:`-(\lambda_i + \lambda_j)`,
    :math:`\lambda \in \operatorname{spec}(A)` (the linear equation for :math:`P = \Sigma^{-1}`).

    Parameters
    ----------
    controls : Controls
    Sigma_star : (d, d) symmetric positive semidefinite array

    Returns
    -------
    LinearStability
    """
    controls = _check_controls(controls)
    S = check_covariance(Sigma_star, "Sigma_star", controls.d)
    lam = np.linalg.eigvals(_jacobian(controls, S))
    lam = lam[np.argsort(-lam.real, kind="stable")]
    m = float(lam.real.max())
    s = 1e-10 * max(1.0, float(np.abs(lam).max()))
    verdict = "stable" if m < -s else ("unstable" if m > s else "marginal")
    return LinearStability(eigenvalues=lam, max_real=m, verdict=verdict)


# ------------------------------------------------------------------------------ classify
@dataclass(frozen=True)
class Regime:
    r"""The long-time behaviour of :math:`\Sigma(t)` from :math:`\Sigma_0`.

    Attributes
    ----------
    verdict : "converges", "collapses to 0", "blows up" or "undetermined"
    reason : why (definiteness of V and B, spectrum of A, what was computed)
    Sigma_star : the limit for "converges", else None
    t_star : the blow-up time for "blows up", else None
    method : "closed form" (:math:`V_h = v_hI`) or "numerical" (general :math:`V`, or when the
        :math:`V = vI` blow-up search fell back to the integrator, see :class:`BlowupTime`)
    """

    verdict: str
    reason: str
    Sigma_star: np.ndarray | None = None
    t_star: float | None = None
    method: str = "closed form"


def _describe(controls: Controls) -> str:
    Vs = [_definiteness(V) for V in controls.V]
    Bs = [_definiteness(B) for B in controls.B]
    return (f"V {'/'.join(Vs)}, B {'/'.join(Bs)} (symmetric parts), "
            f"{_spectrum_class(controls.affine_A)[0]} A with {_fmt_spec(np.linalg.eigvals(controls.affine_A))}")


def classify(controls: Controls, Sigma0: Any, *, t_max: float | None = None) -> Regime:
    r"""Classify the covariance's fate: converges (to which :math:`\Sigma^*`), collapses to 0,
    blows up (at which :math:`t^*`), or undetermined.

    With every :math:`V_h = v_hI` (:math:`Q = \sum_h v_h(B_h + B_h^\top)`) the verdict is exact:

    * finite :func:`blowup_time` :math:`\Rightarrow` "blows up";
    * :math:`A` anti-stable and :math:`P^*A + A^\top P^* = -Q` with :math:`P^* \succ 0`,
      :math:`\Sigma_0 \succ 0` :math:`\Rightarrow` "converges" to :math:`(P^*)^{-1}`
      (:math:`P(t) - P^* = e^{-A^\top t}(P_0 - P^*)e^{-At} \to 0`);
    * :math:`A` Hurwitz and :math:`I - KY_\infty K \succ 0` :math:`\Rightarrow` "collapses to 0";
    * otherwise "undetermined" (spectrum of :math:`A` on both sides of, or on, the imaginary
      axis; rank-deficient :math:`\Sigma_0` with anti-stable :math:`A`; a singular limit).

    For general :math:`V` the verdict is numerical: the ODE is integrated to ``t_max`` and
    compared with the Newton equilibrium and its linear stability.

    Parameters
    ----------
    controls : Controls (time-invariant)
    Sigma0 : (d, d) symmetric positive semidefinite array
    t_max : float, optional
        Horizon of the numerical checks (default as in :func:`blowup_time`).

    Returns
    -------
    Regime
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    if t_max is not None:
        t_max = check_positive(t_max, "t_max")
    d = controls.d
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
        return Regime("blows up", f"{desc}; Q = sum v_h(B_h + B_h^T) {qd}: {bt.reason}",
                      t_star=bt.t_star, method=meth)
    cls, lam = _spectrum_class(A)
    full_rank = np.linalg.eigvalsh(S0)[0] > 1e-12 * max(np.linalg.norm(S0), 1e-300)
    if cls == "anti-stable":
        if not full_rank:
            return Regime("undetermined", f"{desc}; rank(Sigma0) < d is invariant, so there is no "
                          "positive-definite limit", method=meth)
        P = _lyapunov_P(A, Q)
        w = np.linalg.eigvalsh(P)
        if w[0] > 0:
            S = np.linalg.inv(P)
            return Regime("converges", f"{desc}; Q {qd}: A anti-stable, so P(t) = Sigma(t)^-1 -> P* "
                          f"at rate 2 min Re spec(A) = {2 * lam.real.min():.3g}, and P* > 0 "
                          f"(lambda_min {w[0]:.3g})", Sigma_star=0.5 * (S + S.T), method=meth)
        return Regime("undetermined", f"{desc}; A anti-stable but the limit P* is singular "
                      f"(lambda_min {w[0]:.3g}): Sigma grows without bound", method=meth)
    if cls == "Hurwitz":
        ker = _RiccatiKernel(A, Q, S0)
        Y_inf = solve_continuous_lyapunov(A.T, -Q)
        g_inf = ker.g_of(0.5 * (Y_inf + Y_inf.T))
        if g_inf > 1e-12:
            return Regime("collapses to 0", f"{desc}; Q {qd}: A Hurwitz and I - K Y_inf K > 0 "
                          f"(lambda_min {g_inf:.3g}), so Sigma(t) -> 0 like e^(2 max Re spec(A) t) "
                          f"= e^({2 * lam.real.max():.3g} t)", method=meth)
        return Regime("undetermined", f"{desc}; A Hurwitz and I - K Y_inf K is singular "
                      f"(lambda_min {g_inf:.3g}): the boundary between collapse and blow-up", method=meth)
    return Regime("undetermined", f"{desc}; Q {qd}: spectrum of A on both sides of or on the "
                  f"imaginary axis, no blow-up found ({bt.reason})", method=meth)


def _classify_numerical(controls: Controls, S0: np.ndarray, t_max: float | None, desc: str) -> Regime:
    horizon = t_max if t_max is not None else _default_t_max(controls.affine_A)
    bt = _blowup_numerical(S0, controls, horizon)
    if math.isfinite(bt.t_star):
        return Regime("blows up", f"{desc}; {bt.reason}", t_star=bt.t_star, method="numerical")
    obs = observe_regime(controls, S0, horizon)
    if obs == "converges":
        try:
            eq = equilibrium(controls)
        except NoEquilibriumError as exc:
            return Regime("undetermined", f"{desc}; the ODE settles numerically but {exc}",
                          method="numerical")
        traj = integrate_moments(np.zeros(controls.d), S0, controls, (0.0, horizon))
        S_end = traj.Sigma[-1]
        ls = linear_stability(controls, eq.Sigma)
        if np.linalg.norm(S_end - eq.Sigma) <= 1e-6 * np.linalg.norm(eq.Sigma) and ls.verdict == "stable":
            return Regime("converges", f"{desc}; numerically: Sigma(t_max) is within 1e-6 of the Newton "
                          f"equilibrium, which is linearly stable (abscissa {ls.max_real:.3g})",
                          Sigma_star=eq.Sigma, method="numerical")
        return Regime("undetermined", f"{desc}; the ODE settles, but not at a linearly stable Newton "
                      "equilibrium", method="numerical")
    if obs == "collapses to 0":
        return Regime("collapses to 0", f"{desc}; numerically ||Sigma(t_max)|| < 1e-8 ||Sigma0||",
                      method="numerical")
    return Regime("undetermined", f"{desc}; no blow-up, equilibrium or collapse observed by "
                  f"t_max = {horizon:.3g}", method="numerical")


# ------------------------------------------------------------------- observation and map
def observe_regime(controls: Controls, Sigma0: Any, t_max: float, *, rtol: float = 1e-10,
                   settle_tol: float = 1e-6, collapse_tol: float = 1e-8) -> str:
    r"""The outcome seen by integrating the ODE alone (no theory): one of :data:`VERDICTS`.

    "blows up" when :func:`gtcore.integrate_moments` stops on its blow-up event before ``t_max``;
    "collapses to 0" when :math:`\|\Sigma(t_{\max})\| \le` ``collapse_tol`` :math:`\|\Sigma_0\|`;
    "converges" when :math:`\Sigma(t_{\max}) \succ 0` is stationary,
    :math:`\|F(\Sigma)\| \le` ``settle_tol`` :math:`\|\Sigma\|`, with
    :math:`\lambda_{\min}(\Sigma) >` ``settle_tol`` :math:`\|\Sigma\|`; else "undetermined".
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    t_max = check_positive(t_max, "t_max")
    n0 = float(np.linalg.norm(S0))
    traj = integrate_moments(np.zeros(controls.d), S0, controls, (0.0, t_max), rtol=rtol,
                             atol=1e-30 + 1e-14 * n0, blowup_norm=1e8 * max(n0, 1.0))
    return _observed_verdict(controls, traj.status, traj.Sigma[-1], n0, settle_tol, collapse_tol)


def _observed_verdict(controls: Controls, status: str, S: np.ndarray, n0: float, settle_tol: float,
                      collapse_tol: float) -> str:
    """:func:`observe_regime`'s verdict from the integration's status and end point."""
    if status == "blowup":
        return "blows up"
    nS = float(np.linalg.norm(S))
    if nS <= collapse_tol * n0:
        return "collapses to 0"
    if (np.linalg.norm(_F(controls, S)) <= settle_tol * nS
            and np.linalg.eigvalsh(S)[0] > settle_tol * nS):
        return "converges"
    return "undetermined"


def observe_regimes(controls: Sequence[Controls], Sigma0: Any, t_max: float, *, rtol: float = 1e-10,
                    settle_tol: float = 1e-6, collapse_tol: float = 1e-8) -> list[str]:
    r""":func:`observe_regime` for many controls at once: the same integration (tolerances, blow-up
    threshold) and the same verdicts, with every point's moment ODE stepped side by side by
    :func:`gtcore.moments.integrate_moments_lanes` (each with its own DOP853 steps; dot-product
    attention; other attention types fall back to :func:`observe_regime` point by point).
    """
    ctls = [_check_controls(c, f"controls[{k}]") for k, c in enumerate(controls)]
    if not ctls:
        return []
    S0 = check_covariance(Sigma0, "Sigma0", ctls[0].d)
    t_max = check_positive(t_max, "t_max")
    if any(c.attention != "dot" for c in ctls):
        return [observe_regime(c, S0, t_max, rtol=rtol, settle_tol=settle_tol, collapse_tol=collapse_tol)
                for c in ctls]
    n0 = float(np.linalg.norm(S0))
    ends = integrate_moments_lanes(np.zeros(ctls[0].d), S0, ctls, (0.0, t_max), rtol=rtol,
                                   atol=1e-30 + 1e-14 * n0, blowup_norm=1e8 * max(n0, 1.0))
    return [_observed_verdict(c, st, S, n0, settle_tol, collapse_tol)
            for c, st, S in zip(ctls, ends.status, ends.Sigma)]


# ------------------------------------------------------------------------------ the mean
def mean_matrix(controls: Controls, Sigma_star: Any) -> np.ndarray:
    r""":math:`A + \sum_h V_h + \sum_h V_h\Sigma^*B_h`: the mean's linear drift at :math:`\Sigma^*`.

    The mean converges to :func:`asymptotic_mean` iff this matrix is Hurwitz. Since
    :math:`M^* = A + \sum_h V_h\Sigma^*B_h` has purely imaginary spectrum at an equilibrium,
    for :math:`V = vI` its eigenvalues are :math:`v + i\omega`: the rate is :math:`v`.
    """
    controls = _check_controls(controls)
    S = check_covariance(Sigma_star, "Sigma_star", controls.d)
    att = attention_of(controls)
    p = att.params(controls)
    return controls.affine_A + att.mean_gain(S, controls.V, p) + att.linear_part(S, controls.V, p)


def _solvable_mean_matrix(controls: Controls, Sigma_star: Any) -> np.ndarray:
    """:func:`mean_matrix`, refused (``ValueError``) when it is singular to working precision."""
    M = mean_matrix(controls, Sigma_star)
    if np.linalg.cond(M) > 1e12:
        raise ValueError("Sigma_star: A + V + V Sigma* B is singular (condition number > 1e12), "
                         "the asymptotic mean is not unique")
    return M


def asymptotic_mean(controls: Controls, Sigma_star: Any) -> np.ndarray:
    r"""The mean's fixed point when :math:`\Sigma = \Sigma^*`.

    .. math::

        \mu^* = -\Big(A + \sum_h V_h + \sum_h V_h\Sigma^*B_h\Big)^{-1} b.

    It attracts when :func:`mean_matrix` is Hurwitz.

    Raises
    ------
    ValueError
        The matrix is singular, or bad input (naming the argument).
    """
    M = _solvable_mean_matrix(controls, Sigma_star)
    return -np.linalg.solve(M, controls.affine_b)


def bias_for_mean_target(controls: Controls, Sigma_star: Any, mu_target: Any, *,
                         allow_unstable: bool = False) -> np.ndarray:
    r"""The bias :math:`b` that puts the asymptotic mean at ``mu_target``.

    .. math::

        b = -\Big(A + \sum_h V_h + \sum_h V_h\Sigma^*B_h\Big)\,\mu_{\text{target}}

    (minus :math:`Wc` when the controls carry a feed-forward block, so that the total bias is
    right). The covariance equation does not involve :math:`b`, so :math:`\Sigma^*` is unchanged.
    The mean reaches the target only when the matrix is Hurwitz; otherwise the target is a fixed
    point that repels (or is not approached), and the bias is refused unless
    ``allow_unstable=True``.

    Returns
    -------
    (d,) array, to pass as ``Controls(..., b=...)``

    Raises
    ------
    ValueError
        The matrix is singular (the fixed point is not unique; as :func:`asymptotic_mean`), or not
        Hurwitz and ``allow_unstable`` is False, or bad input (naming the argument).
    """
    M = _solvable_mean_matrix(controls, Sigma_star)
    mu = check_vector(mu_target, "mu_target", controls.d)
    if not allow_unstable:
        abscissa = float(np.linalg.eigvals(M).real.max())
        if abscissa >= -1e-12 * max(1.0, float(np.abs(M).max())):
            raise ValueError(
                f"controls: A + V + V Sigma* B is not Hurwitz (largest real part {abscissa:.3g}), so the "
                "mean does not converge to mu_target; pass allow_unstable=True for the bias anyway")
    b = -M @ mu
    if controls.has_feedforward:
        b = b - controls.W @ controls.c
    return b
