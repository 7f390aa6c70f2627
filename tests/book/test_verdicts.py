"""Scopes and verdicts: a statement is reproduced only as far as its reproductions' scopes reach, and its
status is worded once (gtbook.scope, gtbook.verdicts). The expected statuses are written out by hand here
from the rules of the module docstrings, independently of the code's ordering of the classes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gtbook.claims import evaluate_claim
from gtbook.scope import Scope, StatedScope, System, covers, describe, parse_scope, widest
from gtbook.statements import Statement
from gtbook.verdicts import Evidence, StatementStatus, chapter_opening_markdown, status_list_markdown

GENERAL = StatedScope()


def tokens(**kw):
    return Scope(system=System.TOKENS, **{"d": (3,), **kw})


@pytest.mark.parametrize(
    "scope, expected",
    [
        (tokens(), True),
        (tokens(d=(2,)), False),  # any d needs d >= 3
        (tokens(d=(2, 4)), True),
        (tokens(V="scalar"), False),
        (tokens(B="symmetric"), False),
        (tokens(A="normal"), False),
        (tokens(A="zero"), False),
        (tokens(family="A skew, Sigma0 = sI"), False),  # a special family never covers a class
        (tokens(attention=("l2",)), False),
    ],
)
def test_covers_the_general_case_only_when_every_axis_does(scope, expected):
    assert covers(scope, GENERAL) is expected


def test_a_narrower_statement_is_covered_by_a_claim_of_its_own_classes():
    peer = StatedScope(A="zero", V="symmetric", attention=("dot", "l2"))
    assert covers(tokens(A="zero", V="symmetric", attention=("dot", "l2")), peer)
    assert covers(tokens(attention=("dot", "l2")), peer)  # more general classes still cover
    assert not covers(tokens(A="zero", V="symmetric"), peer)  # l2 missing
    assert covers(tokens(heads=2), StatedScope(heads=2)) and not covers(tokens(), StatedScope(heads=2))
    assert covers(tokens(d=(2, 3)), StatedScope(d=(2, 3))) and not covers(tokens(d=(3,)), StatedScope(d=(2, 3)))


def test_describe_names_each_axis_that_falls_short():
    assert describe(tokens(), GENERAL) == ""
    assert describe(tokens(V="scalar", d=(2, 3)), GENERAL) == "V = vI"
    assert describe(tokens(V="scalar", B="symmetric", d=(2,)), GENERAL) == "symmetric B, V = vI, d ≤ 2"
    assert describe(Scope(system=System.MODEL_CODE, d=(3,), A="zero", V="scalar"), GENERAL) == (
        "A = 0, V = vI (Transformer code)"
    )
    assert describe(Scope(system=System.MODEL_CODE, d=(3,), A="zero", V="scalar", family="bert code"), GENERAL) == (
        "A = 0, V = vI (bert code, Transformer code)"
    )
    assert describe(Scope(system=System.TRAINED_MODEL, d=(8,), family="a model"), GENERAL) == "a model (trained model)"


def test_widest_keeps_the_incomparable_scopes():
    a, b, c = tokens(V="scalar"), tokens(B="symmetric"), tokens(V="scalar", B="symmetric")
    assert widest([c, a, b, a]) == [a, b]


def test_parse_scope_and_its_refusals():
    assert parse_scope("instrument").system is System.INSTRUMENT
    assert parse_scope({"system": "tokens", "d": 3}).d == (3,)
    for bad, match in (
        (dict(system="tokens", V="vI"), "V must be one of"),
        (dict(d=3), "name its system"),
        (dict(system="tokens", d=0), "positive"),
        (dict(system="tokens", colour=1), "unknown"),
        ("telepathy", "unknown system"),
    ):
        with pytest.raises(ValueError, match=match):
            parse_scope(bad)


def test_a_reproduction_needs_an_independent_system():
    with pytest.raises(ValueError, match="independent of eq"):
        evaluate_claim("x", 0.1, statement="invariance", kind="reproduces", lt=1, scope={"system": "moment ODE"})
    with pytest.raises(ValueError, match="independent of eq"):
        evaluate_claim("x", 0.1, statement="invariance", kind="not_reproduced", lt=1, scope="closed form")
    ok = evaluate_claim("x", 0.1, statement="riccati", kind="derivation", lt=1, scope="moment ODE")
    assert ok.scope["system"] == "moment ODE"
    with pytest.raises(ValueError, match="no statement"):
        evaluate_claim("x", True, statement="invariance", kind="instrument")
    with pytest.raises(ValueError, match="names the statement"):
        evaluate_claim("x", True, statement=None, kind="derivation")
    assert evaluate_claim("x", True, statement=None, kind="instrument").scope == {"system": "the book's statistics"}


@dataclass
class Row:
    name: str
    kind: str
    scope: dict | None
    passed: bool = True
    chapter: str = "04_x"
    statement: str = "s"
    extra: dict = field(default_factory=dict)


def _statement(**stated):
    return Statement(
        id="s",
        title="S",
        paraphrase="p",
        where="w",
        origin="paper",
        reproducible_here=True,
        stated=StatedScope(**stated),
    )


def _status(rows, **stated):
    st = StatementStatus(_statement(**stated), rows)
    return st.status, st.text


def test_reproduced_only_when_a_reproduction_covers_the_stated_scope():
    scalar = tokens(V="scalar", d=(2, 3)).as_dict()
    general = tokens().as_dict()
    assert _status([Row("a", "reproduces", general)]) == (Evidence.REPRODUCED, "reproduced")
    assert _status([Row("a", "reproduces", scalar)]) == (Evidence.REPRODUCED_IN_PART, "reproduced for V = vI")
    assert _status([Row("a", "reproduces", None)]) == (Evidence.REPRODUCED_IN_PART, "reproduced for scope not recorded")
    # V = vI and B symmetric in two claims: two incomparable scopes, both named
    sym = tokens(B="symmetric").as_dict()
    assert _status([Row("a", "reproduces", scalar), Row("b", "reproduces", sym)])[1] == (
        "reproduced for V = vI; symmetric B"
    )
    # a narrower stated scope is covered by a claim of that class
    assert _status([Row("a", "reproduces", scalar)], V="scalar")[0] is Evidence.REPRODUCED


def test_not_reproduced_names_where_and_where_it_held():
    general = tokens().as_dict()
    scalar = tokens(V="scalar").as_dict()
    status, text = _status([Row("a", "not_reproduced", general), Row("b", "reproduces", scalar)])
    assert status is Evidence.NOT_REPRODUCED and text == "not reproduced; reproduced for V = vI"
    status, text = _status([Row("a", "not_reproduced", tokens(V="symmetric").as_dict())])
    assert text == "not reproduced for symmetric V"
    assert _status([Row("a", "reproduces", general, passed=False)])[0] is Evidence.FAILED
    assert _status([Row("a", "derivation", {"system": "moment ODE"})])[0] is Evidence.DERIVED
    assert _status([Row("a", "control", general), Row("b", "consistency", None)])[0] is Evidence.CONSISTENCY
    assert _status([Row("a", "instrument", None)])[0] is Evidence.NOT_CHECKED  # instruments count for nothing


def test_the_pages_word_the_status_the_same_way():
    st = StatementStatus(
        _statement(),
        [
            Row("a", "reproduces", tokens(V="scalar").as_dict(), chapter="04_x"),
            Row("b", "derivation", {"system": "moment ODE"}, chapter="04_x"),
        ],
    )
    listed = status_list_markdown([st])
    opening = chapter_opening_markdown("04_x", [st], figure="fig-x", summary="Two sentences.")
    assert "**S**: reproduced for V = vI" in listed and "04_x" in listed
    assert "**S**: reproduced for V = vI (1 reproduces, 1 derivation here)." in opening
    assert "Two sentences." in opening and "{numref}`fig-x`" in opening
    assert "checks no statement" in chapter_opening_markdown("05_y", [st])
