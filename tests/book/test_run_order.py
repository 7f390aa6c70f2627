"""Under ``-j N`` the chapters start longest first, by their last run's time (never-run ones first)."""

from __future__ import annotations

import json

import pytest

from gtbook import execute
from gtbook.chapters import open_book
from minibook import make_mini_book
from test_book import gtbook

NAMES = ("01_tiny", "02_small", "03_third")


#: the last run times the tests write into the executed notebooks (real runs of these tiny chapters take
#: 1-4 s, in an order that the machine's load decides)
LAST = {"01_tiny": 20.0, "02_small": 10.0, "03_third": 30.0}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Three tiny chapters run once (quick); their recorded run times then set to :data:`LAST`."""
    path = make_mini_book(tmp_path_factory.mktemp("order") / "mini", NAMES)
    gtbook("run", "--profile", "quick", cwd=path)
    for name, seconds in LAST.items():
        nb = path / "executed" / f"{name}.ipynb"
        raw = json.loads(nb.read_text())
        raw["metadata"]["gtbook"]["runtime_s"] = seconds  # metadata: not part of the outputs' digest
        nb.write_text(json.dumps(raw))
    return path


def _runtimes(path):
    return {n: execute.read_meta(path / "executed" / f"{n}.ipynb")["runtime_s"] for n in NAMES}


def test_longest_first_orders_by_the_last_runtime(ran):
    assert _runtimes(ran) == LAST
    jobs = execute.plan(open_book(ran), "quick", None, [], jobs=2)
    assert [j.chapter.name for j in jobs] == list(NAMES)  # book order in the plan
    assert [j.chapter.name for j in execute.longest_first(jobs)] == ["03_third", "01_tiny", "02_small"]


def test_a_chapter_never_run_with_the_profile_starts_first(ran, tmp_path, monkeypatch):
    jobs = execute.plan(open_book(ran), "quick", None, [], jobs=2)
    meta_path = ran / "executed" / "02_small.ipynb"
    copy = tmp_path / "02_small.ipynb"
    raw = json.loads(meta_path.read_text())
    raw["metadata"]["gtbook"]["profile"] = "full"  # its last run was of another profile: no time known
    copy.write_text(json.dumps(raw))
    original = execute.read_meta

    def read_meta(path):
        return original(copy) if path == meta_path else original(path)

    monkeypatch.setattr(execute, "read_meta", read_meta)
    assert [j.chapter.name for j in execute.longest_first(jobs)] == ["02_small", "03_third", "01_tiny"]


def test_the_parallel_run_says_its_order(ran):
    proc = gtbook("run", "--profile", "quick", "-j", "2", "--force", cwd=ran)
    line = next(ln for ln in proc.stderr.splitlines() if "in this order" in ln)
    assert line.index("03_third") < line.index("01_tiny") < line.index("02_small"), line
