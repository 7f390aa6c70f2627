r"""The :math:`V = vI` precision equation of :mod:`gtcore.riccati`, solved exactly, and the spectral classes its
searches branch on.

``riccati_quadratic`` gives the constant :math:`Q` of :math:`\Sigma' = A\Sigma + \Sigma A^\top + \Sigma Q\Sigma`
(through the attention type), and ``_RiccatiKernel`` the exact :math:`Y(t) = \int_0^t e^{A^\top s}Qe^{As}ds`
(one Van Loan exponential) with :math:`g(t) = \lambda_{\min}(I - KY(t)K)`, :math:`K = \Sigma_0^{1/2}`, whose
first zero is the blow-up time. Used by :mod:`gtcore.riccati` (blow-up), :mod:`gtcore.riccati_gain` (the
critical gain) and :mod:`gtcore.stability`; the public names are re-exported by :mod:`gtcore.riccati`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.linalg import expm, solve_continuous_lyapunov
from scipy.optimize import brentq

from gtcore._linalg import psd_sqrt
from gtcore.attention import attention_of
from gtcore.controls import Controls

__all__ = ["riccati_quadratic"]

_SPECTRUM_TOL = 1e-12


# ------------------------------------------------------------------------------- validation
def _check_controls(controls: Any, name: str = "controls", d: int | None = None) -> Controls:
    if not isinstance(controls, Controls):
        raise ValueError(f"{name} must be constant Controls (time-invariant parameters), got {type(controls).__name__}")
    if d is not None and controls.d != d:
        raise ValueError(f"{name} act on dimension d={controls.d}, but the covariance has d={d}")
    return controls


# ------------------------------------------------------------------- V = vI: the precision equation
def riccati_quadratic(controls: Controls) -> np.ndarray | None:
    r"""The quadratic coefficient :math:`Q = \sum_h v_h (B_h + B_h^\top)` of the Riccati equation, when every
    :math:`V_h = v_h I`.

    Then :math:`\Sigma' = A\Sigma + \Sigma A^\top + \Sigma Q \Sigma` and :math:`P = \Sigma^{-1}`
    solves :math:`P' = -(PA + A^\top P) - Q`. The coefficient is the attention type's
    (:meth:`~gtcore.attention.AttentionType.riccati_quadratic`, an optional method that only the dot product
    has); None when some :math:`V_h` is not a multiple of the identity, or for a type without the linearising
    substitution.

    Parameters
    ----------
    controls : Controls
        One layer's parameters.

    Returns
    -------
    (d, d) ndarray or None
        :math:`Q`, exactly symmetric; None outside the linearisable case.

    Examples
    --------
    >>> from gtcore import Controls, riccati_quadratic
    >>> riccati_quadratic(Controls(V=0.5 * np.eye(2), B=[[1.0, 2.0], [0.0, 1.0]]))
    array([[1., 1.],
           [1., 1.]])
    >>> riccati_quadratic(Controls(V=np.diag([1.0, 2.0]), B=np.eye(2))) is None
    True
    """
    controls = _check_controls(controls)
    att = attention_of(controls)
    return att.riccati_quadratic(controls.V, att.params(controls))


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
