r"""The finite-N Transformer: N tokens moved by self-attention and a feed-forward layer.

Each token follows the particle velocity (DESIGN.md's conventions)

.. math::

    \dot x_i = v_i = A x_i + b + W\sigma(U x_i + c)
        + \sum_h V_h \sum_{j=1}^N \frac{e^{x_j^\top B_h x_i}}{\sum_k e^{x_k^\top B_h x_i}}\, x_j ,

the interacting particle system whose mean-field limit is the paper's measure flow. The feed-forward
block :math:`W\sigma(Ux + c)` is present only when the :class:`~gtcore.Controls` carry ``U, W, c``;
``ff="identity"`` makes it affine (the invariance is then exact in the mean-field limit) and
``ff="relu"`` uses :math:`\sigma = \max(\cdot, 0)`.

With ``attention="gaussian"`` the empirical attention average is replaced by its value against
the Gaussian with the cloud's moments, :math:`\hat\mu + \hat\Sigma B_h x_i`: the velocity is then
affine and the cloud's moments follow the moment ODE exactly (up to the integrator), which
separates sampling error from mean-field error.

Attention runs through torch's fused ``scaled_dot_product_attention`` with scale 1 (query
:math:`XB_h^\top`, key :math:`X`, value :math:`X`, then :math:`V_h` applied to the output). On CPU
and CUDA the fused kernels work in blocks: memory :math:`O(Nd)`, no :math:`N\times N` matrix.

Explicit Euler with step :math:`h` and ``steps = L`` *is* an L-layer residual Transformer
:math:`x \mapsto x + h\,v(x)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._progress import progress as progress_bar
from ._validation import as_float_array, check_tokens
from .controls import Controls, ControlsLike, as_control_function, evaluate_controls

ACTIVATIONS = ("identity", "relu")
ATTENTIONS = ("empirical", "gaussian")

State = torch.Tensor
VelocityFn = Callable[[float, State], State]


# --------------------------------------------------------------------- integrators
class FixedStepMethod:
    """A fixed-step explicit integrator: one ``step`` from ``(t, x)`` to ``t + h``."""

    order: int = 0

    def step(self, f: VelocityFn, t: float, x: State, h: float) -> State:  # pragma: no cover
        raise AttributeError("subclasses define step")


class Euler(FixedStepMethod):
    r"""Explicit Euler, :math:`x_{k+1} = x_k + h f(t_k, x_k)`: one residual layer per step."""

    order = 1

    def step(self, f, t, x, h):
        return x + h * f(t, x)


class Midpoint(FixedStepMethod):
    r"""Explicit midpoint, :math:`x_{k+1} = x_k + h f(t_k + h/2, x_k + \tfrac h2 f(t_k, x_k))`."""

    order = 2

    def step(self, f, t, x, h):
        return x + h * f(t + h / 2, x + h / 2 * f(t, x))


class RK4(FixedStepMethod):
    """The classical fourth-order Runge–Kutta method."""

    order = 4

    def step(self, f, t, x, h):
        k1 = f(t, x)
        k2 = f(t + h / 2, x + h / 2 * k1)
        k3 = f(t + h / 2, x + h / 2 * k2)
        k4 = f(t + h, x + h * k3)
        return x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


#: the one registry of integrators, by name
SOLVERS: dict[str, type[FixedStepMethod]] = {"euler": Euler, "midpoint": Midpoint, "rk4": RK4}


# ------------------------------------------------------------------ torch helpers
def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"``: CUDA when present, else CPU."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class _TorchControls:
    A: torch.Tensor
    b: torch.Tensor
    V: torch.Tensor
    B: torch.Tensor
    U: torch.Tensor | None
    W: torch.Tensor | None
    c: torch.Tensor | None
    attention_on: bool


class _ControlCache:
    """Converts :class:`Controls` to tensors once per object (controls are immutable)."""

    def __init__(self, dtype: torch.dtype, device: torch.device) -> None:
        self.dtype, self.device = dtype, device
        self._last: tuple[Controls, _TorchControls] | None = None
        self._store: dict[int, tuple[Controls, _TorchControls]] = {}

    def __call__(self, ctl: Controls) -> _TorchControls:
        hit = self._store.get(id(ctl))
        if hit is not None and hit[0] is ctl:
            return hit[1]

        def t(a):
            return None if a is None else torch.as_tensor(np.array(a), dtype=self.dtype, device=self.device)

        tc = _TorchControls(t(ctl.A), t(ctl.b), t(ctl.V), t(ctl.B), t(ctl.U), t(ctl.W), t(ctl.c),
                            attention_on=bool(np.any(ctl.V)))
        if len(self._store) > 256:
            self._store.clear()
        self._store[id(ctl)] = (ctl, tc)
        return tc


def empirical_moments_torch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and (1/N) covariance of a cloud, :math:`\hat\Sigma = \frac1N\sum_i (x_i-\hat\mu)(x_i-\hat\mu)^\top`."""
    mu = x.mean(dim=0)
    xc = x - mu
    S = xc.T @ xc / x.shape[0]
    return mu, 0.5 * (S + S.T)


def attention_average(x: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    r"""Per head, :math:`\sum_j \operatorname{softmax}_j(x_j^\top B_h x_i)\, x_j` for every token ``i``.

    Fused ``scaled_dot_product_attention`` (scale 1) over a (1, H, N, d) batch: query
    :math:`XB_h^\top`, key and value :math:`X`. Returns shape (H, N, d).
    """
    H = B.shape[0]
    q = torch.einsum("nk,hjk->hnj", x, B).unsqueeze(0)  # q_i = B_h x_i
    kv = x.unsqueeze(0).unsqueeze(0).expand(1, H, *x.shape)
    return F.scaled_dot_product_attention(q, kv, kv, scale=1.0)[0]


def _velocity(x: torch.Tensor, tc: _TorchControls, ff: str, attention: str) -> torch.Tensor:
    v = x @ tc.A.T + tc.b
    if tc.U is not None:
        pre = x @ tc.U.T + tc.c
        v = v + (torch.relu(pre) if ff == "relu" else pre) @ tc.W.T
    if not tc.attention_on:
        return v
    if attention == "gaussian":
        mu, S = empirical_moments_torch(x)
        # sum_h V_h (mu + S B_h x)
        drift = (tc.V @ S @ tc.B).sum(0)
        return v + x @ drift.T + tc.V.sum(0) @ mu
    avg = attention_average(x, tc.B)
    return v + torch.einsum("hnj,hij->ni", avg, tc.V)


# --------------------------------------------------------------------- validation
def _check_choice(value: str, name: str, options) -> str:
    if value not in options:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(sorted(options))}")
    return value


def _as_tokens(x0: Any, name: str = "x0") -> np.ndarray | torch.Tensor:
    """(N, d) tokens, N >= 2, finite: a tensor stays a tensor (no copy), anything else is numpy."""
    if not isinstance(x0, torch.Tensor):
        return check_tokens(x0, name, min_n=2)
    if not x0.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x0.dtype}")
    if x0.ndim != 2:
        raise ValueError(f"{name} must have shape (N, d), got shape {tuple(x0.shape)}")
    if x0.shape[0] < 2:
        raise ValueError(f"{name} must hold at least N=2 tokens, got N={x0.shape[0]}")
    if not bool(torch.isfinite(x0).all()):
        raise ValueError(f"{name} has non-finite entries (NaN or inf)")
    return x0


def velocity(x: Any, controls: Controls, *, ff: str = "identity", attention: str = "empirical",
             dtype: torch.dtype = torch.float64, device: str | torch.device = "auto") -> np.ndarray | torch.Tensor:
    r"""The particle velocity :math:`v_i` of every token (module docstring's equation).

    Parameters
    ----------
    x : (N, d) array or tensor
    controls : Controls
    ff : "identity" or "relu"
        Activation of the block :math:`W\sigma(Ux + c)` ("relu" needs ``U, W, c``).
    attention : "empirical" (softmax over the N tokens) or "gaussian" (against the Gaussian
        with the cloud's moments: :math:`\hat\mu + \hat\Sigma B_h x`)

    Returns
    -------
    (N, d) numpy array when ``x`` is numpy, else a tensor on ``x``'s device and dtype.
    """
    arr = _as_tokens(x, "x")
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    _check_ff(ff, controls)
    _check_choice(attention, "attention", ATTENTIONS)
    if controls.d != arr.shape[1]:
        raise ValueError(f"x has d={arr.shape[1]} but controls act on d={controls.d}")
    if isinstance(arr, torch.Tensor):
        xt = arr
    else:
        xt = torch.as_tensor(arr, dtype=dtype, device=resolve_device(device))
    tc = _ControlCache(xt.dtype, xt.device)(controls)
    v = _velocity(xt, tc, ff, attention)
    return v if isinstance(arr, torch.Tensor) else v.cpu().numpy()


def _check_ff(ff: str, controls: Controls | None) -> None:
    _check_choice(ff, "ff (activation)", ACTIVATIONS)
    if ff == "relu" and controls is not None and not controls.has_feedforward:
        raise ValueError("ff='relu' needs a feed-forward block: give Controls(U=..., W=..., c=...)")


# --------------------------------------------------------------------- simulation
@dataclass
class ParticleTrajectory:
    """A simulated token cloud.

    Attributes
    ----------
    t : (n,) recorded times
    mu : (n, d) empirical means
    Sigma : (n, d, d) empirical (1/N) covariances
    tokens : (n, N, d) the tokens at the recorded times, or None
    status : "completed", or "blowup" when the cloud's ||Sigma||_F exceeded ``blowup_norm`` or
        became non-finite; the arrays then end at the last finite state before it
    blowup_time : time of the step at which blow-up was detected, or None
    method, steps, h : the integrator, the number of steps taken and the step size
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    tokens: np.ndarray | None
    status: str
    blowup_time: float | None
    method: str
    steps: int
    h: float


def simulate(x0: Any, controls: ControlsLike, t_span: tuple[float, float], steps: int, *,
             method: str = "rk4", ff: str = "identity", record_every: int = 1,
             dtype: torch.dtype = torch.float64, device: str | torch.device = "auto",
             attention: str = "empirical", keep_tokens: bool = False, blowup_norm: float = 1e8,
             progress: bool = False) -> ParticleTrajectory:
    r"""Move N tokens with the particle velocity, by a fixed-step integrator.

    Parameters
    ----------
    x0 : (N, d) array or tensor, N >= 2
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        Evaluated at each stage time of the integrator.
    t_span : (t0, t1)
    steps : int >= 1
        Number of steps of size :math:`h = (t_1 - t_0)/\text{steps}`.
    method : a name in :data:`SOLVERS` ("euler", "midpoint", "rk4")
    ff : "identity" or "relu"
    record_every : record the moments every this many steps (the first and last are always kept)
    dtype, device : torch dtype, and "auto" (CUDA when present), "cpu" or "cuda"
    attention : "empirical" or "gaussian" (see :func:`velocity`)
    keep_tokens : also return the tokens at the recorded times
    blowup_norm : a cloud whose :math:`\|\hat\Sigma\|_F` exceeds this has blown up
    progress : show a progress bar over steps

    Returns
    -------
    ParticleTrajectory
    """
    arr = _as_tokens(x0)
    N, d = arr.shape
    fn = as_control_function(controls, d, state_name="x0")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1, got {record_every!r}")
    _check_choice(method, "method (integrator)", SOLVERS)
    _check_choice(attention, "attention", ATTENTIONS)
    span = as_float_array(t_span, "t_span")
    if span.shape != (2,) or not np.all(np.isfinite(span)) or span[1] <= span[0]:
        raise ValueError(f"t_span must be (t0, t1) with finite t1 > t0, got {t_span!r}")
    t0, t1 = float(span[0]), float(span[1])
    first = evaluate_controls(fn, t0)
    if first.d != d:
        raise ValueError(f"x0 has d={d} but controls act on d={first.d}")
    _check_ff(ff, first)

    dev = resolve_device(device)
    x = (arr if isinstance(arr, torch.Tensor) else torch.as_tensor(arr)).to(dtype=dtype, device=dev).clone()
    cache = _ControlCache(dtype, dev)
    solver = SOLVERS[method]()
    h = (t1 - t0) / int(steps)

    def velocity_on_step(t_lo: float, t_hi: float) -> VelocityFn:
        """The velocity with controls read inside [t_lo, t_hi): a break at a step edge is exact."""
        inside = np.nextafter(t_hi, t_lo)

        def f(t: float, y: torch.Tensor) -> torch.Tensor:
            ctl = fn if isinstance(fn, Controls) else evaluate_controls(fn, min(t, inside), d=d)
            return _velocity(y, cache(ctl), ff, attention)

        return f

    ts, mus, Sigmas, toks = [], [], [], []

    def record(t: float, y: torch.Tensor, mu: torch.Tensor, S: torch.Tensor) -> None:
        ts.append(t)
        mus.append(mu.double().cpu().numpy())
        Sigmas.append(S.double().cpu().numpy())
        if keep_tokens:
            toks.append(y.double().cpu().numpy())

    mu, S = empirical_moments_torch(x)
    record(t0, x, mu, S)
    status, blowup_time = "completed", None
    with torch.no_grad():
        for k in progress_bar(range(int(steps)), f"{method} N={N}", enabled=progress):
            t = t0 + k * h
            t_next = t1 if k == steps - 1 else t0 + (k + 1) * h
            y = solver.step(velocity_on_step(t, t_next), t, x, h)
            mu_y, S_y = empirical_moments_torch(y)
            norm = float(torch.linalg.matrix_norm(S_y))
            if not np.isfinite(norm) or norm > blowup_norm:
                status, blowup_time = "blowup", t_next
                if ts[-1] != t:
                    record(t, x, mu, S)
                break
            x, mu, S = y, mu_y, S_y
            if (k + 1) % record_every == 0 or k == steps - 1:
                record(t_next, x, mu, S)
    return ParticleTrajectory(
        t=np.array(ts), mu=np.stack(mus), Sigma=np.stack(Sigmas),
        tokens=np.stack(toks) if keep_tokens else None, status=status, blowup_time=blowup_time,
        method=method, steps=int(steps), h=h,
    )
