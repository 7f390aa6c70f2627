"""gtcore: numerics for *Reachability and asymptotics of Gaussian Transformer dynamics*.

Alcalde, Ji, Zuazua (2026), arXiv:2606.07600. The public surface is re-exported here.
"""

from .claims import ClaimFailed, claim
from .controls import Controls, PiecewiseControls
from .gaussianity import (
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
from .mixtures import GaussianMixture
from .moments import MomentTrajectory, integrate_moments, layer_map, layer_stack, moment_rhs
from .particles import simulate
from .pretrained import LayerStatistics, ModelNotAvailable, ProbeResult, layer_statistics, load_transformer, probe
from .prescribed import PrescribedTransformer, prescribed_transformer
from .prescribed import hidden_states as prescribed_hidden_states
from .reachability import RankMismatchError, covariance_rank, endpoint_error, steer, steer_min_energy
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
    "GaussianMixture",
    "NoEquilibriumError",
    "LayerStatistics",
    "ModelNotAvailable",
    "NoiseFloor",
    "ProbeResult",
    "layer_statistics",
    "load_transformer",
    "probe",
    "PrescribedTransformer",
    "prescribed_hidden_states",
    "prescribed_transformer",
    "RankMismatchError",
    "covariance_rank",
    "endpoint_error",
    "simulate",
    "steer",
    "steer_min_energy",
    "bures_wasserstein",
    "empirical_moments",
    "excess_kurtosis_per_coordinate",
    "mardia_kurtosis",
    "mardia_kurtosis_excess",
    "mardia_skewness",
    "noise_floor",
    "sliced_w2",
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
