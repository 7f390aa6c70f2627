"""Benchmark: integrate_moments against a hand-written scipy ``solve_ivp(DOP853)`` call (issue 21).

The same problem (``benchmarks/moments.py``'s random stable controls, rtol 1e-10, atol 1e-12, the solver's
own steps), at d = 2, 16, 64: (a) ``gtcore.integrate_moments``; (b) ``scipy.integrate.solve_ivp`` with
``method="DOP853"`` on a right-hand side written by hand for one dot-product head,

    mu' = (M + V) mu + b,  Sigma' = M Sigma + Sigma M^T,  M = A + V Sigma B,

with no events and no PSD projection. Timings are paired: each round runs (a) and (b) back to back, in
alternating order, single-threaded BLAS, timed by this process's CPU clock; the script prints the median
time of each and the median of the
per-round ratios (b)/(a) (above 1: integrate_moments is faster). It also checks that both make the same
number of right-hand-side evaluations and agree to the tolerance.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/moments_vs_scipy.py [--rounds 21] [--dims 2 16 64]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from gtcore import integrate_moments

# the problems of benchmarks/moments.py (its sibling), loaded by path: the script runs from anywhere
_spec = importlib.util.spec_from_file_location("_benchmark_moments", Path(__file__).with_name("moments.py"))
assert _spec is not None and _spec.loader is not None
_moments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_moments)
problem = _moments.problem


def hand_written(mu0, S0, ctl, t1):
    """solve_ivp(DOP853) on eq. (1.1) written by hand for one head."""
    d = mu0.shape[0]
    A, b, V, B = ctl.A, ctl.b, ctl.V[0], ctl.B[0]

    def rhs(t, y):
        S = y[d:].reshape(d, d)
        M = A + V @ S @ B
        MS = M @ S
        return np.concatenate([(M + V) @ y[:d] + b, (MS + MS.T).ravel()])

    return solve_ivp(rhs, (0.0, t1), np.concatenate([mu0, S0.ravel()]), method="DOP853", rtol=1e-10, atol=1e-12)


#: the clock of the paired rounds: this process's CPU time (single-threaded work; steadier than the wall
#: clock on a shared machine, where a descheduled round would count another process's time)
CLOCK = time.process_time


def paired(f, g, rounds, clock=None):
    """Median seconds of f and g and the median of the per-round ratios g/f, interleaved A B / B A."""
    clock = clock or CLOCK
    tf, tg = [], []
    for r in range(rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            t = clock()
            (f if which == 0 else g)()
            (tf if which == 0 else tg).append(clock() - t)
    tf, tg = np.array(tf), np.array(tg)
    return float(np.median(tf)), float(np.median(tg)), float(np.median(tg / tf))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--dims", type=int, nargs="+", default=[2, 16, 64])
    p.add_argument("--t1", type=float, default=1.0)
    args = p.parse_args()
    print(f"cores: {os.cpu_count()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, rounds {args.rounds}")
    print(f"{'d':>4} {'nfev':>6} {'gtcore ms':>10} {'scipy ms':>9} {'scipy/gtcore':>13} {'max |diff|':>10}")
    for d in args.dims:
        mu0, S0, ctl = problem(d)
        a = integrate_moments(mu0, S0, ctl, (0, args.t1))
        b = hand_written(mu0, S0, ctl, args.t1)
        diff = float(np.abs(a.Sigma[-1] - b.y[d:, -1].reshape(d, d)).max())
        ta, tb, ratio = paired(
            lambda mu0=mu0, S0=S0, ctl=ctl: integrate_moments(mu0, S0, ctl, (0, args.t1)),
            lambda mu0=mu0, S0=S0, ctl=ctl: hand_written(mu0, S0, ctl, args.t1),
            args.rounds,
        )
        print(
            f"{d:>4} {a.nfev:>6} {1e3 * ta:10.2f} {1e3 * tb:9.2f} {ratio:13.3f} {diff:10.1e}"
            + ("" if a.nfev == b.nfev else f"  (nfev differ: scipy {b.nfev})")
        )


if __name__ == "__main__":
    main()
