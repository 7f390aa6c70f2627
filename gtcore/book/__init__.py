r"""The book's machinery: the ``gtbook`` command and what a chapter records.

This layer executes the chapters (:mod:`~gtcore.book.cli`), keys their cache
(:mod:`~gtcore.book.provenance`), keeps one writer per tree (:mod:`~gtcore.book.lock`), publishes
atomically (:mod:`~gtcore.book.files`), reads the statement registry (:mod:`~gtcore.book.statements`,
package data), records claims and glued numbers (:mod:`~gtcore.book.claims`,
:mod:`~gtcore.book.glue`) and writes the report and the gallery. It imports the core and the studies;
neither imports it.

A chapter records its claims with :func:`~gtcore.book.claims.claim` (importable from here) and the numbers its prose
quotes with :func:`gtcore.book.glue.glue`::

    from gtcore.book import claim
    from gtcore.book.glue import glue
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gtcore.book.claims import ClaimFailed, claim

# (not `glue`: the submodule of that name would shadow a lazy function once imported)
_LAZY = {"claim": "gtcore.book.claims", "ClaimFailed": "gtcore.book.claims"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
