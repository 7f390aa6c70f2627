"""gtcore: numerics for *Reachability and asymptotics of Gaussian Transformer dynamics*.

Alcalde, Ji, Zuazua (2026), arXiv:2606.07600. The public surface is re-exported here.
"""

from .claims import ClaimFailed, claim
from .controls import Controls, PiecewiseControls
from .moments import MomentTrajectory, integrate_moments, layer_map, layer_stack, moment_rhs
from .sampling import gaussian_tokens
from .stability import (
    NoEquilibriumError,
    asymptotic_mean,
    bias_for_mean_target,
    blowup_time,
    classify,
    equilibrium,
    linear_stability,
)

__all__ = [
    "ClaimFailed",
    "NoEquilibriumError",
    "asymptotic_mean",
    "bias_for_mean_target",
    "blowup_time",
    "classify",
    "equilibrium",
    "linear_stability",
    "Controls",
    "MomentTrajectory",
    "PiecewiseControls",
    "claim",
    "gaussian_tokens",
    "integrate_moments",
    "layer_map",
    "layer_stack",
    "moment_rhs",
]

__version__ = "0.1.0"
