"""An on-disk cache for costly pure functions (noise floors, regime maps, layer statistics).

Decorate a function whose result depends only on its arguments::

    from gtcore._cache import disk_cache

    @disk_cache
    def noise_floor(n, d, *, repeats, seed): ...

A call's key hashes the function's module and name, its arguments (NumPy arrays by dtype, shape and
bytes; dataclasses by their fields), the sources of the ``gtcore`` modules the function's module can
run (the import graph of :mod:`gtcore._dependencies`) and the Python/numpy/scipy/torch/transformers
versions. So editing any module the function depends on, or upgrading a key package, invalidates its
entries; nothing is ever served stale. An argument the key cannot describe faithfully (an object whose
repr is an address, a lambda or a closure, a random Generator) is not cached: the function just runs.
Module-level functions passed as arguments are keyed by name.

Entries live in ``$GTBOOK_CACHE`` if set (``gtbook`` sets it for its kernels to
``<book root>/.cache/gtbook``, git-ignored), else ``~/.cache/gtbook``. ``gtbook run --force`` clears them
(:func:`clear`); ``GTBOOK_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])
CACHE_ENV = "GTBOOK_CACHE"
OFF_ENV = "GTBOOK_NO_CACHE"


class Uncacheable(TypeError):
    """An argument has no faithful key."""


def cache_dir() -> Path:
    """Where entries live (see the module docstring)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gtbook"


@functools.lru_cache(maxsize=64)
def _environment_key(module: str) -> str:
    from gtcore._dependencies import key_versions, module_closure, modules_hash

    return modules_hash(module_closure([module])) + repr(sorted(key_versions().items()))


def _feed(h: hashlib._Hash, obj: Any) -> None:
    """Feed a faithful description of ``obj`` to the hash, or raise :class:`Uncacheable`."""
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        h.update(f"ndarray:{arr.dtype.str}:{arr.shape};".encode())
        h.update(arr.tobytes() if arr.dtype != object else pickle.dumps(arr))
    elif isinstance(obj, np.generic):
        _feed(h, obj.item())
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}[{len(obj)}](".encode())
        for item in obj:
            _feed(h, item)
        h.update(b")")
    elif isinstance(obj, dict):
        h.update(f"dict[{len(obj)}](".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k)
            _feed(h, obj[k])
        h.update(b")")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(f"{type(obj).__module__}.{type(obj).__qualname__}(".encode())
        for f in dataclasses.fields(obj):
            _feed(h, f.name)
            _feed(h, getattr(obj, f.name))
        h.update(b")")
    elif isinstance(obj, functools.partial):
        h.update(b"partial(")
        _feed(h, obj.func)
        _feed(h, list(obj.args))
        _feed(h, dict(obj.keywords))
        h.update(b")")
    elif callable(obj) and getattr(obj, "__qualname__", "<").count("<") == 0 and hasattr(obj, "__module__"):
        # a module-level function or class: named, and its code is covered by the library hash when it
        # lies in gtcore (a function defined elsewhere is keyed by name only: keep cached functions pure)
        h.update(f"callable:{obj.__module__}.{obj.__qualname__};".encode())
    elif isinstance(obj, np.random.Generator):
        raise Uncacheable("a random Generator has state that the key cannot see; pass a seed")
    else:
        text = repr(obj)
        if " at 0x" in text or text.startswith("<"):
            raise Uncacheable(f"no faithful key for {type(obj).__name__}")
        h.update(f"{type(obj).__module__}.{type(obj).__qualname__}:{text};".encode())


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
