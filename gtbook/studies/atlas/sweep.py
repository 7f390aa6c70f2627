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
then renamed: a file is complete or absent), where the digest hashes the chunk's draws and settings.
A second call with the same ``out`` reads the chunks already there and computes only the others, so a
sweep stopped half-way resumes, and a changed sweep never reuses a stale file. Each chunk runs with
one BLAS thread and is a pure function of its draws, so the table is the same, bit for bit, in this
process and on any cluster (``tests/test_atlas_sweep.py``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gtbook.studies.atlas.ensembles import Draw, conditions, draw_controls
from gtbook.studies.atlas.outcomes import classify_lanes
from gtcore._progress import progress

__all__ = ["COLUMNS", "Chunk", "SweepResult", "atlas", "make_chunks", "run_chunk", "run_sweep", "tables_identical"]

#: one row per draw
COLUMNS = ("key", "ensemble", "attention", "variant", "d", "index", "outcome", "rank", "t_end", "t_pole",
           "kappa", "rate", "moving", "stiff", "failed", "lam_min", "lam_max", "alpha_max", "alpha_min",
           "opposite", "same", "scalar_V", "A_class", "stab", "blow", "v_kind", "b_kind", "shift")


@dataclass(frozen=True)
class Chunk:
    """Draws of one dimension and attention type, integrated together as lanes."""

    id: int
    draws: tuple[Draw, ...]
    horizon: float

    def digest(self) -> str:
        h = hashlib.sha256(f"{self.horizon!r}".encode())
        for dr in self.draws:
            h.update(dr.key.encode() + f"/{dr.seed}".encode() + b"\0")
        return h.hexdigest()[:12]

    @property
    def filename(self) -> str:
        return f"chunk-{self.id:05d}-{self.digest()}.parquet"

    def __repr__(self) -> str:
        first = self.draws[0]
        return f"Chunk({self.id}, {len(self.draws)} x {first.ensemble}/{first.attention}/d{first.d})"


def make_chunks(draws: Sequence[Draw], lanes: int = 256, *, horizon: float = 100.0) -> list[Chunk]:
    """Group ``draws`` (in their order) into chunks of at most ``lanes`` draws of one (ensemble, attention, d)."""
    if not isinstance(lanes, (int, np.integer)) or isinstance(lanes, bool) or lanes < 1:
        raise ValueError(f"lanes must be a positive integer, got {lanes!r}")
    groups: dict[tuple, list[Draw]] = {}
    for dr in draws:
        if not isinstance(dr, Draw):
            raise ValueError(f"draws must be Draw records, got {type(dr).__name__}")
        groups.setdefault((dr.ensemble, dr.attention, dr.d), []).append(dr)
    chunks: list[Chunk] = []
    for group in groups.values():
        for k in range(0, len(group), lanes):
            chunks.append(Chunk(len(chunks), tuple(group[k:k + lanes]), float(horizon)))
    return chunks


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
        row = dict(key=dr.key, ensemble=dr.ensemble, attention=dr.attention, variant=str(dr.variant), d=dr.d,
                   index=dr.index, outcome=str(v.outcome[i]), rank=int(v.rank[i]), t_end=float(v.t_end[i]),
                   t_pole=float(v.t_pole[i]), kappa=float(v.kappa[i]), rate=float(v.rate[i]),
                   moving=float(v.moving[i]), stiff=bool(v.stiff[i]), failed=bool(v.failed[i]),
                   lam_min=float(lam[i, 0]), lam_max=float(lam[i, -1]),
                   alpha_max=float(np.max(v.alpha[i])), alpha_min=float(np.min(v.alpha[i])),
                   opposite=cond["opposite"], same=cond["same"], scalar_V=cond["scalar_V"],
                   A_class=cond["A_class"], stab=cond["stab"], blow=cond["blow"],
                   v_kind=info["v_kind"], b_kind=info["b_kind"], shift=float(info["shift"]))
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
        return (f"SweepResult({self.table.num_rows} draws; {self.computed} chunks computed, {self.reused} "
                f"reused; {self.seconds:.1f} s {self.where})")


def _write(cols: dict[str, list], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(pa.table(cols), tmp)
    os.replace(tmp, path)


def run_sweep(draws: Sequence[Draw], out: str | os.PathLike | None = None, *, lanes: int = 256,
              horizon: float = 100.0, client: Any = None, scheduler: str | None = None, workers: int = 2,
              show_progress: bool = True) -> SweepResult:
    """Classify every draw, chunk by chunk, in this process or on a Dask cluster (module docstring).

    Parameters
    ----------
    draws : the draws (their order is the table's)
    out : folder for the chunks' parquet files (created); None keeps everything in memory (no resume)
    lanes : draws per chunk
    horizon : :math:`T` of :func:`~gtbook.studies.atlas.outcomes.classify_lanes`
    client : a ``distributed.Client`` to run the chunks on
    scheduler : a scheduler address (``"tcp://host:port"``), or ``"local"`` for a ``LocalCluster`` of
        ``workers`` processes started (and stopped) for this sweep; ignored when ``client`` is given
    workers : workers of the ``"local"`` cluster
    show_progress : a progress bar over the chunks

    Returns
    -------
    SweepResult
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    draws = list(draws)
    if not draws:
        raise ValueError("draws must hold at least one Draw")
    chunks = make_chunks(draws, lanes, horizon=horizon)
    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, list]] = {}
    pending = []
    for ch in chunks:
        path = None if folder is None else folder / ch.filename
        if path is not None and path.exists():
            results[ch.id] = pq.read_table(path).to_pydict()
        else:
            pending.append(ch)
    reused = len(results)

    def keep(ch: Chunk, cols: dict[str, list]) -> None:
        results[ch.id] = cols
        if folder is not None:
            _write(cols, folder / ch.filename)

    where = "in-process"
    own = None
    if client is None and scheduler is not None:
        from distributed import Client, LocalCluster

        if scheduler == "local":
            own = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(own)
        else:
            client = Client(scheduler)
    try:
        if client is None:
            for ch in progress(pending, "atlas chunks", enabled=show_progress):
                keep(ch, run_chunk(ch))
        else:
            from distributed import as_completed

            where = str(client.scheduler.address)
            futures = {client.submit(run_chunk, ch, pure=False): ch for ch in pending}
            for fut in progress(as_completed(futures), "atlas chunks", enabled=show_progress, total=len(futures)):
                keep(futures[fut], fut.result())
    finally:
        if own is not None:
            client.close()
            own.close()
        elif scheduler is not None and client is not None and scheduler != "local":
            client.close()
    table = pa.concat_tables([pa.table(results[ch.id]) for ch in chunks])
    order = {dr.key: i for i, dr in enumerate(draws)}
    idx = np.argsort([order[k] for k in table.column("key").to_pylist()], kind="stable")
    return SweepResult(table=table.take(pa.array(idx)), computed=len(pending), reused=reused,
                       seconds=time.perf_counter() - t0, where=where)


def atlas(out: str | os.PathLike, *, ds: Sequence[int] = (2, 3, 4, 5, 6, 7, 8), draws: int = 40, seed: int = 0,
          lanes: int = 256, horizon: float = 100.0, client: Any = None, scheduler: str | None = None,
          workers: int = 2) -> tuple[SweepResult, str]:
    """The condition-ensemble atlas (``gtbook atlas``): ``draws`` per (attention type, d), written to ``out``.

    Returns the sweep and a Markdown table of the regime fractions with Wilson 95 % intervals.
    ``client``/``scheduler`` as in :func:`run_sweep` (None: in this process).
    """
    from gtbook.studies.atlas.ensembles import ATTENTIONS, ensemble_draws
    from gtbook.studies.atlas.tables import regime_fractions

    ens = ensemble_draws(list(ds), draws, seed=seed)
    res = run_sweep(ens, out, lanes=lanes, horizon=horizon, client=client, scheduler=scheduler, workers=workers)
    return res, regime_fractions(res, list(ATTENTIONS), list(ds)).markdown()


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
