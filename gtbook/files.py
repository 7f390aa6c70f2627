"""Atomic file publishing: a reader (or a later run) sees the old file or the new one, never half of one.

Both helpers write into a temporary file *in the target's own folder* (so the final step is a rename
within one filesystem, which POSIX makes atomic) and then :func:`os.replace` it over the target. An
interruption at any point (Ctrl-C, SIGTERM, a kill) leaves the target untouched and at worst a hidden
``.NAME.*.tmp`` beside it, which :func:`remove_stale_temporaries` clears.

Published files get the usual mode, ``0o666`` less the process's umask (not the ``0o600`` of
``tempfile.mkstemp``), so a web server or the group can read the book. Neither helper follows a
symlink at the target: :func:`os.replace` replaces the link itself. :func:`os_error_line` turns an
``OSError`` (a read-only folder, a full disk) into the one line the command prints.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text", "file_mode", "os_error_line", "publish", "remove_stale_temporaries"]


def file_mode() -> int:
    """The mode a new file gets here: ``0o666`` less the umask (read from ``/proc`` where it can be)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def os_error_line(exc: OSError) -> str:
    """One line naming the path and the cause of ``exc`` (``cannot write PATH: Read-only file system``)."""
    cause = exc.strerror or str(exc)
    name = errno.errorcode.get(exc.errno or 0)
    if name and name not in cause:
        cause += f" ({name})"
    path = exc.filename if exc.filename is not None else ""
    return f"cannot write {path}: {cause}" if path else f"{type(exc).__name__}: {cause}"


def _temporary_beside(dest: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        os.fchmod(fd, file_mode()) if hasattr(os, "fchmod") else os.chmod(tmp, file_mode())
    finally:
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
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # a write that failed (a full disk) names no file: name the target
            raise OSError(exc.errno, exc.strerror, str(dest)) from None
        raise
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
