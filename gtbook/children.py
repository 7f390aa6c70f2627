r"""Child processes that die with their parent: ``gtbook``'s chapter workers and its Jupyter Book build.

A ``kill -9`` of ``gtbook`` cannot run any clean-up of its own, so each child watches its parent
itself, two ways:

* on Linux, the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``): the child gets a signal the
  moment its parent dies (``gtbook.processes.die_with_parent``); it survives ``execve``, so a command
  started through :func:`command_dying_with_parent` (``python -m gtbook.children PID -- CMD ...``)
  gets it too;
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

from gtbook.processes import die_with_parent

__all__ = ["command_dying_with_parent", "parent_alive", "watch_parent"]


def parent_alive(parent: int) -> bool:
    """Whether the process that started us (pid ``parent``) is still our parent."""
    return os.getppid() == parent


def watch_parent(
    parent: int, sig: int = signal.SIGTERM, *, every: float = 0.5, grace: float = 20.0
) -> threading.Thread:
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
    return [sys.executable, "-m", "gtbook.children", str(os.getpid()), "--", *cmd]


def _exec_main(argv: list[str]) -> int:
    parent, sep, cmd = int(argv[0]), argv[1], argv[2:]
    if sep != "--" or not cmd:
        print("usage: python -m gtbook.children PARENT_PID -- COMMAND ...", file=sys.stderr)
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
