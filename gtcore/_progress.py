"""One place for progress bars: tqdm for interactive use, silent inside book builds."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

#: set by ``gtbook run`` for the chapters' kernels, so executed pages carry no progress-bar noise
QUIET_ENV = "GTBOOK_QUIET"


def progress(iterable: Iterable[T], desc: str, *, enabled: bool = True, total: int | None = None) -> Iterable[T]:
    """Wrap ``iterable`` in a tqdm bar unless disabled or running inside ``gtbook run``."""
    if not enabled or os.environ.get(QUIET_ENV):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)
