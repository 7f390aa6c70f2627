"""Whose scratch files are dead: :func:`gtcore.book.children.pid_alive` and ``maker_alive``.

A later ``gtbook run`` removes ``executed/.running/NAME.PID.*`` only when the process PID is gone. Two
ways a pid can exist although its process is gone: it is a zombie (exited, not yet reaped: it can write
nothing), or the pids wrapped round and a later process got it (``pid_max`` is 32768 on many machines,
and the suite starts thousands of processes). Either used to keep a killed run's folder forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gtcore.book import children
from gtcore.book.chapters import Book
from gtcore.book.execute import clean_scratch

linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def zombie():
    """A child that has exited and that we have not reaped (its pid still exists, as a zombie)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while _state(proc.pid) != "Z":
        assert time.time() < deadline, "the child did not exit"
        time.sleep(0.02)
    yield proc.pid
    proc.wait()


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@linux
def test_a_zombie_is_not_alive(zombie):
    os.kill(zombie, 0)  # the pid exists ...
    assert not children.pid_alive(zombie)  # ... but nothing runs under it


def test_a_running_process_is_alive(sleeper):
    assert children.pid_alive(sleeper)
    assert children.pid_alive(os.getpid(), started_by=time.time())


@linux
def test_a_process_started_after_the_file_is_another_one(sleeper, tmp_path):
    made = tmp_path / "made"
    made.mkdir()
    assert children.maker_alive(made, os.getpid())  # pytest started before the folder was made
    hour_ago = time.time() - 3600
    os.utime(made, (hour_ago, hour_ago))
    assert not children.maker_alive(made, sleeper)  # the sleeper started after it: a reused pid
    assert not children.pid_alive(sleeper, started_by=hour_ago)
    assert children.maker_alive(made, 1) == children.pid_alive(1, started_by=hour_ago)


def test_a_gone_path_has_no_maker(tmp_path):
    assert not children.maker_alive(tmp_path / "absent", os.getpid())


@linux
def test_clean_scratch_removes_the_dead_and_keeps_the_living(tmp_path, zombie, sleeper):
    bk = Book(tmp_path)
    bk.running.mkdir(parents=True)
    reused = bk.running / f"02_small.{sleeper}.reused"
    reused.mkdir()
    hour_ago = time.time() - 3600
    os.utime(reused, (hour_ago, hour_ago))
    dead = bk.running / f"01_tiny.{zombie}.zombie"
    dead.mkdir()
    living = bk.running / f"01_tiny.{sleeper}.living"
    living.mkdir()
    (living / "kernel.log").write_text("")
    clean_scratch(bk)
    assert sorted(p.name for p in bk.running.iterdir()) == [living.name]
