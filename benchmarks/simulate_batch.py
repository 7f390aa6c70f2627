r"""Benchmark: an ensemble of token clouds, one simulate at a time against simulate_batch (wall and CPU).

The workload is chapter 1's general-draw stack ensemble (:func:`gtbook.studies.invariance.ensemble.stack_ensemble`
at the quick profile's sizes unless told otherwise): ``--draws`` draws in :math:`d = 3`, clouds of every
:math:`N` in ``--Ns`` and ``--seeds`` seeds, 12 Euler layers, float32 kernel. Timed:

* ``loop``: one :func:`gtcore.particles.simulate` per cloud (what the study did before);
* ``batch``: :func:`gtcore.particles.simulate_batch` of the clouds of one N (what it does now), ``--threads``
  workers.

Both give the same arrays (checked here). The gain is in wall time only, and only where cores are free: the
clouds below ``SERIAL_WORK`` run on one thread each, so a loop uses one core and a batch up to ``--threads``.
On a machine whose cores are busy with other work the two wall times are close; compare the load average
printed with them.

Run:  ``python benchmarks/simulate_batch.py [--threads 2] [--draws 10] [--Ns 250 500 1000 2000] [--seeds 4]``.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--Ns", type=int, nargs="+", default=[250, 500, 1000, 2000])
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from gtbook.studies.invariance.ensemble import general_draws
    from gtbook.studies.precision import STUDY_KERNEL_DTYPE
    from gtcore.particles import simulate, simulate_batch
    from gtcore.stats.sampling import moment_matched_tokens

    draws = general_draws(args.draws, 3, T=1.0, seed=2211, kappa=0.25)
    jobs = [(k, N, s) for N in args.Ns for k in range(len(draws)) for s in range(args.seeds)]
    x0s = [moment_matched_tokens("gaussian", N, draws[k].mu0, draws[k].Sigma0, 2212 + 1000 * k + s) for k, N, s in jobs]
    opts = dict(method="euler", record_every=12, device="cpu", kernel_dtype=STUDY_KERNEL_DTYPE, keep_tokens=True)

    def loop():
        return [simulate(x, draws[k].controls, (0.0, 1.0), 12, **opts) for x, (k, _, _) in zip(x0s, jobs, strict=True)]

    def batch():
        out = []
        for N in args.Ns:
            idx = [i for i, (_, n, _) in enumerate(jobs) if n == N]
            out += simulate_batch(
                [x0s[i] for i in idx],
                [draws[jobs[i][0]].controls for i in idx],
                (0.0, 1.0),
                12,
                workers=args.threads,
                **opts,
            )
        return out

    results = {}
    for name, fn in (("loop", loop), ("batch", batch)):
        load = os.getloadavg()[0]
        w, c = time.perf_counter(), time.process_time()
        results[name] = fn()
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        print(
            f"{name:<6} {len(jobs)} clouds: wall {wall:7.2f} s   cpu {cpu:7.2f} s"
            f"   (load average {load:.1f} on {os.cpu_count()} cores, {args.threads} threads)",
            flush=True,
        )
    same = all(np.array_equal(a.tokens, b.tokens) for a, b in zip(results["loop"], results["batch"], strict=True))
    print(f"the same tokens: {same}")


if __name__ == "__main__":
    main()
