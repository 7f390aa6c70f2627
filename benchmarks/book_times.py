r"""Per-chapter wall times of the book's profiles, read from the executed notebooks' metadata.

Every chapter ``gtbook run`` publishes carries, in ``metadata.gtbook`` (:func:`gtbook.execute.run_chapter`), the
profile it ran with, its wall time ``runtime_s`` (papermill's whole execution), the threads it had, the date
and the commit; papermill adds each cell's ``duration``. A book folder holds one run per chapter (the last
one), so the two profiles usually live in two folders (a quick build and a full build): give both.

Prints one row per chapter with its time in each profile found (and the thread count, date and commit of that
run), the totals, and with ``--cells K`` the K longest cells of every run (the first line of their source).

Run:  ``python benchmarks/book_times.py [ROOT ...] [--cells 3] [--json]`` (default ROOT: the current folder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PROFILES = ("quick", "full")


def read_runs(root: Path) -> list[dict[str, Any]]:
    """One record per executed notebook of the book at ``root``: chapter, profile, seconds, cells."""
    out = []
    for path in sorted((root / "executed").glob("*.ipynb")):
        try:
            nb = json.loads(path.read_text())
        except (OSError, ValueError):
            print(f"  (skipped {path}: not a readable notebook)")
            continue
        meta = (nb.get("metadata") or {}).get("gtbook") or {}
        if not isinstance(meta, dict) or "runtime_s" not in meta:
            continue
        cells = []
        for cell in nb.get("cells", []):
            duration = ((cell.get("metadata") or {}).get("papermill") or {}).get("duration")
            if cell.get("cell_type") == "code" and isinstance(duration, (int, float)):
                src = "".join(cell.get("source", "")).strip().splitlines()
                cells.append((float(duration), src[0][:80] if src else ""))
        out.append(
            {
                "root": str(root),
                "chapter": meta.get("chapter", path.stem),
                "profile": meta.get("profile", "?"),
                "seconds": float(meta["runtime_s"]),
                "threads": meta.get("threads"),
                "date": meta.get("date", "?"),
                "commit": str((meta.get("git") or {}).get("commit", "?"))[:10],
                "cells": sorted(cells, reverse=True),
            }
        )
    return out


def table(runs: list[dict[str, Any]], n_cells: int) -> str:
    """Chapters as rows; a column per (book folder, profile) found; the totals; the longest cells."""
    columns = [
        (root, p)
        for root in dict.fromkeys(r["root"] for r in runs)
        for p in PROFILES
        if any(r["root"] == root and r["profile"] == p for r in runs)
    ]
    width = max(14, *(len(p) + 8 for _, p in columns))
    lines = [
        "columns: " + "; ".join(f"[{i + 1}] {p} profile in {root}" for i, (root, p) in enumerate(columns)),
        f"{'chapter':<30}" + "".join(f"{f'[{i + 1}] {p} s':>{width}}" for i, (_, p) in enumerate(columns)),
    ]
    totals = [0.0] * len(columns)
    for ch in sorted({r["chapter"] for r in runs}):
        row = f"{ch:<30}"
        for i, (root, p) in enumerate(columns):
            hit = [r for r in runs if r["chapter"] == ch and r["root"] == root and r["profile"] == p]
            row += f"{hit[0]['seconds']:>{width}.1f}" if hit else f"{'-':>{width}}"
            totals[i] += hit[0]["seconds"] if hit else 0.0
        lines.append(row)
    lines.append(f"{'total':<30}" + "".join(f"{t:>{width}.1f}" for t in totals))
    for r in runs:
        lines.append(
            f"{r['chapter']} ({r['profile']}, {r['root']}): {r['seconds']:.1f} s, {r['threads']} thread(s), "
            f"{r['date']}, commit {r['commit']}"
        )
        lines += [f"  {d:8.1f} s  {src}" for d, src in r["cells"][:n_cells]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("roots", nargs="*", type=Path, default=[Path(".")], help="book folders (with executed/)")
    parser.add_argument("--cells", type=int, default=0, help="also list each run's K longest cells")
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    args = parser.parse_args()
    runs = [r for root in args.roots for r in read_runs(root)]
    if not runs:
        raise SystemExit("no executed chapters with gtbook metadata under " + ", ".join(map(str, args.roots)))
    print(json.dumps(runs, indent=1) if args.json else table(runs, args.cells))


if __name__ == "__main__":
    main()
