"""The report groups claims by statement and counts statements, not claims."""

import nbformat

from gtcore.book.report import collect_claims, report_markdown, statement_statuses
from gtcore.book.statements import load_statements


def _notebook(path, claims, profile="quick", seed=3):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/plain": "x", "application/vnd.gtbook.claim+json": c}) for c in claims]
    nb.cells = [cell]
    nb.metadata["gtbook"] = {"profile": profile, "parameters": {"seed": seed}, "runtime_s": 1.5}
    nbformat.write(nb, path)


def _c(name, statement, kind, passed=True):
    # the report evaluates each claim again from its value and criterion: a failing claim has a failing value
    return {"name": name, "statement": statement, "kind": kind, "value": 0.5 if passed else 1.5,
            "threshold": "< 1", "passed": passed}


def test_statuses_follow_the_kinds(tmp_path):
    _notebook(tmp_path / "01_a.ipynb", [
        _c("r1", "invariance", "reproduces"), _c("k1", "invariance", "control"),
        _c("c1", "reduction", "consistency"),
        _c("r2", "blowup", "reproduces"), _c("r3", "blowup", "reproduces", passed=False),
    ])
    rows = collect_claims(tmp_path)
    assert [r.name for r in rows] == ["r1", "k1", "c1", "r2", "r3"] and rows[0].seed == 3
    status = {s.statement.id: s.status for s in statement_statuses(rows)}
    assert status["invariance"] == "reproduced"
    assert status["reduction"] == "consistency checks only"
    assert status["blowup"] == "failed"
    assert status["pretrained_paper_models"] == "not reproducible here"
    assert status["reachability"] == "not checked"


def test_headline_counts_statements_of_the_paper(tmp_path):
    _notebook(tmp_path / "01_a.ipynb", [_c("r1", "invariance", "reproduces"), _c("r2", "invariance", "reproduces"),
                                        _c("b", "beyond_finite_n", "reproduces")])
    text = report_markdown(tmp_path)
    n_paper = sum(s.scope == "paper" for s in load_statements().values())
    assert f"**1 of {n_paper} statements of the paper reproduced; 1 not reproducible here.**" in text
    assert "3 claims in all: 3 reproductions, 0 controls, 0 consistency checks" in text
    assert "Beyond the paper" in text and "Not reproducible here:" in text
