"""The reproducibility report: the executed chapters' claims, grouped by the paper's statements.

A statement of the paper counts as *reproduced* when at least one claim of kind ``"reproduces"``
checks it and every claim that names it passed; *consistency checks only* when all its claims are
self-consistency checks; *not reproducible here* when the registry says so (with the reason);
*not checked* when no executed chapter names it. The headline counts statements, not claims.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .claims import claims_in_notebook
from .statements import Statement, load_statements

STATUSES = ("reproduced", "failed", "consistency checks only", "not reproducible here", "not checked")


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
        if any(c.kind == "reproduces" for c in self.claims):
            return "reproduced"
        return "consistency checks only"


def _executed_notebooks(executed: Path, names: list[str] | None = None) -> list[Path]:
    paths = sorted(Path(executed).glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not names or p.stem in names]


def collect_claims(executed: Path, names: list[str] | None = None) -> list[ClaimRow]:
    """Every claim recorded in the executed chapters under ``executed``, with chapter, profile and seed."""
    import nbformat

    rows = []
    for path in _executed_notebooks(executed, names):
        nb = nbformat.read(path, as_version=4)
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
            ))
    return rows


def chapter_runtimes(executed: Path) -> dict[str, tuple[str, float]]:
    """``{chapter: (profile, run time in s)}`` of the executed chapters."""
    import nbformat

    out = {}
    for path in _executed_notebooks(executed):
        meta = nbformat.read(path, as_version=4).metadata.get("gtbook", {})
        out[path.stem] = (meta.get("profile", "unknown"), meta.get("runtime_s", float("nan")))
    return out


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
    head = ["chapter", "claim", "statement", "kind", "value", "threshold", "passed", "profile", "seed"]
    body = [[r.chapter, r.name, r.statement, r.kind, _fmt_value(r.value), r.threshold,
             "PASS" if r.passed else "FAIL", r.profile, str(r.seed)] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
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
    runtimes = chapter_runtimes(executed)
    statuses = statement_statuses(rows)
    paper = [s for s in statuses if s.statement.scope == "paper"]
    beyond = [s for s in statuses if s.statement.scope == "beyond"]
    n_repro = sum(s.status == "reproduced" for s in paper)
    n_out = sum(not s.statement.reproducible_here for s in paper)
    unregistered = sorted({r.statement for r in rows} - {s.statement.id for s in statuses})
    lines = [
        "# Reproducibility report",
        "",
        "Generated by `gtbook` from the executed chapters. Each statement of the paper (arXiv:2606.07600) "
        "is listed with the claims that check it. A claim is one of three kinds: **reproduces** (a number "
        "the statement predicts that could come out otherwise), **consistency** (the code agrees with "
        "itself or with a closed form) and **control** (the same statistic detects a departure where one "
        "exists). A statement counts as reproduced when a claim of kind *reproduces* checks it and all "
        "its claims pass; a failing claim stops the build, so a rendered book shows only passing claims.",
        "",
        f"**{n_repro} of {len(paper)} statements of the paper reproduced"
        + (f"; {n_out} not reproducible here" if n_out else "") + ".** "
        f"{len(rows)} claims in all: {sum(r.kind == 'reproduces' for r in rows)} reproductions, "
        f"{sum(r.kind == 'control' for r in rows)} controls, {sum(r.kind == 'consistency' for r in rows)} "
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
            shown = [c for c in s.claims if c.kind in ("reproduces", "control")]
            if shown:
                lines += _claim_lines(shown) + [""]
    consistency = [r for r in rows if r.kind == "consistency"]
    lines += ["## Consistency checks", "",
              "These check the code against itself or a closed form; they support the reproductions above "
              "but are not reproductions.", ""]
    lines += (_claim_lines(consistency) if consistency else ["None."]) + [""]
    if unregistered:
        lines += [f"**Warning:** claims name statements missing from the registry: {', '.join(unregistered)}.", ""]
    lines += ["## Chapters", "", "| chapter | profile | seed | run time (s) | claims |", "|---|---|---|---|---|"]
    for chap, (profile, seconds) in runtimes.items():
        mine = [r for r in rows if r.chapter == chap]
        seed = mine[0].seed if mine else ""
        lines.append(f"| {chap} | {profile} | {seed} | {seconds:.1f} | {len(mine)} |")
    return "\n".join(lines) + "\n"


def write_report(executed: Path) -> Path:
    """Write ``executed/report.md`` (the "Reproducibility report" page) and return its path."""
    executed = Path(executed)
    executed.mkdir(parents=True, exist_ok=True)
    path = executed / "report.md"
    path.write_text(report_markdown(executed))
    return path
