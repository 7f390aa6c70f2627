r"""Running chapters: papermill kernels with a thread budget, serial and parallel runs, atomic publishing. The
jobs and their states (cache keys, profiles that stick, fresh or stale) are planned by :mod:`gtbook.plan`,
whose names are importable from here too.

**Faults.** A ``-j N`` worker dies with the ``gtbook`` process that started it (a parent-death signal
and a watch on its parent's pid, :mod:`gtbook.children`), and before it publishes it checks, under
the publishing lock, that its parent is alive and still holds the tree's lock (the lock's token), and
that the chapter's cache key is still the one it was asked to run. A chapter executes the source text
read when its job was planned, so what ran is what the key describes. A failed chapter under ``-j N``
stops the run: no chapter starts after it, the running ones finish, and the command names the failed
chapter and the ones not started and exits non-zero, as a serial run does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gtbook import children, provenance, verify
from gtbook import files as _files
from gtbook import plan as _plan
from gtbook.chapters import (
    Book,
    BookError,
    Chapter,
    _book,
    assigned,
    broken,
    discover_chapters,
    open_book,
    select,
)
from gtbook.lock import LockFailed, TreeLock
from gtbook.openings import OPENINGS
from gtbook.plan import Job, _changed_since_planned, _jsonable, chapter_state, make_job, plan, read_meta
from gtbook.processes import die_with_parent, process_tag, tag_alive, tag_in_name
from gtbook.root import ROOT_ENV
from gtcore._progress import QUIET_ENV

__all__ = ["KERNEL_WARNINGS", "THREAD_ENVS", "clean_scratch", "longest_first", "run", "run_chapter"]


#: thread-count variables set for each kernel under ``-j N`` (torch's intra-op pool follows OMP)
THREAD_ENVS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


#: silences the notebook-widget warning tqdm prints on import inside a kernel without ipywidgets
KERNEL_WARNINGS = "ignore:IProgress not found"

# planning lives in gtbook.plan; these names stay importable from here
DEFAULT_PROFILE, ChapterState, book_profile = _plan.DEFAULT_PROFILE, _plan.ChapterState, _plan.book_profile
kernel_threads, status, status_table = _plan.kernel_threads, _plan.status, _plan.status_table


# ------------------------------------------------------------------------------ run
def cache_folder(bk: Book) -> Path:
    """The on-disk cache of the book's kernels (:mod:`gtbook.cache`): ``$GTBOOK_CACHE`` or ``<root>/.cache/gtbook``."""
    from gtbook.cache import CACHE_ENV

    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else bk.root / ".cache" / "gtbook"


def _kernel_env(bk: Book, profile: str, threads: int | None) -> dict[str, str]:
    """The kernel's environment: the book's root, profile and on-disk cache, quiet progress bars, and
    ``threads`` BLAS/torch threads."""
    from gtbook.cache import CACHE_ENV

    env = {
        "GTBOOK_PROFILE": profile,
        QUIET_ENV: "1",
        ROOT_ENV: str(bk.root),
        CACHE_ENV: str(cache_folder(bk)),
        "PYTHONWARNINGS": ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), KERNEL_WARNINGS) if w),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }
    if threads is not None:
        env.update({k: str(threads) for k in THREAD_ENVS})
    return env


def _publish(bk: Book, src: Path, dest: Path, guard=None) -> None:
    """Move ``src`` to ``dest`` atomically, under the tree's publishing lock.

    ``guard()``, called under that lock, returns why this process may no longer publish (or None);
    then nothing is published and BookError says why.
    """
    lock = TreeLock(bk.executed / ".publish.lock", what="publish")
    try:
        lock.acquire()
    except LockFailed as exc:
        raise BookError(f"{bk.shown(dest)} not published: {exc}") from None
    try:
        refusal = guard() if guard is not None else None
        if refusal:
            raise BookError(f"{bk.shown(dest)} not published: {refusal}")
        _files.publish(src, dest)
    finally:
        lock.release()


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


def clean_scratch(bk: Book) -> None:
    """Remove scratch folders ``executed/.running/NAME.TAG.*`` left by processes that no longer exist (TAG
    is the process's ``PID-TICKS`` tag, so a zombie or a later process given the same pid is not taken for
    the one that made the folder).

    ``executed/.running`` is gtbook's own: a symlink there is removed, never followed."""
    if bk.running.is_symlink():
        bk.running.unlink()
    if not bk.running.is_dir():
        return
    for path in bk.running.iterdir():
        tag = tag_in_name(path.name)
        if tag is not None and tag_alive(tag) is False:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def parameters_cell_that_ran(
    source: str, injected: dict[str, Any], overrides: dict[str, Any], defaults: dict[str, Any], profile: str
) -> str:
    """A chapter's parameters cell rewritten to hold the values that ran, each changed one marked.

    Every top-level assignment of a name in ``injected`` gets the injected value, with a comment saying
    where it came from (``--set`` or the profile) and the chapter's own value; other lines are kept.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    for node in reversed(tree.body):
        pairs = assigned(node)
        if not pairs or node.end_lineno is None:
            continue
        names = [name for name, _ in pairs]
        changed = [n for n in names if n in injected and (injected[n] != defaults.get(n, object()) or n in overrides)]
        if not changed:
            continue
        values = [injected[n] if n in injected else defaults.get(n) for n in names]
        tail = lines[node.end_lineno - 1][node.end_col_offset :].strip()
        comment = tail[1:].strip() + "; " if tail.startswith("#") else ""
        notes = []
        for n in changed:
            origin = "--set" if n in overrides else f"{profile} profile"
            own = repr(defaults[n]) if n in defaults else "none"
            notes.append(
                f"[{origin}] the chapter's own value: {own}"
                if len(names) == 1
                else f"{n}: [{origin}] the chapter's own value: {own}"
            )
        left = ", ".join(names)
        right = repr(values[0]) if len(names) == 1 else ", ".join(repr(v) for v in values)
        new = f"{left} = {right}  # {comment}{'; '.join(notes)}"
        lines[node.lineno - 1 : node.end_lineno] = [new]
    return "\n".join(lines)


def _fold_parameters(nb, meta: dict[str, Any], claims: list[dict[str, Any]], job: Job | None = None) -> None:
    """Show the values that ran in the parameters cell, hide papermill's injected cell, and open the
    page with its verdict (the generated opening, :func:`gtbook.openings.write_pages`, included under the
    title) and the provenance box."""
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
        elif job is not None and cell.cell_type == "code" and "parameters" in tags:
            cell.source = parameters_cell_that_ran(
                cell.source, job.injected, job.overrides, job.chapter.defaults, job.profile
            )
    box = provenance.box_markdown(meta, claims)
    opening = f"```{{include}} {OPENINGS}/{job.chapter.name}.md\n```" if job is not None else ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.split("\n")
            head = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
            if head is not None:
                top = [opening, ""] if opening else []
                cell.source = "\n".join([*lines[: head + 1], "", *top, box, "", *lines[head + 1 :]])
                return
            break
    import nbformat

    nb.cells.insert(0, nbformat.v4.new_markdown_cell(box))


def _key_guard(job: Job):
    """A publish guard: refuse when the chapter changed (source, library, versions) while it ran."""

    def guard() -> str | None:
        changed = _changed_since_planned(job)
        return (
            (
                f"{job.chapter.name} changed while it ran ({', '.join(changed)}): its cache key is no longer "
                f"the one it was run for; rerun it"
            )
            if changed
            else None
        )

    return guard


def _failure(
    bk: Book, name: str, exc: Exception, out: Path, kept: Path, kernel_log: Path, scratch: Path, guard=None
) -> BookError:
    """Keep a failed run's notebook and kernel log in ``executed/failed/`` (published under ``guard``, as
    the chapter would be: a process that may no longer write the tree keeps nothing); the error that says
    where they are."""
    import papermill as pm

    if out.exists():
        with contextlib.suppress(BookError):  # this process may no longer write the tree: keep nothing
            _publish(bk, out, kept, guard)
    log_kept = bk.failed / f"{name}.kernel.log"
    if kernel_log.exists() and kernel_log.stat().st_size:
        copy = scratch / "kernel.log.copy"
        shutil.copyfile(kernel_log, copy)
        with contextlib.suppress(BookError):
            _publish(bk, copy, log_kept, guard)
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


def _run_metadata(bk: Book, chapter: Chapter, job: Job, elapsed: float) -> dict[str, Any]:
    """What a run records in its notebook (``metadata.gtbook``): parameters, time, commit, environment, key
    (the digest of the outputs is added once the parameters are folded into the notebook)."""
    merged = job.merged
    return {
        "chapter": chapter.name,
        "profile": job.profile,
        "parameters": {k: v for k, v in merged.items() if _jsonable(v)},
        "overrides": {k: v for k, v in job.overrides.items() if _jsonable(v)},
        "changed": {k: v for k, v in merged.items() if _jsonable(v) and v != chapter.defaults.get(k)},
        "runtime_s": round(elapsed, 2),
        "date": provenance.now_utc(),
        "threads": job.threads,
        "git": provenance.git_state(bk.root),
        "environment": provenance.environment(),
        "cache": {"key": job.key, "components": job.components},
    }


def run_chapter(
    chapter: Chapter,
    params: dict[str, Any] | None = None,
    profile: str = "quick",
    *,
    job: Job | None = None,
    threads: int | None = None,
    progress: bool = True,
    guard=None,
) -> float:
    """Execute one chapter with papermill and publish it; return its wall time. Raises BookError.

    ``params`` are the injected parameters (profile overrides and ``--set`` values); give ``job``
    instead to also record which of them came from ``--set``. The kernel executes the job's source
    text (read when the job was made). ``guard()``, when given, is asked under the publishing lock
    whether this process may still publish (a worker whose run is gone may not); the chapter's key is
    checked too: a chapter whose source or library changed while it ran is not published.
    """
    import jupytext
    import nbformat
    import papermill as pm

    from gtbook.claims import claims_in_notebook

    if job is None:
        job = make_job(chapter, profile, params or {}, {}, threads=threads)
    bk = _book(chapter.book)
    try:
        bk.running.mkdir(parents=True, exist_ok=True)
        # this run's own files (the process tag lets a later run remove them if this process is killed)
        scratch = Path(tempfile.mkdtemp(prefix=f"{chapter.name}.{process_tag()}.", dir=bk.running))
    except OSError as exc:
        raise BookError(_files.os_error_line(exc)) from None
    source, out = scratch / "source.ipynb", scratch / f"{chapter.name}.ipynb"
    kernel_log = scratch / "kernel.log"
    kept = bk.failed / f"{chapter.name}.ipynb"
    env = _kernel_env(bk, job.profile, job.threads)
    env_before = {k: os.environ.get(k) for k in env}
    try:
        text = job.source if job.source is not None else chapter.source
        nb = jupytext.reads(text, fmt=chapter.path.suffix.lstrip(".") or "py")
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        jupytext.write(nb, source, fmt="ipynb")
        os.environ.update(env)  # inherited by the kernel
        start = time.perf_counter()
        try:
            pm.execute_notebook(
                str(source),
                str(out),
                parameters=job.injected,
                kernel_name="python3",
                cwd=str(bk.notebooks),
                progress_bar={"desc": f"  cells of {chapter.name}", "leave": False, "disable": None}
                if progress
                else False,
                report_mode=False,
                kernel_manager_class=_kernel_manager_class(kernel_log, env),
            )
        except Exception as exc:  # noqa: BLE001 - a failed cell, a dead kernel, a timeout, a missing kernel
            raise _failure(bk, chapter.name, exc, out, kept, kernel_log, scratch, guard) from None
        elapsed = time.perf_counter() - start
        executed = nbformat.read(out, as_version=4)
        claims = claims_in_notebook(executed)
        meta = _run_metadata(bk, chapter, job, elapsed)
        _fold_parameters(executed, meta, claims, job)
        meta["digest"] = verify.notebook_digest(executed, len(claims))
        executed.metadata["gtbook"] = meta
        nbformat.write(executed, out)
        changed = _key_guard(job)()
        if changed:
            raise BookError(f"chapter {chapter.name} not published: {changed}")
        _publish(bk, out, chapter.executed, guard)
        for stale in (kept, bk.failed / f"{chapter.name}.kernel.log"):
            stale.unlink(missing_ok=True)  # a failure from an earlier run no longer describes this chapter
        return elapsed
    except OSError as exc:
        if exc.filename is None:  # a failed write names no file: it was this chapter's scratch folder
            exc = OSError(exc.errno, exc.strerror, bk.shown(scratch))
        raise BookError(
            f"chapter {chapter.name}: {_files.os_error_line(exc)}; the last good output is untouched"
        ) from None
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)


def _claims_line(bk: Book, name: str) -> str:
    from gtbook import report

    try:
        return f"{len(report.collect_claims(bk.executed, [name]))} claims passed"
    except report.ReportError as exc:
        return str(exc)


def _run_serial(bk: Book, jobs: list[Job]) -> dict[str, float]:
    from tqdm.auto import tqdm

    times = {}
    profiles = sorted({j.profile for j in jobs})
    bar = tqdm(jobs, desc=f"chapters ({', '.join(profiles)})", unit="chapter", file=sys.stderr, disable=None)
    for job in bar:
        bar.set_postfix_str(job.chapter.name)
        times[job.chapter.name] = run_chapter(job.chapter, job=job)
        tqdm.write(f"  {job.chapter.name}: {times[job.chapter.name]:.1f} s, {_claims_line(bk, job.chapter.name)}")
    return times


def _spec(bk: Book, job: Job, token: str | None) -> dict[str, Any]:
    return {
        "root": str(bk.root),
        "chapter": job.chapter.name,
        "profile": job.profile,
        "injected": job.injected,
        "overrides": job.overrides,
        "components": job.components,
        "threads": job.threads,
        "source": job.source,
        "parent": os.getpid(),
        "lock": str(bk.lock_file),
        "token": token,
    }


def _last_runtime(job: Job) -> float | None:
    """The wall time (s) of the chapter's published run when it ran with the job's profile, else None."""
    meta = read_meta(job.chapter.executed)
    runtime = (meta or {}).get("runtime_s")
    if not meta or meta.get("profile") != job.profile or not isinstance(runtime, (int, float)):
        return None
    return float(runtime)


def longest_first(jobs: list[Job], times: dict[str, float | None] | None = None) -> list[Job]:
    """The jobs in the order ``-j N`` starts them: those with no earlier run of their profile first, in
    book order, then the others by their last run's wall time, longest first.

    This is the longest-processing-time rule: with ``n`` workers it finishes within
    :math:`4/3 - 1/(3n)` of the shortest possible time for those run times (Graham, 1969), where book
    order can leave one worker running the longest chapter alone at the end. A chapter never run may be
    long, so it starts early too. ``times`` (chapter name to last run time, None when unknown) defaults to
    the published runs' times.
    """
    if times is None:
        times = {job.chapter.name: _last_runtime(job) for job in jobs}
    unknown = [job for job in jobs if times[job.chapter.name] is None]
    known = sorted(
        (job for job in jobs if times[job.chapter.name] is not None), key=lambda job: -(times[job.chapter.name] or 0.0)
    )  # sorted() is stable: ties keep book order
    return unknown + known


def _run_parallel(bk: Book, jobs: list[Job], n: int, token: str | None = None) -> dict[str, float]:
    """Run the jobs in ``n`` worker processes (each starting its own kernel).

    After a failure no job starts; the loop waits only for the workers already running, then raises
    BookError naming the failed chapter(s) and those not started.
    """
    try:
        bk.running.mkdir(parents=True, exist_ok=True)
        # this run's job files (the process tag lets a later run remove them if this process is killed)
        folder = Path(tempfile.mkdtemp(prefix=f"run.{process_tag()}.", dir=bk.running))
    except OSError as exc:
        raise BookError(_files.os_error_line(exc)) from None
    active: dict[str, tuple[subprocess.Popen, Path]]
    times: dict[str, float]
    errors: list[str]
    last = {job.chapter.name: _last_runtime(job) for job in jobs}
    pending, active, times, errors = longest_first(jobs, last), {}, {}, []
    threads = jobs[0].threads
    print(f"running {len(jobs)} chapters, {n} at a time, {threads} thread(s) each", file=sys.stderr, flush=True)
    if any(t is not None for t in last.values()):
        order = ", ".join(
            job.chapter.name
            if last[job.chapter.name] is None
            else f"{job.chapter.name} ({last[job.chapter.name]:.0f} s)"
            for job in pending
        )
        print(f"  in this order (never run first, then by the last run's time): {order}", file=sys.stderr, flush=True)
    try:
        while active or (pending and not errors):
            while pending and len(active) < n and not errors:
                job = pending.pop(0)
                spec = folder / f"{job.chapter.name}.job.json"
                spec.write_text(json.dumps(_spec(bk, job, token)))
                with open(spec.with_suffix(".log"), "w") as log:  # the worker holds its own descriptor
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "gtbook", "_worker", str(spec)],
                        cwd=bk.root,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                active[job.chapter.name] = (proc, spec)
            time.sleep(0.2)
            for name, (proc, spec) in list(active.items()):
                if proc.poll() is None:
                    continue
                del active[name]
                result_path, log_path = spec.with_suffix(".result.json"), spec.with_suffix(".log")
                try:
                    result = json.loads(result_path.read_text()) if result_path.exists() else None
                except ValueError:
                    result = None
                if result and result.get("ok"):
                    times[name] = result["elapsed"]
                    print(f"  {name}: {result['elapsed']:.1f} s, {_claims_line(bk, name)}", file=sys.stderr, flush=True)
                else:
                    tail = log_path.read_text()[-2000:] if log_path.exists() else ""
                    errors.append(
                        result["error"]
                        if result
                        else f"chapter {name}: the worker died (exit {proc.returncode})\n{tail}"
                    )
                    if pending:
                        print(
                            f"  {name} failed: no more chapters start; waiting for {', '.join(active) or 'none'}",
                            file=sys.stderr,
                            flush=True,
                        )
                for p in (spec, result_path, log_path):
                    p.unlink(missing_ok=True)
    except KeyboardInterrupt:
        for proc, _ in active.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _ in active.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if errors:
        not_started = [j.chapter.name for j in pending]
        raise BookError("\n".join(errors) + (f"\n  not started: {', '.join(not_started)}" if not_started else ""))
    return times


def _worker_guard(spec: dict[str, Any]):
    """A worker may publish only while the ``gtbook`` process that started it is alive and holds the lock."""
    parent, token, lock = spec.get("parent"), spec.get("token"), spec.get("lock")

    def guard() -> str | None:
        if parent is not None and not children.parent_alive(int(parent)):
            return "the gtbook run that started this worker is gone"
        if token and lock and not TreeLock.holds(lock, token):
            return "the gtbook run that started this worker no longer holds the tree's lock"
        return None

    return guard


def _worker(spec_path: str) -> int:
    """Entry of a ``-j`` worker: run one chapter, write the result beside the spec.

    The worker dies with its parent: a parent-death signal (Linux) and a thread watching the parent's
    pid turn the parent's death into SIGTERM here (which unwinds: the kernel is shut down).
    """
    spec_file = Path(spec_path)
    spec = json.loads(spec_file.read_text())
    parent = spec.get("parent")
    if parent is not None:
        die_with_parent(signal.SIGTERM)
        if not children.parent_alive(int(parent)):
            return 1
        children.watch_parent(int(parent))
    result: dict[str, Any]
    try:
        bk = open_book(spec["root"])
        chap = discover_chapters(bk)[spec["chapter"]]
        job = Job(
            chap,
            spec["profile"],
            spec["injected"],
            spec["overrides"],
            spec["components"],
            spec.get("source"),
            spec.get("threads"),
        )
        result = {"ok": True, "elapsed": run_chapter(chap, job=job, progress=False, guard=_worker_guard(spec))}
    except BookError as exc:
        result = {"ok": False, "error": str(exc)}
    except KeyboardInterrupt:
        return 130
    spec_file.with_suffix(".result.json").write_text(json.dumps(result))
    return 0


def run(
    profile: str | None = None,
    only: list[str] | None = None,
    sets: list[str] | None = None,
    *,
    jobs: int = 1,
    force: bool = False,
    bk: Book | None = None,
    token: str | None = None,
) -> dict[str, float]:
    """Execute the selected chapters that are not fresh; return their wall times.

    Without ``profile``, each chapter runs with the profile it was last run with (see ``plan``).
    Stops at the first failure (with ``jobs > 1``, lets the running chapters finish first and starts no
    other). ``token`` is the tree lock's token, which ``-j`` workers check before they publish.
    """
    bk = _book(bk)
    todo = plan(bk, profile, only, sets or [], jobs=jobs)
    bad = broken(select(discover_chapters(bk), only))
    clean_scratch(bk)
    if bk.executed.is_dir():
        _files.remove_stale_temporaries(bk.executed)  # an atomic write cut short (we hold the tree's lock)
    if force:
        from gtbook import cache as _cache

        _cache.clear(cache_folder(bk))
    else:
        fresh = []
        for job in list(todo):
            if chapter_state(job).state == "fresh":
                fresh.append(job.chapter.name)
                todo.remove(job)
        if fresh:
            print(f"fresh, not rerun: {', '.join(fresh)} (--force reruns)", file=sys.stderr)
    if todo and profile is None:
        by: dict[str, list[str]] = {}
        for job in todo:
            by.setdefault(job.profile, []).append(job.chapter.name)
        print(
            "profile: "
            + "; ".join(f"{p} ({', '.join(c)})" for p, c in by.items())
            + " (each chapter's last; --profile chooses)",
            file=sys.stderr,
        )
    times: dict[str, float] = {}
    if todo:
        n = max(1, min(jobs, len(todo)))
        try:
            times = _run_serial(bk, todo) if n == 1 else _run_parallel(bk, todo, n, token)
        finally:
            _write_report(bk)
    else:
        _write_report(bk)
    if bad:
        raise BookError(
            "; ".join(f"{c.name} not run: {c.problem}" for c in bad) + (" (the other chapters ran)" if todo else "")
        )
    return times


def _write_report(bk: Book) -> None:
    """Refresh ``executed/report.md``; an unreadable notebook is reported, not raised (``build`` raises)."""
    from gtbook import report

    try:
        report.write_report(bk.executed)
    except report.ReportError as exc:
        print(f"gtbook: warning: the report was not updated: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"gtbook: warning: the report was not updated: {_files.os_error_line(exc)}", file=sys.stderr)
