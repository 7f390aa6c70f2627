r"""A small table for the chapters' result dataclasses: one row per dict, shown as an HTML table in a notebook
and as aligned text elsewhere (a list of dicts pretty-printed takes a screen per row)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["Table"]


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return f"{value:.3g}"
    return str(value)


class Table:
    r"""Rows of equal keys, displayed compactly.

    Parameters
    ----------
    rows : sequence of dict
        One dict per row; the first row's keys are the columns (a missing key shows as empty).
    caption : str
        A line above the table.
    """

    def __init__(self, rows: Sequence[dict], caption: str = "") -> None:
        self.rows = [dict(r) for r in rows]
        self.columns = list(self.rows[0]) if self.rows else []
        self.caption = caption

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: int) -> dict:
        return self.rows[k]

    def _cells(self) -> list[list[str]]:
        return [[_cell(r.get(c, "")) for c in self.columns] for r in self.rows]

    def __repr__(self) -> str:
        body = [self.columns, *self._cells()]
        widths = [max(len(row[j]) for row in body) for j in range(len(self.columns))]
        lines = ["  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) for row in body]
        return "\n".join(([self.caption] if self.caption else []) + lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in row) + "</tr>" for row in self._cells())
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f'<table class="gtbook-table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
