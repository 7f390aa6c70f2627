r"""The one place where a statement's status is decided and worded: the report, the paper map, the intro's
list and every chapter's opening all come from :func:`statement_statuses` and :meth:`StatementStatus.text`.

A statement's :class:`Evidence` comes from the kinds and the scopes (:mod:`gtbook.scope`) of the claims that
name it, every one of which must pass:

* **reproduced**: a passing ``reproduces`` claim covers the scope the statement is stated for (its
  ``[id.stated]`` table: general A, B, V at d >= 3 unless it says otherwise);
* **reproduced in part**: ``reproduces`` claims exist, none covers the stated scope; the text names the
  widest scopes they reach ("reproduced for V = vI, d ≤ 3");
* **not reproduced**: a ``not_reproduced`` claim records that a test of it, under a criterion fixed
  before the run, came out against it; the text names where ("not reproduced for general V"), and where it
  was reproduced, if anywhere;
* **derived only**, **consistency only**: no reproduction; its strongest evidence is a derivation (a
  closed form against the integrator), or consistency checks and controls;
* **failed**: a claim that names it failed; **not reproducible here** (the registry says why) and **not
  checked** when no claim names it.

``instrument`` claims (checks of the book's own statistics) name no statement and count for none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gtbook.scope import Scope, StatedScope, covers, describe, parse_scope, widest
from gtbook.statements import Statement, load_statements
from gtcore.status import Vocabulary

__all__ = [
    "Evidence",
    "StatementStatus",
    "chapter_opening_markdown",
    "statement_status",
    "statement_statuses",
    "status_list_markdown",
]


class Evidence(Vocabulary):
    """What the evidence for a statement is (see the module docstring)."""

    REPRODUCED = "reproduced"
    REPRODUCED_IN_PART = "reproduced in part"
    NOT_REPRODUCED = "not reproduced"
    DERIVED = "derived only"
    CONSISTENCY = "consistency only"
    NOT_REPRODUCIBLE = "not reproducible here"
    FAILED = "failed"
    NOT_CHECKED = "not checked"


STATUSES = tuple(s.value for s in Evidence)


class ClaimLike(Protocol):
    """What a status needs of a claim (the report's ``ClaimRow``)."""

    chapter: str
    name: str
    statement: str
    kind: str
    passed: bool
    scope: dict[str, Any] | None


def claim_scope(claim: ClaimLike) -> Scope | None:
    """A claim's recorded scope, or None when it recorded none (or one this version cannot read)."""
    if not claim.scope:
        return None
    try:
        return parse_scope(claim.scope)
    except (ValueError, TypeError):
        return None


def _reach(claims: Sequence[ClaimLike], stated: StatedScope) -> tuple[bool, list[str]]:
    """Whether one claim covers ``stated``, and the widest scopes reached, worded (empty when covered)."""
    scopes = [claim_scope(c) for c in claims]
    known = [s for s in scopes if s is not None]
    if any(covers(s, stated) for s in known):
        return True, []
    words = [describe(s, stated) for s in widest(known)]
    if len(known) < len(scopes):
        words.append("scope not recorded")
    return False, list(dict.fromkeys(w for w in words if w))


@dataclass
class StatementStatus:
    """A statement of the registry with the claims that name it, its :class:`Evidence` and its wording."""

    statement: Statement
    claims: list[Any] = field(default_factory=list)

    @property
    def status(self) -> Evidence:
        """The statement's :class:`Evidence` (:func:`statement_status`)."""
        return statement_status(self.statement, self.claims)

    @property
    def text(self) -> str:
        """The status with its scope, in a few words: ``"reproduced for V = vI, d ≤ 3"``."""
        return status_text(self.statement, self.claims)

    @property
    def chapters(self) -> list[str]:
        """The chapters whose claims name it, in order of appearance."""
        return list(dict.fromkeys(c.chapter for c in self.claims))


def statement_status(statement: Statement, claims: Sequence[ClaimLike]) -> Evidence:
    """The :class:`Evidence` of ``statement`` given the claims that name it (see the module docstring)."""
    claims = [c for c in claims if c.kind != "instrument"]
    if not claims:
        return Evidence.NOT_CHECKED if statement.reproducible_here else Evidence.NOT_REPRODUCIBLE
    if not all(c.passed for c in claims):
        return Evidence.FAILED
    kinds = {c.kind for c in claims}
    if "not_reproduced" in kinds:
        return Evidence.NOT_REPRODUCED
    if "reproduces" in kinds:
        covered, _ = _reach([c for c in claims if c.kind == "reproduces"], statement.stated)
        return Evidence.REPRODUCED if covered else Evidence.REPRODUCED_IN_PART
    if "derivation" in kinds:
        return Evidence.DERIVED
    return Evidence.CONSISTENCY


def status_text(statement: Statement, claims: Sequence[ClaimLike]) -> str:
    """The status worded with its scope (see :class:`StatementStatus`)."""
    status = statement_status(statement, claims)
    reproduced = [c for c in claims if c.kind == "reproduces"]
    if status is Evidence.REPRODUCED_IN_PART:
        return "reproduced for " + "; ".join(_reach(reproduced, statement.stated)[1])
    if status is Evidence.NOT_REPRODUCED:
        against = [c for c in claims if c.kind == "not_reproduced"]
        covered, where = _reach(against, statement.stated)
        text = "not reproduced" + ("" if covered else " for " + "; ".join(where))
        if reproduced:
            covered_r, where_r = _reach(reproduced, statement.stated)
            text += "; reproduced " + ("elsewhere in its scope" if covered_r else "for " + "; ".join(where_r))
        return text
    return status.value


def statement_statuses(rows: Iterable[ClaimLike]) -> list[StatementStatus]:
    """Each registered statement with its claims, in registry order."""
    statuses = {sid: StatementStatus(st) for sid, st in load_statements().items()}
    for r in rows:
        if r.statement in statuses:
            statuses[r.statement].claims.append(r)
    return list(statuses.values())


# ------------------------------------------------------------------------- wording for pages
def _doc(chapter: str, prefix: str = "") -> str:
    return f"{{doc}}`{chapter[:2].lstrip('0')} <{prefix}{chapter}>`" if chapter[:2].isdigit() else chapter


def status_list_markdown(
    statuses: Sequence[StatementStatus], *, origin: str = "paper", prefix: str = "/executed/"
) -> str:
    """A Markdown list of the statements of one origin (``"paper"`` or ``"beyond"``): title, status with
    its scope, the chapters that test it (the intro's list; ``prefix`` places the chapter links)."""
    lines = []
    for s in statuses:
        if s.statement.origin != origin:
            continue
        where = ", ".join(_doc(c, prefix) for c in s.chapters)
        word = "chapters" if len(s.chapters) > 1 else "chapter"
        lines.append(f"- **{s.statement.title}**: {s.text}" + (f" ({word} {where})" if where else "") + ".")
    return "\n".join(lines) + "\n"


def chapter_opening_markdown(
    chapter: str, statuses: Sequence[StatementStatus], *, figure: str | None = None, summary: str | None = None
) -> str:
    """A chapter's opening: the statements its claims name, each with its status and scope (this chapter's
    share of the claims, and the book's verdict), then the figure that carries the result and the chapter's
    own two sentences, when given."""
    mine = [s for s in statuses if chapter in s.chapters]
    lines = [":::{admonition} What this chapter found", ":class: tip gtbook-verdict", ""]
    if not mine:
        lines += ["This chapter checks no statement with a claim.", ""]
    for s in mine:
        here = [c for c in s.claims if c.chapter == chapter]
        kinds: dict[str, int] = {}
        for c in here:
            kinds[c.kind] = kinds.get(c.kind, 0) + 1
        counted = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in kinds.items())
        lines.append(f"- **{s.statement.title}**: {s.text} ({counted} here).")
    if summary:
        lines += ["", summary]
    if figure:
        lines += ["", f"Its main figure is {{numref}}`{figure}`."]
    lines += [
        "",
        "Each status comes from the claims of every chapter "
        "({doc}`reproducibility report </executed/report>`); a claim's scope is the system and the "
        "parameters it covers.",
        ":::",
    ]
    return "\n".join(lines) + "\n"
