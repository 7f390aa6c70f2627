"""Whose scratch files are dead: process tags (:mod:`gtbook.processes`) and ``clean_scratch``.

A later ``gtbook run`` removes ``executed/.running/NAME.TAG.*`` only when the process TAG names is gone.
Two ways a pid can exist although its process is gone: it is a zombie (exited, not yet reaped: it can
write nothing), or the pids wrapped round and a later process got it (``pid_max`` is 32768 on many
machines, and the suite starts thousands of processes). Either used to keep a killed run's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gtbook import processes as pr
from gtbook.chapters import Book
from gtbook.execute import clean_scratch

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
    assert not pr.pid_alive(zombie)  # ... but nothing runs under it
    assert pr.tag_alive(pr.process_tag(zombie)) is False


def test_a_running_process_is_alive(sleeper):
    assert pr.pid_alive(sleeper)
    assert pr.tag_alive(pr.process_tag(sleeper)) is True
    assert pr.tag_alive(pr.process_tag()) is True


@linux
def test_the_start_ticks_say_when_the_process_started(sleeper):
    # the sleeper started just now: its start, in seconds after boot, is within seconds of the uptime
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    started = pr.start_ticks(sleeper) / os.sysconf("SC_CLK_TCK")
    assert 0 <= uptime - started < 30, (uptime, started)
    assert pr.process_tag(sleeper) == f"{sleeper}-{pr.start_ticks(sleeper)}"
    assert pr.start_ticks(os.getpid()) <= pr.start_ticks(sleeper)  # pytest started first
    assert pr.start_ticks(sleeper) != pr.start_ticks(os.getpid())


@linux
def test_a_later_process_with_the_same_pid_is_another_one(sleeper):
    pid, ticks = pr.process_tag(sleeper).split("-")
    assert pr.tag_alive(f"{pid}-{int(ticks) - 1}") is False  # the pid's process now started later
    assert pr.tag_alive(f"{pid}-{ticks}") is True


def test_what_is_not_a_tag(sleeper):
    assert pr.tag_alive("abc") is None and pr.tag_alive(f"{sleeper}-x") is None and pr.tag_alive("") is None
    assert pr.tag_alive(str(sleeper)) is True  # a bare pid (an older gtbook, or no /proc): the pid alone


@linux
def test_clean_scratch_removes_the_dead_and_keeps_the_living(tmp_path, zombie, sleeper):
    bk = Book(tmp_path)
    bk.running.mkdir(parents=True)
    pid, ticks = pr.process_tag(sleeper).split("-")
    names = {
        f"02_small.{pid}-{int(ticks) - 5}.reused": False,  # the pid went to a later process
        f"01_tiny.{pr.process_tag(zombie)}.zombie": False,
        f"01_tiny.{zombie}.oldzombie": False,  # the bare-pid names of an older gtbook
        f"01_tiny.{pid}-{ticks}.living": True,
        f"run.{pid}.oldliving": True,
        "notours": True,  # not a scratch name: left alone
        f"10_v1.2.{pid}-{ticks}.dotted": True,  # a chapter name with dots
        f"10_v1.2.{pr.process_tag(zombie)}.dotted": False,
    }
    for name in names:
        (bk.running / name).mkdir()
    (bk.running / f"01_tiny.{pid}-{ticks}.living" / "kernel.log").write_text("")
    clean_scratch(bk)
    assert sorted(p.name for p in bk.running.iterdir()) == sorted(n for n, keep in names.items() if keep)


@linux
def test_a_process_name_that_is_not_utf8():
    """The kernel cuts a process's name at 15 bytes, maybe inside a character: /proc/PID/stat is bytes."""
    code = (
        "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, b'ab\\xe3\\x83', 0, 0, 0); "
        "print(flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()
        assert b"(ab\xe3\x83)" in Path(f"/proc/{proc.pid}/stat").read_bytes()
        assert pr.pid_alive(proc.pid) and pr.tag_alive(pr.process_tag(proc.pid)) is True
    finally:
        proc.kill()
        proc.wait()


def test_the_tag_in_a_scratch_name():
    assert pr.tag_in_name("05_pretrained_moments.123-456.ab_9x") == "123-456"
    assert pr.tag_in_name("10_v1.2.123-456.ab_9x") == "123-456"  # a chapter name with dots
    assert pr.tag_in_name(".staging.123-456.ab_9x") == "123-456"
    assert pr.tag_in_name("run.123.ab_9x") == "123"
    assert pr.tag_in_name("kernel.log") is None


@pytest.mark.parametrize("text", ["\u00b2", "\u0661\u0662", "1" * 20, "0", "12-", "-3", "12-3-4", " 12"])
def test_odd_digits_are_not_a_tag(text):
    assert pr.tag_alive(text) is None


@linux
def test_a_build_removes_the_staging_folders_of_dead_builds_only(tmp_path, zombie, sleeper):
    from gtbook.build import _recover

    bk = Book(tmp_path)
    bk.build_dir.mkdir()
    pid, ticks = pr.process_tag(sleeper).split("-")
    names = {
        f".staging.{pid}-{ticks}.live": True,
        f".staging.{pid}-{int(ticks) - 1}.reused": False,
        f".staging.{pr.process_tag(zombie)}.zombie": False,
        f".staging.{zombie}.oldzombie": False,
        "html": True,  # not a staging folder
    }
    for name in names:
        (bk.build_dir / name).mkdir()
    _recover(bk)
    assert sorted(p.name for p in bk.build_dir.iterdir()) == sorted(n for n, keep in names.items() if keep)
