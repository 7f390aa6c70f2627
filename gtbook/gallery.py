r"""The gallery page: every figure and animation of the executed book, linked to its section.

:func:`write_gallery` reads the executed chapters ``executed/NN_*.ipynb`` and writes
``executed/gallery.md`` (MyST) plus one thumbnail per entry under ``executed/gallery/``:

- a **figure** is a code-cell output with an ``image/png``; its thumbnail is that PNG;
- an **animation** is a ``text/html`` output made by :func:`gtbook.studies.animation.animate_clouds`
  (metadata ``gtbook.kind == "animation"``, or a matplotlib JavaScript player); its thumbnail is
  one of its embedded frames (60 % of the way through).

**Captions.** The first sentence of the caption the chapter's cell gives in its metadata
(``mystnb.figure.caption``, the caption printed under the figure); without one, an animation's
caption is the one it carries in its output metadata, and a figure's is the first sentence of the
markdown cell right after it, which by the book's style says what to look at; without one, of the
nearest markdown cell before it; without any, the section's title. The thumbnail's alt text is the
cell's ``mystnb.image.alt`` (an animation's own ``alt``) when given.

**Anchors.** Each entry links to the section holding it: the nearest preceding markdown heading.
The anchor is the id docutils gives that section when the chapter is built. It is not guessed
from the heading text: the chapter's markdown cells are parsed with MyST's own docutils parser
(the chapters' MyST extensions, ``doctitle_xform`` off and ``auto_id_prefix = "id"``, as Sphinx
sets them), and the ids are read off the section nodes, so explicit ``(label)=`` targets,
``$math$`` in headings and duplicate titles (``id1``, ...) come out as in the built page.

**Figure anchors.** A figure whose cell gives a label (``mystnb.figure.name``) has that label as its
stable anchor on the page (``NN_chapter.html#fig-name``): the card links there, to the figure itself,
rather than to its section.

The page is a ``sphinx-design`` grid of cards (``sphinx_design`` is one of Jupyter Book v1's
default extensions); each card's image and title link to
``NN_chapter.html#anchor``. Thumbnails are files next to the page, so Sphinx copies them into
``_build/html/_images/`` like any figure.
"""

from __future__ import annotations

import base64
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from gtbook.files import atomic_write_text

__all__ = ["GalleryEntry", "collect_entries", "section_ids", "thumbnail_name", "write_gallery"]

#: the MyST extensions the chapters use (``_config.yml``: parse.myst_enable_extensions)
MYST_EXTENSIONS = ("amsmath", "dollarmath", "colon_fence", "deflist")
CAPTION_CHARS = 220
FRAME_AT = 0.6


@dataclass
class GalleryEntry:
    """One figure or animation of an executed chapter.

    Attributes
    ----------
    chapter : the chapter's stem (``06_prescribed_attention``), its page is ``chapter.html``
    kind : "figure" or "animation"
    anchor : the id of the section holding it (``""``: the top of the page)
    section : that section's title
    caption : MyST text
    png : the thumbnail's bytes
    alt : alt text for the thumbnail (``""``: a generic one is written)
    """

    chapter: str
    kind: str
    anchor: str
    section: str
    caption: str
    png: bytes
    alt: str = ""
    #: the figure's own label (its ``mystnb.figure.name``): its stable anchor on the page ("" when none)
    label: str = ""

    @property
    def href(self) -> str:
        """The figure on its page: its own anchor when it has a label, else its section's."""
        anchor = self.label or self.anchor
        return f"{self.chapter}.html" + (f"#{anchor}" if anchor else "")


def thumbnail_name(chapter: str, k: int) -> str:
    """The file name of the ``k``-th (from 1) thumbnail of ``chapter`` in ``executed/gallery/``."""
    return f"{chapter}_{k:02d}.png"


# ------------------------------------------------------------------------------- anchors
def _parse_sections(markdown: str) -> list[tuple[str, str]]:
    """(id, title) of every section of a MyST text, in document order, as docutils assigns them."""
    import docutils.core
    from docutils import nodes
    from myst_parser.parsers.docutils_ import Parser

    doc = docutils.core.publish_doctree(
        markdown,
        parser=Parser(),
        settings_overrides={
            "myst_enable_extensions": set(MYST_EXTENSIONS),
            "doctitle_xform": False,
            "auto_id_prefix": "id",
            "report_level": 5,
            "halt_level": 5,
        },
    )

    def title(node) -> str:  # the title's text, inline math kept as $...$
        return "".join(f"${n.astext()}$" if isinstance(n, nodes.math) else n.astext() for n in node.children)

    return [(s["ids"][0] if s["ids"] else "", title(s[0])) for s in doc.findall(nodes.section)]


def section_ids(cells: list) -> list[tuple[str, str] | None]:
    """Per cell, the (id, title) of the section it lies in after its own headings; None before any.

    The ids come from parsing all markdown cells together (so duplicates are numbered as in the
    page); each cell's headings are counted by parsing it alone.
    """
    md_cells = [c for c in cells if c.cell_type == "markdown"]
    sections = _parse_sections("\n\n".join(c.source for c in md_cells))
    out, current, seen = [], None, 0
    for cell in cells:
        if cell.cell_type == "markdown":
            n = len(_parse_sections(cell.source))
            if n:
                seen += n
                current = sections[min(seen, len(sections)) - 1]
        out.append(current)
    return out


# ------------------------------------------------------------------------------ captions
def first_sentence(markdown: str, limit: int = CAPTION_CHARS) -> str:
    """The first sentence of a markdown cell, headings skipped, never cut inside ``$...$``."""
    lines = [ln for ln in markdown.splitlines() if not ln.lstrip().startswith("#")]
    text = " ".join(" ".join(lines).split())
    text = re.sub(r"\$\$.*?\$\$", "", text).strip()  # display math does not fit a caption
    in_math, end = False, len(text)
    for i, ch in enumerate(text):
        if ch == "$":
            in_math = not in_math
        elif (
            ch == "."
            and not in_math
            and (i + 1 == len(text) or text[i + 1] == " ")
            and i > 20
            and not re.search(r"(\b(e\.g|i\.e|cf|vs|eq|eqs|Fig|resp))$", text[:i])
        ):
            end = i + 1
            break
    sentence = text[:end].rstrip()
    if len(sentence) > limit:
        cut, in_math = 0, False
        for i, ch in enumerate(sentence[:limit]):
            if ch == "$":
                in_math = not in_math
            elif ch == " " and not in_math:
                cut = i
        sentence = sentence[:cut].rstrip(",;") + " …"
    return sentence


#: MyST roles that only resolve inside their own page (glued numbers, figure references)
_PAGE_ROLES = re.compile(r"\s*(?:in\s+)?\{(?:glue:\w+|glue|numref|ref|eq)\}`[^`]*`")


def _caption_cell(cells: list, i: int) -> str:
    """The markdown cell right after cell ``i`` (the book's caption cell); else the nearest before it.

    Roles that resolve only on the chapter's own page (``{glue:text}``, ``{numref}``) are removed.
    """
    source = ""
    if i + 1 < len(cells) and cells[i + 1].cell_type == "markdown":
        source = cells[i + 1].source
    else:
        for cell in reversed(cells[:i]):
            if cell.cell_type == "markdown":
                source = cell.source
                break
    return _PAGE_ROLES.sub("", source)


def _cell_figure(cell) -> tuple[str, str, str]:
    """The caption (page-only roles removed), alt text and label a cell's ``mystnb`` metadata gives, or ``""``."""
    meta = cell.get("metadata", {}).get("mystnb", {}) or {}
    caption = (meta.get("figure") or {}).get("caption", "") or ""
    alt = (meta.get("image") or {}).get("alt", "") or ""
    label = str((meta.get("figure") or {}).get("name", "") or "")
    return _PAGE_ROLES.sub("", str(caption)).strip(), " ".join(str(alt).split()), label


def _animation_frame(html: str) -> bytes | None:
    from gtbook.studies.animation import frame_uris

    uris = [u for u in frame_uris(html) if u.startswith("data:image/png")]
    if not uris:
        return None
    uri = uris[min(len(uris) - 1, int(FRAME_AT * (len(uris) - 1) + 0.5))]
    return base64.b64decode(uri.split(",", 1)[1].replace("\\\n", "").replace("\n", ""))


# ------------------------------------------------------------------------------- entries
def collect_entries(notebook: Path) -> list[GalleryEntry]:
    """The figures and animations of one executed chapter, in page order."""
    nb = nbformat.read(notebook, as_version=4)
    cells = nb.cells
    where = section_ids(cells)
    out = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        cell_caption, cell_alt, label = _cell_figure(cell)
        if len(cell_caption) > CAPTION_CHARS:
            cell_caption = first_sentence(cell_caption)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            anchor, section = where[i] or ("", "")
            meta = (output.get("metadata", {}).get("text/html") or {}).get("gtbook", {})
            html = data.get("text/html", "")
            if isinstance(html, list):
                html = "".join(html)
            if meta.get("kind") == "animation" or ('class="animation"' in html and "frames[0]" in html):
                png = _animation_frame(html)
                if png is None:
                    continue
                caption = cell_caption or meta.get("caption") or first_sentence(_caption_cell(cells, i)) or section
                alt = cell_alt or " ".join(str(meta.get("alt", "")).split())
                out.append(GalleryEntry(notebook.stem, "animation", anchor, section, caption, png, alt, label))
            elif "image/png" in data:
                raw = data["image/png"]
                raw = "".join(raw) if isinstance(raw, list) else raw
                caption = cell_caption or first_sentence(_caption_cell(cells, i)) or section
                out.append(
                    GalleryEntry(
                        notebook.stem, "figure", anchor, section, caption, base64.b64decode(raw), cell_alt, label
                    )
                )
    return out


def _chapter_title(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return notebook.stem


_MATH = re.compile(r"(\$[^$]*\$)")


def no_raw_html(text: str) -> str:
    """``text`` (MyST) with every ``<`` and ``>`` outside ``$...$`` math turned into an entity, so no
    caption, title or alt text reaches the page as HTML (``<img onerror=...>`` shows as text)."""
    parts = _MATH.split(" ".join(str(text).splitlines()))
    return "".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _card(entry: GalleryEntry, image: str) -> str:
    badge = "{bdg-primary}`animation` " if entry.kind == "animation" else ""
    title = no_raw_html(_one_line(entry.section or entry.chapter))
    alt = _one_line(entry.alt or f"{entry.kind} in {entry.chapter}, section {entry.section or entry.chapter}")
    caption = no_raw_html(entry.caption)
    return (
        f":::{{grid-item-card}} {title}\n"
        f":img-top: {image}\n"
        f":img-alt: {alt}\n"
        f":link: {entry.href}\n"
        f":link-type: url\n"
        f":class-card: gtbook-gallery-card\n\n"
        f"{badge}{caption}\n"
        f":::\n"
    )


def write_gallery(executed: Path, *, chapters: list[str] | None = None, title: str = "Gallery") -> Path:
    """Write ``executed/gallery.md`` and its thumbnails ``executed/gallery/*.png``.

    Parameters
    ----------
    executed : the folder of executed chapters (``gtbook.cli.EXECUTED``)
    chapters : chapter stems in page order; by default every ``NN_*.ipynb`` found, sorted
    title : the page's title

    Returns
    -------
    Path of the written page. The thumbnail folder is rewritten from scratch each time.
    """
    executed = Path(executed)
    names = chapters if chapters is not None else sorted(p.stem for p in executed.glob("[0-9][0-9]_*.ipynb"))
    thumbs = executed / "gallery"
    if thumbs.is_symlink() or (thumbs.exists() and not thumbs.is_dir()):
        thumbs.unlink()  # never write through a link
    shutil.rmtree(thumbs, ignore_errors=True)
    thumbs.mkdir(parents=True)
    lines = [
        f"# {title}",
        "",
        "Every figure and animation of the book, chapter by chapter. Each card links to the section "
        "that explains it; animations play on their chapter's page.",
        "",
    ]
    total = 0
    for name in names:
        path = executed / f"{name}.ipynb"
        if not path.exists():
            continue
        entries = collect_entries(path)
        if not entries:
            continue
        lines += [
            f"## {no_raw_html(_one_line(_chapter_title(path)))}",
            "",
            f"{{doc}}`Open the chapter <{name}>`",
            "",
            "::::{grid} 1 2 2 2",
            ":gutter: 3",
            "",
        ]
        for k, entry in enumerate(entries, 1):
            image = f"gallery/{thumbnail_name(name, k)}"
            (executed / image).write_bytes(entry.png)  # a fresh folder: nothing to follow
            lines.append(_card(entry, image))
        lines += ["::::", ""]
        total += len(entries)
    if total == 0:
        lines += ["No executed chapters yet: run `gtbook run` first.", ""]
    page = executed / "gallery.md"
    atomic_write_text(page, "\n".join(lines))  # a kill mid-write never leaves half a page
    return page
