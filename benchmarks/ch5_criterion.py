r"""Benchmark: where chapter 5's time goes (the effect-size criterion and the training), wall and CPU.

Times, for one model at one size :math:`S` (tokens :math:`T = 512`), with the chapter's settings:

* ``null``: :func:`~gtbook.studies.pretrained.effects.null_moments` (:math:`R` Gaussian samples, :math:`P`
  of them resampled :math:`B` times);
* ``layers``: :func:`~gtbook.studies.pretrained.criterion.layer_effects` in one mode, the null cached;
* ``reference``: one Student-t reference at the same shape;
* ``train-vit`` / ``train-mlm`` (``--train``): a cold training run of ``--steps`` steps (no cache);
* ``null, from disk`` / ``reference, from disk``: the same null and reference again in a fresh process state
  (per-process cache cleared), read back from the on-disk cache (a temporary folder);
* ``one statistic evaluation``: the statistics of one resample (:func:`~gtbook.studies.pretrained.effects._values`)
  at the chapter's shapes, :math:`S \in \{8, 32\}` and :math:`r \in \{128, 192, 384\}`, the median of 5.

Both the wall time and the process CPU time are printed: on a shared machine the CPU time is the
steadier measure (threads waiting for a core count in wall time only).

Run:  ``python benchmarks/ch5_criterion.py [--model minilm] [--S 32] [--boot 48] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", choices=["minilm", "vit", "modernbert"])
    ap.add_argument("--S", type=int, default=32)
    ap.add_argument("--boot", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train", action="store_true", help="also time a cold training of each trained-here model")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import tempfile

    os.environ.pop("GTBOOK_NO_CACHE", None)
    os.environ["GTBOOK_CACHE"] = tempfile.mkdtemp(prefix="ch5_criterion_")  # a cold, private disk cache

    import torch

    torch.set_num_threads(args.threads)
    from gtbook.studies.pretrained import criterion as C
    from gtbook.studies.pretrained import effects as E
    from gtbook.studies.pretrained import training as tr
    from gtcore.models import load_transformer

    def timed(label, fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        print(f"{label:<28} wall {time.perf_counter() - w:7.1f} s   cpu {time.process_time() - c:7.1f} s", flush=True)
        return out

    st = E.Settings(n_boot=args.boot, null_repeats=16, null_pool=4)
    if args.model == "minilm":
        model = load_transformer("minilm", device="cpu")
    else:
        train = tr.train_vit_digits if args.model == "vit" else tr.train_modernbert_mlm
        sched = (tr.vit_schedule if args.model == "vit" else tr.mlm_schedule)(2, 1)
        model = train(sched).initial
    seed = 977  # a benchmark seed, not one of the chapter's
    r = model.d - (1 if args.model == "minilm" else 0)
    timed(f"null S={args.S} r={r}", lambda: E.null_moments(args.S, 512, model.d, seed=seed, settings=st))
    timed(
        f"layers ({model.n_layers + 1}), pure",
        lambda: C.layer_effects(model, mode="pure", sequences=args.S, tokens=512, seed=seed, settings=st),
    )
    timed("reference nu=20", lambda: E.reference_effect_sizes(20.0, args.S, 512, model.d, seed=seed, settings=st))
    for fn in (E.null_moments, E.reference_effect_sizes):
        fn.cache_clear()  # as a new process would start
    timed("null, from disk", lambda: E.null_moments(args.S, 512, model.d, seed=seed, settings=st))
    timed("reference, from disk", lambda: E.reference_effect_sizes(20.0, args.S, 512, model.d, seed=seed, settings=st))
    import numpy as np
    from threadpoolctl import threadpool_limits

    for S in (8, 32):
        for r in (128, 192, 384):
            cl = E._cloud(np.random.default_rng(seed).standard_normal((S, 512, r)), st.n_projections, seed)
            counts = E.bootstrap_counts(S, 5, seed)
            cpu = []
            with threadpool_limits(limits=1, user_api="blas"):
                for c in counts:
                    c0 = time.process_time()
                    E._values(cl, c)
                    cpu.append(time.process_time() - c0)
            print(
                f"one statistic evaluation S={S:<3d} r={r:<4d}       cpu {1e3 * float(np.median(cpu)):7.1f} ms "
                "(one BLAS thread)",
                flush=True,
            )
    if args.train:
        timed(f"train-vit {args.steps} steps", lambda: tr.train_vit_digits(tr.vit_schedule(args.steps, 5)))
        timed(f"train-mlm {args.steps} steps", lambda: tr.train_modernbert_mlm(tr.mlm_schedule(args.steps, 5)))


if __name__ == "__main__":
    main()
