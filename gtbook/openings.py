"""The generated pages of statuses: each chapter's opening and the intro's status lists.

Both are written from the claims of the executed chapters (:func:`gtbook.report.collect_claims`) through
the one generator of statuses, :mod:`gtbook.verdicts`; nothing in them is typed by hand. A chapter includes
its opening right under its title (``executed/openings/<chapter>.md``, see :mod:`gtbook.execute`); the intro
includes ``executed/statuses.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gtbook.files import atomic_write_text
from gtbook.report import collect_claims
from gtbook.verdicts import chapter_opening_markdown, statement_statuses, status_list_markdown

__all__ = ["OPENINGS", "STATUS_LISTS", "write_pages"]

#: where the build writes each chapter's opening (``executed/openings/NN_name.md``) and the intro's lists
OPENINGS = "openings"
STATUS_LISTS = "statuses.md"


def write_pages(executed: Path | str, chapters: Sequence[str]) -> list[Path]:
    """Write every chapter's opening (``executed/openings/<chapter>.md``, which the chapter includes right
    under its title) and the intro's status lists (``executed/statuses.md``), from the claims of the
    executed chapters; return the paths written or kept (a file whose text is unchanged is not rewritten)."""
    executed = Path(executed)
    statuses = statement_statuses(collect_claims(executed))
    pages = {executed / OPENINGS / f"{c}.md": chapter_opening_markdown(c, statuses) for c in chapters}
    pages[executed / STATUS_LISTS] = (
        "**Statements of the paper**\n\n"
        + status_list_markdown(statuses, origin="paper")
        + "\n**Beyond the paper**\n\n"
        + status_list_markdown(statuses, origin="beyond")
    )
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            atomic_write_text(path, text)
    return list(pages)
