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
* :func:`endpoint_error` checks any controls through :func:`gtcore.moments.integrate_moments`.

The controls apply unchanged to N real tokens: :func:`gtcore.particles.simulate` steps exactly to
their breaks. Chapter 3's harness (rank invariance along the ODE, steered token clouds) is
:mod:`gtbook.studies.reachability.harness`.

Modules: :mod:`~gtcore.reachability.rank` (the invariant), :mod:`~gtcore.reachability.steering`
(constructive controls) and :mod:`~gtcore.reachability.min_energy` (beyond the paper).
"""

from __future__ import annotations

from gtcore.reachability.min_energy import (
    MinEnergyResult,
    steer_min_energy,
    steer_min_energy_starts,
)
from gtcore.reachability.rank import RankMismatchError, covariance_rank, singular_values
from gtcore.reachability.steering import (
    SteeringControls,
    control_path,
    endpoint_error,
    steer,
)

__all__ = [
    "MinEnergyResult",
    "RankMismatchError",
    "SteeringControls",
    "control_path",
    "covariance_rank",
    "endpoint_error",
    "singular_values",
    "steer",
    "steer_min_energy",
    "steer_min_energy_starts",
]
