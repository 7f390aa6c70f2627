"""Every public name of gtcore (its ``_LAZY`` table) carries a runnable ``Examples`` section, and the examples give
the outputs they print; so do the inference helpers of :mod:`gtcore.stats.inference`.

The examples are short and check themselves against closed forms where one exists (a pole at :math:`t = 1/2`,
:math:`e^{-2t}`, the golden ratio of the Sinkhorn gain, :math:`d(d + 2)` for Mardia's kurtosis); outputs are
exact or rounded. Names without an example are listed, with the reason, in :data:`WITHOUT_EXAMPLES`.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import gtcore
from gtcore.stats import inference

#: public names that carry no example of their own, and why
WITHOUT_EXAMPLES = {
    "ATTENTION_TYPES": "data (a dict): its docstring is dict's; AttentionType's example reads it",
    "simulate": "gtcore/particles.py is outside this change; its tests run it",
    "ParticleTrajectory": "gtcore/particles.py is outside this change; its tests run it",
}

NAMES = sorted(set(gtcore._LAZY) - set(WITHOUT_EXAMPLES))
INFERENCE = [
    "hotelling_test",
    "loglog_slope",
    "magnitude_interval",
    "normal_band",
    "pooled_loglog_slope",
    "resample_counts",
    "wilson_interval",
    "extrapolated_deviations",
]


def _run_examples(obj: object, name: str) -> doctest.TestResults:
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={"np": np})
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    return runner.summarize(verbose=False)


def test_the_exceptions_are_public_names():
    assert set(WITHOUT_EXAMPLES) <= set(gtcore._LAZY)


@pytest.mark.parametrize("name", NAMES)
def test_public_name_has_an_example_that_runs(name):
    obj = getattr(gtcore, name)
    assert "Examples" in (obj.__doc__ or ""), f"gtcore.{name}: no Examples section"
    result = _run_examples(obj, f"gtcore.{name}")
    assert result.attempted > 0 and result.failed == 0, result


@pytest.mark.parametrize("name", INFERENCE)
def test_inference_helper_examples_run(name):
    result = _run_examples(getattr(inference, name), name)
    assert result.attempted > 0 and result.failed == 0, result
