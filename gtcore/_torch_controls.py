"""Controls as torch tensors for the particle integrator (:mod:`gtcore.particles`): converted once per
:class:`~gtcore.controls.Controls` object (controls are immutable) and per dtype, device and kernel dtype, and
kept while the Controls lives."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gtcore.attention import AttentionType, attention_of
from gtcore.controls import Controls


@dataclass
class _TorchControls:
    A: torch.Tensor
    b: torch.Tensor
    V: torch.Tensor
    params: Any  # the attention type's head parameters (dot: B, shape (H, d, d))
    U: torch.Tensor | None
    W: torch.Tensor | None
    c: torch.Tensor | None
    attention: AttentionType
    attention_on: bool
    kernel_dtype: Any = None  # the softmax kernel's dtype when it differs from the state's
    kernel_params: Any = None  # ``params`` in that dtype


#: converted controls, per Controls object (immutable) and (dtype, device, kernel dtype); entries go
#: with their Controls
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CONVERTING = threading.Lock()  # simulate_batch converts from several threads


def _torch_controls(
    ctl: Controls, dtype: torch.dtype, device: torch.device, kernel_dtype: torch.dtype | None = None
) -> _TorchControls:
    """``ctl`` as tensors of ``dtype`` on ``device``, converted once per Controls (controls are immutable)."""
    kernel_dtype = None if kernel_dtype in (None, dtype) else kernel_dtype
    with _CONVERTING:
        per_ctl = _CONVERTED.setdefault(ctl, {})
    key = (dtype, str(device), kernel_dtype)
    tc = per_ctl.get(key)
    if tc is not None:
        return tc

    def t(a):
        return None if a is None else torch.as_tensor(np.array(a), dtype=dtype, device=device)

    att = attention_of(ctl)
    tc = _TorchControls(
        t(ctl.A),
        t(ctl.b),
        t(ctl.V),
        att.torch_params(ctl, dtype, device),
        t(ctl.U),
        t(ctl.W),
        t(ctl.c),
        attention=att,
        attention_on=bool(np.any(ctl.V)),
    )
    if kernel_dtype is not None:
        tc.kernel_dtype = kernel_dtype
        tc.kernel_params = att.torch_params(ctl, kernel_dtype, device)
    per_ctl[key] = tc
    return tc


class _ControlCache:
    """:func:`_torch_controls` for one dtype, device and kernel dtype (what :func:`simulate` steps in)."""

    def __init__(self, dtype: torch.dtype, device: torch.device, kernel_dtype: torch.dtype | None = None) -> None:
        self.dtype, self.device, self.kernel_dtype = dtype, device, kernel_dtype

    def __call__(self, ctl: Controls) -> _TorchControls:
        return _torch_controls(ctl, self.dtype, self.device, self.kernel_dtype)
