"""A lock file that makes concurrent ``gtbook`` commands on one tree safe (POSIX ``flock``).

The lock is held by an open file descriptor, so it is released when the process ends, however it
ends: a killed run never leaves a stale lock behind. The file records who holds it (pid, command,
start time), for the message the second command prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path


class LockBusy(RuntimeError):
    """Another process holds the lock and we were told not to wait."""


class TreeLock:
    """An exclusive lock on ``path``; a context manager.

    Parameters
    ----------
    path : path
        The lock file (created if missing, never deleted).
    wait : bool
        Block until the holder finishes (printing one line saying so), or raise :class:`LockBusy`.
    what : str
        The command, recorded for the other process's message.
    """

    def __init__(self, path: str | os.PathLike, *, wait: bool = True, what: str = "gtbook") -> None:
        self.path = Path(path)
        self.wait = wait
        self.what = what
        self._fd: int | None = None

    def holder(self) -> str:
        """Who holds the lock, in words (from the file; best effort)."""
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if not info:
            return "another gtbook process"
        return f"`{info.get('command', 'gtbook')}` (pid {info.get('pid', '?')}, since {info.get('since', '?')})"

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = self.holder()
            if not self.wait:
                os.close(fd)
                raise LockBusy(f"{who} is already running on this book ({self.path}); wait for it to "
                               "finish, or drop --no-wait to queue behind it") from None
            print(f"gtbook: waiting for {who} to finish ...", file=sys.stderr, flush=True)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "command": self.what,
                                 "since": time.strftime("%H:%M:%S")}).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> TreeLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
