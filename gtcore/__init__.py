r"""gtcore: the numerics of *Reachability and asymptotics of Gaussian Transformer dynamics*.

Alcalde, Ji, Zuazua (2026), arXiv:2606.07600. Tokens :math:`x \in \mathbb{R}^d` move by the mean-field
velocity :math:`v[\rho](x) = Ax + b + V\,\int y\,e^{y^\top Bx}\,d\rho(y) / \int e^{y^\top Bx}\,d\rho(y)`;
Gaussians stay Gaussian, and their moments solve eq. (1.1),

.. math::

    \mu' = (A + V)\mu + V\Sigma B\mu + b, \qquad
    \Sigma' = A\Sigma + \Sigma A^\top + V\Sigma B\Sigma + \Sigma B^\top\Sigma V^\top .

The names below are the core's public surface, sorted; each is imported on first use (so
``import gtcore`` loads neither torch nor scipy's integrators). Above the core, in this package:
:mod:`gtcore.models` (pretrained and prescribed Transformers, the ``models`` extra). The book that checks
the paper's statements with this library is another package, ``gtbook``; ``gtcore`` never imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that owns it
_LAZY: dict[str, str] = {
    "ATTENTION_TYPES": "gtcore.attention",
    "AttentionType": "gtcore.attention",
    "BlowupTime": "gtcore.riccati",
    "Controls": "gtcore.controls",
    "DotProduct": "gtcore.attention",
    "Equilibrium": "gtcore.stability",
    "GainThreshold": "gtcore.riccati",
    "GaussianMixture": "gtcore.stats.mixtures",
    "L2": "gtcore.attention",
    "LabelledTokens": "gtcore.stats.mixtures",
    "LayerTrajectory": "gtcore.moments",
    "LinearStability": "gtcore.stability",
    "MinEnergyResult": "gtcore.reachability",
    "MomentTrajectory": "gtcore.moments",
    "NoEquilibriumError": "gtcore.stability",
    "NoiseFloor": "gtcore.stats.gaussianity",
    "ParticleTrajectory": "gtcore.particles",
    "PiecewiseControls": "gtcore.controls",
    "RankMismatchError": "gtcore.reachability",
    "Regime": "gtcore.stability",
    "Sinkhorn": "gtcore.attention",
    "Stability": "gtcore.status",
    "Status": "gtcore.status",
    "SteeringControls": "gtcore.reachability",
    "Verdict": "gtcore.status",
    "asymptotic_mean": "gtcore.stability",
    "bias_for_mean_target": "gtcore.stability",
    "blowup_time": "gtcore.riccati",
    "bures_wasserstein": "gtcore.stats.gaussianity",
    "classify": "gtcore.stability",
    "covariance_rank": "gtcore.reachability",
    "critical_gain": "gtcore.riccati",
    "empirical_moments": "gtcore.stats.gaussianity",
    "endpoint_error": "gtcore.reachability",
    "equilibrium": "gtcore.stability",
    "excess_kurtosis_per_coordinate": "gtcore.stats.gaussianity",
    "gain_threshold": "gtcore.riccati",
    "gaussian_tokens": "gtcore.stats.sampling",
    "integrate_moments": "gtcore.moments",
    "layer_map": "gtcore.moments",
    "layer_stack": "gtcore.moments",
    "linear_stability": "gtcore.stability",
    "mardia_kurtosis": "gtcore.stats.gaussianity",
    "mardia_kurtosis_excess": "gtcore.stats.gaussianity",
    "mardia_skewness": "gtcore.stats.gaussianity",
    "moment_rhs": "gtcore.moments",
    "noise_floor": "gtcore.stats.gaussianity",
    "riccati_quadratic": "gtcore.riccati",
    "simulate": "gtcore.particles",
    "sliced_w2": "gtcore.stats.gaussianity",
    "steer": "gtcore.reachability",
    "steer_min_energy": "gtcore.reachability",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:  # the same names, for type checkers and IDEs
    from gtcore.attention import ATTENTION_TYPES, L2, AttentionType, DotProduct, Sinkhorn
    from gtcore.controls import Controls, PiecewiseControls
    from gtcore.moments import LayerTrajectory, MomentTrajectory, integrate_moments, layer_map, layer_stack, moment_rhs
    from gtcore.particles import ParticleTrajectory, simulate
    from gtcore.reachability import (
        MinEnergyResult,
        RankMismatchError,
        SteeringControls,
        covariance_rank,
        endpoint_error,
        steer,
        steer_min_energy,
    )
    from gtcore.riccati import BlowupTime, GainThreshold, blowup_time, critical_gain, gain_threshold, riccati_quadratic
    from gtcore.stability import (
        Equilibrium,
        LinearStability,
        NoEquilibriumError,
        Regime,
        asymptotic_mean,
        bias_for_mean_target,
        classify,
        equilibrium,
        linear_stability,
    )
    from gtcore.stats.gaussianity import (
        NoiseFloor,
        bures_wasserstein,
        empirical_moments,
        excess_kurtosis_per_coordinate,
        mardia_kurtosis,
        mardia_kurtosis_excess,
        mardia_skewness,
        noise_floor,
        sliced_w2,
    )
    from gtcore.stats.mixtures import GaussianMixture, LabelledTokens
    from gtcore.stats.sampling import gaussian_tokens
    from gtcore.status import Stability, Status, Verdict


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gtcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
