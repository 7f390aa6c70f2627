r"""Running the mutation check: temporary trees, probes, the quick book under a mutation, the unit tests.

One mutation at a time (:func:`run_mutation`):

1. copy the unmutated tree (made once per check, ``copy_tree``) and apply the mutation to the copy;
2. run its probe on both trees (``run_probe``): the mutation must change the value, which shows that
   the snippet is executed and changes a number;
3. run the chapters whose ``gtcore`` import closure contains the mutated module (``affected_chapters``),
   ``jobs`` at a time, each in its own ``gtbook`` worker and kernel (:func:`run_chapters`): first those that
   import the module other than through the top-level package (``likely_chapters``), fastest first.
   A chapter stops at its first failing claim (claims raise); the chapter and claim are read back from
   the failed notebook. When that claim is of kind ``reproduces`` or ``derivation`` the mutation is caught
   and the other chapters are stopped; otherwise (a consistency check, a control, an exception, a
   time-out) the remaining chapters still run, so that the record says whether a stronger claim catches
   it. A chapter whose first failing claim is a consistency check or a control is then run once more with
   failed claims recorded but not raised (``GTBOOK_CLAIMS_KEEP_GOING``, the *second look*): a
   ``reproduces`` or ``derivation`` claim further down that chapter that also fails is recorded too
   (``first=False``). The outcome is the strongest catch (:class:`~gtbook.mutations.results.Outcome`),
   or *survived*;
4. run the unit tests that guard the file, ``pytest -x`` on the mapped modules (``run_unit_tests``).

Before the first mutation the unmutated tree runs the same chapters and tests (the *baseline*): every
chapter must pass and every mapped test module too, or nothing a mutation does could be told apart; the
baseline's chapter times set each chapter's time-out (:data:`TIMEOUT_FACTOR` times its baseline, plus
:data:`TIMEOUT_MARGIN_S`). Every subprocess imports ``gtcore`` from its tree (``PYTHONPATH``; the probe
checks it), with the on-disk cache off (``GTBOOK_NO_CACHE=1``), so no result is served from an unmutated run.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtbook import provenance
from gtbook.chapters import BookError, discover_chapters, open_book
from gtbook.claims import claims_in_notebook
from gtbook.mutations import save_check
from gtbook.mutations.registry import Mutation, load_registry
from gtbook.mutations.results import Catch, MutationResult, Outcome, Probe, check_outputs
from gtbook.mutations.trees import (  # the trees, probes and unit tests (importable from here as before)
    _env,
    affected_chapters,
    copy_tree,
    likely_chapters,
    probe_changed,
    run_probe,
    run_unit_tests,
    tree_fingerprint,
)
from gtbook.plan import _cores, plan

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "TIMEOUT_FACTOR",
    "TIMEOUT_MARGIN_S",
    "Baseline",
    "ChapterRun",
    "check_registry",
    "mutations_named",
    "planned_in_tree",
    "run_baseline",
    "run_chapters",
    "run_check",
    "run_mutation",
    "verify",
]

#: a chapter under a mutation is stopped after this many times its baseline run time ...
TIMEOUT_FACTOR = 4.0
#: ... plus this margin (s)
TIMEOUT_MARGIN_S = 120.0
#: the time-out (s) of a chapter without a baseline
DEFAULT_TIMEOUT_S = 1200.0


def _log_default(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------- chapters
@dataclass
class ChapterRun:
    """One chapter's run in a tree: passed, or the ``Catch`` that stopped it; ``stopped`` when it was
    ended early because another chapter had already caught the mutation."""

    name: str
    passed: bool
    seconds: float
    catch: Catch | None = None
    stopped: bool = False
    failures: list[Catch] | None = None


def _failed_claims(tree: Path, name: str) -> list[Catch]:
    """Every failing claim recorded by the last run of ``name`` (its failed notebook, else its executed one)."""
    import nbformat

    for path in (Path(tree) / "executed" / "failed" / f"{name}.ipynb", Path(tree) / "executed" / f"{name}.ipynb"):
        if path.exists():
            return [
                Catch(
                    chapter=name,
                    outcome=Outcome(rec.get("kind", "consistency")),
                    claim=rec.get("name"),
                    statement=rec.get("statement"),
                    value=rec.get("value"),
                    threshold=rec.get("threshold"),
                )
                for rec in claims_in_notebook(nbformat.read(path, as_version=4))
                if not rec.get("passed")
            ]
    return []


def _catch_of(tree: Path, name: str, error: str) -> Catch:
    """The first failing claim of the failed notebook of ``name``, or the exception ``error`` describes."""
    failed = _failed_claims(tree, name)
    if failed:
        return failed[0]
    first = error.strip().splitlines()[0] if error.strip() else "the worker died"
    first = first.replace(str(Path(tree).resolve()), "<tree>").replace(str(tree), "<tree>")
    return Catch(chapter=name, outcome=Outcome.EXCEPTION, error=first.split(" failed ", 1)[-1][:300])


def _end(proc: subprocess.Popen) -> None:
    """Stop a worker: SIGINT (it shuts its kernel down), then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def planned_in_tree(tree: Path, profile: str, names: list[str], jobs: int = 1) -> dict[str, Any]:
    """The jobs of ``names`` in the book at ``tree``, keyed as that tree's workers will check them.

    Their keys hold the threads the kernels get (``execute.kernel_threads``) and the hash of the library in
    ``tree`` (the workers import ``gtcore`` and ``gtbook`` from it, ``PYTHONPATH``): a key computed from this
    process's packages (the unmutated ones) would make a worker refuse to publish a chapter that passed under
    a mutation, its key having "changed while it ran (library)", and the check would record an exception
    instead of a pass.
    """
    bk = open_book(tree)
    todo = {j.chapter.name: j for j in plan(bk, profile, names, [], jobs=jobs)}
    for j in todo.values():
        j.components["library"] = provenance.library_hash(j.source if j.source is not None else j.chapter.source, tree)
    return todo


def run_chapters(
    tree: Path,
    names: list[str],
    *,
    profile: str = "quick",
    jobs: int = 1,
    timeouts: dict[str, float] | None = None,
    stop: Callable[[ChapterRun], bool] | None = None,
    keep_going: bool = False,
    log: Callable[[str], None] = _log_default,
) -> tuple[list[ChapterRun], list[str]]:
    """Run the chapters ``names`` of the book at ``tree`` (in that order, ``jobs`` at a time) with its ``gtcore``.

    Each chapter runs in a ``gtbook`` worker process (its own kernel, with the threads of
    ``gtbook.execute.kernel_threads``). When
    ``stop(run)`` is true for a finished chapter, the running ones are ended and the rest not started.
    With ``keep_going`` a failed claim does not stop its chapter (every failing claim is in
    ``ChapterRun.failures``). Returns the runs (completed, failed, timed out or stopped) and the names
    never started.
    """
    if not names:
        return [], []
    bk = open_book(tree)
    jobs = max(1, min(jobs, len(names)))
    todo = planned_in_tree(tree, profile, names, jobs)
    bk.running.mkdir(parents=True, exist_ok=True)
    pending, runs = list(names), []
    active: dict[str, Any] = {}
    halt = False
    timeouts = timeouts or {}
    try:
        while pending or active:
            while pending and len(active) < jobs and not halt:
                name = pending.pop(0)
                job = todo[name]
                spec = Path(tempfile.mkstemp(prefix=f"{name}.", suffix=".job.json", dir=bk.running)[1])
                spec.write_text(
                    json.dumps(
                        {
                            "root": str(bk.root),
                            "chapter": name,
                            "profile": job.profile,
                            "injected": job.injected,
                            "overrides": job.overrides,
                            "components": job.components,
                            "threads": job.threads,
                        }
                    )
                )
                with open(spec.with_suffix(".log"), "w") as fh:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "gtbook", "_worker", str(spec)],
                        cwd=tree,
                        env=_env(tree, threads=None, keep_going=keep_going),
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                    )
                active[name] = (proc, spec, time.monotonic())
            time.sleep(0.5)
            for name, (proc, spec, t0) in list(active.items()):
                elapsed = time.monotonic() - t0
                limit = timeouts.get(name, DEFAULT_TIMEOUT_S)
                if proc.poll() is None and elapsed <= limit:
                    continue
                del active[name]
                if proc.poll() is None:
                    _end(proc)
                    run = ChapterRun(
                        name,
                        False,
                        elapsed,
                        Catch(chapter=name, outcome=Outcome.TIMEOUT, error=f"still running after {limit:.0f} s"),
                    )
                else:
                    res_path = spec.with_suffix(".result.json")
                    result = json.loads(res_path.read_text()) if res_path.exists() else None
                    failures = _failed_claims(tree, name)
                    if result and result.get("ok") and not failures:
                        run = ChapterRun(name, True, elapsed, failures=[])
                    elif result and result.get("ok"):  # keep_going: it ran to the end, with failed claims
                        run = ChapterRun(name, False, elapsed, failures[0], failures=failures)
                    else:
                        log_text = spec.with_suffix(".log").read_text() if spec.with_suffix(".log").exists() else ""
                        error = (
                            result["error"]
                            if result
                            else f"the worker died (exit {proc.returncode}): {log_text[-300:]}"
                        )
                        run = ChapterRun(name, False, elapsed, _catch_of(tree, name, error), failures=failures)
                for p in (spec, spec.with_suffix(".result.json"), spec.with_suffix(".log")):
                    p.unlink(missing_ok=True)
                runs.append(run)
                log(
                    f"    {name}: "
                    + (
                        "passed"
                        if run.passed or run.catch is None
                        else f"{run.catch.outcome.value} ({run.catch.describe()})"
                    )
                    + f", {elapsed:.0f} s"
                )
                if stop is not None and stop(run):
                    halt = True
            if halt and active:
                for name, (proc, spec, t0) in list(active.items()):
                    _end(proc)
                    runs.append(ChapterRun(name, False, time.monotonic() - t0, stopped=True))
                    for p in (spec, spec.with_suffix(".result.json"), spec.with_suffix(".log")):
                        p.unlink(missing_ok=True)
                active.clear()
            if halt:
                break
    except BaseException:
        for proc, _, _ in active.values():
            _end(proc)
        raise
    return runs, pending


# --------------------------------------------------------------------------------- baseline
@dataclass
class Baseline:
    """The unmutated tree's run: chapter times (s), and the test modules that passed."""

    times: dict[str, float]
    tests: list[str]

    def timeout(self, chapter: str) -> float:
        t = self.times.get(chapter)
        return DEFAULT_TIMEOUT_S if t is None else TIMEOUT_FACTOR * t + TIMEOUT_MARGIN_S

    def order(self, chapters: list[str], first: Sequence[str] = ()) -> list[str]:
        """Those in ``first`` first, then the others; fastest first within each (the book's order without
        baseline times)."""
        return sorted(chapters, key=lambda c: (c not in first, self.times.get(c, float("inf")), chapters.index(c)))


def run_baseline(
    tree: Path,
    chapters: list[str],
    tests: list[str],
    *,
    profile: str = "quick",
    jobs: int = 1,
    log: Callable[[str], None] = _log_default,
) -> Baseline:
    """Run ``chapters`` and ``tests`` on the unmutated ``tree``; raises BookError unless all pass."""
    log(f"baseline: {len(chapters)} chapter(s) and {len(tests)} test module(s) on the unmutated tree")
    runs, _ = run_chapters(tree, chapters, profile=profile, jobs=jobs, log=log)
    bad = [r for r in runs if not r.passed]
    if bad:
        raise BookError(
            "the unmutated book fails, so no mutation can be measured: "
            + "; ".join(r.catch.describe() if r.catch else r.name for r in bad)
        )
    if tests:
        ut = run_unit_tests(tree, tests)
        if ut.caught is not False:
            raise BookError(f"the unit tests fail on the unmutated tree ({ut.detail}); fix them first")
        log(f"    unit tests: passed, {ut.seconds:.0f} s")
    return Baseline({r.name: r.seconds for r in runs}, list(tests))


# --------------------------------------------------------------------------------- mutations
def check_registry(root: Path, mutations: list[Mutation]) -> dict[str, list[str]]:
    """Static problems of each mutation against the tree at ``root`` (snippet count, compiling, test modules)."""
    return {m.name: m.check(root) for m in mutations}


def run_mutation(
    m: Mutation,
    pristine: Path,
    workdir: Path,
    baseline: Baseline,
    *,
    profile: str = "quick",
    jobs: int = 1,
    chapters: list[str] | None = None,
    unit_tests: bool = True,
    original_probe: dict[str, Any] | None = None,
    commit: str = "",
    log: Callable[[str], None] = _log_default,
) -> MutationResult:
    """Apply ``m`` to a copy of ``pristine`` and measure what catches it (see the module docstring)."""
    start = time.perf_counter()
    tree = workdir / m.name
    shutil.rmtree(tree, ignore_errors=True)
    copy_tree(pristine, tree)
    try:
        m.apply(tree)
        before = original_probe if original_probe is not None else run_probe(pristine, m.probe)
        after = run_probe(tree, m.probe)
        probe = Probe(before, after, probe_changed(before, after))
        log(f"  probe: {'changed' if probe.changed else 'UNCHANGED'}")
        names = affected_chapters(tree, m.module)
        if chapters is not None:
            names = [c for c in names if c in chapters]
        names = baseline.order(names, likely_chapters(tree, m.module))
        runs, never = run_chapters(
            tree,
            names,
            profile=profile,
            jobs=jobs,
            timeouts={c: baseline.timeout(c) for c in names},
            stop=lambda r: r.catch is not None and r.catch.outcome.decisive,
            log=log,
        )
        catches = [r.catch for r in runs if r.catch is not None]
        weak = [
            r.name
            for r in runs
            if r.catch is not None
            and r.catch.claim is not None
            and r.catch.outcome in (Outcome.CONSISTENCY, Outcome.CONTROL)
        ]
        if weak and not any(c.outcome.decisive for c in catches):
            log(f"  second look (failed claims do not stop the chapter): {', '.join(weak)}")
            again, _ = run_chapters(
                tree,
                weak,
                profile=profile,
                jobs=jobs,
                timeouts={c: baseline.timeout(c) for c in weak},
                stop=lambda r: any(f.outcome.decisive for f in r.failures or []),
                keep_going=True,
                log=log,
            )
            for r in again:
                first = next((c for c in catches if c.chapter == r.name), None)
                for f in r.failures or []:
                    if first is None or f.claim != first.claim:
                        f.first = False
                        catches.append(f)
        best = min(catches, key=lambda c: (c.outcome.strength, not c.first)) if catches else None
        ut = run_unit_tests(tree, list(m.tests)) if unit_tests else None
        if ut is not None:
            log(
                f"  unit tests: {'caught' if ut.caught else 'not caught' if ut.caught is False else 'not run'} "
                f"({ut.detail}), {ut.seconds:.0f} s"
            )
        return MutationResult(
            name=m.name,
            file=m.file,
            models=m.models,
            area=m.area,
            outcome=best.outcome if best else Outcome.SURVIVED,
            caught_by=best,
            catches=catches,
            chapters=[r.name for r in runs if not r.stopped],
            skipped=[r.name for r in runs if r.stopped] + list(never),
            unit_tests=ut,
            probe=probe,
            seconds=round(time.perf_counter() - start, 1),
            date=provenance.now_utc(),
            commit=commit,
            profile=profile,
        )
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def mutations_named(names: list[str] | None) -> list[Mutation]:
    """The registry's mutations (all, or those ``names`` lists, in registry order); BookError for an unknown name."""
    registry = load_registry()
    if not names:
        return list(registry.values())
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise BookError(f"unknown mutation(s) {', '.join(unknown)}; registered: {', '.join(registry)}")
    return [m for n, m in registry.items() if n in names]


def _commit(root: Path) -> str:
    git = provenance.git_state(root) or {}
    if not git.get("commit"):
        return ""
    return git["commit"][:10] + (" (uncommitted changes)" if git.get("dirty") else "")


def verify(
    root: Path, names: list[str] | None = None, *, log: Callable[[str], None] = _log_default
) -> dict[str, list[str]]:
    """The static checks and the probe of each mutation (no chapter runs): ``{name: problems}``.

    A mutation has a problem when its snippet does not occur exactly once, the mutated file does not
    compile, a test module is missing, the probe fails on the original code, or the probe's value does
    not change under the mutation.
    """
    root = Path(root)
    mutations = mutations_named(names)
    problems = check_registry(root, mutations)
    with tempfile.TemporaryDirectory(prefix="gtbook-mutations-") as tmp:
        pristine = copy_tree(root, Path(tmp) / "pristine")
        for m in mutations:
            if problems[m.name]:
                continue
            before = run_probe(pristine, m.probe)
            if "error" in before:
                problems[m.name].append(f"the probe fails on the original code: {before['error']}")
                continue
            tree = copy_tree(pristine, Path(tmp) / m.name)
            m.apply(tree)
            after = run_probe(tree, m.probe)
            shutil.rmtree(tree, ignore_errors=True)
            if not probe_changed(before, after):
                problems[m.name].append("the probe's value does not change under the mutation")
            log(f"{m.name}: " + ("; ".join(problems[m.name]) or "applies once, compiles, changes the probe"))
    return problems


def run_check(
    root: Path,
    names: list[str] | None = None,
    *,
    profile: str = "quick",
    jobs: int = 1,
    chapters: list[str] | None = None,
    unit_tests: bool = True,
    baseline: bool = True,
    keep: bool = False,
    results: Path | None = None,
    writes: Sequence[Path] = (),
    resume: bool = True,
    log: Callable[[str], None] = _log_default,
) -> tuple[dict[str, Any], list[MutationResult]]:
    """Run the mutation check on the book at ``root``: ``(run, results)`` (see the module docstring).

    With a ``results`` file, everything the check will write is checked before the first mutation (the file's
    format, that its folder and each of ``writes`` can be written), and the file is saved as each mutation
    finishes, its ``run`` marked ``partial`` until the last: a run stopped half-way (Ctrl-C, a crash, a
    reboot) keeps what it measured, and the same call on the same tree (the sources of the packages,
    chapters and tests, the profile, the chapters and the unit-test choice) measures only the others, reusing
    the baseline's times.

    Parameters
    ----------
    root : the book's folder (it is copied; nothing in it is changed)
    names : the mutations to run (default: the whole registry)
    profile : the chapters' profile (``"quick"``)
    jobs : chapters run at once
    chapters : restrict the chapters run (default: every chapter that imports the mutated module)
    unit_tests : also run the unit tests that guard each mutated file
    baseline : first run the same chapters and tests on the unmutated tree (they must pass; their times
        set the chapters' time-outs)
    keep : keep the temporary folder (its path is logged)
    results : the results file to save into as the check goes (None: nothing is written)
    writes : other folders the caller will write into afterwards (the page's), checked first
    resume : reuse the results of a partial run of the same check on the same tree

    Raises
    ------
    BookError
        An unknown mutation or chapter, a mutation that does not apply (see :func:`verify`), a results file
        of another format or a folder that cannot be written (before any mutation runs), or a baseline that
        fails.
    """
    root = Path(root)
    mutations = mutations_named(names)
    all_chapters = list(discover_chapters(open_book(root)))
    if chapters is not None:
        bad = [c for c in chapters if c not in all_chapters]
        if bad:
            raise BookError(f"unknown chapter(s) {', '.join(bad)}; chapters: {', '.join(all_chapters)}")
    problems = {k: v for k, v in check_registry(root, mutations).items() if v}
    if problems:
        raise BookError("mutations that do not apply: " + "; ".join(p for v in problems.values() for p in v))
    try:
        before, saved = check_outputs(results, writes) if results is not None else ({}, [])
    except ValueError as exc:
        raise BookError(str(exc)) from None
    start = time.perf_counter()
    commit = _commit(root)  # the tree that is copied now is the one measured
    settings = {
        "commit": commit,
        "tree": tree_fingerprint(root),
        "profile": profile,
        "chapters": chapters,
        "unit_tests": unit_tests,
    }
    done: dict[str, MutationResult] = {}
    if resume and before.get("partial") and all(before.get(k) == v for k, v in settings.items()):
        done = {r.name: r for r in saved if r.name in before.get("done", []) and r.name in {m.name for m in mutations}}
        if done:
            log(f"resuming: {len(done)} of {len(mutations)} mutations already measured on this tree ({results})")
    elif before.get("partial"):
        log(f"{results} holds a partial run of another tree or other settings: every mutation runs again")
    todo = [m for m in mutations if m.name not in done]
    tmp = Path(tempfile.mkdtemp(prefix="gtbook-mutations-"))
    if keep:
        log(f"temporary trees in {tmp}")
    new: list[MutationResult] = []
    base = Baseline({}, [])

    def record(partial: bool) -> dict[str, Any]:
        measured = {**done, **{r.name: r for r in new}}
        run = {
            "date": provenance.now_utc(),
            **settings,
            "jobs": jobs,
            "mutations": [m.name for m in mutations],
            "baseline_s": {k: round(v, 1) for k, v in base.times.items()},
            "baseline_tests": base.tests,
            "wall_s": round(time.perf_counter() - start + (before.get("wall_s", 0.0) if done else 0.0), 1),
            "cores": _cores(),
        }
        if partial:
            run.update(partial=True, done=[m.name for m in mutations if m.name in measured])
        if results is not None:
            save_check(results, run, [measured[m.name] for m in mutations if m.name in measured])
        return run

    try:
        pristine = copy_tree(root, tmp / "pristine")
        if done and before.get("baseline_s") is not None and baseline:
            base = Baseline(dict(before["baseline_s"]), list(before.get("baseline_tests", [])))
        elif baseline and todo:
            needed = sorted(
                {c for m in todo for c in affected_chapters(pristine, m.module) if chapters is None or c in chapters},
                key=all_chapters.index,
            )
            tests = sorted({t for m in todo for t in m.tests}) if unit_tests else []
            base = run_baseline(pristine, needed, tests, profile=profile, jobs=jobs, log=log)
        for k, m in enumerate(todo, 1):
            log(f"[{k}/{len(todo)}] {m.name} ({m.file})")
            r = run_mutation(
                m,
                pristine,
                tmp,
                base,
                profile=profile,
                jobs=jobs,
                chapters=chapters,
                unit_tests=unit_tests,
                commit=commit,
                log=log,
            )
            new.append(r)
            record(partial=True)
            log(
                f"  -> {r.outcome.value}"
                + (f" by {r.caught_by.describe()}" if r.caught_by else "")
                + f" ({r.seconds:.0f} s)"
            )
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    run = record(partial=False)
    measured = {**done, **{r.name: r for r in new}}
    return run, [measured[m.name] for m in mutations]
