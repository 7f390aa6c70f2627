"""``gtbook``: execute the chapters under a profile, collect their claims, build the book.

    gtbook run [--profile quick|full] [--only NAME ...] [--set name=value ...] [-j N] [--force]
    gtbook status [--profile ...] [--set ...]     fresh / stale (and why) / failed / missing
    gtbook build [--force]
    gtbook all [run options]                      run, then build
    gtbook claims [--json]
    gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...] [--figure PATH]

The book's root is the working directory, or the first folder above it holding ``_config.yml``
(``--root PATH`` to choose; see :mod:`gtcore._root`), never the install location. Chapters are
jupytext percent-format ``notebooks/NN_name.py`` files. Each has one code cell tagged ``parameters``
holding the full (paper-scale) values; the ``quick`` profile's overrides live in
``notebooks/profiles.toml``.

**Cache.** A chapter runs only when its executed notebook's key differs from the current one: the key
hashes the chapter's source, its resolved parameters and profile, the ``gtcore`` sources and the
versions of Python, numpy, scipy, torch and transformers (:mod:`gtcore.provenance`). ``--force``
reruns (and clears the on-disk cache of :mod:`gtcore.cache`). ``gtbook build`` likewise skips Jupyter
Book when none of its inputs changed.

**Safety.** One ``gtbook run``/``build``/``all`` at a time per tree: a second one waits (or, with
``--no-wait``, fails with a message naming the first). Each chapter executes into its own scratch
folder under ``executed/.running/`` and is published to ``executed/NAME.ipynb`` (under a lock) only on
success, so a failed or interrupted run never destroys the last good output (a failed notebook is kept
in ``executed/failed/``).

**Parallel.** ``-j N`` runs N chapters at once, each in its own kernel, with BLAS and torch threads set
to ``cores // N`` per kernel so the kernels do not oversubscribe the machine.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from . import _files, gallery, provenance, report
from ._lock import LockBusy, TreeLock
from ._progress import QUIET_ENV
from ._root import ROOT_ENV, RootNotFound, find_root

#: thread-count variables set for each kernel under ``-j N`` (torch's intra-op pool follows OMP)
THREAD_ENVS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")
#: silences the notebook-widget warning tqdm prints on import inside a kernel without ipywidgets
KERNEL_WARNINGS = "ignore:IProgress not found"


class BookError(RuntimeError):
    """A user-facing error of the book pipeline: printed as one message, exit code 2."""


# ---------------------------------------------------------------------------- the tree
@dataclass(frozen=True)
class Book:
    """A book's tree: the folders ``gtbook`` reads and writes, all under ``root``."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def executed(self) -> Path:
        return self.root / "executed"

    @property
    def profiles_file(self) -> Path:
        return self.notebooks / "profiles.toml"

    @property
    def running(self) -> Path:
        return self.executed / ".running"

    @property
    def failed(self) -> Path:
        return self.executed / "failed"

    @property
    def build_dir(self) -> Path:
        return self.root / "_build"

    @property
    def lock_file(self) -> Path:
        return self.executed / ".lock"

    def shown(self, path: Path) -> str:
        """A path relative to the root when it lies inside it."""
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return str(path)


def open_book(root: str | os.PathLike | None = None) -> Book:
    """The book at ``root``, or found from the working directory (raises BookError when absent)."""
    try:
        found = find_root(root)
    except RootNotFound as exc:
        raise BookError(str(exc)) from None
    if not (found / "notebooks").is_dir():
        raise BookError(f"{found} has a _config.yml but no notebooks/ folder: not a gtbook tree")
    return Book(found)


def _book(bk: Book | None) -> Book:
    return bk if bk is not None else open_book()


# --------------------------------------------------------------------------- chapters
@dataclass
class Chapter:
    name: str
    path: Path
    defaults: dict[str, Any]
    book: Book | None = field(default=None, repr=False, compare=False)

    @property
    def executed(self) -> Path:
        return _book(self.book).executed / f"{self.name}.ipynb"

    @property
    def source(self) -> str:
        return self.path.read_text()


def _read_notebook(path: Path):
    import jupytext

    return jupytext.read(path)


def chapter_defaults(path: Path) -> dict[str, Any]:
    """The literal assignments of a chapter's ``parameters`` cell, name -> value."""
    nb = _read_notebook(path)
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise BookError(f"{path.name}: no code cell tagged 'parameters' "
                        f"(write it as `# %% tags=[\"parameters\"]`)")
    values: dict[str, Any] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                values[node.targets[0].id] = ast.unparse(node.value)
    return values


def discover_chapters(bk: Book | None = None) -> dict[str, Chapter]:
    """Every ``notebooks/NN_*.py`` chapter, in order."""
    bk = _book(bk)
    return {p.stem: Chapter(p.stem, p, chapter_defaults(p), bk)
            for p in sorted(bk.notebooks.glob("[0-9][0-9]_*.py"))}


def load_profiles(bk: Book | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """``{profile: {chapter: {parameter: value}}}`` from ``notebooks/profiles.toml``."""
    bk = _book(bk)
    try:
        with open(bk.profiles_file, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise BookError(f"{bk.shown(bk.profiles_file)} is missing (it defines the profiles)") from None
    except tomllib.TOMLDecodeError as exc:
        raise BookError(f"{bk.shown(bk.profiles_file)}: not valid TOML ({exc})") from None
    return {name: dict(tables) for name, tables in data.items()}


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare string


def _type_name(v: Any) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a string", list: "a list",
            dict: "a dict", tuple: "a tuple"}.get(type(v), type(v).__name__)


def _coerce(chapter: Chapter, key: str, parsed: Any, text: str) -> Any:
    """``parsed`` in the type of the chapter's default for ``key``, or BookError (before any kernel starts)."""
    default = chapter.defaults[key]
    if default is None:
        return parsed
    if isinstance(default, bool):
        ok = isinstance(parsed, bool)
    elif isinstance(default, int):
        if isinstance(parsed, float) and parsed.is_integer():
            parsed = int(parsed)  # `--set n_tokens=1e4` keeps the parameter an int
        ok = isinstance(parsed, int) and not isinstance(parsed, bool)
    elif isinstance(default, float):
        if isinstance(parsed, int) and not isinstance(parsed, bool):
            parsed = float(parsed)
        ok = isinstance(parsed, float)
    elif isinstance(default, (list, tuple)):
        if isinstance(parsed, tuple):
            parsed = list(parsed)
        ok = isinstance(parsed, list)
    else:
        ok = isinstance(parsed, type(default))
    if not ok:
        raise BookError(f"--set {key}={text}: {key} of {chapter.name} is {_type_name(default)} "
                        f"(default {default!r}), got {_type_name(parsed)} {parsed!r}")
    return parsed


def parse_sets(chapters: dict[str, Chapter], sets: list[str]) -> dict[str, dict[str, Any]]:
    """The ``--set name=value`` overrides of each selected chapter, type-checked against its defaults."""
    out: dict[str, dict[str, Any]] = {c: {} for c in chapters}
    for item in sets:
        if "=" not in item:
            raise BookError(f"--set takes name=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        targets = [c for c in chapters.values() if key in c.defaults]
        if not targets:
            valid = sorted({p for c in chapters.values() for p in c.defaults})
            raise BookError(f"unknown parameter(s) {key} for {', '.join(chapters)}; valid parameters: "
                            f"{', '.join(valid)}")
        for chap in targets:
            out[chap.name][key] = _coerce(chap, key, _parse_value(value), value)
    return out


def resolve_parameters(chapters: dict[str, Chapter], profile: str, sets: list[str],
                       known: dict[str, Chapter] | None = None, bk: Book | None = None
                       ) -> dict[str, dict[str, Any]]:
    """The parameters injected into each selected chapter: profile overrides, then ``--set`` values.

    A ``--set name=value`` goes to every selected chapter whose parameters cell defines ``name``.
    Raises BookError for an unknown profile, a profile table naming no chapter of ``known`` (all
    chapters; a typo there would silently run a chapter at full scale), an override of a parameter
    the chapter does not have, a ``--set`` name that no selected chapter defines (each listing the
    valid ones), or a ``--set`` value of the wrong type.
    """
    known = chapters if known is None else known
    if bk is None:
        bk = next((c.book for c in chapters.values() if c.book is not None), None)
    profiles = load_profiles(bk)
    if profile not in profiles:
        raise BookError(f"unknown profile {profile!r}; valid profiles: {', '.join(sorted(profiles))}")
    stray = sorted(set(profiles[profile]) - set(known))
    if stray:
        raise BookError(f"notebooks/profiles.toml: [{profile}.{stray[0]}] names no chapter; valid chapters: "
                        f"{', '.join(known)}")
    injected: dict[str, dict[str, Any]] = {c: dict(profiles[profile].get(c, {})) for c in chapters}
    for chap, params in injected.items():
        unknown = sorted(set(params) - set(chapters[chap].defaults))
        if unknown:
            raise BookError(f"{chap}: unknown parameter(s) {', '.join(unknown)} in profile {profile!r}; "
                            f"valid parameters: {', '.join(sorted(chapters[chap].defaults))}")
    for chap, values in parse_sets(chapters, sets).items():
        injected[chap].update(values)
    return {c: p for c, p in injected.items() if p}


def select(chapters: dict[str, Chapter], only: list[str] | None) -> list[Chapter]:
    """The chapters ``--only`` names (file stem, or without ``NN_``), in book order, each once."""
    if not only:
        return list(chapters.values())
    picked: list[Chapter] = []
    for name in only:
        matches = [c for c in chapters.values() if c.name == name or c.name.split("_", 1)[-1] == name
                   or c.name.startswith(name + "_")]
        if len(matches) != 1:
            raise BookError(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters)}")
        if matches[0] not in picked:
            picked.append(matches[0])
    order = list(chapters)
    return sorted(picked, key=lambda c: order.index(c.name))


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
    library, versions = provenance.library_hash(), provenance.key_versions()
    return [make_job(c, profile, params.get(c.name, {}), overrides[c.name], library=library, versions=versions)
            for c in picked]


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
    where = f"{meta.get('profile', '?')}, {meta.get('runtime_s', float('nan')):.1f} s, key {meta.get('cache', {}).get('key', '?')}"
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
    library, versions = provenance.library_hash(), provenance.key_versions()
    out = []
    for chap in select(chapters, only):
        meta = read_meta(chap.executed) if chap.executed.exists() else None
        prof = (meta or {}).get("profile", "quick")
        overrides = (meta or {}).get("overrides", {})
        injected = {**profiles.get(prof, {}).get(chap.name, {}), **overrides}
        out.append(chapter_state(make_job(chap, prof, injected, overrides, library=library, versions=versions)))
    return out


def status_table(states: list[ChapterState]) -> str:
    w = max(len(s.name) for s in states) if states else 7
    return "\n".join(f"{s.name.ljust(w)}  {s.state.ljust(7)}  {s.detail}" for s in states)


# ------------------------------------------------------------------------------ run
def _kernel_env(bk: Book, profile: str, threads: int | None) -> dict[str, str]:
    env = {"GTBOOK_PROFILE": profile, QUIET_ENV: "1", ROOT_ENV: str(bk.root),
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
            log = open(log_path, "ab")
            kw["stdout"] = kw["stderr"] = log
            try:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            finally:
                log.close()  # the kernel holds its own descriptor

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
                cell.source = "\n".join(lines[:head + 1] + ["", box, ""] + lines[head + 1:])
                return
            break
    import nbformat

    nb.cells.insert(0, nbformat.v4.new_markdown_cell(box))


def run_chapter(chapter: Chapter, params: dict[str, Any] | None = None, profile: str = "quick", *,
                job: Job | None = None, threads: int | None = None, progress: bool = True) -> float:
    """Execute one chapter with papermill and publish it; return its wall time. Raises BookError.

    ``params`` are the injected parameters (profile overrides and ``--set`` values); give ``job``
    instead to also record which of them came from ``--set``.
    """
    import jupytext
    import nbformat
    import papermill as pm

    from .claims import claims_in_notebook

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
        except Exception as exc:  # a failed cell, a dead kernel, a timeout, a missing kernel
            if out.exists():
                _publish(bk, out, kept)
            log_kept = bk.failed / f"{chapter.name}.kernel.log"
            if kernel_log.exists() and kernel_log.stat().st_size:
                bk.failed.mkdir(parents=True, exist_ok=True)
                shutil.copy(kernel_log, log_kept)
            if isinstance(exc, pm.PapermillExecutionError):
                where = f"in cell {exc.exec_count} (cell index {exc.cell_index}): {exc.ename}: {exc.evalue}"
            else:
                where = f"({type(exc).__name__}: {exc})"
            raise BookError(
                f"chapter {chapter.name} failed {where}\n  "
                + (f"the failed notebook is kept at {bk.shown(kept)}; " if kept.exists() else "")
                + (f"the kernel's log at {bk.shown(log_kept)}; " if log_kept.exists() else "")
                + "the last good output is untouched"
            ) from None
        elapsed = time.perf_counter() - start
        executed = nbformat.read(out, as_version=4)
        merged = job.merged
        meta = {
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
                log = open(spec.with_suffix(".log"), "w")
                proc = subprocess.Popen([sys.executable, "-m", "gtcore.book", "_worker", str(spec)],
                                        cwd=bk.root, stdout=log, stderr=subprocess.STDOUT)
                log.close()
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
        from . import cache

        cache.clear()
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
        threads = max(1, _cores() // jobs) if jobs > 1 else None
        try:
            times = _run_serial(bk, todo, threads) if jobs == 1 else _run_parallel(bk, todo, jobs, threads)
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


# ---------------------------------------------------------------------------- build
def toc_chapters(bk: Book | None = None) -> list[str]:
    """The executed chapters that ``_toc.yml`` lists, in order."""
    import yaml

    toc = yaml.safe_load((_book(bk).root / "_toc.yml").read_text())
    files = [entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])]
    return [f.split("/", 1)[1] for f in files if f.startswith("executed/") and f not in ("executed/report", "executed/gallery")]


def build_inputs(bk: Book) -> list[Path]:
    """Every file Jupyter Book reads: the executed pages, the prose, the configuration, static files."""
    files = [bk.root / "_config.yml", bk.root / "_toc.yml"]
    files += sorted(bk.executed.glob("[0-9][0-9]_*.ipynb")) + [bk.executed / "report.md"]
    for folder in ("book", "_static"):
        files += sorted(p for p in (bk.root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [p for p in files if p.exists()]


def build_key(bk: Book) -> str:
    h = hashlib.sha256(provenance.package_version("jupyter-book").encode())
    for path in build_inputs(bk):
        h.update(bk.shown(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build(bk: Book | None = None, *, force: bool = False) -> Path:
    """Render the executed chapters and the prose with Jupyter Book v1 (warnings are errors).

    Skipped when none of :func:`build_inputs` changed since the last successful build.
    """
    bk = _book(bk)
    missing = [name for name in toc_chapters(bk) if not (bk.executed / f"{name}.ipynb").exists()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)}; run `gtbook run` first")
    try:
        report.write_report(bk.executed)
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    gallery.write_gallery(bk.executed)
    index = bk.build_dir / "html" / "index.html"
    stamp = bk.build_dir / ".gtbook-build"
    key = build_key(bk)
    if not force and index.exists() and stamp.exists() and stamp.read_text() == key:
        print(f"book up to date (nothing changed since the last build): {index}")
        return index
    stamp.unlink(missing_ok=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(bk.root), "--builder", "html", "-W", "-n",
           "--keep-going"]
    proc = subprocess.run(cmd, cwd=bk.root)
    if proc.returncode != 0:
        raise BookError("jupyter-book build failed (warnings count as errors); see the log above")
    _files.atomic_write_text(stamp, key)
    print(f"book built: {index}")
    return index


# ------------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gtbook", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=None, metavar="PATH",
                   help="the book's folder (default: the working directory or the first one above it "
                        "holding _config.yml)")
    sub = p.add_subparsers(dest="command", required=True)
    add_parser = sub.add_parser

    def add_book_parser(*args, **kw):  # `--root` also after the command (`gtbook status --root PATH`)
        sp = add_parser(*args, **kw)
        sp.add_argument("--root", default=argparse.SUPPRESS, metavar="PATH", help="the book's folder")
        return sp

    sub.add_parser = add_book_parser

    def add_select_args(sp):
        sp.add_argument("--only", nargs="+", action="extend", metavar="NAME",
                        help="chapters (file stem, or without NN_); repeatable")
        sp.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the selected chapters (repeatable)")

    def add_run_args(sp):
        sp.add_argument("--profile", default="quick", help="quick (CI) or full (paper scale); default quick")
        add_select_args(sp)
        sp.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                        help="chapters to run at once, each in its own kernel (threads divided among them)")
        sp.add_argument("--force", action="store_true",
                        help="rerun even fresh chapters (and clear the on-disk cache of pure functions)")
        sp.add_argument("--no-wait", action="store_true",
                        help="fail at once if another gtbook command is running on this book")

    add_run_args(sub.add_parser("run", help="execute the chapters that are not fresh, with papermill"))
    st = sub.add_parser("status", help="each chapter: fresh, stale (and why), failed or missing")
    st.add_argument("--profile", default=None,
                    help="compare against this profile (default: the one each chapter was last run with)")
    add_select_args(st)
    bd = sub.add_parser("build", help="render the executed chapters with Jupyter Book (if anything changed)")
    bd.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    bd.add_argument("--no-wait", action="store_true", help="fail at once if another gtbook command is running")
    add_run_args(sub.add_parser("all", help="run, then build"))
    cl = sub.add_parser("claims", help="print every claim of the executed chapters")
    cl.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    pr = add_parser("probe", help="per-layer Gaussianity of a pretrained Transformer fed Gaussian tokens")
    pr.add_argument("model", nargs="?", default="minilm",
                    help="minilm, modernbert, deit-tiny, a local path or a hub id org/name (local cache only)")
    pr.add_argument("--mode", default="pure", choices=["pure", "embedding"])
    pr.add_argument("--tokens", type=int, default=256, help="tokens per sequence")
    pr.add_argument("--sequences", type=int, default=16, help="number of sequences")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--figure", default=None, metavar="PATH", help="save the figure here")
    at = add_parser("atlas", help="the regime atlas sweep (chapter 8) on Dask: in-process, local, or a cluster")
    at.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="a dask.distributed scheduler (tcp://host:8786), or 'local' for a LocalCluster; "
                         "default: in this process")
    at.add_argument("--out", default="atlas", metavar="DIR", help="folder of the parquet chunks (resumes)")
    at.add_argument("--ds", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8], help="dimensions")
    at.add_argument("--draws", type=int, default=40, help="draws per (attention type, d)")
    at.add_argument("--lanes", type=int, default=256, help="draws per chunk")
    at.add_argument("--workers", type=int, default=2, help="workers of --scheduler local")
    at.add_argument("--seed", type=int, default=0)
    return p


def _claims(bk: Book, as_json: bool) -> str:
    if not report.executed_notebooks(bk.executed):
        raise BookError("nothing has run yet: no executed chapters in "
                        f"{bk.shown(bk.executed)}/. Run `gtbook run` (quick profile, about a minute) or "
                        "`make book` (full profile), then `gtbook claims`")
    try:
        rows = report.collect_claims(bk.executed)
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    return json.dumps([r.as_dict() for r in rows], indent=2) if as_json else report.claims_table(rows)


def _interrupt(signum, frame):
    """Ctrl-C or SIGTERM: unwind (so scratch files are removed and kernels shut down) in silence.

    The libraries' own complaints while unwinding (a kernel that died waiting for a reply, an asyncio
    task whose exception was never retrieved) are not the user's business: logging is switched off, and
    :func:`main` prints one line.
    """
    import logging

    logging.disable(logging.CRITICAL)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if argv is None:  # the command line: Ctrl-C and SIGTERM stop cleanly (exit 130)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
    if getattr(args, "jobs", 1) < 1:
        print("gtbook: error: -j takes a positive number of chapters", file=sys.stderr)
        return 2
    try:
        if args.command == "probe":
            from .pretrained import ModelNotAvailable, probe

            try:
                result = probe(args.model, mode=args.mode, tokens=args.tokens, sequences=args.sequences,
                               seed=args.seed, figure_path=args.figure)
            except (ModelNotAvailable, ValueError) as exc:
                raise BookError(str(exc)) from None
            print(result.table())
            if args.figure:
                print(f"figure: {args.figure}")
            return 0
        if args.command == "atlas":
            from .studies.atlas.sweep import atlas

            try:
                res, table = atlas(args.out, ds=args.ds, draws=args.draws, seed=args.seed, lanes=args.lanes,
                                   scheduler=args.scheduler, workers=args.workers)
            except (ValueError, OSError) as exc:
                raise BookError(str(exc)) from None
            print(table)
            print(res)
            return 0
        bk = open_book(args.root)
        os.environ[ROOT_ENV] = str(bk.root)  # this process's statement registry (the report) is the book's
        if args.command == "status":
            print(status_table(status(bk, args.profile, args.only, args.set)))
        elif args.command == "claims":
            print(_claims(bk, args.json))
        else:  # run, build, all: one at a time per tree
            what = "gtbook " + " ".join(argv if argv is not None else sys.argv[1:])
            try:
                lock = TreeLock(bk.lock_file, wait=not args.no_wait, what=what)
                lock.acquire()
            except LockBusy as exc:
                raise BookError(str(exc)) from None
            try:
                if args.command in ("run", "all"):
                    times = run(args.profile, args.only, args.set, jobs=args.jobs, force=args.force, bk=bk)
                    print("chapter times: " + (", ".join(f"{k} {v:.1f} s" for k, v in times.items())
                                               or "none (every chapter is fresh)"))
                if args.command in ("build", "all"):
                    build(bk, force=args.force)
            finally:
                lock.release()
    except BookError as exc:
        print(f"gtbook: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gtbook: interrupted; finished chapters are kept, the others keep their last good output",
              file=sys.stderr)
        return 130
    return 0


def _entry() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_worker":
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            return _worker(sys.argv[2])
        except KeyboardInterrupt:
            return 130
    return main()


if __name__ == "__main__":
    sys.exit(_entry())
