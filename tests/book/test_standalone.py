"""Outside the clone: the library installs and runs alone, the built wheels run a downloaded chapter
notebook, and the sdist has its tests.

The wheels (``gtcore`` from ``gtcore/``, the book from the root) are built from a copy of this tree and
installed (``--no-deps``) into fresh virtual environments in a temporary folder. The library's sees only
numpy and scipy (linked from the environment running these tests, so nothing is downloaded); the book's
sees every third-party package of that environment through a path file, but not its editable ``gtcore``
or ``gtbook``: the kernel imports the wheels'. An executed chapter (of the tiny book) is then rerun there
with papermill, in a folder with no book above it: its claims are checked and recorded, and it says that it
is not building a book.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import nbformat
import pytest

from minibook import make_mini_book

ROOT = Path(__file__).resolve().parents[2]
GTBOOK = [sys.executable, "-m", "gtbook"]


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("GTBOOK_ROOT", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _source_copy(dest: Path) -> Path:
    """The tree's files (tracked and untracked-but-not-ignored when this is a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file()
            and not {"executed", "_build", ".venv", ".git", "__pycache__"} & set(p.relative_to(ROOT).parts)
        ]
    for rel in listed:
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return _source_copy(tmp_path_factory.mktemp("src") / "gtbook")


@pytest.fixture(scope="module")
def wheel_env(source, tmp_path_factory):
    """A fresh venv with the built wheel installed and the running environment's packages visible."""
    out = tmp_path_factory.mktemp("wheel")
    wheels = [
        _wheel(source, out, "gaussian_transformer_book"),
        _wheel(source / "gtcore", out, "gaussian_transformer_core"),
    ]
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the third-party packages of this environment, after the venv's own site-packages (no .pth files of
    # that folder are run, so its editable gtcore stays out)
    outer = [
        p
        for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
        if Path(p).is_dir()
    ]
    (purelib / "outer-packages.pth").write_text("\n".join(sorted(outer)) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(purelib), *map(str, wheels)],
        check=True,
        capture_output=True,
        env=_clean_env(),
    )
    return py, purelib


def _wheel(project: Path, out: Path, name: str) -> Path:
    """Build ``project``'s wheel into ``out`` from a copy (pip builds in place: its ``build/`` stays out of
    the source tree the other tests read)."""
    copy = out / f"{name}-src"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(copy)],
        check=True,
        capture_output=True,
        env=_clean_env(),
    )
    (wheel,) = out.glob(f"{name}-*.whl")
    return wheel


#: what the library alone may load: its own requirements and the standard library
CORE_REQUIREMENTS = ("numpy", "scipy")


def test_the_library_installs_and_runs_with_numpy_and_scipy_only(source, tmp_path):
    """``pip install ./gtcore``: a wheel that declares numpy and scipy only, and runs eq. (1.1) with them."""
    import importlib.metadata as md

    wheel = _wheel(source / "gtcore", tmp_path, "gaussian_transformer_core")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # numpy and scipy only, linked from this environment (their files, their bundled libraries, metadata)
    for dist in CORE_REQUIREMENTS:
        for f in md.distribution(dist).files or []:
            top = f.parts[0]
            src = Path(md.distribution(dist).locate_file(top))
            if not (purelib / top).exists() and src.exists() and (top.startswith(dist) or top.endswith(".libs")):
                (purelib / top).symlink_to(src)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(purelib), str(wheel)],
        check=True,
        capture_output=True,
        env=_clean_env(),
    )
    requires = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print('\\n'.join(m.requires('gaussian-transformer-core')))"],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env(),
    ).stdout.splitlines()
    required = sorted({r.split(";")[0].split(">")[0].split("=")[0].strip() for r in requires if "extra ==" not in r})
    assert required == list(CORE_REQUIREMENTS), requires
    code = (
        "import sys, numpy as np, gtcore\n"
        "from gtcore import Controls, integrate_moments, blowup_time, classify, sliced_w2\n"
        "import gtcore.stability, gtcore.reachability, gtcore.stats, gtcore.moments, gtcore.relu\n"
        "I = np.eye(3)\n"
        "tr = integrate_moments(np.zeros(3), I, Controls(A=-I, V=0.5 * I, B=I), (0.0, 2.0))\n"
        "bt = blowup_time(I, Controls(V=I, B=I))\n"
        "print(tr.status, round(float(bt.t_star), 6), gtcore.__file__)\n"
        "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
        "('torch', 'matplotlib', 'dask', 'pyarrow', 'gtbook', 'tqdm', 'jupyter_book', 'filelock')))\n"
    )
    proc = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = proc.stdout.splitlines()
    status, t_star, where = first.split()
    assert status == "completed" and abs(float(t_star) - 0.5) < 1e-4 and where.startswith(str(purelib))
    assert second == "[]"
    for absent in ("torch", "matplotlib", "gtbook"):  # not installed there at all
        probe = subprocess.run([str(py), "-c", f"import {absent}"], cwd=tmp_path, capture_output=True, env=_clean_env())
        assert probe.returncode != 0, absent


def test_the_wheel_holds_the_registry_and_imports_its_own_gtcore(wheel_env, tmp_path):
    py, purelib = wheel_env
    code = (
        "import gtcore, gtbook.statements as s; print(gtcore.__file__); print(s.registry_path()); "
        "print(len(s.load_statements()))"
    )
    out = subprocess.run(
        [str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True, env=_clean_env()
    ).stdout.split()
    assert out[0].startswith(str(purelib)) and out[1].startswith(str(purelib)) and int(out[2]) > 5


def test_a_downloaded_chapter_notebook_reruns_with_papermill_outside_the_clone(wheel_env, tmp_path):
    py, _purelib = wheel_env
    book = make_mini_book(tmp_path / "book")
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run([*GTBOOK, "run"], cwd=book, check=True, capture_output=True, env=env)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    shutil.copy(book / "executed" / "01_tiny.ipynb", downloads / "01_tiny.ipynb")
    proc = subprocess.run(
        [str(py), "-m", "papermill", "01_tiny.ipynb", "rerun.ipynb", "-p", "x", "0.3", "-k", "python3"],
        cwd=downloads,
        capture_output=True,
        text=True,
        env=_clean_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(downloads / "rerun.ipynb", as_version=4)
    claims = [
        o["data"]["application/vnd.gtbook.claim+json"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "application/vnd.gtbook.claim+json" in o.get("data", {})
    ]
    assert [(c["name"], c["value"], c["passed"]) for c in claims] == [("tiny_x", 0.3, True)]
    streams = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    assert "not building a book" in streams
    # a claim that fails still fails outside a book
    proc = subprocess.run(
        [str(py), "-m", "papermill", "01_tiny.ipynb", "fail.ipynb", "-p", "x", "5.0", "-k", "python3"],
        cwd=downloads,
        capture_output=True,
        text=True,
        env=_clean_env(),
    )
    assert proc.returncode != 0 and "ClaimFailed" in proc.stderr + proc.stdout


def test_claim_from_a_users_own_script_outside_any_book(wheel_env, tmp_path):
    py, _ = wheel_env
    script = "from gtbook import claim\nclaim('mine', 0.2, lt=0.5, statement='invariance', kind='consistency')\n"
    proc = subprocess.run([str(py), "-c", script], cwd=tmp_path, capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "not building a book" in proc.stdout and "PASS  mine" in proc.stdout


def test_the_sdist_holds_what_its_tests_need(source, tmp_path):
    out = tmp_path / "dist"
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = (
        subprocess.run(
            [sys.executable, "-c", code, str(out)],
            cwd=source,
            capture_output=True,
            text=True,
            check=True,
            env=_clean_env(),
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    with tarfile.open(out / name) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path / "x", filter="data")
        else:
            tar.extractall(tmp_path / "x")
    for needed in (
        "_config.yml",
        "_toc.yml",
        "notebooks/profiles.toml",
        "notebooks/01_gaussian_invariance.py",
        "book/intro.md",
        "book/references.bib",
        "_static/gtbook.css",
        "tests/conftest.py",
        "tests/minibook.py",
        "tests/book/test_book.py",
        "gtbook/statements.toml",
        "requirements.lock",
        "environment.yml",
        "CITATION.cff",
        "Makefile",
        ".ci/run",
        ".pre-commit-config.yaml",
    ):
        assert needed in members, f"the sdist lacks {needed}"
    assert not any(m.startswith(("executed/", "_build/")) for m in members)
    tree = tmp_path / "x" / name.removesuffix(".tar.gz")
    # the sdist's own tests run from it (the packaging checks read its pyproject, environment and sources)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/book/test_packaging.py",
            "tests/book/test_book.py::test_every_chapter_is_in_the_toc",
        ],
        cwd=tree,
        capture_output=True,
        text=True,
        env=_clean_env(PYTHONPATH=str(tree)),
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
