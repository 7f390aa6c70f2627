"""Wall times of the `gtbook` commands a user types first (issue 25), run by hand.

Each command runs in a fresh interpreter ``--rounds`` times (interleaved, so a burst of load on the
machine hits every command alike); the median, minimum and maximum are printed with the load average
before and after, since on a shared machine the load is part of the number. ``status`` and ``claims``
read a book: pass ``--root`` with a tree whose ``executed/`` holds run chapters (by default the
repository itself, where they may not have run). Run from the repository root with the project's venv:

    .venv/bin/python benchmarks/cli_timings.py --rounds 5 --root /path/to/a/built/book [--json out.json]

``benchmarks/imports.py`` times the imports of single core modules.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def commands(book: Path) -> dict[str, list[str]]:
    """The timed command lines, by the name a user would type (``gtbook`` is ``python -m gtbook``)."""
    gtbook = [PY, "-m", "gtbook"]
    return {
        "gtbook --help": [*gtbook, "--help"],
        "gtbook --version": [*gtbook, "--version"],
        "gtbook status": [*gtbook, "status", "--root", str(book)],
        "gtbook claims": [*gtbook, "claims", "--root", str(book)],
        "gtbook claims --failed": [*gtbook, "claims", "--failed", "--root", str(book)],
        'python -c "import gtcore"': [PY, "-c", "import gtcore"],
        'python -c "pass" (interpreter alone)': [PY, "-c", "pass"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--root", type=Path, default=ROOT, help="the book that status and claims read")
    ap.add_argument("--json", type=Path, help="also write the times (seconds) here")
    args = ap.parse_args()
    cmds = commands(args.root.resolve())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's gtcore, whatever the venv points at
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in cmds}
    codes: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True)
            times[name].append(time.perf_counter() - t0)
            codes[name] = done.returncode  # claims --failed may exit non-zero on purpose; recorded, not fatal
    load_after = os.getloadavg()
    width = max(len(k) for k in cmds)
    print(
        f"load average before {load_before[0]:.2f} (5 min {load_before[1]:.2f}), "
        f"after {load_after[0]:.2f} (5 min {load_after[1]:.2f}); {os.cpu_count()} cores; book {args.root}"
    )
    for name, ts in times.items():
        print(
            f"{name.ljust(width)}  median {statistics.median(ts):6.3f} s  (min {min(ts):.3f}, max {max(ts):.3f})"
            f"  exit {codes[name]}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "load_before": load_before,
                    "load_after": load_after,
                    "rounds": args.rounds,
                    "exit": codes,
                    "seconds": times,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
