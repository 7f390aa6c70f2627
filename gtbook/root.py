"""The book's root folder: the one place that finds it.

The root is the folder holding the book's ``_config.yml`` (Jupyter Book's configuration) next to
``notebooks/``. It is, in order: an explicit path (``gtbook --root PATH``), ``$GTBOOK_ROOT`` (set by
``gtbook`` for the kernels it starts), or the first folder at or above the working directory that
holds ``_config.yml``. It never comes from where ``gtcore`` is installed, so a non-editable install
(``pip install .``) works the same as an editable one.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "GTBOOK_ROOT"
MARKER = "_config.yml"


class RootNotFound(FileNotFoundError):
    """No book root: the message says where it looked and how to point at one."""


def _is_root(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def find_root(explicit: str | os.PathLike | None = None, *, cwd: str | os.PathLike | None = None) -> Path:
    """The book's root folder (see the module docstring for the search order).

    Raises
    ------
    RootNotFound
        When the explicit path or ``$GTBOOK_ROOT`` holds no ``_config.yml``, or no folder at or above
        the working directory does.
    """
    if explicit is not None:
        path = Path(explicit).expanduser().resolve()
        if not _is_root(path):
            raise RootNotFound(f"{path} holds no {MARKER}: not a book root")
        return path
    env = os.environ.get(ROOT_ENV)
    if env:
        path = Path(env).expanduser().resolve()
        if not _is_root(path):
            raise RootNotFound(f"${ROOT_ENV}={env} holds no {MARKER}: not a book root")
        return path
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if _is_root(folder):
            return folder
    raise RootNotFound(
        f"no {MARKER} at or above {here}: run gtbook inside the book's folder "
        f"(the clone), or pass --root PATH (or set ${ROOT_ENV})"
    )
