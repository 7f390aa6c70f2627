r"""The mutation check's results: what caught each mutation, saved as JSON (``book/mutations.json``)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gtbook.files import atomic_write_text, os_error_line
from gtcore.status import Vocabulary

__all__ = [
    "FORMAT",
    "Catch",
    "MutationResult",
    "Outcome",
    "Probe",
    "UnitTests",
    "check_outputs",
    "load_results",
    "save_results",
    "summary_counts",
    "summary_sentence",
]

#: the version of the JSON layout
FORMAT = 1


class Outcome(Vocabulary):
    """What caught a mutation in the book, strongest first (a claim's kind, an exception, a time-out), or nothing."""

    REPRODUCES = "reproduces"
    DERIVATION = "derivation"
    CONSISTENCY = "consistency"
    CONTROL = "control"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    SURVIVED = "survived"

    @property
    def strength(self) -> int:
        """0 for the strongest evidence (a failed reproduction), larger for weaker."""
        return list(Outcome).index(self)

    @property
    def decisive(self) -> bool:
        """Caught by a claim of kind ``reproduces`` or ``derivation``: the check stops there."""
        return self in (Outcome.REPRODUCES, Outcome.DERIVATION)


@dataclass
class Catch:
    """How one chapter ended under a mutation: the first failing claim, or the exception, or the time-out.

    ``first`` is False for a claim seen only in the second look (failed claims not stopping the chapter),
    after an earlier claim of the same chapter had failed.
    """

    chapter: str
    outcome: Outcome
    claim: str | None = None
    statement: str | None = None
    value: Any = None
    threshold: str | None = None
    error: str | None = None
    first: bool = True

    def describe(self) -> str:
        later = "" if self.first else " (after an earlier claim failed)"
        if self.claim is not None:
            return f"{self.chapter}: `{self.claim}`{later}"
        return f"{self.chapter}: {self.error or self.outcome.value}"


@dataclass
class Probe:
    """The probe's value on the original and on the mutated code (numbers, a string, or an error)."""

    original: Any
    mutated: Any
    changed: bool


@dataclass
class UnitTests:
    """The unit tests that guard the mutated file: ``caught`` is None when they could not be run."""

    modules: list[str]
    caught: bool | None
    detail: str = ""
    seconds: float = 0.0


@dataclass
class MutationResult:
    """One mutation's record.

    ``outcome`` is the strongest of ``catches`` (:class:`Outcome`), ``caught_by`` the catch that gives it,
    ``chapters`` the chapters run (in order), ``skipped`` those not run because a ``reproduces`` or
    ``derivation`` claim had already caught the mutation.
    """

    name: str
    file: str
    models: str
    area: str
    outcome: Outcome
    caught_by: Catch | None
    catches: list[Catch] = field(default_factory=list)
    chapters: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unit_tests: UnitTests | None = None
    probe: Probe | None = None
    seconds: float = 0.0
    date: str = ""
    commit: str = ""
    profile: str = "quick"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        for c in d["catches"] + ([d["caught_by"]] if d["caught_by"] else []):
            c["outcome"] = Outcome(c["outcome"]).value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MutationResult:
        def catch(c):
            return None if c is None else Catch(**{**c, "outcome": Outcome(c["outcome"])})

        return cls(
            **{
                **d,
                "outcome": Outcome(d["outcome"]),
                "caught_by": catch(d.get("caught_by")),
                "catches": [catch(c) for c in d.get("catches", [])],
                "unit_tests": UnitTests(**d["unit_tests"]) if d.get("unit_tests") else None,
                "probe": Probe(**d["probe"]) if d.get("probe") else None,
            }
        )


def load_results(path: str | Path) -> tuple[dict[str, Any], list[MutationResult]]:
    """``(run, results)`` from a results file; ``({}, [])`` when it does not exist.

    Raises
    ------
    ValueError
        The file is not a results file of this format (naming it).
    """
    path = Path(path)
    if not path.exists():
        return {}, []
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}")
        return dict(data.get("run", {})), [MutationResult.from_dict(r) for r in data["results"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path}: not a mutation results file of format {FORMAT} ({exc}); rerun `gtbook mutations`"
        ) from None


def check_outputs(path: str | Path, folders: Sequence[str | Path] = ()) -> tuple[dict[str, Any], list[MutationResult]]:
    """Before a check runs: the results file's content (``load_results``), after checking that it is a results
    file of this format (or absent) and that its folder and each of ``folders`` can be written.

    Raises
    ------
    ValueError
        The file is of another format, or a folder cannot be written (naming it).
    """
    path = Path(path)
    content = load_results(path)
    for folder in [path.parent, *map(Path, folders)]:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".gtbook-write-check-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise ValueError(f"{folder}: the mutation check could not save into it ({os_error_line(exc)})") from None
    return content


def save_results(path: str | Path, run: dict[str, Any], results: list[MutationResult]) -> Path:
    """Write the results (atomically) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "run": run, "results": [r.as_dict() for r in results]}, indent=1)
    atomic_write_text(path, text + "\n")
    return path


def summary_counts(results: list[MutationResult]) -> dict[str, int]:
    """Counts for the headline: by outcome, and how many the unit tests caught (of those run)."""
    counts = {o.value: sum(r.outcome is o for r in results) for o in Outcome}
    ran = [r for r in results if r.unit_tests is not None and r.unit_tests.caught is not None]
    counts["total"] = len(results)
    counts["unit_tests_run"] = len(ran)
    counts["unit_tests_caught"] = sum(r.unit_tests is not None and bool(r.unit_tests.caught) for r in ran)
    return counts


def summary_sentence(path: str | Path) -> str | None:
    """The report's sentence on the last mutation check, or None when ``path`` does not exist."""
    try:
        run, results = load_results(path)
    except ValueError as exc:
        return f"**Mutation check:** the results file is unreadable ({exc})."
    if not results:
        return None
    c = summary_counts(results)
    weak = c["consistency"] + c["control"]
    crash = c["exception"] + c["timeout"]
    when = run.get("date", "")[:10]
    tests = (
        f"; the unit tests catch {c['unit_tests_caught']} of the {c['unit_tests_run']} run on them"
        if c["unit_tests_run"]
        else ""
    )
    return (
        f"**Mutation check** (`gtbook mutations`, {run.get('profile', 'quick')} profile"
        + (f", {when}" if when else "")
        + f"): of {c['total']} plausible errors put one at a time into "
        f"gtcore's equations and statistics, {c['reproduces']} fail a *reproduces* claim, {c['derivation']} a "
        f"*derivation* claim, {weak} only a consistency check or a control, {crash} only an exception or a "
        f"time-out, and {c['survived']} pass every chapter{tests}. Which claim caught which error: "
        "{doc}`What the claims can catch <mutations>`."
    )
