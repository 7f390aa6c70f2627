r"""The cost of tracing a claim's two sides (:mod:`gtbook.studies.traced`) in the studies of chapters 1, 2 and 9.

Each study call runs twice in this process, alternately, ``--repeats`` times: as the chapters run it (its marked
blocks traced by a profiling hook) and with the marking turned off (``gtbook.studies.traced._record`` replaced by a
block that traces nothing). Prints the least CPU time of each and their ratio, and checks that both give the same
numbers (the tracing must change none). The calls are scaled-down versions of the chapters' own (the quick
profile's sizes where they are cheap). Run: ``python benchmarks/sides_tracing.py [--repeats 3]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ["GTBOOK_NO_CACHE"] = "1"  # time the computation, not a cache read

import argparse  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import gtbook.studies.traced as traced  # noqa: E402


def _cases() -> dict[str, Callable[[], Any]]:
    from gtbook.studies.beyond import ReluLayer, prediction_null
    from gtbook.studies.beyond.harness import track_gaussianity
    from gtbook.studies.invariance.harness import mean_field_study
    from gtbook.studies.invariance.nongaussian import softmax_stack_study
    from gtbook.studies.learning.harness import learning_run, null_losses, random_targets, standard_start
    from gtcore import Controls, gaussian_tokens

    weak = Controls(A=[[0.2, 0.6], [-0.6, 0.1]], b=[0.3, 0.0], V=0.5 * np.eye(2), B=[[-0.3, 0.1], [0.0, -0.2]])
    mu0, S0 = [0.5, -0.3], [[1.0, 0.4], [0.4, 0.7]]
    layer = ReluLayer(2.0, 0.5, [[1.5, -1.0], [1.0, 0.5]], [1.0, 0.0])
    x0 = gaussian_tokens(1500, np.zeros(2), np.eye(2), 0)
    t = random_targets(1, 3, 3, seed=1)[0]
    m2, s2 = standard_start(3, 2)
    return {
        "ch1 mean_field_study (N 250..2000, 8 seeds, 4 RK4 steps)": lambda: (
            mean_field_study(mu0, S0, weak, (0, 1.0), [250, 500, 1000, 2000], 8, 4, progress=False).errors
        ),
        "ch1 softmax_stack_study (12 layers, N 125..1000, 8 seeds)": lambda: (
            softmax_stack_study(mu0, S0, weak, 1.0, 12, [125, 250, 500, 1000], 8).errors
        ),
        "ch2 track_gaussianity (N 1500, 13 times)": lambda: track_gaussianity(
            x0, layer(0.0), np.geomspace(1e-3, 1.0, 13), max_step=0.1
        ).statistics["sliced_w2"],
        "ch2 prediction_null (2000 tokens, 12 clouds, one offset)": lambda: (
            prediction_null(layer, [0.0], 1.0, n_tokens=2000, clouds=12, steps=10, gain_error=1.1, seed=2221)
            .tests["identity ODE"]
            .ratio
        ),
        "ch9 learning_run (N 128, 8 layers, 150 Adam steps)": lambda: (
            learning_run(
                m2,
                s2,
                t.mu,
                t.Sigma,
                n_tokens=128,
                layers=8,
                T=1.0,
                attention=True,
                steps=150,
                lr=0.05,
                final_lr=5e-4,
                init_scale=0.1,
                seed=1,
                test_repeats=32,
                test_seed=2,
            ).test.losses
        ),
        "ch9 null_losses (N 128, 100 pairs)": lambda: (
            null_losses(t.mu, t.Sigma, n_tokens=128, rank=2, repeats=100, seed=3).losses
        ),
    }


@contextlib.contextmanager
def _untraced(which: str):
    yield


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main(repeats: int) -> None:
    traced_record = traced._record
    for name, fn in _cases().items():
        on, off = [], []
        values = {}
        for _ in range(repeats):
            traced._record = traced_record
            dt, values["on"] = _cpu(fn)
            on.append(dt)
            traced._record = _untraced
            dt, values["off"] = _cpu(fn)
            off.append(dt)
        traced._record = traced_record
        same = bool(np.array_equal(np.asarray(values["on"]), np.asarray(values["off"])))
        print(
            f"{name}: traced {min(on):.2f} s, untraced {min(off):.2f} s, ratio {min(on) / min(off):.3f}, "
            f"same numbers: {same}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    main(parser.parse_args().repeats)
