r"""Atlas throughput: draws per second of the condition-ensemble sweep per d, in this process and on a LocalCluster,
and what the draws do (the outcomes per attention type).

For each d of ``--ds`` (2..8 by default) the same draws (``--draws`` per attention type), the same chunks, run
(1) in this process (one BLAS thread) and (2) on one ``distributed.LocalCluster`` of ``--workers``
single-threaded processes started once (its start-up timed separately, not counted in the rates). Prints a
table of draws/s per d for each, whether the two tables agree bit for bit, and the count of each outcome per
attention type over all d (the outcomes of :mod:`gtbook.studies.atlas.outcomes`; a tree whose atlas still has
the outcome "other" prints it as such). Run:

    OMP_NUM_THREADS=1 python benchmarks/atlas_throughput.py [--draws 8] [--ds 2 3 4 5 6 7 8] [--workers 2]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from gtbook.studies.atlas.ensembles import ATTENTIONS, ensemble_draws  # noqa: E402
from gtbook.studies.atlas.sweep import run_sweep, tables_identical  # noqa: E402


def main(draws: int, ds: list[int], workers: int, lanes: int) -> dict:
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    startup = time.perf_counter() - t0
    rows, outcomes = [], {att: collections.Counter() for att in ATTENTIONS}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for d in ds:
                ens = ensemble_draws([d], draws)
                here = run_sweep(ens, f"{tmp}/here{d}", lanes=lanes, show_progress=False)
                there = run_sweep(ens, f"{tmp}/there{d}", lanes=lanes, client=client, show_progress=False)
                same = tables_identical(here.table, there.table)
                rows.append((d, len(ens), here.seconds, there.seconds, same))
                for att, out in zip(here.column("attention"), here.column("outcome"), strict=True):
                    outcomes[str(att)][str(out)] += 1
    finally:
        client.close()
        cluster.close()
    print(
        f"{draws} draws per attention type and d ({len(ATTENTIONS)} types), chunks of {lanes}; "
        f"LocalCluster({workers} workers) start-up {startup:.1f} s (not counted)"
    )
    print(f"{'d':>3} {'draws':>6} {'in-process s':>13} {'draws/s':>8} {'cluster s':>10} {'draws/s':>8} {'equal':>6}")
    for d, n, a, b, same in rows:
        print(f"{d:>3} {n:>6} {a:13.2f} {n / a:8.1f} {b:10.2f} {n / b:8.1f} {same!s:>6}")
    n_all = sum(r[1] for r in rows)
    a_all, b_all = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(
        f"all {n_all:>6} {a_all:13.2f} {n_all / a_all:8.1f} {b_all:10.2f} {n_all / b_all:8.1f} "
        f"{all(r[4] for r in rows)!s:>6}"
    )
    names = sorted({o for c in outcomes.values() for o in c})
    print("\noutcomes per attention type (all d):")
    for att, c in outcomes.items():
        total = sum(c.values())
        print(f"  {att:<10} " + ", ".join(f"{o}: {c[o]} ({100 * c[o] / total:.0f} %)" for o in names if c[o]))
    return dict(rows=rows, startup=startup, outcomes=outcomes)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=8)
    p.add_argument("--ds", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lanes", type=int, default=64)
    a = p.parse_args()
    main(a.draws, a.ds, a.workers, a.lanes)
