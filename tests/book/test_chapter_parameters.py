"""Chapter sources and parameter values: a broken parameters cell stays in its chapter; defaults, profile and
``--set`` values are read one way and type-checked one way; ``gtbook claims --json`` is valid JSON.

Each test drives the pipeline's own functions (or the ``gtbook`` command) on a tiny book and checks the
answer against what the source says (the line of the syntax error, the value ``1 / 4``), not against the
code under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gtbook import chapters as book_chapters
from gtbook import cli as book_cli
from gtbook import execute as book_execute
from minibook import make_mini_book

ROOT = Path(__file__).resolve().parents[2]


def _gtbook(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "gtbook", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def _edit(book: Path, name: str, old: str, new: str) -> int:
    """Replace ``old`` by ``new`` in a chapter's source; return the (1-based) line it is on."""
    path = book / "notebooks" / f"{name}.py"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return text[: text.index(old)].count("\n") + 1


@pytest.fixture
def two(tmp_path):
    return make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))


def test_a_parameters_cell_that_does_not_parse_breaks_only_its_own_chapter(two):
    line = _edit(two, "02_small", "seed = 0\n", "seed = (0\n")
    bk = book_chapters.open_book(two)
    chapters = book_chapters.discover_chapters(bk)
    assert chapters["01_tiny"].problem is None and chapters["01_tiny"].defaults["x"] == 1.0
    assert chapters["02_small"].problem.startswith(f"02_small.py line {line}: the parameters cell does not parse")
    # the other chapter plans, and the status names the broken one with its line
    assert [j.chapter.name for j in book_execute.plan(bk, "quick", ["01_tiny"], [])] == ["01_tiny"]
    states = {s.name: s for s in book_execute.status(bk, "quick")}
    assert states["01_tiny"].state == "missing"
    assert states["02_small"].state == "broken" and f"line {line}" in states["02_small"].detail
    proc = _gtbook("status", cwd=two)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "SyntaxError" not in proc.stderr
    row = next(r for r in proc.stdout.splitlines() if r.startswith("02_small"))
    assert row.split()[1] == "broken" and f"02_small.py line {line}" in row
    # a run of the whole book runs the other chapter, then names the broken one (one line, exit 2)
    proc = _gtbook("run", "--profile", "quick", cwd=two)
    assert proc.returncode == 2 and (two / "executed" / "01_tiny.ipynb").exists()
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gtbook: error: 02_small not run: 02_small.py line") and "the other chapters ran" in last
    assert "Traceback" not in proc.stderr


def test_non_literal_defaults_are_evaluated_or_refused_with_their_line(two):
    _edit(two, "01_tiny", "x = 1.0\n", "x = 1 / 4\n")
    line = _edit(two, "02_small", "n = 3\n", "n = len([1, 2, 3])\n")
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    assert chapters["01_tiny"].defaults["x"] == 0.25 and isinstance(chapters["01_tiny"].defaults["x"], float)
    assert chapters["02_small"].problem == (
        f"02_small.py line {line}: the default of n is not a value "
        "(len([1, 2, 3]) is not a literal nor arithmetic of number literals)"
    )
    sub = {"01_tiny": chapters["01_tiny"]}
    assert book_chapters.parse_sets(sub, ["x=0.5"]) == {"01_tiny": {"x": 0.5}}  # a float, as 1 / 4 is
    with pytest.raises(book_chapters.BookError, match=r"x of 01_tiny is a float \(default 0\.25\), got a string"):
        book_chapters.parse_sets(sub, ["x=abc"])


def test_grouped_parameters_are_read_set_and_shown_as_they_ran(two):
    _edit(two, "02_small", "seed = 0\n", "seed, null_seed = 0, 7  # seeds\n")
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    assert chapters["02_small"].defaults["seed"] == 0 and chapters["02_small"].defaults["null_seed"] == 7
    assert book_chapters.parse_sets(chapters, ["seed=3"])["02_small"] == {"seed": 3}  # --set reaches a grouped name
    defaults = chapters["02_small"].defaults
    shown = book_execute.parameters_cell_that_ran(
        "seed, null_seed = 0, 7  # seeds\n", {**defaults, "seed": 3}, {"seed": 3}, defaults, "quick"
    )
    assert shown.splitlines()[0] == "seed, null_seed = 3, 7  # seeds; seed: [--set] the chapter's own value: 0"
    line = _edit(two, "01_tiny", "x = 1.0\n", "x, y = 1.0, 2.0, 3.0\n")  # as many values as names, or refused
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    assert chapters["01_tiny"].problem.startswith(f"01_tiny.py line {line}: unpack parameters from a literal tuple")


@pytest.mark.parametrize(
    "item, message",
    [
        ("x=1e400", "x of 01_tiny must be finite (default 1.0), got inf"),
        ("sizes=[1, 1e999]", "sizes of 01_tiny must be finite (default [1, 2]), got [1, inf]"),
    ],
)
def test_set_values_are_finite_where_the_default_is(two, item, message):
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    with pytest.raises(book_chapters.BookError) as info:
        book_chapters.resolve_parameters(chapters, "quick", [item])
    assert str(info.value) == f"--set {item}: {message}"


def test_arithmetic_set_values_keep_the_parameters_type(two):
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    params = book_chapters.resolve_parameters(chapters, "full", ["n=2**10", "x=-(-1)/4", "sizes=[2*3, -1]"])
    assert params["01_tiny"] == {"n": 1024, "x": 0.25, "sizes": [6, -1]} and isinstance(params["01_tiny"]["n"], int)
    # a power too large to compute is not evaluated (it would run for ever): it stays text, and is refused
    with pytest.raises(book_chapters.BookError, match=r"n of 01_tiny is an int \(default 3\), got a string"):
        book_chapters.resolve_parameters(chapters, "full", ["n=10**10**10"])


@pytest.mark.parametrize(
    "toml, message",
    [
        ('x = "0.5"', "x of 01_tiny is a float (default 1.0), got a string '0.5'"),
        ("x = inf", "x of 01_tiny must be finite (default 1.0), got inf"),
        ("label = false", "label of 01_tiny is a string (default 'a'), got a bool False"),
        ("n = 2.5", "n of 01_tiny is an int (default 3), got a float 2.5"),
    ],
)
def test_profile_values_are_type_checked_like_set_values(two, toml, message):
    (two / "notebooks" / "profiles.toml").write_text(f"[full]\n\n[quick]\n\n[quick.01_tiny]\n{toml}\n")
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    with pytest.raises(book_chapters.BookError) as info:
        book_chapters.resolve_parameters(chapters, "quick", [])
    assert str(info.value) == f"notebooks/profiles.toml [quick.01_tiny] {toml.split()[0]}: {message}"
    proc = _gtbook("status", "--profile", "quick", cwd=two)
    assert proc.returncode == 2 and proc.stderr.strip() == f"gtbook: error: {info.value}"


def test_an_integral_profile_float_stays_an_int(two):
    (two / "notebooks" / "profiles.toml").write_text("[full]\n\n[quick]\n\n[quick.01_tiny]\nn = 1e1\n")
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    n = book_chapters.resolve_parameters(chapters, "quick", [])["01_tiny"]["n"]
    assert n == 10 and type(n) is int


@pytest.mark.parametrize("depth", [150, 5000, 120_000])
def test_a_deeply_nested_set_value_is_one_line(two, depth):
    item = "label=" + "-" * depth + "1"
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    with pytest.raises(book_chapters.BookError, match=r"nested deeper|longer than"):
        book_chapters.resolve_parameters(chapters, "quick", [item])
    proc = _gtbook("status", "--set", item, cwd=two)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "RecursionError" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_deeply_nested_default_breaks_only_its_chapter(two):
    _edit(two, "02_small", "x = 1.0\n", "x = " + "-" * 5000 + "1.0\n")
    chapters = book_chapters.discover_chapters(book_chapters.open_book(two))
    assert chapters["01_tiny"].problem is None
    assert "nested deeper" in chapters["02_small"].problem


def test_claims_json_is_valid_json_with_infinite_values(two, monkeypatch, capsys):
    from gtbook import report

    (two / "executed").mkdir()
    rows = [
        report.ClaimRow(
            "01_tiny",
            "c",
            "invariance",
            "consistency",
            float("inf"),
            "< 2",
            False,
            "quick",
            0,
            {"x": float("nan")},
            lower=float("-inf"),
            upper=2.0,
        )
    ]
    monkeypatch.setattr(report, "executed_notebooks", lambda *a, **k: [two / "executed" / "01_tiny.ipynb"])
    monkeypatch.setattr(report, "collect_claims", lambda *a, **k: rows)
    assert book_cli.main(["claims", "--json", "--root", str(two)]) == 0
    out = capsys.readouterr().out

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    data = json.loads(out, parse_constant=refuse)
    assert data[0]["value"] == "inf" and data[0]["lower"] == "-inf" and data[0]["overrides"] == {"x": "nan"}
    assert data[0]["upper"] == 2.0 and float(data[0]["value"]) == float("inf")
