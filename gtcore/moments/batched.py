r"""Many moment ODEs side by side (the regime map): eq. (1.1) for a list of constant controls, stepped by the
lanes integrator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._repr import short_repr
from gtcore._validation import (
    as_float_array,
    check_moments,
)
from gtcore.controls import (
    Controls,
)
from gtcore.status import Status

__all__ = ["LaneMoments", "integrate_moments_lanes"]


@dataclass
class LaneMoments:
    r"""Where each of many moment ODEs ended (:func:`integrate_moments_lanes`).

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


def integrate_moments_lanes(mu0: Any, Sigma0: Any, controls: Sequence[Controls], t_span: tuple[float, float],
                            *, rtol: float = 1e-10, atol: Any = 1e-12, blowup_norm: Any = 1e8) -> LaneMoments:
    r"""The moment ODE (eq. 1.1) for many constant controls at once, each lane with its own DOP853 steps.

    Lane :math:`k` solves :math:`\mu' = (M_k + G_k)\mu + b_k`, :math:`\Sigma' = M_k\Sigma + \Sigma M_k^\top`
    with the dot-product tilt :math:`M_k = A_k + \sum_h V_{k,h}\Sigma B_{k,h}`, :math:`G_k = \sum_h V_{k,h}`
    (:meth:`gtcore.attention.DotProduct.value_responses`), stepped by :func:`gtcore.moments.lanes.integrate_lanes`:
    the step control of :func:`integrate_moments` (``solve_ivp``'s DOP853) lane by lane, all lanes'
    right-hand sides in one vectorised evaluation. The blow-up event (:math:`\|\Sigma\|_F` crossing
    ``blowup_norm``) is detected at the end of the step (no root location): use it for the outcome, and
    :func:`integrate_moments` for the crossing time.

    Parameters
    ----------
    mu0 : (d,) or (n, d) array
        The initial means (one for all lanes, or one per lane).
    Sigma0 : (d, d) or (n, d, d) array
        The initial covariances.
    controls : sequence of Controls
        n constant :class:`~gtcore.controls.Controls` of one dimension, dot-product attention.
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
        No controls, controls that are not constant dot-product :class:`~gtcore.controls.Controls` of
        one dimension, invalid initial moments, or a ``blowup_norm`` not above every :math:`\|\Sigma_0\|_F`.
    """
    from gtcore.attention import DotProduct, attention_of
    from gtcore.moments.lanes import integrate_lanes

    ctls = list(controls)
    if not ctls:
        raise ValueError("controls must hold at least one Controls")
    d = ctls[0].d
    for k, c in enumerate(ctls):
        if not isinstance(c, Controls) or c.d != d:
            raise ValueError(f"controls[{k}] must be constant Controls of dimension {d}")
        if not isinstance(attention_of(c), DotProduct):
            raise ValueError(f"controls[{k}]: integrate_moments_lanes needs dot-product attention "
                             f"(got {c.attention!r}); use integrate_moments")
    n = len(ctls)
    mus = np.broadcast_to(as_float_array(mu0, "mu0"), (n, d)).copy()
    Sigmas = np.broadcast_to(as_float_array(Sigma0, "Sigma0"), (n, d, d)).copy()
    for k in range(n):
        check_moments(mus[k], Sigmas[k], "mu0", "Sigma0")
    try:
        limit = np.broadcast_to(as_float_array(blowup_norm, "blowup_norm"), (n,))
    except ValueError as exc:
        raise ValueError(f"blowup_norm must be a number or one per lane ({n}), got shape "
                         f"{np.shape(blowup_norm)}") from exc
    if not np.all(limit > 0) or np.any(np.linalg.norm(Sigmas, axis=(1, 2)) >= limit):
        raise ValueError("blowup_norm must be positive and exceed the norm of every Sigma0")
    heads = max(c.heads for c in ctls)
    A = np.stack([c.affine_A for c in ctls])
    b = np.stack([c.affine_b for c in ctls])
    V = np.zeros((n, heads, d, d))
    B = np.zeros((n, heads, d, d))
    for k, c in enumerate(ctls):  # missing heads are zero heads
        V[k, :c.heads], B[k, :c.heads] = c.V, c.B
    att = DotProduct()
    G = np.stack([att.mean_gain(Sigmas[k], V[k], B[k]) for k in range(n)])  # sum_h V_h

    def rhs(t, y, lanes):
        S = y[:, d:].reshape(-1, d, d)
        S = 0.5 * (S + np.swapaxes(S, 1, 2))
        M = A[lanes] + att.value_responses(S[:, None], V[lanes], B[lanes]).sum(axis=1)
        dmu = np.einsum("kij,kj->ki", M + G[lanes], y[:, :d]) + b[lanes]
        MS = M @ S
        return np.concatenate([dmu, (MS + np.swapaxes(MS, 1, 2)).reshape(-1, d * d)], axis=1)

    def crossed(y, lanes):
        return np.linalg.norm(y[:, d:], axis=1) >= limit[lanes]

    sol = integrate_lanes(rhs, t_span, np.concatenate([mus, Sigmas.reshape(n, d * d)], axis=1),
                          rtol=rtol, atol=atol, stop=crossed)
    S = sol.y[:, d:].reshape(n, d, d)
    status = np.array([Status.BLOWUP if st is Status.STOPPED else st for st in sol.status], dtype=object)
    return LaneMoments(t=sol.t, mu=sol.y[:, :d], Sigma=0.5 * (S + np.swapaxes(S, 1, 2)), status=status)
