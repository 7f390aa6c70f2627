"""The book pipeline: CLI errors, failure handling, the quick build, and the rendered pages.

The quick profile of every chapter runs once per session (the ``built_book`` fixture); the rendered
chapter 1 and the report are then opened in headless Chromium.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from gtcore import book
from browser import PAGE_REPORT, Browser, chromium_path

ROOT = Path(book.__file__).resolve().parents[1]
GTBOOK = [sys.executable, "-m", "gtcore.book"]


def gtbook(*args, check=True):
    proc = subprocess.run([*GTBOOK, *args], cwd=ROOT, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"gtbook {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# ------------------------------------------------------------------ bad input, quickly
def test_unknown_profile_lists_the_valid_ones():
    proc = gtbook("run", "--profile", "huge", check=False)
    assert proc.returncode == 2
    assert "unknown profile 'huge'" in proc.stderr and "full" in proc.stderr and "quick" in proc.stderr


def test_unknown_chapter_lists_the_valid_ones():
    proc = gtbook("run", "--only", "no_such_chapter", check=False)
    assert proc.returncode == 2
    assert "unknown chapter 'no_such_chapter'" in proc.stderr and "01_gaussian_invariance" in proc.stderr


def test_unknown_parameter_lists_the_valid_ones():
    proc = gtbook("run", "--only", "01_gaussian_invariance", "--set", "bogus=3", check=False)
    assert proc.returncode == 2
    assert "unknown parameter(s) bogus" in proc.stderr and "n_tokens" in proc.stderr


def test_set_goes_to_the_chapters_that_define_the_name():
    chapters = book.discover_chapters()
    params = book.resolve_parameters(chapters, "full", ["n_tokens=1e2", "seed=3"])
    for name, chap in chapters.items():
        assert params[name]["seed"] == 3
        assert ("n_tokens" in params[name]) == ("n_tokens" in chap.defaults)
    assert params["01_gaussian_invariance"]["n_tokens"] == 100
    assert isinstance(params["01_gaussian_invariance"]["n_tokens"], int)


def test_profile_table_naming_no_chapter_is_an_error(monkeypatch):
    monkeypatch.setattr(book, "load_profiles", lambda: {"quick": {"01_gausian_invariance": {"seed": 1}}})
    with pytest.raises(book.BookError, match="01_gausian_invariance.*names no chapter"):
        book.resolve_parameters(book.discover_chapters(), "quick", [])


def test_missing_parameters_tag_names_the_file(tmp_path):
    path = tmp_path / "09_untagged.py"
    path.write_text("# %%\nseed = 0\n")
    with pytest.raises(book.BookError, match="09_untagged.py.*parameters"):
        book.chapter_defaults(path)


def test_every_chapter_is_in_the_toc():
    assert list(book.discover_chapters()) == book.toc_chapters()


def test_failed_chapter_keeps_the_last_good_output(tmp_path, monkeypatch):
    monkeypatch.setattr(book, "EXECUTED", tmp_path / "executed")
    monkeypatch.setattr(book, "ROOT", tmp_path)
    src = tmp_path / "99_failing.py"
    src.write_text(
        '# %% tags=["parameters"]\nthreshold = 0.5\n\n'
        '# %%\nfrom gtcore.claims import claim\nclaim("too_big", 1.0, lt=threshold, statement="invariance", kind="consistency")\n'
    )
    chapter = book.Chapter("99_failing", src, book.chapter_defaults(src))
    good = tmp_path / "executed" / "99_failing.ipynb"
    good.parent.mkdir()
    good.write_text("previous good output")
    with pytest.raises(book.BookError) as err:
        book.run_chapter(chapter, {}, "quick")
    msg = str(err.value)
    assert "99_failing" in msg and "cell" in msg and "ClaimFailed" in msg and "too_big" in msg
    assert good.read_text() == "previous good output"
    assert (tmp_path / "executed" / "failed" / "99_failing.ipynb").exists()
    # the same chapter passes with a parameter override, and then replaces the output
    book.run_chapter(chapter, {"threshold": 2.0}, "quick")
    nb = nbformat.read(good, as_version=4)
    assert nb.metadata["gtbook"]["parameters"]["threshold"] == 2.0


# ---------------------------------------------------------------- the quick book, built once
@pytest.fixture(scope="session")
def built_book():
    gtbook("all", "--profile", "quick")
    return ROOT / "_build" / "html"


@pytest.mark.slow
def test_every_claim_passes_and_is_reported(built_book):
    rows = json.loads(gtbook("claims", "--json").stdout)
    chapters = {r["chapter"] for r in rows}
    assert chapters == set(book.toc_chapters())
    for r in rows:
        assert {"chapter", "name", "statement", "kind", "value", "threshold", "passed", "profile"} <= set(r)
        assert r["passed"] is True and r["profile"] == "quick"
    report = (ROOT / "executed" / "report.md").read_text()
    assert f"{len(rows)} claims in all" in report and "statements of the paper reproduced" in report


@pytest.mark.slow
def test_same_profile_and_seed_give_identical_claims(built_book):
    name = "01_gaussian_invariance"
    before = [r for r in json.loads(gtbook("claims", "--json").stdout) if r["chapter"] == name]
    gtbook("run", "--profile", "quick", "--only", name)
    after = [r for r in json.loads(gtbook("claims", "--json").stdout) if r["chapter"] == name]
    assert before == after and len(before) >= 5


@pytest.mark.slow
def test_rendered_pages_in_a_browser(built_book):
    exe = chromium_path()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (CI installs it in .ci/run)")
        pytest.skip("chromium not installed: `apt-get install chromium` to run the browser test")
    browser = Browser(exe)
    try:
        chapter = browser.open((built_book / "executed" / "01_gaussian_invariance.html").as_uri())
        seen = browser.evaluate(chapter, PAGE_REPORT)
        browser.screenshot(chapter, ROOT / "_build" / "chapter1.png")
        assert seen["mathjax"] > 10, "equations were not typeset by MathJax"
        assert not seen["raw_tex"], "raw TeX delimiters are visible on the page"
        figures = [i for i in seen["images"] if "_images/" in i["src"]]
        assert len(figures) >= 4, f"expected the chapter's figures, found {figures}"
        broken = [i["src"] for i in seen["images"] if not i["ok"]]
        assert not broken, f"images that did not load: {broken}"
        assert "PASS" in seen["text"]

        report = browser.open((built_book / "executed" / "report.html").as_uri())
        seen = browser.evaluate(report, PAGE_REPORT)
        browser.screenshot(report, ROOT / "_build" / "report.png")
        rows = json.loads(gtbook("claims", "--json").stdout)
        for r in rows:
            assert r["name"] in seen["text"]
        assert seen["text"].count("PASS") >= len(rows) and "FAIL" not in seen["text"]
    finally:
        browser.close()


@pytest.mark.parametrize("doc", ["README.md", "book/intro.md"])
def test_documented_rerun_commands_name_real_parameters(doc):
    import re

    chapters = book.discover_chapters()
    lines = [line for line in (ROOT / doc).read_text().splitlines() if "gtbook run --only" in line]
    assert lines, f"{doc} shows no `gtbook run --only` example"
    for line in lines:
        only = re.search(r"--only (\S+)", line).group(1)
        chapter = book.select(chapters, [only])[0]
        for name in re.findall(r"--set (\w+)=", line):
            assert name in chapter.defaults, f"{doc}: {name} is not a parameter of {chapter.name}"
