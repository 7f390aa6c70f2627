"""Per-chapter time of the full (paper-scale) profile from cold, run by hand (numbers go in the issue's note).

    python benchmarks/full_profile.py [--chapters 01 02 03 04 05] [--profile full] [--budget 240]

Each chapter runs as ``gtbook run --profile full --only NN --force`` in a temporary copy of the tree,
with an empty on-disk cache of its own (``GTBOOK_CACHE``), so nothing is reused from an earlier run and
the working tree's ``executed/`` and cache are never touched. For each chapter it reports the chapter
time (the kernel's wall time, as ``gtbook`` records it), the command's wall time, its CPU time (user +
sys of ``gtbook`` and its kernel, from ``getrusage(RUSAGE_CHILDREN)``: less sensitive than wall time to
other processes on a shared machine) and the slowest cells; then the totals against ``--budget``
(issue 15: chapters 1-5 within 4 minutes on 2 cores). Results are printed and written to
``benchmarks/out/full_profile.json``.

On a machine shared with other jobs, run it with ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MKL_NUM_THREADS=1`` (inherited by the kernels) as well: single-threaded CPU time counts work only,
whereas a 2-thread OpenMP region whose second thread is descheduled spins and inflates CPU time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# the sibling script's helpers (a script, not a package: loaded from its path)
_spec = importlib.util.spec_from_file_location("book_pipeline", Path(__file__).with_name("book_pipeline.py"))
_pipeline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pipeline)
GTBOOK, ROOT, cell_profile, copy_tree = _pipeline.GTBOOK, _pipeline.ROOT, _pipeline.cell_profile, _pipeline.copy_tree


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_chapter(tree: Path, chapter: str, profile: str, cache: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "GTBOOK_CACHE": str(cache),
    }
    env.pop("GTBOOK_ROOT", None)
    cpu0, start = _children_cpu(), time.perf_counter()
    subprocess.run(
        [*GTBOOK, "run", "--profile", profile, "--only", chapter, "--force"],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chapters", nargs="*", default=["01", "02", "03", "04", "05"])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds of chapter time allowed in total")
    ap.add_argument("--keep-executed", default=None, help="copy the executed notebooks here (for their claims)")
    args = ap.parse_args()
    results: dict = {"cores": len(os.sched_getaffinity(0)), "load_before": os.getloadavg(), "chapters": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tree = copy_tree(Path(tmp) / "book")
        for chapter in args.chapters:
            timing = run_chapter(tree, chapter, args.profile, Path(tmp) / "cache")
            cells = cell_profile(tree / "executed")
            name = next(k for k in cells if k.startswith(chapter))
            results["chapters"][name] = {
                **timing,
                "chapter_s": cells[name]["runtime_s"],
                "slowest_cells": cells[name]["slowest_cells"],
            }
            print(
                f"{name}: chapter {cells[name]['runtime_s']} s, command {timing['wall_s']} s, CPU {timing['cpu_s']} s",
                flush=True,
            )
        if args.keep_executed:
            shutil.copytree(tree / "executed", args.keep_executed, dirs_exist_ok=True)
    chapters = results["chapters"].values()
    results["total_chapter_s"] = round(sum(c["chapter_s"] for c in chapters), 1)
    results["total_cpu_s"] = round(sum(c["cpu_s"] for c in chapters), 1)
    results["load_after"] = os.getloadavg()
    results["within_budget"] = results["total_chapter_s"] <= args.budget
    text = json.dumps(results, indent=1)
    print(text)
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "full_profile.json").write_text(text)


if __name__ == "__main__":
    main()
