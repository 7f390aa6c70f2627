"""Short ``repr``s for the result dataclasses: shapes for arrays, statuses by name, key numbers to 4 digits.

A result class opts in with ``__repr__ = short_repr`` in its body (``@dataclass`` keeps a ``__repr__``
the class defines), or calls :func:`short_repr` with the derived numbers worth showing::

    MomentTrajectory(t=(61,) in [0, 8], mu=(61, 3), Sigma=(61, 3, 3), status='blowup', crossing_time=2.314, ...)

One line, a few hundred characters at most, never the arrays' values (a printed result used to be
~60 lines of numbers).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

#: longest text shown for a string field
TEXT_CHARS = 48
#: longest repr
REPR_CHARS = 400


def _number(x: float) -> str:
    return f"{x:.4g}"


def brief(value: Any) -> str:
    """A few characters describing ``value``: an array's shape (and range, for a 1-d one), a number to
    4 digits, an enum's name, a short string, a nested result's class name, a container's length."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _number(float(value))
    if isinstance(value, complex):
        return f"{value:.4g}"
    if isinstance(value, str):
        return repr(value if len(value) <= TEXT_CHARS else value[: TEXT_CHARS - 1] + "…")
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):  # a NumPy array or a torch tensor
        dims = "(" + ", ".join(str(int(n)) for n in shape) + ("," if len(shape) == 1 else "") + ")"
        if len(shape) == 0:
            try:
                return _number(float(value))
            except (TypeError, ValueError):
                return dims
        if len(shape) == 1 and 0 < int(shape[0]):
            try:
                arr = np.asarray(value, dtype=float)
                if np.all(np.isfinite(arr)):
                    return f"{dims} in [{_number(arr.min())}, {_number(arr.max())}]"
            except (TypeError, ValueError, RuntimeError):
                pass
        return dims
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"{type(value).__name__}(…)"
    if isinstance(value, (list, tuple)):
        if len(value) <= 4 and all(isinstance(v, (int, float, np.integer, np.floating)) for v in value):
            inner = ", ".join(brief(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
        return f"{type(value).__name__}[{len(value)}]"
    if isinstance(value, dict):
        return f"dict[{len(value)}]"
    text = type(value).__name__
    return text


def short_repr(self: Any, **extra: Any) -> str:
    """``ClassName(field=brief, ...)`` over a dataclass's fields shown in its repr, then ``extra``."""
    parts = []
    if dataclasses.is_dataclass(self):
        for f in dataclasses.fields(self):
            if f.repr:
                parts.append(f"{f.name}={brief(getattr(self, f.name))}")
    parts += [f"{k}={brief(v)}" for k, v in extra.items()]
    text = f"{type(self).__name__}({', '.join(parts)})"
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 2] + "…)"
