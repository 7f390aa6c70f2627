r"""A book's tree and its chapters: the folders, each chapter's parameters cell, the profiles, ``--set`` values."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from gtbook.root import RootNotFound, find_root

__all__ = ["Book", "BookError", "Chapter", "chapter_defaults", "discover_chapters", "load_profiles", "open_book",
           "parse_sets", "resolve_parameters", "select"]


class BookError(RuntimeError):
    """A user-facing error of the book pipeline: printed as one message, exit code 2."""


# ---------------------------------------------------------------------------- the tree
@dataclass(frozen=True)
class Book:
    """A book's tree: the folders ``gtbook`` reads and writes, all under ``root``."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def executed(self) -> Path:
        return self.root / "executed"

    @property
    def profiles_file(self) -> Path:
        return self.notebooks / "profiles.toml"

    @property
    def running(self) -> Path:
        return self.executed / ".running"

    @property
    def failed(self) -> Path:
        return self.executed / "failed"

    @property
    def build_dir(self) -> Path:
        return self.root / "_build"

    @property
    def lock_file(self) -> Path:
        return self.executed / ".lock"

    def shown(self, path: Path) -> str:
        """A path relative to the root when it lies inside it."""
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return str(path)


def open_book(root: str | os.PathLike | None = None) -> Book:
    """The book at ``root``, or found from the working directory (raises BookError when absent)."""
    try:
        found = find_root(root)
    except RootNotFound as exc:
        raise BookError(str(exc)) from None
    if not (found / "notebooks").is_dir():
        raise BookError(f"{found} has a _config.yml but no notebooks/ folder: not a gtbook tree")
    return Book(found)


def _book(bk: Book | None) -> Book:
    return bk if bk is not None else open_book()


# --------------------------------------------------------------------------- chapters
@dataclass
class Chapter:
    name: str
    path: Path
    defaults: dict[str, Any]
    book: Book | None = field(default=None, repr=False, compare=False)

    @property
    def executed(self) -> Path:
        return _book(self.book).executed / f"{self.name}.ipynb"

    @property
    def source(self) -> str:
        return self.path.read_text()


#: a percent-format cell marker carrying the ``parameters`` tag (jupytext's ``# %% tags=["parameters"]``)
_PARAMETERS_MARKER = re.compile(r"^# %%(?!\s*\[markdown\]).*\btags\s*=\s*\[[^\]]*[\"']parameters[\"']")


def parameters_cell(text: str) -> str | None:
    """The source of the first code cell tagged ``parameters`` of a percent-format chapter, or None.

    Read from the text itself (a cell runs from its ``# %%`` line to the next one), so listing the
    chapters does not need jupytext.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _PARAMETERS_MARKER.match(line):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("# %%")), len(lines))
            return "\n".join(lines[i + 1:end])
    return None


def chapter_defaults(path: Path) -> dict[str, Any]:
    """The literal assignments of a chapter's ``parameters`` cell, name -> value."""
    source = parameters_cell(Path(path).read_text())
    if source is None:
        raise BookError(f"{path.name}: no code cell tagged 'parameters' "
                        f"(write it as `# %% tags=[\"parameters\"]`)")
    values: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                values[node.targets[0].id] = ast.unparse(node.value)
    return values


def discover_chapters(bk: Book | None = None) -> dict[str, Chapter]:
    """Every ``notebooks/NN_*.py`` chapter, in order."""
    bk = _book(bk)
    return {p.stem: Chapter(p.stem, p, chapter_defaults(p), bk)
            for p in sorted(bk.notebooks.glob("[0-9][0-9]_*.py"))}


def load_profiles(bk: Book | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """``{profile: {chapter: {parameter: value}}}`` from ``notebooks/profiles.toml``."""
    bk = _book(bk)
    try:
        with open(bk.profiles_file, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise BookError(f"{bk.shown(bk.profiles_file)} is missing (it defines the profiles)") from None
    except tomllib.TOMLDecodeError as exc:
        raise BookError(f"{bk.shown(bk.profiles_file)}: not valid TOML ({exc})") from None
    return {name: dict(tables) for name, tables in data.items()}


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare string


def _type_name(v: Any) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a string", list: "a list",
            dict: "a dict", tuple: "a tuple"}.get(type(v), type(v).__name__)


def _coerce(chapter: Chapter, key: str, parsed: Any, text: str) -> Any:
    """``parsed`` in the type of the chapter's default for ``key``, or BookError (before any kernel starts)."""
    default = chapter.defaults[key]
    if default is None:
        return parsed
    if isinstance(default, bool):
        ok = isinstance(parsed, bool)
    elif isinstance(default, int):
        if isinstance(parsed, float) and parsed.is_integer():
            parsed = int(parsed)  # `--set n_tokens=1e4` keeps the parameter an int
        ok = isinstance(parsed, int) and not isinstance(parsed, bool)
    elif isinstance(default, float):
        if isinstance(parsed, int) and not isinstance(parsed, bool):
            parsed = float(parsed)
        ok = isinstance(parsed, float)
    elif isinstance(default, (list, tuple)):
        if isinstance(parsed, tuple):
            parsed = list(parsed)
        ok = isinstance(parsed, list)
    else:
        ok = isinstance(parsed, type(default))
    if not ok:
        raise BookError(f"--set {key}={text}: {key} of {chapter.name} is {_type_name(default)} "
                        f"(default {default!r}), got {_type_name(parsed)} {parsed!r}")
    return parsed


def parse_sets(chapters: dict[str, Chapter], sets: list[str]) -> dict[str, dict[str, Any]]:
    """The ``--set name=value`` overrides of each selected chapter, type-checked against its defaults."""
    out: dict[str, dict[str, Any]] = {c: {} for c in chapters}
    for item in sets:
        if "=" not in item:
            raise BookError(f"--set takes name=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        targets = [c for c in chapters.values() if key in c.defaults]
        if not targets:
            valid = sorted({p for c in chapters.values() for p in c.defaults})
            raise BookError(f"unknown parameter(s) {key} for {', '.join(chapters)}; valid parameters: "
                            f"{', '.join(valid)}")
        for chap in targets:
            out[chap.name][key] = _coerce(chap, key, _parse_value(value), value)
    return out


def resolve_parameters(chapters: dict[str, Chapter], profile: str, sets: list[str],
                       known: dict[str, Chapter] | None = None, bk: Book | None = None
                       ) -> dict[str, dict[str, Any]]:
    """The parameters injected into each selected chapter: profile overrides, then ``--set`` values.

    A ``--set name=value`` goes to every selected chapter whose parameters cell defines ``name``.
    Raises BookError for an unknown profile, a profile table naming no chapter of ``known`` (all
    chapters; a typo there would silently run a chapter at full scale), an override of a parameter
    the chapter does not have, a ``--set`` name that no selected chapter defines (each listing the
    valid ones), or a ``--set`` value of the wrong type.
    """
    known = chapters if known is None else known
    if bk is None:
        bk = next((c.book for c in chapters.values() if c.book is not None), None)
    profiles = load_profiles(bk)
    if profile not in profiles:
        raise BookError(f"unknown profile {profile!r}; valid profiles: {', '.join(sorted(profiles))}")
    stray = sorted(set(profiles[profile]) - set(known))
    if stray:
        raise BookError(f"notebooks/profiles.toml: [{profile}.{stray[0]}] names no chapter; valid chapters: "
                        f"{', '.join(known)}")
    injected: dict[str, dict[str, Any]] = {c: dict(profiles[profile].get(c, {})) for c in chapters}
    for chap, params in injected.items():
        unknown = sorted(set(params) - set(chapters[chap].defaults))
        if unknown:
            raise BookError(f"{chap}: unknown parameter(s) {', '.join(unknown)} in profile {profile!r}; "
                            f"valid parameters: {', '.join(sorted(chapters[chap].defaults))}")
    for chap, values in parse_sets(chapters, sets).items():
        injected[chap].update(values)
    return {c: p for c, p in injected.items() if p}


def select(chapters: dict[str, Chapter], only: list[str] | None) -> list[Chapter]:
    """The chapters ``--only`` names (file stem, or without ``NN_``), in book order, each once."""
    if not only:
        return list(chapters.values())
    picked: list[Chapter] = []
    for name in only:
        matches = [c for c in chapters.values() if c.name == name or c.name.split("_", 1)[-1] == name
                   or c.name.startswith(name + "_")]
        if len(matches) != 1:
            raise BookError(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters)}")
        if matches[0] not in picked:
            picked.append(matches[0])
    order = list(chapters)
    return sorted(picked, key=lambda c: order.index(c.name))
