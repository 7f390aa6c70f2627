"""The checkpoint of :func:`gtcore.training.train_transformer`: the store's protocol, the state's entries, the
problem's key and the check of a loaded state (re-exported by :mod:`gtcore.training`)."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from gtcore._keys import Undescribable, digest


class Checkpoint(Protocol):
    """Where :func:`train_transformer` keeps its state between runs: the caller's storage (a file, a
    database, memory). The state is a dict of tensors, numbers, strings and lists and dicts of them
    (no other objects), so a store may keep it with ``torch.save`` and read it back with
    ``torch.load(weights_only=True)``; :class:`gtbook.checkpoints.TorchFile` does so atomically."""

    def load(self) -> dict[str, Any] | None:
        """The last saved state.

        Returns
        -------
        dict or None
            The state :meth:`save` was last given, or None when nothing was saved.
        """

    def save(self, state: dict[str, Any]) -> None:
        """Keep ``state``, replacing the previous one.

        Parameters
        ----------
        state : dict
            Tensors, numbers, strings, and lists and dicts of them.
        """


#: the entries of a saved state, and what each must be
_STATE = {"key": str, "step": int, "params": list, "optimizer": dict, "rng": dict, "loss": list, "moment_w2sq": list}


def _checkpoint_key(*parts: Any) -> str:
    """A key of the training problem and settings, or ValueError when a part has no faithful description."""
    try:
        return digest("gtcore.training.train_transformer", *parts)
    except Undescribable as exc:
        raise ValueError(
            f"checkpoint: the inputs cannot be described faithfully ({exc}); pass arrays, or "
            "samplers that are module-level functions or functools.partial of them"
        ) from None


def _checked_state(state: Any, checkpoint: Any, key: str, params: list[torch.Tensor]) -> dict[str, Any]:
    """``state`` if it is a training state of this problem (its entries, types and shapes), else ValueError."""
    where = f"checkpoint {checkpoint!r}"
    if not isinstance(state, dict) or set(state) != set(_STATE):
        raise ValueError(f"{where} holds no training state (expected the entries {sorted(_STATE)})")
    for name, kind in _STATE.items():
        if not isinstance(state[name], kind):
            raise ValueError(f"{where}: its {name!r} is a {type(state[name]).__name__}, not a {kind.__name__}")
    if state["key"] != key:
        raise ValueError(f"{where} belongs to another problem or other settings; remove it or give another one")
    saved = state["params"]
    if len(saved) != len(params) or any(
        not isinstance(t, torch.Tensor) or t.shape != p.shape for t, p in zip(saved, params, strict=False)
    ):
        raise ValueError(f"{where}: its parameters do not have this network's shapes")
    return state
