r"""Constant controls: equilibria, linearised stability, finite-time blow-up, the asymptotic mean.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import expm, solve_continuous_lyapunov
from scipy.optimize import brentq

from ._progress import progress as progress_bar
from ._validation import as_float_array, check_covariance, check_matrix, check_positive, check_vector
from .controls import Controls
from .moments import integrate_moments, moment_rhs

__all__ = [
    "BlowupTime",
    "Equilibrium",
    "LinearStability",
    "NoEquilibriumError",
    "Regime",
    "RegimeMap",
    "asymptotic_mean",
    "bias_for_mean_target",
    "blowup_time",
    "classify",
    "closed_form_covariance",
    "critical_gain",
    "equilibrium",
    "linear_stability",
    "mean_matrix",
    "observe_regime",
    "regime_boundary",
    "regime_map",
    "riccati_gain",
    "rotating_controls",
]

VERDICTS = ("converges", "collapses to 0", "blows up", "undetermined")
_SCALAR_V_ATOL = 1e-14
_SPECTRUM_TOL = 1e-12


class NoEquilibriumError(ValueError):
    """No positive-definite equilibrium was found; the message says why."""


# ------------------------------------------------------------------------------- validation
def _check_controls(controls: Any, name: str = "controls", d: int | None = None) -> Controls:
    if not isinstance(controls, Controls):
        raise ValueError(f"{name} must be constant Controls (time-invariant parameters), "
                         f"got {type(controls).__name__}")
    if d is not None and controls.d != d:
        raise ValueError(f"{name} act on dimension d={controls.d}, but the covariance has d={d}")
    return controls


def _check_pd(Sigma: Any, name: str, d: int) -> np.ndarray:
    S = check_covariance(Sigma, name, d)
    if np.linalg.eigvalsh(S)[0] <= 0:
        raise ValueError(f"{name} must be positive definite")
    return S


# --------------------------------------------------------------------------- the equation
def _F(controls: Controls, Sigma: np.ndarray) -> np.ndarray:
    M = controls.affine_A + controls.attention_drift(Sigma)
    MS = M @ Sigma
    return MS + MS.T


def _residual_scale(controls: Controls, Sigma: np.ndarray) -> float:
    AS = controls.affine_A @ Sigma
    quad = sum(np.linalg.norm(V @ Sigma @ B @ Sigma) for V, B in zip(controls.V, controls.B))
    return 2.0 * (np.linalg.norm(AS) + quad)


def _dF(controls: Controls, Sigma: np.ndarray, H: np.ndarray) -> np.ndarray:
    r"""Fréchet derivative :math:`DF(\Sigma)[H]` on symmetric :math:`H`."""
    M = controls.affine_A + controls.attention_drift(Sigma)
    X = M @ H + (controls.V @ H @ controls.B @ Sigma).sum(axis=0)
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


def _scalar_values(controls: Controls) -> np.ndarray | None:
    """``v_h`` when every ``V_h = v_h I`` (to 1e-14 relative), else None."""
    d = controls.d
    v = np.trace(controls.V, axis1=1, axis2=2) / d
    scale = max(1.0, float(np.abs(controls.V).max()))
    if np.all(np.abs(controls.V - v[:, None, None] * np.eye(d)) <= _SCALAR_V_ATOL * scale):
        return v
    return None


def riccati_gain(controls: Controls) -> np.ndarray | None:
    r"""The symmetric matrix :math:`Q = \sum_h v_h (B_h + B_h^\top)` when every :math:`V_h = v_h I`.

    Then :math:`\Sigma' = A\Sigma + \Sigma A^\top + \Sigma Q \Sigma` and :math:`P = \Sigma^{-1}`
    solves :math:`P' = -(PA + A^\top P) - Q`. Returns None when some :math:`V_h` is not a
    multiple of the identity (no linearising substitution is used then).
    """
    controls = _check_controls(controls)
    v = _scalar_values(controls)
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


def _lyapunov_P(A: np.ndarray, Q: np.ndarray) -> np.ndarray | None:
    r"""The unique :math:`P` with :math:`PA + A^\top P = -Q`, or None when it is not unique."""
    lam = np.linalg.eigvals(A)
    sums = np.abs(lam[:, None] + lam[None, :])
    if sums.min() <= 1e-10 * max(1.0, float(np.abs(lam).max())):
        return None
    P = solve_continuous_lyapunov(A.T, -Q)
    return 0.5 * (P + P.T)


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


def equilibrium(controls: Controls, Sigma_guess: Any = None, *, tol: float = 1e-13,
                max_iter: int = 60) -> Equilibrium:
    r"""A positive-definite equilibrium :math:`\Sigma^*` of the covariance equation.

    .. math::

        A\Sigma^* + \Sigma^* A^\top + \sum_h \big(V_h \Sigma^* B_h \Sigma^*
            + \Sigma^* B_h^\top \Sigma^* V_h^\top\big) = 0, \qquad \Sigma^* \succ 0.

    When every :math:`V_h = v_h I` (and ``Sigma_guess`` is not given) the closed form is used:
    :math:`P^* = (\Sigma^*)^{-1}` solves the Lyapunov equation
    :math:`P^*A + A^\top P^* = -\sum_h v_h(B_h + B_h^\top)` (``scipy.linalg``). If that equation
    has a unique solution which is not positive definite, no positive-definite equilibrium exists.
    Otherwise damped Newton's method on the symmetric matrices (quadratic convergence near a
    solution with invertible linearisation), started from ``Sigma_guess`` or, by default, from the
    closed form for the scalar parts :math:`\operatorname{tr}(V_h)/d`, the end point of the ODE
    from :math:`I`, and multiples of :math:`I`.

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
    d = controls.d
    A = controls.affine_A
    if Sigma_guess is not None:
        guesses = [("Sigma_guess", _check_pd(Sigma_guess, "Sigma_guess", d))]
    else:
        Q = riccati_gain(controls)
        if Q is not None:
            P = _lyapunov_P(A, Q)
            if P is not None:
                w = np.linalg.eigvalsh(P)
                if w[0] <= 0:
                    raise NoEquilibriumError(
                        "no positive-definite equilibrium: with V_h = v_h I, Sigma* = P*^-1 where "
                        "P* A + A^T P* = -sum_h v_h (B_h + B_h^T) has the unique solution P*, whose "
                        f"smallest eigenvalue is {w[0]:.3e} <= 0 (Q = sum_h v_h(B_h + B_h^T) is "
                        f"{_definiteness(Q)}, {_fmt_spec(np.linalg.eigvals(A))})"
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
    failures = []
    for label, S0 in guesses:
        S, k, why = _newton(controls, S0, tol, max_iter)
        if S is None:
            failures.append(f"from {label}: {why}")
            continue
        S = 0.5 * (S + S.T)
        lmin = np.linalg.eigvalsh(S)[0]
        if lmin <= 1e-12 * np.linalg.norm(S):
            failures.append(f"from {label}: converged to a matrix that is not positive definite "
                            f"(smallest eigenvalue {lmin:.3e})")
            continue
        return _certify(controls, S, "Newton", k)
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


# ------------------------------------------------------------------------------ blow-up
@dataclass(frozen=True)
class BlowupTime:
    r"""A predicted blow-up time and how it was obtained.

    Attributes
    ----------
    t_star : float
        The blow-up time, ``inf`` when there is none.
    method : "closed form (d = 1)", "closed form (V = vI)" or "numerical"
    reason : one sentence: why it blows up, or why it does not (proved, or only up to ``t_max``)
    proved : whether ``t_star = inf`` is proved (always True for finite closed forms)
    """

    t_star: float
    method: str
    reason: str
    proved: bool = True

    def __float__(self) -> float:
        return float(self.t_star)


def _sqrt_psd(S: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(S)
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


class _RiccatiKernel:
    r"""Exact :math:`Y(t)` and :math:`g(t) = \lambda_{\min}(I - KY(t)K)` for :math:`V_h = v_hI`."""

    def __init__(self, A: np.ndarray, Q: np.ndarray, Sigma0: np.ndarray) -> None:
        d = A.shape[0]
        self.A, self.Q, self.d = A, Q, d
        self.K = _sqrt_psd(Sigma0)
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
            check = integrate_moments(np.zeros(d), Sigma0, controls, (0.0, t_star * (1 + 1e-3) + 1e-9),
                                      blowup_norm=1e8 * max(float(np.linalg.norm(Sigma0)), 1.0))
            if check.status != "blowup" or abs(check.blowup_time - t_star) > 1e-4 * t_star:
                return _blowup_numerical(Sigma0, controls, horizon,
                                         note=f"candidate zero t = {t_star:.6g} of g not confirmed by "
                                              "integrate_moments")
            return BlowupTime(t_star, method, f"Q indefinite ({_fmt_spec(lam)}): first zero of "
                              f"lambda_min(I - K Y(t) K), scanned with step {h:.3g}, confirmed by "
                              "integrate_moments")
    return BlowupTime(math.inf, method, f"Q indefinite: g(t) > 0 on a grid of step {h:.3g} up to "
                      f"t_max = {horizon:.3g} (not proved beyond)", proved=False)


def _blowup_numerical(Sigma0: np.ndarray, controls: Controls, t_max: float, note: str = "") -> BlowupTime:
    d = controls.d
    prefix = f"{note}; " if note else ""
    norm0 = max(float(np.linalg.norm(Sigma0)), 1e-300)
    traj = integrate_moments(np.zeros(d), Sigma0, controls, (0.0, t_max), blowup_norm=1e8 * max(norm0, 1.0))
    if traj.status != "blowup":
        return BlowupTime(math.inf, "numerical", f"{prefix}no blow-up on [0, {t_max:.3g}] (integrate_moments, "
                          f"status {traj.status}; not proved beyond)", proved=False)
    t_e, S = traj.blowup_time, traj.Sigma[-1]
    _, dS = moment_rhs(np.zeros(d), S, controls)
    N = np.linalg.norm(S)
    dN = float(np.sum(S * dS)) / N
    # near a pole ||Sigma|| ~ c / (t* - t): t* = t_e + N / N' + O((t* - t_e)^2)
    return BlowupTime(t_e + N / dN, "numerical", f"{prefix}integrate_moments (DOP853) to ||Sigma||_F = 1e8, "
                      "then the pole correction t* = t_e + ||Sigma|| / (d/dt ||Sigma||)")


def blowup_time(Sigma0: Any, controls: Controls, *, t_max: float | None = None,
                method: str = "auto") -> BlowupTime:
    r"""The finite time :math:`t^*` at which :math:`\Sigma(t)` blows up, or ``inf``.

    Closed form when :math:`d = 1`,

    .. math::

        \sigma' = 2a\sigma + q\sigma^2, \qquad
        t^* = \frac{\log\big(1 + 2a/(q\sigma_0)\big)}{2a} \quad (q = 2\textstyle\sum_h v_h\beta_h > 0,\ 
        1 + 2a/(q\sigma_0) > 0),

    and when every :math:`V_h = v_h I`: the first zero of
    :math:`\lambda_{\min}(I - KY(t)K)` (see the module docstring; equal to the first zero of
    :math:`\lambda_{\min}(P(t))`, :math:`P = \Sigma^{-1}`), located with Brent's method to
    machine precision on the exact augmented exponential. Otherwise numerical:
    :func:`gtcore.integrate_moments` up to :math:`\|\Sigma\|_F = 10^8`, then the pole correction
    :math:`t^* \approx t_e + \|\Sigma\|/\tfrac{d}{dt}\|\Sigma\|`.

    Parameters
    ----------
    Sigma0 : (d, d) symmetric positive semidefinite array (rank-deficient allowed)
    controls : Controls (time-invariant)
    t_max : float, optional
        Search horizon where no certificate is available (default 100, or longer when :math:`A` is
        Hurwitz).
    method : "auto", "closed form" or "numerical"

    Returns
    -------
    BlowupTime
        ``t_star`` (``float(result)`` works), ``method`` used and ``reason``.
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    if t_max is not None:
        t_max = check_positive(t_max, "t_max")
    if method not in ("auto", "closed form", "numerical"):
        raise ValueError(f"method must be 'auto', 'closed form' or 'numerical', got {method!r}")
    Q = riccati_gain(controls)
    if method == "closed form" and Q is None:
        raise ValueError("method='closed form' needs every V_h = v_h I")
    if Q is not None and method != "numerical":
        return _blowup_closed_form(S0, controls, Q, t_max)
    return _blowup_numerical(S0, controls, t_max if t_max is not None else _default_t_max(controls.affine_A))


def closed_form_covariance(Sigma0: Any, controls: Controls, t: Any) -> np.ndarray:
    r"""The exact :math:`\Sigma(t) = e^{At}K(I - KY(t)K)^{-1}Ke^{A^\top t}` when every :math:`V_h = v_hI`.

    Parameters
    ----------
    Sigma0 : (d, d) symmetric positive semidefinite array
    controls : Controls with every ``V_h`` a multiple of the identity
    t : float or (n,) array of times in :math:`[0, t^*)`

    Returns
    -------
    (n, d, d) array (``n = 1`` for a scalar ``t``), exactly symmetric

    Raises
    ------
    ValueError
        Some ``V_h`` is not a multiple of ``I``, or a time is negative or not before the blow-up.
    """
    controls = _check_controls(controls)
    S0 = check_covariance(Sigma0, "Sigma0", controls.d)
    Q = riccati_gain(controls)
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


def critical_gain(A: Any, B: Any, Sigma0: Any) -> float:
    r"""For Hurwitz :math:`A` and :math:`V = vI`, the smallest :math:`v > 0` that blows up from :math:`\Sigma_0`.

    .. math::

        v_c = \frac{1}{\lambda_{\max}(K Y_\infty K)}, \qquad
        A^\top Y_\infty + Y_\infty A = -(B + B^\top), \quad K = \Sigma_0^{1/2}:

    for :math:`0 < v < v_c` the covariance collapses to 0, for :math:`v > v_c` it blows up in
    finite time. ``inf`` when :math:`\lambda_{\max}(KY_\infty K) \le 0`.

    Raises
    ------
    ValueError
        ``A`` is not Hurwitz, or bad shapes, naming the argument.
    """
    A = check_matrix(A, "A")
    d = A.shape[0]
    B = check_matrix(B, "B", d)
    S0 = check_covariance(Sigma0, "Sigma0", d)
    if _spectrum_class(A)[0] != "Hurwitz":
        raise ValueError("A must be Hurwitz (every eigenvalue with negative real part)")
    Y = solve_continuous_lyapunov(A.T, -(B + B.T))
    K = _sqrt_psd(S0)
    lmax = float(np.linalg.eigvalsh(K @ (0.5 * (Y + Y.T)) @ K)[-1])
    return 1.0 / lmax if lmax > 0 else math.inf


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
    method : "closed form" (:math:`V_h = v_hI`) or "numerical"
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
    d = controls.d
    A = controls.affine_A
    desc = _describe(controls)
    Q = riccati_gain(controls)
    if Q is None:
        return _classify_numerical(controls, S0, t_max, desc)
    bt = _blowup_closed_form(S0, controls, Q, t_max)
    qd = _definiteness(Q)
    if math.isfinite(bt.t_star):
        return Regime("blows up", f"{desc}; Q = sum v_h(B_h + B_h^T) {qd}: {bt.reason}",
                      t_star=bt.t_star)
    cls, lam = _spectrum_class(A)
    full_rank = np.linalg.eigvalsh(S0)[0] > 1e-12 * max(np.linalg.norm(S0), 1e-300)
    if cls == "anti-stable":
        if not full_rank:
            return Regime("undetermined", f"{desc}; rank(Sigma0) < d is invariant, so there is no "
                          "positive-definite limit")
        P = _lyapunov_P(A, Q)
        w = np.linalg.eigvalsh(P)
        if w[0] > 0:
            S = np.linalg.inv(P)
            return Regime("converges", f"{desc}; Q {qd}: A anti-stable, so P(t) = Sigma(t)^-1 -> P* "
                          f"at rate 2 min Re spec(A) = {2 * lam.real.min():.3g}, and P* > 0 "
                          f"(lambda_min {w[0]:.3g})", Sigma_star=0.5 * (S + S.T))
        return Regime("undetermined", f"{desc}; A anti-stable but the limit P* is singular "
                      f"(lambda_min {w[0]:.3g}): Sigma grows without bound")
    if cls == "Hurwitz":
        ker = _RiccatiKernel(A, Q, S0)
        Y_inf = solve_continuous_lyapunov(A.T, -Q)
        g_inf = ker.g_of(0.5 * (Y_inf + Y_inf.T))
        if g_inf > 1e-12:
            return Regime("collapses to 0", f"{desc}; Q {qd}: A Hurwitz and I - K Y_inf K > 0 "
                          f"(lambda_min {g_inf:.3g}), so Sigma(t) -> 0 like e^(2 max Re spec(A) t) "
                          f"= e^({2 * lam.real.max():.3g} t)")
        return Regime("undetermined", f"{desc}; A Hurwitz and I - K Y_inf K is singular "
                      f"(lambda_min {g_inf:.3g}): the boundary between collapse and blow-up")
    return Regime("undetermined", f"{desc}; Q {qd}: spectrum of A on both sides of or on the "
                  f"imaginary axis, no blow-up found ({bt.reason})")


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
    if traj.status == "blowup":
        return "blows up"
    S = traj.Sigma[-1]
    nS = float(np.linalg.norm(S))
    if nS <= collapse_tol * n0:
        return "collapses to 0"
    if (np.linalg.norm(_F(controls, S)) <= settle_tol * nS
            and np.linalg.eigvalsh(S)[0] > settle_tol * nS):
        return "converges"
    return "undetermined"


@dataclass
class RegimeMap:
    """Theory against observation on a 2-D parameter grid.

    Attributes
    ----------
    xs, ys : the grid axes; ``theory[i, j]`` and ``observed[i, j]`` belong to ``(xs[j], ys[i])``
    theory, observed : (len(ys), len(xs)) arrays of verdict strings
    agreement : fraction of grid points where they agree
    disagreements : list of (x, y, theory, observed)
    """

    xs: np.ndarray
    ys: np.ndarray
    theory: np.ndarray
    observed: np.ndarray
    agreement: float
    disagreements: list = field(default_factory=list)


def regime_map(make_controls: Callable[[float, float], Controls], xs: Sequence[float],
               ys: Sequence[float], Sigma0: Any, t_max: float, *, progress: bool = True) -> RegimeMap:
    r"""Classify every :math:`(x, y)` of a grid by :func:`classify` (theory) and
    :func:`observe_regime` (integration to ``t_max``), and compare.

    Parameters
    ----------
    make_controls : callable ``(x, y) -> Controls``
    xs, ys : 1-D sequences of grid values
    Sigma0 : initial covariance
    t_max : integration horizon of the observation
    progress : show a tqdm progress bar

    Returns
    -------
    RegimeMap
    """
    xs = check_vector(xs, "xs")
    ys = check_vector(ys, "ys")
    t_max = check_positive(t_max, "t_max")
    if not callable(make_controls):
        raise ValueError("make_controls must be a callable (x, y) -> Controls")
    theory = np.empty((ys.size, xs.size), dtype=object)
    observed = np.empty_like(theory)
    cells = [(i, j) for i in range(ys.size) for j in range(xs.size)]
    for i, j in progress_bar(cells, "regime map", enabled=progress):
        c = make_controls(float(xs[j]), float(ys[i]))
        theory[i, j] = classify(c, Sigma0, t_max=t_max).verdict
        observed[i, j] = observe_regime(c, Sigma0, t_max)
    agree = theory == observed
    dis = [(float(xs[j]), float(ys[i]), theory[i, j], observed[i, j])
           for i, j in zip(*np.nonzero(~agree))]
    return RegimeMap(xs=xs, ys=ys, theory=theory, observed=observed,
                     agreement=float(agree.mean()), disagreements=dis)


# ------------------------------------------------------------------------------ the mean
def mean_matrix(controls: Controls, Sigma_star: Any) -> np.ndarray:
    r""":math:`A + \sum_h V_h + \sum_h V_h\Sigma^*B_h`: the mean's linear drift at :math:`\Sigma^*`.

    The mean converges to :func:`asymptotic_mean` iff this matrix is Hurwitz. Since
    :math:`M^* = A + \sum_h V_h\Sigma^*B_h` has purely imaginary spectrum at an equilibrium,
    for :math:`V = vI` its eigenvalues are :math:`v + i\omega`: the rate is :math:`v`.
    """
    controls = _check_controls(controls)
    S = check_covariance(Sigma_star, "Sigma_star", controls.d)
    return controls.affine_A + controls.V.sum(axis=0) + controls.attention_drift(S)


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
    M = mean_matrix(controls, Sigma_star)
    if np.linalg.cond(M) > 1e12:
        raise ValueError("Sigma_star: A + V + V Sigma* B is singular, the asymptotic mean is not unique")
    return -np.linalg.solve(M, controls.affine_b)


def bias_for_mean_target(controls: Controls, Sigma_star: Any, mu_target: Any) -> np.ndarray:
    r"""The bias :math:`b` that puts the asymptotic mean at ``mu_target``.

    .. math::

        b = -\Big(A + \sum_h V_h + \sum_h V_h\Sigma^*B_h\Big)\,\mu_{\text{target}}

    (minus :math:`Wc` when the controls carry a feed-forward block, so that the total bias is
    right). The covariance equation does not involve :math:`b`, so :math:`\Sigma^*` is unchanged.

    Returns
    -------
    (d,) array, to pass as ``Controls(..., b=...)``
    """
    M = mean_matrix(controls, Sigma_star)
    mu = check_vector(mu_target, "mu_target", controls.d)
    b = -M @ mu
    if controls.has_feedforward:
        b = b - controls.W @ controls.c
    return b


# ------------------------------------------------------------------- the planar family
_J = np.array([[0.0, -1.0], [1.0, 0.0]])


def rotating_controls(a: float, v: float, B: Any, *, omega: float = 0.0, b: Any = None) -> Controls:
    r"""The planar family :math:`A = aI + \omega J` (:math:`J` the rotation generator), :math:`V = vI`.

    :math:`\operatorname{spec}(A) = a \pm i\omega`: Hurwitz for :math:`a < 0`, anti-stable for
    :math:`a > 0`. With :math:`B + B^\top \succ 0`, :math:`v < 0` is opposite definiteness and
    :math:`v > 0` the same.
    """
    B = check_matrix(B, "B", 2)
    return Controls(A=float(a) * np.eye(2) + float(omega) * _J, V=float(v) * np.eye(2), B=B, b=b)


def regime_boundary(a_values: Any, B: Any, Sigma0: Any, *, omega: float = 0.0) -> dict:
    r"""The theory's boundary of the planar family in the :math:`(a, v)` plane.

    For :math:`a > 0` it is :math:`v = 0` (converges below, blows up above); for :math:`a < 0`
    it is the curve :math:`v = v_c(a)` of :func:`critical_gain` (collapse below, blow-up above);
    and :math:`a = 0` for :math:`v < 0` (collapse left, convergence right).

    Returns
    -------
    dict with ``a_curve`` (the negative ``a_values``) and ``v_curve`` (:math:`v_c` there)
    """
    a_values = check_vector(a_values, "a_values")
    a_neg = a_values[a_values < 0]
    v_c = np.array([critical_gain(a * np.eye(2) + omega * _J, B, Sigma0) for a in a_neg])
    return {"a_curve": a_neg, "v_curve": v_c}
