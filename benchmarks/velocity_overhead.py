"""Benchmark: the per-call cost of ``gtcore.particles.velocity`` and ``simulate`` over plain torch (issue 21).

(a) ``velocity(x, controls)`` on a float64 tensor against the same velocity written with torch alone,
``x A^T + b + SDPA(x B^T, x, x) V^T`` (tensors converted once, no checks): paired rounds in alternating
order, medians, at N = 1024, 4096 and d = 2, 16. (b) ``simulate`` (N = 1024, d = 2, 20 RK4 steps) against
the same RK4 loop written with torch alone, at 1 thread. (c) ``simulate`` at 1 and 2 torch threads
(``torch.set_num_threads``) with the default thread choice, to check that more threads never make it
slower on this machine. (a) and (b) time this process's CPU (single-threaded work), (c) the wall clock.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/velocity_overhead.py [--rounds 41]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from gtcore import Controls
from gtcore.particles import simulate, velocity

#: the clock of the paired rounds: this process's CPU time (single-threaded work; steadier than the wall
#: clock on a shared machine, where a descheduled round would count another process's time)
CLOCK = time.process_time


def paired(f, g, rounds, clock=None):
    """Median seconds of f and g, and the median per-round ratio f/g, interleaved A B / B A."""
    clock = clock or CLOCK
    tf, tg = [], []
    for r in range(rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            t = clock()
            (f if which == 0 else g)()
            (tf if which == 0 else tg).append(clock() - t)
    tf, tg = np.array(tf), np.array(tg)
    return float(np.median(tf)), float(np.median(tg)), float(np.median(tf / tg))


def problem(N, d, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, d)) / np.sqrt(d)
    ctl = Controls(
        A=0.1 * np.eye(d),
        b=0.1 * np.ones(d),
        V=np.eye(d) + 0.1 * rng.standard_normal((d, d)),
        B=-0.5 * np.eye(d) + 0.1 * rng.standard_normal((d, d)),
    )
    return x, ctl


def plain_velocity(ctl):
    A, b, V, B = (torch.as_tensor(np.array(a)) for a in (ctl.A, ctl.b, ctl.V[0], ctl.B[0]))

    def v(x):
        q = x @ B.T
        kv = x[None, None]
        return x @ A.T + b + F.scaled_dot_product_attention(q[None, None], kv, kv, scale=1.0)[0, 0] @ V.T

    return v


def plain_rk4(x0, v, t1, steps):
    h = t1 / steps
    x = x0.clone()
    with torch.no_grad():
        for _ in range(steps):
            k1 = v(x)
            k2 = v(x + h / 2 * k1)
            k3 = v(x + h / 2 * k2)
            k4 = v(x + h * k3)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            mu = x.mean(0)
            xc = x - mu
            (xc.T @ xc / x.shape[0]).cpu().numpy()
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=41)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"cores: {os.cpu_count()}, torch threads 1, rounds {args.rounds}")
    print("(a) velocity against plain torch")
    print(f"{'N':>6} {'d':>3} {'gtcore ms':>10} {'plain ms':>9} {'gtcore/plain':>13} {'max |diff|':>10}")
    for N in (1024, 4096):
        for d in (2, 16):
            x, ctl = problem(N, d)
            xt = torch.as_tensor(x)
            v = plain_velocity(ctl)
            diff = float((velocity(xt, ctl) - v(xt)).abs().max())
            ta, tb, ratio = paired(lambda xt=xt, ctl=ctl: velocity(xt, ctl), lambda v=v, xt=xt: v(xt), args.rounds)
            print(f"{N:>6} {d:>3} {1e3 * ta:10.3f} {1e3 * tb:9.3f} {ratio:13.3f} {diff:10.1e}")
    print("(b) simulate against a plain torch RK4 loop (N = 1024, d = 2, 20 steps)")
    x, ctl = problem(1024, 2)
    xt = torch.as_tensor(x)
    v = plain_velocity(ctl)
    ta, tb, ratio = paired(
        lambda: simulate(xt, ctl, (0.0, 1.0), 20, device="cpu"),
        lambda: plain_rk4(xt, v, 1.0, 20),
        max(5, args.rounds // 4),
    )
    print(f"simulate {1e3 * ta:.1f} ms, plain {1e3 * tb:.1f} ms, simulate/plain {ratio:.3f}")
    print("(c) simulate at 1 and 2 torch threads (N = 1024, d = 2, 20 steps)")

    def at(threads):
        def run():
            torch.set_num_threads(threads)
            simulate(xt, ctl, (0.0, 1.0), 20, device="cpu")

        return run

    t1, t2, ratio = paired(at(1), at(2), max(5, args.rounds // 4), clock=time.perf_counter)  # wall: 2 threads
    torch.set_num_threads(1)
    print(f"1 thread {1e3 * t1:.1f} ms, 2 threads {1e3 * t2:.1f} ms, (1 thread)/(2 threads) {ratio:.3f}")


if __name__ == "__main__":
    main()
