import math

import numpy as np
import pytest

from gtcore.claims import ClaimFailed, claim, claims_in_notebook, evaluate_claim


@pytest.mark.parametrize(
    "kwargs, passed",
    [
        (dict(value=0.1, lt=0.5), True),
        (dict(value=0.6, lt=0.5), False),
        (dict(value=-0.5, gt=-0.65, lt=-0.35), True),
        (dict(value=-0.3, gt=-0.65, lt=-0.35), False),
        (dict(value=1.0 + 1e-9, close_to=1.0, rtol=1e-6), True),
        (dict(value=1.1, close_to=1.0, atol=0.05), False),
        (dict(value=True), True),
        (dict(value=False), False),
        (dict(value=math.nan, lt=1.0), False),
        (dict(value=np.bool_(True)), True),
        (dict(value=np.all([1, 0])), False),
    ],
)
def test_criteria(kwargs, passed):
    assert evaluate_claim("x", paper="Theorem 1", **kwargs).passed is passed


def test_claim_raises_after_recording(capsys):
    claim("fine", 0.1, lt=1.0, paper="eq. (1.1)")
    assert "PASS  fine [eq. (1.1)]" in capsys.readouterr().out
    with pytest.raises(ClaimFailed, match="FAIL  broken"):
        claim("broken", 2.0, lt=1.0, paper="eq. (1.1)")
    assert "FAIL  broken" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(value=1.0), "threshold"),
        (dict(value=1.0, close_to=1.0), "rtol or atol"),
        (dict(value=1.0, lt=2.0, close_to=1.0, rtol=0.1), "either"),
        (dict(value=1.0, rtol=0.1), "close_to"),
        (dict(value=True, lt=1.0), "boolean"),
        (dict(value="abc", lt=1.0), "number"),
    ],
)
def test_bad_criteria(kwargs, match):
    with pytest.raises(ValueError, match=match):
        evaluate_claim("x", **kwargs)


def test_claims_are_read_back_from_notebook_outputs():
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {
            "text/plain": "PASS",
            "application/vnd.gtbook.claim+json": {"name": "a", "paper": "T", "value": 1.0,
                                                  "threshold": "< 2", "passed": True}}}]},
        {"cell_type": "markdown", "source": "x"}]}
    assert claims_in_notebook(nb) == [{"name": "a", "paper": "T", "value": 1.0, "threshold": "< 2", "passed": True}]
