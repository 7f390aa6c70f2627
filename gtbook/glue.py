"""Numbers the prose states, taken from the computation (myst-nb glue).

In a chapter's code cell::

    from gtbook.glue import glue
    glue("weak_slope", studies["weak attention"].slope)

and in a later markdown cell, ``{glue:text}`weak_slope:.2f``` renders the value (format spec after
the colon). The value is stored as a plain Python number or string, never a NumPy scalar (whose
``repr`` would print as ``np.float64(...)`` and break the format spec), and nothing is displayed.
Outside a Jupyter kernel (a plain ``python`` run) the call does nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """``value`` as a plain Python scalar (NumPy scalars and 0-d arrays unwrapped)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def glue(name: str, value: Any) -> Any:
    """Record ``value`` under ``name`` for ``{glue:text}`` in the page's prose; return it (plain)."""
    value = plain(value)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the book's kernel
        return value
    if get_ipython() is None:
        return value
    from myst_nb import glue as _glue

    _glue(name, value, display=False)
    return value
