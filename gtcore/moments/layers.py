r"""The exact layer map: a residual layer maps N(mu, Sigma) to the Gaussian of one explicit Euler step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._linalg import psd_project
from gtcore._repr import short_repr
from gtcore._validation import (
    check_moments,
    check_positive,
)
from gtcore.attention import gaussian_velocity
from gtcore.controls import (
    Controls,
)
from gtcore.moments.ode import _check_below_blowup, _checked_moments
from gtcore.status import Status

__all__ = ["LayerTrajectory", "layer_map", "layer_stack"]


def layer_map(mu: Any, Sigma: Any, controls: Controls, h: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact image of :math:`N(\mu, \Sigma)` under one residual layer :math:`x \mapsto x + h\,v(x)`.

    For a Gaussian the velocity is affine, :math:`v(x) = Fx + G\mu + b`
    (:func:`gtcore.attention.gaussian_velocity`), so the push-forward is Gaussian with

    .. math::

        \mu^+ = \mu + h\,\mu'(\mu, \Sigma), \qquad \Sigma^+ = M\Sigma M^\top, \qquad M = I + hF.

    This is one explicit Euler step of the particle Transformer, evaluated exactly.

    Parameters
    ----------
    mu, Sigma : (d,) and (d, d) arrays
        The input Gaussian's moments (validated).
    controls : Controls
        The layer's parameters.
    h : float
        Step (layer) size, positive.

    Returns
    -------
    mu_next : (d,) ndarray
        :math:`\mu^+`.
    Sigma_next : (d, d) ndarray
        :math:`\Sigma^+`, exactly symmetric.

    Raises
    ------
    OverflowError
        The image is not representable in float64 (one layer cannot stop half-way: use
        :func:`layer_stack`, which stops at ``blowup_norm`` with a status).

    Examples
    --------
    >>> from gtcore import Controls, layer_map
    >>> mu, Sigma = layer_map(np.ones(2), np.eye(2), Controls(A=-np.eye(2)), 0.5)
    >>> mu
    array([0.5, 0.5])
    >>> Sigma
    array([[0.25, 0.  ],
           [0.  , 0.25]])
    """
    mu, Sigma = _checked_moments(mu, Sigma, controls)
    h = check_positive(h, "h")
    mu_next, Sigma_next = _layer_map(mu, Sigma, controls, h)
    if not (np.isfinite(mu_next).all() and np.isfinite(Sigma_next).all()):
        raise OverflowError(
            f"layer_map: the image of N(mu, Sigma) overflows float64 (h = {h:.3g}, "
            f"max |Sigma_ij| = {np.abs(Sigma).max():.3g}); layer_stack stops at blowup_norm "
            "with a status instead"
        )
    return mu_next, Sigma_next


def _layer_map(mu: np.ndarray, Sigma: np.ndarray, controls: Controls, h: float):
    """One exact layer; overflow gives inf/NaN silently (the callers check)."""
    with np.errstate(over="ignore", invalid="ignore"):
        F, G = gaussian_velocity(Sigma, controls)
        dmu = (F + G) @ mu + controls.affine_b
        M = np.eye(mu.shape[0]) + h * F
        S = M @ Sigma @ M.T
        return mu + h * dmu, 0.5 * (S + S.T)


@dataclass
class LayerTrajectory:
    r"""Moments through a stack of residual layers, with the blow-up contract of :class:`MomentTrajectory`.

    Unpacks and indexes as the pair ``(mu, Sigma)``: ``mus, Sigmas = layer_stack(...)``.

    Attributes
    ----------
    mu : (n, d) ndarray
        ``mu[0]`` is the input, ``mu[l]`` the output of layer ``l``.
    Sigma : (n, d, d) ndarray
        The covariances, symmetric positive semidefinite.
    status : Status
        :class:`~gtcore.status.Status`: ``COMPLETED`` (``n = L + 1``) or ``BLOWUP``: at layer ``blowup_layer``
        :math:`\|\Sigma_l\|_F` or :math:`\|\mu_l\|_2` exceeded ``blowup_norm`` (the arrays end
        with that layer) or overflowed float64 (the arrays end with the layer before).
    blowup_layer : int or None
        The first layer past ``blowup_norm``, or None.
    blowup_norm : float
        The threshold.
    message : str
        Which norm crossed, at which layer.

    Examples
    --------
    >>> from gtcore import Controls, layer_stack
    >>> run = layer_stack(np.zeros(1), np.eye(1), [Controls(V=np.eye(1), B=np.eye(1))] * 40, 0.5)
    >>> run.status, run.blowup_layer
    (<Status.BLOWUP: 'blowup'>, 5)
    """

    mu: np.ndarray
    Sigma: np.ndarray
    status: Status
    blowup_layer: int | None
    blowup_norm: float
    message: str

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    def __iter__(self):
        yield self.mu
        yield self.Sigma

    def __getitem__(self, i):
        """``result[0]`` is ``mu``, ``result[1]`` is ``Sigma``: the tuple ``layer_stack`` used to return."""
        return (self.mu, self.Sigma)[i]

    @property
    def final(self) -> tuple[np.ndarray, np.ndarray]:
        """The last (mu, Sigma) computed."""
        return self.mu[-1], self.Sigma[-1]


def layer_stack(
    mu: Any, Sigma: Any, controls_per_layer: Sequence[Controls], h: float, *, blowup_norm: float = 1e8
) -> LayerTrajectory:
    r"""Moments through L residual layers, :math:`(\mu_{l+1}, \Sigma_{l+1}) = \text{layer\_map}(\mu_l, \Sigma_l)`.

    Stops at the first layer whose :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` exceeds
    ``blowup_norm`` (``status="blowup"``), as :func:`integrate_moments` does: no inf, no NaN, no
    warnings.

    Parameters
    ----------
    mu, Sigma : (d,) and (d, d) arrays
        The input moments.
    controls_per_layer : sequence of Controls
        The L layers' parameters (:class:`~gtcore.controls.Controls` of one dimension).
    h : float
        Layer size (an L-layer stack with ``h = T / L`` is explicit Euler on ``[0, T]``).
    blowup_norm : float
        Threshold on :math:`\|\Sigma\|_F` and :math:`\|\mu\|_2` that counts as blow-up.

    Returns
    -------
    LayerTrajectory
        ``mu`` (L + 1, d) and ``Sigma`` (L + 1, d, d) when completed (fewer rows after a blow-up),
        with ``status`` and ``blowup_layer``.

    Raises
    ------
    ValueError
        Invalid moments, ``h`` or ``blowup_norm``, no layers, or a layer that is not a
        :class:`~gtcore.controls.Controls` of the moments' dimension.

    Examples
    --------
    >>> from gtcore import Controls, layer_stack
    >>> mus, Sigmas = layer_stack(np.ones(1), np.eye(1), [Controls(A=-np.eye(1))] * 3, 0.5)
    >>> Sigmas[:, 0, 0]
    array([1.      , 0.25    , 0.0625  , 0.015625])
    """
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    h = check_positive(h, "h")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    _check_below_blowup(blowup_norm, Sigma=Sigma, mu=mu)
    layers = list(controls_per_layer)
    if not layers:
        raise ValueError("controls_per_layer must hold at least one layer")
    for k, c in enumerate(layers):
        if not isinstance(c, Controls) or c.d != mu.shape[0]:
            raise ValueError(f"controls_per_layer[{k}] must be a Controls of dimension {mu.shape[0]}")
    mus, Sigmas = [mu], [Sigma]
    status, blowup_layer, message = Status.COMPLETED, None, f"{len(layers)} layers"
    for k, c in enumerate(layers, start=1):
        mu, Sigma = _layer_map(mu, Sigma, c, h)
        if not (np.isfinite(mu).all() and np.isfinite(Sigma).all()):
            status, blowup_layer = Status.BLOWUP, k
            message = f"layer {k} overflows float64; the arrays end at layer {k - 1}"
            break
        mus.append(mu)
        Sigmas.append(Sigma)
        with np.errstate(over="ignore"):  # a norm past the largest float is inf: crossed
            nS, nm = np.linalg.norm(Sigma), np.linalg.norm(mu)
        if max(nS, nm) > blowup_norm:
            status, blowup_layer = Status.BLOWUP, k
            which = "||mu||_2" if nm > nS else "||Sigma||_F"
            message = f"{which} crossed blowup_norm = {blowup_norm:.3g} at layer {k}"
            break
    return LayerTrajectory(
        mu=np.stack(mus),
        Sigma=psd_project(np.stack(Sigmas)),
        status=status,
        blowup_layer=blowup_layer,
        blowup_norm=blowup_norm,
        message=message,
    )
