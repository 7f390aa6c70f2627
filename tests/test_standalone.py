"""Outside the clone (issue 25): the built wheel runs a downloaded chapter notebook, and the sdist has its tests.

The wheel is built from a copy of this tree and installed (``--no-deps``) into a fresh virtual
environment in a temporary folder; that environment sees the third-party packages of the one running
these tests through a path file (so nothing is downloaded), but not its ``gtcore``: the kernel imports
the wheel's. An executed chapter (of the tiny book) is then rerun there with papermill, in a folder
with no book above it: its claims are checked and recorded, and it says that it is not building a book.
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

ROOT = Path(__file__).resolve().parents[1]
GTBOOK = [sys.executable, "-m", "gtcore.book"]


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("GTBOOK_ROOT", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _source_copy(dest: Path) -> Path:
    """The tree's files (tracked and untracked-but-not-ignored when this is a git checkout)."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                  and not {"executed", "_build", ".venv", ".git", "__pycache__"} & set(p.relative_to(ROOT).parts)]
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
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(out), str(source)], check=True, capture_output=True, env=_clean_env())
    (wheel,) = out.glob("gaussian_transformer_book-*.whl")
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # the third-party packages of this environment, after the venv's own site-packages (no .pth files of
    # that folder are run, so its editable gtcore stays out)
    outer = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                         *site.getsitepackages()} if Path(p).is_dir()]
    (purelib / "outer-packages.pth").write_text("\n".join(sorted(outer)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(purelib),
                    str(wheel)], check=True, capture_output=True, env=_clean_env())
    return py, purelib


def test_the_wheel_holds_the_registry_and_imports_its_own_gtcore(wheel_env, tmp_path):
    py, purelib = wheel_env
    code = ("import gtcore, gtcore.book.statements as s; print(gtcore.__file__); print(s.registry_path()); "
            "print(len(s.load_statements()))")
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env=_clean_env()).stdout.split()
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
    proc = subprocess.run([str(py), "-m", "papermill", "01_tiny.ipynb", "rerun.ipynb", "-p", "x", "0.3",
                           "-k", "python3"], cwd=downloads, capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(downloads / "rerun.ipynb", as_version=4)
    claims = [o["data"]["application/vnd.gtbook.claim+json"] for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if "application/vnd.gtbook.claim+json" in o.get("data", {})]
    assert [(c["name"], c["value"], c["passed"]) for c in claims] == [("tiny_x", 0.3, True)]
    streams = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                      if o.get("output_type") == "stream")
    assert "not building a book" in streams
    # a claim that fails still fails outside a book
    proc = subprocess.run([str(py), "-m", "papermill", "01_tiny.ipynb", "fail.ipynb", "-p", "x", "5.0",
                           "-k", "python3"], cwd=downloads, capture_output=True, text=True, env=_clean_env())
    assert proc.returncode != 0 and "ClaimFailed" in proc.stderr + proc.stdout


def test_claim_from_a_users_own_script_outside_any_book(wheel_env, tmp_path):
    py, _ = wheel_env
    script = ("from gtcore.book import claim\n"
              "claim('mine', 0.2, lt=0.5, statement='invariance', kind='consistency')\n")
    proc = subprocess.run([str(py), "-c", script], cwd=tmp_path, capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "not building a book" in proc.stdout and "PASS  mine" in proc.stdout


def test_the_sdist_holds_what_its_tests_need(source, tmp_path):
    out = tmp_path / "dist"
    code = ("import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))")
    name = subprocess.run([sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True,
                          check=True, env=_clean_env()).stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path / "x", filter="data")
        else:
            tar.extractall(tmp_path / "x")
    for needed in ("_config.yml", "_toc.yml", "notebooks/profiles.toml", "notebooks/01_gaussian_invariance.py",
                   "book/intro.md", "book/references.bib", "_static/gtbook.css", "tests/conftest.py",
                   "tests/minibook.py", "tests/test_book.py", "gtcore/book/statements.toml", "requirements.lock",
                   "environment.yml", "CITATION.cff", "Makefile", ".ci/run", ".pre-commit-config.yaml"):
        assert needed in members, f"the sdist lacks {needed}"
    assert not any(m.startswith(("executed/", "_build/")) for m in members)
    tree = tmp_path / "x" / name.removesuffix(".tar.gz")
    # the sdist's own tests run from it (the packaging checks read its pyproject, environment and sources)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_packaging.py",
                           "tests/test_book.py::test_every_chapter_is_in_the_toc"], cwd=tree, capture_output=True,
                          text=True, env=_clean_env(PYTHONPATH=str(tree)))
    assert proc.returncode == 0, proc.stdout[-3000:]
