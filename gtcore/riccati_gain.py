r"""The critical gain of :math:`V = vI` (:mod:`gtcore.riccati`'s closed forms): the threshold between collapse and
blow-up, by formula for :math:`B + B^\top \succeq 0` and exactly for any :math:`B`. Re-exported by
:mod:`gtcore.riccati`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov
from scipy.optimize import minimize_scalar

from gtcore._linalg import psd_sqrt
from gtcore._repr import short_repr
from gtcore._validation import check_count, check_covariance, check_matrix, check_positive
from gtcore.riccati_kernel import _default_t_max, _definiteness, _RiccatiKernel, _spectrum_class

__all__ = ["GainThreshold", "critical_gain", "gain_threshold"]


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

    Examples
    --------
    >>> from gtcore import critical_gain
    >>> critical_gain(-np.eye(2), np.eye(2), np.eye(2))
    1.0
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
        raise ValueError(
            f"B: the critical gain v_c = 1/lambda_max(K Y_inf K) needs B + B^T positive "
            f"semidefinite, but B + B^T has eigenvalues in [{w[0]:.3g}, {w[-1]:.3g}]; with an "
            "indefinite B + B^T a transient can blow up below that value"
        )
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

    Examples
    --------
    >>> from gtcore import gain_threshold
    >>> g = gain_threshold(-np.eye(1), np.eye(1), 2.0 * np.eye(1))
    >>> round(g.limit, 9), round(g.threshold, 9)
    (2.0, 0.5)
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

    Examples
    --------
    >>> from gtcore import gain_threshold
    >>> g = gain_threshold(-np.eye(2), np.eye(2), np.eye(2))
    >>> round(g.threshold, 9), g.formula
    (1.0, 1.0)
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
        best = minimize_scalar(
            lambda t: -lam(ker.parts(t)[1]),
            bounds=(max(k - 1, 0) * h, min(k + 1, n_grid) * h),
            method="bounded",
            options={"xatol": 1e-10},
        )
        peak, t_peak = (-float(best.fun), float(best.x)) if -best.fun >= values[k] else (float(values[k]), k * h)
    return GainThreshold(
        threshold=1.0 / peak if peak > 0 else math.inf,
        peak=peak,
        t_peak=t_peak,
        limit=limit,
        formula=1.0 / limit if limit > 0 else math.inf,
    )
