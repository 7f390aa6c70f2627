"""The pipeline under faults (issue 24, items 9-19): one regression test per item, and the kill tests.

Each test drives the real ``gtbook`` command on the tiny book of :mod:`minibook` in a temporary folder
(the user's ``executed/`` and ``_build/`` are never touched). ``$GTBOOK_CODE_UNDER_TEST`` names the
source tree whose ``gtcore`` the commands run (default: this checkout), so the same tests can be run
against an older landing to show what they catch.

The kill tests ``kill -9`` a ``gtbook run -j 2`` and a ``gtbook build`` at random times (seeded) and
check, after each kill, that every executed notebook and the HTML are the old or the new complete
output, that nothing the killed command started is still running, and that ``gtbook status`` tells the
truth about both.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from minibook import make_mini_book

ROOT = Path(__file__).resolve().parents[2]
CODE = Path(os.environ.get("GTBOOK_CODE_UNDER_TEST", ROOT))
GTBOOK = [sys.executable, "-m", "gtbook"]
LINUX = sys.platform.startswith("linux") and Path("/proc/self/cmdline").exists()
needs_proc = pytest.mark.skipif(not LINUX, reason="the fault tests find processes through /proc (Linux)")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CODE), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def gtbook(*args, cwd, check=True, timeout=300, **env):
    proc = subprocess.run([*GTBOOK, *args], cwd=cwd, capture_output=True, text=True, env=_env(**env), timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"gtbook {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def start(*args, cwd, **env):
    return subprocess.Popen(
        [*GTBOOK, *args],
        cwd=cwd,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def processes_of(tree: Path) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line or environment names ``tree`` (pid, command)."""
    key = str(tree).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            env = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or not cmd:
            continue
        if key in cmd or b"GTBOOK_ROOT=" + key + b"\0" in env:
            found.append((int(entry), cmd.replace(b"\0", b" ").decode(errors="replace")[:200]))
    return found


def wait_until_gone(tree: Path, seconds: float) -> list[tuple[int, str]]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = processes_of(tree)
        if not left:
            return []
        time.sleep(0.2)
    return processes_of(tree)


def kill_all(tree: Path) -> None:
    for pid, _ in processes_of(tree):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ran_x(tree: Path, chapter: str) -> float:
    return nbformat.read(tree / "executed" / f"{chapter}.ipynb", as_version=4).metadata["gtbook"]["parameters"]["x"]


def state_of(text: str, chapter: str) -> str:
    m = re.search(rf"^{re.escape(chapter)}\s+(\w+)", text, re.M)
    assert m, text
    return m.group(1)


@pytest.fixture
def tree(tmp_path):
    path = make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))
    yield path
    kill_all(path)


@pytest.fixture
def three(tmp_path):
    path = make_mini_book(tmp_path / "mini3", ("01_tiny", "02_small", "03_third"))
    yield path
    kill_all(path)


# ----------------------------------------------------------------- 9: orphans of run -j 2
@needs_proc
def test_9_kill_9_of_run_j2_leaves_no_worker_and_no_late_publish(tree):
    gtbook("run", "-j", "2", "--set", "x=0.25", cwd=tree)
    proc = start("run", "-j", "2", "--force", "--set", "x=0.75", "--set", "pause=30.0", cwd=tree)
    running = tree / "executed" / ".running"
    deadline = time.time() + 90
    while time.time() < deadline and len(list(running.glob("*/kernel.log"))) < 2:
        time.sleep(0.2)
    time.sleep(2)  # both kernels are inside the chapter's cells, 28 s from publishing
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.time()
    proc.communicate()
    left = wait_until_gone(tree, 10)
    assert not left, f"processes of the killed run still running 10 s after the kill: {left}"
    # a later run publishes its notebooks, and nothing of the killed run overwrites them afterwards
    gtbook("run", "-j", "2", "--set", "x=1.5", cwd=tree)
    time.sleep(max(0.0, killed + 35 - time.time()))  # past the moment the killed run would have published
    assert ran_x(tree, "01_tiny") == ran_x(tree, "02_small") == 1.5
    text = gtbook("status", "-j", "2", "--set", "x=1.5", cwd=tree).stdout
    assert state_of(text, "01_tiny") == state_of(text, "02_small") == "fresh"
    assert not list((tree / "executed").rglob("*.job.json")), "job files leaked"


def test_9_a_worker_publishes_only_while_its_run_holds_the_lock(tree):
    """The publish guard of a worker (run in a child of this process, as a worker is): its parent alive
    and holding the tree's lock, with the token the worker was given."""
    from gtbook.lock import TreeLock

    code = (
        "import json, sys; from gtbook.execute import _worker_guard; "
        "print(json.dumps(_worker_guard(json.loads(sys.argv[1]))()))"
    )

    def guard(spec):
        proc = subprocess.run(
            [sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True, env=_env()
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    lock = TreeLock(tree / "executed" / ".lock", what="gtbook run")
    lock.acquire()
    try:
        spec = {"parent": os.getpid(), "token": lock.token, "lock": str(lock.path)}
        assert guard(spec) is None
        assert "no longer holds" in guard({**spec, "token": "another run's token"})
        assert "is gone" in guard({**spec, "parent": os.getppid()})
    finally:
        lock.release()
    assert "no longer holds" in guard(spec)  # released: the run that started the worker is over


# ------------------------------------------------------------- 10: kill -9 of build
@needs_proc
def test_10_kill_9_of_build_kills_jupyter_book_before_a_second_build_runs(tree):
    gtbook("run", "-j", "2", cwd=tree)
    proc = start("build", cwd=tree)
    deadline = time.time() + 120
    while time.time() < deadline and not any("jupyter-book" in c or "jupyter_book" in c for _, c in processes_of(tree)):
        time.sleep(0.1)
    time.sleep(1.5)  # Jupyter Book is writing
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    time.sleep(1)
    left = processes_of(tree)
    assert not left, f"the killed build left writers running: {left}"
    second = gtbook("build", "--no-wait", cwd=tree)
    assert "book built" in second.stdout
    assert (tree / "_build" / "html" / "index.html").exists()
    assert "HTML: up to date" in gtbook("status", cwd=tree).stdout


# ----------------------------------------------------------- 11: symlinks never followed
@pytest.mark.parametrize("name", [".lock", ".publish.lock"])
def test_11_a_symlinked_lock_is_refused_and_its_target_untouched(tree, tmp_path, name):
    gtbook("run", cwd=tree)
    target = tmp_path / "precious.txt"
    target.write_text("precious data\n")
    lock = tree / "executed" / name
    lock.unlink(missing_ok=True)
    lock.symlink_to(target)
    for args in (("run", "--force"), ("build",)):
        proc = gtbook(*args, cwd=tree, check=False)
        assert target.read_text() == "precious data\n", f"gtbook {args[0]} wrote through the symlink {name}"
        if name == ".lock" or args[0] == "run":  # (build publishes nothing through .publish.lock)
            assert proc.returncode == 2 and "symlink" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert lock.is_symlink()


def test_11_publishing_replaces_a_symlinked_notebook_never_its_target(tree, tmp_path):
    gtbook("run", cwd=tree)
    target = tmp_path / "elsewhere.ipynb"
    target.write_text("not the book's\n")
    page = tree / "executed" / "01_tiny.ipynb"
    page.unlink()
    page.symlink_to(target)
    gtbook("run", "--only", "01", cwd=tree)
    assert target.read_text() == "not the book's\n" and not page.is_symlink()
    nbformat.read(page, as_version=4)


# ------------------------------------------------------------ 12: edited notebooks noticed
def _edit_claims(path: Path, edit) -> None:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            rec = out.get("data", {}).get("application/vnd.gtbook.claim+json")
            if rec is not None:
                edit(rec)
    path.write_text(json.dumps(nb))


def test_12_an_edited_claim_value_is_reported_as_failing_and_status_is_stale(tree):
    gtbook("run", cwd=tree)
    page = tree / "executed" / "01_tiny.ipynb"
    _edit_claims(page, lambda rec: rec.update(value=123.0))  # under "value < 2", still "passed": true
    rows = {r["name"]: r for r in json.loads(gtbook("claims", "--json", cwd=tree).stdout)}
    assert rows["tiny_x"]["passed"] is False and rows["small_x"]["passed"] is True
    assert "FAIL" in gtbook("claims", "--failed", cwd=tree).stdout
    text = gtbook("status", cwd=tree).stdout
    assert state_of(text, "01_tiny") == "stale" and "edited" in text and state_of(text, "02_small") == "fresh"
    gtbook("run", "--only", "02", "--force", cwd=tree)  # rewrites the report
    report = (tree / "executed" / "report.md").read_text()
    assert "✘ FAIL" in report and "edited" in report
    proc = gtbook("build", cwd=tree, check=False)
    assert proc.returncode == 2 and "01_tiny" in proc.stderr and "changed after" in proc.stderr
    gtbook("run", cwd=tree)  # `gtbook run` reruns the edited chapter
    assert state_of(gtbook("status", cwd=tree).stdout, "01_tiny") == "fresh"


def test_12_an_edited_criterion_does_not_pass_either(tree):
    gtbook("run", cwd=tree)
    page = tree / "executed" / "01_tiny.ipynb"
    _edit_claims(page, lambda rec: rec.update(value=123.0, threshold="value < 200"))
    rows = {r["name"]: r for r in json.loads(gtbook("claims", "--json", cwd=tree).stdout)}
    assert rows["tiny_x"]["passed"] is False


def test_12_a_notebook_with_its_outputs_stripped_is_stale_and_warned_about(tree):
    gtbook("run", cwd=tree)
    page = tree / "executed" / "01_tiny.ipynb"
    nb = json.loads(page.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
    page.write_text(json.dumps(nb))
    text = gtbook("status", cwd=tree).stdout
    assert state_of(text, "01_tiny") == "stale" and "1 claims, it holds 0" in text
    gtbook("run", "--only", "02", "--force", cwd=tree)
    assert "its outputs were changed after its run" in (tree / "executed" / "report.md").read_text()


# --------------------------------------------------------------- 13: a string runtime_s
def test_13_status_with_a_string_runtime(tree):
    gtbook("run", cwd=tree)
    page = tree / "executed" / "01_tiny.ipynb"
    nb = json.loads(page.read_text())
    nb["metadata"]["gtbook"]["runtime_s"] = "about a minute"
    page.write_text(json.dumps(nb))
    proc = gtbook("status", cwd=tree, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "? s" in proc.stdout
    gtbook("claims", cwd=tree)
    gtbook("run", "--only", "02", "--force", cwd=tree)  # the report too
    assert "? s" in (tree / "executed" / "report.md").read_text()


# -------------------------------------------------------- 14: read-only folder, full disk
def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
        ).returncode
        == 0
    )


@pytest.fixture
def executed_on_tmpfs(tree):
    """``executed/`` of a book that ran, moved onto a 5 MB tmpfs (root only; else the folder is made
    read-only with chmod, which binds a non-root user)."""
    gtbook("run", cwd=tree)
    saved = tree.parent / "executed.saved"
    shutil.copytree(tree / "executed", saved)
    shutil.rmtree(tree / "executed")
    mounted = os.geteuid() == 0 and _mount_tmpfs(tree / "executed", "5m")
    if not mounted:
        (tree / "executed").mkdir(exist_ok=True)
    shutil.copytree(saved, tree / "executed", dirs_exist_ok=True)
    yield tree, mounted
    if mounted:
        subprocess.run(["umount", "-l", str(tree / "executed")], capture_output=True)
    else:
        os.chmod(tree / "executed", 0o755)


def _one_line_error(proc, path_part: str, cause: str) -> None:
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("gtbook: error")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and path_part in lines[0] and cause in lines[0], proc.stderr[-3000:]


def test_14_read_only_executed_gives_one_line_and_keeps_the_outputs(executed_on_tmpfs):
    tree, mounted = executed_on_tmpfs
    before = {p.name: p.read_bytes() for p in (tree / "executed").glob("*.ipynb")}
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(tree / "executed")], check=True)
        cause = "Read-only file system"
    else:
        os.chmod(tree / "executed", 0o555)
        cause = "Permission denied"
    for args in (("run", "--force"), ("build",)):
        _one_line_error(gtbook(*args, cwd=tree, check=False), "executed", cause)
    assert {p.name: p.read_bytes() for p in (tree / "executed").glob("*.ipynb")} == before


def test_14_a_full_disk_gives_one_line_and_keeps_the_outputs(executed_on_tmpfs):
    tree, mounted = executed_on_tmpfs
    if not mounted:
        pytest.skip("a full disk needs a small tmpfs (root)")
    before = {p.name: p.read_bytes() for p in (tree / "executed").glob("*.ipynb")}
    fd = os.open(tree / "executed" / "filler", os.O_WRONLY | os.O_CREAT)  # fill the 5 MB to the last byte
    try:
        for chunk in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    (tree / "executed" / ".lock.info").unlink(missing_ok=True)
    _one_line_error(gtbook("run", "--force", cwd=tree, check=False), "executed", "No space left on device")
    assert {p.name: p.read_bytes() for p in (tree / "executed").glob("*.ipynb")} == before


# --------------------------------------------------------------- 15: the usual file mode
def test_15_published_files_respect_the_umask(tree):
    def run_with_umask(mask, *args):
        return subprocess.run(
            [*GTBOOK, *args],
            cwd=tree,
            capture_output=True,
            text=True,
            env=_env(),
            preexec_fn=lambda: os.umask(mask),
            check=True,
        )

    run_with_umask(0o022, "run")
    for name in ("report.md", "01_tiny.ipynb"):
        assert stat.S_IMODE((tree / "executed" / name).stat().st_mode) == 0o644, name
    (tree / "executed" / "report.md").unlink()
    run_with_umask(0o027, "run")
    assert stat.S_IMODE((tree / "executed" / "report.md").stat().st_mode) == 0o640


# ------------------------------------------------------ 16: -j 2 stops after a failure
def test_16_run_j2_exits_when_a_chapter_fails_while_others_wait(three):
    profiles = three / "notebooks" / "profiles.toml"
    text = profiles.read_text().replace("[quick.01_tiny]\nx = 0.5", "[quick.01_tiny]\nx = 5.0")  # fails at once
    text = text.replace("[quick.02_small]\nx = 0.5", "[quick.02_small]\nx = 0.5\npause = 8.0")  # still running
    profiles.write_text(text)  # and 03_third waits for a free worker
    proc = start("run", "-j", "2", cwd=three)
    try:
        _, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("gtbook run -j 2 did not exit after a chapter failed")
    assert proc.returncode == 2, err[-3000:]
    assert "chapter 01_tiny failed" in err and "tiny_x" in err and "not started: 03_third" in err
    assert not (three / "executed" / "03_third.ipynb").exists()
    assert (three / "executed" / "failed" / "01_tiny.ipynb").exists()


# -------------------------------------------------------------- 17: threads in the key
def test_17_the_thread_count_is_part_of_the_key(tree):
    gtbook("run", cwd=tree, OMP_NUM_THREADS="1")
    meta = nbformat.read(tree / "executed" / "01_tiny.ipynb", as_version=4).metadata["gtbook"]
    assert meta["threads"] == 1 and meta["cache"]["components"]["threads"] == "1"
    assert state_of(gtbook("status", cwd=tree, OMP_NUM_THREADS="1").stdout, "01_tiny") == "fresh"
    text = gtbook("status", cwd=tree, OMP_NUM_THREADS="2").stdout
    assert state_of(text, "01_tiny") == "stale" and "threads (ran with 1 threads, now 2)" in text
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    text = gtbook("status", "-j", "2", cwd=tree, OMP_NUM_THREADS="1").stdout
    assert state_of(text, "01_tiny") == ("fresh" if max(1, cores // 2) == 1 else "stale")


# ------------------------------------------------------- 18: a rerun command for a shell
HOSTILE = [
    "x;touch${IFS}PWNED_semicolon",
    "$(touch${IFS}PWNED_subshell)",
    "`touch${IFS}PWNED_backtick`",
    "x;touch PWNED_spaced",
    'it\'s "quoted"',
    "a b  c",
    "<img src=x onerror=alert(1)>",
    "x&&touch${IFS}PWNED_and",
]


@pytest.mark.parametrize("label", HOSTILE)
def test_18_the_rerun_command_reproduces_the_parameters_through_a_shell(tree, label):
    gtbook("run", "--only", "01", "--set", f"label={label}", "--set", "seed=7", cwd=tree)
    box = nbformat.read(tree / "executed" / "01_tiny.ipynb", as_version=4).cells[0].source
    m = re.search(r"\*\*Rerun:\*\* (`+) ?(.*?) ?\1 \(then", box)
    assert m, box
    command = m.group(2)
    (tree / "executed" / "01_tiny.ipynb").unlink()
    bindir = tree.parent / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "gtbook"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gtbook "$@"\n')
    wrapper.chmod(0o755)
    env = _env(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["sh", "-c", command], cwd=tree, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not list(tree.glob("PWNED*")) and not list(tree.parent.glob("PWNED*")), "the pasted command ran code"
    meta = nbformat.read(tree / "executed" / "01_tiny.ipynb", as_version=4).metadata["gtbook"]
    assert meta["overrides"] == {"label": label, "seed": 7} and meta["profile"] == "quick"


# ----------------------------------------------------- 19: user values escaped in the HTML
def test_19_a_hostile_set_value_reaches_the_built_pages_as_text(tree):
    label = "`<img src=x onerror=alert(1)>` <script>alert(2)</script> | $x$ {sub}`y`"
    gtbook("run", "--set", f"label={label}", cwd=tree)
    gtbook("build", cwd=tree)
    html = tree / "_build" / "html"
    pages = sorted(html.rglob("*.html"))
    chapter = (html / "executed" / "01_tiny.html").read_text()
    report = (html / "executed" / "report.html").read_text()
    for page in pages:
        text = page.read_text()
        assert not re.search(r"<img[^>]*onerror", text), f"{page.relative_to(html)}: raw <img onerror>"
        assert "<script>alert(2)" not in text, f"{page.relative_to(html)}: raw <script>"
    assert "onerror=alert(1)" in chapter and "onerror=alert(1)" in report  # shown, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in chapter


def test_19_gallery_text_holds_no_raw_html(tmp_path):
    nb = nbformat.v4.new_notebook()
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Chapter <script>alert(3)</script>\n\n## Section <b>bold</b>"),
        nbformat.v4.new_code_cell(
            "plot()",
            metadata={
                "mystnb": {
                    "figure": {"caption": "A caption with <img src=x onerror=alert(1)> and $a<b$."},
                    "image": {"alt": "alt\n:link: https://example.org"},
                }
            },
        ),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
    (tmp_path / "01_x.ipynb").write_text(nbformat.writes(nb))
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from gtbook.gallery import write_gallery; write_gallery(sys.argv[1])",
            str(tmp_path),
        ],
        env=_env(),
        check=True,
    )
    page = (tmp_path / "gallery.md").read_text()
    assert "<img" not in page and "<script" not in page and "<b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "$a<b$" in page  # math kept
    assert "\n:link: https://example.org" not in page  # alt text stays on its option line
