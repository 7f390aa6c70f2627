r"""Atlas throughput: draws per second of the condition-ensemble sweep, in this process and on a LocalCluster.

The same draws (``--draws`` per attention type and d, d = 2..8 by default), the same chunks, run
(1) in this process (one BLAS thread) and (2) on a ``distributed.LocalCluster`` of ``--workers``
single-threaded processes (its start-up timed separately). Prints draws/s for each and extrapolates
the wall time of a 10^6-draw atlas at those rates (and per worker, for a cluster of W workers,
assuming the rate scales with W: chunks are independent, the scheduler's per-chunk overhead is
milliseconds against seconds of work). Run: ``python benchmarks/atlas_throughput.py [--draws 8]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from gtbook.studies.atlas.ensembles import ensemble_draws  # noqa: E402
from gtbook.studies.atlas.sweep import run_sweep, tables_identical  # noqa: E402


def main(draws: int, ds: list[int], workers: int, lanes: int) -> dict:
    ens = ensemble_draws(ds, draws)
    with tempfile.TemporaryDirectory() as tmp:
        here = run_sweep(ens, f"{tmp}/here", lanes=lanes, show_progress=False)
        from distributed import Client, LocalCluster

        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        startup = time.perf_counter() - t0
        try:
            there = run_sweep(ens, f"{tmp}/there", lanes=lanes, client=client, show_progress=False)
        finally:
            client.close()
            cluster.close()
    same = tables_identical(here.table, there.table)
    r_here, r_there = len(ens) / here.seconds, len(ens) / there.seconds
    print(f"{len(ens)} draws (d = {ds}, {draws} per attention type and d, chunks of {lanes})")
    print(f"in-process:            {here.seconds:7.1f} s  {r_here:7.2f} draws/s")
    print(f"LocalCluster({workers} workers): {there.seconds:7.1f} s  {r_there:7.2f} draws/s "
          f"(+ {startup:.1f} s start-up); tables equal bit for bit: {same}")
    for name, r in (("in-process", r_here), (f"LocalCluster({workers})", r_there)):
        print(f"10^6 draws {name}: {1e6 / r / 3600:7.1f} h")
    per_worker = r_there / workers
    for W in (16, 64, 256):
        print(f"10^6 draws on {W} workers at {per_worker:.2f} draws/s each: {1e6 / (W * per_worker) / 60:7.1f} min")
    return dict(here=r_here, there=r_there, startup=startup, same=same)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=8)
    p.add_argument("--ds", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lanes", type=int, default=64)
    a = p.parse_args()
    main(a.draws, a.ds, a.workers, a.lanes)
