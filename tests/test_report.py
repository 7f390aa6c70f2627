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
    return {"name": name, "statement": statement, "kind": kind, "value": 0.5, "threshold": "< 1",
            "passed": passed}


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


def test_a_recorded_non_reproduction_is_not_reproduced(tmp_path):
    _notebook(tmp_path / "05_a.ipynb", [
        _c("n1", "pretrained_gaussian", "not_reproduced"), _c("r1", "pretrained_gaussian", "reproduces"),
        _c("k1", "pretrained_gaussian", "control"), _c("r2", "invariance", "reproduces")])
    status = {s.statement.id: s.status for s in statement_statuses(collect_claims(tmp_path))}
    assert status["pretrained_gaussian"] == "not reproduced"  # even with a reproduction of a part of it
    assert status["invariance"] == "reproduced"
    text = report_markdown(tmp_path)
    n_paper = sum(s.scope == "paper" for s in load_statements().values())
    assert f"**1 of {n_paper} statements of the paper reproduced; 1 not reproduced; 1 not reproducible here.**" in text
    assert "4 claims in all: 2 reproductions, 1 non-reproductions, 1 controls, 0 consistency checks" in text
    assert "n1" in text  # the non-reproduction is listed under its statement
