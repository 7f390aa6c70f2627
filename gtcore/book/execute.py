r"""Running chapters: cache keys and states, papermill kernels with a thread budget, serial and parallel runs,
atomic publishing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtcore._progress import QUIET_ENV
from gtcore.book import files as _files
from gtcore.book import provenance, report
from gtcore.book.chapters import (
    Book,
    BookError,
    Chapter,
    _book,
    discover_chapters,
    load_profiles,
    open_book,
    parse_sets,
    resolve_parameters,
    select,
)
from gtcore.book.lock import TreeLock
from gtcore.book.root import ROOT_ENV

__all__ = ["KERNEL_WARNINGS", "THREAD_ENVS", "ChapterState", "Job", "chapter_state", "clean_scratch", "make_job",
           "plan", "read_meta", "run", "run_chapter", "status", "status_table"]


#: thread-count variables set for each kernel under ``-j N`` (torch's intra-op pool follows OMP)
THREAD_ENVS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")


#: silences the notebook-widget warning tqdm prints on import inside a kernel without ipywidgets
KERNEL_WARNINGS = "ignore:IProgress not found"


# ------------------------------------------------------------------------------ cache
def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except TypeError:
        return False


@dataclass
class Job:
    """One chapter to execute: what the kernel gets, and the cache key that describes it."""

    chapter: Chapter
    profile: str
    injected: dict[str, Any]
    overrides: dict[str, Any]
    components: dict[str, str]

    @property
    def key(self) -> str:
        return provenance.cache_key(self.components)

    @property
    def merged(self) -> dict[str, Any]:
        return {**self.chapter.defaults, **self.injected}


def make_job(chapter: Chapter, profile: str, injected: dict[str, Any], overrides: dict[str, Any], *,
             library: str | None = None, versions: dict[str, str] | None = None) -> Job:
    merged = {k: v for k, v in {**chapter.defaults, **injected}.items() if _jsonable(v)}
    comps = provenance.key_components(chapter.source, profile, merged, library=library, versions=versions)
    return Job(chapter, profile, dict(injected), dict(sorted(overrides.items())), comps)


def plan(bk: Book, profile: str, only: list[str] | None, sets: list[str]) -> list[Job]:
    """The jobs of ``gtbook run`` (every selected chapter; the cache is applied by :func:`run`)."""
    chapters = discover_chapters(bk)
    picked = select(chapters, only)
    sub = {c.name: c for c in picked}
    params = resolve_parameters(sub, profile, sets, known=chapters, bk=bk)
    overrides = parse_sets(sub, sets)
    versions = provenance.key_versions()
    return [make_job(c, profile, params.get(c.name, {}), overrides[c.name], versions=versions) for c in picked]


def read_meta(path: Path) -> dict[str, Any] | None:
    """The ``gtbook`` metadata of an executed notebook, or None when unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh).get("metadata", {}).get("gtbook")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class ChapterState:
    name: str
    state: str  # fresh | stale | failed | missing
    reasons: list[str]
    detail: str


def chapter_state(job: Job) -> ChapterState:
    """Whether ``job``'s executed notebook is fresh, and if not why."""
    chap = job.chapter
    bk = _book(chap.book)
    failed = (bk.failed / f"{chap.name}.ipynb").exists()
    if not chap.executed.exists():
        return ChapterState(chap.name, "failed" if failed else "missing", [],
                            "latest run failed; no good output" if failed else "not run yet")
    meta = read_meta(chap.executed)
    recorded = (meta or {}).get("cache", {}).get("components")
    reasons = provenance.stale_reasons(recorded, job.components)
    if failed:
        return ChapterState(chap.name, "failed", reasons, "latest run failed; the page shows the last good output")
    if meta is None:
        return ChapterState(chap.name, "stale", ["unreadable"], "the executed notebook cannot be read")
    where = (f"{meta.get('profile', '?')}, {meta.get('runtime_s', float('nan')):.1f} s, "
             f"key {meta.get('cache', {}).get('key', '?')}")
    if reasons:
        return ChapterState(chap.name, "stale", reasons, f"changed: {', '.join(reasons)} (was {where})")
    return ChapterState(chap.name, "fresh", [], where)


def status(bk: Book, profile: str | None = None, only: list[str] | None = None,
           sets: list[str] | None = None) -> list[ChapterState]:
    """Each selected chapter's state. Without ``profile``, against the profile and ``--set`` values it
    was last run with (so *fresh* means: rerunning that command would be a no-op)."""
    if profile is not None:
        return [chapter_state(j) for j in plan(bk, profile, only, sets or [])]
    chapters = discover_chapters(bk)
    profiles = load_profiles(bk)
    versions = provenance.key_versions()
    out = []
    for chap in select(chapters, only):
        meta = read_meta(chap.executed) if chap.executed.exists() else None
        prof = (meta or {}).get("profile", "quick")
        overrides = (meta or {}).get("overrides", {})
        injected = {**profiles.get(prof, {}).get(chap.name, {}), **overrides}
        out.append(chapter_state(make_job(chap, prof, injected, overrides, versions=versions)))
    return out


def status_table(states: list[ChapterState]) -> str:
    w = max(len(s.name) for s in states) if states else 7
    return "\n".join(f"{s.name.ljust(w)}  {s.state.ljust(7)}  {s.detail}" for s in states)


# ------------------------------------------------------------------------------ run
def cache_folder(bk: Book) -> Path:
    """The on-disk cache of the book's kernels (:mod:`gtcore._cache`): ``$GTBOOK_CACHE`` or ``<root>/.cache/gtbook``."""
    from gtcore._cache import CACHE_ENV

    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else bk.root / ".cache" / "gtbook"


def _kernel_env(bk: Book, profile: str, threads: int | None) -> dict[str, str]:
    from gtcore._cache import CACHE_ENV

    env = {"GTBOOK_PROFILE": profile, QUIET_ENV: "1", ROOT_ENV: str(bk.root), CACHE_ENV: str(cache_folder(bk)),
           "PYTHONWARNINGS": ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), KERNEL_WARNINGS) if w),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    if threads is not None:
        env.update({k: str(threads) for k in THREAD_ENVS})
    return env


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _publish(bk: Book, src: Path, dest: Path) -> None:
    """Move ``src`` to ``dest`` atomically, under the tree's publishing lock."""
    with TreeLock(bk.executed / ".publish.lock", what="publish"):
        _files.publish(src, dest)


def _kernel_manager_class(log_path: Path, env: dict[str, str]):
    """A kernel manager whose kernel gets ``env`` and writes its own stdout/stderr to ``log_path``.

    A kernel's own chatter (a TCP warning at start, a traceback when it is shut down by Ctrl-C) is not
    the user's business; it is kept in the log, which a failed run keeps beside the failed notebook.
    """
    from jupyter_client.manager import AsyncKernelManager

    class GtbookKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            kw["env"] = {**(kw.get("env") or os.environ), **env}
            with open(log_path, "ab") as log:  # closed on return: the kernel holds its own descriptor
                kw["stdout"] = kw["stderr"] = log
                return await super()._async_launch_kernel(kernel_cmd, **kw)

    return GtbookKernelManager


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_scratch(bk: Book) -> None:
    """Remove scratch folders ``executed/.running/NAME.PID.*`` left by processes that no longer exist."""
    if not bk.running.is_dir():
        return
    for path in bk.running.iterdir():
        parts = path.name.split(".")
        if len(parts) >= 3 and parts[1].isdigit() and not _alive(int(parts[1])):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _fold_parameters(nb, meta: dict[str, Any], claims: list[dict[str, Any]]) -> None:
    """Hide papermill's injected-parameters cell and open the page with the provenance box."""
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    box = provenance.box_markdown(meta, claims)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.split("\n")
            head = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
            if head is not None:
                cell.source = "\n".join([*lines[:head + 1], "", box, "", *lines[head + 1:]])
                return
            break
    import nbformat

    nb.cells.insert(0, nbformat.v4.new_markdown_cell(box))


def _failure(bk: Book, name: str, exc: Exception, out: Path, kept: Path, kernel_log: Path) -> BookError:
    """Keep a failed run's notebook and kernel log in ``executed/failed/``; the error that says where they are."""
    import papermill as pm

    if out.exists():
        _publish(bk, out, kept)
    log_kept = bk.failed / f"{name}.kernel.log"
    if kernel_log.exists() and kernel_log.stat().st_size:
        bk.failed.mkdir(parents=True, exist_ok=True)
        shutil.copy(kernel_log, log_kept)
    if isinstance(exc, pm.PapermillExecutionError):
        where = f"in cell {exc.exec_count} (cell index {exc.cell_index}): {exc.ename}: {exc.evalue}"
    else:
        where = f"({type(exc).__name__}: {exc})"
    return BookError(
        f"chapter {name} failed {where}\n  "
        + (f"the failed notebook is kept at {bk.shown(kept)}; " if kept.exists() else "")
        + (f"the kernel's log at {bk.shown(log_kept)}; " if log_kept.exists() else "")
        + "the last good output is untouched"
    )


def _run_metadata(bk: Book, chapter: Chapter, job: Job, elapsed: float, threads: int | None) -> dict[str, Any]:
    """What a run records in its notebook (``metadata.gtbook``): parameters, time, commit, environment, key."""
    merged = job.merged
    return {
        "chapter": chapter.name,
        "profile": job.profile,
        "parameters": {k: v for k, v in merged.items() if _jsonable(v)},
        "overrides": {k: v for k, v in job.overrides.items() if _jsonable(v)},
        "changed": {k: v for k, v in merged.items() if _jsonable(v) and v != chapter.defaults.get(k)},
        "runtime_s": round(elapsed, 2),
        "date": provenance.now_utc(),
        "threads": threads,
        "git": provenance.git_state(bk.root),
        "environment": provenance.environment(),
        "cache": {"key": job.key, "components": job.components},
    }


def run_chapter(chapter: Chapter, params: dict[str, Any] | None = None, profile: str = "quick", *,
                job: Job | None = None, threads: int | None = None, progress: bool = True) -> float:
    """Execute one chapter with papermill and publish it; return its wall time. Raises BookError.

    ``params`` are the injected parameters (profile overrides and ``--set`` values); give ``job``
    instead to also record which of them came from ``--set``.
    """
    import jupytext
    import nbformat
    import papermill as pm

    from gtcore.book.claims import claims_in_notebook

    if job is None:
        job = make_job(chapter, profile, params or {}, {})
    bk = _book(chapter.book)
    bk.running.mkdir(parents=True, exist_ok=True)
    # this run's own files (the pid lets a later run remove them if this process is killed)
    scratch = Path(tempfile.mkdtemp(prefix=f"{chapter.name}.{os.getpid()}.", dir=bk.running))
    source, out = scratch / "source.ipynb", scratch / f"{chapter.name}.ipynb"
    kernel_log = scratch / "kernel.log"
    kept = bk.failed / f"{chapter.name}.ipynb"
    env = _kernel_env(bk, job.profile, threads)
    env_before = {k: os.environ.get(k) for k in env}
    try:
        nb = jupytext.read(chapter.path)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        jupytext.write(nb, source, fmt="ipynb")
        os.environ.update(env)  # inherited by the kernel
        start = time.perf_counter()
        try:
            pm.execute_notebook(str(source), str(out), parameters=job.injected, kernel_name="python3",
                                cwd=str(bk.notebooks),
                                progress_bar={"desc": f"  cells of {chapter.name}", "leave": False}
                                if progress else False, report_mode=False,
                                kernel_manager_class=_kernel_manager_class(kernel_log, env))
        except Exception as exc:  # noqa: BLE001 - a failed cell, a dead kernel, a timeout, a missing kernel
            raise _failure(bk, chapter.name, exc, out, kept, kernel_log) from None
        elapsed = time.perf_counter() - start
        executed = nbformat.read(out, as_version=4)
        meta = _run_metadata(bk, chapter, job, elapsed, threads)
        _fold_parameters(executed, meta, claims_in_notebook(executed))
        executed.metadata["gtbook"] = meta
        nbformat.write(executed, out)
        _publish(bk, out, chapter.executed)
        kept.unlink(missing_ok=True)  # a failure from an earlier run no longer describes this chapter
        (bk.failed / f"{chapter.name}.kernel.log").unlink(missing_ok=True)
        return elapsed
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)


def _claims_line(bk: Book, name: str) -> str:
    try:
        return f"{len(report.collect_claims(bk.executed, [name]))} claims passed"
    except report.ReportError as exc:
        return str(exc)


def _run_serial(bk: Book, jobs: list[Job], threads: int | None) -> dict[str, float]:
    from tqdm.auto import tqdm

    times = {}
    bar = tqdm(jobs, desc=f"chapters ({jobs[0].profile})", unit="chapter", file=sys.stderr)
    for job in bar:
        bar.set_postfix_str(job.chapter.name)
        times[job.chapter.name] = run_chapter(job.chapter, job=job, threads=threads)
        tqdm.write(f"  {job.chapter.name}: {times[job.chapter.name]:.1f} s, {_claims_line(bk, job.chapter.name)}")
    return times


def _run_parallel(bk: Book, jobs: list[Job], n: int, threads: int) -> dict[str, float]:
    """Run the jobs in ``n`` worker processes (each starting its own kernel)."""
    bk.running.mkdir(parents=True, exist_ok=True)
    active: dict[str, tuple[subprocess.Popen, Path]]
    times: dict[str, float]
    errors: list[str]
    pending, active, times, errors = list(jobs), {}, {}, []
    print(f"running {len(jobs)} chapters, {n} at a time, {threads} thread(s) each", file=sys.stderr, flush=True)
    try:
        while pending or active:
            while pending and len(active) < n and not errors:
                job = pending.pop(0)
                spec = Path(tempfile.mkstemp(prefix=f"{job.chapter.name}.", suffix=".job.json", dir=bk.running)[1])
                spec.write_text(json.dumps({"root": str(bk.root), "chapter": job.chapter.name,
                                            "profile": job.profile, "injected": job.injected,
                                            "overrides": job.overrides, "components": job.components,
                                            "threads": threads}))
                with open(spec.with_suffix(".log"), "w") as log:  # the worker holds its own descriptor
                    proc = subprocess.Popen([sys.executable, "-m", "gtcore.book", "_worker", str(spec)],
                                            cwd=bk.root, stdout=log, stderr=subprocess.STDOUT)
                active[job.chapter.name] = (proc, spec)
            if not pending or errors or len(active) >= n:
                time.sleep(0.2)
            for name, (proc, spec) in list(active.items()):
                if proc.poll() is None:
                    continue
                del active[name]
                result_path, log_path = spec.with_suffix(".result.json"), spec.with_suffix(".log")
                result = json.loads(result_path.read_text()) if result_path.exists() else None
                if result and result.get("ok"):
                    times[name] = result["elapsed"]
                    print(f"  {name}: {result['elapsed']:.1f} s, {_claims_line(bk, name)}", file=sys.stderr, flush=True)
                else:
                    tail = log_path.read_text()[-2000:] if log_path.exists() else ""
                    errors.append(result["error"] if result else f"chapter {name}: the worker died "
                                  f"(exit {proc.returncode})\n{tail}")
                for p in (spec, result_path, log_path):
                    p.unlink(missing_ok=True)
    except KeyboardInterrupt:
        for proc, _ in active.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, spec in active.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
            for p in (spec, spec.with_suffix(".result.json"), spec.with_suffix(".log")):
                p.unlink(missing_ok=True)
        raise
    if errors:
        raise BookError("\n".join(errors))
    return times


def _worker(spec_path: str) -> int:
    """Entry of a ``-j`` worker: run one chapter, write the result beside the spec."""
    spec_file = Path(spec_path)
    spec = json.loads(spec_file.read_text())
    result: dict[str, Any]
    try:
        bk = open_book(spec["root"])
        chap = discover_chapters(bk)[spec["chapter"]]
        job = Job(chap, spec["profile"], spec["injected"], spec["overrides"], spec["components"])
        result = {"ok": True, "elapsed": run_chapter(chap, job=job, threads=spec["threads"], progress=False)}
    except BookError as exc:
        result = {"ok": False, "error": str(exc)}
    except KeyboardInterrupt:
        return 130
    spec_file.with_suffix(".result.json").write_text(json.dumps(result))
    return 0


def run(profile: str = "quick", only: list[str] | None = None, sets: list[str] | None = None, *,
        jobs: int = 1, force: bool = False, bk: Book | None = None) -> dict[str, float]:
    """Execute the selected chapters that are not fresh; return their wall times.

    Stops at the first failure (with ``jobs > 1``, lets the running chapters finish first).
    """
    bk = _book(bk)
    todo = plan(bk, profile, only, sets or [])
    clean_scratch(bk)
    if bk.executed.is_dir():
        _files.remove_stale_temporaries(bk.executed)  # an atomic write cut short (we hold the tree's lock)
    if force:
        from gtcore import _cache

        _cache.clear(cache_folder(bk))
    else:
        fresh = []
        for job in list(todo):
            if chapter_state(job).state == "fresh":
                fresh.append(job.chapter.name)
                todo.remove(job)
        if fresh:
            print(f"fresh, not rerun: {', '.join(fresh)} (--force reruns)", file=sys.stderr)
    times: dict[str, float] = {}
    if todo:
        jobs = max(1, min(jobs, len(todo)))
        try:
            if jobs == 1:
                times = _run_serial(bk, todo, None)
            else:
                times = _run_parallel(bk, todo, jobs, max(1, _cores() // jobs))
        finally:
            _write_report(bk)
    else:
        _write_report(bk)
    return times


def _write_report(bk: Book) -> None:
    """Refresh ``executed/report.md``; an unreadable notebook is reported, not raised (``build`` raises)."""
    try:
        report.write_report(bk.executed)
    except report.ReportError as exc:
        print(f"gtbook: warning: the report was not updated: {exc}", file=sys.stderr)
