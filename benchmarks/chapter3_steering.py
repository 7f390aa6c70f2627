r"""Wall time of chapter 3's slowest study calls: ``steered_study`` and ``measured_steering`` (one notebook cell),
and ``attention_only_steering``.

Runs them with a profile's parameters (``notebooks/profiles.toml`` over the chapter's parameters cell, the
chapter's seeds), prints each call's wall and CPU seconds, and with ``--save PATH`` writes every array the
chapter's claims read (the distances, the dynamic errors, the bootstrap standard errors, the amplifications)
to an ``.npz``, so two versions of the code can be compared number for number (``--compare OLD.npz``: the
largest relative difference of each array, 0 where bit-identical).

Run:  ``PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/chapter3_steering.py [--profile quick]
[--only steered|measured|attention] [--save out.npz] [--compare old.npz]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "03_rank_and_reachability"


def parameters(profile: str) -> dict:
    """The chapter's parameters cell, with ``profile``'s overrides."""
    from gtbook.chapters import parameters_cell

    source = parameters_cell((ROOT / "notebooks" / f"{CHAPTER}.py").read_text())
    if source is None:
        raise SystemExit(f"{CHAPTER}: no parameters cell")
    values: dict = {}
    exec(source, {}, values)  # literals only
    with open(ROOT / "notebooks" / "profiles.toml", "rb") as fh:
        values.update(tomllib.load(fh).get(profile, {}).get(CHAPTER, {}))
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--only", choices=("steered", "measured", "attention"))
    ap.add_argument("--save", type=Path)
    ap.add_argument("--compare", type=Path)
    args = ap.parse_args()
    from gtbook.studies import reachability as study

    p = parameters(args.profile)
    out: dict[str, np.ndarray] = {}
    if args.only in (None, "steered"):
        t0, c0 = time.perf_counter(), time.process_time()
        st = study.steered_study(**p["steered"], seed=p["st_seed"], boot_seed=p["st_boot_seed"], n_boot=p["n_boot"])
        print(f"steered_study           {time.perf_counter() - t0:8.1f} s wall {time.process_time() - c0:8.1f} s CPU")
        for name, res in (("gauss", st.gauss), ("transposed", st.transposed)):
            out.update(
                {
                    f"st_{name}_distance": res.distance,
                    f"st_{name}_dynamic": res.dynamic,
                    f"st_{name}_slopes": np.array([res.slope, res.dynamic_slope, res.ode_error, res.kappa_max]),
                }
            )
        out["st_se"] = np.array([st.se_distance, st.se_dynamic])
    if args.only in (None, "measured"):  # the same notebook cell as steered_study
        t0, c0 = time.perf_counter(), time.process_time()
        meas = study.measured_steering(**p["measured"], seed=p["ms_seed"])
        print(f"measured_steering       {time.perf_counter() - t0:8.1f} s wall {time.process_time() - c0:8.1f} s CPU")
        out.update(
            ms_distance=meas.distance,
            ms_dynamic=meas.dynamic,
            ms_dynamic_transposed=meas.dynamic_transposed,
            ms_distance_transposed=meas.distance_transposed,
        )
    if args.only in (None, "attention"):
        t0, c0 = time.perf_counter(), time.process_time()
        ao = study.attention_only_steering(**p["attention_only"], seed=p["ao_seed"])
        print(f"attention_only_steering {time.perf_counter() - t0:8.1f} s wall {time.process_time() - c0:8.1f} s CPU")
        out.update(
            ao_distance=ao.distance,
            ao_free=ao.free,
            ao_control=ao.control,
            ao_predicted=ao.predicted,
            ao_extra=np.array([ao.ode_error, *ao.cond0, *ao.cond1, *ao.log_norm]),
        )
    if args.save:
        np.savez(args.save, **out)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
    if args.compare:
        old = np.load(args.compare)
        for key, new in out.items():
            if key in old:
                a, b = np.asarray(old[key], float), np.asarray(new, float)
                same = np.array_equal(a, b, equal_nan=True)
                rel = 0.0 if same else float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(a), 1e-300)))
                print(f"  {key:24s} {'bit-identical' if same else f'max rel diff {rel:.2e}'}")


if __name__ == "__main__":
    main()
