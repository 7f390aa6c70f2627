"""The public API of the core and of ``gtcore.models``, walked as python-control's docstring test does.

Used by ``test_docstrings.py`` (every parameter documented) and ``test_book.py`` (every name in the
rendered API reference): every name in ``__all__`` of the core's modules and of ``gtcore.models``; in a
module without ``__all__``, every public function and class it defines; and the public methods and
properties of those classes (``__call__`` included).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import gtcore

#: the layers above the core and the models: documented in the book, not held to the docstring test
NOT_WALKED = ("gtbook.studies", "gtbook")


def api_modules() -> list[ModuleType]:
    """The core's public modules and ``gtcore.models``'s (no module whose name has a part starting with ``_``)."""
    names = ["gtcore"] + [m.name for m in pkgutil.walk_packages(gtcore.__path__, "gtcore.")]
    keep = [n for n in names if not n.startswith(NOT_WALKED) and not any(p.startswith("_") for p in n.split("."))]
    return [importlib.import_module(n) for n in sorted(keep)]


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, or the public functions and classes the module defines."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
    ]


def is_ours(obj: Any) -> bool:
    """Whether gtcore defines ``obj``."""
    return (getattr(obj, "__module__", None) or "").startswith("gtcore")


def public_methods(cls: type) -> Iterator[tuple[str, Any]]:
    """The methods and properties ``cls`` itself defines (public ones, and ``__call__``)."""
    if issubclass(cls, enum.Enum):
        return
    for name, raw in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(raw, property):
            yield name, raw
        elif isinstance(raw, (staticmethod, classmethod)):
            yield name, raw.__func__
        elif inspect.isfunction(raw):
            yield name, raw


def api_objects() -> dict[str, Any]:
    """Qualified name -> function, class, method or property, each once: under the shallowest module
    that lists it, the package ``gtcore`` itself last (the API reference documents a re-exported name
    where its subpackage lists it)."""
    seen: set[int] = set()
    out: dict[str, Any] = {}
    modules = sorted(api_modules(), key=lambda m: (m.__name__ == "gtcore", m.__name__.count("."), m.__name__))
    for module in modules:
        for name in public_names(module):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not is_ours(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            qual = f"{module.__name__}.{name}"
            out[qual] = obj
            if inspect.isclass(obj):
                for mname, method in public_methods(obj):
                    out[f"{qual}.{mname}"] = method
    return out


def api_data() -> dict[str, list[str]]:
    """Module -> the constants its ``__all__`` lists (registries, tables, thresholds)."""
    out: dict[str, list[str]] = {}
    for module in api_modules():
        names = [
            n
            for n in getattr(module, "__all__", [])
            if not (inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n)))
        ]
        if names:
            out[module.__name__] = names
    return out
