"""Chapter 6: prescribed attention on real Transformer code.

The chapter imports its study functions from here (each returns a result dataclass with its figure)."""

from gtbook.studies.prescribed.general import general_regimes
from gtbook.studies.prescribed.sections import beta_study, bridge_errors, depth_study, example_nulls, vi_example

__all__ = ["beta_study", "bridge_errors", "depth_study", "example_nulls", "general_regimes", "vi_example"]
