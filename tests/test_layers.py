"""The package's layers: imports point downward only, and the core loads no torch at import time.

Layers, bottom to top: the core (the paper's numerics: every module of ``gtcore`` outside the three
packages below), ``gtcore.models`` (real Transformer code), ``gtcore.studies`` (the chapters' harnesses
and figures), ``gtcore.book`` (the ``gtbook`` machinery). A module may import its own layer and the
layers below it, nothing above. The import graph is read here with :mod:`ast`, independently of
:mod:`gtcore._dependencies` (which the cache keys use), every import statement counted wherever it stands.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "gtcore"
LAYERS = ("core", "models", "studies", "book")
#: core modules that are torch code by nature (the finite-N kernels, the trainer): imported only when tokens move
TORCH_MODULES = {"gtcore.particles", "gtcore.attention.kernels", "gtcore.attention.sinkhorn_scaling", "gtcore.training"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS[1:] else "core"


def imported(path: Path) -> set[str]:
    """Every gtcore module (or package) named by an import statement of ``path``."""
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
            out |= {f"{name}.{a.name}" for a in node.names
                    if (PKG.parent / f"{name}.{a.name}".replace(".", "/")).is_dir()
                    or (PKG.parent / (f"{name}.{a.name}".replace(".", "/") + ".py")).is_file()}
    return {m for m in out if m == "gtcore" or m.startswith("gtcore.")}


SOURCES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_downward(path):
    here = LAYERS.index(layer(module_name(path)))
    for target in imported(path):
        if target == "gtcore":  # the lazy top level re-exports the core only
            continue
        there = LAYERS.index(layer(target))
        assert there <= here, f"{module_name(path)} ({LAYERS[here]}) imports {target} ({LAYERS[there]})"


def test_the_top_level_exports_only_the_core():
    import gtcore

    for name in gtcore.__all__:
        owner = gtcore._LAZY[name]
        assert layer(owner) == "core", f"gtcore.{name} comes from {owner}"
    assert gtcore.__all__ == sorted(gtcore.__all__, key=str.lower) or gtcore.__all__ == sorted(gtcore.__all__)


def _fresh_import(modules: list[str]) -> dict[str, bool]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps({k: k in sys.modules\n"
            "                  for k in ('torch', 'transformers', 'matplotlib', 'scipy.integrate')}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def test_import_gtcore_loads_no_heavy_library():
    loaded = _fresh_import(["gtcore"])
    assert not any(loaded.values()), loaded


def test_core_modules_load_no_torch_at_import_time():
    core = [module_name(p) for p in SOURCES if layer(module_name(p)) == "core"
            and module_name(p) not in TORCH_MODULES and not module_name(p).startswith("gtcore._")]
    assert "gtcore.riccati" in core and "gtcore.moments.ode" in core
    loaded = _fresh_import(core)
    assert not loaded["torch"] and not loaded["transformers"] and not loaded["matplotlib"], loaded


def test_the_command_line_loads_no_torch():
    loaded = _fresh_import(["gtcore.book.cli", "gtcore.book.report", "gtcore.book.execute"])
    assert not loaded["torch"] and not loaded["transformers"] and not loaded["matplotlib"], loaded


def test_every_lazy_name_resolves():
    import importlib

    import gtcore
    import gtcore.book
    import gtcore.models

    for pkg in (gtcore, gtcore.book, gtcore.models):
        for name, owner in pkg._LAZY.items():
            assert hasattr(importlib.import_module(owner), name), f"{pkg.__name__}.{name} -> {owner}"
