"""Benchmark: integrate_moments at the MiniLM width, d = 384 (issue target: under 5 s on 2 cores).

Random well-conditioned stable controls: A = -I + 0.3 G/sqrt(d), V = 0.2 I, B = -(I + 0.1 H/sqrt(d)),
Sigma0 SPD with eigenvalues in [0.5, 2], t in [0, 1], default tolerances (rtol 1e-10, atol 1e-12).

    .venv/bin/python benchmarks/moments.py [--repeats 3] [--figure benchmarks/out/moments.png]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from gtcore import Controls, integrate_moments


def problem(d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = -np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d)
    B = -(np.eye(d) + 0.1 * rng.standard_normal((d, d)) / np.sqrt(d))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Sigma0 = Q @ np.diag(np.linspace(0.5, 2.0, d)) @ Q.T
    return rng.standard_normal(d), 0.5 * (Sigma0 + Sigma0.T), Controls(A=A, b=np.ones(d), V=0.2 * np.eye(d), B=B)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dims", type=int, nargs="+", default=[16, 64, 128, 256, 384])
    p.add_argument("--figure", default="benchmarks/out/moments.png")
    args = p.parse_args()
    print(f"cores: {os.cpu_count()}")
    print(f"{'d':>5} {'best s':>8} {'nfev':>6} {'status':>10}")
    best = {}
    for d in args.dims:
        mu0, S0, ctl = problem(d)
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            tr = integrate_moments(mu0, S0, ctl, (0, 1))
            times.append(time.perf_counter() - t)
        best[d] = min(times)
        print(f"{d:>5} {best[d]:8.3f} {tr.nfev:6d} {tr.status:>10}")
    if args.figure:
        import matplotlib.pyplot as plt

        Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(4.5, 3.2), constrained_layout=True)
        ax.loglog(list(best), list(best.values()), "o-", label="integrate_moments, t in [0, 1]")
        ax.axhline(5.0, color="r", ls="--", label="target at d = 384: 5 s")
        ax.set_xlabel("dimension d")
        ax.set_ylabel("wall time (s), best of repeats")
        ax.legend()
        fig.savefig(args.figure)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
