r"""Chapter 2: where invariance ends: ReLU feed-forward layers, Gaussian mixtures, and a general layer in d = 3.

The chapter imports what it calls from here:

* :mod:`~gtbook.studies.beyond.runs`: one function per section (the ReLU sweep, the prediction's null, the
  departure rates, the mixture, the statistics against exact values), each returning a result with its
  table and figures;
* :mod:`~gtbook.studies.beyond.general`: the feed-forward fold through a general layer, and a mixture with
  full covariances against its sampler;
* :mod:`~gtbook.studies.beyond.figures`, :mod:`~gtbook.studies.beyond.harness`,
  :mod:`~gtbook.studies.beyond.exact_statistics`: the figures, a cloud tracked in time, the exact values.
"""

from gtbook.studies.beyond.general import (
    FoldCheck,
    MixtureSampleCheck,
    feedforward_fold_check,
    general_mixture,
    mixture_sample_check,
)
from gtbook.studies.beyond.runs import (
    DepartureRates,
    MixtureStudy,
    PredictionNull,
    ReluLayer,
    ReluSweep,
    StatisticChecks,
    departure_rates,
    mixture_study,
    prediction_null,
    relu_sweep,
    statistic_checks,
)

__all__ = [
    "DepartureRates",
    "FoldCheck",
    "MixtureSampleCheck",
    "MixtureStudy",
    "PredictionNull",
    "ReluLayer",
    "ReluSweep",
    "StatisticChecks",
    "departure_rates",
    "feedforward_fold_check",
    "general_mixture",
    "mixture_sample_check",
    "mixture_study",
    "prediction_null",
    "relu_sweep",
    "statistic_checks",
]
