"""A training checkpoint in a file: :class:`TorchFile`, the store :func:`gtcore.training.train_transformer`
saves its state to and resumes from.

The state is written with ``torch.save`` to a temporary file beside the target and moved over it (an
interrupted save leaves the previous checkpoint), and read back with ``torch.load(weights_only=True)``:
tensors, numbers, strings and containers of them, nothing else. A file that holds anything else (a
pickle that would run code, a truncated or empty file, text) is refused with its path, before any of it
is used; no byte of it is executed.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["TorchFile"]


class TorchFile:
    """A training checkpoint kept in one file (see the module docstring).

    Parameters
    ----------
    path : path
        The file; it need not exist (nothing saved yet), and its folder is created on the first save.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"TorchFile({str(self.path)!r})"

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when the file does not exist; ValueError naming the file when it is not
        a checkpoint that ``torch.load(weights_only=True)`` reads."""
        import torch

        if not self.path.exists():
            return None
        if not self.path.is_file():
            raise ValueError(f"checkpoint {str(self.path)!r} is not a file")
        try:
            state = torch.load(self.path, weights_only=True, map_location="cpu")
        except (
            pickle.UnpicklingError,
            RuntimeError,
            EOFError,
            OSError,
            zipfile.BadZipFile,
            ValueError,
            TypeError,
            AttributeError,
            ImportError,
            UnicodeDecodeError,
        ) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(
                f"checkpoint {str(self.path)!r} is not a training checkpoint that loads safely "
                f"(torch.load with weights_only=True: {reason[:200]}); remove it or give another "
                "path"
            ) from None
        if not isinstance(state, dict):
            raise ValueError(f"checkpoint {str(self.path)!r} holds a {type(state).__name__}, not a training state")
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` atomically (a temporary file beside the target, then a rename)."""
        import torch

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".", suffix=".tmp")
        os.close(fd)
        try:
            torch.save(state, tmp)
            os.replace(tmp, self.path)
        finally:
            Path(tmp).unlink(missing_ok=True)
