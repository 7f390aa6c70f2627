"""Faithful descriptions of a call's arguments, hashed: what makes two calls the same computation.

The trainer keys its checkpoints with :func:`digest` (a checkpoint of another problem is refused), and the
book's disk cache keys its entries with the same description plus the code and versions it depends on.
NumPy arrays are described by dtype, shape and bytes; dataclasses by their fields; module-level functions
and classes by name; ``functools.partial`` by its function and arguments. An object the description cannot
see through (an object whose repr is an address, a lambda or a closure, a random Generator) raises
:class:`Undescribable`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
from typing import Any

import numpy as np


class Undescribable(TypeError):
    """An argument has no faithful description."""


def feed(h: hashlib._Hash, obj: Any) -> None:
    """Feed a faithful description of ``obj`` to the hash, or raise :class:`Undescribable`."""
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        h.update(f"ndarray:{arr.dtype.str}:{arr.shape};".encode())
        h.update(arr.tobytes() if arr.dtype != object else pickle.dumps(arr))
    elif isinstance(obj, np.generic):
        feed(h, obj.item())
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}[{len(obj)}](".encode())
        for item in obj:
            feed(h, item)
        h.update(b")")
    elif isinstance(obj, dict):
        h.update(f"dict[{len(obj)}](".encode())
        for k in sorted(obj, key=repr):
            feed(h, k)
            feed(h, obj[k])
        h.update(b")")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(f"{type(obj).__module__}.{type(obj).__qualname__}(".encode())
        for f in dataclasses.fields(obj):
            feed(h, f.name)
            feed(h, getattr(obj, f.name))
        h.update(b")")
    elif isinstance(obj, functools.partial):
        h.update(b"partial(")
        feed(h, obj.func)
        feed(h, list(obj.args))
        feed(h, dict(obj.keywords))
        h.update(b")")
    elif callable(obj) and getattr(obj, "__qualname__", "<").count("<") == 0 and hasattr(obj, "__module__"):
        # a module-level function or class: named, and its code is covered by the library hash when it
        # lies in gtcore (a function defined elsewhere is keyed by name only: keep cached functions pure)
        h.update(f"callable:{obj.__module__}.{obj.__qualname__};".encode())
    elif isinstance(obj, np.random.Generator):
        raise Undescribable("a random Generator has state that the key cannot see; pass a seed")
    else:
        text = repr(obj)
        if " at 0x" in text or text.startswith("<"):
            raise Undescribable(f"no faithful key for {type(obj).__name__}")
        h.update(f"{type(obj).__module__}.{type(obj).__qualname__}:{text};".encode())


def digest(*parts: Any) -> str:
    """A hex digest (32 digits) of the faithful description of ``parts`` (raises :class:`Undescribable`)."""
    h = hashlib.sha256()
    feed(h, list(parts))
    return h.hexdigest()[:32]
