import math

import numpy as np
import pytest

from gtbook.claims import KINDS, ClaimFailed, claim, claims_in_notebook, evaluate_claim
from gtbook.statements import StatementError, load_statements

LABEL = dict(statement="invariance", kind="reproduces")


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
    assert evaluate_claim("x", **LABEL, **kwargs).passed is passed


def test_claim_raises_after_recording(capsys):
    claim("fine", 0.1, lt=1.0, **LABEL)
    assert "PASS  fine [reproduces: invariance]" in capsys.readouterr().out
    with pytest.raises(ClaimFailed, match="FAIL  broken"):
        claim("broken", 2.0, lt=1.0, **LABEL)
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
        evaluate_claim("x", **LABEL, **kwargs)


def test_claims_are_read_back_from_notebook_outputs():
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "data": {
                            "text/plain": "PASS",
                            "application/vnd.gtbook.claim+json": {
                                "name": "a",
                                "statement": "T",
                                "kind": "control",
                                "value": 1.0,
                                "threshold": "< 2",
                                "passed": True,
                            },
                        },
                    }
                ],
            },
            {"cell_type": "markdown", "source": "x"},
        ]
    }
    assert claims_in_notebook(nb) == [
        {"name": "a", "statement": "T", "kind": "control", "value": 1.0, "threshold": "< 2", "passed": True}
    ]


@pytest.mark.parametrize(
    "label, match",
    [
        (dict(statement="no_such_statement", kind="reproduces"), "unknown statement 'no_such_statement'.*invariance"),
        (
            dict(statement="invariance", kind="reproduction"),
            "kind must be one of reproduces, not_reproduced, derivation, consistency, control",
        ),
    ],
)
def test_unknown_statement_or_kind_is_an_error(label, match):
    with pytest.raises(ValueError, match=match):
        claim("x", 0.1, lt=1.0, **label)


def test_registry_entries_are_complete():
    statements = load_statements()
    assert {
        "invariance",
        "reduction",
        "rank_invariance",
        "reachability",
        "stabilising",
        "blowup",
        "riccati",
        "mean_steering",
        "pretrained_gaussian",
        "prescribed_regimes",
        "mixtures_not_invariant",
    } <= set(statements)
    for st in statements.values():
        assert st.origin in ("paper", "beyond")
        assert st.reproducible_here or st.reason
        assert '"' not in st.paraphrase, "paraphrases are not quotations"
    assert set(KINDS) == {"reproduces", "not_reproduced", "derivation", "consistency", "control", "instrument"}


@pytest.mark.parametrize(
    "text, match",
    [
        ('[a]\ntitle = "t"\n', "lacks"),
        ('[a]\ntitle="t"\nparaphrase="p"\nwhere="w"\norigin="elsewhere"\nreproducible_here=true\n', "origin"),
        ('[a]\ntitle="t"\nparaphrase="p"\nwhere="w"\norigin="paper"\nreproducible_here=false\n', "no reason"),
        ('[a]\ntitle="t"\nparaphrase="p"\nwhere="w"\norigin="paper"\nreproducible_here=true\nextra=1\n', "unknown"),
        (
            '[a]\ntitle="t"\nparaphrase="p"\nwhere="w"\norigin="paper"\nreproducible_here=true\n[a.stated]\nV="vI"\n',
            "stated",
        ),
        ("[a\n", "not valid TOML"),
    ],
)
def test_malformed_registry_is_refused(tmp_path, text, match):
    path = tmp_path / "statements.toml"
    path.write_text(text)
    with pytest.raises(StatementError, match=match):
        load_statements(path)


def test_keep_going_records_a_failure_without_raising(monkeypatch, capsys):
    """The mutation check's second look (GTBOOK_CLAIMS_KEEP_GOING) sees every failing claim of a chapter."""
    from gtbook.claims import KEEP_GOING_ENV

    monkeypatch.setenv(KEEP_GOING_ENV, "1")
    claim("kept", 2.0, lt=1.0, statement="invariance", kind="derivation")
    assert "FAIL  kept [derivation: invariance]" in capsys.readouterr().out
    monkeypatch.delenv(KEEP_GOING_ENV)
    with pytest.raises(ClaimFailed):
        claim("kept", 2.0, lt=1.0, statement="invariance", kind="derivation")
