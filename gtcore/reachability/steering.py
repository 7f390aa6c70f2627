r"""Constructive controls that reach a same-rank Gaussian target exactly in finite time, and their check."""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import schur

from gtcore._linalg import RANK_RTOL, psd_power
from gtcore._validation import (
    as_float_array,
    check_moments,
    check_positive,
)
from gtcore.attention import attention_of
from gtcore.controls import (
    Controls,
    ControlsLike,
    as_control_function,
)
from gtcore.moments import integrate_moments
from gtcore.reachability.rank import RankMismatchError, covariance_rank
from gtcore.status import Status

__all__ = ["SteeringControls", "control_path", "endpoint_error", "steer"]


# ------------------------------------------------------------------ matrix building blocks
def _eig_desc(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, U = np.linalg.eigh(S)
    return w[::-1].copy(), np.ascontiguousarray(U[:, ::-1])


def _congruence(Sigma0: np.ndarray, Sigma1: np.ndarray, r: int) -> np.ndarray:
    r"""An invertible :math:`M` with :math:`M\Sigma_0M^\top = \Sigma_1` and :math:`\det M > 0`.

    Full rank: the symmetric positive-definite Bures map
    :math:`M = \Sigma_0^{-1/2}(\Sigma_0^{1/2}\Sigma_1\Sigma_0^{1/2})^{1/2}\Sigma_0^{-1/2}`.
    Rank :math:`r < d`: with :math:`\Sigma_i = U_i D_i U_i^\top` (range bases :math:`U_i`, null
    bases :math:`N_i`), :math:`M = U_1 (D_1/D_0)^{1/2} U_0^\top + N_1 Q N_0^\top`, eigenvectors
    paired by size and sign-aligned, :math:`Q` the orthogonal Procrustes rotation closest to
    :math:`N_1^\top N_0`, and one null column flipped if needed to make :math:`\det M > 0`.
    """
    d = Sigma0.shape[0]
    if r == d:
        r0 = psd_power(Sigma0, 0.5)
        ir0 = psd_power(Sigma0, -0.5)
        mid = r0 @ Sigma1 @ r0
        M = ir0 @ psd_power(0.5 * (mid + mid.T), 0.5) @ ir0
        return 0.5 * (M + M.T)
    if r == 0:
        return np.eye(d)
    w0, U0 = _eig_desc(Sigma0)
    w1, U1 = _eig_desc(Sigma1)
    R0, N0 = U0[:, :r], U0[:, r:]
    R1, N1 = U1[:, :r].copy(), U1[:, r:]
    signs = np.sign(np.sum(R1 * R0, axis=0))
    R1 *= np.where(signs == 0, 1.0, signs)
    X, _, Yt = np.linalg.svd(N1.T @ N0)
    N1 = N1 @ (X @ Yt)
    if np.linalg.det(np.hstack([R1, N1])) * np.linalg.det(np.hstack([R0, N0])) < 0:
        N1 = N1.copy()
        N1[:, -1] *= -1.0
    return (R1 * np.sqrt(w1[:r] / w0[:r])) @ R0.T + N1 @ N0.T


def _rotation_log(R: np.ndarray) -> np.ndarray:
    r"""A real skew-symmetric :math:`L` with :math:`e^L = R` for a rotation :math:`R \in SO(d)`.

    Through the real Schur form :math:`R = Z T Z^\top` (block diagonal for an orthogonal matrix):
    each :math:`2\times2` block :math:`\begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}`
    contributes :math:`\phi J`, and the eigenvalues :math:`-1` (an even number, since
    :math:`\det R = 1`) are paired into rotations by :math:`\pi`. Unlike ``scipy.linalg.logm`` this
    stays real when :math:`R` has the eigenvalue :math:`-1`.
    """
    d = R.shape[0]
    T, Z = schur(R, output="real")
    L = np.zeros((d, d))
    minus = []
    i = 0
    while i < d:
        if i + 1 < d and abs(T[i + 1, i]) > 1e-14:
            a = 0.5 * (T[i, i] + T[i + 1, i + 1])
            s = 0.5 * (T[i, i + 1] - T[i + 1, i])
            phi = np.arctan2(s, a)
            L[i, i + 1], L[i + 1, i] = phi, -phi
            i += 2
        else:
            if T[i, i] < 0:
                minus.append(i)
            i += 1
    for j in range(0, len(minus) - 1, 2):
        a, b = minus[j], minus[j + 1]
        L[a, b], L[b, a] = np.pi, -np.pi
    L = Z @ L @ Z.T
    return 0.5 * (L - L.T)


class _NormalFlow:
    r"""Exact flow of :math:`x' = Ax + b` for a normal :math:`A` (symmetric or skew), in closed form.

    With :math:`A = U\operatorname{diag}(\lambda)U^*` (unitary :math:`U`),
    :math:`x(s) = U\operatorname{diag}(e^{\lambda s})U^*x + U\operatorname{diag}(\varphi(\lambda s)s)U^*b`,
    :math:`\varphi(z) = (e^z - 1)/z`.
    """

    def __init__(self, A: np.ndarray, b: np.ndarray) -> None:
        if np.allclose(A, A.T, rtol=0, atol=1e-13 * max(1.0, np.abs(A).max())):
            lam, U = np.linalg.eigh(0.5 * (A + A.T))
            self.lam, self.U = lam.astype(complex), U.astype(complex)
        elif np.allclose(A, -A.T, rtol=0, atol=1e-13 * max(1.0, np.abs(A).max())):
            w, U = np.linalg.eigh(1j * 0.5 * (A - A.T))  # i A is Hermitian
            self.lam, self.U = -1j * w, U
        else:
            raise ValueError("stage matrices must be symmetric or skew-symmetric")
        self.Ub = self.U.conj().T @ b

    def __call__(self, s: float) -> tuple[np.ndarray, np.ndarray]:
        z = self.lam * s
        small = np.abs(z) < 1e-12
        phi = np.where(small, s * (1 + z / 2), np.expm1(z) / np.where(small, 1.0, self.lam))
        F = ((self.U * np.exp(z)) @ self.U.conj().T).real
        g = (self.U @ (phi * self.Ub)).real
        return F, g


def _integrated_exp_inverse_apply(A: np.ndarray, tau: float, y: np.ndarray) -> np.ndarray:
    r"""Solve :math:`\big(\int_0^\tau e^{As}ds\big)\, b = y` for a symmetric :math:`A`."""
    lam, Z = np.linalg.eigh(0.5 * (A + A.T))
    x = lam * tau
    g = np.where(np.abs(x) < 1e-12, tau * (1 + x / 2), np.expm1(x) / np.where(lam == 0, 1.0, lam))
    return Z @ ((Z.T @ y) / g)


# ------------------------------------------------------------------------------ controls
class SteeringControls:
    r"""Steering controls: attention-free stages, optionally compensating fixed attention heads.

    The base controls are constant on consecutive stages :math:`[t_k, t_{k+1})`,
    :math:`\tilde A(t) = \tilde A_k`, :math:`\tilde b(t) = \tilde b_k`, and drive the reference
    trajectory, known in closed form on each stage,

    .. math::

        \mu_\text{ref}(t) = e^{\tilde A_k s}\mu_k + \int_0^s e^{\tilde A_k u}du\,\tilde b_k,\qquad
        \Sigma_\text{ref}(t) = e^{\tilde A_k s}\Sigma_k e^{\tilde A_k^\top s},\qquad s = t - t_k .

    With fixed attention heads :math:`(V_h, B_h)` the returned controls are

    .. math::

        A(t) = \tilde A(t) - \textstyle\sum_h V_h\Sigma_\text{ref}(t)B_h, \qquad
        b(t) = \tilde b(t) - \textstyle\sum_h V_h\mu_\text{ref}(t),

    which make eq. (1.1) along the reference read :math:`\mu' = \tilde A\mu + \tilde b`,
    :math:`\Sigma' = \tilde A\Sigma + \Sigma\tilde A^\top`: the same trajectory as without attention.

    Parameters
    ----------
    mu0 : (d,) array
        The initial mean, where the reference trajectory starts.
    Sigma0 : (d, d) array
        The initial covariance.
    durations : sequence of float
        The length of each stage; they start at 0 and add up to ``T``.
    stages : sequence of Controls
        One attention-free :class:`~gtcore.controls.Controls` per stage, with symmetric or
        skew-symmetric ``A`` (their flows are computed in closed form).
    heads : (V, B) pair of (H, d, d) arrays, optional
        The fixed attention heads to compensate; None: attention off.

    Attributes
    ----------
    d : int
        The dimension.
    T : float
        Final time; ``span = (0, T)``.
    breaks : tuple of float
        Interior stage boundaries (honoured exactly by :func:`gtcore.moments.integrate_moments`).
    stages : tuple of Controls
        The attention-free base controls :math:`(\tilde A_k, \tilde b_k)`.
    heads : tuple (V, B) of (H, d, d) arrays, or None
        The fixed attention heads that the controls compensate (None: attention off).
        ``attention`` is a deprecated alias of this attribute.

    Notes
    -----
    Callable ``t -> Controls``; outside :math:`[0, T]` the first and last stages continue.

    Examples
    --------
    >>> from gtcore import steer
    >>> ctl = steer(np.zeros(2), np.eye(2), np.ones(2), 4.0 * np.eye(2), 1.0)
    >>> type(ctl).__name__, len(ctl.stages), ctl.T
    ('SteeringControls', 1, 1.0)
    """

    def __init__(
        self,
        mu0: np.ndarray,
        Sigma0: np.ndarray,
        durations: Sequence[float],
        stages: Sequence[Controls],
        heads: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.stages = tuple(stages)
        self.durations = tuple(float(x) for x in durations)
        edges = np.concatenate([[0.0], np.cumsum(self.durations)])
        self.T = float(edges[-1])
        self.span = (0.0, self.T)
        self.breaks = tuple(float(x) for x in edges[1:-1])
        self._starts = tuple(float(x) for x in edges[:-1])
        self.d = self.stages[0].d
        self.heads = heads
        mus, Sigmas = [np.asarray(mu0, float)], [np.asarray(Sigma0, float)]
        self._flows = tuple(_NormalFlow(c.A, c.b) for c in self.stages)
        for flow, tau in zip(self._flows, self.durations, strict=True):
            F, g = flow(tau)
            mus.append(F @ mus[-1] + g)
            S = F @ Sigmas[-1] @ F.T
            Sigmas.append(0.5 * (S + S.T))
        self._mu_starts, self._Sigma_starts = mus, Sigmas

    @property
    def attention(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Deprecated alias of ``heads``."""
        warnings.warn("SteeringControls.attention is deprecated; use .heads", DeprecationWarning, stacklevel=2)
        return self.heads

    def _stage(self, t: float) -> int:
        return max(0, min(len(self.stages) - 1, bisect.bisect_right(self._starts, float(t)) - 1))

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        r"""The reference moments :math:`(\mu_\text{ref}(t), \Sigma_\text{ref}(t))`, in closed form.

        Parameters
        ----------
        t : float
            The time (outside :math:`[0, T]` the first and last stages continue).

        Returns
        -------
        mu : (d,) ndarray
            :math:`\mu_\text{ref}(t)`.
        Sigma : (d, d) ndarray
            :math:`\Sigma_\text{ref}(t)`, exactly symmetric.
        """
        k = self._stage(t)
        F, g = self._flows[k](float(t) - self._starts[k])
        S = F @ self._Sigma_starts[k] @ F.T
        return F @ self._mu_starts[k] + g, 0.5 * (S + S.T)

    def __call__(self, t: float) -> Controls:
        r"""The controls at time ``t``: the stage's, compensated for the fixed heads along the reference.

        Parameters
        ----------
        t : float
            The time.

        Returns
        -------
        Controls
            :math:`(\tilde A_k - \sum_h V_h\Sigma_\text{ref}(t)B_h,\ \tilde b_k - \sum_h V_h\mu_\text{ref}(t), V, B)`,
            or the stage itself when attention is off.
        """
        k = self._stage(t)
        base = self.stages[k]
        if self.heads is None:
            return base
        V, B = self.heads
        mu, S = self.reference(t)
        att = attention_of(base)  # the heads' type (dot product)
        A = base.A - att.linear_part(S, V, B)
        b = base.b - att.mean_gain(S, V, B) @ mu
        return Controls(A=A, b=b, V=V, B=B)

    def uncompensated(self, V: Any, B: Any) -> _HeadsOn:
        r"""The attention-free stages with heads :math:`(V_h, B_h)` switched on and not compensated:
        :math:`t \mapsto (\tilde A(t), \tilde b(t), V, B)`, the contrast to the compensated controls.

        Parameters
        ----------
        V : (d, d) or (H, d, d) array
            The value matrices switched on.
        B : (d, d) or (H, d, d) array
            The query-key matrices switched on.

        Returns
        -------
        callable ``t -> Controls``
            Piecewise-constant controls with the same ``breaks`` and ``span``.
        """
        return _HeadsOn(self, V, B)

    def energy(self, nodes: int = 32) -> float:
        r"""Control energy :math:`\int_0^T \|A(t)\|_F^2 + \|b(t)\|^2\,dt` of the controls returned.

        Exact for attention off (constant stages); Gauss–Legendre with ``nodes`` nodes per stage
        when attention is compensated (the integrand is smooth inside a stage).

        Parameters
        ----------
        nodes : int
            Gauss–Legendre nodes per stage (used only when attention is compensated).

        Returns
        -------
        float
            The energy.
        """
        if self.heads is None:
            return float(
                sum(tau * (np.sum(c.A**2) + np.sum(c.b**2)) for c, tau in zip(self.stages, self.durations, strict=True))
            )
        x, w = np.polynomial.legendre.leggauss(int(nodes))
        total = 0.0
        for a, tau in zip(self._starts, self.durations, strict=True):
            for xi, wi in zip(x, w, strict=True):
                c = self(a + 0.5 * tau * (xi + 1))
                total += 0.5 * tau * wi * (np.sum(c.A**2) + np.sum(c.b**2))
        return float(total)

    def __repr__(self) -> str:
        att = "off" if self.heads is None else f"{self.heads[0].shape[0]} head(s) compensated"
        return f"SteeringControls(d={self.d}, T={self.T:g}, stages={len(self.stages)}, attention {att})"


class _HeadsOn:
    """Base stages of a :class:`SteeringControls` with fixed heads added (no compensation)."""

    def __init__(self, base: SteeringControls, V: Any, B: Any) -> None:
        self.base = base
        self.pieces = tuple(Controls(A=c.A, b=c.b, V=V, B=B) for c in base.stages)
        self.breaks, self.span, self.d = base.breaks, base.span, base.d

    def __call__(self, t: float) -> Controls:
        return self.pieces[self.base._stage(t)]


def _check_targets(mu0, Sigma0, mu1, Sigma1, T, rtol):
    mu0, Sigma0 = check_moments(mu0, Sigma0, "mu0", "Sigma0")
    d = mu0.shape[0]
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1", d)
    T = check_positive(T, "T")
    r0, r1 = covariance_rank(Sigma0, rtol), covariance_rank(Sigma1, rtol)
    if r0 != r1:
        raise RankMismatchError(r0, r1, d)
    return mu0, Sigma0, mu1, Sigma1, T, r0


def steer(
    mu0: Any,
    Sigma0: Any,
    mu1: Any,
    Sigma1: Any,
    T: float,
    *,
    heads: tuple[Any, Any] | None = None,
    rtol: float = RANK_RTOL,
    attention: tuple[Any, Any] | None = None,
) -> SteeringControls:
    r"""Controls that steer :math:`N(\mu_0, \Sigma_0)` exactly to :math:`N(\mu_1, \Sigma_1)` at time T.

    Construction (attention off). Take an invertible :math:`M` with

    .. math::

        \Sigma_1 = M\Sigma_0M^\top, \qquad \det M > 0,

    (the Bures map when :math:`\Sigma_0` has full rank; through the ranges of :math:`\Sigma_0` and
    :math:`\Sigma_1` otherwise), and its polar decomposition :math:`M = RP`
    (:math:`P` symmetric positive definite, :math:`R \in SO(d)`). On :math:`[0, \tau_1)`,
    :math:`A = \log P/\tau_1` (symmetric) with the constant bias
    :math:`b = \big(\int_0^{\tau_1}e^{As}ds\big)^{-1}(\mu_1 - P\mu_0)`, so that
    :math:`\Sigma(\tau_1) = P\Sigma_0P` and :math:`\mu(\tau_1) = \mu_1`; then on
    :math:`[\tau_1, T]`, :math:`A = \log R/\tau_2` (skew) with :math:`b = -A\mu_1`, a rotation
    about the mean, so :math:`\Sigma(T) = RP\Sigma_0PR^\top = \Sigma_1` and :math:`\mu(T) = \mu_1`.
    The two stages share T equally; the rotation stage is dropped when :math:`R = I` (always the
    case at full rank). Since :math:`\Sigma' = A\Sigma + \Sigma A^\top` has the solution
    :math:`e^{At}\Sigma e^{A^\top t}`, the endpoint is exact up to round-off.

    With ``heads=(V, B)`` held fixed, the controls compensate it along the reference
    trajectory, :math:`A(t) = \tilde A(t) - \sum_h V_h\Sigma(t)B_h`,
    :math:`b(t) = \tilde b(t) - \sum_h V_h\mu(t)` (see :class:`SteeringControls`).

    Parameters
    ----------
    mu0, Sigma0 : (d,) and (d, d) arrays
        The initial mean and covariance (symmetric PSD).
    mu1, Sigma1 : (d,) and (d, d) arrays
        The target mean and covariance.
    T : float
        Steering time, positive.
    heads : (V, B), optional
        Fixed attention heads, each (d, d) or (H, d, d). None: attention off.
    rtol : float
        Relative eigenvalue threshold of the numerical rank (:func:`covariance_rank`).
    attention : (V, B), optional
        Deprecated alias of ``heads`` (warns).

    Returns
    -------
    SteeringControls
        A callable ``t -> Controls`` with ``breaks``, accepted by :func:`gtcore.moments.integrate_moments`
        and by :func:`gtcore.particles.simulate` (which steps exactly to the breaks).

    Raises
    ------
    RankMismatchError
        When :math:`\operatorname{rank}\Sigma_1 \ne \operatorname{rank}\Sigma_0` (the rank is invariant).
    ValueError
        Targets that are not finite, symmetric PSD or of the wrong shape, or :math:`T \le 0`;
        the message names the argument.

    Notes
    -----
    The attention compensation is open loop (controls depend on time only): a perturbation of
    the reference trajectory grows at a rate of order :math:`2\|V\|\|B\|\|\Sigma\|`, so the
    endpoint is exact to round-off only while that rate times :math:`T` stays moderate.

    References
    ----------
    Alcalde, Ji, Zuazua (2026), finite-time reachability result (time-varying controls).

    Examples
    --------
    >>> from gtcore import endpoint_error, steer
    >>> S1 = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> ctl = steer(np.zeros(2), np.eye(2), np.ones(2), S1, 1.0)
    >>> bool(endpoint_error(ctl, np.zeros(2), np.eye(2), np.ones(2), S1, 1.0) < 1e-8)
    True
    """
    if attention is not None:
        if heads is not None:
            raise ValueError("heads: pass the fixed heads once, as heads=(V, B) (attention= is its deprecated alias)")
        warnings.warn("steer(attention=...) is deprecated; use heads=(V, B)", DeprecationWarning, stacklevel=2)
        heads = attention
    mu0, Sigma0, mu1, Sigma1, T, r = _check_targets(mu0, Sigma0, mu1, Sigma1, T, rtol)
    d = mu0.shape[0]
    att = None
    if heads is not None:
        try:
            V, B = heads
        except (TypeError, ValueError) as exc:
            raise ValueError("heads must be a pair (V, B) of (d, d) or (H, d, d) arrays") from exc
        try:
            fixed = Controls(V=V, B=B)
        except ValueError as exc:
            raise ValueError(f"heads must be a pair (V, B) of (d, d) or (H, d, d) arrays: {exc}") from exc
        if fixed.d != d:
            raise ValueError(f"heads act on dimension d={fixed.d}, but mu0 has d={d}")
        att = (np.array(fixed.V), np.array(fixed.B))
    M = _congruence(Sigma0, Sigma1, r)
    W, s, Zt = np.linalg.svd(M)
    R = W @ Zt
    logP = (Zt.T * np.log(s)) @ Zt
    logP = 0.5 * (logP + logP.T)
    P = (Zt.T * s) @ Zt
    logR = _rotation_log(R)
    rotate = np.linalg.norm(logR) > 1e-12
    durations = [T / 2, T / 2] if rotate else [T]
    A1 = logP / durations[0]
    b1 = _integrated_exp_inverse_apply(A1, durations[0], mu1 - P @ mu0)
    stages = [Controls(A=A1, b=b1)]
    if rotate:
        A2 = logR / durations[1]
        stages.append(Controls(A=A2, b=-A2 @ mu1))
    return SteeringControls(mu0, Sigma0, durations, stages, att)


def endpoint_error(
    controls: ControlsLike,
    mu0: Any,
    Sigma0: Any,
    mu1: Any,
    Sigma1: Any,
    T: float,
    *,
    rtol: float = 1e-12,
    atol: float = 1e-14,
) -> float:
    r"""Distance of the moment ODE's endpoint to the target, through :func:`gtcore.moments.integrate_moments`.

    .. math::

        e = \max\big(\|\mu(T) - \mu_1\|_2,\ \|\Sigma(T) - \Sigma_1\|_F\big),

    with :math:`(\mu, \Sigma)` the solution of eq. (1.1) from :math:`(\mu_0, \Sigma_0)` under
    ``controls``, integrated with tolerances tighter than the solver's defaults
    (``rtol=1e-12``, ``atol=1e-14``) so that the number measures the controls, not the solver.
    ``inf`` if the solution blows up: :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` beyond
    :math:`10^8` times the size of the problem, the largest of 1 and the norms of the four given
    moments (so that steering to a large target is not mistaken for blow-up), or the integration
    stops short of ``T`` (the ``status`` of :class:`~gtcore.moments.MomentTrajectory`).

    Parameters
    ----------
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        The controls to check.
    mu0, Sigma0 : (d,) and (d, d) arrays
        The initial moments.
    mu1, Sigma1 : (d,) and (d, d) arrays
        The target moments.
    T : float
        The steering time.
    rtol, atol : float
        The integrator's tolerances.

    Returns
    -------
    float
        :math:`e`, or ``inf`` when the integration does not complete.

    Examples
    --------
    >>> from gtcore import Controls, endpoint_error
    >>> ctl = Controls(A=-np.eye(1))
    >>> round(endpoint_error(ctl, np.zeros(1), np.eye(1), np.zeros(1), np.exp(-2.0) * np.eye(1), 1.0), 12)
    0.0
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0, "mu0", "Sigma0")
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1", mu0.shape[0])
    T = check_positive(T, "T")
    size = max(1.0, *(float(np.linalg.norm(x)) for x in (mu0, Sigma0, mu1, Sigma1)))
    traj = integrate_moments(mu0, Sigma0, controls, (0.0, T), rtol=rtol, atol=atol, blowup_norm=1e8 * size)
    if traj.status is not Status.COMPLETED:
        return float("inf")
    mu, S = traj.final
    return float(max(np.linalg.norm(mu - mu1), np.linalg.norm(S - Sigma1)))


def control_path(controls: ControlsLike, t: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The sizes :math:`\|A(t)\|_F` and :math:`\|b(t)\|` of time-varying controls on the times ``t``.

    Parameters
    ----------
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        The controls (``A`` and ``b`` are the identity-activation fold).
    t : (n,) array
        The times.

    Returns
    -------
    A_norm : (n,) ndarray
        :math:`\|A(t)\|_F` at each time.
    b_norm : (n,) ndarray
        :math:`\|b(t)\|_2` at each time.
    """
    fn = as_control_function(controls)
    t = as_float_array(t, "t")
    cs = [fn(float(s)) for s in t]
    return (np.array([np.linalg.norm(c.affine_A) for c in cs]), np.array([np.linalg.norm(c.affine_b) for c in cs]))
