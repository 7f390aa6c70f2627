r"""The Gaussian reduction: the moment ODE (the paper's equation (1.1)) and the exact layer map.

For a Gaussian :math:`\rho = N(\mu, \Sigma)` every head's attention average is an affine map of the
query, :math:`M_h x + C_h\mu` (the tilt of :mod:`gtcore.attention`), so the velocity field is affine,
:math:`v(x) = Fx + G\mu + b` with :math:`F = A + \sum_h V_hM_h`, :math:`G = \sum_h V_hC_h`
(:func:`gtcore.attention.gaussian_velocity`), and Gaussians stay Gaussian. Their moments solve

.. math::

    \mu' = (F + G)\mu + b, \qquad \Sigma' = F\Sigma + \Sigma F^\top,

which for the paper's dot-product attention is eq. (1.1) (the conventions of :mod:`gtcore.controls`).

Modules: :mod:`~gtcore.moments.ode` (the right-hand side and its adaptive integration),
:mod:`~gtcore.moments.layers` (the exact layer map), :mod:`~gtcore.moments.batched` (many constant
controls stacked side by side, every attention type) and :mod:`~gtcore.moments.lanes` (the DOP853 lanes stepper
it uses).
"""

from __future__ import annotations

from gtcore.moments.batched import LaneMoments, LaneStack, integrate_moments_lanes, stack_controls
from gtcore.moments.layers import LayerTrajectory, layer_map, layer_stack
from gtcore.moments.ode import MAX_NFEV, MomentTrajectory, integrate_moments, moment_rhs

__all__ = [
    "MAX_NFEV",
    "LaneMoments",
    "LaneStack",
    "LayerTrajectory",
    "MomentTrajectory",
    "integrate_moments",
    "integrate_moments_lanes",
    "layer_map",
    "layer_stack",
    "moment_rhs",
    "stack_controls",
]
