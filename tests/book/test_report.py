"""The report groups claims by statement and counts statements, not claims."""

import nbformat

from gtbook.report import Evidence, collect_claims, report_markdown, statement_statuses
from gtbook.statements import load_statements


def _notebook(path, claims, profile="quick", seed=3):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/plain": "x", "application/vnd.gtbook.claim+json": c})
        for c in claims
    ]
    nb.cells = [cell]
    nb.metadata["gtbook"] = {"profile": profile, "parameters": {"seed": seed}, "runtime_s": 1.5}
    nbformat.write(nb, path)


#: a scope that covers any statement stated for general parameters at any d
GENERAL = {
    "system": "finite-N tokens",
    "d": [3],
    "A": "general",
    "B": "general",
    "V": "general",
    "heads": 1,
    "attention": ["dot"],
    "family": "",
}


def _c(name, statement, kind, passed=True, scope=GENERAL):
    # the report evaluates each claim again from its value and criterion: a failing claim has a failing value
    return {
        "name": name,
        "statement": statement,
        "kind": kind,
        "value": 0.5 if passed else 1.5,
        "threshold": "< 1",
        "passed": passed,
        "scope": scope,
    }


def test_statuses_follow_the_kinds(tmp_path):
    _notebook(
        tmp_path / "01_a.ipynb",
        [
            _c("r1", "invariance", "reproduces"),
            _c("k1", "invariance", "control"),
            _c("c1", "reduction", "consistency"),
            _c("k2", "reduction", "control"),
            _c("d1", "riccati", "derivation"),
            _c("c2", "riccati", "consistency"),
            _c("k3", "riccati", "control"),
            _c("d2", "rank_invariance", "derivation"),
            _c("r4", "rank_invariance", "reproduces"),
            _c("r2", "blowup", "reproduces"),
            _c("r3", "blowup", "reproduces", passed=False),
            _c("d3", "stabilising", "derivation", passed=False),
        ],
    )
    rows = collect_claims(tmp_path)
    assert [r.name for r in rows][:3] == ["r1", "k1", "c1"] and rows[0].seed == 3
    status = {s.statement.id: s.status for s in statement_statuses(rows)}
    assert status["invariance"] is Evidence.REPRODUCED and status["invariance"] == "reproduced"
    assert status["reduction"] is Evidence.CONSISTENCY
    assert status["riccati"] is Evidence.DERIVED and str(status["riccati"]) == "derived only"
    assert status["rank_invariance"] is Evidence.REPRODUCED  # a reproduction outranks a derivation
    assert status["blowup"] is Evidence.FAILED and status["stabilising"] is Evidence.FAILED
    assert status["pretrained_paper_models"] is Evidence.NOT_REPRODUCIBLE
    assert status["reachability"] is Evidence.NOT_CHECKED


def test_headline_counts_statements_by_status(tmp_path):
    _notebook(
        tmp_path / "01_a.ipynb",
        [
            _c("r1", "invariance", "reproduces"),
            _c("r2", "invariance", "reproduces"),
            _c("d", "riccati", "derivation"),
            _c("c", "reduction", "consistency"),
            _c("b", "beyond_finite_n", "reproduces"),
        ],
    )
    text = report_markdown(tmp_path)
    statements = load_statements().values()
    n_paper = sum(s.origin == "paper" for s in statements)
    n_beyond = sum(s.origin == "beyond" for s in statements)
    assert (
        f"**1 of {n_paper} statements of the paper reproduced**; 1 derived only, 1 consistency only, "
        f"1 not reproducible here, {n_paper - 4} not checked."
    ) in text
    assert f"Beyond the paper: 1 of {n_beyond} reproduced; {n_beyond - 1} not checked." in text
    assert (
        "5 claims in all: 3 reproductions, 1 derivations, 1 consistency checks, 0 controls, 0 checks of the "
        "book's own statistics."
    ) in text
    assert "Beyond the paper" in text and "Not reproducible here:" in text
    assert "Mutation check" not in text  # no book/mutations.json beside this executed/ folder


def test_a_recorded_non_reproduction_is_not_reproduced(tmp_path):
    _notebook(
        tmp_path / "05_a.ipynb",
        [
            _c("n1", "pretrained_gaussian", "not_reproduced"),
            _c("r1", "pretrained_gaussian", "reproduces"),
            _c("k1", "pretrained_gaussian", "control"),
            _c("r2", "invariance", "reproduces"),
        ],
    )
    status = {s.statement.id: s.status for s in statement_statuses(collect_claims(tmp_path))}
    assert status["pretrained_gaussian"] == "not reproduced"  # even with a reproduction of a part of it
    assert status["invariance"] == "reproduced"
    text = report_markdown(tmp_path)
    n_paper = sum(s.origin == "paper" for s in load_statements().values())
    assert f"**1 of {n_paper} statements of the paper reproduced**; 1 not reproduced, " in text
    assert (
        "4 claims in all: 2 reproductions, 1 non-reproductions, 0 derivations, 0 consistency checks, "
        "1 controls, 0 checks of the book's own statistics."
    ) in text
    assert "n1" in text  # the non-reproduction is listed under its statement
