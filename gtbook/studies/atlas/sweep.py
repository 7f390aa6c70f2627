r"""An atlas sweep on Dask: chunks of lanes, results written as they complete, an interrupted sweep resumes.

A sweep is many independent small ODE batches. :func:`make_chunks` groups the draws
(:class:`~gtbook.studies.atlas.ensembles.Draw`) into chunks of one dimension and attention type: each
chunk is one call of :func:`~gtbook.studies.atlas.outcomes.classify_lanes`, its draws the lanes of
:func:`gtcore.moments.lanes.integrate_lanes`. :func:`run_sweep` runs the chunks

* in this process, one after the other (the default, Dask's synchronous model: no cluster),
* on a ``dask.distributed`` cluster: a :class:`distributed.Client` (``client=``), a scheduler address
  (``scheduler="tcp://host:8786"``; ``gtbook atlas --scheduler tcp://...``), or ``scheduler="local"``
  for a :class:`distributed.LocalCluster` of ``workers`` single-threaded processes started for the
  sweep.

Every finished chunk is written at once to ``out/chunk-NNNNN-<digest>.parquet`` (written beside,
then renamed: a file is complete or absent), where the digest hashes the chunk's draws and horizon, the
code a chunk runs (the sources of this module's import closure: the classifier, the draws, ``gtcore``;
:func:`sweep_code`) and the key packages' versions. A second call with the same ``out`` reads the chunks
already there and computes only the others, so a sweep stopped half-way resumes, and a changed sweep (other
draws, another horizon, edited code, another numpy) never reuses a stale file. Each file carries, in its
metadata, the keys of the draws it covers and a SHA-256 of its rows; a file whose rows, draws or checksum
do not match (a damaged disk, an edit, a copy cut short) is recomputed, with one line naming it. Each chunk
runs with one BLAS thread and is a pure function of its draws, so the table is the same, bit for bit, in
this process and on any cluster (``tests/studies/test_atlas_sweep.py``).

**Faults.** Before anything is computed the sweep checks its arguments (``workers`` >= 1, distinct draws)
and estimates the memory of the largest chunk (:func:`chunk_bytes`) against what this machine (or each
worker of a cluster) has. A scheduler must accept the connection and answer within ``timeout`` seconds,
and answer again whenever no chunk has finished for that long; a scheduler lost mid-sweep ends the sweep
with a :class:`SchedulerError` that says how many chunks are kept and how to resume.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gtbook.studies.atlas.ensembles import Draw, conditions, draw_controls
from gtbook.studies.atlas.outcomes import classify_lanes
from gtcore._progress import progress
from gtcore._validation import check_count, check_integer, check_positive

__all__ = [
    "COLUMNS",
    "Chunk",
    "SchedulerError",
    "SweepResult",
    "atlas",
    "chunk_bytes",
    "make_chunks",
    "read_chunk",
    "run_chunk",
    "run_sweep",
    "sweep_code",
    "tables_identical",
]

#: the schema metadata key of a chunk file: its digest, the keys of its draws, the SHA-256 of its rows
META_KEY = b"gtbook.atlas"
#: bytes per lane and covariance entry of a chunk (measured peak: 45-100 x 8 bytes, tracemalloc; the test
#: checks that the estimate bounds the measurement)
LANE_FACTOR = 128

#: one row per draw
COLUMNS = (
    "key",
    "ensemble",
    "attention",
    "variant",
    "d",
    "index",
    "outcome",
    "rank",
    "t_end",
    "t_pole",
    "kappa",
    "rate",
    "moving",
    "stiff",
    "failed",
    "lam_min",
    "lam_max",
    "alpha_max",
    "alpha_min",
    "opposite",
    "same",
    "scalar_V",
    "A_class",
    "stab",
    "blow",
    "v_kind",
    "b_kind",
    "shift",
)


@dataclass(frozen=True)
class Chunk:
    """Draws of one dimension and attention type, integrated together as lanes."""

    id: int
    draws: tuple[Draw, ...]
    horizon: float
    #: the code and versions the chunk is computed with (:func:`sweep_code`)
    code: str = ""

    def digest(self) -> str:
        h = hashlib.sha256(f"{self.horizon!r}/{self.code}".encode())
        for dr in self.draws:
            h.update(dr.key.encode() + f"/{dr.seed}".encode() + b"\0")
        return h.hexdigest()[:12]

    @property
    def filename(self) -> str:
        return f"chunk-{self.id:05d}-{self.digest()}.parquet"

    def __repr__(self) -> str:
        first = self.draws[0]
        return f"Chunk({self.id}, {len(self.draws)} x {first.ensemble}/{first.attention}/d{first.d})"


def make_chunks(draws: Sequence[Draw], lanes: int = 256, *, horizon: float = 100.0, code: str = "") -> list[Chunk]:
    """Group ``draws`` (in their order) into chunks of at most ``lanes`` draws of one (ensemble, attention, d).

    Raises ValueError for a draw that is not a ``Draw``, has a negative seed, or comes twice (its rows
    would be counted twice).
    """
    if not isinstance(lanes, (int, np.integer)) or isinstance(lanes, bool) or lanes < 1:
        raise ValueError(f"lanes must be a positive integer, got {lanes!r}")
    groups: dict[tuple, list[Draw]] = {}
    seen: set[str] = set()
    for dr in draws:
        if not isinstance(dr, Draw):
            raise ValueError(f"draws must be Draw records, got {type(dr).__name__}")
        if isinstance(dr.seed, bool) or not isinstance(dr.seed, (int, np.integer)) or dr.seed < 0:
            raise ValueError(f"draw {dr.key}: seed must be a non-negative integer, got {dr.seed!r}")
        if dr.key in seen:
            raise ValueError(f"draws holds {dr.key} (seed {dr.seed}) twice: it would be counted twice")
        seen.add(dr.key)
        groups.setdefault((dr.ensemble, dr.attention, dr.d), []).append(dr)
    chunks: list[Chunk] = []
    for group in groups.values():
        for k in range(0, len(group), lanes):
            chunks.append(Chunk(len(chunks), tuple(group[k : k + lanes]), float(horizon), code))
    return chunks


def sweep_code() -> str:
    """What a chunk's rows depend on besides its draws: the sources of this module's import closure (the
    classifier, the draws, ``gtcore``: :mod:`gtbook.imports`) and the key packages' versions, hashed."""
    from gtbook.imports import key_versions, module_closure, modules_hash

    text = modules_hash(module_closure([__name__])) + repr(sorted(key_versions().items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def chunk_bytes(chunk: Chunk) -> int:
    r"""An upper estimate of a chunk's peak memory (bytes): ``LANE_FACTOR`` :math:`\times 8 n d^2` for the
    lanes' states and stages, plus :math:`3 \times 8 (d^2 + d)^2` for the Jacobian of the implicit method a
    stiff lane falls back on."""
    d, n = chunk.draws[0].d, len(chunk.draws)
    return LANE_FACTOR * 8 * n * d * d + 3 * 8 * (d * d + d) ** 2


def _available_bytes() -> int | None:
    """The memory this machine can still give (``MemAvailable``), or None when unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(chunks: Sequence[Chunk], budget: int | None, where: str) -> None:
    """ValueError when the largest chunk's :func:`chunk_bytes` exceeds ``budget`` (bytes; None: unknown)."""
    if budget is None or not chunks:
        return
    big = max(chunks, key=chunk_bytes)
    need = chunk_bytes(big)
    if need > budget:
        d = big.draws[0].d
        n = len(big.draws)
        raise ValueError(
            f"a chunk of {n} draw{'s' if n > 1 else ''} at d = {d} needs about {need / 2**30:.3g} GiB "
            f"(estimated before allocating), more than the {budget / 2**30:.3g} GiB {where}: lower "
            f"the dimension{' or --lanes' if len(big.draws) > 1 else ''}"
        )


def run_chunk(chunk: Chunk) -> dict[str, list]:
    """Classify one chunk's draws (one BLAS thread): a column dict with :data:`COLUMNS`."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        built = [draw_controls(dr) for dr in chunk.draws]
        ctls = [b[0] for b in built]
        v = classify_lanes(ctls, np.stack([b[1] for b in built]), horizon=chunk.horizon)
        lam = np.linalg.eigvalsh(v.Sigma)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for i, (dr, (ctl, _, info)) in enumerate(zip(chunk.draws, built, strict=True)):
        cond = conditions(ctl)
        row = dict(
            key=dr.key,
            ensemble=dr.ensemble,
            attention=dr.attention,
            variant=str(dr.variant),
            d=dr.d,
            index=dr.index,
            outcome=str(v.outcome[i]),
            rank=int(v.rank[i]),
            t_end=float(v.t_end[i]),
            t_pole=float(v.t_pole[i]),
            kappa=float(v.kappa[i]),
            rate=float(v.rate[i]),
            moving=float(v.moving[i]),
            stiff=bool(v.stiff[i]),
            failed=bool(v.failed[i]),
            lam_min=float(lam[i, 0]),
            lam_max=float(lam[i, -1]),
            alpha_max=float(np.max(v.alpha[i])),
            alpha_min=float(np.min(v.alpha[i])),
            opposite=cond["opposite"],
            same=cond["same"],
            scalar_V=cond["scalar_V"],
            A_class=cond["A_class"],
            stab=cond["stab"],
            blow=cond["blow"],
            v_kind=info["v_kind"],
            b_kind=info["b_kind"],
            shift=float(info["shift"]),
        )
        for c in COLUMNS:
            cols[c].append(row[c])
    return cols


@dataclass
class SweepResult:
    """A sweep's table (one row per draw, in the order of the draws) and how it was made.

    Attributes
    ----------
    table : pyarrow.Table with :data:`COLUMNS`
    computed, reused : chunks computed now, and read back from ``out``
    seconds : wall time of the call
    where : "in-process" or the cluster's scheduler address
    """

    table: Any
    computed: int
    reused: int
    seconds: float
    where: str

    def column(self, name: str) -> np.ndarray:
        return np.asarray(self.table.column(name).to_pylist())

    def __repr__(self) -> str:
        return (
            f"SweepResult({self.table.num_rows} draws; {self.computed} chunks computed, {self.reused} "
            f"reused; {self.seconds:.1f} s {self.where})"
        )


def _rows_digest(cols: dict[str, list]) -> str:
    """SHA-256 of a chunk's rows: every column in :data:`COLUMNS` order, floats by their exact repr."""
    return hashlib.sha256(json.dumps([[c, cols[c]] for c in COLUMNS]).encode()).hexdigest()


def _write(cols: dict[str, list], path: Path, chunk: Chunk) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = {"chunk": chunk.digest(), "keys": [dr.key for dr in chunk.draws], "rows": _rows_digest(cols)}
    table = pa.table(cols).replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_chunk(path: str | os.PathLike, chunk: Chunk) -> dict[str, list] | str:
    """The rows a chunk file holds when they are whole and are ``chunk``'s (its digest, its draws in order,
    the checksum of its rows), else a short reason why not."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {}).get(META_KEY, b"null"))
        cols = table.to_pydict()
    except Exception as exc:  # noqa: BLE001  (any damage of the file, pyarrow's or json's: recompute the chunk)
        return f"unreadable: {type(exc).__name__}"
    if not isinstance(meta, dict):
        return "no checksum"
    if meta.get("chunk") != chunk.digest() or meta.get("keys") != [dr.key for dr in chunk.draws]:
        return "another chunk's draws"
    if list(cols) != list(COLUMNS) or cols["key"] != meta["keys"]:
        return "rows do not match its draws"
    if _rows_digest(cols) != meta.get("rows"):
        return "checksum mismatch"
    return cols


class _Quiet:
    """``distributed``'s loggers at CRITICAL while this sweep talks to a scheduler: a lost or silent scheduler
    is reported in one line (:class:`SchedulerError`), not by the client's tracebacks. ``restore`` puts the
    levels back, unless ``keep`` (a dead client keeps trying to reconnect, and logging, until the process
    ends)."""

    NAMES = ("distributed", "distributed.client", "distributed.comm", "distributed.core", "distributed.utils")

    def __init__(self) -> None:
        import logging

        import distributed  # noqa: F401  (its import sets the loggers' levels: set ours after it)

        self.keep = False
        self.levels = {n: logging.getLogger(n).level for n in self.NAMES}
        for n in self.NAMES:
            logging.getLogger(n).setLevel(logging.CRITICAL)

    def restore(self) -> None:
        import logging

        if not self.keep:
            for n, level in self.levels.items():
                logging.getLogger(n).setLevel(level)


class SchedulerError(RuntimeError):
    """A Dask scheduler that does not answer in time, or was lost mid-sweep (one line, saying what is kept)."""


def _deadline(fn: Callable[[], Any], seconds: float, what: str) -> Any:
    """``fn()`` in a daemon thread, or SchedulerError when it has not returned within ``seconds`` (``Client``'s
    own ``timeout`` does not cover a server that accepts the connection and never answers)."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (handed to the caller's thread)
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True, name="gtbook-atlas-scheduler")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise SchedulerError(f"{what}: no answer within {seconds:g} s")
    if "error" in box:
        exc = box["error"]
        raise SchedulerError(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
    return box.get("value")


def _on_cluster(client: Any, pending: list[Chunk], timeout: float, address: str) -> Iterator[tuple[Chunk, dict]]:
    """Each pending chunk's rows as the cluster finishes it; SchedulerError when the scheduler stops answering
    or is lost (the chunks finished before are the caller's)."""
    from distributed import wait

    futures = {client.submit(run_chunk, ch, pure=False): ch for ch in pending}
    todo = set(futures)
    while todo:
        try:
            done, todo = wait(todo, timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:  # no chunk finished for `timeout` s: long chunks, or a silent scheduler
            _deadline(client.scheduler_info, timeout, f"the scheduler at {address}")
            continue
        except (CancelledError, OSError) as exc:  # FuturesCancelledError: "scheduler-connection-lost"
            raise SchedulerError(f"lost the scheduler at {address} ({type(exc).__name__})") from None
        for fut in done:
            if fut.status != "finished" and fut.status != "error":
                raise SchedulerError(f"lost the scheduler at {address} (its tasks are {fut.status})")
            try:
                cols = fut.result()
            except (OSError, TimeoutError, CancelledError) as exc:
                raise SchedulerError(f"lost the scheduler at {address} ({type(exc).__name__})") from None
            yield futures[fut], cols


def run_sweep(
    draws: Sequence[Draw],
    out: str | os.PathLike | None = None,
    *,
    lanes: int = 256,
    horizon: float = 100.0,
    client: Any = None,
    scheduler: str | None = None,
    workers: int = 2,
    show_progress: bool = True,
    timeout: float = 30.0,
    log: Callable[[str], None] | None = None,
) -> SweepResult:
    """Classify every draw, chunk by chunk, in this process or on a Dask cluster (module docstring).

    Parameters
    ----------
    draws : the draws (their order is the table's; each once)
    out : folder for the chunks' parquet files (created); None keeps everything in memory (no resume)
    lanes : draws per chunk
    horizon : :math:`T` of :func:`~gtbook.studies.atlas.outcomes.classify_lanes`
    client : a ``distributed.Client`` to run the chunks on
    scheduler : a scheduler address (``"tcp://host:port"``), or ``"local"`` for a ``LocalCluster`` of
        ``workers`` processes started (and stopped) for this sweep; ignored when ``client`` is given
    workers : workers of the ``"local"`` cluster (at least 1)
    show_progress : a progress bar over the chunks
    timeout : seconds a scheduler has to accept the connection, and to answer whenever no chunk has
        finished for that long
    log : where the line naming a damaged chunk file goes (default: standard error)

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError
        Bad arguments, a draw given twice, or chunks larger than the memory there is (before any is run).
    SchedulerError
        The scheduler does not answer within ``timeout``, or is lost mid-sweep (the finished chunks are in
        ``out``: the same call resumes).
    """
    import pyarrow as pa

    t0 = time.perf_counter()
    workers = check_count(workers, "workers")
    timeout = check_positive(timeout, "timeout")
    if log is None:

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    draws = list(draws)
    if not draws:
        raise ValueError("draws must hold at least one Draw")
    chunks = make_chunks(draws, lanes, horizon=horizon, code=sweep_code())
    if client is None and scheduler in (None, "local"):
        share = 1 if scheduler is None else workers
        avail = _available_bytes()
        _check_memory(
            chunks,
            None if avail is None else avail // share,
            "available" + ("" if share == 1 else f" to each of {workers} workers"),
        )
    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, list]] = {}
    pending = []
    for ch in chunks:
        path = None if folder is None else folder / ch.filename
        found = read_chunk(path, ch) if path is not None and path.exists() else None
        if isinstance(found, dict):
            results[ch.id] = found
            continue
        if found is not None:
            log(f"atlas: {path} is damaged ({found}); recomputing it")
        pending.append(ch)
    reused = len(results)

    def keep(ch: Chunk, cols: dict[str, list]) -> None:
        results[ch.id] = cols
        if folder is not None:
            _write(cols, folder / ch.filename, ch)

    where = "in-process"
    own = None
    quiet = _Quiet() if client is None and scheduler not in (None, "local") else None
    try:
        if client is None and scheduler is not None:
            from distributed import Client, LocalCluster

            if scheduler == "local":
                own = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
                client = Client(own)
            else:
                try:
                    client = _deadline(
                        lambda: Client(scheduler, timeout=timeout), timeout, f"the scheduler at {scheduler}"
                    )
                except SchedulerError:
                    if quiet is not None:
                        quiet.keep = True  # the hung connection attempt goes on in its thread
                    raise
                _deadline(
                    lambda: client.wait_for_workers(1, timeout=timeout),
                    2 * timeout,
                    f"the scheduler at {scheduler}, waiting for a worker",
                )
                info = _deadline(client.scheduler_info, timeout, f"the scheduler at {scheduler}")
                limits = [w.get("memory_limit") or 0 for w in (info or {}).get("workers", {}).values()]
                if limits and min(limits) > 0:
                    _check_memory(chunks, min(limits), f"of its smallest worker ({scheduler})")
        if client is None:
            for ch in progress(pending, "atlas chunks", enabled=show_progress):
                keep(ch, run_chunk(ch))
        else:
            where = str(client.scheduler.address)
            done = _on_cluster(client, pending, timeout, where)
            try:
                for ch, cols in progress(done, "atlas chunks", enabled=show_progress, total=len(pending)):
                    keep(ch, cols)
            except SchedulerError as exc:
                if quiet is not None:
                    quiet.keep = True  # the dead client's reconnection attempts would print tracebacks
                kept = len(results) - reused
                raise SchedulerError(
                    f"{exc}; {kept} of {len(pending)} chunks were finished and are kept"
                    + (f" in {folder}: run the same sweep again to resume" if folder else "")
                ) from None
    finally:
        if own is not None and client is not None:
            client.close()
            own.close()
        elif scheduler is not None and client is not None and scheduler != "local":
            with contextlib.suppress(SchedulerError):  # a lost scheduler: nothing to close cleanly
                _deadline(client.close, timeout, "closing the client")
        if quiet is not None:
            quiet.restore()
    table = pa.concat_tables([pa.table(results[ch.id]) for ch in chunks])
    order = {dr.key: i for i, dr in enumerate(draws)}
    idx = np.argsort([order[k] for k in table.column("key").to_pylist()], kind="stable")
    return SweepResult(
        table=table.take(pa.array(idx)),
        computed=len(pending),
        reused=reused,
        seconds=time.perf_counter() - t0,
        where=where,
    )


def atlas(
    out: str | os.PathLike,
    *,
    ds: Sequence[int] = (2, 3, 4, 5, 6, 7, 8),
    draws: int = 40,
    seed: int = 0,
    lanes: int = 256,
    horizon: float = 100.0,
    client: Any = None,
    scheduler: str | None = None,
    workers: int = 2,
    timeout: float = 30.0,
) -> tuple[SweepResult, str]:
    """The condition-ensemble atlas (``gtbook atlas``): ``draws`` per (attention type, d), written to ``out``.

    Returns the sweep and a Markdown table of the regime fractions with Wilson 95 % intervals.
    ``client``/``scheduler``/``workers``/``timeout`` as in :func:`run_sweep` (None: in this process).
    Raises ValueError for a dimension listed twice (its draws would be counted twice), a dimension, draw
    count or worker count below 1, or a negative seed.
    """
    from gtbook.studies.atlas.ensembles import ATTENTIONS, ensemble_draws
    from gtbook.studies.atlas.tables import regime_fractions

    ds = [check_count(d, "ds") for d in ds]
    twice = sorted({d for d in ds if ds.count(d) > 1})
    if twice:
        raise ValueError(
            f"ds lists d = {', '.join(map(str, twice))} more than once (the draws would be counted "
            "twice); give each dimension once"
        )
    if not ds:
        raise ValueError("ds must list at least one dimension")
    draws = check_count(draws, "draws")
    seed = check_integer(seed, "seed", 0)
    workers = check_count(workers, "workers")
    ens = ensemble_draws(ds, draws, seed=seed)
    res = run_sweep(
        ens, out, lanes=lanes, horizon=horizon, client=client, scheduler=scheduler, workers=workers, timeout=timeout
    )
    return res, regime_fractions(res, list(ATTENTIONS), ds).markdown()


def tables_identical(a: Any, b: Any) -> bool:
    """Whether two sweep tables hold the same columns and values bit for bit (NaN equal to NaN)."""
    if a.column_names != b.column_names or a.num_rows != b.num_rows:
        return False
    for name in a.column_names:
        x, y = np.array(a.column(name).to_pylist()), np.array(b.column(name).to_pylist())
        if x.dtype.kind == "f":
            if not np.array_equal(x.view(np.int64), y.view(np.int64)):
                return False
        elif not np.array_equal(x, y):
            return False
    return True
