r"""Chapter 1: Gaussian invariance against N-token softmax Transformers.

The chapter imports what it calls from here: one function per section (:mod:`~gtbook.studies.invariance.runs`),
the direct maximisation of :math:`\kappa` (:mod:`~gtbook.studies.invariance.strength`) and the figures
(:mod:`~gtbook.studies.invariance.figures`). The ensembles of general layers are
:mod:`~gtbook.studies.invariance.ensemble`, their census :mod:`~gtbook.studies.invariance.census`.
"""

from gtbook.studies.invariance import figures
from gtbook.studies.invariance.census import DrawCensus, draw_census
from gtbook.studies.invariance.runs import (
    EnsembleStudy,
    FiniteNRates,
    GaussianityStudy,
    LayerMapCheck,
    StackRates,
    ensemble_study,
    excursion,
    finite_n_rates,
    gaussianity_study,
    layer_map_check,
    stack_rates,
)
from gtbook.studies.invariance.strength import strength_draws

__all__ = [
    "DrawCensus",
    "EnsembleStudy",
    "FiniteNRates",
    "GaussianityStudy",
    "LayerMapCheck",
    "StackRates",
    "draw_census",
    "ensemble_study",
    "excursion",
    "figures",
    "finite_n_rates",
    "gaussianity_study",
    "layer_map_check",
    "stack_rates",
    "strength_draws",
]
