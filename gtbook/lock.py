"""A lock file that makes concurrent ``gtbook`` commands on one tree safe (``filelock``).

The lock is an OS lock on an open file (``flock`` on POSIX, ``msvcrt`` on Windows, through
``filelock``), so it is released when the process ends, however it ends: a killed run never leaves a
stale lock behind. Who holds it (pid, command, start time and a random **token**) is written to a file
beside it (``.lock.info``), for the message a second command prints and for :meth:`TreeLock.holds`: a
chapter worker checks, right before it publishes, that the run that started it still holds the lock
(the token in the file is the one it was given, and the lock is taken).

Neither file is ever followed through a symlink: a lock path that is a link (or not a regular file) is
refused with a message, and the holder file is written by atomic replacement, which replaces a link
instead of writing through it. A folder that cannot be written (read-only, full) gives one line naming
the path and the cause (:class:`LockFailed`).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import time
from pathlib import Path
from typing import Any

from gtbook import files as _files

__all__ = ["LockBusy", "LockFailed", "TreeLock"]


class LockBusy(RuntimeError):
    """Another process holds the lock and we were told not to wait."""


class LockFailed(RuntimeError):
    """The lock cannot be taken safely: its path is a symlink, or its folder cannot be written."""


def _refuse_link(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LockFailed(_files.os_error_line(exc)) from None
    if stat.S_ISLNK(st.st_mode):
        raise LockFailed(
            f"{path} is a symlink; gtbook never follows a link for its lock. Remove it (`rm {path}`) and rerun"
        )
    if not stat.S_ISREG(st.st_mode):
        raise LockFailed(f"{path} is not a regular file; remove it and rerun")


class TreeLock:
    """An exclusive lock on ``path``; a context manager.

    Parameters
    ----------
    path : path
        The lock file (created if missing, never deleted). Its holder file is ``path`` + ``.info``.
    wait : bool
        Block until the holder finishes (printing one line saying so), or raise :class:`LockBusy`.
    what : str
        The command, recorded for the other process's message.
    """

    def __init__(self, path: str | os.PathLike, *, wait: bool = True, what: str = "gtbook") -> None:
        self.path = Path(path)
        self.info_path = self.path.with_name(self.path.name + ".info")
        self.wait = wait
        self.what = what
        self.token = secrets.token_hex(8)
        self._lock: Any = None  # a filelock lock while held (filelock is imported on acquire)

    @property
    def held(self) -> bool:
        return self._lock is not None

    def holder(self) -> str:
        """Who holds the lock, in words (from the holder file; best effort)."""
        info = _read_info(self.info_path)
        if not info:
            return "another gtbook process"
        return f"`{info.get('command', 'gtbook')}` (pid {info.get('pid', '?')}, since {info.get('since', '?')})"

    def acquire(self) -> None:
        from filelock import FileLock, Timeout

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LockFailed(_files.os_error_line(exc)) from None
        _refuse_link(self.path)
        lock = FileLock(str(self.path))
        try:
            try:
                lock.acquire(timeout=0)
            except Timeout:
                who = self.holder()
                if not self.wait:
                    raise LockBusy(
                        f"{who} is already running on this book ({self.path}); wait for it to "
                        "finish, or drop --no-wait to queue behind it"
                    ) from None
                print(f"gtbook: waiting for {who} to finish ...", file=sys.stderr, flush=True)
                lock.acquire()
        except OSError as exc:
            raise LockFailed(_files.os_error_line(exc)) from None
        try:
            _refuse_link(self.path)  # replaced by a link while we waited
            _refuse_link(self.info_path)
            _files.atomic_write_text(
                self.info_path,
                json.dumps(
                    {"pid": os.getpid(), "command": self.what, "since": time.strftime("%H:%M:%S"), "token": self.token}
                ),
            )
        except OSError as exc:
            lock.release()
            raise LockFailed(_files.os_error_line(exc)) from None
        except BaseException:
            lock.release()
            raise
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            try:
                if _read_info(self.info_path).get("token") == self.token:
                    self.info_path.unlink(missing_ok=True)
            except OSError:
                pass
            finally:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> TreeLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @staticmethod
    def holds(path: str | os.PathLike, token: str) -> bool:
        """Whether the lock at ``path`` is taken by the holder whose token is ``token`` (from another process).

        True when the holder file names ``token`` and the lock cannot be taken right now.
        """
        from filelock import FileLock, Timeout

        path = Path(path)
        if _read_info(path.with_name(path.name + ".info")).get("token") != token:
            return False
        try:
            _refuse_link(path)
        except LockFailed:
            return False
        probe = FileLock(str(path))
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        except OSError:
            return False
        probe.release()  # nobody holds it: the run that started us is gone
        return False


def _read_info(path: Path) -> dict:
    try:
        if os.path.islink(path):
            return {}
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
