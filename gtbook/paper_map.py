r"""The paper map: one node per statement of the paper and per result beyond it, written by ``gtbook build``
as ``executed/paper_map.md`` from the statement registry and the executed chapters.

Each node gives the statement in this book's words and where the paper makes it; its status and the scope
it holds for (the one wording of :mod:`gtbook.verdicts`) and the scope it is stated for; its claims counted
by kind, chapter by chapter, with links; thumbnails of the figures that show it, each linking to the figure
on its page; and the ``gtcore`` functions its checks rest on, linked to the API reference.

**Which figures show a statement**: those drawn in the sections of the chapters where its claims are
recorded (the same section ids the gallery uses, :func:`gtbook.gallery.section_ids`): a claim is made
where the computation it checks is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import nbformat

from gtbook.claims import CLAIM_MIME
from gtbook.files import atomic_write_text
from gtbook.gallery import GalleryEntry, collect_entries, no_raw_html, section_ids, thumbnail_name
from gtbook.verdicts import StatementStatus, statement_statuses

__all__ = ["claim_sections", "paper_map_markdown", "write_paper_map"]

PAGE = "paper_map.md"
#: at most this many thumbnails per statement (the rest are in the gallery)
MAX_FIGURES = 4


def claim_sections(notebook: Path) -> dict[str, str]:
    """``{claim name: id of the section its cell lies in}`` for one executed chapter."""
    nb = nbformat.read(notebook, as_version=4)
    where = section_ids(nb.cells)
    out = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            rec = output.get("data", {}).get(CLAIM_MIME)
            if isinstance(rec, dict) and "name" in rec:
                out[str(rec["name"])] = (where[i] or ("", ""))[0]
    return out


def _figures(
    s: StatementStatus, sections: dict[str, dict[str, str]], entries: dict[str, list[GalleryEntry]]
) -> list[tuple[GalleryEntry, str]]:
    """The figures (with their thumbnail's file name) drawn in the sections where ``s``'s claims are made."""
    wanted = {(c.chapter, sections.get(c.chapter, {}).get(c.name)) for c in s.claims}
    out = []
    for chapter, found in entries.items():
        for k, e in enumerate(found, 1):
            if (chapter, e.anchor) in wanted:
                out.append((e, thumbnail_name(chapter, k)))
    return out[:MAX_FIGURES]


def _node(
    s: StatementStatus, sections: dict[str, dict[str, str]], entries: dict[str, list[GalleryEntry]], api: bool
) -> list[str]:
    st = s.statement
    origin = "beyond the paper" if st.origin == "beyond" else st.where
    lines = [
        f"### {no_raw_html(st.title)}",
        "",
        f"*{no_raw_html(st.paraphrase)}* ({no_raw_html(origin)}.)",
        "",
        f"- **Status:** {no_raw_html(s.text)}.",
        f"- **Stated for:** {no_raw_html(st.stated.text())}.",
    ]
    if st.reason:
        lines.append(f"- **Not reproducible here:** {no_raw_html(st.reason)}")
    by_chapter: dict[str, dict[str, int]] = {}
    for c in s.claims:
        by_chapter.setdefault(c.chapter, {}).setdefault(c.kind, 0)
        by_chapter[c.chapter][c.kind] += 1
    if by_chapter:
        parts = [
            f"{{doc}}`{ch} <{ch}>`: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in kinds.items())
            for ch, kinds in by_chapter.items()
        ]
        lines.append("- **Claims:** " + "; ".join(parts) + ".")
    else:
        lines.append("- **Claims:** none.")
    if st.rests_on:
        names = (f"{{py:obj}}`{name}`" if api else f"`{name}`" for name in st.rests_on)
        lines.append("- **Rests on:** " + ", ".join(names) + ".")
    figs = _figures(s, sections, entries)
    lines.append("")
    if figs:
        lines += ["::::{grid} 2 4 4 4", ":gutter: 2", ""]
        for e, image in figs:
            alt = " ".join((e.alt or f"figure in {e.chapter}").split())
            lines += [
                ":::{grid-item-card}",
                f":img-top: gallery/{image}",
                f":img-alt: {no_raw_html(alt)}",
                f":link: {e.href}",
                ":link-type: url",
                ":class-card: gtbook-map-card",
                "",
                f"{no_raw_html(e.section or e.chapter)}",
                ":::",
                "",
            ]
        lines += ["::::", ""]
    return lines


def paper_map_markdown(executed: Path, chapters: Sequence[str], *, api: bool = True) -> str:
    """The page's MyST markdown (the figures' thumbnails are the gallery's, written beside it); ``api``: link
    the library names to the API reference (a book without one shows them as code)."""
    from gtbook.report import collect_claims

    executed = Path(executed)
    statuses = statement_statuses(collect_claims(executed, list(chapters)))
    sections: dict[str, dict[str, str]] = {}
    entries: dict[str, list[GalleryEntry]] = {}
    for name in chapters:
        path = executed / f"{name}.ipynb"
        if path.exists():
            sections[name] = claim_sections(path)
            entries[name] = collect_entries(path)
    lines = [
        "# Paper map",
        "",
        "Every statement of the paper (arXiv:2606.07600), in this book's words, and every result the book "
        "adds beyond it: what its status is and for which parameters it holds, the claims that decide it, "
        "the figures that show it and the library functions its checks rest on. Generated from the "
        "statement registry and the executed chapters, like the {doc}`reproducibility report <report>`.",
        "",
    ]
    for heading, origin in (("Statements of the paper", "paper"), ("Beyond the paper", "beyond")):
        lines += [f"## {heading}", ""]
        for s in statuses:
            if s.statement.origin == origin:
                lines += _node(s, sections, entries, api)
    return "\n".join(lines) + "\n"


def write_paper_map(executed: Path, chapters: Sequence[str], *, api: bool = True) -> Path:
    """Write ``executed/paper_map.md`` (after the gallery, whose thumbnails it shows); unchanged text is kept."""
    path = Path(executed) / PAGE
    text = paper_map_markdown(executed, chapters, api=api)
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path
