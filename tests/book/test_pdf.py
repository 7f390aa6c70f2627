"""The whole book as one PDF (gtbook.pdf): every chapter, its equations typeset, its figures, offline.

The PDF's text is read back with poppler's ``pdftotext`` and its images listed with ``pdfimages``
(Debian's poppler-utils, which .ci/run installs with Chromium): an independent reader of the file, not the
browser that wrote it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from browser import chromium_path
from minibook import make_mini_book

GTBOOK = [sys.executable, "-m", "gtbook"]


def _tools_or_skip():
    missing = [t for t in ("pdftotext", "pdfimages") if shutil.which(t) is None]
    if chromium_path() is None:
        missing.append("chromium")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} not installed (CI installs chromium and poppler-utils in .ci/run)")
        pytest.skip(f"{', '.join(missing)} not installed: `apt-get install chromium poppler-utils`")


def _text(pdf) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def _images(pdf) -> int:
    out = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines()[2:] if line.split() and line.split()[2] == "image")


def _title(notebook) -> str:
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise AssertionError(f"{notebook} has no title")


def _words(title: str) -> str:
    """A title's words as pdftotext gives them (maths and markup dropped, spaces collapsed)."""
    return " ".join(re.sub(r"\$[^$]*\$|[*`]", " ", title).split())


def test_the_mini_book_prints_with_its_chapters_and_generated_pages(tmp_path):
    _tools_or_skip()
    book = make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    subprocess.run([*GTBOOK, "run", "-j", "2"], cwd=book, check=True, capture_output=True, env=env)
    proc = subprocess.run(
        [*GTBOOK, "pdf", "--out", str(tmp_path / "book.pdf")], cwd=book, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(_text(tmp_path / "book.pdf").split())
    for needed in (
        "01_tiny",
        "02_small",
        "What this chapter found",
        "Paper map",
        "Status of the chapters",
        "Reproducibility report",
        "PASS",
    ):
        assert needed in text, needed
    assert not (book / "_build" / "html").exists()  # printing never builds (or touches) the HTML book


@pytest.mark.slow
def test_the_quick_book_prints_every_chapter_equation_and_figure(built_book):
    _tools_or_skip()
    tree, _ = built_book
    pdf = tree / "_build" / "pdf" / "gtbook.pdf"
    proc = subprocess.run(
        [*GTBOOK, "pdf"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(_text(pdf).split())
    chapters = sorted((tree / "executed").glob("[0-9][0-9]_*.ipynb"))
    assert len(chapters) == 9
    for nb in chapters:
        assert _words(_title(nb))[:40] in text, nb.stem
    assert "What this chapter found" in text and "Paper map" in text
    assert not re.search(r"\$\$|\\\(|\\\[|\\begin\{", text), "raw TeX in the PDF"
    figures = sum(1 for p in (tree / "executed" / "gallery").glob("*.png"))
    assert figures > 20 and _images(pdf) >= figures, (figures, _images(pdf))
