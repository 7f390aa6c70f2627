r"""The attention law, in one place: a registry of attention types.

A layer's attention heads move a token :math:`x` by :math:`\sum_h V_h\, a_h[\rho](x)`, where
:math:`a_h[\rho](x)` is the head's attention average of the keys :math:`y \sim \rho` at the query
:math:`x`. An attention type says how that average is formed. Each type provides

* :meth:`AttentionType.tilt`: its average against a Gaussian :math:`N(\mu, \Sigma)`, an affine map
  of the query, :math:`a(x) = Mx + c` (the Gaussian *tilt*). Every type whose logits are at most
  quadratic in the key has such a tilt, with :math:`c = C\mu` linear in the mean;
* :meth:`AttentionType.value_responses` / :meth:`~AttentionType.mean_gain`: the heads' sums
  :math:`V_hM_h` and :math:`\sum_h V_hC_h`, from which the moment ODE (eq. 1.1), the exact layer map
  and the equilibria are built (:func:`gaussian_velocity`);
* :meth:`AttentionType.kernel`: the finite-N average over N tokens in torch, with :math:`O(Nd)`
  memory;
* :meth:`AttentionType.logits`: the definition, used by the naive dense reference
  (:meth:`~AttentionType.naive_kernel`) that the contract test compares against;
* optionally :meth:`AttentionType.mixture_average` (the exact average against a Gaussian
  mixture) and :meth:`AttentionType.sampling_strength` (when the N-token average has finite
  variance).

With the Gaussian tilt the velocity field is affine, :math:`v(x) = Fx + g` with

.. math::

    F = A + \sum_h V_h M_h, \qquad g = b + \sum_h V_h C_h\,\mu,

and the moments obey :math:`\mu' = F\mu + g`, :math:`\Sigma' = F\Sigma + \Sigma F^\top`.

Types are registered by name in :data:`ATTENTION_TYPES` (:func:`register`); a
:class:`~gtcore.controls.Controls` selects one with ``attention=`` (default ``"dot"``). Adding a type is one
class here (or anywhere, registered with :func:`register`): every consumer (moments, layer map,
particles, stability, reachability, mixtures, mean-field diagnostics) goes through this module, and
``tests/core/test_attention.py`` checks the new type against its definition without being edited.

The paper's type is :class:`DotProduct`: logits :math:`x_j^\top B_h x_i` (query :math:`i`, key
:math:`j`), softmax over :math:`j`, scale 1, whose Gaussian tilt is :math:`\mu + \Sigma B x`.
Beyond the paper: :class:`L2` (logits :math:`-\|Q_hx_i - K_hx_j\|^2`) and :class:`Sinkhorn`
(the kernel :math:`e^{x_j^\top B_h x_i}` scaled to a doubly-stochastic matrix, then
row-normalised). Heads add their velocities; all heads of one :class:`~gtcore.controls.Controls` share
one type.

Modules: :mod:`~gtcore.attention.base` (the interface), :mod:`~gtcore.attention.dot`,
:mod:`~gtcore.attention.l2`, :mod:`~gtcore.attention.sinkhorn` (the types and their Gaussian closed
forms, NumPy), :mod:`~gtcore.attention.kernels` and :mod:`~gtcore.attention.sinkhorn_scaling` (the
finite-N kernels, torch, imported when tokens move).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gtcore.attention.base import AttentionType
from gtcore.attention.dot import DotProduct
from gtcore.attention.l2 import L2
from gtcore.attention.sinkhorn import Sinkhorn

__all__ = [
    "ATTENTION_TYPES",
    "L2",
    "AttentionType",
    "DotProduct",
    "Sinkhorn",
    "attention_of",
    "gaussian_velocity",
    "max_sampling_strength",
    "register",
    "velocity_parts",
]


#: the one registry of attention types, by name
ATTENTION_TYPES: dict[str, AttentionType] = {}


def register(attention: AttentionType) -> AttentionType:
    """Add an attention type to :data:`ATTENTION_TYPES` under its ``name``; returns it.

    Parameters
    ----------
    attention : AttentionType
        An instance of the type, with a non-empty ``name`` (an existing entry of that name is replaced).

    Returns
    -------
    AttentionType
        ``attention`` (so that it can be used as a decorator-like one-liner).

    Raises
    ------
    ValueError
        ``attention.name`` is empty.
    """
    if not attention.name:
        raise ValueError("an attention type needs a non-empty name")
    ATTENTION_TYPES[attention.name] = attention
    return attention


register(DotProduct())
register(L2())
register(Sinkhorn())


def attention_of(controls: Any) -> AttentionType:
    """The attention type selected by ``controls`` (its ``attention`` name, ``"dot"`` by default).

    Parameters
    ----------
    controls : Controls
        One layer's parameters (any object with an ``attention`` name; ``"dot"`` without one).

    Returns
    -------
    AttentionType
        The registered type of that name.
    """
    return ATTENTION_TYPES[getattr(controls, "attention", "dot")]


def gaussian_velocity(Sigma: Any, controls: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The affine velocity against :math:`N(\mu, \Sigma)`, :math:`v(x) = Fx + G\mu + b`: returns :math:`(F, G)`.

    .. math::

        F = A + \sum_h V_h M_h(\Sigma), \qquad G = \sum_h V_h C_h(\Sigma),

    with :math:`(M_h, C_h\mu)` the tilt of :func:`attention_of(controls) <attention_of>`; ``A`` and
    ``b`` are the identity-activation fold (:attr:`~gtcore.controls.Controls.affine_A`,
    :attr:`~gtcore.controls.Controls.affine_b`).

    Parameters
    ----------
    Sigma : (d, d) array
        The covariance of the Gaussian.
    controls : Controls
        One layer's parameters.

    Returns
    -------
    F : (d, d) ndarray
        The velocity's linear part in the query.
    G : (d, d) ndarray
        The matrix of its offset in the mean.
    """
    att = attention_of(controls)
    return velocity_parts(Sigma, controls.affine_A, att, controls.V, att.params(controls))


def velocity_parts(Sigma: Any, A: Any, att: AttentionType, V: Any, params: Any) -> tuple[Any, Any]:
    r""":func:`gaussian_velocity` from the looked-up parts of the controls: :math:`(F, G)`.

    :math:`F = A + \sum_h V_hM_h(\Sigma)`, :math:`G = \sum_h V_hC_h(\Sigma)`: the one place the velocity's
    parts are assembled (the integrators look the controls up once and call this at every evaluation).

    Parameters
    ----------
    Sigma : (..., d, d) array
        The covariance (leading lane axes allowed, as in :meth:`AttentionType.value_responses`).
    A : (..., d, d) array
        The affine part of the velocity (the identity-activation fold of the controls).
    att : AttentionType
        The attention type.
    V : (..., H, d, d) array
        The value matrices.
    params : object
        The type's head parameters (:meth:`AttentionType.params`).

    Returns
    -------
    F, G : (..., d, d) ndarray
        As in :func:`gaussian_velocity`.
    """
    linear, gain = att.gaussian_parts(Sigma, V, params)
    return A + linear, gain


def max_sampling_strength(controls: Any, times: Any, Sigmas: Any) -> float:
    r""":math:`\kappa = \max_t \max_h \kappa_h(\Sigma(t))` along a trajectory: the largest
    :meth:`~gtcore.attention.AttentionType.sampling_strength` of the heads (for the dot product
    :math:`\lambda_{\max}(B_h^\top \Sigma B_h \Sigma)`, real and non-negative; the N-token softmax
    average has finite variance at Gaussian queries while :math:`\kappa < \tfrac12`).

    Parameters
    ----------
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        The controls along the trajectory (evaluated as ``controls(t)``: constant controls return themselves).
    times : sequence of float
        The times of the trajectory's covariances.
    Sigmas : (n, d, d) array
        The covariance at each time.

    Returns
    -------
    float
        :math:`\kappa`.
    """
    if not callable(controls):
        raise ValueError(
            f"controls must be a Controls, a PiecewiseControls or a callable t -> Controls, "
            f"got {type(controls).__name__}"
        )
    kappa = 0.0
    for t, S in zip(times, Sigmas, strict=True):
        ctl = controls(float(t))  # every ControlsLike is a function of time (Controls returns itself)
        att = attention_of(ctl)
        params = att.params(ctl)
        for h in range(ctl.heads):
            kappa = max(kappa, att.sampling_strength(S, att.head(params, h)))
    return kappa
