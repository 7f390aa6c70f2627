"""One place for progress bars: tqdm for interactive use, silent inside book builds and logs.

A bar is drawn only where a person watches it: on a terminal, or in a Jupyter notebook (a widget). In a
log file or a pipe (the make log, CI) it is off, so no ``\\r`` frames flood the output; inside
``gtbook run`` kernels it is off too (``$GTBOOK_QUIET``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

#: set by ``gtbook run`` for the chapters' kernels, so executed pages carry no progress-bar noise
QUIET_ENV = "GTBOOK_QUIET"


def watched() -> bool:
    """Whether a person sees the bars: stderr is a terminal, or this is a Jupyter kernel (widgets)."""
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress(iterable: Iterable[T], desc: str, *, enabled: bool = True, total: int | None = None) -> Iterable[T]:
    """Wrap ``iterable`` in a tqdm bar unless disabled, inside ``gtbook run``, or nobody watches
    (:func:`watched`: not a terminal, not a notebook)."""
    if not enabled or os.environ.get(QUIET_ENV) or not watched():
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)
