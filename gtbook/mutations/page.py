r"""The book's page "What the claims can catch", generated from the last mutation check (``book/mutations.json``)."""

from __future__ import annotations

from pathlib import Path

from gtbook.files import atomic_write_text
from gtbook.mutations.registry import Mutation, load_registry
from gtbook.mutations.results import MutationResult, Outcome, load_results, summary_counts

__all__ = ["PAGE", "mutations_markdown", "write_page"]

#: the page's file name under ``executed/`` (listed in ``_toc.yml``)
PAGE = "mutations.md"


def _esc(x: object) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _caught(r: MutationResult) -> str:
    c = r.caught_by
    if c is None:
        return "—"
    if c.claim is not None:
        return f"{_esc(c.chapter)}: `{_esc(c.claim)}`" + (
            "" if c.first else " (after an earlier claim of the chapter failed)"
        )
    return f"{_esc(c.chapter)}: {_esc(c.error or c.outcome.value)}"


def _tests(r: MutationResult) -> str:
    if r.unit_tests is None or r.unit_tests.caught is None:
        return "not run" if r.unit_tests is None else f"not run ({_esc(r.unit_tests.detail)})"
    return "yes" if r.unit_tests.caught else "**no**"


def _verdict(r: MutationResult) -> str:
    o = r.outcome
    text = {
        Outcome.SURVIVED: "**survived**",
        Outcome.EXCEPTION: "exception only",
        Outcome.TIMEOUT: "time-out only",
    }.get(o, o.value)
    if o in (Outcome.CONSISTENCY, Outcome.CONTROL):
        text += " only"
    return text


def mutations_markdown(results_path: Path, registry: dict[str, Mutation] | None = None) -> str:
    """The page's MyST markdown, from the results file (a short page saying how to run the check when absent)."""
    registry = load_registry() if registry is None else registry
    run, results = load_results(results_path)
    lines = [
        "# What the claims can catch",
        "",
        "A claim is only worth what it could catch. This page records a **mutation check**: plausible errors "
        "in gtcore's equations and statistics (a transposed tilt, a term dropped from a drift, a wrong factor "
        "in a gain, a noise floor at the wrong size, ...), each put alone into a temporary copy of the "
        "library, after which the quick book runs on the chapters that import the mutated module and the "
        "unit tests that guard the file run too. A chapter stops at its first failing claim; once a claim "
        "of kind *reproduces* or *derivation* has failed the mutation counts as caught and the remaining "
        "chapters are not run, otherwise every chapter runs, and a chapter stopped by a consistency check "
        "or a control runs once more with failed claims recorded but not raised, so that *only a "
        "consistency check* means that no stronger claim of the book caught it. Each mutation's probe "
        "(a small computation with the mutated code) shows that the change is executed and changes a "
        "number. The registry is "
        "`gtbook/mutations/registry.toml`; `gtbook mutations` (or `make mutations`) reruns the check "
        "and rewrites `book/mutations.json`, from which this page is generated.",
        "",
    ]
    if not results:
        lines += ["The mutation check has not been run on this tree yet: run `gtbook mutations -j 2`.", ""]
        return "\n".join(lines) + "\n"
    c = summary_counts(results)
    lines += [
        f"**{c['total']} mutations**: {c['reproduces']} caught by a *reproduces* claim, {c['derivation']} by a "
        f"*derivation* claim, {c['consistency']} only by a consistency check, {c['control']} only by a "
        f"control, {c['exception']} only by an exception, {c['timeout']} only by a time-out, and "
        f"**{c['survived']} survived** every chapter. The unit tests caught {c['unit_tests_caught']} of the "
        f"{c['unit_tests_run']} they ran on.",
        "",
        "| mutation | file | what it models | caught by (chapter: claim) | kind | unit tests |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| `{_esc(r.name)}` | `{_esc(r.file)}` | {_esc(r.models)} | {_caught(r)} | {_verdict(r)} | {_tests(r)} |"
        )
    lines.append("")
    last = str(run.get("commit") or "").split(" ")[0]  # the hash, without a "(uncommitted changes)" remark
    older = [r for r in results if r.commit and last and r.commit.split(" ")[0] != last]
    if older:
        lines += [
            f"**Entries from an earlier run:** {len(older)} of the {len(results)} mutations were last run on "
            "another commit than the last run's, so on older code and chapters: "
            + ", ".join(f"`{_esc(r.name)}` ({_esc(r.commit)}, {_esc(r.date)})" for r in older)
            + ". Rerun them with `gtbook mutations --only NAME ...`.",
            "",
        ]
    weak = [r for r in results if not r.outcome.decisive]
    if weak:
        lines += [
            "## Not caught by a reproduction or a derivation",
            "",
            "These mutations pass every *reproduces* and *derivation* claim of the chapters that run "
            "their code: the claims that would catch them are still to be written.",
            "",
        ]
        for r in weak:
            seen = "; ".join(f"{_esc(k.describe())} ({k.outcome.value})" for k in r.catches) or "nothing"
            lines.append(
                f"- `{_esc(r.name)}` ({r.area}): {_esc(r.models)} Chapters run: "
                f"{', '.join(r.chapters) or 'none'}; what failed: {seen}."
            )
        lines.append("")
    unchanged = [r.name for r in results if r.probe is not None and not r.probe.changed]
    if unchanged:
        lines += [
            f"**Warning:** the probe of {', '.join(unchanged)} did not change: these mutations may be "
            "equivalent to the original code.",
            "",
        ]
    missing = [n for n in registry if n not in {r.name for r in results}]
    if missing:
        lines += [f"Registered but not in the last run: {', '.join(f'`{n}`' for n in missing)}.", ""]
    when = run.get("date", "?")
    lines += [
        "## How the check was run",
        "",
        f"Last run {when}, commit {run.get('commit') or 'unknown'}, profile {run.get('profile', 'quick')}, "
        f"{run.get('jobs', 1)} chapter(s) at a time on {run.get('cores', '?')} cores, "
        f"{run.get('wall_s', 0) / 60:.0f} min in all"
        + (f"; only the chapters {', '.join(run['chapters'])} were run." if run.get("chapters") else "."),
        "",
    ]
    return "\n".join(lines) + "\n"


def write_page(executed: Path, results_path: Path | None = None) -> Path:
    """Write ``executed/mutations.md`` from ``results_path`` (default ``<root>/book/mutations.json``)."""
    executed = Path(executed)
    executed.mkdir(parents=True, exist_ok=True)
    results_path = executed.parent / "book" / "mutations.json" if results_path is None else Path(results_path)
    path = executed / PAGE
    text = mutations_markdown(results_path)
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path
