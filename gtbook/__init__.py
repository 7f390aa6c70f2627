r"""The book: its studies (:mod:`gtbook.studies`) and its machinery, the ``gtbook`` command and what a
chapter records. The library it studies is :mod:`gtcore`, a package of its own that never imports this one.

The machinery executes the chapters (:mod:`~gtbook.cli`), keys their cache
(:mod:`~gtbook.provenance`), keeps one writer per tree (:mod:`~gtbook.lock`), publishes
atomically (:mod:`~gtbook.files`), reads the statement registry (:mod:`~gtbook.statements`,
package data), records claims and glued numbers (:mod:`~gtbook.claims`,
:mod:`~gtbook.glue`) and writes the report and the gallery. It imports the library and the studies; neither imports it.

A chapter records its claims with :func:`~gtbook.claims.claim` (importable from here) and the numbers its prose
quotes with :func:`gtbook.glue.glue`::

    from gtbook import claim
    from gtbook.glue import glue
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gtbook.claims import ClaimFailed, claim

# (not `glue`: the submodule of that name would shadow a lazy function once imported)
_LAZY = {"claim": "gtbook.claims", "ClaimFailed": "gtbook.claims"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
