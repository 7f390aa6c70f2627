r"""Benchmark: can chapter 5 fit its time budget (quick <= 90 s, full <= 4 min on 2 cores)?

Runs what the quick profile of chapter 5 runs, part by part, and times each: the training of the two models
trained here (cold, unless ``--warm`` finds them in the cache), then the criterion
(:func:`~gtbook.studies.pretrained.criterion.study_model`) on MiniLM, the ViT and the ModernBERT at each
confirmatory size, and the sweep's extra size, for each number of bootstrap replicates :math:`B` asked.

The criterion's cost is a count of evaluations of the three statistics (each an ``eigh`` of the
:math:`d \times d` resample covariance and two float32 GEMMs of :math:`n \times d \times (r + K)`, then a
sort of :math:`K \times n` projections). Per model, size and mode the :math:`L + 1` layers take
:math:`1 + B` evaluations each; per rank group the null takes :math:`R + P B`; the reference and the
control :math:`1 + B` each. So the criterion's time is close to affine in :math:`B`, and the printed
evaluation counts give the slope.

Only ``--boot 48`` (the chapter's :math:`B`, with :math:`P = 4`) reproduces the chapter's numbers; the
other values are there to measure how the time scales, not to be used.

Run:  ``python benchmarks/ch5_budget.py [--boot 48 16] [--pool 4 2] [--threads 2] [--warm]``
(about 7 minutes cold at ``--boot 48``). Results: ``benchmarks/results/ch5_budget.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

MODELS = ("MiniLM", "ViT", "ModernBERT")
SIZES = ((8, 8231), (32, 32771))  # the chapter's confirmatory sizes and seeds
SWEEP = (4, 4127)  # the quick profile's sweep size and seed


def evaluations(
    layers: int, boot: int, repeats: int, pool: int, modes: int = 2, groups: int = 1, controls: bool = True
) -> int:
    """Evaluations of the three statistics for one model at one size (see the module docstring)."""
    return modes * layers * (1 + boot) + groups * (repeats + pool * boot) + groups * (2 if controls else 1) * (1 + boot)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boot", type=int, nargs="+", default=[48])
    ap.add_argument("--pool", type=int, nargs="+", default=None, help="P per --boot value (default 4)")
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warm", action="store_true", help="use (and fill) the cache at $GTBOOK_CACHE for the weights")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ch5_budget.json"))
    args = ap.parse_args()
    pools = args.pool or [4] * len(args.boot)
    if len(pools) != len(args.boot):
        ap.error("--pool needs one value per --boot value")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if not args.warm:
        os.environ["GTBOOK_CACHE"] = tempfile.mkdtemp(prefix="gtbook-bench-")  # a cold cache of its own

    import torch

    torch.set_num_threads(args.threads)
    from gtbook.studies.pretrained import training as tr
    from gtbook.studies.pretrained.criterion import REFERENCE_NU, study_model
    from gtbook.studies.pretrained.effects import Settings
    from gtcore.models import load_transformer

    def timed(fn, *a, **kw):
        w, c = time.perf_counter(), time.process_time()
        out = fn(*a, **kw)
        return out, time.perf_counter() - w, time.process_time() - c

    rows: list[dict] = []
    vit, w_vit, _ = timed(tr.train_vit_digits, tr.vit_schedule(100, 2311))
    mlm, w_mlm, _ = timed(tr.train_modernbert_mlm, tr.mlm_schedule(150, 2311))
    cached = {k: bool(t.record.loaded_from_cache) for k, t in (("vit", vit), ("modernbert", mlm))}
    print(
        f"training (quick schedules): ViT {w_vit:.1f} s, ModernBERT {w_mlm:.1f} s (from the cache: {cached})",
        flush=True,
    )
    models = dict(zip(MODELS, (load_transformer("minilm", device="cpu"), vit.model, mlm.model), strict=True))
    for boot, pool in zip(args.boot, pools, strict=True):
        st = Settings(n_projections=128, n_boot=boot, null_repeats=args.repeats, null_pool=pool)
        total_w = total_c = 0.0
        n_eval = 0
        for name, model in models.items():
            for S, seed in (*SIZES, *((SWEEP,) if name == "MiniLM" else ())):
                sweep = (S, seed) == SWEEP
                study, w, c = timed(
                    study_model,
                    model,
                    sizes=[S],
                    seeds=[seed],
                    tokens=512,
                    settings=st,
                    nus=(REFERENCE_NU,),
                    controls=not sweep,
                )
                groups = len({int(q) for res in study.effects[S].values() for q in res.null_rank})
                n = evaluations(model.n_layers + 1, boot, args.repeats, pool, groups=groups, controls=not sweep)
                total_w, total_c, n_eval = total_w + w, total_c + c, n_eval + n
                rows.append(
                    dict(
                        boot=boot,
                        pool=pool,
                        model=name,
                        sequences=S,
                        wall_s=round(w, 2),
                        cpu_s=round(c, 2),
                        evaluations=n,
                    )
                )
                print(
                    f"B={boot:3d} P={pool} {name:<11} S={S:2d}: wall {w:6.1f} s  cpu {c:6.1f} s  ({n} evaluations)",
                    flush=True,
                )
        print(
            f"B={boot:3d} P={pool} criterion: wall {total_w:.1f} s, cpu {total_c:.1f} s, {n_eval} evaluations",
            flush=True,
        )
        rows.append(
            dict(
                boot=boot,
                pool=pool,
                model="criterion",
                wall_s=round(total_w, 2),
                cpu_s=round(total_c, 2),
                evaluations=n_eval,
            )
        )
    out = dict(
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        threads=args.threads,
        warm=args.warm,
        training_s=dict(vit=round(w_vit, 2), modernbert=round(w_mlm, 2)),
        from_cache=cached,
        rows=rows,
        load=os.getloadavg()[0],
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
