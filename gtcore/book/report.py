"""The reproducibility report: the executed chapters' claims, grouped by the paper's statements.

A statement of the paper counts as *reproduced* when at least one claim of kind ``"reproduces"``
checks it and every claim that names it passed; *not reproduced* when a claim of kind
``"not_reproduced"`` records that a test of it, under a criterion fixed before the run, came out against
it (this takes precedence over reproductions of parts of it); *consistency checks only* when all its claims are
self-consistency checks; *not reproducible here* when the registry says so (with the reason);
*not checked* when no executed chapter names it. The headline counts statements, not claims.
The page ends with how the chapters were made: profile, seed, ``--set`` overrides, run time, the
commit and the environment (Python, key packages, CPU/GPU), read from each executed notebook's
``gtbook`` metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gtcore.book.claims import claims_in_notebook
from gtcore.book.files import atomic_write_text
from gtcore.book.statements import Statement, load_statements


class ReportError(ValueError):
    """An executed notebook cannot be read; the message names the file and how to recover."""


#: the status of a statement in the report (see the module docstring)
STATUSES = ("reproduced", "not reproduced", "failed", "consistency checks only", "not reproducible here",
            "not checked")


@dataclass
class ClaimRow:
    """One claim read back from an executed chapter."""

    chapter: str
    name: str
    statement: str
    kind: str
    value: Any
    threshold: str
    passed: bool
    profile: str
    seed: Any
    overrides: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StatementStatus:
    """A statement of the registry with the claims that name it."""

    statement: Statement
    claims: list[ClaimRow] = field(default_factory=list)

    @property
    def status(self) -> str:
        """One of :data:`STATUSES` (see the module docstring)."""
        if not self.statement.reproducible_here and not self.claims:
            return "not reproducible here"
        if not self.claims:
            return "not checked"
        if not all(c.passed for c in self.claims):
            return "failed"
        if any(c.kind == "not_reproduced" for c in self.claims):
            return "not reproduced"
        if any(c.kind == "reproduces" for c in self.claims):
            return "reproduced"
        return "consistency checks only"


def executed_notebooks(executed: Path, names: list[str] | None = None) -> list[Path]:
    """The executed chapters ``executed/NN_*.ipynb`` (those in ``names`` if given), in order."""
    paths = sorted(Path(executed).glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not names or p.stem in names]



def read_executed(path: Path):
    """An executed notebook, or :class:`ReportError` naming the file when it is not readable."""
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - NotJSONError, a JSON error, a validation error, a truncated file
        raise ReportError(f"{path}: not a readable notebook ({type(exc).__name__}); rerun it with "
                          f"`gtbook run --only {Path(path).stem} --force`, or delete it") from None


def collect_claims(executed: Path, names: list[str] | None = None) -> list[ClaimRow]:
    """Every claim recorded in the executed chapters under ``executed``, with chapter, profile, seed
    and ``--set`` overrides. Raises :class:`ReportError` for an unreadable notebook."""
    rows = []
    for path in executed_notebooks(executed, names):
        nb = read_executed(path)
        meta = nb.metadata.get("gtbook", {})
        for rec in claims_in_notebook(nb):
            rows.append(ClaimRow(
                chapter=path.stem,
                name=rec["name"],
                statement=rec.get("statement", ""),
                kind=rec.get("kind", ""),
                value=rec.get("value"),
                threshold=rec.get("threshold", ""),
                passed=bool(rec.get("passed")),
                profile=meta.get("profile", "unknown"),
                seed=meta.get("parameters", {}).get("seed"),
                overrides=dict(meta.get("overrides", {})),
            ))
    return rows


def chapter_metadata(executed: Path) -> dict[str, dict[str, Any]]:
    """``{chapter: its gtbook metadata}`` of the executed chapters."""
    return {p.stem: dict(read_executed(p).metadata.get("gtbook", {})) for p in executed_notebooks(executed)}


def overrides_text(overrides: dict[str, Any]) -> str:
    """``--set`` overrides as ``name=value`` pairs (empty when none)."""
    import json

    return " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in overrides.items())


def statement_statuses(rows: list[ClaimRow]) -> list[StatementStatus]:
    """Each registered statement with its claims, in registry order."""
    statuses = {sid: StatementStatus(st) for sid, st in load_statements().items()}
    for r in rows:
        if r.statement in statuses:
            statuses[r.statement].claims.append(r)
    return list(statuses.values())


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return f"{v:.4g}"


def claims_table(rows: list[ClaimRow]) -> str:
    """A plain-text table of the claims (``gtbook claims``)."""
    head = ["chapter", "claim", "statement", "kind", "value", "threshold", "passed", "profile", "seed",
            "--set"]
    body = [[r.chapter, r.name, r.statement, r.kind, _fmt_value(r.value), r.threshold,
             "PASS" if r.passed else "FAIL", r.profile, str(r.seed), overrides_text(r.overrides) or "-"]
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def _esc(x: Any) -> str:
    return str(x).replace("|", "\\|")


def _claim_lines(claims: list[ClaimRow]) -> list[str]:
    lines = ["| chapter | claim | kind | value | criterion | result |", "|---|---|---|---|---|---|"]
    for r in claims:
        lines.append(f"| {_esc(r.chapter)} | `{_esc(r.name)}` | {r.kind} | {_esc(_fmt_value(r.value))} | "
                     f"{_esc(r.threshold)} | {'✔ PASS' if r.passed else '✘ FAIL'} |")
    return lines


def report_markdown(executed: Path) -> str:
    """The report page's MyST markdown (see the module docstring for the statuses)."""
    rows = collect_claims(executed)
    metas = chapter_metadata(executed)
    statuses = statement_statuses(rows)
    paper = [s for s in statuses if s.statement.scope == "paper"]
    beyond = [s for s in statuses if s.statement.scope == "beyond"]
    n_repro = sum(s.status == "reproduced" for s in paper)
    n_not = sum(s.status == "not reproduced" for s in paper)
    n_out = sum(not s.statement.reproducible_here for s in paper)
    unregistered = sorted({r.statement for r in rows} - {s.statement.id for s in statuses})
    lines = [
        "# Reproducibility report",
        "",
        "Generated by `gtbook` from the executed chapters. Each statement of the paper (arXiv:2606.07600) "
        "is listed with the claims that check it. A claim is one of five kinds: **reproduces** (a number "
        "the statement predicts that could come out otherwise), **not_reproduced** (a test of the statement, "
        "under a criterion fixed before the run, that came out against it, recorded as observed), "
        "**derivation** (a closed form derived from the statement agrees with a direct integration), "
        "**consistency** (the code agrees with "
        "itself or with a closed form) and **control** (the same statistic detects a departure where one "
        "exists). A statement counts as reproduced when a claim of kind *reproduces* checks it and all "
        "its claims pass, and as not reproduced when a claim of kind *not_reproduced* names it; a failing "
        "claim stops the build, so a rendered book shows only passing claims.",
        "",
        f"**{n_repro} of {len(paper)} statements of the paper reproduced"
        + (f"; {n_not} not reproduced" if n_not else "")
        + (f"; {n_out} not reproducible here" if n_out else "") + ".** "
        f"{len(rows)} claims in all: {sum(r.kind == 'reproduces' for r in rows)} reproductions, "
        + (f"{sum(r.kind == 'not_reproduced' for r in rows)} non-reproductions, "
           if any(r.kind == 'not_reproduced' for r in rows) else "")
        + f"{sum(r.kind == 'control' for r in rows)} controls, {sum(r.kind == 'consistency' for r in rows)} "
        "consistency checks.",
        "",
    ]
    for chap in sorted(p.stem for p in (Path(executed) / "failed").glob("[0-9][0-9]_*.ipynb")):
        lines += [f"**Warning:** the latest run of `{chap}` failed (its notebook is in `executed/failed/`); "
                  "this book shows that chapter's last good output.", ""]
    for heading, group in (("Statements of the paper", paper), ("Beyond the paper", beyond)):
        lines += [f"## {heading}", "", "| statement | where | status |", "|---|---|---|"]
        lines += [f"| {_esc(s.statement.title)} | {_esc(s.statement.where)} | {s.status} |" for s in group]
        lines.append("")
        for s in group:
            st = s.statement
            lines += [f"### {st.title}", "", f"*{st.paraphrase}* ({st.where}.) **Status: {s.status}.**", ""]
            if st.reason:
                lines += [f"Not reproducible here: {st.reason}", ""]
            if st.note:
                lines += [st.note, ""]
            shown = [c for c in s.claims if c.kind in ("reproduces", "not_reproduced", "control")]
            if shown:
                lines += [*_claim_lines(shown), ""]
    consistency = [r for r in rows if r.kind == "consistency"]
    lines += ["## Consistency checks", "",
              "These check the code against itself or a closed form; they support the reproductions above "
              "but are not reproductions.", ""]
    lines += (_claim_lines(consistency) if consistency else ["None."]) + [""]
    if unregistered:
        lines += [f"**Warning:** claims name statements missing from the registry: {', '.join(unregistered)}.", ""]
    lines += ["## Chapters", "", "| chapter | profile | seed | `--set` | run time (s) | claims |",
              "|---|---|---|---|---|---|"]
    for chap, meta in metas.items():
        mine = [r for r in rows if r.chapter == chap]
        seed = meta.get("parameters", {}).get("seed", "")
        sets = overrides_text(meta.get("overrides", {}))
        lines.append(f"| {chap} | {meta.get('profile', 'unknown')} | {seed} | {_esc(sets) or '-'} | "
                     f"{meta.get('runtime_s', float('nan')):.1f} | {len(mine)} |")
    lines += ["", *_environment_lines(metas)]
    return "\n".join(lines) + "\n"


def _commit(git: dict[str, Any]) -> str:
    if not git or not git.get("commit"):
        return "not a git checkout"
    return f"`{git['commit'][:10]}`" + (" (uncommitted changes)" if git.get("dirty") else "")


def _environment_lines(metas: dict[str, dict[str, Any]]) -> list[str]:
    """The commit(s) and environment(s) the chapters were run in (one table when all agree)."""
    lines = ["## How these chapters were made", ""]
    if not metas:
        return [*lines, "No executed chapters.", ""]
    commits: dict[str, list[str]] = {}
    for chap, meta in metas.items():
        commits.setdefault(_commit(meta.get("git", {})), []).append(chap)
    if len(commits) == 1:
        lines += [f"**Commit:** {next(iter(commits))} (every chapter).", ""]
    else:
        lines += ["**Commits:** " + "; ".join(f"{c}: {', '.join(ch)}" for c, ch in commits.items()), ""]
    envs: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for chap, meta in metas.items():
        env = meta.get("environment")
        if env:
            envs.setdefault(repr(sorted(env.items(), key=str)), (env, []))[1].append(chap)
    if not envs:
        return [*lines, "The executed chapters record no environment (run by an older gtbook).", ""]
    for env, chaps in envs.values():
        if len(envs) > 1:
            lines += [f"**Environment of {', '.join(chaps)}:**", ""]
        pk = env.get("packages", {})
        lines += ["| | |", "|---|---|",
                  f"| Python | {env.get('python', '?')} |",
                  *(f"| {_esc(name)} | {_esc(version)} |" for name, version in pk.items()),
                  f"| OS | {_esc(env.get('os', '?'))} |",
                  f"| CPU | {_esc(env.get('cpu', '?'))} ({env.get('cores', '?')} cores) |",
                  f"| GPU | {_esc(env.get('gpu', 'none'))} |", ""]
    return lines


def write_report(executed: Path) -> Path:
    """Write ``executed/report.md`` (the "Reproducibility report" page) and return its path."""
    executed = Path(executed)
    executed.mkdir(parents=True, exist_ok=True)
    path = executed / "report.md"
    text = report_markdown(executed)
    if not path.exists() or path.read_text() != text:  # unchanged: keep it, so the build stays fresh
        atomic_write_text(path, text)  # a kill mid-write never leaves half a report
    return path
