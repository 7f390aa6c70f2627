"""The two packages' layers: imports point downward only, and the core loads no torch at import time.

Layers, bottom to top: the core (the paper's numerics: every module of ``gtcore`` outside
``gtcore.models``), ``gtcore.models`` (real Transformer code), ``gtbook.studies`` (the chapters'
harnesses and figures), ``gtbook`` (the machinery: the ``gtbook`` command, cache keys, claims, report).
Between the models and the studies sit the book's tools that studies use too (:data:`TOOLS`: the disk cache,
the import graph, process tags, the checkpoint file, the tracer of a claim's sides). The first two layers
are the library ``gtcore``, the other three the book ``gtbook``: the package boundary is the line between
``models`` and ``tools``, so ``gtcore`` imports nothing from ``gtbook``. A module may import its own
layer and the layers below it, nothing above. The import graph is read here with :mod:`ast`,
independently of :mod:`gtbook.imports` (which the cache keys use), every import statement counted
wherever it stands.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gtcore", "gtbook")
LAYERS = ("core", "models", "tools", "studies", "book")
#: the book's tools that its studies use too: the disk cache, the import graph behind its keys, process tags,
#: the training checkpoint file, the tracer that records which library code each side of a claim ran
TOOLS = {"gtbook.cache", "gtbook.imports", "gtbook.processes", "gtbook.checkpoints", "gtbook.sides"}
#: core modules that are torch code by nature (the finite-N kernels, the trainer): imported only when tokens move
TORCH_MODULES = {"gtcore.particles", "gtcore.attention.kernels", "gtcore.attention.sinkhorn_scaling", "gtcore.training"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "gtbook":
        if ".".join(parts[:2]) in TOOLS:
            return "tools"
        return "studies" if len(parts) > 1 and parts[1] == "studies" else "book"
    return "models" if len(parts) > 1 and parts[1] == "models" else "core"


def imported(path: Path) -> set[str]:
    """Every gtcore or gtbook module (or package) named by an import statement of ``path``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.add(name)
            out |= {
                f"{name}.{a.name}"
                for a in node.names
                if (ROOT / f"{name}.{a.name}".replace(".", "/")).is_dir()
                or (ROOT / (f"{name}.{a.name}".replace(".", "/") + ".py")).is_file()
            }
    return {m for m in out if m.split(".")[0] in PACKAGES}


SOURCES = sorted(p for name in PACKAGES for p in (ROOT / name).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_downward(path):
    here = LAYERS.index(layer(module_name(path)))
    for target in imported(path):
        if target == "gtcore":  # the lazy top level re-exports the core only
            continue
        if module_name(path).startswith("gtcore"):
            assert not target.startswith("gtbook"), f"{module_name(path)} (the library) imports {target} (the book)"
        there = LAYERS.index(layer(target))
        assert there <= here, f"{module_name(path)} ({LAYERS[here]}) imports {target} ({LAYERS[there]})"


def test_the_top_level_exports_only_the_core():
    import gtcore

    for name in gtcore.__all__:
        owner = gtcore._LAZY[name]
        assert layer(owner) == "core", f"gtcore.{name} comes from {owner}"
    assert gtcore.__all__ == sorted(gtcore.__all__, key=str.lower) or gtcore.__all__ == sorted(gtcore.__all__)


def _fresh_import(modules: list[str]) -> dict[str, bool]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps({k: k in sys.modules\n"
        "                  for k in ('torch', 'transformers', 'matplotlib', 'scipy.integrate')}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def test_import_gtcore_loads_no_heavy_library():
    loaded = _fresh_import(["gtcore"])
    assert not any(loaded.values()), loaded


def test_the_layers_are_the_packages():
    assert {layer(module_name(p)) for p in SOURCES if module_name(p).startswith("gtcore")} == {"core", "models"}
    assert {layer(module_name(p)) for p in SOURCES if module_name(p).startswith("gtbook")} == {
        "tools",
        "studies",
        "book",
    }
    assert imported(ROOT / "gtbook" / "studies" / "__init__.py") is not None
    bad = ROOT / "gtcore" / "_layer_probe.py"
    try:  # the boundary check is live: a library module that imports the book fails it
        bad.write_text("from gtbook.claims import claim\n")
        with pytest.raises(AssertionError, match="the library"):
            test_imports_point_downward(bad)
    finally:
        bad.unlink()


def test_core_modules_load_no_torch_at_import_time():
    core = [
        module_name(p)
        for p in SOURCES
        if layer(module_name(p)) == "core"
        and module_name(p) not in TORCH_MODULES
        and not module_name(p).startswith("gtcore._")
    ]
    assert "gtcore.riccati" in core and "gtcore.moments.ode" in core
    loaded = _fresh_import(core)
    assert not loaded["torch"] and not loaded["transformers"] and not loaded["matplotlib"], loaded


def test_the_command_line_loads_no_torch():
    loaded = _fresh_import(["gtbook.cli", "gtbook.report", "gtbook.execute"])
    assert not loaded["torch"] and not loaded["transformers"] and not loaded["matplotlib"], loaded


def test_every_lazy_name_resolves():
    import importlib

    import gtbook
    import gtcore
    import gtcore.models

    for pkg in (gtcore, gtbook, gtcore.models):
        for name, owner in pkg._LAZY.items():
            assert hasattr(importlib.import_module(owner), name), f"{pkg.__name__}.{name} -> {owner}"


#: CONTRIBUTING's limit on a module of either package (lines, as ruff formats them)
MAX_MODULE_LINES = 650


def test_no_module_is_over_the_size_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for pkg in ("gtcore", "gtbook")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split by what they hold): {long}"
