r"""Planning a run: each chapter's job (its profile, parameters, cache key, thread count) and its state.

**Profiles stick.** Without ``--profile``, a chapter runs (and ``gtbook status`` compares it) with the
profile it was last run with; a chapter never run gets the book's profile (the one every executed
chapter shares), else ``quick``. :func:`status` plans exactly what ``gtbook run`` with the same arguments
would run (:func:`plan`), and says for each chapter whether it is fresh, stale (and which component of its
key changed), failed, missing, broken or an orphan. :mod:`gtbook.execute` runs the jobs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtbook import provenance, verify
from gtbook.chapters import (
    Book,
    BookError,
    Chapter,
    _book,
    broken,
    discover_chapters,
    parse_sets,
    resolve_parameters,
    select,
)

__all__ = [
    "DEFAULT_PROFILE",
    "ChapterState",
    "Job",
    "book_profile",
    "chapter_state",
    "kernel_threads",
    "make_job",
    "plan",
    "read_meta",
    "status",
    "status_table",
]

#: the profile of a chapter never run, in a book none of whose chapters ran
DEFAULT_PROFILE = "quick"


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
    #: the chapter's source text, read once when the job was planned: what the kernel executes
    source: str | None = None
    #: the BLAS/torch threads of the kernel (part of the key)
    threads: int | None = None

    @property
    def key(self) -> str:
        return provenance.cache_key(self.components)

    @property
    def merged(self) -> dict[str, Any]:
        return {**self.chapter.defaults, **self.injected}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def kernel_threads(jobs: int = 1) -> int:
    """The BLAS/torch threads each kernel gets: ``cores // jobs`` under ``-j N``; with ``-j 1``,
    ``$OMP_NUM_THREADS`` when set, else every core. A function of ``-j`` alone (not of how many
    chapters are stale), since it is part of the cache key."""
    if jobs > 1:
        return max(1, _cores() // jobs)
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", "") or 0)
    except ValueError:
        n = 0
    return n if n > 0 else _cores()


def make_job(
    chapter: Chapter,
    profile: str,
    injected: dict[str, Any],
    overrides: dict[str, Any],
    *,
    library: str | None = None,
    versions: dict[str, str] | None = None,
    threads: int | None = None,
) -> Job:
    threads = kernel_threads(1) if threads is None else int(threads)
    source = chapter.source
    merged = {k: v for k, v in {**chapter.defaults, **injected}.items() if _jsonable(v)}
    comps = provenance.key_components(source, profile, merged, library=library, versions=versions, threads=threads)
    return Job(chapter, profile, dict(injected), dict(sorted(overrides.items())), comps, source, threads)


def _changed_since_planned(job: Job) -> list[str]:
    """The key components that differ between the job's key and the chapter's key now (source,
    library, versions): non-empty when the chapter changed while it ran."""
    merged = {k: v for k, v in job.merged.items() if _jsonable(v)}
    try:
        now = provenance.key_components(job.chapter.source, job.profile, merged, threads=job.threads)
    except OSError:
        return ["source"]
    return provenance.stale_reasons(job.components, now)


def _recorded_profile(chapter: Chapter) -> str | None:
    meta = read_meta(chapter.executed) if chapter.executed.exists() else None
    prof = (meta or {}).get("profile")
    return prof if isinstance(prof, str) and prof else None


def book_profile(bk: Book, *, strict: bool = False) -> str | None:
    """The profile every executed chapter was run with; None when none ran.

    When they disagree: :data:`DEFAULT_PROFILE`, or with ``strict`` a BookError listing them.
    """
    seen: dict[str, list[str]] = {}
    for chap in discover_chapters(bk).values():
        prof = _recorded_profile(chap)
        if prof is not None:
            seen.setdefault(prof, []).append(chap.name)
    if not seen:
        return None
    if len(seen) == 1:
        return next(iter(seen))
    if strict:
        raise BookError(
            "the executed chapters were run with different profiles ("
            + "; ".join(f"{p}: {', '.join(c)}" for p, c in seen.items())
            + "): pass --profile to choose one"
        )
    return DEFAULT_PROFILE


def plan(bk: Book, profile: str | None, only: list[str] | None, sets: list[str], *, jobs: int = 1) -> list[Job]:
    """The jobs of ``gtbook run`` (every selected chapter; the cache is applied by ``run``).

    Without ``profile``, each chapter gets the profile it was last run with (a chapter never run: the
    book's profile, else :data:`DEFAULT_PROFILE`). A broken chapter (its parameters cell cannot be read) gets
    no job: :func:`status` and ``run`` name it.
    """
    chapters = discover_chapters(bk)
    picked = [c for c in select(chapters, only) if c.problem is None]
    sub = {c.name: c for c in picked}
    overrides = parse_sets(sub, sets)  # checks every --set against the whole selection
    if profile is not None:
        profiles = {c.name: profile for c in picked}
    else:
        fallback = book_profile(bk) or DEFAULT_PROFILE
        profiles = {c.name: _recorded_profile(c) or fallback for c in picked}
    params: dict[str, dict[str, Any]] = {}
    for prof in dict.fromkeys(profiles.values()):
        group = {n: c for n, c in sub.items() if profiles[n] == prof}
        names = {p for c in group.values() for p in c.defaults}
        mine = [item for item in sets if item.split("=", 1)[0].strip() in names]
        params.update(resolve_parameters(group, prof, mine, known=chapters, bk=bk))
    versions = provenance.key_versions()
    threads = kernel_threads(jobs)
    return [
        make_job(c, profiles[c.name], params.get(c.name, {}), overrides[c.name], versions=versions, threads=threads)
        for c in picked
    ]


def _read_notebook_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            nb = json.load(fh)
    except (OSError, ValueError):
        return None
    return nb if isinstance(nb, dict) else None


def read_meta(path: Path) -> dict[str, Any] | None:
    """The ``gtbook`` metadata of an executed notebook, or None when unreadable."""
    nb = _read_notebook_json(path)
    meta = ((nb or {}).get("metadata") or {}).get("gtbook") if isinstance((nb or {}).get("metadata"), dict) else None
    return meta if isinstance(meta, dict) else None


@dataclass
class ChapterState:
    name: str
    state: str  # fresh | stale | failed | missing | broken | orphan
    reasons: list[str]
    detail: str


def _ran_text(meta: dict[str, Any]) -> str:
    from gtbook.report import overrides_text

    sets = overrides_text(meta.get("overrides") or {})
    return f"{meta.get('profile', '?')}" + (f" --set {sets}" if sets else "")


def chapter_state(job: Job) -> ChapterState:
    """Whether ``job``'s executed notebook is fresh, and if not why.

    Stale reasons are the key's components that changed, and ``edited`` when the notebook's outputs
    (its claims) no longer match the digest its run recorded.
    """
    chap = job.chapter
    bk = _book(chap.book)
    failed = (bk.failed / f"{chap.name}.ipynb").exists()
    if not chap.executed.exists():
        return ChapterState(
            chap.name,
            "failed" if failed else "missing",
            [],
            "latest run failed; no good output" if failed else "not run yet",
        )
    nb = _read_notebook_json(chap.executed)
    meta = read_meta(chap.executed) if nb is not None else None
    recorded = (meta or {}).get("cache", {}).get("components") if isinstance((meta or {}).get("cache"), dict) else None
    reasons = provenance.stale_reasons(recorded if isinstance(recorded, dict) else None, job.components)
    if failed:
        return ChapterState(chap.name, "failed", reasons, "latest run failed; the page shows the last good output")
    if nb is None or meta is None:
        return ChapterState(chap.name, "stale", ["unreadable"], "the executed notebook cannot be read")
    edited = verify.digest_problem(nb, meta)
    if edited:
        reasons.append("edited")
    cache = meta.get("cache")
    if not isinstance(cache, dict):
        cache = {}
    where = f"{_ran_text(meta)}, {provenance.seconds_text(meta.get('runtime_s'))}, key {cache.get('key', '?')}"
    if reasons:
        why = ", ".join(reasons)
        if "threads" in reasons:
            ran = recorded.get("threads", "?") if isinstance(recorded, dict) else "?"
            why += f" (ran with {ran} threads, now {job.threads})"
        if edited:
            why += f"; {edited}"
        return ChapterState(chap.name, "stale", reasons, f"changed: {why} (was {where})")
    return ChapterState(chap.name, "fresh", [], where)


def status(
    bk: Book, profile: str | None = None, only: list[str] | None = None, sets: list[str] | None = None, *, jobs: int = 1
) -> list[ChapterState]:
    """Each selected chapter's state, against exactly what ``gtbook run`` with the same ``--profile``,
    ``--only``, ``--set`` and ``-j`` would run (so *fresh* means: that command would not rerun it).
    Without ``profile``, each chapter is compared with the profile it was last run with. A chapter whose
    parameters cell cannot be read is ``broken``, with the file, line and cause."""
    states = {j.chapter.name: chapter_state(j) for j in plan(bk, profile, only, sets or [], jobs=jobs)}
    chapters = discover_chapters(bk)
    for chap in broken(select(chapters, only)):
        states[chap.name] = ChapterState(chap.name, "broken", [], chap.problem or "")
    ordered = sorted(states.values(), key=lambda s: list(chapters).index(s.name))
    if not only:
        from gtbook.report import orphan_notebooks

        ordered += [
            ChapterState(
                p.stem,
                "orphan",
                [],
                "executed notebook without a source: not counted by "
                "`gtbook claims` or the report; `gtbook clean --orphans` removes it",
            )
            for p in orphan_notebooks(bk.executed)
        ]
    return ordered


def status_table(states: list[ChapterState]) -> str:
    w = max(len(s.name) for s in states) if states else 7
    return "\n".join(f"{s.name.ljust(w)}  {s.state.ljust(7)}  {s.detail}" for s in states)
