r"""Certificates for the covariance's blow-up: that a pole exists, or that none can.

Used by :func:`gtcore.riccati.blowup_time` once the integrator has seen :math:`\|\Sigma\|` cross its
threshold (a crossing alone proves nothing: an exponential growth crosses any threshold).

*A pole exists* when a scalar :math:`\varphi(\Sigma) \le C\|\Sigma\|` obeys a Riccati inequality
:math:`\varphi' \ge c(\varphi + \beta)^2 - \delta` with :math:`c > 0` and starts above the upper root:
the comparison solution diverges at a finite :math:`T` (:func:`comparison_time`), so does
:math:`\|\Sigma\|`, at some :math:`t^* \le T`. Two such scalars are used for the dot product:
:math:`\operatorname{tr}\Sigma` (:func:`trace_certificate`) and :math:`u^\top\Sigma u` along a common left
eigenvector of the value matrices (:func:`left_eigen_certificate`).

*No pole can exist* when the attention's drift is bounded, :math:`\|\sum_hV_hM_h(\Sigma)\Sigma\|_2 \le
L\|\Sigma\|_2` (:meth:`gtcore.attention.AttentionType.drift_bound`): Grönwall's inequality then bounds
:math:`\|\Sigma(t)\|_2` by :math:`\|\Sigma_0\|_2e^{2(\|A\|_2 + L)t}` (:func:`no_pole_rate`).

*Finite tokens never have a pole*: the softmax average is a convex combination of the tokens, so their
radius grows at most exponentially (:func:`particle_radius_bound`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gtcore._validation import as_float_array, check_nonnegative, show
from gtcore.attention import DotProduct, attention_of
from gtcore.controls import Controls

__all__ = [
    "comparison_time",
    "covariance_only",
    "left_eigen_certificate",
    "no_pole_rate",
    "particle_radius_bound",
    "trace_certificate",
]


def covariance_only(controls: Controls) -> Controls:
    r"""``controls`` without its bias.

    :math:`\Sigma` does not depend on :math:`b`, and a mean driven by :math:`b` could trip the integrator's
    blow-up event first (same arrays otherwise, so the same bits).

    Parameters
    ----------
    controls : Controls
        Constant controls.

    Returns
    -------
    Controls
        ``controls`` itself when :math:`b = 0`, else the same controls with :math:`b = 0`.
    """
    if not np.any(controls.affine_b):
        return controls
    keys = {"Q": controls.Q, "K": controls.K} if controls.Q is not None else {"B": controls.B}
    return Controls(A=controls.affine_A, V=controls.V, attention=controls.attention, **keys)


def no_pole_rate(controls: Controls) -> float | None:
    r""":math:`L` with :math:`\tfrac{d}{dt}\|\Sigma\|_2 \le 2L\|\Sigma\|_2` along every solution, or None.

    :math:`L = \|A\|_2 + L_{\rm att}` with :math:`L_{\rm att}` the attention type's
    :meth:`~gtcore.attention.AttentionType.drift_bound` (for the dot product only when the quadratic
    term vanishes; for L2 with full-rank keys and for Sinkhorn always). Then
    :math:`\|\Sigma(t)\|_2 \le \|\Sigma_0\|_2e^{2Lt}` is finite at every time: there is no pole.

    Parameters
    ----------
    controls : Controls
        Constant controls.

    Returns
    -------
    float or None
        :math:`L`, or None when the attention type gives no drift bound.
    """
    att = attention_of(controls)
    bound = att.drift_bound(controls.V, att.params(controls))
    if bound is None:
        return None
    return float(np.linalg.norm(controls.affine_A, 2)) + float(bound)


def comparison_time(c: float, beta: float, delta: float, phi: float) -> float | None:
    r"""The time to infinity of :math:`\psi' = c(\psi + \beta)^2 - \delta`, :math:`\psi(0) = \varphi`.

    Here ``c > 0`` and :math:`\delta \ge 0`; None when :math:`\varphi` does not exceed the upper root
    :math:`r_+ = -\beta + \sqrt{\delta/c}` by a relative margin of :math:`10^{-6}`.

    With :math:`r_- = -\beta - \sqrt{\delta/c}`:
    :math:`T = \log\big((\varphi - r_-)/(\varphi - r_+)\big)/(2\sqrt{c\delta})`,
    and :math:`1/(c(\varphi + \beta))` when :math:`\delta = 0`.

    Parameters
    ----------
    c, beta, delta : float
        The coefficients of the comparison equation.
    phi : float
        Its initial value :math:`\varphi`.

    Returns
    -------
    float or None
        :math:`T`, or None.
    """
    root = math.sqrt(max(delta, 0.0) / c)
    r_plus, r_minus = -beta + root, -beta - root
    if not phi > r_plus + 1e-6 * abs(phi):
        return None
    if delta > 0:
        return math.log((phi - r_minus) / (phi - r_plus)) / (2.0 * math.sqrt(c * delta))
    return 1.0 / (c * (phi + beta))


#: the trace certificate builds a (d(d+1)/2)^2 Gram matrix: only up to this dimension
TRACE_CERTIFICATE_MAX_D = 24


def trace_certificate(controls: Controls, S: np.ndarray) -> tuple[float, str] | None:
    r"""A pole after :math:`\Sigma = S` within time ``T``, from a Riccati inequality for the trace.

    The inequality bounds :math:`\varphi = \operatorname{tr}\Sigma` from below.

    Dot product, :math:`d \le 24`. With :math:`\varphi = \operatorname{tr}\Sigma` (so
    :math:`\|\Sigma\|_2 \ge \varphi/d`), eq. (1.1) gives
    :math:`\varphi' = 2\operatorname{tr}(A\Sigma) + 2q(\Sigma)`, :math:`q(X) = \sum_h\operatorname{tr}(V_hXB_hX)`.
    In an orthonormal basis :math:`(E_a)` of the symmetric matrices, :math:`\Sigma = \sum_a x_aE_a`,
    :math:`q = x^\top Gx`, :math:`\operatorname{tr}(A\Sigma) = a^\top x`, :math:`\varphi = w^\top x`. If
    :math:`G \succ 0`, minimising :math:`2a^\top x + 2x^\top Gx` over :math:`w^\top x = \varphi` (all symmetric
    :math:`X`, a superset of the covariances) gives

    .. math::

        \varphi' \ge \frac{2}{\gamma}(\varphi + \beta)^2 - \delta, \qquad
        \gamma = w^\top G^{-1}w,\ \beta = \tfrac12 w^\top G^{-1}a,\ \delta = \tfrac12 a^\top G^{-1}a,

    and the comparison solution (:func:`comparison_time`) reaches infinity in finite time
    when :math:`\varphi` exceeds its upper root. Example: :math:`A = 0`, :math:`B = I` and any
    :math:`V` with :math:`V + V^\top \succ 0` (complex eigenvalues allowed), where
    :math:`q(X) = \operatorname{tr}(\mathrm{sym}(V)X^2)`.

    Parameters
    ----------
    controls : Controls
        Constant controls (dot-product attention for a certificate).
    S : (d, d) ndarray
        The covariance the comparison starts from.

    Returns
    -------
    (float, str) or None
        The time ``T`` within which the pole lies, and a sentence naming the inequality; None when the
        inequality does not apply or does not diverge from ``S``.
    """
    if type(attention_of(controls)) is not DotProduct or controls.d > TRACE_CERTIFICATE_MAX_D:
        return None
    d = controls.d
    iu = np.triu_indices(d)
    E = np.zeros((iu[0].size, d, d))
    for k, (i, j) in enumerate(zip(*iu, strict=True)):
        E[k, i, j] = E[k, j, i] = 1.0 if i == j else 1.0 / math.sqrt(2.0)
    T = sum(np.einsum("ajk,bkj->ab", Vh @ E, Bh @ E) for Vh, Bh in zip(controls.V, controls.B, strict=True))
    G = 0.5 * (T + T.T)
    lam = np.linalg.eigvalsh(G)
    if not lam[0] > 1e-12 * max(abs(lam[-1]), 1e-300):
        return None
    a = np.einsum("ij,aji->a", controls.affine_A, E)
    w = np.einsum("aii->a", E)
    Ginv_w, Ginv_a = np.linalg.solve(G, w), np.linalg.solve(G, a)
    gamma, beta, delta = float(w @ Ginv_w), 0.5 * float(w @ Ginv_a), 0.5 * float(a @ Ginv_a)
    c = 2.0 / gamma
    T_inf = comparison_time(c, beta, delta, float(np.trace(S)))
    if T_inf is None:
        return None
    return T_inf, (
        f"tr Sigma >= psi with psi' = {c:.3g} (psi + {beta:.3g})^2 - {delta:.3g} (the quadratic form "
        f"sum_h tr(V_h X B_h X) is positive definite), which diverges within {T_inf:.3g}"
    )


def left_eigen_certificate(controls: Controls, S: np.ndarray) -> tuple[float, str] | None:
    r"""A pole after :math:`\Sigma = S` within time ``T``, from a Riccati inequality along a left eigenvector.

    The eigenvector :math:`u` is a common left eigenvector of the :math:`V_h`.

    Dot product only. Let :math:`u` (unit) satisfy :math:`V_h^\top u = \lambda_hu` for every head and
    :math:`c = 2\lambda_{\min}(\sum_h \lambda_h\,\mathrm{sym}(B_h)) > 0`. Then
    :math:`\varphi = u^\top\Sigma u` obeys, with :math:`z = \Sigma u` (so :math:`u^\top z = \varphi`,
    :math:`\|z\| \ge \varphi`), :math:`\alpha = u^\top Au` and :math:`g_\perp = A^\top u - \alpha u`,

    .. math::

        \varphi' = 2(A^\top u)^\top z + 2\sum_h \lambda_h z^\top B_h z
            \ge 2(A^\top u)^\top z + c\|z\|^2
            \ge c\varphi^2 + 2\alpha\varphi - \|g_\perp\|^2/c =: p(\varphi),

    the last step minimising over :math:`z = \varphi u + r`, :math:`r \perp u` (at :math:`r = -g_\perp/c`).
    :math:`p` has the real roots :math:`r_\pm = (-\alpha \pm \sqrt D)/c`, :math:`D = \alpha^2 + \|g_\perp\|^2 \ge 0`.
    If :math:`\varphi_0 > r_+`, the comparison solution :math:`\psi' = p(\psi)`, :math:`\psi(0) = \varphi_0`
    reaches infinity at :math:`T = \log\big((\varphi_0 - r_-)/(\varphi_0 - r_+)\big)/(2\sqrt D)`
    (:math:`1/(c(\varphi_0 - r_+))` when :math:`D = 0`), and :math:`\|\Sigma\|_2 \ge \varphi \ge \psi`: the
    solution has a pole at some :math:`t^* \le T`. The eigenvector must hold to round-off
    (:math:`\|V_h^\top u - \lambda_hu\| \le 10^{-12}\|V_h\|_2`) and :math:`\varphi_0` must exceed
    :math:`r_+` by a relative margin of :math:`10^{-6}` (covering the error of a computed :math:`S`).

    Parameters
    ----------
    controls : Controls
        Constant controls (dot-product attention for a certificate).
    S : (d, d) ndarray
        The covariance the comparison starts from.

    Returns
    -------
    (float, str) or None
        The time ``T`` within which the pole lies, and a sentence naming the inequality; None when the
        inequality does not apply or does not diverge from ``S``.
    """
    if type(attention_of(controls)) is not DotProduct:
        return None
    V, B, A = controls.V, controls.B, controls.affine_A
    scale = [max(float(np.linalg.norm(Vh, 2)), 1e-300) for Vh in V]
    lam, U = np.linalg.eig(V[0].T)
    best = None
    for k in range(lam.size):
        if abs(lam[k].imag) > 1e-12 * scale[0]:
            continue
        u = np.real(U[:, k])
        u = u / np.linalg.norm(u)
        lams = np.array([float(u @ Vh.T @ u) for Vh in V])
        if any(np.linalg.norm(Vh.T @ u - lh * u) > 1e-12 * sc for Vh, lh, sc in zip(V, lams, scale, strict=True)):
            continue
        C = np.einsum("h,hij->ij", lams, 0.5 * (B + np.swapaxes(B, 1, 2)))
        c = 2.0 * float(np.linalg.eigvalsh(C)[0])
        if c <= 0:
            continue
        alpha = float(u @ A @ u)
        g_perp = A.T @ u - alpha * u
        # p(phi) = c phi^2 + 2 alpha phi - |g_perp|^2 / c = c (phi + alpha / c)^2 - (alpha^2 + |g_perp|^2) / c
        T = comparison_time(c, alpha / c, (alpha**2 + float(g_perp @ g_perp)) / c, float(u @ S @ u))
        if T is None:
            continue
        if best is None or T < best[0]:
            best = (
                T,
                f"u^T Sigma u >= psi with psi' = {c:.3g} psi^2 + {2 * alpha:.3g} psi - "
                f"{float(g_perp @ g_perp) / c:.3g} along the left eigenvector u of V (lambda = "
                f"{lams[0]:.3g}), which diverges within {T:.3g}",
            )
    return best


def particle_radius_bound(controls: Controls, R0: float, t: Any) -> np.ndarray:
    r"""The bound :math:`R(t) \le e^{Lt}(R_0 + |b|/L) - |b|/L` on :math:`\max_i |x_i(t)|`.

    :math:`L = \|A\|_2 + \sum_h \|V_h\|_2` (spectral norms; :math:`A` and :math:`b` the affine
    part of the controls, :math:`A + WU` and :math:`b + Wc` with a feed-forward block) and
    :math:`R_0 = \max_i |x_i(0)|`; for :math:`L = 0`, :math:`R_0 + |b|t`. Holds for any number of
    tokens, any attention matrices :math:`B_h` and the exact flow (a
    fixed-step integrator adds its own error).

    Parameters
    ----------
    controls : Controls
        One time-invariant layer (any number of heads, with or without a feed-forward block).
    R0 : float
        :math:`\max_i |x_i(0)|`.
    t : float or array
        The times.

    Returns
    -------
    (n,) array of bounds at the times ``t``
    """
    if not isinstance(controls, Controls):
        raise ValueError("controls must be time-invariant Controls")
    R0 = check_nonnegative(R0, "R0")
    t = np.atleast_1d(as_float_array(t, "t"))
    if not np.all(np.isfinite(t) & (t >= 0)):
        raise ValueError(f"t must hold finite times >= 0, got {show(t)}")
    L = np.linalg.norm(controls.affine_A, 2) + sum(np.linalg.norm(V, 2) for V in controls.V)
    b = float(np.linalg.norm(controls.affine_b)) if controls.affine_b is not None else 0.0
    if L == 0:
        return R0 + b * t
    return np.exp(L * t) * (R0 + b / L) - b / L
