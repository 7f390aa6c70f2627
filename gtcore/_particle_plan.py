r"""What :func:`gtcore.particles.simulate` settles before its first step: the step schedule (pieces between
control breaks and recorded times), the number of records, the memory it needs and the torch threads it runs on,
and a rough estimate of its time."""

from __future__ import annotations

import contextlib
import math
import os
from contextlib import contextmanager
from itertools import pairwise

import numpy as np
import torch


def _pieces(
    t0: float, t1: float, nodes: np.ndarray, steps: int | None, max_step: float | None, max_steps: int | None = None
) -> list[tuple[float, float, int]]:
    """Intervals between consecutive nodes, each with its number of uniform steps.

    With ``max_steps``, a total beyond it is refused (``ValueError`` naming ``max_step`` or ``steps``)
    before any step is made: the count is known in advance.
    """
    edges = [t0, *[float(t) for t in np.unique(nodes) if t0 < t < t1], t1]
    out: list[tuple[float, float, int]] = []
    total = 0.0
    for a, b in pairwise(edges):
        if max_step is not None:
            n = float(np.ceil((b - a) / max_step - 1e-12))  # may be huge, or inf: checked below
        elif len(edges) == 2:
            n = steps  # type: ignore[assignment]  # simulate gives steps when max_step is None
        else:
            n = max(1, round(steps * (b - a) / (t1 - t0)))  # type: ignore[operator]
        total += n
        if max_steps is not None and not total <= max_steps:
            name = "max_step" if max_step is not None else "steps"
            raise ValueError(
                f"{name}: t_span = ({t0:.6g}, {t1:.6g}) would take {total:.3g} steps or more, beyond "
                f"max_steps = {max_steps}; use a larger max_step, fewer steps, or raise max_steps"
            )
        out.append((a, b, int(n)))
    return out


#: default cap on the number of steps of :func:`simulate` (minutes of work for a few tokens; the count is
#: known before the first step, so a larger one is refused up front)
MAX_STEPS = 1_000_000

#: below this many multiply-adds per attention evaluation (:math:`HN^2d`, :math:`2^{26}`: N = 4096 at d = 2),
#: :func:`simulate` runs torch on one thread (small ops only pay the threads' wake-up; on a loaded machine
#: they stall, see ``_thread_count``)
SERIAL_WORK = 1 << 26


def _thread_count(N: int, d: int, heads: int) -> int:
    """The torch threads :func:`simulate` uses: one below :data:`SERIAL_WORK`, else the caller's setting.

    A function of the problem's size and ``torch.get_num_threads()`` only (never of the machine's load),
    so that a run gives the same numbers every time. Measured on 2 cores shared with other work (load
    about 12, ``benchmarks/velocity_overhead.py``): at N = 1024, d = 2 a second thread made simulate 3x
    slower, one velocity evaluation 10 % slower at N = 2048 and 2 % at N = 4096, and within 5 % either way
    at N = 8192 and 16384 (where, on an idle machine, the second thread pays).
    """
    requested = torch.get_num_threads()
    return 1 if heads * N * N * d < SERIAL_WORK else requested


@contextmanager
def _torch_threads(n: int):
    """Run with ``n`` torch intra-op threads, restoring the caller's setting after."""
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _record_count(
    pieces: list[tuple[float, float, int]], record_every: int, t_eval: np.ndarray | None, t0: float
) -> int:
    """How many times :func:`simulate` may record: the start, the scheduled records, and the state before a
    blow-up (recorded when the schedule had not)."""
    if t_eval is not None:
        return 2 + int(np.sum(t_eval > t0))
    total = sum(n for _, _, n in pieces)
    return 2 + total // record_every + (1 if total % record_every else 0)


def _available_bytes() -> float:
    """Memory this process may still allocate: the smaller of the system's available memory and the
    headroom under an address-space or data limit (``inf`` when none can be read)."""
    import resource

    avail = math.inf
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: line.split()[1] for line in fh}
        avail = float(info["MemAvailable"]) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            avail = float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    status = {}
    try:
        with open("/proc/self/status") as fh:
            status = {line.split(":")[0]: float(line.split()[1]) * 1024 for line in fh if line.startswith("Vm")}
    except (OSError, ValueError, IndexError):
        pass
    for limit, used in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY and used in status:
            avail = min(avail, soft - status[used])
    return avail


def _check_memory(
    N: int, d: int, heads: int, records: int, keep_tokens: bool, dtype: torch.dtype, device: torch.device
) -> None:
    """Refuse, with the numbers, a run whose kept tokens and working arrays cannot fit in memory."""
    item = torch.finfo(dtype).bits // 8
    kept = records * N * d * 8 if keep_tokens else 0  # float64 numpy copies
    working = (12 + 4 * heads) * N * d * item  # the state, the RK stages, the heads' averages and temporaries
    gib = 2.0**30
    if device.type == "cuda":
        free = float(torch.cuda.mem_get_info(device)[0])
        if working > free:
            raise ValueError(
                f"x0: N = {N} tokens of d = {d} need about {working / gib:.2g} GiB of device memory "
                f"to integrate, but {free / gib:.2g} GiB is free on {device}"
            )
        working = 0
    need = kept + working
    avail = _available_bytes()
    if need > avail:
        what = (
            f"keep_tokens=True keeps {records} records x N = {N} x d = {d} float64 tokens ({kept / gib:.3g} GiB) and "
            if keep_tokens
            else ""
        )
        raise ValueError(
            f"{what}the integration needs about {working / gib:.3g} GiB: {need / gib:.3g} GiB in "
            f"all, but about {max(avail, 0.0) / gib:.3g} GiB is available; "
            + (
                "record fewer times (record_every, t_eval) or set keep_tokens=False"
                if keep_tokens
                else "use fewer tokens x0"
            )
        )


_STAGES = {"euler": 1, "midpoint": 2, "rk4": 4}


def _expected_seconds(N: int, d: int, steps: int, method: str, heads: int, average: str) -> float:
    """A rough CPU estimate of a run's time: the empirical average costs ~1.5 ns per ``N^2 (d + 4)`` per
    head and velocity evaluation on one core (measured here; N = 8000, d = 2, 19 RK4 steps: about a
    minute); the Gaussian average is ``O(N d^2)``."""
    per_eval = N * N * (d + 4) if average == "empirical" else N * d * d
    return 1.5e-9 * per_eval * max(1, int(heads)) * _STAGES.get(method, 4) * steps


def _schedule(pieces: list[tuple[float, float, int]]):
    """``(t, t_next, h)`` of every step: uniform steps on each piece, ending exactly at its end."""
    for a, b, n in pieces:
        h = (b - a) / n
        for k in range(n):
            yield a + k * h, (b if k == n - 1 else a + (k + 1) * h), h
