"""Timings of the book pipeline, run by hand (numbers go in the issue's note, not in tests).

    python benchmarks/book_pipeline.py [--profile quick] [--jobs 1 2]

Measures, in a temporary copy of the tree (the working tree's executed/ and _build/ are only read):
1. a cold run of every chapter (per-chapter times, and the slowest cells from papermill's durations);
2. a second ``gtbook all`` with nothing changed (the no-op ``make book`` minus make itself);
3. a prose edit of one chapter: which chapters rerun and how long it takes;
4. ``gtbook run --force -j N`` wall time for each N given.
Pass ``--from-executed DIR`` to report the cell profile of an existing executed/ (e.g. a full run)
without running anything. Results are printed and written to benchmarks/out/book_pipeline.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
GTBOOK = [sys.executable, "-m", "gtbook"]


def gtbook(tree: Path, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("GTBOOK_ROOT", None)
    start = time.perf_counter()
    subprocess.run([*GTBOOK, *args], cwd=tree, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def cell_profile(executed: Path, top: int = 4) -> dict:
    out = {}
    for path in sorted(executed.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = [
            (
                round(c.metadata.get("papermill", {}).get("duration") or 0.0, 1),
                (c.source.strip().splitlines() or [""])[0][:70],
            )
            for c in nb.cells
            if c.cell_type == "code"
        ]
        meta = nb.metadata.get("gtbook", {})
        out[path.stem] = {
            "profile": meta.get("profile"),
            "runtime_s": meta.get("runtime_s"),
            "slowest_cells": sorted(cells, reverse=True)[:top],
        }
    return out


def copy_tree(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, dest / name)
    for name in ("book", "notebooks", "_static"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, dest / name)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--jobs", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--from-executed", default=None)
    args = ap.parse_args()
    results: dict = {"cores": len(os.sched_getaffinity(0))}
    if args.from_executed:
        results["cells"] = cell_profile(Path(args.from_executed))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            tree = copy_tree(Path(tmp) / "book")
            results["cold_run_s"] = round(gtbook(tree, "run", "--profile", args.profile), 1)
            results["cells"] = cell_profile(tree / "executed")
            results["first_build_s"] = round(gtbook(tree, "build"), 1)
            results["second_all_s"] = round(gtbook(tree, "all", "--profile", args.profile), 2)
            src = next((tree / "notebooks").glob("03_*.py"))
            src.write_text(src.read_text().replace("# %% [markdown]\n", "# %% [markdown]\n# (edited)\n#\n", 1))
            before = {p.name: p.stat().st_mtime_ns for p in (tree / "executed").glob("*.ipynb")}
            results["prose_edit_all_s"] = round(gtbook(tree, "all", "--profile", args.profile), 1)
            results["prose_edit_reran"] = sorted(
                p.stem for p in (tree / "executed").glob("*.ipynb") if p.stat().st_mtime_ns != before[p.name]
            )
            for n in args.jobs:
                results[f"force_j{n}_s"] = round(
                    gtbook(tree, "run", "--profile", args.profile, "--force", "-j", str(n)), 1
                )
    text = json.dumps(results, indent=1)
    print(text)
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "book_pipeline.json").write_text(text)


if __name__ == "__main__":
    main()
