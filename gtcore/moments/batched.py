r"""Many moment ODEs side by side: constant controls stacked over a leading lane axis, and eq. (1.1) for all of them
stepped by the lanes integrator.

``stack_controls`` stacks ``n`` constant :class:`~gtcore.controls.Controls` of one dimension and one attention
type into a :class:`LaneStack` (missing heads are zero heads), whose methods evaluate the Gaussian velocity of
any subset of the lanes in one vectorised call, through the attention type of the registry
(:meth:`~gtcore.attention.AttentionType.gaussian_parts`, batched over lanes):

.. math::

    F_k = A_k + \sum_h V_{k,h}M_h(\Sigma_k), \qquad G_k = \sum_h V_{k,h}C_h(\Sigma_k), \qquad
    \mu_k' = (F_k + G_k)\mu_k + b_k, \qquad \Sigma_k' = F_k\Sigma_k + \Sigma_kF_k^\top .

``integrate_moments_lanes`` integrates them with :func:`gtcore.moments.lanes.integrate_lanes`; the regime
atlas of the book integrates the covariance equation alone with ``LaneStack.covariance_rhs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._repr import short_repr
from gtcore._validation import as_float_array, check_moments
from gtcore.attention import AttentionType, attention_of
from gtcore.controls import Controls
from gtcore.moments.lanes import integrate_lanes
from gtcore.status import Status

__all__ = ["LaneMoments", "LaneStack", "integrate_moments_lanes", "stack_controls"]


@dataclass(frozen=True)
class LaneStack:
    r"""The parameters of ``n`` constant layers of one dimension and one attention type, stacked over lanes.

    Attributes
    ----------
    attention : AttentionType
        The layers' attention type (from the registry).
    A : (n, d, d) ndarray
        The feed-forward's linear part (identity-activation fold, :attr:`~gtcore.controls.Controls.affine_A`).
    b : (n, d) ndarray
        Its bias (:attr:`~gtcore.controls.Controls.affine_b`).
    V : (n, H, d, d) ndarray
        The value matrices (zero heads pad layers with fewer heads).
    params : (n, H, ...) ndarray
        The type's head parameters (:meth:`~gtcore.attention.AttentionType.stack_params`).
    """

    attention: AttentionType
    A: np.ndarray
    b: np.ndarray
    V: np.ndarray
    params: np.ndarray

    @property
    def n(self) -> int:
        """The number of lanes."""
        return self.A.shape[0]

    @property
    def d(self) -> int:
        """The dimension of the tokens."""
        return self.A.shape[1]

    def velocity_matrices(self, Sigma: np.ndarray, lanes: Any) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`(F, G)` of the lanes ``lanes``.

        :math:`F = A + \sum_h V_hM_h(\Sigma)`, :math:`G = \sum_h V_hC_h(\Sigma)`.

        Parameters
        ----------
        Sigma : (k, d, d) array, or (d, d) for one lane
            Symmetric covariances, one per lane of ``lanes``.
        lanes : (k,) int array, or an int
            Indices into the stack.

        Returns
        -------
        F, G : (k, d, d) ndarrays, or (d, d) for one lane
            The velocity's linear part in the query and its offset's matrix in the mean.
        """
        linear, gain = self.attention.gaussian_parts(Sigma, self.V[lanes], self.params[lanes])
        return self.A[lanes] + linear, gain

    def velocity_matrix(self, Sigma: np.ndarray, lanes: Any) -> np.ndarray:
        r""":math:`F = A + \sum_h V_hM_h(\Sigma)` of the lanes ``lanes`` (the covariance equation needs no :math:`G`).

        Parameters
        ----------
        Sigma : (k, d, d) array, or (d, d) for one lane
            Symmetric covariances, one per lane of ``lanes``.
        lanes : (k,) int array, or an int
            Indices into the stack.

        Returns
        -------
        (k, d, d) ndarray, or (d, d) for one lane
            :math:`F`.
        """
        return self.A[lanes] + self.attention.linear_part(Sigma, self.V[lanes], self.params[lanes])

    def covariance_rhs(self, Sigma: np.ndarray, lanes: Any) -> np.ndarray:
        r""":math:`\Sigma' = F\Sigma + \Sigma F^\top` of the lanes ``lanes`` (:meth:`velocity_matrix`).

        Parameters
        ----------
        Sigma : (k, d, d) array, or (d, d) for one lane
            Symmetric covariances, one per lane of ``lanes``.
        lanes : (k,) int array, or an int
            Indices into the stack.

        Returns
        -------
        (k, d, d) ndarray, or (d, d) for one lane
            :math:`\Sigma'`.
        """
        FS = self.velocity_matrix(Sigma, lanes) @ Sigma
        return FS + np.swapaxes(FS, -1, -2)

    __repr__ = short_repr  # shapes and the attention type, never the arrays


def stack_controls(controls: Sequence[Controls]) -> LaneStack:
    """Stack constant :class:`~gtcore.controls.Controls` of one dimension and one attention type.

    Parameters
    ----------
    controls : sequence of Controls
        ``n`` constant layers, one dimension, one attention type (any registered type).

    Returns
    -------
    LaneStack
        Their parameters, stacked; a layer with fewer heads is padded with zero heads (:math:`V_h = 0`).

    Raises
    ------
    ValueError
        No controls, an entry that is not a :class:`~gtcore.controls.Controls`, mixed dimensions or attention
        types, or head parameters the type cannot stack (L2 key widths that differ).
    """
    ctls = list(controls)
    if not ctls:
        raise ValueError("controls must hold at least one Controls")
    for k, c in enumerate(ctls):
        if not isinstance(c, Controls):
            raise ValueError(f"controls[{k}] must be a Controls, got {type(c).__name__}")
    d, name = ctls[0].d, ctls[0].attention
    for k, c in enumerate(ctls):
        if c.d != d or c.attention != name:
            raise ValueError(
                f"controls[{k}]: every lane needs d = {d} and attention {name!r}, got d = {c.d} and {c.attention!r}"
            )
    att = attention_of(ctls[0])
    n, H = len(ctls), max(c.heads for c in ctls)
    A = np.stack([c.affine_A for c in ctls])
    b = np.stack([c.affine_b for c in ctls])
    V = np.zeros((n, H, d, d))
    for i, c in enumerate(ctls):  # missing heads are zero heads
        V[i, : c.heads] = c.V
    try:
        params = att.stack_params([att.params(c) for c in ctls], H)
    except ValueError as err:
        raise ValueError(f"controls: {err}") from None
    return LaneStack(att, A, b, V, params)


@dataclass
class LaneMoments:
    r"""Where each of many moment ODEs ended (``integrate_moments_lanes``).

    Attributes
    ----------
    t : (n,) ndarray
        The last time of each lane (``t_span[1]`` when completed; for ``BLOWUP`` the end of the step
        at which :math:`\|\Sigma\|_F` crossed ``blowup_norm``).
    mu : (n, d) ndarray
        The means there.
    Sigma : (n, d, d) ndarray
        The covariances there, exactly symmetric.
    status : (n,) object ndarray of Status
        :class:`~gtcore.status.Status` members: ``COMPLETED``, ``BLOWUP`` (the lanes' ``STOPPED``: the
        blow-up condition is their stop condition) or ``FAILED``.
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: np.ndarray

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def integrate_moments_lanes(
    mu0: Any,
    Sigma0: Any,
    controls: Sequence[Controls] | LaneStack,
    t_span: tuple[float, float],
    *,
    rtol: float = 1e-10,
    atol: Any = 1e-12,
    blowup_norm: Any = 1e8,
) -> LaneMoments:
    r"""The moment ODE (eq. 1.1) for many constant controls at once, each lane with its own DOP853 steps.

    Lane :math:`k` solves :math:`\mu' = (F_k + G_k)\mu + b_k`, :math:`\Sigma' = F_k\Sigma + \Sigma F_k^\top`
    with :math:`F_k = A_k + \sum_h V_{k,h}M_h(\Sigma)`, :math:`G_k = \sum_h V_{k,h}C_h(\Sigma)` from the lanes'
    attention type (:meth:`LaneStack.velocity_matrices`: for the dot product :math:`M_h = \Sigma B_{k,h}`,
    :math:`C_h = I`), stepped by :func:`gtcore.moments.lanes.integrate_lanes`: the step control of
    :func:`~gtcore.moments.integrate_moments` (``solve_ivp``'s DOP853) lane by lane, all lanes' right-hand sides in
    one vectorised evaluation. The blow-up event (:math:`\|\Sigma\|_F` crossing ``blowup_norm``) is detected at
    the end of the step (no root location): use it for the outcome, and :func:`~gtcore.moments.integrate_moments`
    for the crossing time.

    Parameters
    ----------
    mu0 : (d,) or (n, d) array
        The initial means (one for all lanes, or one per lane).
    Sigma0 : (d, d) or (n, d, d) array
        The initial covariances.
    controls : sequence of Controls, or LaneStack
        n constant :class:`~gtcore.controls.Controls` of one dimension and one attention type (or their
        ``stack_controls``).
    t_span : (float, float)
        ``(t0, t1)``.
    rtol : float
        The relative tolerance.
    atol, blowup_norm : float or (n,) array
        The absolute tolerance and the blow-up threshold on :math:`\|\Sigma\|_F`: scalars or one per lane.

    Returns
    -------
    LaneMoments
        Where each lane ended, with its status.

    Raises
    ------
    ValueError
        No controls, controls that are not constant :class:`~gtcore.controls.Controls` of one dimension and one
        attention type, invalid initial moments, or a ``blowup_norm`` not above every :math:`\|\Sigma_0\|_F`.
    """
    stack = controls if isinstance(controls, LaneStack) else stack_controls(controls)
    n, d = stack.n, stack.d
    mus = np.broadcast_to(as_float_array(mu0, "mu0"), (n, d)).copy()
    Sigmas = np.broadcast_to(as_float_array(Sigma0, "Sigma0"), (n, d, d)).copy()
    for k in range(n):
        check_moments(mus[k], Sigmas[k], "mu0", "Sigma0")
    try:
        limit = np.broadcast_to(as_float_array(blowup_norm, "blowup_norm"), (n,))
    except ValueError as exc:
        raise ValueError(
            f"blowup_norm must be a number or one per lane ({n}), got shape {np.shape(blowup_norm)}"
        ) from exc
    if not np.all(limit > 0) or np.any(np.linalg.norm(Sigmas, axis=(1, 2)) >= limit):
        raise ValueError("blowup_norm must be positive and exceed the norm of every Sigma0")

    def rhs(t, y, lanes):
        S = y[:, d:].reshape(-1, d, d)
        S = 0.5 * (S + np.swapaxes(S, 1, 2))
        M, G = stack.velocity_matrices(S, lanes)
        dmu = np.einsum("kij,kj->ki", M + G, y[:, :d]) + stack.b[lanes]
        MS = M @ S
        return np.concatenate([dmu, (MS + np.swapaxes(MS, 1, 2)).reshape(-1, d * d)], axis=1)

    def crossed(y, lanes):
        return np.linalg.norm(y[:, d:], axis=1) >= limit[lanes]

    sol = integrate_lanes(
        rhs, t_span, np.concatenate([mus, Sigmas.reshape(n, d * d)], axis=1), rtol=rtol, atol=atol, stop=crossed
    )
    S = sol.y[:, d:].reshape(n, d, d)
    status = np.array([Status.BLOWUP if st is Status.STOPPED else st for st in sol.status], dtype=object)
    return LaneMoments(t=sol.t, mu=sol.y[:, :d], Sigma=0.5 * (S + np.swapaxes(S, 1, 2)), status=status)
