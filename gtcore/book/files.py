"""Atomic file publishing: a reader (or a later run) sees the old file or the new one, never half of one.

Both helpers write into a temporary file *in the target's own folder* (so the final step is a rename
within one filesystem, which POSIX makes atomic) and then :func:`os.replace` it over the target. An
interruption at any point (Ctrl-C, SIGTERM, a kill) leaves the target untouched and at worst a hidden
``.NAME.*.tmp`` beside it, which :func:`remove_stale_temporaries` clears.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "publish", "remove_stale_temporaries"]


def _temporary_beside(dest: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    return Path(tmp)


def _replace_from(tmp: Path, dest: Path) -> None:
    try:
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_beside(dest: Path, write) -> None:
    """Write through ``write(binary file)`` into a temporary file beside ``dest``, sync it, rename it over
    ``dest``; on any interruption the temporary file is removed and ``dest`` is untouched."""
    tmp = _temporary_beside(dest)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _replace_from(tmp, dest)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file in the same folder, then :func:`os.replace`)."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _write_beside(dest, lambda fh: fh.write(text.encode()))


def publish(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Move the finished file ``src`` to ``dest`` atomically, even when they lie on different filesystems.

    Same filesystem: one :func:`os.replace`. Otherwise (``EXDEV``; :func:`shutil.move` would then copy
    straight into ``dest``, so a kill mid-copy leaves half a file there) the bytes are first copied into a
    temporary file beside ``dest``, synced, and renamed over it; ``src`` is removed afterwards.
    """
    src, dest = Path(src), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    with open(src, "rb") as fi:
        _write_beside(dest, lambda fo: shutil.copyfileobj(fi, fo))
    src.unlink(missing_ok=True)


def remove_stale_temporaries(folder: str | os.PathLike) -> int:
    """Delete the ``.NAME.*.tmp`` files that an interrupted atomic write left in ``folder``; return how many."""
    n = 0
    for tmp in Path(folder).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
        n += 1
    return n
