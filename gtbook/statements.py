"""The statement registry: the paper's statements the book checks, and what it adds beyond them.

The registry is ``statements.toml``, package data of :mod:`gtbook` (read with
:mod:`importlib.resources`, so a claim works in any folder, inside a book's tree or not). Each
entry is a :class:`Statement`; every claim names one by id
(``claim(..., statement="blowup", kind="reproduces")``), and the reproducibility report groups the claims by
statement.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from gtbook.scope import StatedScope, stated_from_toml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


REGISTRY = "statements.toml"
ORIGINS = ("paper", "beyond")


class StatementError(ValueError):
    """The registry is missing or malformed, or a claim names an unknown statement."""


@dataclass(frozen=True)
class Statement:
    """One entry of the registry.

    Attributes
    ----------
    id : str
        The key claims use.
    title, paraphrase : str
        A few words, and the statement in this book's words (not a quotation).
    where : str
        Where in the paper (``"beyond the paper"`` for the book's own results).
    origin : str
        ``"paper"`` or ``"beyond"``.
    reproducible_here : bool
        False when the paper's setting cannot be rebuilt here; ``reason`` says why.
    reason, note : str
        Why not reproducible; how the book tests it otherwise.
    rests_on : tuple of str
        The gtcore functions, classes or modules its checks rest on (the paper map links them).
    stated : StatedScope
        Where the statement is stated (the registry's ``[id.stated]`` table; general parameters, any d,
        one dot-product head, when absent): the scope its ``reproduces`` claims must cover
        (:mod:`gtbook.scope`).
    """

    id: str
    title: str
    paraphrase: str
    where: str
    origin: str
    reproducible_here: bool
    reason: str = ""
    note: str = ""
    rests_on: tuple[str, ...] = ()
    stated: StatedScope = field(default_factory=StatedScope)


def registry_path() -> Path:
    """The registry this process uses: ``statements.toml``, package data of :mod:`gtbook`."""
    return Path(str(resources.files("gtbook").joinpath(REGISTRY)))


def load_statements(path: str | os.PathLike | None = None) -> dict[str, Statement]:
    """The registry as ``{id: Statement}``, in file order.

    Raises
    ------
    StatementError
        When the file is missing, an entry lacks a field or has a bad scope, or a statement marked
        not reproducible gives no reason.
    """
    return dict(_load(str(Path(path).resolve()) if path is not None else str(registry_path())))


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[tuple[str, Statement], ...]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise StatementError(f"statement registry not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StatementError(f"{path}: not valid TOML ({exc})") from None
    out = []
    required = ("title", "paraphrase", "where", "origin", "reproducible_here")
    for sid, entry in data.items():
        if not isinstance(entry, dict):
            raise StatementError(f"{path}: [{sid}] must be a table")
        missing = [k for k in required if k not in entry]
        if missing:
            raise StatementError(f"{path}: [{sid}] lacks {', '.join(missing)}")
        unknown = sorted(set(entry) - set(required) - {"reason", "note", "stated", "rests_on"})
        if unknown:
            raise StatementError(f"{path}: [{sid}] has unknown field(s) {', '.join(unknown)}")
        if entry["origin"] not in ORIGINS:
            raise StatementError(f"{path}: [{sid}] origin must be one of {', '.join(ORIGINS)}")
        if not isinstance(entry["reproducible_here"], bool):
            raise StatementError(f"{path}: [{sid}] reproducible_here must be true or false")
        if not entry["reproducible_here"] and not entry.get("reason"):
            raise StatementError(f"{path}: [{sid}] is not reproducible here but gives no reason")
        try:
            stated = stated_from_toml(entry.pop("stated", None), f"{path}: [{sid}]")
        except (ValueError, TypeError) as exc:
            raise StatementError(f"{path}: [{sid}] stated: {exc}") from None
        rests = entry.pop("rests_on", [])
        if not isinstance(rests, list) or not all(isinstance(x, str) and x.startswith("gtcore") for x in rests):
            raise StatementError(f"{path}: [{sid}] rests_on must be a list of gtcore names")
        out.append((sid, Statement(id=sid, stated=stated, rests_on=tuple(rests), **entry)))
    return tuple(out)
