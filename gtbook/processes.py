r"""Processes by their identity: whether one still runs, and children that die with their parent.

A pid alone does not name a process for life. A process that exited but that its parent has not reaped
(a *zombie*) keeps its pid, and once the pids wrap round (``pid_max`` is 32768 on many machines) a later
process may get it. A *process tag* ``PID-TICKS`` adds the process's start, in clock ticks after boot
(``/proc/PID/stat``, field 22): a later process with the same pid has another start, and unlike a
wall-clock time the start does not move when the clock is set. ``gtbook`` puts tags in the names of
its scratch folders, so that a later run removes exactly those whose process is gone.

On Linux a child can also ask the kernel for a signal when its parent dies (:func:`die_with_parent`):
the one clean-up that still happens after a ``kill -9`` of the parent.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

__all__ = ["die_with_parent", "pid_alive", "process_tag", "start_ticks", "tag_alive", "tag_in_name"]

_PR_SET_PDEATHSIG = 1
#: ``PID`` or ``PID-TICKS``, ASCII digits (a pid fits in 10)
_TAG = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,20}))?", re.ASCII)


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux); return whether armed.

    The signal follows the death of the parent *thread* that started this process."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command (which may hold spaces, parentheses and bytes
    that are not UTF-8: the kernel cuts it at 15 bytes, maybe inside a character)."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (Linux ``/proc``), else None."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 of proc(5); fields[0] is field 3
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether a live process with this pid exists (one we may not signal counts as alive).

    A zombie (a process that has exited and that its parent has not yet reaped) is not alive: it can
    no longer write anything."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _stat(pid) if sys.platform.startswith("linux") else None
    return not (fields and fields[0] in (b"Z", b"X"))


def process_tag(pid: int | None = None) -> str:
    """``PID-TICKS`` for process ``pid`` (default this one), its pid and :func:`start_ticks`; ``PID``
    alone where the start is unknown (no ``/proc``)."""
    pid = os.getpid() if pid is None else pid
    ticks = start_ticks(pid)
    return str(pid) if ticks is None else f"{pid}-{ticks}"


def tag_in_name(name: str) -> str | None:
    """The process tag in a scratch name ``PREFIX.TAG.SUFFIX`` (``tempfile.mkdtemp(prefix=PREFIX.TAG.)``;
    the prefix may hold dots, the suffix holds none), or None when the name has no such part."""
    parts = name.rsplit(".", 2)
    return parts[1] if len(parts) == 3 else None


def tag_alive(tag: str) -> bool | None:
    """Whether the process that :func:`process_tag` named ``tag`` still runs; None when ``tag`` is not a tag.

    Alive means: :func:`pid_alive`, and where the tag holds a start and ``/proc`` gives one, the same
    start (another start is a later process that was given the same pid). A bare ``PID`` (a tag made
    without ``/proc``, or by an older ``gtbook``) is judged by the pid alone."""
    m = _TAG.fullmatch(tag)
    if m is None or int(m[1]) == 0:
        return None
    pid = int(m[1])
    if not pid_alive(pid):
        return False
    now = start_ticks(pid) if m[2] is not None else None
    return now is None or now == int(m[2])
