r"""The exact layer map of a prescribed Transformer on a Gaussian input (no torch needed).

A block of :func:`gtcore.models.prescribed_transformer` without LayerNorm is two affine sub-layers on a Gaussian:
the attention sub-layer (``controls`` without ``A, b``) and the feed-forward sub-layer :math:`x \mapsto x + h(Ax + b)`.
:func:`split_controls` separates them, :func:`split_schedule` writes the L blocks as 2L explicit Euler steps of
piecewise controls (for the particle integrator), and :func:`layer_moments` iterates the exact map
(:func:`gtcore.moments.layer_stack`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gtcore.controls import Controls, PiecewiseControls
from gtcore.moments import layer_stack


# ============================================================================== validation
def _check_layers(n_layers: Any) -> int:
    if isinstance(n_layers, (bool, np.bool_)) or not isinstance(n_layers, (int, np.integer)) or n_layers < 1:
        raise ValueError(f"n_layers must be an integer >= 1, got {n_layers!r}")
    return int(n_layers)


def _check_h(h: Any) -> float:
    if (
        isinstance(h, (bool, np.bool_))
        or not isinstance(h, (int, float, np.floating, np.integer))
        or not math.isfinite(h)
        or h <= 0
    ):
        raise ValueError(f"h must be a finite number > 0, got {h!r}")
    return float(h)


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


# ============================================================================== the Gaussian side
def split_controls(controls: Controls) -> tuple[Controls, Controls]:
    r"""The two sub-layers of a block: ``(attention, feed_forward)``.

    Parameters
    ----------
    controls : Controls
        One layer's parameters.

    Returns
    -------
    attention : Controls
        The heads only: ``V`` with ``B`` (or ``Q``, ``K``), of the same attention type.
    feed_forward : Controls
        ``Controls(A=controls.A, b=controls.b)``.

    Raises
    ------
    ValueError
        ``controls`` is not a :class:`~gtcore.controls.Controls`, or holds a block
        :math:`W\sigma(Ux + c)` (not split: fold an identity-activation block into ``A, b``).
    """
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    if controls.has_feedforward:
        raise ValueError(
            "controls: the block W sigma(Ux + c) is not split (fold an identity-activation block into A, b)"
        )
    heads = {"Q": controls.Q, "K": controls.K} if controls.Q is not None else {"B": controls.B}
    return (Controls(V=controls.V, attention=controls.attention, **heads), Controls(A=controls.A, b=controls.b))


def split_schedule(controls: Controls, n_layers: int, h: float) -> PiecewiseControls:
    r"""The L blocks as piecewise controls on :math:`[0, 2Lh]` for 2L Euler steps of size h.

    Step :math:`2\ell` uses the attention sub-layer and step :math:`2\ell + 1` the feed-forward
    sub-layer (:func:`split_controls`), so ``simulate(x0, split_schedule(c, L, h), (0, 2*L*h),
    2*L, method="euler")`` recorded at even steps is the prescribed Transformer with
    ``feed_forward=True``.

    Parameters
    ----------
    controls : Controls
        One layer's parameters (the same in every block).
    n_layers : int
        The number of blocks L.
    h : float
        The layer size.

    Returns
    -------
    PiecewiseControls
        2L pieces of length h, alternating the two sub-layers.
    """
    n_layers, h = _check_layers(n_layers), _check_h(h)
    att, ff = split_controls(controls)
    breaks = h * np.arange(2 * n_layers + 1)
    return PiecewiseControls(breaks, [att, ff] * n_layers)


def layer_moments(
    mu0: Any, Sigma0: Any, controls: Controls, n_layers: int, h: float, *, feed_forward: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact moments of a Gaussian input after each block of the prescribed Transformer.

    Without LayerNorm each sub-layer is an affine map on a Gaussian (:func:`gtcore.moments.layer_map`):
    the attention sub-layer :math:`\Sigma \mapsto M\Sigma M^\top`,
    :math:`M = I + h\sum_{h'} V_{h'}\Sigma B_{h'}`, then the feed-forward sub-layer
    :math:`\Sigma \mapsto (I + hA)\Sigma(I + hA)^\top`. With :math:`A = 0, b = 0` this is
    :func:`gtcore.moments.layer_stack` of ``controls``.

    Parameters
    ----------
    mu0, Sigma0 : (d,) and (d, d) arrays
        The input Gaussian's moments.
    controls : Controls
        The layer's parameters (the same in every layer).
    n_layers : int >= 1
        The number of blocks L.
    h : float > 0
        The layer size.
    feed_forward : bool, optional
        Whether the feed-forward sub-layer is applied (default: when A or b is nonzero).

    Returns
    -------
    mus : (L + 1, d) ndarray
        The means after each block (the input first).
    Sigmas : (L + 1, d, d) ndarray
        The covariances. Fewer rows when a norm passes :func:`gtcore.moments.layer_stack`'s
        ``blowup_norm`` (1e8).
    """
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    n_layers, h = _check_layers(n_layers), _check_h(h)
    if feed_forward is None:
        feed_forward = bool(np.any(controls.A) or np.any(controls.b))
    feed_forward = _check_flag(feed_forward, "feed_forward")
    if not feed_forward:
        return tuple(layer_stack(mu0, Sigma0, [controls] * n_layers, h))
    att, ff = split_controls(controls)
    mus, Sigmas = layer_stack(mu0, Sigma0, [att, ff] * n_layers, h)
    return mus[::2], Sigmas[::2]


__all__ = ["layer_moments", "split_controls", "split_schedule"]
