"""Static checks of the chapters' figure cells: each label names exactly one output.

A cell whose metadata gives a figure label (``mystnb={"figure": {"name": ...}}``) must not end in an
expression whose value Jupyter would display beside the figure (it would carry the same label twice
and fail the build): it ends with ``;`` or a statement, unless its last expression *is* the figure,
an HTML player (the animations and the regime explorer return one).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
PLAYERS = re.compile(r"(animation|explorer)$")


def figure_cells(path: Path):
    parts = re.split(r"(?m)^(# %%.*)$", path.read_text())
    for head, body in zip(parts[1::2], parts[2::2], strict=True):  # re.split with one group: heads and bodies pair up
        if '"figure"' in head and "[markdown]" not in head:
            yield re.search(r'"name": "([^"]+)"', head).group(1), body


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_figure_cell_displays_one_thing(path):
    for name, body in figure_cells(path):
        last = ast.parse(body).body[-1]
        if not isinstance(last, ast.Expr) or body.rstrip().endswith(";"):
            continue
        call = last.value.func if isinstance(last.value, ast.Call) else None
        called = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
        assert PLAYERS.search(called or ""), f"{path.stem}: figure cell {name!r} ends with a displayed value"


def test_figure_labels_are_unique_in_the_book():
    seen: dict[str, str] = {}
    for path in CHAPTERS:
        for name, _ in figure_cells(path):
            assert name not in seen, f"figure label {name!r} in {path.stem} and {seen[name]}"
            seen[name] = path.stem
