"""gtcore: numerics for *Reachability and asymptotics of Gaussian Transformer dynamics*.

Alcalde, Ji, Zuazua (2026), arXiv:2606.07600. The public surface is re-exported here.
"""

from .attention import ATTENTION_TYPES, AttentionType, DotProduct
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
from .mixtures import GaussianMixture, LabelledTokens
from .moments import LayerTrajectory, MomentTrajectory, integrate_moments, layer_map, layer_stack, moment_rhs
from .particles import ParticleTrajectory, simulate
from .pretrained import (
    LayerStatistics,
    LoadedTransformer,
    ModelNotAvailable,
    ProbeResult,
    layer_statistics,
    load_transformer,
    probe,
)
from .prescribed import PrescribedTransformer, prescribed_transformer
from .prescribed import hidden_states as prescribed_hidden_states
from .reachability import (
    MinEnergyResult,
    RankMismatchError,
    SteeringControls,
    covariance_rank,
    endpoint_error,
    steer,
    steer_min_energy,
)
from .riccati import BlowupTime, GainThreshold, blowup_time, critical_gain, gain_threshold, riccati_quadratic
from .sampling import gaussian_tokens
from .stability import (
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
from .studies.beyond import GaussianityPath
from .studies.invariance import MeanFieldStudy
from .studies.reachability import RankInvariance
from .studies.stability import RegimeBoundary, RegimeMap

__all__ = [
    "ATTENTION_TYPES",
    "AttentionType",
    "BlowupTime",
    "DotProduct",
    "Equilibrium",
    "GaussianityPath",
    "LabelledTokens",
    "LayerTrajectory",
    "LinearStability",
    "LoadedTransformer",
    "MeanFieldStudy",
    "MinEnergyResult",
    "ParticleTrajectory",
    "RankInvariance",
    "Regime",
    "RegimeBoundary",
    "RegimeMap",
    "SteeringControls",
    "critical_gain",
    "GainThreshold",
    "gain_threshold",
    "riccati_quadratic",
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
