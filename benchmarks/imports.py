"""Import and start-up times: `import gtcore`, core modules, and the `gtbook` commands that need no kernel.

Each command runs in a fresh interpreter ``--rounds`` times (interleaved), and the median wall time is
printed with the minimum and maximum. Run from the repository root with the project's venv:

    .venv/bin/python benchmarks/imports.py --rounds 7

Issue 21's targets: ``import gtcore`` under 0.5 s without torch; ``gtbook --help`` and ``gtbook status``
under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
COMMANDS = {
    "import gtcore": [PY, "-c", "import gtcore"],
    "import gtcore.riccati": [PY, "-c", "import gtcore.riccati"],
    "import gtcore.stability": [PY, "-c", "import gtcore.stability"],
    "import gtcore.particles (torch)": [PY, "-c", "import gtcore.particles"],
    "gtbook --help": [PY, "-m", "gtbook", "--help"],
    "gtbook status": [PY, "-m", "gtbook", "status"],
    "python -c pass (baseline)": [PY, "-c", "pass"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(args.rounds):
        for name, cmd in COMMANDS.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
            times[name].append(time.perf_counter() - t0)
    width = max(len(k) for k in COMMANDS)
    for name, ts in times.items():
        print(f"{name.ljust(width)}  median {statistics.median(ts):6.3f} s  (min {min(ts):.3f}, max {max(ts):.3f})")
    torch = subprocess.run(
        [PY, "-c", "import gtcore, sys; print('torch' in sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"import gtcore loads torch: {torch}")


if __name__ == "__main__":
    main()
