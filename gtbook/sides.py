r"""The two sides of a claim, traced: which library functions computed the observed value and which the
prediction, so that a ``reproduces`` claim whose two sides share the code path it checks is refused.

A ``reproduces`` claim compares an independent system (finite-N tokens, Transformer code, a trained model)
with what the statement predicts (a closed form, eq. (1.1)); it shows something only if the prediction is
not computed by the code that produced the observation. A chapter wraps each side in :func:`side`::

    with side("observed") as obs:
        cloud = simulate(x0, controls, T)             # tokens: gtcore.particles, the finite-N kernels
    with side("predicted") as pred:
        traj = integrate_moments(mu0, Sigma0, controls, (0, T))   # eq. (1.1): gtcore.moments, the tilt
    claim("tokens_follow_the_ode", distance(cloud, traj), lt=band, statement="invariance",
          kind="reproduces", scope=..., sides=(obs, pred))

Each side records every function of ``gtcore`` that ran inside it (a profiling hook, Python functions only,
in this thread and in threads started inside it). :func:`shared_code` is what both recorded, less the
plumbing both sides may share (:data:`SHARED_OK`: argument checks, the parameters' container, the
sampling of the same input, linear-algebra helpers, progress bars, statuses, an attention type's accessor of
its parameters); :func:`gtbook.claims.claim`
refuses a ``reproduces`` claim whose sides share anything else, naming the functions, and records both
lists with the claim.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

__all__ = ["SHARED_OK", "SHARED_OK_METHODS", "Side", "shared_code", "side"]

#: modules whose functions both sides of a claim may call: plumbing, not the code path a claim checks
SHARED_OK = (
    "gtcore._validation",
    "gtcore._linalg",
    "gtcore._repr",
    "gtcore._keys",
    "gtcore._progress",
    "gtcore.status",
    "gtcore.controls",
    "gtcore.stats.sampling",
    "gtcore.attention.__init__",
    "gtcore.attention",
    "gtcore.__init__",
    "gtcore",
)

#: methods any attention type has that only read its parameters out of the controls (the same on both sides)
SHARED_OK_METHODS = ("params", "torch_params")


def _plumbing(function: str) -> bool:
    module, qualname = function.split(":", 1)
    return module in SHARED_OK or (
        module.startswith("gtcore.attention") and qualname.rsplit(".", 1)[-1] in SHARED_OK_METHODS
    )


@dataclass
class Side:
    """The ``gtcore`` functions that ran while a side was computed (``module:qualname``)."""

    label: str
    functions: set[str] = field(default_factory=set)

    def model_functions(self) -> set[str]:
        """The recorded functions less the shared plumbing (:data:`SHARED_OK`, :data:`SHARED_OK_METHODS`)."""
        return {f for f in self.functions if not _plumbing(f)}


def _recorder(found: set[str]):
    seen: set[int] = set()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        key = id(code)
        if key in seen:
            return
        seen.add(key)
        module = frame.f_globals.get("__name__", "")
        if module == "gtcore" or module.startswith("gtcore."):
            found.add(f"{module}:{getattr(code, 'co_qualname', code.co_name)}")

    return hook


@contextmanager
def side(label: str) -> Iterator[Side]:
    """Record the ``gtcore`` functions that run inside the block (see the module docstring)."""
    out = Side(label)
    hook = _recorder(out.functions)
    previous, previous_threads = sys.getprofile(), getattr(threading, "_profile_hook", None)
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield out
    finally:
        sys.setprofile(previous)
        threading.setprofile(previous_threads)


def shared_code(observed: Side, predicted: Side) -> list[str]:
    """The functions both sides ran, plumbing (:data:`SHARED_OK`) excepted, sorted."""
    return sorted(observed.model_functions() & predicted.model_functions())
