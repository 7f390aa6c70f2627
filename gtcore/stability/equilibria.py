r"""Equilibria of the covariance equation with constant controls, and their linear stability."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._linalg import symmetric_basis
from gtcore._repr import short_repr
from gtcore._validation import (
    check_count,
    check_covariance,
    check_positive,
)
from gtcore.attention import attention_of, gaussian_velocity
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.riccati import (
    _check_controls,
    _definiteness,
    _fmt_spec,
    _lyapunov_P,
    riccati_quadratic,
)
from gtcore.status import Stability, Status

__all__ = [
    "ROOT_UNCERTAINTY_RATIO",
    "Equilibrium",
    "LinearStability",
    "NoEquilibriumError",
    "equilibrium",
    "linear_stability",
]


class NoEquilibriumError(ValueError):
    """No positive-definite equilibrium was found; the message says why.

    Examples
    --------
    >>> from gtcore import Controls, NoEquilibriumError, equilibrium
    >>> try:
    ...     equilibrium(Controls(A=-np.eye(2), V=-np.eye(2), B=np.eye(2)))
    ... except NoEquilibriumError as err:
    ...     print(type(err).__name__)
    ...
    NoEquilibriumError
    """


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
    basis = symmetric_basis(Sigma.shape[0])
    return np.stack([_sym_coords(_dF(controls, Sigma, E)) for E in basis], axis=1)


# ----------------------------------------------------------------------------- equilibrium
@dataclass(frozen=True)
class Equilibrium:
    r"""A positive-definite solution of :math:`F(\Sigma^*) = 0`, with its certificate.

    Attributes
    ----------
    Sigma : (d, d) ndarray
        :math:`\Sigma^*`, symmetric positive definite.
    residual : float
        :math:`\|F(\Sigma^*)\|_F`.
    relative_residual : float
        ``residual`` divided by the sum of the norms of the terms of :math:`F`.
    method : str
        ``"closed form (Lyapunov)"`` or ``"Newton"``.
    iterations : int
        Newton iterations (0 for the closed form).

    Examples
    --------
    >>> from gtcore import Controls, equilibrium
    >>> eq = equilibrium(Controls(A=0.5 * np.eye(1), V=-np.eye(1), B=np.eye(1)))
    >>> round(float(eq.Sigma[0, 0]), 9), bool(eq.relative_residual < 1e-12)  # 2 a sigma = 2 sigma^2
    (0.5, True)
    """

    Sigma: np.ndarray
    residual: float
    relative_residual: float
    method: str
    iterations: int

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def _certify(controls: Controls, Sigma: np.ndarray, method: str, iterations: int) -> Equilibrium:
    R = _F(controls, Sigma)
    res = float(np.linalg.norm(R))
    scale = _residual_scale(controls, Sigma)
    return Equilibrium(
        Sigma=Sigma,
        residual=res,
        relative_residual=res / scale if scale > 0 else res,
        method=method,
        iterations=iterations,
    )


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
    return False, (
        f"the limit is not certified positive definite: smallest eigenvalue {lmin:.3e} against "
        f"a distance {delta:.3e} to the exact root (first order, with round-off); the iterates "
        "approach a singular solution"
    )


def equilibrium(controls: Controls, Sigma_guess: Any = None, *, tol: float = 1e-13, max_iter: int = 60) -> Equilibrium:
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
    definite, with a factor :data:`~gtcore.stability.equilibria.ROOT_UNCERTAINTY_RATIO` to spare:
    :math:`\lambda_{\min}(\Sigma^*) > 10^3\,\delta`. Near a singular root :math:`\delta` is of the order of
    :math:`\|\Sigma\|`.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters (a feed-forward block enters through ``affine_A``).
    Sigma_guess : (d, d) symmetric positive-definite array, optional
        A starting point for Newton's method, tried first.
    tol : float
        Newton stops when :math:`\|F(\Sigma)\|_F \le \text{tol}` times the size of the terms.
    max_iter : int
        Newton iterations from each start.

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

    Examples
    --------
    >>> from gtcore import Controls, equilibrium
    >>> eq = equilibrium(Controls(A=np.eye(2), V=-np.eye(2), B=np.eye(2)))
    >>> np.round(eq.Sigma, 9)
    array([[1., 0.],
           [0., 1.]])
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
    if traj.status is Status.COMPLETED and np.linalg.eigvalsh(S_end)[0] > 1e-6 * np.linalg.norm(S_end):
        guesses.append(("ODE end point from I at t = 50", S_end))
    guesses += [(f"{c:g} I", c * np.eye(d)) for c in (1.0, 0.1, 10.0)]
    for label, S0 in guesses:
        eq = newton_from(label, S0)
        if eq is not None:
            return eq
    raise NoEquilibriumError("no positive-definite equilibrium found by Newton's method: " + "; ".join(failures))


# ------------------------------------------------------------------------ linear stability
@dataclass(frozen=True)
class LinearStability:
    r"""Spectrum of the covariance equation linearised at an equilibrium, on symmetric matrices.

    Attributes
    ----------
    eigenvalues : (d(d+1)/2,) complex ndarray
        Sorted by decreasing real part.
    max_real : float
        The largest real part (the spectral abscissa).
    verdict : Stability
        :class:`~gtcore.status.Stability`: ``STABLE`` (``max_real < 0``), ``UNSTABLE`` (``> 0``) or
        ``MARGINAL`` (0 within :math:`10^{-10}` relative).

    Examples
    --------
    >>> from gtcore import Controls, linear_stability
    >>> ls = linear_stability(Controls(A=np.eye(1), V=-np.eye(1), B=np.eye(1)), np.eye(1))
    >>> round(ls.max_real, 9)
    -2.0
    """

    eigenvalues: np.ndarray
    max_real: float
    verdict: Stability

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


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
        Time-invariant parameters.
    Sigma_star : (d, d) array
        The equilibrium (symmetric positive semidefinite).

    Returns
    -------
    LinearStability
        The eigenvalues of the linearisation, the spectral abscissa and the verdict.

    Examples
    --------
    >>> from gtcore import Controls, linear_stability
    >>> ls = linear_stability(Controls(A=np.eye(1), V=-np.eye(1), B=np.eye(1)), np.eye(1))
    >>> ls.verdict, np.round(ls.eigenvalues.real, 9)  # d/dsigma (2 sigma - 2 sigma^2) = -2 at sigma* = 1
    (<Stability.STABLE: 'stable'>, array([-2.]))
    """
    controls = _check_controls(controls)
    S = check_covariance(Sigma_star, "Sigma_star", controls.d)
    lam = np.linalg.eigvals(_jacobian(controls, S))
    lam = lam[np.argsort(-lam.real, kind="stable")]
    m = float(lam.real.max())
    s = 1e-10 * max(1.0, float(np.abs(lam).max()))
    verdict = Stability.STABLE if m < -s else (Stability.UNSTABLE if m > s else Stability.MARGINAL)
    return LinearStability(eigenvalues=lam, max_real=m, verdict=verdict)
