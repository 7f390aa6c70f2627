r"""Chapter 5: pretrained Transformers fed Gaussian tokens; how close to Gaussian the token cloud stays,
layer by layer.

* :mod:`~gtbook.studies.pretrained.criterion`: the registered effect-size criterion (a model layer by
  layer against the Student-t reference, the verdicts, the studies over sizes and modes);
* :mod:`~gtbook.studies.pretrained.effects`: the effect sizes it compares (the three statistics within
  sequences, their Gaussian null, the bootstrap over sequences, the Student-t reference law);
* :mod:`~gtbook.studies.pretrained.training`: the paper's two architectures trained here (a
  DeiT-tiny-configured ViT on scikit-learn's digits, a small ModernBERT with masked-language
  modelling on the standard library's ``pydoc_data`` topics), cached as safetensors; their data and
  configurations in :mod:`~gtbook.studies.pretrained.training_data`;
* :mod:`~gtbook.studies.pretrained.side_by_side`: the two trainings at once, one in a child process;
* :mod:`~gtbook.studies.pretrained.clustering`: pairwise cosine similarities and cluster counts per layer;
* :mod:`~gtbook.studies.pretrained.statistics` and :mod:`~gtbook.studies.pretrained.layer_criteria`: the
  Gaussianity statistics against their noise bands (the earlier criterion; ``gtbook probe``);
* :mod:`~gtbook.studies.pretrained.profile`: the effect sizes read as a profile over depth (fractions of the
  reference with intervals, the statement's two parts in plain words) and how far each block moves its tokens;
* :mod:`~gtbook.studies.pretrained.presentation`: the chapter's results as objects with their tables and figures;
* :mod:`~gtbook.studies.pretrained.figures`: the chapter's figures.

The models are loaded and run layer by layer by :mod:`gtcore.models`.
"""

from gtbook.studies.pretrained.criterion import REFERENCE_NU, SENSITIVITY_NU, study_model
from gtbook.studies.pretrained.effects import STATISTICS, Settings
from gtbook.studies.pretrained.presentation import (
    CriterionRun,
    clustering_run,
    model_scope,
    size_sweep,
)
from gtbook.studies.pretrained.profile import Reading, update_norms, update_table
from gtbook.studies.pretrained.side_by_side import train_side_by_side
from gtbook.studies.pretrained.training import TRAINED_HERE, mlm_schedule, vit_schedule

__all__ = [
    "REFERENCE_NU",
    "SENSITIVITY_NU",
    "STATISTICS",
    "TRAINED_HERE",
    "CriterionRun",
    "Reading",
    "Settings",
    "clustering_run",
    "mlm_schedule",
    "model_scope",
    "size_sweep",
    "study_model",
    "train_side_by_side",
    "update_norms",
    "update_table",
    "vit_schedule",
]
