"""``kill -9`` at random times (issue 24): ``gtbook run -j 2`` and ``gtbook build`` on the tiny book.

After each kill, nothing the killed command started may still run; every executed notebook is a whole
notebook of the old run or of the new one (never half, never another run's), and so is the HTML; and
``gtbook status`` says which, truthfully. The kill times are drawn (seeded) over the length of an
uninterrupted command, so they fall in every phase: start-up, kernels starting, cells running,
publishing, Jupyter Book reading, writing and the final swap.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time

import nbformat
import pytest

from minibook import make_mini_book
from test_pipeline_faults import (
    gtbook,
    kill_all,
    needs_proc,
    start,
    state_of,
    wait_until_gone,
)

CHAPTERS = ("01_tiny", "02_small")
KILLS = 10

pytestmark = [needs_proc, pytest.mark.slow]


@pytest.fixture
def tree(tmp_path):
    path = make_mini_book(tmp_path / "mini", CHAPTERS)
    yield path
    kill_all(path)


def _whole(path):
    """The ``x`` a whole executed notebook ran with (it reads, and its outputs match its digest)."""
    from gtbook.verify import digest_problem

    raw = json.loads(path.read_text())
    assert digest_problem(raw) is None, f"{path.name}: {digest_problem(raw)}"
    nbformat.read(path, as_version=4)
    return raw["metadata"]["gtbook"]["parameters"]["x"]


def _kill_after(proc, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()


def test_kill_9_of_run_j2_at_random_times(tree):
    rng = random.Random(24)
    gtbook("run", "-j", "2", "--set", "x=0.1", cwd=tree)
    start_time = time.perf_counter()
    gtbook("run", "-j", "2", "--set", "x=0.2", cwd=tree)
    full = time.perf_counter() - start_time
    had = {c: 0.2 for c in CHAPTERS}
    outcomes = []
    for i in range(KILLS):
        new = round(0.3 + 0.1 * i, 2)
        when = rng.uniform(0.0, full * 1.1)
        proc = start("run", "-j", "2", "--set", f"x={new}", cwd=tree)
        _kill_after(proc, when)
        left = wait_until_gone(tree, 40)
        assert not left, f"kill {i} at {when:.2f} s: left running {left}"
        now = {}
        for c in CHAPTERS:
            x = _whole(tree / "executed" / f"{c}.ipynb")
            assert x in (had[c], new), f"kill {i} at {when:.2f} s: {c} holds x={x}, neither {had[c]} nor {new}"
            now[c] = x
        # asked with the run's -j: the kernels' threads are part of a chapter's key
        asked_new = gtbook("status", "-j", "2", "--set", f"x={new}", cwd=tree).stdout
        for c in CHAPTERS:
            want = "fresh" if now[c] == new else "stale"
            said = state_of(asked_new, c)
            assert said == want, f"kill {i}: status says {said} for {c}\n{asked_new}"
        outcomes.append((round(when, 2), tuple(now[c] == new for c in CHAPTERS)))
        had = now
    # nothing of the killed runs publishes later, and their job files are cleaned by the next run
    gtbook("run", "-j", "2", "--set", "x=1.5", cwd=tree)
    time.sleep(3)
    assert all(_whole(tree / "executed" / f"{c}.ipynb") == 1.5 for c in CHAPTERS)
    assert not list((tree / "executed").rglob("*.job.json")) and not list((tree / "executed" / ".running").iterdir())
    # the draws cover the phases: some kills leave the old output, some the new
    kept = [o for o in outcomes if not any(o[1])]
    assert kept, f"no kill left the old output: {outcomes}"
    print("kill times (s) and which chapters hold the new output:", outcomes)


def _page_version(tree):
    text = (tree / "_build" / "html" / "book" / "intro.html").read_text()
    m = re.search(r"version (\d+)", text)
    return int(m.group(1)) if m else None


def test_kill_9_of_build_at_random_times(tree):
    rng = random.Random(25)
    intro = tree / "book" / "intro.md"
    gtbook("run", "-j", "2", cwd=tree)

    def write_version(n):
        intro.write_text(f"# Mini\n\nThe intro page, version {n}.\n")

    write_version(0)
    start_time = time.perf_counter()
    gtbook("build", cwd=tree)
    full = time.perf_counter() - start_time
    assert _page_version(tree) == 0
    had = 0
    outcomes = []
    for i in range(1, KILLS + 1):
        write_version(i)
        when = rng.uniform(0.0, full * 1.1)
        proc = start("build", cwd=tree)
        _kill_after(proc, when)
        left = wait_until_gone(tree, 20)
        assert not left, f"kill {i} at {when:.2f} s: left running {left}"
        html = tree / "_build" / "html"
        assert (html / "index.html").exists() and (html / "genindex.html").exists(), f"kill {i}: no complete HTML"
        version = _page_version(tree)
        assert version in (had, i), f"kill {i} at {when:.2f} s: the HTML shows version {version}"
        state = re.search(r"^HTML: (.*)$", gtbook("status", cwd=tree).stdout, re.M).group(1)
        assert state == ("up to date" if version == i else "out of date"), f"kill {i}: status says {state}"
        outcomes.append((round(when, 2), version == i))
        had = version
    proc = gtbook("build", "--no-wait", cwd=tree)  # after the kills a build runs normally
    assert _page_version(tree) == KILLS and "HTML: up to date" in gtbook("status", cwd=tree).stdout
    assert not list((tree / "_build").glob(".staging.*"))
    assert any(not new for _, new in outcomes), f"no kill left the old HTML: {outcomes}"
    print("kill times (s) and whether the HTML is the new build:", outcomes)
