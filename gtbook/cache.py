"""An on-disk cache for costly pure functions (noise floors, regime maps, layer statistics).

Decorate a function whose result depends only on its arguments::

    from gtbook.cache import disk_cache

    @disk_cache
    def noise_floor(n, d, *, repeats, seed): ...

A call's key hashes the function's module and name, its arguments (NumPy arrays by dtype, shape and
bytes; dataclasses by their fields), the sources of the ``gtcore`` modules the function's module can
run (the import graph of :mod:`gtbook.imports`) and the Python/numpy/scipy/torch/transformers
versions. So editing any module the function depends on, or upgrading a key package, invalidates its
entries; nothing is ever served stale. An argument the key cannot describe faithfully (an object whose
repr is an address, a lambda or a closure, a random Generator) is not cached: the function just runs.
Module-level functions passed as arguments are keyed by name.

Entries live in ``$GTBOOK_CACHE`` if set (``gtbook`` sets it for its kernels to
``<book root>/.cache/gtbook``, git-ignored), else ``~/.cache/gtbook``. ``gtbook run --force`` clears them
(:func:`clear`); ``GTBOOK_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gtcore._keys import Undescribable as Uncacheable
from gtcore._keys import feed as _feed

__all__ = ["Uncacheable", "cache_dir", "call_key", "clear", "disk_cache"]

F = TypeVar("F", bound=Callable[..., Any])
CACHE_ENV = "GTBOOK_CACHE"
OFF_ENV = "GTBOOK_NO_CACHE"


def cache_dir() -> Path:
    """Where entries live (see the module docstring)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gtbook"


@functools.lru_cache(maxsize=64)
def _environment_key(module: str) -> str:
    from gtbook.imports import key_versions, module_closure, modules_hash

    return modules_hash(module_closure([module])) + repr(sorted(key_versions().items()))


def call_key(fn: Callable, args: tuple, kwargs: dict) -> str:
    """The key of ``fn(*args, **kwargs)`` (raises :class:`Uncacheable`)."""
    h = hashlib.sha256()
    h.update(f"{fn.__module__}.{fn.__qualname__};".encode())
    h.update(_environment_key(fn.__module__).encode())
    _feed(h, list(args))
    _feed(h, dict(kwargs))
    return h.hexdigest()[:32]


def disk_cache(fn: F) -> F:
    """Cache ``fn``'s results on disk, keyed as the module docstring says."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if os.environ.get(OFF_ENV):
            return fn(*args, **kwargs)
        try:
            key = call_key(fn, args, kwargs)
        except Uncacheable:
            return fn(*args, **kwargs)
        path = cache_dir() / f"{fn.__module__}.{fn.__qualname__}" / f"{key}.pkl"
        try:
            with open(path, "rb") as fh:
                return pickle.load(fh)
        except FileNotFoundError:
            pass
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            path.unlink(missing_ok=True)  # a corrupt or outdated entry: recompute
        result = fn(*args, **kwargs)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)  # atomic: concurrent kernels never read half an entry
        except OSError:
            pass  # a read-only or full disk: the result is still returned
        return result

    wrapper.cache_key = lambda *a, **k: call_key(fn, a, k)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def clear(directory: str | os.PathLike | None = None) -> int:
    """Delete every entry; return how many there were."""
    root = Path(directory) if directory is not None else cache_dir()
    if not root.exists():
        return 0
    n = sum(1 for _ in root.rglob("*.pkl"))
    shutil.rmtree(root, ignore_errors=True)
    return n
