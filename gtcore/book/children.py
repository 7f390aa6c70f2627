r"""Child processes that die with their parent: ``gtbook``'s chapter workers and its Jupyter Book build.

A ``kill -9`` of ``gtbook`` cannot run any clean-up of its own, so each child watches its parent
itself, two ways:

* on Linux, the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``): the child gets a signal the
  moment its parent dies (:func:`die_with_parent`); it survives ``execve``, so a command started through
  :func:`command_dying_with_parent` (``python -m gtcore.book.children PID -- CMD ...``) gets it too;
* everywhere, a thread that polls the parent's pid (:func:`watch_parent`): when the process that
  started us is gone (``os.getppid()`` changed), the child stops itself.

A child also checks once, right after arming, that its parent is still the one that started it (the
parent may have died before the child armed the signal).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

__all__ = ["command_dying_with_parent", "die_with_parent", "maker_alive", "parent_alive", "pid_alive",
           "watch_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux); return whether armed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _linux_process(pid: int) -> tuple[str, float] | None:
    """The state letter and the start time (seconds since the epoch) of process ``pid``, from ``/proc``
    (None when there is no such process or no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command in (...) may hold spaces
    # field 3 of proc(5) is the state, field 22 the start in clock ticks after boot
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int, *, started_by: float | None = None) -> bool:
    """Whether a live process with this pid exists (one we may not signal counts as alive).

    A zombie (a process that has exited and that its parent has not yet reaped) is not alive: it can
    no longer write anything. With ``started_by`` (seconds since the epoch, e.g. the modification time
    of a file the process wrote), a process that started more than a second after it is a later
    process that was given the same pid once the pids wrapped round (Linux ``/proc`` only): not alive.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    info = _linux_process(pid) if sys.platform.startswith("linux") else None
    if info is None:
        return True
    state, start = info
    if state in ("Z", "X"):
        return False
    return started_by is None or start <= started_by + 1.0


def maker_alive(path: Path, pid: int) -> bool:
    """Whether the process ``pid`` that made the file or folder ``path`` still runs.

    That process started before ``path`` was made, so before its modification time: a live process
    with this pid that started later is another one (see :func:`pid_alive`). A ``path`` that is gone
    has no maker to wait for.
    """
    try:
        made = path.lstat().st_mtime
    except OSError:
        return False
    return pid_alive(pid, started_by=made)


def parent_alive(parent: int) -> bool:
    """Whether the process that started us (pid ``parent``) is still our parent."""
    return os.getppid() == parent


def watch_parent(parent: int, sig: int = signal.SIGTERM, *, every: float = 0.5,
                 grace: float = 20.0) -> threading.Thread:
    """Stop this process when ``parent`` is no longer its parent (a daemon thread; returns it).

    The process gets ``sig`` (its handler unwinds: kernels shut down, scratch files removed); if it is
    still alive ``grace`` seconds later, it exits at once.
    """

    def watch() -> None:
        while parent_alive(parent):
            time.sleep(every)
        os.kill(os.getpid(), sig)
        time.sleep(grace)
        os._exit(1)

    thread = threading.Thread(target=watch, name="gtbook-parent-watch", daemon=True)
    thread.start()
    return thread


def command_dying_with_parent(cmd: list[str]) -> list[str]:
    """``cmd`` wrapped so that it is killed (SIGKILL) when this process dies, however it dies."""
    return [sys.executable, "-m", "gtcore.book.children", str(os.getpid()), "--", *cmd]


def _exec_main(argv: list[str]) -> int:
    parent, sep, cmd = int(argv[0]), argv[1], argv[2:]
    if sep != "--" or not cmd:
        print("usage: python -m gtcore.book.children PARENT_PID -- COMMAND ...", file=sys.stderr)
        return 2
    armed = die_with_parent(signal.SIGKILL)
    if not parent_alive(parent):  # the parent died before the signal was armed
        return 1
    if armed:
        os.execvp(cmd[0], cmd)
    import subprocess  # no parent-death signal here: run the command as our child and watch for both

    child = subprocess.Popen(cmd)
    while child.poll() is None:
        if not parent_alive(parent):
            child.kill()
            child.wait()
            return 1
        time.sleep(0.2)
    return child.returncode


if __name__ == "__main__":
    sys.exit(_exec_main(sys.argv[1:]))
