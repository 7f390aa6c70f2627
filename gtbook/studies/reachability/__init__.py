"""Chapter 3: rank invariance and reachability on tokens.

The chapter imports its study functions from here (each returns a result dataclass with its figure)."""

from gtbook.studies.reachability.attention_only import attention_only_steering
from gtbook.studies.reachability.figures import heads_figure, rank_figure
from gtbook.studies.reachability.measured import measured_steering
from gtbook.studies.reachability.sections import (
    EXAMPLES,
    attention_example,
    min_energy_study,
    rank_on_ode,
    rank_tokens_study,
    steered_study,
    steering_examples,
    token_distance_study,
)

__all__ = [
    "EXAMPLES",
    "attention_example",
    "attention_only_steering",
    "heads_figure",
    "measured_steering",
    "min_energy_study",
    "rank_figure",
    "rank_on_ode",
    "rank_tokens_study",
    "steered_study",
    "steering_examples",
    "token_distance_study",
]
