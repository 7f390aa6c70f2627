r"""A book's tree and its chapters: the folders, each chapter's parameters cell, the profiles, ``--set`` values.

**Values.** A parameter's default, a profile's value and a ``--set`` value are read the same way
(:func:`parse_value`): a Python literal (numbers, strings, booleans, None, lists, tuples, dicts, sets), or
arithmetic of number literals (``1 / 3``, ``2 ** 10``), nested at most :data:`MAX_DEPTH` levels; a
``--set`` text that is neither is a bare string. A profile's or ``--set`` value must have the type of the
default (an integral float is an int: ``1e4``) and be finite where the default is.

**A broken chapter.** A chapter whose parameters cell is missing, does not parse, or assigns a value that is
not a literal (a call, a name) is listed with its ``problem`` (the file and line) and empty defaults: it
does not run, ``gtbook status`` shows it as ``broken``, and every other chapter runs as usual.
"""

from __future__ import annotations

import ast
import math
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

__all__ = [
    "MAX_DEPTH",
    "Book",
    "BookError",
    "Chapter",
    "broken",
    "chapter_defaults",
    "discover_chapters",
    "load_profiles",
    "open_book",
    "parse_sets",
    "parse_value",
    "resolve_parameters",
    "select",
]

#: how deeply a value may nest (brackets, operators): deeper is refused in one line, never a RecursionError
MAX_DEPTH = 100
#: the longest value text read (a longer one is refused before it is parsed)
MAX_VALUE_CHARS = 100_000


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
    #: why the chapter cannot run (its parameters cell: the file, line and cause), None when it can
    problem: str | None = None

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
            return "\n".join(lines[i + 1 : end])
    return None


class _NotAValue(ValueError):
    """A node that is neither a literal nor arithmetic of number literals (its message says why)."""


_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _power(a: Any, b: Any) -> Any:
    """``a ** b`` unless the result would be a huge integer (``10 ** 10 ** 10`` would take forever)."""
    if isinstance(a, int) and isinstance(b, int) and abs(a) > 1 and b > 0 and b * abs(a).bit_length() > 4096:
        raise _NotAValue("an integer power above 2**4096")
    return a**b


def _evaluate(node: ast.AST, depth: int = 0) -> Any:
    """The value of a literal, or of arithmetic (``+ - * / // % **``, unary ``+ -``) of number literals."""
    if depth > MAX_DEPTH:
        raise _NotAValue(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        return node.value
    try:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [_evaluate(e, depth + 1) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items) if isinstance(node, ast.Tuple) else set(items)
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            if len(keys) != len(node.keys):
                raise _NotAValue("a dict unpacking (**)")
            return {_evaluate(k, depth + 1): _evaluate(v, depth + 1) for k, v in zip(keys, node.values, strict=True)}
    except TypeError as exc:  # {[1]: 2}: an unhashable key
        raise _NotAValue(f"an unhashable key or member ({exc})") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _evaluate(node.operand, depth + 1)
        if not _is_number(v):
            raise _NotAValue(f"a sign before {type(v).__name__} {v!r}")
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _evaluate(node.left, depth + 1), _evaluate(node.right, depth + 1)
        if not (_is_number(a) and _is_number(b)):
            raise _NotAValue("arithmetic on a value that is not a number")
        try:
            return _power(a, b) if isinstance(node.op, ast.Pow) else _BINARY[type(node.op)](a, b)
        except (ArithmeticError, ValueError) as exc:  # 1 / 0, 10.0 ** 400
            raise _NotAValue(f"{ast.unparse(node)} fails ({type(exc).__name__}: {exc})") from None
    raise _NotAValue(f"{ast.unparse(node)[:60]} is not a literal nor arithmetic of number literals")


def parse_value(text: str) -> Any:
    """A ``--set`` value: a literal or arithmetic of number literals (module docstring), else the text itself
    (a bare string). Raises BookError for a value nested deeper than :data:`MAX_DEPTH` levels, or longer than
    ``MAX_VALUE_CHARS``."""
    if len(text) > MAX_VALUE_CHARS:
        raise BookError(f"a value of {len(text)} characters is longer than {MAX_VALUE_CHARS}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return text  # a bare string
    except (RecursionError, MemoryError):
        raise BookError(f"the value {text[:40]}... is nested deeper than the parser can follow") from None
    try:
        return _evaluate(tree.body)
    except _NotAValue as exc:
        if str(exc).startswith("nested deeper"):
            raise BookError(f"the value {text[:40]}{'...' if len(text) > 40 else ''} is {exc}") from None
        return text  # a bare string (a word, a path)


def chapter_defaults(path: Path) -> dict[str, Any]:
    """The assignments of a chapter's ``parameters`` cell, name -> value (literals, or arithmetic of number
    literals: :func:`parse_value`).

    Raises
    ------
    BookError
        No cell is tagged ``parameters``, the cell does not parse, or an assignment's value is not a
        literal; the message names the file and the line.
    """
    path = Path(path)
    text = path.read_text()
    source = parameters_cell(text)
    if source is None:
        raise BookError(f"{path.name}: no code cell tagged 'parameters' (write it as `# %% tags=[\"parameters\"]`)")
    first = next(i for i, line in enumerate(text.splitlines(), 1) if _PARAMETERS_MARKER.match(line))
    try:
        body = ast.parse(source).body
    except SyntaxError as exc:
        line = first + (exc.lineno or 1)
        raise BookError(f"{path.name} line {line}: the parameters cell does not parse ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise BookError(f"{path.name}: the parameters cell is nested deeper than the parser can follow") from None
    values: dict[str, Any] = {}
    for node in body:
        pairs = assigned(node)
        if pairs is None and isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            raise BookError(
                f"{path.name} line {first + node.lineno}: unpack parameters from a literal tuple of "
                f"as many values as names (`a, b = 1, 2`)"
            )
        for name, expr in pairs or ():
            try:
                values[name] = _evaluate(expr)
            except _NotAValue as exc:
                raise BookError(
                    f"{path.name} line {first + node.lineno}: the default of {name} is not a value ({exc})"
                ) from None
    return values


def assigned(node: ast.stmt) -> list[tuple[str, ast.expr]] | None:
    """The ``(name, expression)`` pairs a parameters-cell statement assigns: ``x = 1`` gives one pair, the
    grouped form ``a, b = 1, 2`` (a tuple of names from a literal tuple of as many values) one per name;
    ``None`` for any other statement."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, ast.Tuple)
        and all(isinstance(t, ast.Name) for t in target.elts)
        and isinstance(value, ast.Tuple)
        and len(value.elts) == len(target.elts)
    ):
        return [(t.id, v) for t, v in zip(target.elts, value.elts, strict=True)]  # type: ignore[attr-defined]
    return None


def discover_chapters(bk: Book | None = None) -> dict[str, Chapter]:
    """Every ``notebooks/NN_*.py`` chapter, in order; one whose parameters cell cannot be read carries its
    ``problem`` (and no defaults) instead of stopping the others."""
    bk = _book(bk)
    chapters = {}
    for p in sorted(bk.notebooks.glob("[0-9][0-9]_*.py")):
        try:
            chapters[p.stem] = Chapter(p.stem, p, chapter_defaults(p), bk)
        except BookError as exc:
            chapters[p.stem] = Chapter(p.stem, p, {}, bk, problem=str(exc))
    return chapters


def broken(chapters: list[Chapter]) -> list[Chapter]:
    """The chapters of ``chapters`` that cannot run (their ``problem`` says why)."""
    return [c for c in chapters if c.problem is not None]


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


def _type_name(v: Any) -> str:
    return {
        bool: "a bool",
        int: "an int",
        float: "a float",
        str: "a string",
        list: "a list",
        dict: "a dict",
        tuple: "a tuple",
    }.get(type(v), type(v).__name__)


def _finite(v: Any) -> bool:
    """Whether every number in ``v`` (a number, or lists, tuples, sets and dicts of them) is finite."""
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, (list, tuple, set)):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    return True


def _coerce(chapter: Chapter, key: str, parsed: Any, text: str, where: str | None = None) -> Any:
    """``parsed`` in the type of the chapter's default for ``key``, or BookError (before any kernel starts).

    ``where`` names the value's origin in the message (default ``--set key=text``).
    """
    where = f"--set {key}={text}" if where is None else where
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
        raise BookError(
            f"{where}: {key} of {chapter.name} is {_type_name(default)} "
            f"(default {default!r}), got {_type_name(parsed)} {parsed!r}"
        )
    if _finite(default) and not _finite(parsed):
        raise BookError(f"{where}: {key} of {chapter.name} must be finite (default {default!r}), got {parsed!r}")
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
            raise BookError(
                f"unknown parameter(s) {key} for {', '.join(chapters)}; valid parameters: {', '.join(valid)}"
            )
        for chap in targets:
            out[chap.name][key] = _coerce(chap, key, parse_value(value), value)
    return out


def resolve_parameters(
    chapters: dict[str, Chapter],
    profile: str,
    sets: list[str],
    known: dict[str, Chapter] | None = None,
    bk: Book | None = None,
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
        raise BookError(
            f"notebooks/profiles.toml: [{profile}.{stray[0]}] names no chapter; valid chapters: {', '.join(known)}"
        )
    injected: dict[str, dict[str, Any]] = {c: dict(profiles[profile].get(c, {})) for c in chapters}
    for chap, params in injected.items():
        if chapters[chap].problem is not None:
            continue  # a broken chapter does not run; its profile values are checked once it parses
        unknown = sorted(set(params) - set(chapters[chap].defaults))
        if unknown:
            raise BookError(
                f"{chap}: unknown parameter(s) {', '.join(unknown)} in profile {profile!r}; "
                f"valid parameters: {', '.join(sorted(chapters[chap].defaults))}"
            )
        for key, value in params.items():
            where = f"{bk.shown(bk.profiles_file) if bk else 'notebooks/profiles.toml'} [{profile}.{chap}] {key}"
            params[key] = _coerce(chapters[chap], key, value, repr(value), where=where)
    for chap, values in parse_sets(chapters, sets).items():
        injected[chap].update(values)
    return {c: p for c, p in injected.items() if p}


def select(chapters: dict[str, Chapter], only: list[str] | None) -> list[Chapter]:
    """The chapters ``--only`` names (file stem, or without ``NN_``), in book order, each once."""
    if not only:
        return list(chapters.values())
    picked: list[Chapter] = []
    for name in only:
        matches = [
            c
            for c in chapters.values()
            if c.name == name or c.name.split("_", 1)[-1] == name or c.name.startswith(name + "_")
        ]
        if len(matches) != 1:
            raise BookError(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters)}")
        if matches[0] not in picked:
            picked.append(matches[0])
    order = list(chapters)
    return sorted(picked, key=lambda c: order.index(c.name))
