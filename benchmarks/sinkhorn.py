r"""Benchmark: finite-N Sinkhorn scaling on chapter 7's hardest case, against POT's log-domain solver.

The case: the layer of chapter 7's section (b), :math:`V = K = I`, :math:`B = Q` (symmetric positive
definite, the dot product's blow-up parameters), tokens moved from :math:`N(0, I_2)` to
:math:`1.5\,t^*` (``--N`` tokens, seed 1, 20 RK4 steps with Sinkhorn attention; the cloud has grown, the
kernel is strong and plain Sinkhorn slows down). On those tokens one scaling to the same tolerance
(relative violation of both marginals at most ``--tol``), float64, one thread:

* ``POT sinkhorn_log``: :func:`ot.bregman.sinkhorn_log` (cost :math:`-x_j^\top Bx_i`, ``reg = 1``, uniform
  marginals), with ``stopThr`` = ``tol / N`` (its absolute 2-norm test then implies our relative one; every
  10 iterations) and, for the same start, once from zero potentials (its only start);
* ``gtcore log-domain``: :func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_average` with ``dense=False`` (the
  fused log-sum-exp kernel, the engine every call used before);
* ``gtcore dense``: the default (dense kernel with absorbed potentials; the symmetric iteration, since
  :math:`B` is symmetric positive definite), Gaussian start;
* ``gtcore dense, warm``: the same, started as :func:`gtcore.particles.simulate` starts it, from the scaling
  of the tokens half a step earlier (:func:`~gtcore.attention.sinkhorn_scaling.warm_starts`; the row's time
  includes that earlier scaling, so it is an upper bound);
* ``gtcore dense, alternating``: the dense alternating iteration (what a non-symmetric :math:`B` gets).

Each row: the best wall time of ``--repeats`` calls (one thread, so wall and CPU agree up to the machine's
load), the row updates, the certified marginal error of the returned pair (recomputed here from the dense
plan, the same formula for every solver) and the largest difference of its average from the log-domain
one. Then a whole particle run of the case (``simulate``, 20 RK4 steps) with the new kernel and with the
previous one (log-domain, Gaussian start at every call), CPU seconds.

Run:  ``python benchmarks/sinkhorn.py [--N 1000] [--tol 1e-9] [--repeats 3] [--no-pot]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

Q_BLOW = np.array([[1.0, 0.3], [0.3, 0.6]])


def hardest_cloud(n: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The tokens of chapter 7's section (b) at 1.5 t* and the matrix B = Q."""
    from gtcore import Controls
    from gtcore.particles import simulate
    from gtcore.riccati import blowup_time
    from gtcore.stats.sampling import gaussian_tokens

    ctl = Controls(V=np.eye(2), Q=Q_BLOW, K=np.eye(2), attention="sinkhorn")
    t_end = 1.5 * blowup_time(np.eye(2), Controls(V=np.eye(2), Q=Q_BLOW, K=np.eye(2))).t_star
    x0 = gaussian_tokens(n, np.zeros(2), np.eye(2), seed=1)
    tr = simulate(x0, ctl, (0.0, t_end), 20, device="cpu")
    return torch.as_tensor(tr.final_tokens), torch.as_tensor(Q_BLOW), t_end


def certified_error(x: torch.Tensor, B: torch.Tensor, f: torch.Tensor, g: torch.Tensor) -> float:
    """The relative violation of both marginals of the plan e^{f_i + g_j + x_j.Bx_i}, summed densely."""
    n = x.shape[0]
    logP = f[:, None] + g[None, :] + (x @ B.T) @ x.T
    rows = torch.logsumexp(logP, 1) + math.log(n)
    cols = torch.logsumexp(logP, 0) + math.log(n)
    return float(torch.cat([rows, cols]).expm1().abs().max())


def best(fn, repeats: int):
    out, t_best = None, math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def pot_solver(x: torch.Tensor, B: torch.Tensor, tol: float):
    """POT's log-domain Sinkhorn to the same tolerance: (f, g, iterations, average)."""
    try:
        import ot
    except ImportError:
        raise SystemExit("POT is not installed: pip install -e '.[bench]', or pass --no-pot") from None

    n = x.shape[0]
    M = -((x @ B.T) @ x.T).numpy()
    a = np.full(n, 1.0 / n)
    P, log = ot.bregman.sinkhorn_log(a, a, M, 1.0, numItermax=100000, stopThr=tol / n, log=True)
    f, g = torch.as_tensor(log["log_u"]), torch.as_tensor(log["log_v"])
    avg = torch.as_tensor(P / P.sum(1, keepdims=True)) @ x
    return f, g, int(log["niter"]), avg


def rows(n: int, tol: float, repeats: int, with_pot: bool) -> None:
    from gtcore.attention import ATTENTION_TYPES
    from gtcore.attention.sinkhorn_scaling import sinkhorn_average, warm_starts
    from gtcore.particles import velocity

    x, B, _ = hardest_cloud(n)
    _, _, t_end = hardest_cloud(2)
    x_prev = x - 0.5 * (t_end / 20) * torch.as_tensor(velocity(x.numpy(), _controls()))  # half a step back

    def warm():
        with warm_starts():
            ATTENTION_TYPES["sinkhorn"].kernel(x_prev, B[None])  # the scaling half a step earlier
            return sinkhorn_average(x, B, tol=tol)

    B_asym = B + torch.tensor([[0.0, 1e-15], [0.0, 0.0]], dtype=x.dtype)  # not symmetric: the alternating engine
    cases = {
        "gtcore log-domain (previous default)": lambda: sinkhorn_average(x, B, tol=tol, dense=False),
        "gtcore dense": lambda: sinkhorn_average(x, B, tol=tol),
        "gtcore dense, warm start (+ the earlier call)": warm,
        "gtcore dense, alternating (B + 1e-15 e1e2')": lambda: sinkhorn_average(x, B_asym, tol=tol),
    }
    print(
        f"chapter 7 (b) at 1.5 t*: N = {n}, B = Q (symmetric positive definite), tol = {tol:g}, float64, "
        f"1 thread, best of {repeats}"
    )
    print(f"{'solver':<44}{'time [ms]':>11}{'POT / this':>11}{'updates':>9}{'certified err':>15}{'|avg - ref|':>13}")
    ref = None
    results = []
    if with_pot:
        t, (f, g, it, avg) = best(lambda: pot_solver(x, B, tol), repeats)
        results.append(("POT sinkhorn_log (from zero)", t, it, certified_error(x, B, f, g), avg))
    for name, fn in cases.items():
        t, (avg, res) = best(fn, repeats)
        results.append((name, t, res.iterations, certified_error(x, B, res.f, res.g), avg))
        if ref is None:
            ref = avg
    t_pot = results[0][1] if with_pot else None
    for name, t, it, err, avg in results:
        ratio = f"{t_pot / t:11.1f}" if t_pot else f"{'':>11}"
        print(f"{name:<44}{1e3 * t:>11.1f}{ratio}{it:>9d}{err:>15.2e}{float((avg - ref).abs().max()):>13.1e}")


def _controls():
    from gtcore import Controls

    return Controls(V=np.eye(2), Q=Q_BLOW, K=np.eye(2), attention="sinkhorn")


def whole_run(n: int) -> None:
    """simulate on the case with the new kernel and with the previous one (log domain, Gaussian start)."""
    import contextlib

    import gtcore.attention.sinkhorn_scaling as scaling
    import gtcore.particles as particles
    from gtcore.stats.sampling import gaussian_tokens

    _, _, t_end = hardest_cloud(2)
    x0 = gaussian_tokens(n, np.zeros(2), np.eye(2), seed=1)
    out = {}
    for label in ("new", "previous"):
        saved = particles.warm_starts, scaling.DENSE_MAX_N
        if label == "previous":  # every scaling in the log domain from the Gaussian start
            particles.warm_starts, scaling.DENSE_MAX_N = contextlib.nullcontext, 0  # type: ignore[assignment]
        try:
            c0 = time.process_time()
            tr = particles.simulate(x0, _controls(), (0.0, t_end), 20, device="cpu")
            out[label] = (time.process_time() - c0, tr)
        finally:
            particles.warm_starts, scaling.DENSE_MAX_N = saved
    diff = float(np.abs(out["new"][1].Sigma[-1] - out["previous"][1].Sigma[-1]).max())
    print(
        f"\nsimulate, N = {n}, 20 RK4 steps to 1.5 t*: new kernel {out['new'][0]:.2f} s CPU, previous "
        f"{out['previous'][0]:.2f} s CPU ({out['previous'][0] / out['new'][0]:.1f}x); largest difference of "
        f"the final covariance {diff:.1e}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--N", type=int, default=1000)
    parser.add_argument("--tol", type=float, default=1e-9)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-pot", action="store_true")
    args = parser.parse_args()
    rows(args.N, args.tol, args.repeats, not args.no_pot)
    whole_run(args.N)
