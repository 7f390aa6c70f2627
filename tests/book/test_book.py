"""The book pipeline: CLI errors, the cache, the lock, interruption, and the rendered book.

Nothing here writes into the repository's ``executed/`` or ``_build/``: pipeline tests run on a tiny
book written into a temporary folder (:mod:`minibook`), and the quick build of the real chapters is
made in a temporary copy of the tree (the ``built_book`` fixture), then opened in headless Chromium.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from browser import PAGE_REPORT, Browser, chromium_or_skip
from gtbook import build as book_build
from gtbook import chapters as book_chapters
from gtbook import cli as book_cli
from gtbook import execute as book_execute
from gtbook import provenance
from gtbook.lock import TreeLock
from minibook import make_mini_book

ROOT = Path(__file__).resolve().parents[2]
GTBOOK = [sys.executable, "-m", "gtbook"]


def _env(pythonpath=None):
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath or ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


def gtbook(*args, cwd=ROOT, check=True, pythonpath=None):
    proc = subprocess.run([*GTBOOK, *args], cwd=cwd, capture_output=True, text=True, env=_env(pythonpath))
    if check and proc.returncode != 0:
        raise AssertionError(f"gtbook {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture
def mini(tmp_path):
    return make_mini_book(tmp_path / "mini")


@pytest.fixture(scope="module")
def _ran_two(tmp_path_factory):
    """A two-chapter tiny book, run once with -j 2 (copied for each test that uses ``ran``)."""
    path = make_mini_book(tmp_path_factory.mktemp("ran") / "mini", ("01_tiny", "02_small"))
    proc = gtbook("run", "-j", "2", cwd=path)
    return path, proc


@pytest.fixture
def ran(_ran_two, tmp_path):
    path = tmp_path / "mini"
    shutil.copytree(_ran_two[0], path, ignore=shutil.ignore_patterns(".lock", ".publish.lock"))
    return path


# ------------------------------------------------------------------ bad input, quickly
def test_unknown_profile_lists_the_valid_ones():
    proc = gtbook("run", "--profile", "huge", check=False)
    assert proc.returncode == 2
    assert "unknown profile 'huge'" in proc.stderr and "full" in proc.stderr and "quick" in proc.stderr


def test_unknown_chapter_lists_the_valid_ones():
    proc = gtbook("run", "--only", "no_such_chapter", check=False)
    assert proc.returncode == 2
    assert "unknown chapter 'no_such_chapter'" in proc.stderr and "01_gaussian_invariance" in proc.stderr


def test_unknown_parameter_lists_the_valid_ones():
    proc = gtbook("run", "--only", "01_gaussian_invariance", "--set", "bogus=3", check=False)
    assert proc.returncode == 2
    assert "unknown parameter(s) bogus" in proc.stderr and "n_tokens" in proc.stderr


def test_set_goes_to_the_chapters_that_define_the_name():
    chapters = book_chapters.discover_chapters(book_chapters.open_book(ROOT))
    params = book_chapters.resolve_parameters(chapters, "full", ["n_tokens=1e2", "seed=3"])
    for name, chap in chapters.items():
        mine = params.get(name, {})
        assert ("seed" in mine) == ("seed" in chap.defaults) and mine.get("seed", 3) == 3
        assert ("n_tokens" in mine) == ("n_tokens" in chap.defaults)
    assert sum("seed" in chap.defaults for chap in chapters.values()) >= 7  # 4 and 5 keep a `seeds` dict per study
    assert params["01_gaussian_invariance"]["n_tokens"] == 100
    assert isinstance(params["01_gaussian_invariance"]["n_tokens"], int)


@pytest.mark.parametrize(
    "item, message",
    [
        ("n=abc", "n of 01_tiny is an int"),
        ("n=1.5", "got a float 1.5"),
        ("x=yes", "x of 01_tiny is a float"),
        ("sizes=3", "is a list"),
        ("label=4", "is a string"),
    ],
)
def test_set_value_of_the_wrong_type_is_caught_before_any_kernel(mini, item, message):
    chapters = book_chapters.discover_chapters(book_chapters.open_book(mini))
    with pytest.raises(book_chapters.BookError, match=re.escape(message)):
        book_chapters.resolve_parameters(chapters, "quick", [item])
    start = time.perf_counter()
    proc = gtbook("run", "--set", item, cwd=mini, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (mini / "executed" / "01_tiny.ipynb").exists() and time.perf_counter() - start < 30


def test_set_values_of_the_right_type_are_converted(mini):
    chapters = book_chapters.discover_chapters(book_chapters.open_book(mini))
    params = book_chapters.resolve_parameters(chapters, "full", ["x=2", "n=1e1", "sizes=(3, 4)", "label=b"])
    assert params["01_tiny"] == {"x": 2.0, "n": 10, "sizes": [3, 4], "label": "b"}
    assert isinstance(params["01_tiny"]["x"], float)


def test_repeated_only_keeps_every_chapter_once_in_book_order():
    args = book_cli._parser().parse_args(
        ["run", "--only", "03", "--only", "01_gaussian_invariance", "03_rank_and_reachability"]
    )
    assert args.only == ["03", "01_gaussian_invariance", "03_rank_and_reachability"]
    picked = book_chapters.select(book_chapters.discover_chapters(book_chapters.open_book(ROOT)), args.only)
    assert [c.name for c in picked] == ["01_gaussian_invariance", "03_rank_and_reachability"]


def test_profile_table_naming_no_chapter_is_an_error(monkeypatch):
    monkeypatch.setattr(
        book_chapters, "load_profiles", lambda *a, **k: {"quick": {"01_gausian_invariance": {"seed": 1}}}
    )
    with pytest.raises(book_chapters.BookError, match=r"01_gausian_invariance.*names no chapter"):
        book_chapters.resolve_parameters(book_chapters.discover_chapters(book_chapters.open_book(ROOT)), "quick", [])


def test_missing_parameters_tag_names_the_file(tmp_path):
    path = tmp_path / "09_untagged.py"
    path.write_text("# %%\nseed = 0\n")
    with pytest.raises(book_chapters.BookError, match=r"09_untagged\.py.*parameters"):
        book_chapters.chapter_defaults(path)


def test_every_chapter_is_in_the_toc():
    bk = book_chapters.open_book(ROOT)
    assert list(book_chapters.discover_chapters(bk)) == book_build.toc_chapters(bk)


# ------------------------------------------------------- the root: the working directory
def test_the_root_is_found_from_the_working_directory_not_the_install(mini, tmp_path):
    """A non-editable install: gtcore copied away from any book tree."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "gtcore", site / "gtcore", ignore=shutil.ignore_patterns("__pycache__"))
    status = gtbook("status", cwd=mini / "notebooks", pythonpath=site)  # from a subfolder too
    assert "01_tiny" in status.stdout and "missing" in status.stdout
    proc = gtbook("run", cwd=mini, pythonpath=site)
    assert "01_tiny" in proc.stdout and (mini / "executed" / "01_tiny.ipynb").exists()
    rows = json.loads(gtbook("claims", "--json", cwd=mini, pythonpath=site).stdout)
    assert [r["name"] for r in rows] == ["tiny_x"]
    assert gtbook("status", "--root", str(mini), cwd=tmp_path, pythonpath=site).stdout.count("fresh") == 1
    (mini / "executed" / "report.md").unlink()
    proc = gtbook("--root", str(mini), "run", cwd=tmp_path, pythonpath=site)  # the report needs the registry
    assert "fresh, not rerun: 01_tiny" in proc.stderr and (mini / "executed" / "report.md").exists()
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    proc = gtbook("run", cwd=empty, check=False, pythonpath=site)
    assert proc.returncode == 2 and "no _config.yml at or above" in proc.stderr and "--root" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_kernels_get_the_root_and_divided_threads(mini):
    env = book_execute._kernel_env(book_chapters.open_book(mini), "quick", 3)
    assert env["GTBOOK_ROOT"] == str(mini.resolve()) and env["OMP_NUM_THREADS"] == "3"
    assert "IProgress not found" in env["PYTHONWARNINGS"]


# -------------------------------------------------------------------------- claims
def test_claims_with_nothing_executed_says_how_to_run(mini):
    proc = gtbook("claims", cwd=mini, check=False)
    assert proc.returncode == 2
    assert "nothing has run yet" in proc.stderr and "gtbook run" in proc.stderr and not proc.stdout


def test_a_corrupted_executed_notebook_is_named(mini):
    (mini / "executed").mkdir()
    (mini / "executed" / "01_tiny.ipynb").write_text('{"cells": [')
    proc = gtbook("claims", cwd=mini, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "01_tiny.ipynb: not a readable notebook" in proc.stderr and "--force" in proc.stderr


# ------------------------------------------------------------------------ the cache
def test_a_second_run_skips_fresh_chapters_and_force_reruns(ran):
    out = ran / "executed"
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")}
    proc = gtbook("run", "-j", "2", cwd=ran)  # the fixture's -j: the same thread count, so the same keys
    assert "fresh, not rerun: 01_tiny, 02_small" in proc.stderr
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")} == before
    gtbook("run", "-j", "2", "--only", "02", "--force", cwd=ran)
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")}
    assert after["01_tiny.ipynb"] == before["01_tiny.ipynb"] and after["02_small.ipynb"] != before["02_small.ipynb"]


def test_editing_one_chapters_prose_reruns_only_that_chapter(ran):
    out = ran / "executed"
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")}
    src = ran / "notebooks" / "01_tiny.py"
    src.write_text(src.read_text().replace("for the pipeline's tests", "for the pipeline's tests, edited"))
    proc = gtbook("run", "-j", "2", cwd=ran)
    assert "fresh, not rerun: 02_small" in proc.stderr and "01_tiny:" in proc.stdout
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.ipynb")}
    assert after["02_small.ipynb"] == before["02_small.ipynb"] and after["01_tiny.ipynb"] != before["01_tiny.ipynb"]
    assert "edited" in nbformat.read(out / "01_tiny.ipynb", as_version=4).cells[0].source


def _states(bk, **kw):
    """The states ``gtbook status -j 2`` gives (the ``ran`` fixture ran with -j 2: the same thread count)."""
    return {s.name: (s.state, s.reasons) for s in book_execute.status(bk, **{"jobs": 2, **kw})}


def test_status_names_each_reason_for_staleness(ran, monkeypatch):
    bk = book_chapters.open_book(ran)
    assert _states(bk) == {"01_tiny": ("fresh", []), "02_small": ("fresh", [])}
    assert _states(bk, profile="quick") == {"01_tiny": ("fresh", []), "02_small": ("fresh", [])}
    # parameters: another profile, or a --set value
    assert _states(bk, profile="full")["01_tiny"] == ("stale", ["parameters"])
    assert _states(bk, profile="quick", sets=["x=0.7"])["02_small"] == ("stale", ["parameters"])
    # source
    src = ran / "notebooks" / "01_tiny.py"
    src.write_text(src.read_text() + "\n# %%\nprint(1)\n")
    assert _states(bk) == {"01_tiny": ("stale", ["source"]), "02_small": ("fresh", [])}
    src.unlink()
    make_mini_book(ran.parent / "fresh_copy")
    shutil.copy(ran.parent / "fresh_copy" / "notebooks" / "01_tiny.py", src)
    assert _states(bk)["01_tiny"] == ("fresh", [])
    # library and versions
    with monkeypatch.context() as m:
        m.setattr(provenance, "library_hash", lambda *a, **k: "edited gtcore")
        assert _states(bk)["01_tiny"] == ("stale", ["library"])
    real = provenance.key_versions()
    with monkeypatch.context() as m:
        m.setattr(provenance, "key_versions", lambda: {**real, "torch": "9.9"})
        assert _states(bk)["01_tiny"] == ("stale", ["versions"])
    # failed and missing
    (ran / "executed" / "failed").mkdir()
    (ran / "executed" / "failed" / "02_small.ipynb").write_text("{}")
    (ran / "executed" / "01_tiny.ipynb").unlink()
    assert _states(bk) == {"01_tiny": ("missing", []), "02_small": ("failed", [])}
    text = gtbook("status", "-j", "2", cwd=ran).stdout
    assert re.search(r"01_tiny\s+missing", text) and re.search(r"02_small\s+failed", text)


def test_the_library_hash_follows_the_modules_a_chapter_imports(tmp_path):
    """Editing one chapter's study reruns that chapter only; the CLI reruns none; eq. (1.1) reruns all."""
    pkg = tmp_path
    for name in ("gtcore", "gtbook"):
        shutil.copytree(ROOT / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__"))
    sources = {p.stem: p.read_text() for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))}

    def hashes():
        return {name: provenance.library_hash(src, pkg) for name, src in sources.items()}

    def edit(rel):
        (pkg / rel).write_text((pkg / rel).read_text() + "\n# an edit\n")

    h0 = hashes()
    edit("gtbook/cli.py")
    assert hashes() == h0
    edit("gtbook/studies/stability/finite_n.py")  # the pole study: chapter 4 only (chapter 8 reuses the harness)
    h1 = hashes()
    assert [n for n in h0 if h1[n] != h0[n]] == ["04_stability_regimes"]
    edit("gtcore/moments/__init__.py")  # every chapter that can integrate eq. (1.1): all but the pretrained one
    h2 = hashes()
    assert [n for n in h0 if h2[n] == h1[n]] == ["05_pretrained_moments"]


def test_editing_the_imported_library_stales_exactly_its_importers(tmp_path):
    """Through the imported package, no root passed: the key sees the modules a chapter really runs."""
    lib = tmp_path / "lib"
    for name in ("gtcore", "gtbook"):
        shutil.copytree(ROOT / name, lib / name, ignore=shutil.ignore_patterns("__pycache__"))
    book = make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))
    src = book / "notebooks" / "01_tiny.py"
    study = "gtbook.studies.stability.closed_forms"
    src.write_text(src.read_text().replace("import time\n", f"import time\n\nimport {study}\n"))
    from gtbook import imports as deps

    assert study in deps.chapter_modules(src.read_text())  # the installed package: not empty
    gtbook("run", cwd=book, pythonpath=lib)
    text = gtbook("status", cwd=book, pythonpath=lib).stdout
    assert re.search(r"01_tiny\s+fresh", text) and re.search(r"02_small\s+fresh", text), text
    edited = lib / "gtbook" / "studies" / "stability" / "closed_forms.py"
    edited.write_text(edited.read_text() + "\n_EDITED = 1\n")
    text = gtbook("status", cwd=book, pythonpath=lib).stdout
    assert re.search(r"01_tiny\s+stale.*library", text) and re.search(r"02_small\s+fresh", text), text
    edited = lib / "gtcore" / "moments" / "ode.py"  # eq. (1.1): the chapter that can run it, not the other
    edited.write_text(edited.read_text() + "\n_EDITED = 1\n")
    text = gtbook("status", cwd=book, pythonpath=lib).stdout
    assert re.search(r"01_tiny\s+stale.*library", text) and re.search(r"02_small\s+fresh", text), text
    edited = lib / "gtbook" / "claims.py"  # the claims' recorder: both chapters
    edited.write_text(edited.read_text() + "\n_EDITED = 1\n")
    text = gtbook("status", cwd=book, pythonpath=lib).stdout
    assert re.search(r"01_tiny\s+stale", text) and re.search(r"02_small\s+stale.*library", text), text


def test_a_chapter_that_imports_the_library_never_gets_an_empty_closure(tmp_path):
    from gtbook import imports as deps

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        modules = deps.chapter_modules(path.read_text())
        assert any(m.startswith("gtcore.") and m != "gtcore.status" for m in modules), path.name
    with pytest.raises(RuntimeError, match="no module of it was found"):
        deps.chapter_modules("from gtcore.riccati import blowup_time\n", tmp_path)


def test_build_is_skipped_when_nothing_changed(ran, monkeypatch):
    bk = book_chapters.open_book(ran)
    calls = []

    def fake_jupyter_book(cmd, cwd):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--path-output") + 1]) / "_build" / "html"  # its staging folder
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_text("<html></html>")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(book_build.subprocess, "run", fake_jupyter_book)
    book_build.build(bk)
    book_build.build(bk)
    assert len(calls) == 1
    (ran / "book" / "extra.md").write_text("a new prose page\n")
    book_build.build(bk)
    assert len(calls) == 2
    book_build.build(bk, force=True)
    assert len(calls) == 3


# --------------------------------------------------------------------- parallel, lock
def test_parallel_chapters_divide_the_threads(_ran_two):
    path, proc = _ran_two
    assert "2 at a time" in proc.stderr
    from gtbook import plan as book_plan

    cores = book_plan._cores()
    for name in ("01_tiny", "02_small"):
        meta = book_execute.read_meta(path / "executed" / f"{name}.ipynb")
        assert meta["threads"] == max(1, cores // 2)
    assert not list((path / "executed" / ".running").iterdir())


def test_a_second_run_fails_clearly_with_no_wait_and_waits_without(mini):
    lock = TreeLock(mini / "executed" / ".lock", what="gtbook run --profile full")
    lock.acquire()
    try:
        proc = gtbook("run", "--no-wait", cwd=mini, check=False)
        assert proc.returncode == 2 and "already running" in proc.stderr
        assert f"pid {os.getpid()}" in proc.stderr and "gtbook run --profile full" in proc.stderr
        waiting = subprocess.Popen(
            [*GTBOOK, "run"], cwd=mini, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(4)
        assert waiting.poll() is None and not (mini / "executed" / "01_tiny.ipynb").exists()
    finally:
        lock.release()
    _, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and "waiting for" in err
    assert (mini / "executed" / "01_tiny.ipynb").exists()


def test_concurrent_runs_of_one_chapter_use_their_own_scratch_files(mini, monkeypatch):
    import papermill

    bk = book_chapters.open_book(mini)
    chapter = book_chapters.discover_chapters(bk)["01_tiny"]
    outputs = []

    def fake_execute(source, out, **kw):
        outputs.append(out)
        time.sleep(0.5)  # both runs are in flight at once
        shutil.copy(source, out)

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    errors = []

    def one(value):
        try:
            book_execute.run_chapter(chapter, {"x": value}, "quick")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(v,)) for v in (0.25, 0.75)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(outputs)) == 2
    meta = book_execute.read_meta(mini / "executed" / "01_tiny.ipynb")
    assert meta["parameters"]["x"] in (0.25, 0.75)
    assert not list((mini / "executed" / ".running").iterdir())


# ----------------------------------------------------------------- failure, interrupt
def test_failed_chapter_keeps_the_last_good_output(mini):
    bk = book_chapters.open_book(mini)
    chapter = book_chapters.discover_chapters(bk)["01_tiny"]
    good = mini / "executed" / "01_tiny.ipynb"
    good.parent.mkdir()
    good.write_text("previous good output")
    with pytest.raises(book_chapters.BookError) as err:
        book_execute.run_chapter(chapter, {"x": 5.0}, "quick")
    msg = str(err.value)
    assert "01_tiny" in msg and "cell" in msg and "ClaimFailed" in msg and "tiny_x" in msg
    assert good.read_text() == "previous good output"
    assert (mini / "executed" / "failed" / "01_tiny.ipynb").exists()
    assert book_execute.status(bk)[0].state == "failed"
    # the same chapter passes with a parameter override, and then replaces the output
    book_execute.run_chapter(chapter, {"x": 1.5}, "quick")
    nb = nbformat.read(good, as_version=4)
    assert nb.metadata["gtbook"]["parameters"]["x"] == 1.5
    assert not (mini / "executed" / "failed" / "01_tiny.ipynb").exists()


def test_ctrl_c_stops_cleanly_with_one_line_and_keeps_the_last_good_output(mini):
    good = mini / "executed" / "01_tiny.ipynb"
    good.parent.mkdir()
    good.write_text("previous good output")
    proc = subprocess.Popen(
        [*GTBOOK, "run", "--set", "pause=120.0"],
        cwd=mini,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    running = mini / "executed" / ".running"
    deadline = time.time() + 60
    while time.time() < deadline and not (running.is_dir() and any(running.glob("01_tiny.*/kernel.log"))):
        time.sleep(0.2)
    time.sleep(4)  # the kernel is inside the chapter's cells
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines()[-1].startswith("gtbook: interrupted")
    assert good.read_text() == "previous good output"
    assert not list(running.iterdir())


def test_publish_is_atomic_even_across_filesystems(mini, monkeypatch):
    # a scratch folder on another filesystem (EXDEV) and a Ctrl-C in the middle of the copy: shutil.move
    # would copy straight into executed/ and leave half a notebook there; publish must leave the old one
    import errno

    bk = book_chapters.open_book(mini)
    dest = mini / "executed" / "01_tiny.ipynb"
    dest.parent.mkdir()
    dest.write_text("previous good output")
    src = mini / "scratch" / "01_tiny.ipynb"
    src.parent.mkdir()
    src.write_text("new notebook " * 20000)
    real_replace = os.replace

    def same_device_only(a, b, *args, **kwargs):
        if Path(a).resolve().parent != Path(b).resolve().parent:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(a, b, *args, **kwargs)

    def half_then_interrupted(fsrc, fdst, *args, **kwargs):
        data = fsrc.read()
        fdst.write(data[: len(data) // 2])
        fdst.flush()
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", same_device_only)
    monkeypatch.setattr(os, "rename", same_device_only)
    monkeypatch.setattr(shutil, "copyfileobj", half_then_interrupted)
    monkeypatch.setattr(shutil, "_fastcopy_sendfile", half_then_interrupted, raising=False)
    with pytest.raises(KeyboardInterrupt):
        book_execute._publish(bk, src, dest)
    assert dest.read_text() == "previous good output"
    assert sorted(p.name for p in dest.parent.iterdir()) == [".publish.lock", "01_tiny.ipynb"]
    monkeypatch.undo()
    monkeypatch.setattr(os, "replace", same_device_only)
    book_execute._publish(bk, src, dest)  # uninterrupted, still across "filesystems"
    assert dest.read_text() == "new notebook " * 20000 and not src.exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == [".publish.lock", "01_tiny.ipynb"]


def test_ctrl_c_under_j_keeps_every_notebook_whole(ran):
    executed = ran / "executed"
    before = {p.name: p.read_bytes() for p in executed.glob("*.ipynb")}
    assert sorted(before) == ["01_tiny.ipynb", "02_small.ipynb"]
    proc = subprocess.Popen(
        [*GTBOOK, "run", "-j", "2", "--force", "--set", "pause=120.0"],
        cwd=ran,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    running = executed / ".running"
    deadline = time.time() + 90
    while time.time() < deadline and len(list(running.glob("*/kernel.log"))) < 2:
        time.sleep(0.2)
    time.sleep(4)  # both kernels are inside the chapter's cells
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err[-3000:]
    assert {p.name: p.read_bytes() for p in executed.glob("*.ipynb")} == before
    for name in before:
        nbformat.read(executed / name, as_version=4)
    assert not list(executed.glob(".*.tmp")) and not list(running.iterdir())


# ---------------------------------------------------------- overrides and provenance
def test_set_overrides_are_recorded_in_claims_report_and_page(mini):
    gtbook("run", "--set", "x=1.25", "--set", "seed=4", cwd=mini)
    rows = json.loads(gtbook("claims", "--json", cwd=mini).stdout)
    assert rows[0]["overrides"] == {"x": 1.25, "seed": 4} and rows[0]["seed"] == 4
    assert "seed=4 x=1.25" in gtbook("claims", "--wide", cwd=mini).stdout  # sorted by name
    report = (mini / "executed" / "report.md").read_text()
    assert "| {doc}`01_tiny <01_tiny>` | `quick` | `4` | `seed=4 x=1.25` |" in report
    nb = nbformat.read(mini / "executed" / "01_tiny.ipynb", as_version=4)
    box = nb.cells[0].source
    assert box.startswith("# 01_tiny\n") and "How this page was made" in box
    rerun = re.search(r"\*\*Rerun:\*\* `([^`]*)`", box).group(1)
    assert rerun == "gtbook run --only 01_tiny --profile quick --set seed=4 --set x=1.25"
    args = book_cli._parser().parse_args(rerun.split()[1:])
    assert args.set == ["seed=4", "x=1.25"] and args.profile == "quick"
    assert "`x = 1.25` (`--set`)" in box and "`seed = 4` (`--set`)" in box and "1 of 1 passed" in box
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "remove-cell" in injected[0].metadata["tags"]
    meta = nb.metadata["gtbook"]
    assert meta["cache"]["key"] in box and meta["environment"]["python"]
    assert "/" not in json.dumps(meta["environment"]["packages"])  # versions, not paths


# ---------------------------------------------------------------- the quick book, built once
from conftest import snapshot as _snapshot  # noqa: E402


@pytest.mark.slow
def test_the_users_book_is_untouched(built_book):
    tree, before = built_book
    assert (tree / "_build" / "html" / "index.html").exists()
    for name, snap in before.items():
        assert _snapshot(ROOT / name) == snap, f"the test suite changed the user's {name}/"


@pytest.mark.slow
def test_every_claim_passes_and_is_reported(built_book):
    tree, _ = built_book
    rows = json.loads(gtbook("claims", "--json", cwd=tree).stdout)
    chapters = {r["chapter"] for r in rows}
    assert chapters == set(book_build.toc_chapters(book_chapters.open_book(tree)))
    for r in rows:
        assert {"chapter", "name", "statement", "kind", "value", "threshold", "passed", "profile", "overrides"} <= set(
            r
        )
        assert r["passed"] is True and r["profile"] == "quick" and r["overrides"] == {}
    text = (tree / "executed" / "report.md").read_text()
    assert f"{len(rows)} claims in all" in text and "statements of the paper reproduced" in text
    assert "## How these chapters were made" in text and "| numpy |" in text and "| CPU |" in text


@pytest.mark.slow
def test_same_profile_and_seed_give_identical_claims(built_book):
    tree, _ = built_book
    name = "01_gaussian_invariance"
    before = [r for r in json.loads(gtbook("claims", "--json", cwd=tree).stdout) if r["chapter"] == name]
    gtbook("run", "--profile", "quick", "--only", name, "--force", cwd=tree)
    after = [r for r in json.loads(gtbook("claims", "--json", cwd=tree).stdout) if r["chapter"] == name]
    assert before == after and len(before) >= 5


#: what a rendered page must never show
UNCLEAN = {
    "a warning": re.compile(r"\b[A-Z]\w*Warning\b"),
    "a traceback": re.compile(r"Traceback \(most recent call last\)"),
    "a stderr output": re.compile(r'class="[^"]*\boutput stderr\b'),
    "an absolute path": re.compile(r"(?<![\w.:/])/(?:home|root|tmp|usr|opt|work|var|Users)/[\w.-]+"),
    "a site-packages path": re.compile(r"site-packages"),
    "an object repr with an address": re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>"),
    "papermill's raw parameters cell": re.compile(r"# Parameters\b"),
    "a foreign repository": re.compile(r"github\.com/gtbook|mybinder|colab\.research"),
}


@pytest.mark.slow
def test_rendered_pages_are_clean(built_book):
    tree, _ = built_book
    html = tree / "_build" / "html"
    pages = sorted([*(html / "executed").glob("*.html"), *(html / "book").glob("*.html")])
    assert len(pages) >= len(book_build.toc_chapters(book_chapters.open_book(tree))) + 2
    problems = []
    for page in pages:
        text = page.read_text()
        text = text.replace(str(tree), "<TREE>")  # still caught below as <TREE>
        for what, pattern in UNCLEAN.items():
            m = pattern.search(text)
            if m or "<TREE>" in text:
                problems.append(
                    f"{page.relative_to(html)}: {what if m else 'the build folder'}: "
                    f"{text[max(0, (m.start() if m else text.index('<TREE>')) - 80) :][:200]!r}"
                )
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_chapter_pages_open_with_their_provenance_box(built_book):
    tree, _ = built_book
    html = tree / "_build" / "html" / "executed"
    for name in book_build.toc_chapters(book_chapters.open_book(tree)):
        text = (html / f"{name}.html").read_text()
        words = re.sub(r"<[^>]+>", "", text)
        assert "How this page was made" in words and "gtbook run --only " + name in words
        assert text.index("How this page was made") < text.index('class="cell')  # it opens the page
    ch1 = (html / "01_gaussian_invariance.html").read_text()
    for n in range(1, 5):
        assert f"Fig. {n}" in ch1
    alts = re.findall(r'<img[^>]*alt="([^"]*)"', ch1)
    assert len(alts) >= 4 and all(len(a) > 20 for a in alts[:4])
    assert re.search(r'fitted slopes are <span class="pasted-text">-0\.\d\d</span>', ch1)  # a glued number


#: the chapters' prose names that link to the API reference ({py:func} and {py:mod} roles in notebooks/*.py)
API_LINKS = {
    "03_rank_and_reachability": (
        "reachability.html#gtcore.reachability.steer",
        "particles.html#gtcore.particles.simulate",
    ),
    "04_stability_regimes": (
        "riccati.html#gtcore.riccati.blowup_time",
        "particles.html#gtcore.particles.simulate",
        "riccati.html#gtcore.poles.particle_radius_bound",
        "stability.html#module-gtcore.stability",
        "stability.html#gtcore.stability.equilibrium",
        "studies.html#module-gtbook.studies.stability.kalman",
        "studies.html#module-gtbook.studies.stability.ensembles",
    ),
    "05_pretrained_moments": (
        "studies.html#module-gtbook.studies.pretrained.criterion",
        "models.html#module-gtcore.models",
    ),
    "06_prescribed_attention": (
        "models.html#module-gtcore.models.prescribed",
        "particles.html#gtcore.particles.simulate",
    ),
    "07_attention_families": (
        "attention.html#module-gtcore.attention",
        "riccati.html#gtcore.riccati.blowup_time",
        "attention.html#gtcore.attention.sinkhorn.gaussian_conditional_gain",
    ),
    "08_regime_atlas": (
        "studies.html#module-gtbook.studies.atlas.outcomes",
        "moments.html#module-gtcore.moments.lanes",
        "riccati.html#gtcore.riccati.blowup_time",
        "stability.html#gtcore.stability.classify",
        "moments.html#gtcore.moments.integrate_moments",
    ),
    "09_learning_reachability": (
        "training.html#gtcore.training.transformer_tokens",
        "training.html#module-gtcore.training",
        "particles.html#gtcore.particles.simulate",
        "training.html#gtcore.training.rank_floor",
        "studies.html#gtbook.studies.learning.harness.null_losses",
    ),
}


def api_reference_problems(html: Path) -> list[str]:
    """What the rendered API reference (``html/book/api``) lacks: a page of the toc's "API reference" part,
    an object of the public API (:mod:`public_api`) in the Sphinx inventory, a name of ``gtcore.__all__``
    in the index's table, or a link (a reference to a gtcore name rendered as code with no link: the build
    resolves every one, with ``-n``, and this says so even without it)."""
    import zlib

    import yaml

    import gtcore
    from public_api import api_data, api_objects

    problems = []
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    part = [p for p in toc["parts"] if p["caption"] == "API reference"]
    files = [c["file"] for c in part[0]["chapters"]] if part else []
    if not files:
        problems.append('_toc.yml has no "API reference" part')
    for f in files:
        if not (html / f"{f}.html").exists():
            problems.append(f"{f}.html was not rendered")
    # Sphinx's inventory: four header lines, then zlib-compressed lines "name domain:role priority uri dispname"
    body = zlib.decompress((html / "objects.inv").read_bytes().split(b"\n", 4)[4]).decode()
    names = {line.split(" ", 1)[0] for line in body.splitlines() if line.strip()}
    problems += [f"{q} is not in the API reference" for q in api_objects() if q not in names]
    for module, constants in api_data().items():
        for c in constants:
            if not any(n.startswith(module + ".") and n.endswith("." + c) for n in names):
                problems.append(f"{module}.{c} is not in the API reference")
    index = (html / "book" / "api" / "index.html").read_text() if files else ""
    problems += [f"the API index does not list gtcore.{n}" for n in gtcore.__all__ if f">{n}</span>" not in index]
    ours = {n.rsplit(".", 1)[-1] for n in names if n.startswith("gtcore")}
    for page in sorted((html / "book" / "api").glob("*.html")):  # a reference to gtcore shown without a link
        text = page.read_text()
        for m in re.finditer(r'<code class="xref py py-\w+ docutils literal notranslate">(.*?)</code>', text):
            shown = re.sub(r"<[^>]+>", "", m.group(1)).removesuffix("()")
            linked = re.search(r"<a [^>]*>\s*$", text[max(0, m.start() - 400) : m.start()])
            if not linked and (shown.startswith("gtcore") or shown.split(".")[-1] in ours):
                problems.append(f"{page.name}: {shown} is not linked")
    return problems


@pytest.mark.slow
def test_the_api_reference_documents_the_public_api_and_the_chapters_link_to_it(built_book):
    tree, _ = built_book
    html = tree / "_build" / "html"
    problems = api_reference_problems(html)
    for chapter, targets in API_LINKS.items():
        text = (html / "executed" / f"{chapter}.html").read_text()
        problems += [f"{chapter} does not link to {t}" for t in targets if f'href="../book/api/{t}"' not in text]
    assert not problems, "\n".join(problems)


def test_a_docstring_edit_rebuilds_the_book():
    """The API part renders gtcore's docstrings: its sources are inputs of the build's cache key."""
    import gtcore

    inputs = set(book_build.build_inputs(book_chapters.open_book(ROOT)))
    sources = set(Path(gtcore.__file__).parent.rglob("*.py"))
    assert sources and sources <= inputs


@pytest.mark.slow
def test_rendered_pages_in_a_browser(built_book):
    tree, _ = built_book
    html = tree / "_build" / "html"
    exe = chromium_or_skip()
    browser = Browser(exe)
    try:
        chapter = browser.open((html / "executed" / "01_gaussian_invariance.html").as_uri())
        seen = browser.evaluate(chapter, PAGE_REPORT)
        browser.screenshot(chapter, tree / "_build" / "chapter1.png")
        assert seen["mathjax"] > 10, "equations were not typeset by MathJax"
        assert not seen["raw_tex"], "raw TeX delimiters are visible on the page"
        figures = [i for i in seen["images"] if "_images/" in i["src"]]
        assert len(figures) >= 4, f"expected the chapter's figures, found {figures}"
        broken = [i["src"] for i in seen["images"] if not i["ok"]]
        assert not broken, f"images that did not load: {broken}"
        assert "PASS" in seen["text"] and "How this page was made" in seen["text"]

        report_page = browser.open((html / "executed" / "report.html").as_uri())
        seen = browser.evaluate(report_page, PAGE_REPORT)
        browser.screenshot(report_page, tree / "_build" / "report.png")
        rows = json.loads(gtbook("claims", "--json", cwd=tree).stdout)
        for r in rows:
            assert r["name"] in seen["text"]
        assert seen["text"].count("PASS") >= len(rows) and "FAIL" not in seen["text"]
        assert not seen["clipped_tables"], f"tables wider than the page: {seen['clipped_tables']}"
    finally:
        browser.close()


@pytest.mark.parametrize("doc", ["README.md", "book/intro.md"])
def test_documented_rerun_commands_name_real_parameters(doc):
    chapters = book_chapters.discover_chapters(book_chapters.open_book(ROOT))
    lines = [line for line in (ROOT / doc).read_text().splitlines() if "gtbook run --only" in line]
    assert lines, f"{doc} shows no `gtbook run --only` example"
    for line in lines:
        only = re.search(r"--only (\S+)", line).group(1)
        chapter = book_chapters.select(chapters, [only])[0]
        for name in re.findall(r"--set (\w+)=", line):
            assert name in chapter.defaults, f"{doc}: {name} is not a parameter of {chapter.name}"


def test_a_renamed_chapter_leaves_an_orphan_that_nothing_counts(ran):
    """Rename 02_small's source and make the new chapter fail: the old notebook is an orphan (status says so,
    claims and the report leave it out), the new one has no good output, and clean --orphans removes it."""
    src = ran / "notebooks" / "02_small.py"
    new = ran / "notebooks" / "02_other.py"
    new.write_text(src.read_text().replace("lt=2.0", "lt=0.1"))  # its claim fails now
    src.unlink()
    for name, old, new_text in (
        ("_toc.yml", "executed/02_small", "executed/02_other"),
        ("notebooks/profiles.toml", "quick.02_small", "quick.02_other"),
    ):
        (ran / name).write_text((ran / name).read_text().replace(old, new_text))
    proc = gtbook("run", "-j", "2", cwd=ran, check=False)
    assert proc.returncode == 2 and not (ran / "executed" / "02_other.ipynb").exists()
    text = gtbook("status", "-j", "2", cwd=ran).stdout
    assert re.search(r"02_small\s+orphan", text) and re.search(r"02_other\s+failed", text), text
    claims = gtbook("claims", cwd=ran).stdout
    assert "1 claims in 1 chapter: 1 pass, 0 fail" in claims and "02_small" in claims.split("not counted")[1]
    from gtbook import report

    page = report.report_markdown(ran / "executed")
    assert "orphans, not counted here" in page and "02\\_small" not in page.split("orphans, not counted")[0]
    assert "no good output" in page and "last good output" not in page
    assert "removed orphan notebooks: 02_small" in gtbook("clean", "--orphans", cwd=ran).stdout
    assert not (ran / "executed" / "02_small.ipynb").exists() and (ran / "executed" / "01_tiny.ipynb").exists()
    assert "orphan" not in gtbook("status", "-j", "2", cwd=ran).stdout
