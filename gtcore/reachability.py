r"""Rank invariance and exact finite-time reachability of Gaussian targets.

Along the moment ODE (eq. 1.1) the covariance moves by congruence,

.. math::

    \Sigma' = M\Sigma + \Sigma M^\top,\quad M = A + \textstyle\sum_h V_h\Sigma B_h
    \quad\Longrightarrow\quad \Sigma(t) = \Phi(t)\,\Sigma_0\,\Phi(t)^\top,\quad
    \Phi' = M\Phi,\ \Phi(0) = I,

and :math:`\Phi(t)` is invertible, so :math:`\operatorname{rank}\Sigma(t) = \operatorname{rank}\Sigma_0`
for as long as the solution exists: the rank is an invariant of the dynamics. Conversely the paper
shows that with time-varying controls every Gaussian :math:`N(\mu_1, \Sigma_1)` with
:math:`\operatorname{rank}\Sigma_1 = \operatorname{rank}\Sigma_0` is reachable exactly in finite time.
This module makes that constructive:

* :func:`steer` builds controls that reach :math:`(\mu_1, \Sigma_1)` at time :math:`T` exactly
  (a congruence :math:`\Sigma_1 = M\Sigma_0M^\top` with :math:`\det M > 0`, its polar decomposition
  :math:`M = RP`, :math:`A = \log P / \tau` then :math:`A = \log R / \tau`, and a bias moving the
  mean), with attention off or held fixed and compensated along the reference trajectory;
* :func:`steer_min_energy` (beyond the paper) minimises :math:`\int_0^T \|A\|_F^2 + \|b\|^2\,dt`
  over piecewise-constant controls that hit the target, starting from :func:`steer`'s solution;
* :func:`endpoint_error` checks any controls through :func:`gtcore.integrate_moments`.

The controls apply unchanged to N real tokens: :func:`gtcore.particles.simulate` steps exactly to
their breaks. Chapter 3's harness (rank invariance along the ODE, steered token clouds) is
:mod:`gtcore.studies.reachability`.
"""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import schur

from ._linalg import RANK_RTOL, numerical_rank, psd_power
from ._validation import as_float_array, check_covariance, check_moments, check_positive
from .attention import attention_of
from .controls import Controls, ControlsLike, PiecewiseControls, as_control_function
from .moments import integrate_moments


class RankMismatchError(ValueError):
    """The target's covariance has a different rank from the initial one: it is unreachable."""

    def __init__(self, rank0: int, rank1: int, d: int) -> None:
        self.rank0, self.rank1, self.d = int(rank0), int(rank1), int(d)
        super().__init__(
            f"cannot steer: rank(Sigma0) = {rank0} but rank(Sigma1) = {rank1} (d = {d}). The rank "
            f"of the covariance is invariant under the Gaussian Transformer dynamics "
            f"(Sigma(t) = Phi(t) Sigma0 Phi(t)^T with Phi(t) invertible), so no controls reach a "
            f"target of a different rank."
        )


# ------------------------------------------------------------------------------- rank
def covariance_rank(Sigma: Any, rtol: float = RANK_RTOL) -> int:
    r"""Numerical rank of a covariance: the number of eigenvalues above ``rtol`` times the largest.

    .. math::

        \operatorname{rank}_\varepsilon \Sigma = \#\{k : \lambda_k(\Sigma) > \varepsilon\,
        \lambda_{\max}(\Sigma)\}, \qquad \varepsilon = \texttt{rtol}.

    Parameters
    ----------
    Sigma : (d, d) symmetric positive semidefinite array
    rtol : float
        Relative threshold, positive (default :data:`RANK_RTOL` = 1e-8).

    Returns
    -------
    int
        Between 0 (the zero matrix) and d.
    """
    S = check_covariance(Sigma, "Sigma")
    rtol = check_positive(rtol, "rtol")
    return numerical_rank(S, rtol)


def singular_values(Sigma: Any) -> np.ndarray:
    r"""Singular values of one covariance ``(d, d)`` or of a stack ``(n, d, d)``, largest first."""
    S = as_float_array(Sigma, "Sigma")
    if S.ndim not in (2, 3) or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"Sigma must have shape (d, d) or (n, d, d), got shape {S.shape}")
    return np.linalg.svd(S, compute_uv=False)


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

    Attributes
    ----------
    d : int
    T : float
        Final time; ``span = (0, T)``.
    breaks : tuple of float
        Interior stage boundaries (honoured exactly by :func:`gtcore.integrate_moments`).
    stages : tuple of :class:`Controls`
        The attention-free base controls :math:`(\tilde A_k, \tilde b_k)`.
    heads : tuple (V, B) of (H, d, d) arrays, or None
        The fixed attention heads that the controls compensate (None: attention off).
        ``attention`` is a deprecated alias of this attribute.

    Notes
    -----
    Callable ``t -> Controls``; outside :math:`[0, T]` the first and last stages continue.
    """

    def __init__(self, mu0: np.ndarray, Sigma0: np.ndarray, durations: Sequence[float],
                 stages: Sequence[Controls], heads: tuple[np.ndarray, np.ndarray] | None = None) -> None:
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
        for flow, tau in zip(self._flows, self.durations):
            F, g = flow(tau)
            mus.append(F @ mus[-1] + g)
            S = F @ Sigmas[-1] @ F.T
            Sigmas.append(0.5 * (S + S.T))
        self._mu_starts, self._Sigma_starts = mus, Sigmas

    @property
    def attention(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Deprecated alias of :attr:`heads`."""
        warnings.warn("SteeringControls.attention is deprecated; use .heads", DeprecationWarning,
                      stacklevel=2)
        return self.heads

    def _stage(self, t: float) -> int:
        return max(0, min(len(self.stages) - 1, bisect.bisect_right(self._starts, float(t)) - 1))

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The reference moments :math:`(\\mu_\\text{ref}(t), \\Sigma_\\text{ref}(t))`, in closed form."""
        k = self._stage(t)
        F, g = self._flows[k](float(t) - self._starts[k])
        S = F @ self._Sigma_starts[k] @ F.T
        return F @ self._mu_starts[k] + g, 0.5 * (S + S.T)

    def __call__(self, t: float) -> Controls:
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

    def uncompensated(self, V: Any, B: Any) -> "_HeadsOn":
        r"""The attention-free stages with heads :math:`(V_h, B_h)` switched on and not compensated:
        :math:`t \mapsto (\tilde A(t), \tilde b(t), V, B)`, the contrast to the compensated controls."""
        return _HeadsOn(self, V, B)

    def energy(self, nodes: int = 32) -> float:
        r"""Control energy :math:`\int_0^T \|A(t)\|_F^2 + \|b(t)\|^2\,dt` of the controls returned.

        Exact for attention off (constant stages); Gauss–Legendre with ``nodes`` nodes per stage
        when attention is compensated (the integrand is smooth inside a stage).
        """
        if self.heads is None:
            return float(sum(tau * (np.sum(c.A ** 2) + np.sum(c.b ** 2))
                             for c, tau in zip(self.stages, self.durations)))
        x, w = np.polynomial.legendre.leggauss(int(nodes))
        total = 0.0
        for a, tau in zip(self._starts, self.durations):
            for xi, wi in zip(x, w):
                c = self(a + 0.5 * tau * (xi + 1))
                total += 0.5 * tau * wi * (np.sum(c.A ** 2) + np.sum(c.b ** 2))
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


def steer(mu0: Any, Sigma0: Any, mu1: Any, Sigma1: Any, T: float, *,
          heads: tuple[Any, Any] | None = None, rtol: float = RANK_RTOL,
          attention: tuple[Any, Any] | None = None) -> SteeringControls:
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
    mu0, Sigma0 : initial mean (d,) and covariance (d, d), symmetric PSD
    mu1, Sigma1 : target mean and covariance
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
        A callable ``t -> Controls`` with ``breaks``, accepted by :func:`gtcore.integrate_moments`
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
    """
    if attention is not None:
        if heads is not None:
            raise ValueError("heads: pass the fixed heads once, as heads=(V, B) (attention= is its "
                             "deprecated alias)")
        warnings.warn("steer(attention=...) is deprecated; use heads=(V, B)", DeprecationWarning,
                      stacklevel=2)
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


def endpoint_error(controls: ControlsLike, mu0: Any, Sigma0: Any, mu1: Any, Sigma1: Any, T: float, *,
                   rtol: float = 1e-12, atol: float = 1e-14) -> float:
    r"""Distance of the moment ODE's endpoint to the target, through :func:`gtcore.integrate_moments`.

    .. math::

        e = \max\big(\|\mu(T) - \mu_1\|_2,\ \|\Sigma(T) - \Sigma_1\|_F\big),

    with :math:`(\mu, \Sigma)` the solution of eq. (1.1) from :math:`(\mu_0, \Sigma_0)` under
    ``controls``, integrated with tolerances tighter than the solver's defaults
    (``rtol=1e-12``, ``atol=1e-14``) so that the number measures the controls, not the solver.
    ``inf`` if the solution blows up: :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` beyond
    :math:`10^8` times the size of the problem, the largest of 1 and the norms of the four given
    moments (so that steering to a large target is not mistaken for blow-up), or the integration
    stops short of ``T`` (:attr:`gtcore.MomentTrajectory.status`).
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0, "mu0", "Sigma0")
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1", mu0.shape[0])
    T = check_positive(T, "T")
    size = max(1.0, *(float(np.linalg.norm(x)) for x in (mu0, Sigma0, mu1, Sigma1)))
    traj = integrate_moments(mu0, Sigma0, controls, (0.0, T), rtol=rtol, atol=atol, blowup_norm=1e8 * size)
    if traj.status != "completed":
        return float("inf")
    mu, S = traj.final
    return float(max(np.linalg.norm(mu - mu1), np.linalg.norm(S - Sigma1)))


# ---------------------------------------------------------------- minimum-energy controls
@dataclass
class MinEnergyResult:
    r"""Minimum-energy piecewise-constant steering, beside the constructive controls.

    Attributes
    ----------
    controls : PiecewiseControls
        K equal pieces on :math:`[0, T]`.
    energy : float
        :math:`\int_0^T \|A\|_F^2 + \|b\|^2 dt` of ``controls``.
    endpoint_error : float
        :func:`endpoint_error` of ``controls`` (through :func:`gtcore.integrate_moments`).
    constructive : SteeringControls
        :func:`steer`'s solution, the starting point.
    constructive_energy, constructive_endpoint_error : float
        The same two numbers for ``constructive``.
    success : bool
        Whether the optimiser reported convergence.
    nit : int
        Optimiser iterations.
    message : str
    """

    controls: PiecewiseControls
    energy: float
    endpoint_error: float
    constructive: SteeringControls
    constructive_energy: float
    constructive_endpoint_error: float
    success: bool
    nit: int
    message: str


def _endpoint_constraints(mu0, Sigma0, mu1, Sigma1, r, K, tau):
    """A torch function theta -> constraint residual, full rank on the rank-r manifold."""
    import torch

    d = mu0.shape[0]
    w1, U1 = _eig_desc(Sigma1)
    R1 = torch.as_tensor(U1[:, :r].copy())
    N1 = torch.as_tensor(U1[:, r:].copy())
    D1 = torch.as_tensor(np.diag(w1[:r]).copy())
    iu = torch.triu_indices(r, r)
    m0, S0, m1 = (torch.as_tensor(x) for x in (mu0, Sigma0, mu1))

    def unpack(theta):
        A = theta[: K * d * d].reshape(K, d, d)
        b = theta[K * d * d:].reshape(K, d)
        return A, b

    def endpoint(theta):
        A, b = unpack(theta)
        G = torch.zeros(K, d + 1, d + 1, dtype=theta.dtype)
        G[:, :d, :d] = A * tau
        G[:, :d, d] = b * tau
        E = torch.linalg.matrix_exp(G)
        mu, S = m0, S0
        for k in range(K):
            F, g = E[k, :d, :d], E[k, :d, d]
            mu = F @ mu + g
            S = F @ S @ F.T
        return mu, S

    def residual(theta):
        mu, S = endpoint(theta)
        parts = [mu - m1]
        if r:
            parts.append((R1.T @ S @ R1 - D1)[iu[0], iu[1]])
        if 0 < r < d:
            parts.append((N1.T @ S @ R1).reshape(-1))
        return torch.cat(parts)

    return residual


def steer_min_energy(mu0: Any, Sigma0: Any, mu1: Any, Sigma1: Any, T: float, pieces: int = 8, *,
                     maxiter: int = 300, feasibility_tol: float = 1e-12,
                     rtol: float = RANK_RTOL, start: Any = None) -> MinEnergyResult:
    r"""Piecewise-constant controls of least energy that steer :math:`(\mu_0, \Sigma_0)` to the target.

    Beyond the paper. Over K equal pieces of length :math:`\tau = T/K` with constant
    :math:`(A_k, b_k)` (attention off), solve

    .. math::

        \min_{A_k, b_k}\ \tau\sum_{k=1}^{K}\big(\|A_k\|_F^2 + \|b_k\|^2\big)
        \quad\text{s.t.}\quad \mu(T) = \mu_1,\ \Sigma(T) = \Sigma_1,

    where :math:`(\mu(T), \Sigma(T))` is the exact flow of eq. (1.1), piece by piece
    :math:`\mu \mapsto e^{A_k\tau}\mu + \int_0^\tau e^{A_k s}ds\,b_k`,
    :math:`\Sigma \mapsto e^{A_k\tau}\Sigma e^{A_k^\top\tau}` (one augmented matrix exponential,
    differentiated by torch autograd). The covariance constraint is imposed in coordinates of the
    rank-:math:`r` manifold at :math:`\Sigma_1 = U_1D_1U_1^\top` (range :math:`U_1`, null
    :math:`N_1`): :math:`U_1^\top\Sigma U_1 = D_1` and :math:`N_1^\top\Sigma U_1 = 0`, which on that
    manifold is equivalent to :math:`\Sigma = \Sigma_1` and keeps the constraint Jacobian of full
    rank. SLSQP (scipy) from :func:`steer`'s solution sampled on the pieces, then Gauss–Newton
    steps onto the constraint; the endpoint is re-checked with :func:`gtcore.integrate_moments`.

    Parameters
    ----------
    mu0, Sigma0, mu1, Sigma1, T : as in :func:`steer`
    pieces : int
        K, number of equal pieces (an even K contains :func:`steer`'s two stages exactly).
    maxiter : int
        SLSQP iteration limit.
    feasibility_tol : float
        Target norm of the constraint residual for the final Gauss–Newton steps.
    rtol : float
        Rank threshold, as in :func:`steer`.
    start : (K d^2 + K d,) array, optional
        Starting point of SLSQP: the K matrices :math:`A_k` (row-major) then the K vectors
        :math:`b_k`. Default: :func:`steer`'s solution sampled at the pieces' midpoints.

    Returns
    -------
    MinEnergyResult

    Raises
    ------
    RankMismatchError, ValueError
        As :func:`steer`; ``pieces`` not a positive integer.
    """
    import torch
    from scipy.optimize import minimize

    mu0, Sigma0, mu1, Sigma1, T, r = _check_targets(mu0, Sigma0, mu1, Sigma1, T, rtol)
    if isinstance(pieces, bool) or int(pieces) != pieces or pieces < 1:
        raise ValueError(f"pieces must be a positive integer, got {pieces!r}")
    K, d = int(pieces), mu0.shape[0]
    tau = T / K
    constructive = steer(mu0, Sigma0, mu1, Sigma1, T, rtol=rtol)
    mids = (np.arange(K) + 0.5) * tau
    theta0 = np.concatenate([np.stack([constructive(t).A for t in mids]).ravel(),
                             np.stack([constructive(t).b for t in mids]).ravel()])
    if start is not None:
        theta0 = np.asarray(start, float)
        if theta0.shape != (K * d * d + K * d,) or not np.all(np.isfinite(theta0)):
            raise ValueError(f"start must be a finite vector of length {K * d * d + K * d}, got shape {theta0.shape}")
    residual = _endpoint_constraints(mu0, Sigma0, mu1, Sigma1, r, K, tau)

    def cfun(x):
        with torch.no_grad():
            return residual(torch.as_tensor(x)).numpy()

    def cjac(x):
        return torch.autograd.functional.jacobian(residual, torch.as_tensor(x)).numpy()

    def energy(x):
        return float(tau * np.dot(x, x)), 2.0 * tau * x

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threading only adds overhead
    try:
        sol = minimize(energy, theta0, jac=True, method="SLSQP",
                       constraints=[{"type": "eq", "fun": cfun, "jac": cjac}],
                       options={"maxiter": int(maxiter), "ftol": 1e-13})
        x = sol.x
        for _ in range(20):  # Gauss-Newton (least-norm) steps onto the constraint manifold
            c = cfun(x)
            if np.linalg.norm(c) <= feasibility_tol:
                break
            x = x - np.linalg.lstsq(cjac(x), c, rcond=None)[0]
    finally:
        torch.set_num_threads(threads)
    A = x[: K * d * d].reshape(K, d, d)
    b = x[K * d * d:].reshape(K, d)
    ctl = PiecewiseControls(np.linspace(0.0, T, K + 1), [Controls(A=A[k], b=b[k]) for k in range(K)])
    return MinEnergyResult(
        controls=ctl,
        energy=float(tau * np.dot(x, x)),
        endpoint_error=endpoint_error(ctl, mu0, Sigma0, mu1, Sigma1, T),
        constructive=constructive,
        constructive_energy=constructive.energy(),
        constructive_endpoint_error=endpoint_error(constructive, mu0, Sigma0, mu1, Sigma1, T),
        success=bool(sol.success), nit=int(sol.nit), message=str(sol.message),
    )


def steer_min_energy_starts(mu0: Any, Sigma0: Any, mu1: Any, Sigma1: Any, T: float, pieces: int = 8, *,
                            starts: int = 4, scale: float = 0.5, seed: int = 0,
                            **kwargs) -> list[MinEnergyResult]:
    r""":func:`steer_min_energy` from ``starts`` seeded random starting points.

    Start ``k`` draws every entry of every :math:`A_k` and :math:`b_k` i.i.d. from
    :math:`N(0, 	ext{scale}^2)` (``numpy.random.default_rng(seed + k)``): points that know nothing of
    :func:`steer`'s solution and in general do not steer to the target. A minimum that several such
    starts reach, and that the start from the constructive solution reaches too, is not an artefact of
    where the optimiser began. Other keywords go to :func:`steer_min_energy`.

    Returns
    -------
    list of MinEnergyResult, one per start
    """
    if isinstance(starts, bool) or int(starts) != starts or starts < 1:
        raise ValueError(f"starts must be a positive integer, got {starts!r}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    d = np.asarray(mu0, float).shape[0]
    K = int(pieces)
    out = []
    for k in range(int(starts)):
        theta0 = float(scale) * np.random.default_rng(seed + k).standard_normal(K * d * d + K * d)
        out.append(steer_min_energy(mu0, Sigma0, mu1, Sigma1, T, pieces, start=theta0, **kwargs))
    return out


def control_path(controls: ControlsLike, t: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The sizes :math:`\|A(t)\|_F` and :math:`\|b(t)\|` of time-varying controls on the times ``t``."""
    fn = as_control_function(controls)
    t = as_float_array(t, "t")
    cs = [fn(float(s)) for s in t]
    return (np.array([np.linalg.norm(c.affine_A) for c in cs]),
            np.array([np.linalg.norm(c.affine_b) for c in cs]))


__all__ = [
    "MinEnergyResult", "RankMismatchError", "SteeringControls", "control_path",
    "covariance_rank", "endpoint_error", "singular_values", "steer", "steer_min_energy",
    "steer_min_energy_starts",
]
