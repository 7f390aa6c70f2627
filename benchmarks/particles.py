"""Benchmark: one attention evaluation and a whole trajectory of the particle Transformer.

Compares, at N = 4096 and d in {2, 16}: (a) a naive NumPy full-matrix float64 implementation (the
style of published peers), (b) gtcore float64, (c) gtcore float32. Each variant runs in a fresh
subprocess, so its peak extra memory (peak RSS above the RSS after setup) is its own. Then the
largest N whose evaluation takes under 2 s at d = 2 in float32, and a whole trajectory with
N = 16384, d = 2, 40 RK4 steps.

    .venv/bin/python benchmarks/particles.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def naive_attention(x: np.ndarray, V: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Full N x N softmax in float64: logits[i, j] = x_j^T B x_i."""
    logits = (x @ B.T) @ x.T
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(axis=1, keepdims=True)
    return (w @ x) @ V.T


def _child(variant: str, N: int, d: int, repeats: int) -> dict:
    import torch

    from gtcore import Controls
    from gtcore.particles import velocity

    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, d)) / np.sqrt(d)
    V, B = np.eye(d), -0.5 * np.eye(d)
    ctl = Controls(V=V, B=B)
    if variant == "naive":
        run = lambda: naive_attention(x, V, B)  # noqa: E731
        naive_attention(x[:64], V, B)
    else:
        dtype = torch.float64 if variant == "gtcore64" else torch.float32
        xt = torch.as_tensor(x, dtype=dtype)
        run = lambda: velocity(xt, ctl)  # noqa: E731
        velocity(xt[:64], ctl)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": variant, "N": N, "d": d, "seconds": min(times), "extra_mib": (peak - base) / 1024}


def measure(variant: str, N: int, d: int, repeats: int = 3) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant, str(N), str(d), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def trajectory_seconds(N: int = 16384, d: int = 2, steps: int = 40) -> float:
    from gtcore import Controls, gaussian_tokens
    from gtcore.particles import simulate

    x0 = gaussian_tokens(N, np.zeros(d), np.eye(d), seed=0)
    ctl = Controls(A=0.1 * np.eye(d), V=np.eye(d), B=-0.5 * np.eye(d))
    t = time.perf_counter()
    simulate(x0, ctl, (0, 1), steps, method="rk4", record_every=steps)
    return time.perf_counter() - t


def main() -> None:
    import torch

    print(f"cores: {os.cpu_count()}, torch threads: {torch.get_num_threads()}")
    print(f"{'N':>6} {'d':>3} {'variant':>9} {'seconds':>9} {'speed-up':>9} {'extra MiB':>10}")
    for d in (2, 16):
        rows = [measure(v, 4096, d) for v in ("naive", "gtcore64", "gtcore32")]
        for r in rows:
            print(
                f"{r['N']:>6} {d:>3} {r['variant']:>9} {r['seconds']:9.4f} "
                f"{rows[0]['seconds'] / r['seconds']:9.1f}x {r['extra_mib']:10.1f}"
            )
        print(f"       memory ratio gtcore64 / naive at d={d}: {rows[1]['extra_mib'] / rows[0]['extra_mib']:.3f}")
    largest = 0
    for N in (10_000, 20_000, 40_000, 50_000, 60_000, 80_000, 100_000):
        r = measure("gtcore32", N, 2, repeats=1)
        print(f"  float32 d=2 N={N}: {r['seconds']:.2f} s, extra {r['extra_mib']:.1f} MiB")
        if r["seconds"] >= 2.0:
            break
        largest = N
    print(f"largest N under 2 s (d=2, float32): {largest}")
    print(f"trajectory N=16384, d=2, 40 RK4 steps, float64: {trajectory_seconds():.1f} s")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
    else:
        main()
