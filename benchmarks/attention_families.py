r"""Benchmark: the Sinkhorn attention kernel against the dot-product kernel (time and memory).

Tokens :math:`x_i \sim N(0, I_d)`, one head, :math:`B = G/d` with :math:`G` standard normal (logits
of standard deviation about 1), float64, one thread. Timed (minimum over repeats):

* ``dot``: :meth:`gtcore.attention.DotProduct.kernel` (torch's fused attention);
* ``l2``: :meth:`gtcore.attention.L2.kernel` (fused attention with a key bias), ``Q, K`` standard
  normal over :math:`\sqrt{2d}`;
* ``sinkhorn``: :func:`gtcore.attention.sinkhorn_scaling.sinkhorn_average` with ``method="sdpa"`` (fused kernel,
  log-sum-exp through a dummy key) and ``method="blocked"`` (1024 rows at a time), at the default
  tolerance 1e-9 and at 1e-6, with the default Gaussian warm start and Anderson acceleration;
  ``plain``: the same from g = 0 without acceleration (``init="zero", anderson=0``). The number of
  row updates is reported (kernel passes: about twice as many).

Memory: the peak resident set of a fresh process that runs one kernel call, minus that of the
same process before the call (so imports and the tokens are excluded), at N = 4096 and 16384;
a dense N x N float64 matrix would take 134 MB and 2.1 GB.

Run:  ``python benchmarks/attention_families.py [--n 4096] [--d 16]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(1)


def problem(n: int, d: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    B = torch.randn(d, d, generator=g, dtype=torch.float64) / d
    Q = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(2 * d)
    K = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(2 * d)
    return x, B, Q, K


def runners(x, B, Q, K):
    from gtcore.attention import ATTENTION_TYPES
    from gtcore.attention.sinkhorn_scaling import sinkhorn_average

    out = {
        "dot": lambda: ATTENTION_TYPES["dot"].kernel(x, B[None]),
        "l2": lambda: ATTENTION_TYPES["l2"].kernel(x, torch.stack([Q, K])[None]),
    }
    plain = dict(init="zero", anderson=0)
    for tol in (1e-9, 1e-6):
        out[f"sinkhorn sdpa tol={tol:g}"] = lambda tol=tol: sinkhorn_average(x, B, tol=tol)
        out[f"sinkhorn sdpa plain tol={tol:g}"] = lambda tol=tol: sinkhorn_average(x, B, tol=tol, **plain)
        out[f"sinkhorn blocked tol={tol:g}"] = lambda tol=tol: sinkhorn_average(x, B, tol=tol, method="blocked")
    return out


def best_time(fn, repeats: int):
    best, value = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def _peak_child(name: str, n: int, d: int) -> None:
    """In a fresh process: print the peak-RSS increase (MB) of one call of ``name``."""
    import resource

    x, B, Q, K = problem(n, d)
    run = runners(x, B, Q, K)[name]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mb": (after - before) / 1024}))


def peak_memory(name: str, n: int, d: int) -> float:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", name, "--n", str(n), "--d", str(d)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_mb"]


def main(n: int = 4096, d: int = 16, repeats: int = 3) -> list[dict]:
    x, B, Q, K = problem(n, d)
    rows = []
    t_dot = None
    for name, fn in runners(x, B, Q, K).items():
        fn()  # warm-up
        t, value = best_time(fn, repeats)
        iters = value[1].iterations if isinstance(value, tuple) else None
        t_dot = t if name == "dot" else t_dot
        rows.append(dict(kernel=name, seconds=t, ratio=t / t_dot, iterations=iters))
    print(f"N = {n}, d = {d}, float64, 1 thread, best of {repeats}")
    print(f"{'kernel':<34}{'time [ms]':>11}{'x dot':>8}{'row updates':>13}")
    for r in rows:
        it = "" if r["iterations"] is None else str(r["iterations"])
        print(f"{r['kernel']:<34}{1e3 * r['seconds']:>11.1f}{r['ratio']:>8.1f}{it:>13}")
    print(
        "\npeak resident-set increase of one call [MB] (dense N x N float64: "
        + ", ".join(f"N={m}: {m * m * 8 / 1e6:.0f} MB" for m in (n, 4 * n))
        + ")"
    )
    for name in ("dot", "sinkhorn sdpa tol=1e-09", "sinkhorn blocked tol=1e-09"):
        mems = [peak_memory(name, m, d) for m in (n, 4 * n)]
        print(f"{name:<34}" + "".join(f"{m:>12.1f}" for m in mems))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        _peak_child(args.child, args.n, args.d)
    else:
        main(args.n, args.d)
