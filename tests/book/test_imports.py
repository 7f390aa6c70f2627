"""The import graph behind the cache keys (gtbook.imports) against a full parse of every source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gtbook import imports

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT  # the folder that holds both packages
MODULES = sorted(p for name in imports.PACKAGES for p in (ROOT / name).rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return (".".join(parts[:-1]), True) if parts[-1] == "__init__" else (".".join(parts), False)


def _full(text: str, module: str = "__chapter__", is_package: bool = False) -> set[str]:
    """The same question answered from the whole syntax tree (every node walked but the bodies of
    ``if TYPE_CHECKING:``, which never run)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                setattr(node, name, [n for n in block if not _type_checking(n)])
    return imports.direct_imports(tree, PKG, module, is_package)


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


@pytest.mark.parametrize(
    "path", MODULES + sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_fast_scan_misses_no_import(path):
    inside = any(path.is_relative_to(ROOT / name) for name in imports.PACKAGES)
    module, is_package = _name(path) if inside else ("__chapter__", False)
    fast = imports.direct_imports(imports.import_statements(path.read_text()), PKG, module, is_package)
    full = _full(path.read_text(), module, is_package)
    assert full <= fast  # a docstring example may add a module (conservative), never hide one


def test_a_chapter_depends_on_its_study_and_not_on_another_chapters():
    source = (ROOT / "notebooks" / "04_stability_regimes.py").read_text()
    closure = imports.chapter_modules(source, PKG)
    assert "gtbook.studies.stability.harness" in closure and "gtcore.moments.ode" in closure
    assert "gtbook.studies.invariance.figures" not in closure and "gtbook.cli" not in closure


def test_lazy_names_and_nested_imports_count():
    closure = imports.chapter_modules("from gtcore import classify\n", PKG)
    assert "gtcore.stability.regimes" in closure  # through gtcore's _LAZY table and the package
    assert "gtcore.riccati" in closure
    nested = imports.chapter_modules("def f():\n    from gtcore.attention import kernels\n", PKG)
    assert "gtcore.attention.kernels" in nested and "gtcore.attention.base" in nested
    assert "gtbook.statements" in imports.chapter_modules("from gtbook import claim\n", PKG)


def test_the_registry_is_hashed_with_the_claims(tmp_path):
    import shutil

    pkg = tmp_path
    for name in imports.PACKAGES:
        shutil.copytree(ROOT / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__"))
    mods = imports.chapter_modules("from gtbook import claim\n", pkg)
    h0 = imports.modules_hash(mods, pkg)
    (pkg / "gtbook" / "statements.toml").write_text((pkg / "gtbook" / "statements.toml").read_text() + "\n")
    assert imports.modules_hash(mods, pkg) != h0


def test_type_checking_imports_are_not_in_a_closure():
    """``import gtcore.status`` runs gtcore/__init__, whose type-checking imports never run."""
    closure = imports.chapter_modules("import gtcore.status\n", PKG)
    assert closure == ["gtcore", "gtcore.status"]
    assert "gtcore.moments.ode" in imports.chapter_modules("import gtcore\n", PKG)  # every lazy name may be used
