r"""The mutation check's trees and what runs in them besides the chapters: the copy of the book, the
environment that makes a subprocess import ``gtcore`` from it, the chapters a mutated module reaches, the
probes and the unit tests (see :mod:`gtbook.mutations.run` for the check itself).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from gtbook.cache import OFF_ENV
from gtbook.chapters import BookError, discover_chapters, open_book
from gtbook.claims import KEEP_GOING_ENV
from gtbook.execute import THREAD_ENVS
from gtbook.imports import PACKAGES, _module_imports, _with_parents, chapter_modules, direct_imports, module_path
from gtbook.mutations.results import UnitTests
from gtbook.root import ROOT_ENV

__all__ = [
    "BROKEN_MUTATION_ERRORS",
    "PRELUDE",
    "TESTS_TIMEOUT_S",
    "affected_chapters",
    "copy_tree",
    "likely_chapters",
    "probe_changed",
    "run_probe",
    "run_unit_tests",
    "tree_fingerprint",
]

#: the unit tests of one mutation are stopped after this long (s)
TESTS_TIMEOUT_S = 1800.0
#: what the tree copy leaves out (generated, or not needed to run the book and its tests)
_IGNORED = (
    ".git",
    ".venv",
    "executed",
    "_build",
    ".cache",
    "__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".hypothesis",
    "benchmarks",
)
_MARK = "GTBOOK-PROBE:"


# ------------------------------------------------------------------------------------ trees
def copy_tree(root: Path, dest: Path) -> Path:
    """Copy the book tree at ``root`` (sources, chapters, tests; not ``executed/``, ``.venv``, ``.git``) to ``dest``."""
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*_IGNORED), symlinks=True)
    return dest


def tree_fingerprint(root: Path) -> str:
    """A hash of what a mutation check measures in the tree at ``root``: the sources and data of the packages,
    the chapters and profiles, the tests (a resumed check must find the same tree)."""
    h = hashlib.sha256()
    for folder in (*PACKAGES, "notebooks", "tests"):
        for path in sorted((Path(root) / folder).rglob("*")):
            if path.suffix in (".py", ".toml", ".json") and path.is_file() and "__pycache__" not in path.parts:
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _env(tree: Path, threads: int | None = 1, keep_going: bool = False) -> dict[str, str]:
    """The environment of a subprocess that must import ``gtcore`` from ``tree``."""
    env = {k: v for k, v in os.environ.items() if k not in (ROOT_ENV, KEEP_GOING_ENV)}
    if keep_going:
        env[KEEP_GOING_ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env[OFF_ENV] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if threads is not None:
        env.update({k: str(threads) for k in THREAD_ENVS})
    return env


def affected_chapters(tree: Path, module: str) -> list[str]:
    """The chapters of the book at ``tree`` that can run ``module`` (their static import closure holds it)."""
    chapters = discover_chapters(open_book(tree)).items()
    return [name for name, chap in chapters if module in chapter_modules(chap.source, tree)]


def _closure_past_the_top(source: str, tree: Path) -> set[str]:
    """The modules a chapter reaches without going through the top-level ``gtcore/__init__``, whose
    type-checking imports put nearly every module in every chapter's (over-approximated) closure."""
    roots = {name: Path(tree) / name for name in PACKAGES}
    key = tuple(sorted((k, str(v)) for k, v in roots.items()))
    seen: set[str] = set()
    todo = [m for name in direct_imports(source, roots) for m in _with_parents(name)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_path(name, roots)
        if path is None or name in PACKAGES:
            continue
        deps = _module_imports(str(path), path.stat().st_mtime_ns, key, name, path.name == "__init__.py")
        todo.extend(m for dep in deps for m in _with_parents(dep) if m not in seen)
    return seen


def likely_chapters(tree: Path, module: str) -> list[str]:
    """The chapters that import ``module`` other than through the top-level package: run first."""
    return [
        name
        for name, chap in discover_chapters(open_book(tree)).items()
        if module in _closure_past_the_top(chap.source, tree)
    ]


# ------------------------------------------------------------------------------------ probes
PRELUDE = """
import json
import numpy as np
import gtcore
from gtcore import Controls
rng = np.random.default_rng(20260607)
d = 3
A = 0.3 * rng.standard_normal((d, d))
b = rng.standard_normal(d)
V = 0.4 * rng.standard_normal((d, d))
B = 0.4 * rng.standard_normal((d, d))
mu = rng.standard_normal(d)
_L = rng.standard_normal((d, d))
Sigma = _L @ _L.T / d + 0.5 * np.eye(d)
Q = 0.5 * rng.standard_normal((d, d))
K = np.eye(d) + 0.2 * rng.standard_normal((d, d))
x = rng.standard_normal((64, d)) @ np.linalg.cholesky(Sigma).T + mu
J = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
general = Controls(A=A, b=b, V=V, B=B)


def _encode(v):
    if isinstance(v, str):
        return {"text": v}
    return {"numbers": np.asarray(v, dtype=float).ravel()[:4096].tolist()}
"""


def run_probe(tree: Path, code: str, timeout: float = 600.0) -> dict[str, Any]:
    r"""Run a mutation's probe against the ``gtcore`` of ``tree``: ``{"numbers": [...]}``, ``{"text": ...}``
    or ``{"error": ...}``, with ``"gtcore"`` the package file it imported.

    The probe runs after ``PRELUDE`` (a seeded general layer in :math:`d = 3`) and must set ``value``.
    """
    body = textwrap.indent(textwrap.dedent(code).strip("\n"), "    ")
    script = (
        PRELUDE + "\ntry:\n" + body + "\n    _out = _encode(value)\n"
        "except Exception as _exc:  # the mutated code may raise: that is a change too\n"
        "    _out = {'error': f'{type(_exc).__name__}: {_exc}'[:300]}\n"
        f"_out['gtcore'] = gtcore.__file__\nprint({_MARK!r} + json.dumps(_out))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script], cwd=tree, env=_env(tree), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the probe did not finish in {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            out = json.loads(line[len(_MARK) :])
            where = Path(out.pop("gtcore", "")).resolve()
            if not str(where).startswith(str(Path(tree).resolve())):
                raise BookError(
                    f"the probe imported gtcore from {where}, not from the tree {tree}: "
                    "PYTHONPATH does not win over the installed package"
                )
            return out
    return {"error": f"the probe crashed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"}


#: errors of a mutation that no longer fits its code (a name the edited function does not have): a probe
#: that raises one of these is a broken registry entry, not a changed number
BROKEN_MUTATION_ERRORS = ("NameError", "UnboundLocalError", "AttributeError", "ImportError")


def probe_changed(original: dict[str, Any], mutated: dict[str, Any], rtol: float = 1e-9) -> bool:
    """Whether the mutated probe differs from the original (beyond ``rtol`` relative round-off).

    A mutated probe that raises a ``BROKEN_MUTATION_ERRORS`` error does not count as a change: the
    replacement names something its code does not define (caught by any chapter as a crash, it would
    model no error of the equations).
    """
    if "error" in mutated and "error" not in original and str(mutated["error"]).startswith(BROKEN_MUTATION_ERRORS):
        return False
    if set(original) != set(mutated):
        return True
    if "numbers" in original:
        a, b = original["numbers"], mutated["numbers"]
        if len(a) != len(b):
            return True
        for x, y in zip(a, b, strict=False):
            if x != x or y != y:  # NaN
                if (x != x) != (y != y):
                    return True
            elif abs(x - y) > rtol * max(1.0, abs(x), abs(y)):
                return True
        return False
    return original != mutated


# ------------------------------------------------------------------------------- unit tests
def run_unit_tests(tree: Path, modules: list[str], timeout: float = TESTS_TIMEOUT_S) -> UnitTests:
    """``pytest -x`` on ``modules`` in ``tree``: caught when a test fails, None when pytest could not run them."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *modules]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=_env(tree), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return UnitTests(list(modules), None, f"timed out after {timeout:.0f} s", time.perf_counter() - start)
    lines = proc.stdout.replace(str(Path(tree).resolve()), "<tree>").replace(str(tree), "<tree>").strip().splitlines()
    last = lines[-1] if lines else proc.stderr.strip()[-200:]
    seconds = round(time.perf_counter() - start, 1)
    if proc.returncode == 0:
        return UnitTests(list(modules), False, last, seconds)
    if proc.returncode == 1:
        failed = next((line for line in lines if line.startswith(("FAILED ", "ERROR "))), last)
        return UnitTests(list(modules), True, failed[:300], seconds)
    return UnitTests(list(modules), None, f"pytest exit {proc.returncode}: {last}"[:300], seconds)
