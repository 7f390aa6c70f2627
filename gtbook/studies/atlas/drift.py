r"""The covariance equation of many layers at once: one vectorised right-hand side per attention type.

For a Gaussian :math:`N(\mu, \Sigma)` every attention type of :mod:`gtcore.attention` moves a token
by an affine field :math:`v(x) = Fx + \dots` with

.. math::

    F = A + \sum_h V_h M_h(\Sigma), \qquad \Sigma' = F\Sigma + \Sigma F^\top,

where :math:`M_h` is the head's Gaussian tilt: :math:`\Sigma B_h` (dot product),
:math:`2(I + 2\Sigma K_h^\top K_h)^{-1}\Sigma K_h^\top Q_h` (L2) and
:math:`2\Sigma^{1/2}(I + (I + 4\Sigma^{1/2}B_h\Sigma B_h^\top\Sigma^{1/2})^{1/2})^{-1}\Sigma^{1/2}B_h`
(Sinkhorn). The covariance equation does not involve the mean, so the atlas integrates
:math:`\Sigma` alone.

:class:`LaneStack` holds the parameters of ``n`` layers of one dimension and one attention type as
stacked arrays (missing heads are zero heads), and :func:`covariance_drift` evaluates
:math:`F\Sigma + \Sigma F^\top` for any subset of them in one vectorised call: the right-hand side
that :func:`gtcore.moments.lanes.integrate_lanes` steps. The formulas are those of
:mod:`gtcore.attention` written for stacks; ``tests/test_atlas_drift.py`` checks every lane against
:func:`gtcore.moments.moment_rhs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gtcore.controls import Controls

__all__ = ["LaneStack", "covariance_drift", "drift_matrix", "stack_controls"]


@dataclass(frozen=True)
class LaneStack:
    """The parameters of ``n`` constant layers of one dimension and one attention type, stacked.

    Attributes
    ----------
    attention : "dot", "l2" or "sinkhorn"
    A : (n, d, d) the feed-forward's linear part (identity-activation fold)
    V : (n, H, d, d) value matrices (zero heads pad layers with fewer heads)
    B : (n, H, d, d) bilinear parts (dot, Sinkhorn), else None
    Q, K : (n, H, k, d) query and key maps (L2), else None
    """

    attention: str
    A: np.ndarray
    V: np.ndarray
    B: np.ndarray | None = None
    Q: np.ndarray | None = None
    K: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.A.shape[0]

    @property
    def d(self) -> int:
        return self.A.shape[1]

    def __repr__(self) -> str:
        return f"LaneStack(n={self.n}, d={self.d}, heads={self.V.shape[1]}, attention={self.attention!r})"


def stack_controls(controls: Sequence[Controls]) -> LaneStack:
    """Stack constant :class:`~gtcore.controls.Controls` of one dimension and one attention type.

    Raises
    ------
    ValueError
        Empty, mixed dimensions or attention types, or L2 heads whose ``Q`` shapes differ.
    """
    ctls = list(controls)
    if not ctls:
        raise ValueError("controls must hold at least one Controls")
    for k, c in enumerate(ctls):
        if not isinstance(c, Controls):
            raise ValueError(f"controls[{k}] must be a Controls, got {type(c).__name__}")
    d, att = ctls[0].d, ctls[0].attention
    for k, c in enumerate(ctls):
        if c.d != d or c.attention != att:
            raise ValueError(f"controls[{k}]: every lane needs d = {d} and attention {att!r}, "
                             f"got d = {c.d} and {c.attention!r}")
    n, H = len(ctls), max(c.heads for c in ctls)
    A = np.stack([c.affine_A for c in ctls])
    V = np.zeros((n, H, d, d))
    for i, c in enumerate(ctls):
        V[i, :c.heads] = c.V
    if att == "l2":
        shapes = {c.Q.shape[1] for c in ctls}  # type: ignore[union-attr]  # L2 controls hold Q, K
        if len(shapes) != 1:
            raise ValueError(f"controls: L2 lanes need one key width k, got {sorted(shapes)}")
        k = shapes.pop()
        Q = np.zeros((n, H, k, d))
        K = np.zeros((n, H, k, d))
        for i, c in enumerate(ctls):
            Q[i, :c.heads], K[i, :c.heads] = c.Q, c.K
        return LaneStack(att, A, V, Q=Q, K=K)
    if att not in ("dot", "sinkhorn"):
        raise ValueError(f"controls: no stacked drift for attention {att!r} (dot, l2, sinkhorn)")
    B = np.zeros((n, H, d, d))
    for i, c in enumerate(ctls):
        B[i, :c.heads] = c.B
    return LaneStack(att, A, V, B=B)


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    """Symmetric PSD square roots of a stack (negative round-off eigenvalues clipped to 0)."""
    w, U = np.linalg.eigh(S)
    return (U * np.sqrt(np.clip(w, 0.0, None))[..., None, :]) @ np.swapaxes(U, -1, -2)


def drift_matrix(Sigma: np.ndarray, stack: LaneStack, lanes: np.ndarray) -> np.ndarray:
    r""":math:`F = A + \sum_h V_hM_h(\Sigma)` for the lanes ``lanes``, shape (k, d, d).

    Parameters
    ----------
    Sigma : (k, d, d) symmetric covariances, one per lane in ``lanes``
    stack : LaneStack
    lanes : (k,) indices into the stack
    """
    V = stack.V[lanes]
    S = Sigma[:, None]  # (k, 1, d, d): broadcast over heads
    if stack.attention == "dot":
        M = S @ stack.B[lanes]  # type: ignore[index]  # set for this attention
    elif stack.attention == "l2":
        Q, K = stack.Q[lanes], stack.K[lanes]  # type: ignore[index]  # set for this attention
        Kt = np.swapaxes(K, -1, -2)
        eye = np.eye(stack.d)
        M = 2.0 * np.linalg.solve(eye + 2.0 * S @ Kt @ K, S @ Kt @ Q)
    else:  # sinkhorn
        B = stack.B[lanes]  # type: ignore[index]  # set for this attention
        Sh = _psd_sqrt(0.5 * (S + np.swapaxes(S, -1, -2)))
        T = Sh @ B @ S @ np.swapaxes(B, -1, -2) @ Sh
        R = _psd_sqrt(np.eye(stack.d) + 2.0 * (T + np.swapaxes(T, -1, -2)))
        M = 2.0 * Sh @ np.linalg.solve(np.eye(stack.d) + R, Sh @ B)
    return stack.A[lanes] + (V @ M).sum(axis=1)


def covariance_drift(Sigma: np.ndarray, stack: LaneStack, lanes: np.ndarray) -> np.ndarray:
    r""":math:`\Sigma' = F\Sigma + \Sigma F^\top` for the lanes ``lanes`` (see :func:`drift_matrix`),
    shape (k, d, d)."""
    FS = drift_matrix(Sigma, stack, lanes) @ Sigma
    return FS + np.swapaxes(FS, -1, -2)
