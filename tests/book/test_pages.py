"""Every page of the quick book reads well at 1400 px and at 420 px, in headless Chromium (issue 25).

On every chapter, prose and generated page, at both widths: no element reaches past the content column
unless it sits in a box that scrolls within it (tables, display maths); no table cell breaks a word or a
number across lines; the page never scrolls sideways; and captions keep a contrast of 4.5 or more in the
dark theme. Every chapter page keeps to the reading budget at 1400 px (``budget_problems``: its height with
the collapsed sections closed, its visible code lines, its parameters cell). The measurements are written to
``_build/overflow.json`` of the test's own build, the pages over budget to ``_build/budget.txt``.
"""

import json

import pytest

from browser import Browser, budget_problems, chromium_or_skip, measure_pages, overflow_problems


@pytest.mark.slow
def test_every_page_fits_at_1400_and_420_px(built_book):
    tree, _ = built_book
    html = tree / "_build" / "html"
    pages = sorted([*(html / "executed").glob("*.html"), *(html / "book").glob("*.html")])
    assert len(pages) >= 9, pages
    exe = chromium_or_skip()
    browser = Browser(exe)
    try:
        results = measure_pages(browser, pages)
    finally:
        browser.close()
    (tree / "_build" / "overflow.json").write_text(json.dumps(results, indent=1))
    assert len(results) == 2 * len(pages)
    problems = overflow_problems(results)
    assert not problems, "\n".join(problems)
    chapters = [k for k in results if k.startswith("1400 executed/") and k.split("/")[-1][:2].isdigit()]
    assert len(chapters) == 9 and all(results[k]["code"] > 0 for k in chapters)  # the count sees code
    over = budget_problems(results)  # the reading budget of every chapter page
    (tree / "_build" / "budget.txt").write_text("\n".join(over) + "\n")
    assert not over, "\n".join(over)


@pytest.mark.slow
def test_no_page_names_a_path_of_the_machine_that_built_it(built_book):
    """No absolute path of the build machine (the tree, the home folder, the Python prefix) in any page."""
    import sys
    from pathlib import Path

    tree, _ = built_book
    html = tree / "_build" / "html"
    machine = {
        str(tree),
        str(Path.home()),
        sys.prefix,
        str(Path(sys.executable).resolve().parent.parent),
        str(Path(__file__).resolve().parents[2]),
    }
    found = []
    for page in sorted(html.rglob("*.html")):
        text = page.read_text(errors="replace")
        found += [f"{page.relative_to(html)}: {m}" for m in machine if m and len(m) > 4 and m in text]
    assert not found, "\n".join(found[:20])
