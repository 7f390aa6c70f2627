"""The reproducibility report: the executed chapters' claims, grouped by the paper's statements.

Each statement gets a :class:`Evidence` from the kinds of the claims that name it
(:func:`statement_status`): *reproduced* when at least one claim of kind ``"reproduces"`` checks it and
every claim that names it passed; *not reproduced* when a claim of kind ``"not_reproduced"`` records that
a test of it, under a criterion fixed before the run, came out against it (this takes precedence over
reproductions of parts of it); *derived only* when it has no reproduction but at least one passing
``"derivation"`` (a closed form against the integrator); *consistency only* when its claims are
consistency checks and controls; *failed* when one of its claims failed; *not reproducible here* when
the registry says so (with the reason) and no claim names it; *not checked* when no executed chapter
names it. The headline (``headline_lines``) counts statements by status, not claims, and
summarises the last mutation check (``book/mutations.json``, :mod:`gtbook.mutations`).
The page ends with how the chapters were made: profile, seed, ``--set`` overrides, run time, the
commit and the environment (Python, key packages, CPU/GPU), read from each executed notebook's
``gtbook`` metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gtbook.claims import KINDS, claims_in_notebook
from gtbook.files import atomic_write_text
from gtbook.verdicts import STATUSES, Evidence, StatementStatus, claim_scope, statement_status, statement_statuses

__all__ = [
    "STATUSES",
    "ClaimRow",
    "Evidence",
    "ReportError",
    "StatementStatus",
    "collect_claims",
    "report_markdown",
    "statement_status",
    "statement_statuses",
    "write_report",
]


class ReportError(ValueError):
    """An executed notebook cannot be read; the message names the file and how to recover."""


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
    #: the bounds the criterion puts on the value, as numbers (None: unbounded on that side)
    lower: float | None = None
    upper: float | None = None
    #: what the notebook recorded as the result (``passed`` is evaluated again from value and criterion)
    recorded_passed: bool | None = None
    #: what the claim covers, as recorded (:meth:`gtbook.scope.Scope.as_dict`); None when not recorded
    scope: dict[str, Any] | None = None

    @property
    def edited(self) -> bool:
        """The recorded result disagrees with the one evaluated again: the notebook was edited."""
        return self.recorded_passed is not None and self.recorded_passed != self.passed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def orphan_notebooks(executed: Path) -> list[Path]:
    """Executed chapters whose source is gone (``executed/NN_x.ipynb`` without ``notebooks/NN_x.py`` beside
    the ``executed/`` folder, e.g. after a chapter was renamed); none when there is no ``notebooks/`` folder
    (an executed folder on its own)."""
    sources = Path(executed).parent / "notebooks"
    if not sources.is_dir():
        return []
    return [p for p in sorted(Path(executed).glob("[0-9][0-9]_*.ipynb")) if not (sources / f"{p.stem}.py").exists()]


def executed_notebooks(executed: Path, names: list[str] | None = None) -> list[Path]:
    """The executed chapters ``executed/NN_*.ipynb`` (those in ``names`` if given), in order; orphans
    (:func:`orphan_notebooks`) are left out unless named."""
    paths = sorted(Path(executed).glob("[0-9][0-9]_*.ipynb"))
    if names:
        return [p for p in paths if p.stem in names]
    orphans = set(orphan_notebooks(executed))
    return [p for p in paths if p not in orphans]


def read_executed(path: Path) -> dict[str, Any]:
    """An executed notebook as its JSON (a v4 notebook: cells and metadata), or :class:`ReportError`
    naming the file when it is not readable. Read as JSON, without nbformat's schema validation, which
    costs seconds on the book's large notebooks (``gtbook claims`` reads them all)."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            nb = json.load(fh)
        if not (
            isinstance(nb, dict)
            and isinstance(nb.get("cells"), list)
            and isinstance(nb.get("metadata", {}), dict)
            and int(nb.get("nbformat", 0)) >= 4
        ):
            raise ValueError("not a version-4 notebook")
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as exc:  # a JSON error, a truncated file
        raise ReportError(
            f"{path}: not a readable notebook ({type(exc).__name__}); rerun it with "
            f"`gtbook run --only {Path(path).stem} --force`, or delete it"
        ) from None
    return nb


def _gtbook_meta(nb: dict[str, Any]) -> dict[str, Any]:
    meta = (nb.get("metadata") or {}).get("gtbook")
    return dict(meta) if isinstance(meta, dict) else {}


def collect_claims(executed: Path, names: list[str] | None = None) -> list[ClaimRow]:
    """Every claim recorded in the executed chapters under ``executed``, with chapter, profile, seed
    and ``--set`` overrides. Raises :class:`ReportError` for an unreadable notebook."""
    rows = []
    for path in executed_notebooks(executed, names):
        nb = read_executed(path)
        meta = _gtbook_meta(nb)
        for rec in claims_in_notebook(nb):
            rows.append(_claim_row(path.stem, rec, meta))
    return rows


def _claim_row(chapter: str, rec: dict[str, Any], meta: dict[str, Any]) -> ClaimRow:
    """One claim record as a row, its result evaluated again from its value and criterion."""
    from gtbook import verify

    again = verify.recheck(rec)
    lower, upper = verify.bounds(rec)
    params = meta.get("parameters")
    params = params if isinstance(params, dict) else {}
    overrides = meta.get("overrides")
    overrides = overrides if isinstance(overrides, dict) else {}
    return ClaimRow(
        chapter=chapter,
        name=str(rec.get("name", "?")),
        statement=str(rec.get("statement") or ""),
        kind=str(rec.get("kind", "")),
        value=rec.get("value"),
        threshold=str(rec.get("threshold", "")),
        passed=bool(again),  # None (no criterion to evaluate) is not a pass
        profile=str(meta.get("profile", "unknown")),
        seed=params.get("seed"),
        overrides=dict(overrides),
        lower=lower,
        upper=upper,
        recorded_passed=rec.get("passed") if isinstance(rec.get("passed"), bool) else None,
        scope=rec.get("scope") if isinstance(rec.get("scope"), dict) else None,
    )


def chapter_metadata(executed: Path) -> dict[str, dict[str, Any]]:
    """``{chapter: its gtbook metadata}`` of the executed chapters."""
    return {p.stem: _gtbook_meta(read_executed(p)) for p in executed_notebooks(executed)}


def overrides_text(overrides: dict[str, Any]) -> str:
    """``--set`` overrides as ``name=value`` pairs (empty when none)."""
    import json

    return " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in overrides.items())


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return f"{v:.4g}"


def claims_table(rows: list[ClaimRow], *, wide: bool = False) -> str:
    """A plain-text table of the claims (``gtbook claims``): chapter, claim, kind, value and result;
    ``wide`` adds the statement, the criterion, the profile, the seed and the ``--set`` values."""
    head = ["chapter", "claim", "kind", "value", "result"]
    if wide:
        head += ["statement", "criterion", "profile", "seed", "--set"]
    body = []
    for r in rows:
        line = [r.chapter, r.name, r.kind, _fmt_value(r.value), _result_word(r)]
        if wide:
            line += [r.statement, r.threshold, r.profile, str(r.seed), overrides_text(r.overrides) or "-"]
        body.append(line)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return "\n".join(lines)


def _result_word(r: ClaimRow) -> str:
    return ("PASS" if r.passed else "FAIL") + (" (edited)" if r.edited else "")


def claims_summary(rows: list[ClaimRow], *, shown: int | None = None) -> str:
    """One line: how many claims, in how many chapters, how many pass and fail (and how many shown)."""
    n_pass = sum(r.passed for r in rows)
    chapters = len({r.chapter for r in rows})
    line = (
        f"{len(rows)} claims in {chapters} chapter{'s' if chapters != 1 else ''}: {n_pass} pass, "
        f"{len(rows) - n_pass} fail"
    )
    edited = sum(r.edited for r in rows)
    if edited:
        line += f" ({edited} whose recorded result disagrees with its value: the notebook was edited)"
    if shown is not None and shown != len(rows):
        line += f"; {shown} shown"
    return line


def _esc(x: Any) -> str:
    return str(x).replace("|", "\\|")


# ---------------------------------------------------------------- rendering (layout, escaping)
_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def plain(text: Any) -> str:
    """``text`` as Markdown that shows it literally: every ASCII punctuation mark backslash-escaped,
    so no value becomes markup, a MyST role or raw HTML (``<img onerror=...>`` shows as text)."""
    return "".join("\\" + c if c in _PUNCTUATION else c for c in " ".join(str(text).splitlines()))


def _code_cell(text: Any) -> str:
    """A value in a table cell: a code span (shown literally), its pipes escaped for the table."""
    from gtbook.provenance import code_span

    return code_span(text).replace("|", "\\|")


def _result_cell(r: ClaimRow) -> str:
    word = "✔ PASS" if r.passed else "✘ FAIL"
    return word + (" (edited: recorded " + ("PASS" if r.recorded_passed else "FAIL") + ")" if r.edited else "")


def scope_text(r: ClaimRow) -> str:
    """A claim's scope in one line (``"not recorded"`` when the chapter gave none)."""

    sc = claim_scope(r)
    return sc.text() if sc is not None else "not recorded"


def _claim_table(claims: list[ClaimRow]) -> list[str]:
    """Claims of one chapter: claim, kind, scope, value, criterion, result."""
    lines = ["| claim | kind | scope | value | criterion | result |", "|---|---|---|---|---|---|"]
    for r in claims:
        lines.append(
            f"| {_code_cell(r.name)} | {plain(r.kind)} | {plain(scope_text(r))} | "
            f"{_code_cell(_fmt_value(r.value))} | {_code_cell(r.threshold)} | {_result_cell(r)} |"
        )
    return lines


def kinds_paragraph() -> str:
    """The report's opening paragraph: what the page lists, the six kinds of claims, scopes and the statuses."""
    return (
        "Generated by `gtbook` from the executed chapters. Each statement of the paper (arXiv:2606.07600) "
        "is listed with the claims that check it. A claim is one of six kinds: **reproduces** (an "
        "independent system, such as finite-N softmax tokens or real Transformer code, shows what the "
        "statement predicts, and could have come out otherwise), **not_reproduced** (a test of the "
        "statement, under a criterion fixed before the run, that came out against it, recorded as "
        "observed), **derivation** (a closed form derived from "
        "the statement agrees with a direct integration of the moment ODE: it checks the mathematics, not "
        "the model), **consistency** (the code agrees with itself), **control** (the same statistic "
        "detects a departure where one exists) and **instrument** (a check of the book's own statistics, "
        "which counts for no statement). Every claim records its **scope**: the system that produced it "
        "and the parameters it covers (d; A, B and V as zero, scalar, normal or symmetric, or general; heads; "
        "attention type). A statement is *reproduced* when a passing *reproduces* claim covers the scope "
        'the statement is stated for, *reproduced in part* ("reproduced for V = vI, d ≤ 3") when its '
        "reproductions reach less, *not reproduced* when a claim of kind *not_reproduced* names it (with "
        "where), *derived only* when its strongest evidence is a derivation, *consistency "
        "only* when it has consistency checks and controls alone; every claim must pass, and a failing "
        "claim stops the build, so a rendered book shows only passing claims. Every claim's result here is "
        "evaluated again from the value and the criterion its notebook records. Click a statement to see "
        "its claims, chapter by chapter."
    )


def _status_counts(group: list[StatementStatus]) -> dict[Evidence, int]:
    counts = {st: 0 for st in Evidence}
    for s in group:
        counts[s.status] += 1
    return counts


def _status_phrase(group: list[StatementStatus]) -> tuple[str, str]:
    """``("5 of 13", "4 derived only, ...")`` for a group of statements: the reproduced count and the rest."""
    counts = _status_counts(group)
    rest = [f"{counts[st]} {st.value}" for st in Evidence if st is not Evidence.REPRODUCED and counts[st]]
    return f"{counts[Evidence.REPRODUCED]} of {len(group)}", ", ".join(rest)


def headline_lines(
    paper: list[StatementStatus], beyond: list[StatementStatus], rows: list[ClaimRow], root: Path | None = None
) -> list[str]:
    """The headline: statements counted by :class:`Evidence`, claims by kind, and the last mutation check.

    ``root`` is the book's folder; its ``book/mutations.json`` (written by ``gtbook mutations``) gives the
    mutation sentence, which is left out when that file is absent.
    """
    n, rest = _status_phrase(paper)
    lines = [f"**{n} statements of the paper reproduced**" + (f"; {rest}." if rest else ".")]
    if beyond:
        n_b, rest_b = _status_phrase(beyond)
        lines[0] += f" Beyond the paper: {n_b} reproduced" + (f"; {rest_b}." if rest_b else ".")
    kinds = {k: sum(r.kind == k for r in rows) for k in KINDS}
    lines[0] += (
        f" {len(rows)} claims in all: {kinds['reproduces']} reproductions, "
        + (f"{kinds['not_reproduced']} non-reproductions, " if kinds["not_reproduced"] else "")
        + f"{kinds['derivation']} derivations, {kinds['consistency']} consistency checks, "
        f"{kinds['control']} controls, {kinds['instrument']} checks of the book's own statistics."
    )
    lines.append("")
    if root is not None:
        from gtbook.mutations.results import summary_sentence

        sentence = summary_sentence(Path(root) / "book" / "mutations.json")
        if sentence:
            lines += [sentence, ""]
    return lines


def _claim_lines(claims: list[ClaimRow]) -> list[str]:
    """The claims grouped by chapter: a line naming the chapter, then its table."""
    lines: list[str] = []
    for chapter in dict.fromkeys(r.chapter for r in claims):
        mine = [r for r in claims if r.chapter == chapter]
        lines += [f"**{_chapter_link(chapter)}** ({len(mine)} claim{'s' if len(mine) != 1 else ''})", ""]
        lines += [*_claim_table(mine), ""]
    return lines


def _chapter_link(chapter: str) -> str:
    if not chapter[:2].isdigit() or not all(c.isalnum() or c == "_" for c in chapter):
        return _code_cell(chapter)
    return f"{{doc}}`{chapter} <{chapter}>`"


def _dropdown(title: str, body: list[str], *, css: str = "gtbook-statement") -> list[str]:
    """A collapsible block (sphinx-design's dropdown) with ``title`` and Markdown ``body``."""
    return [f"::::{{dropdown}} {title}", f":class-container: {css}", "", *body, "::::", ""]


def _statement_detail(s: StatementStatus) -> list[str]:
    """A statement's collapsible detail: its paraphrase, status, reason, note and claims by chapter."""
    st = s.statement
    body = [
        f"*{st.paraphrase}* ({st.where}.) **Evidence: {plain(s.text)}.**",
        "",
        f"Stated for: {plain(st.stated.text())}.",
        "",
    ]
    if st.reason:
        body += [f"Not reproducible here: {st.reason}", ""]
    if st.note:
        body += [st.note, ""]
    shown = [c for c in s.claims if c.kind != "consistency"]
    if shown:
        body += _claim_lines(shown)
    n = len(s.claims)
    return _dropdown(f"{plain(st.title)} · {plain(s.text)} · {n} claim{'s' if n != 1 else ''}", body)


def _warnings(executed: Path, rows: list[ClaimRow], metas: dict[str, dict[str, Any]]) -> list[str]:
    """Failed latest runs, notebooks changed after their run, claims whose result was edited."""
    from gtbook import verify

    lines = []
    for chap in sorted(p.stem for p in (Path(executed) / "failed").glob("[0-9][0-9]_*.ipynb")):
        shown = (
            "this book shows that chapter's last good output"
            if (Path(executed) / f"{chap}.ipynb").exists()
            else "that chapter has no good output, and this book shows none of it"
        )
        lines += [
            f"**Warning:** the latest run of {_code_cell(chap)} failed (its notebook is in "
            f"`executed/failed/`); {shown}.",
            "",
        ]
    orphans = [p.stem for p in orphan_notebooks(executed)]
    if orphans:
        lines += [
            f"**Warning:** executed notebooks without a source (orphans, not counted here): "
            f"{', '.join(_code_cell(o) for o in orphans)}; `gtbook clean --orphans` removes them.",
            "",
        ]
    for path in executed_notebooks(executed):
        problem = verify.digest_problem(read_executed(path))
        if problem and path.stem in metas:
            lines += [
                f"**Warning:** {_code_cell(path.stem)}: {plain(problem)}; its claims below are evaluated "
                "again from what it holds now. Rerun it (`gtbook run`).",
                "",
            ]
    edited = [r for r in rows if r.edited]
    if edited:
        lines += [
            f"**Warning:** {len(edited)} claim(s) record a result their value and criterion do not give "
            "(the notebook was edited): "
            + ", ".join(_code_cell(f"{r.chapter}:{r.name}") for r in edited)
            + ". They are reported as evaluated again.",
            "",
        ]
    return lines


def _chapters_table(rows: list[ClaimRow], metas: dict[str, dict[str, Any]]) -> list[str]:
    from gtbook.provenance import seconds_text

    lines = [
        "## Chapters",
        "",
        "| chapter | profile | seed | `--set` | run time | claims |",
        "|---|---|---|---|---|---|",
    ]
    for chap, meta in metas.items():
        mine = [r for r in rows if r.chapter == chap]
        params = meta.get("parameters")
        params = params if isinstance(params, dict) else {}
        overrides = meta.get("overrides")
        sets = overrides_text(overrides if isinstance(overrides, dict) else {})
        lines.append(
            f"| {_chapter_link(chap)} | {_code_cell(meta.get('profile', 'unknown'))} | "
            f"{_code_cell(params.get('seed', ''))} | {_code_cell(sets) if sets else '-'} | "
            f"{seconds_text(meta.get('runtime_s'))} | {len(mine)} |"
        )
    return [*lines, ""]


def report_markdown(executed: Path) -> str:
    """The report page's MyST markdown (see the module docstring for the statuses)."""
    rows = collect_claims(executed)
    metas = chapter_metadata(executed)
    statuses = statement_statuses(rows)
    paper = [s for s in statuses if s.statement.origin == "paper"]
    beyond = [s for s in statuses if s.statement.origin == "beyond"]
    unregistered = sorted({r.statement for r in rows if r.kind != "instrument"} - {s.statement.id for s in statuses})
    lines = ["# Reproducibility report", "", kinds_paragraph(), ""]
    lines += headline_lines(paper, beyond, rows, Path(executed).parent)
    lines += _warnings(executed, rows, metas)
    for heading, group in (("Statements of the paper", paper), ("Beyond the paper", beyond)):
        lines += [f"## {heading}", "", "| statement | where | status |", "|---|---|---|"]
        lines += [f"| {_esc(s.statement.title)} | {_esc(s.statement.where)} | {_esc(s.text)} |" for s in group]
        lines.append("")
        for s in group:
            lines += _statement_detail(s)
    instruments = [r for r in rows if r.kind == "instrument"]
    lines += [
        "## Checks of the book's own statistics",
        "",
        "These check the book's instruments (a noise floor's calibration, a band's coverage, a test's "
        "size); they count for no statement.",
        "",
    ]
    lines += [*_claim_lines(instruments)] if instruments else ["None.", ""]
    consistency = [r for r in rows if r.kind == "consistency"]
    lines += [
        "## Consistency checks",
        "",
        "These check the code against itself; they support the reproductions and derivations above but are neither.",
        "",
    ]
    if consistency:
        for chapter in dict.fromkeys(r.chapter for r in consistency):
            mine = [r for r in consistency if r.chapter == chapter]
            lines += _dropdown(
                f"{plain(chapter)} · {len(mine)} check{'s' if len(mine) != 1 else ''}",
                [*_claim_table(mine), ""],
                css="gtbook-consistency",
            )
    else:
        lines += ["None.", ""]
    if unregistered:
        lines += [
            f"**Warning:** claims name statements missing from the registry: "
            f"{', '.join(_code_cell(u) for u in unregistered)}.",
            "",
        ]
    lines += _chapters_table(rows, metas)
    lines += _environment_lines(metas)
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
        lines += [
            "| | |",
            "|---|---|",
            f"| Python | {env.get('python', '?')} |",
            *(f"| {_esc(name)} | {_esc(version)} |" for name, version in pk.items()),
            f"| OS | {_esc(env.get('os', '?'))} |",
            f"| CPU | {_esc(env.get('cpu', '?'))} ({env.get('cores', '?')} cores) |",
            f"| GPU | {_esc(env.get('gpu', 'none'))} |",
            "",
        ]
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
