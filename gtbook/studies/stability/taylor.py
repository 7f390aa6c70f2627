r"""An independent, high-precision Taylor integrator of the covariance equation, and the poles it locates.

The covariance equation of eq. (1.1) with constant parameters is quadratic,

.. math::

    \Sigma' = A\Sigma + \Sigma A^\top + \sum_h \big(V_h\Sigma B_h\Sigma + \Sigma B_h^\top\Sigma V_h^\top\big),

so the Taylor coefficients :math:`S_n` of :math:`\Sigma(t_0 + s) = \sum_n S_n s^n` follow exactly from the
Cauchy product,

.. math::

    (n + 1)\,S_{n+1} = A S_n + C_n + (A S_n + C_n)^\top, \qquad
    C_n = \sum_h V_h \sum_{k=0}^{n} S_k B_h S_{n-k}

(the two quadratic terms are each other's transposes once summed over :math:`k`). This module computes
them in decimal arithmetic (Python's ``decimal`` module, correctly rounded at 30 significant digits by default;
an order of magnitude faster here than ``mpmath``'s pure-Python numbers, and as exact) and steps by a
fraction of the radius of convergence, estimated from the coefficients, :math:`\rho \approx
(\|S_{n-m}\|/\|S_n\|)^{1/m}`. Near a
pole at :math:`t^*` the radius is the distance to it, so the steps shrink geometrically and
:math:`t^* = t_k + \rho_k` once :math:`\rho_k` is tiny (:func:`pole_time_hp`).

Nothing here calls the library's integrator, right-hand side, closed forms or pole certificates: it is the
independent side of the blow-up-time checks (:func:`gtcore.riccati.blowup_time` against it) and of the
confirmation of blow-up counterexamples.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np

__all__ = ["HpPole", "pole_time_hp", "taylor_coefficients"]


def _dec_matrix(X: Any) -> np.ndarray:
    """A float array as an object array of :class:`~decimal.Decimal` (exactly: every float is a Decimal)."""
    arr = np.asarray(X, dtype=float)
    out = np.empty(arr.shape, dtype=object)
    for idx, x in np.ndenumerate(arr):
        out[idx] = Decimal(float(x))
    return out


def _norm(X: np.ndarray) -> Decimal:
    """Frobenius norm of an object array of Decimals."""
    return sum((x * x for x in X.ravel()), Decimal(0)).sqrt()


def taylor_coefficients(
    A: np.ndarray, Vs: list[np.ndarray], Bs: list[np.ndarray], S0: np.ndarray, order: int
) -> list[np.ndarray]:
    r"""The Taylor coefficients :math:`S_0, \dots, S_{\text{order}}` of :math:`\Sigma(t_0 + s)` (module docstring).

    Parameters
    ----------
    A : (d, d) object array of Decimal
        The linear part (with a feed-forward block already folded in by the caller).
    Vs, Bs : lists of (d, d) object arrays of Decimal
        The heads' value and query-key matrices.
    S0 : (d, d) object array of Decimal
        :math:`\Sigma(t_0)`.
    order : int
        The highest coefficient.

    Returns
    -------
    list of (d, d) object arrays
        ``order + 1`` coefficients.
    """
    S = [S0]
    SB: list[list[np.ndarray]] = [[] for _ in Bs]  # S_k B_h, formed once per k
    for n in range(order):
        M = A.dot(S[n])
        for h, (V, B) in enumerate(zip(Vs, Bs, strict=True)):
            SB[h].append(S[n].dot(B))
            acc = SB[h][0].dot(S[n])
            for k in range(1, n + 1):
                acc = acc + SB[h][k].dot(S[n - k])
            M = M + V.dot(acc)
        S.append((M + M.T) / (n + 1))
    return S


@dataclass(frozen=True)
class HpPole:
    r"""Where the Taylor integrator locates the pole of :math:`\Sigma(t)`.

    Attributes
    ----------
    t_star : float
        :math:`t_k + \rho_k` at the last step (``inf`` when no pole was found before ``t_max``).
    radius : float
        The last radius :math:`\rho_k` (the distance to the pole when one was found).
    steps : int
        Taylor steps taken.
    norm : float
        :math:`\|\Sigma(t_k)\|_F` at the last step.
    """

    t_star: float
    radius: float
    steps: int
    norm: float

    def __repr__(self) -> str:
        return f"HpPole(t_star={self.t_star:.15g}, radius={self.radius:.2e}, steps={self.steps})"


def _radius(S: list[np.ndarray], span: int) -> Decimal:
    """:math:`(\\|S_{n-m}\\|/\\|S_n\\|)^{1/m}` with :math:`m` = ``span``, from the last coefficients."""
    n = len(S) - 1
    hi, lo = _norm(S[n]), _norm(S[n - span])
    if hi == 0:
        return Decimal("Infinity")
    return (lo / hi) ** (Decimal(1) / span)


def pole_time_hp(
    Sigma0: Any,
    A: Any,
    V: Any,
    B: Any,
    *,
    t_max: float = 50.0,
    order: int = 24,
    fraction: float = 0.3,
    rel_radius: float = 1e-8,
    digits: int = 30,
    max_steps: int = 2000,
) -> HpPole:
    r"""Integrate the covariance equation by Taylor steps in decimal arithmetic and locate its first pole.

    Each step evaluates the Taylor coefficients to ``order`` at the current time, estimates the radius of
    convergence :math:`\rho` from the last ten of them and advances by ``fraction``:math:`\cdot\rho` (the
    truncation error is then about ``fraction``:sup:`order` relative: :math:`10^{-22}` with the defaults).
    It stops when :math:`\rho < ` ``rel_radius``:math:`\cdot t` (the pole is at :math:`t + \rho`, to a
    relative error far below :math:`\rho/t`), or at ``t_max`` (no pole found: ``t_star = inf``).

    Parameters
    ----------
    Sigma0 : (d, d) array
        The initial covariance.
    A : (d, d) array
        The linear part (fold a feed-forward block into it: :math:`A + WU`).
    V, B : (d, d) or (H, d, d) arrays
        Value and query-key matrices, one per head.
    t_max : float
        Give up here.
    order : int
        Taylor order (>= 12).
    fraction : float
        The step as a fraction of the estimated radius, in (0, 1).
    rel_radius : float
        Stop when the radius falls below this times the time reached.
    digits : int
        Significant decimal digits of the arithmetic.
    max_steps : int
        Cap on the steps.

    Returns
    -------
    HpPole
    """
    if order < 12:
        raise ValueError(f"order must be at least 12, got {order}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    Vs = np.asarray(V, float).reshape(-1, *np.shape(A))
    Bs = np.asarray(B, float).reshape(-1, *np.shape(A))
    with localcontext() as ctx:
        ctx.prec = digits
        Am = _dec_matrix(A)
        Vm = [_dec_matrix(x) for x in Vs]
        Bm = [_dec_matrix(x) for x in Bs]
        S = _dec_matrix(Sigma0)
        t = Decimal(0)
        rho = Decimal("Infinity")
        frac, rel, horizon = Decimal(fraction), Decimal(rel_radius), Decimal(t_max)
        for step in range(max_steps):
            coef = taylor_coefficients(Am, Vm, Bm, S, order)
            rho = _radius(coef, 10)
            if t > 0 and rho < rel * t:
                return HpPole(float(t + rho), float(rho), step, float(_norm(S)))
            h = frac * rho
            if t + h >= horizon:
                return HpPole(float("inf"), float(rho), step, float(_norm(S)))
            # Horner: S(t + h) = sum_n S_n h^n
            new = coef[-1]
            for c in reversed(coef[:-1]):
                new = new * h + c
            S, t = new, t + h
    raise ValueError(
        f"pole_time_hp: no decision after max_steps = {max_steps} steps (t = {float(t):.6g}, radius {float(rho):.3g})"
    )
