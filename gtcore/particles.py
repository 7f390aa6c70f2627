r"""The finite-N Transformer: N tokens moved by self-attention and a feed-forward layer.

Each token follows the particle velocity (the conventions of :mod:`gtcore.controls`)

.. math::

    \dot x_i = v_i = A x_i + b + W\sigma(U x_i + c)
        + \sum_h V_h \sum_{j=1}^N \frac{e^{x_j^\top B_h x_i}}{\sum_k e^{x_k^\top B_h x_i}}\, x_j ,

the interacting particle system whose mean-field limit is the paper's measure flow. The feed-forward
block :math:`W\sigma(Ux + c)` is present only when the :class:`~gtcore.controls.Controls` carry ``U, W, c``;
``ff="identity"`` makes it affine (the invariance is then exact in the mean-field limit) and
``ff="relu"`` uses :math:`\sigma = \max(\cdot, 0)`.

The attention type (``Controls(attention=...)``, dot product by default) supplies the finite-N
kernel and the Gaussian tilt (:mod:`gtcore.attention`). ``average="empirical"`` evaluates each
head's average over the N tokens; ``average="gaussian"`` replaces it by its value against the
Gaussian with the cloud's moments (the tilt): the velocity is then affine and the cloud's moments
follow the moment ODE exactly (up to the integrator), which separates sampling error from
mean-field error.

For the dot product the kernel is torch's fused ``scaled_dot_product_attention`` with scale 1
(query :math:`XB_h^\top`, key :math:`X`, value :math:`X`, then :math:`V_h` applied to the output).
On CPU and CUDA the fused kernels work in blocks: memory :math:`O(Nd)`, no :math:`N\times N` matrix.

Times. ``simulate`` steps exactly to every control break and every time in ``t_eval``: each piece
between them gets its own uniform step (a share of ``steps`` proportional to its length, or
``ceil(length / max_step)`` steps), so piecewise controls keep the integrator's order.

Explicit Euler with step :math:`h` and ``steps = L`` *is* an L-layer residual Transformer
:math:`x \mapsto x + h\,v(x)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gtcore._integrators import RK4, SOLVERS, Euler, FixedStepMethod, Midpoint, VelocityFn
from gtcore._linalg import empirical_moments_torch, psd_project, resolve_device, resolve_dtype
from gtcore._particle_plan import (
    MAX_STEPS,
    SERIAL_WORK,
    _check_memory,
    _expected_seconds,
    _pieces,
    _record_count,
    _schedule,
    _thread_count,
    _torch_threads,
)
from gtcore._progress import progress as progress_bar
from gtcore._repr import short_repr
from gtcore._torch_controls import _ControlCache, _torch_controls, _TorchControls
from gtcore._validation import as_float_array, check_count, check_positive, check_span, check_tokens, show
from gtcore.attention.sinkhorn_warm import warm_starts
from gtcore.controls import Controls, ControlsLike, as_control_function, control_breaks, evaluate_controls
from gtcore.status import Status

ACTIVATIONS = ("identity", "relu")
#: how each head's attention average is evaluated: over the N tokens, or against their Gaussian
AVERAGES = ("empirical", "gaussian")


__all__ = [
    "ACTIVATIONS",
    "AVERAGES",
    "MAX_STEPS",
    "PROGRESS_AFTER_S",
    "RK4",
    "SERIAL_WORK",
    "SOLVERS",
    "Euler",
    "FixedStepMethod",
    "Midpoint",
    "ParticleTrajectory",
    "simulate",
    "simulate_batch",
    "velocity",
]


def _velocity(x: torch.Tensor, tc: _TorchControls, ff: str, average: str) -> torch.Tensor:
    v = x @ tc.A.T + tc.b
    if tc.U is not None:
        pre = x @ tc.U.T + tc.c  # type: ignore[operator]  # U, W, c come together
        v = v + (torch.relu(pre) if ff == "relu" else pre) @ tc.W.T  # type: ignore[union-attr]
    if not tc.attention_on:
        return v
    att = tc.attention
    if average == "gaussian":
        mu, S = empirical_moments_torch(x)
        # sum_h V_h (M_h x + C_h mu), the tilt against N(mu, S)
        drift = att.linear_part(S, tc.V, tc.params)
        return v + x @ drift.T + att.mean_gain(S, tc.V, tc.params) @ mu
    if tc.kernel_dtype is None:
        avg = att.kernel(x, tc.params)
    else:  # the O(N^2) softmax kernel in a lower precision, the rest of the step in x's
        avg = att.kernel(x.to(tc.kernel_dtype), tc.kernel_params).to(x.dtype)
    return v + torch.einsum("hnj,hij->ni", avg, tc.V)


# --------------------------------------------------------------------- validation
def _check_choice(value: str, name: str, options) -> str:
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"unknown {name} {show(value)}; valid: {', '.join(sorted(options))}")
    return value


def _all_finite(x: torch.Tensor) -> bool:
    """Whether every entry of ``x`` is finite: one reduction (a NaN or inf makes the sum non-finite),
    the entrywise test only when the sum is not finite (it may have overflowed)."""
    return math.isfinite(float(x.sum())) or bool(torch.isfinite(x).all())


def _as_tokens(x0: Any, name: str = "x0") -> np.ndarray | torch.Tensor:
    """(N, d) tokens, N >= 2, finite: a tensor stays a tensor (detached, no copy), anything else is a
    contiguous numpy array (a negative-stride view is copied: torch cannot hold it)."""
    if not isinstance(x0, torch.Tensor):
        return np.ascontiguousarray(check_tokens(x0, name, min_n=2))
    if not x0.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x0.dtype}")
    if x0.ndim != 2:
        raise ValueError(f"{name} must have shape (N, d), got shape {tuple(x0.shape)}")
    if x0.shape[0] < 2:
        raise ValueError(f"{name} must hold at least N=2 tokens, got N={x0.shape[0]}")
    if not _all_finite(x0.detach()):
        raise ValueError(f"{name} has non-finite entries (NaN or inf)")
    return x0


def velocity(
    x: Any,
    controls: Controls,
    *,
    ff: str = "identity",
    average: str = "empirical",
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "auto",
) -> np.ndarray | torch.Tensor:
    r"""The particle velocity :math:`v_i` of every token (module docstring's equation).

    Parameters
    ----------
    x : (N, d) array or tensor
        The tokens, :math:`N \ge 2`.
    controls : Controls
        The layer's parameters.
    ff : "identity" or "relu"
        Activation of the block :math:`W\sigma(Ux + c)` ("relu" needs ``U, W, c``).
    average : "empirical" or "gaussian"
        Each head's average over the N tokens, or its value against the Gaussian with the cloud's
        moments (the tilt of :mod:`gtcore.attention`).
    dtype : torch.dtype or str
        The precision of the computation when ``x`` is a NumPy array (a tensor keeps its own).
    device : str or torch.device
        ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``, when ``x`` is a NumPy array.

    Returns
    -------
    (N, d) ndarray or tensor
        A NumPy array when ``x`` is NumPy, else a tensor on ``x``'s device and dtype (differentiable in
        ``x`` when ``x`` requires grad).

    Raises
    ------
    ValueError
        Bad tokens, controls of another dimension, an unknown ``ff`` or ``average``, or ``"relu"``
        without a feed-forward block.
    """
    arr = _as_tokens(x, "x")
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    _check_ff(ff, controls)
    _check_choice(average, "average", AVERAGES)
    if controls.d != arr.shape[1]:
        raise ValueError(f"x has d={arr.shape[1]} but controls act on d={controls.d}")
    if isinstance(arr, torch.Tensor):
        xt = arr
    else:
        xt = torch.as_tensor(arr, dtype=resolve_dtype(dtype), device=resolve_device(device))
    v = _velocity(xt, _torch_controls(controls, xt.dtype, xt.device), ff, average)
    return v if isinstance(arr, torch.Tensor) else v.cpu().numpy()


def _check_ff(ff: str, controls: Controls | None) -> None:
    _check_choice(ff, "ff (activation)", ACTIVATIONS)
    if ff == "relu" and controls is not None and not controls.has_feedforward:
        raise ValueError("ff='relu' needs a feed-forward block: give Controls(U=..., W=..., c=...)")


# --------------------------------------------------------------------- simulation
@dataclass
class ParticleTrajectory:
    r"""A simulated token cloud.

    Attributes
    ----------
    t : (n,) ndarray
        The recorded times.
    mu : (n, d) ndarray
        The empirical means.
    Sigma : (n, d, d) ndarray
        The empirical (1/N) covariances, projected onto the PSD matrices (a negative eigenvalue,
        round-off of the dtype, is set to 0).
    tokens : (n, N, d) ndarray or None
        The tokens at the recorded times (with ``keep_tokens``), or None.
    final_tokens : (N, d) ndarray
        The tokens at the last recorded time.
    status : Status
        :class:`~gtcore.status.Status`: ``COMPLETED``, or ``BLOWUP`` when the cloud's
        :math:`\|\hat\Sigma\|_F` exceeded ``blowup_norm`` or became non-finite; the arrays then end at
        the last finite state before it.
    threshold_time : float or None
        The end of the step at which the cloud crossed ``blowup_norm`` (or became non-finite), or
        None. A step-resolution detection, not the pole of the moment ODE
        (:func:`gtcore.riccati.blowup_time`) nor its event time
        (the ``crossing_time`` of :class:`~gtcore.moments.MomentTrajectory`).
    method : str
        The integrator's name.
    steps : int
        The number of steps.
    h : float
        The (largest) step size.
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    tokens: np.ndarray | None
    final_tokens: np.ndarray
    status: Status
    threshold_time: float | None
    method: str
    steps: int
    h: float

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


#: ``simulate(progress=None)`` shows a bar when the work is expected to take longer than this (seconds)
PROGRESS_AFTER_S = 5.0


def simulate(
    x0: Any,
    controls: ControlsLike,
    t_span: tuple[float, float],
    steps: int | None = None,
    *,
    method: str = "rk4",
    ff: str = "identity",
    record_every: int = 1,
    t_eval: Any = None,
    max_step: float | None = None,
    max_steps: int = MAX_STEPS,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "auto",
    average: str = "empirical",
    keep_tokens: bool = False,
    blowup_norm: float = 1e8,
    progress: bool | None = None,
    kernel_dtype: torch.dtype | None = None,
) -> ParticleTrajectory:
    r"""Move N tokens with the particle velocity, by a fixed-step integrator.

    The integrator steps exactly to every break of the controls (``controls.breaks``) and every
    time of ``t_eval`` inside ``t_span``. Between two such nodes the steps are uniform: a share
    :math:`\max(1, \operatorname{round}(\text{steps}\cdot\ell/(t_1 - t_0)))` of ``steps`` for a
    piece of length :math:`\ell` (all ``steps`` when there are no nodes), or, with ``max_step``,
    :math:`\lceil \ell/\text{max\_step}\rceil`. Controls are read inside the current step
    (a jump at a step edge is exact), so piecewise controls keep the integrator's order.

    Parameters
    ----------
    x0 : (N, d) array or tensor
        The initial tokens, :math:`N \ge 2`.
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
        Evaluated at each stage time of the integrator.
    t_span : (float, float)
        ``(t0, t1)``.
    steps : int >= 1
        Total number of steps (:math:`h = (t_1 - t_0)/\text{steps}` without nodes). Optional
        when ``max_step`` is given.
    method : str
        A name in ``SOLVERS`` (``"euler"``, ``"midpoint"``, ``"rk4"``).
    ff : "identity" or "relu"
        The activation of the feed-forward block :math:`W\sigma(Ux + c)`.
    record_every : int
        Without ``t_eval``, record the moments every this many steps (the first and last are always kept).
    t_eval : increasing times in ``t_span``, optional
        Record at ``t0`` and exactly at these times (``record_every`` is then ignored).
    max_step : float, optional
        The largest step (replaces the proportional share of ``steps``).
    max_steps : int
        Budget of steps (default ``MAX_STEPS``): a ``steps`` or ``max_step`` that needs more is
        refused before the first step.
    dtype, device : torch.dtype or str, and str or torch.device
        torch.float32 or torch.float64 (or their names), and ``"auto"`` (CUDA when present),
        ``"cpu"`` or ``"cuda"``; a device this machine lacks is a ``ValueError``.
    average : "empirical" or "gaussian"
        How each head's attention average is evaluated (see :func:`velocity`).
    keep_tokens : bool
        Also return the tokens at the recorded times (their memory, with the integration's, is
        estimated first: a run that cannot fit is refused with the numbers).
    blowup_norm : float
        A cloud whose :math:`\|\hat\Sigma\|_F` exceeds this has blown up.
    progress : bool, optional
        Show a progress bar over steps. None (default): when the work is expected to take more than a
        few seconds (:data:`PROGRESS_AFTER_S`, from N, d, heads and the steps), and only on a terminal
        or in a notebook.
    kernel_dtype : torch.float32, torch.float64 or their names, optional
        Precision of the empirical attention kernel alone (the :math:`O(N^2)` softmax average), e.g.
        ``torch.float32`` with a float64 state (lower precisions such as float16 are refused): the average
        then carries a relative round-off of about :math:`10^{-7}` per evaluation (instead of
        :math:`10^{-16}`) for 2-3x less time; the tokens, the integrator and the moments stay in ``dtype``.
        Default: ``dtype``.

    Returns
    -------
    ParticleTrajectory
        The recorded times and moments (and tokens), the status and the step sizes.

    Raises
    ------
    ValueError
        Bad tokens, controls, time span, step counts (beyond ``max_steps``), an unknown ``method``,
        ``ff``, ``average`` or dtype, a device this machine lacks, or kept tokens beyond the memory.

    Notes
    -----
    Inputs are checked once, here; a tensor ``x0`` is detached (no gradient is tracked) and a
    negative-stride array copied. Small problems run torch on one thread (``_thread_count``), the
    caller's thread setting is restored after.
    """
    plan = _plan(
        x0,
        controls,
        t_span,
        steps,
        method=method,
        ff=ff,
        record_every=record_every,
        t_eval=t_eval,
        max_step=max_step,
        max_steps=max_steps,
        dtype=dtype,
        device=device,
        average=average,
        keep_tokens=keep_tokens,
        blowup_norm=blowup_norm,
        kernel_dtype=kernel_dtype,
    )
    # each Sinkhorn scaling starts where the last one of its head ended (the same certified answer, in fewer
    # iterations: gtcore.attention.sinkhorn_scaling.WarmStarts)
    with _torch_threads(plan.threads), torch.no_grad(), warm_starts():
        return _run(plan, progress)


def simulate_batch(
    x0s: Sequence[Any],
    controls: ControlsLike | Sequence[ControlsLike],
    t_span: tuple[float, float],
    steps: int | None = None,
    *,
    workers: int | None = None,
    **options: Any,
) -> list[ParticleTrajectory]:
    r""":func:`simulate` of several clouds (seeds, draws, sizes), several at a time: ``[simulate(x0s[c],
    controls[c], t_span, steps, **options) for c ...]``, the same numbers.

    Every call is checked first (a bad cloud is refused before any step). Clouds that :func:`simulate` runs on
    one torch thread (below ``SERIAL_WORK`` multiply-adds per evaluation) advance concurrently, ``workers``
    at a time, each on one thread (torch's kernels release the interpreter), so an ensemble of small clouds
    uses every core where one cloud at a time used one; a larger cloud runs alone with the caller's threads,
    as :func:`simulate` runs it. Each cloud is computed exactly as by :func:`simulate` (same thread count,
    same operations): the results are bit-identical to the loop.

    Parameters
    ----------
    x0s : sequence of (N_c, d) arrays or tensors
        The clouds (sizes may differ).
    controls : Controls, PiecewiseControls, callable, or a sequence of them (one per cloud)
        The layer(s) moving the clouds.
    t_span : (float, float)
        ``(t0, t1)``, common.
    steps : int, optional
        As :func:`simulate`, common.
    workers : int, optional
        Clouds advanced at once (default: the caller's torch thread count).
    **options
        Any other keyword of :func:`simulate` (``method``, ``ff``, ``record_every``, ``t_eval``, ``max_step``,
        ``max_steps``, ``dtype``, ``device``, ``average``, ``keep_tokens``, ``blowup_norm``, ``kernel_dtype``),
        common to every cloud; ``progress`` is not accepted (no bar per cloud).

    Returns
    -------
    list of ParticleTrajectory
        One per cloud, in order.

    Raises
    ------
    ValueError
        As :func:`simulate` (naming the cloud), ``controls`` of another length than ``x0s``, or a bad ``workers``.
    """
    if "progress" in options:
        raise ValueError("simulate_batch: progress is not accepted (no bar per cloud)")
    x0s = list(x0s)
    ctls: list[ControlsLike] = list(controls) if isinstance(controls, (list, tuple)) else [controls] * len(x0s)  # type: ignore[list-item]  # one layer for every cloud
    if len(ctls) != len(x0s):
        raise ValueError(f"controls: {len(ctls)} given for {len(x0s)} clouds (give one, or one per cloud)")
    n_workers = torch.get_num_threads() if workers is None else check_count(workers, "workers")
    plans = []
    for c, (x0, ctl) in enumerate(zip(x0s, ctls, strict=True)):
        try:
            plans.append(_plan(x0, ctl, t_span, steps, **{**_PLAN_DEFAULTS, **_known(options)}))
        except ValueError as exc:
            raise ValueError(f"cloud {c}: {exc}") from None
    out: list[ParticleTrajectory | None] = [None] * len(plans)
    serial = [c for c, p in enumerate(plans) if p.threads == 1]
    for c, p in enumerate(plans):
        if p.threads != 1:  # a large cloud: alone, with the caller's threads, as simulate runs it
            with _torch_threads(p.threads), torch.no_grad(), warm_starts():
                out[c] = _run(p, False)

    def one(c: int) -> ParticleTrajectory:
        with torch.no_grad(), warm_starts():  # grad mode and the warm starts are per thread, per cloud
            return _run(plans[c], False)

    with _torch_threads(1):
        if n_workers <= 1 or len(serial) <= 1:
            for c in serial:
                out[c] = one(c)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(n_workers, len(serial))) as pool:
                for c, tr in zip(serial, pool.map(one, serial), strict=True):
                    out[c] = tr
    return out  # type: ignore[return-value]  # every index filled above


#: :func:`simulate`'s keyword defaults, for :func:`simulate_batch`
_PLAN_DEFAULTS: dict[str, Any] = dict(
    method="rk4",
    ff="identity",
    record_every=1,
    t_eval=None,
    max_step=None,
    max_steps=MAX_STEPS,
    dtype=torch.float64,
    device="auto",
    average="empirical",
    keep_tokens=False,
    blowup_norm=1e8,
    kernel_dtype=None,
)


def _known(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_PLAN_DEFAULTS))
    if unknown:
        raise ValueError(
            f"simulate_batch: unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(_PLAN_DEFAULTS))}"
        )
    return options


@dataclass
class _Plan:
    """A validated :func:`simulate` call: what to integrate, how, and what to record."""

    x: torch.Tensor
    fn: Any
    pieces: list[tuple[float, float, int]]
    solver: FixedStepMethod
    method: str
    cache: _ControlCache
    ff: str
    average: str
    record_at: set[float] | None
    record_every: int
    records: int
    keep_tokens: bool
    blowup_norm: float
    threads: int


def _plan(
    x0: Any,
    controls: ControlsLike,
    t_span: tuple[float, float],
    steps: int | None,
    *,
    method: str,
    ff: str,
    record_every: int,
    t_eval: Any,
    max_step: float | None,
    max_steps: int,
    dtype: Any,
    device: Any,
    average: str,
    keep_tokens: bool,
    blowup_norm: float,
    kernel_dtype: Any,
) -> _Plan:
    """Every check of :func:`simulate`, made once, before any step."""
    arr = _as_tokens(x0)
    N, d = arr.shape
    fn = as_control_function(controls, d, state_name="x0")
    if max_step is None or steps is not None:
        steps = check_count(steps, "steps")
    if max_step is not None:
        max_step = check_positive(max_step, "max_step")
    record_every = check_count(record_every, "record_every")
    max_steps = check_count(max_steps, "max_steps")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    dtype = resolve_dtype(dtype)
    _check_choice(method, "method (integrator)", SOLVERS)
    _check_choice(average, "average", AVERAGES)
    t0, t1 = check_span(t_span)
    nodes = np.array(control_breaks(controls), dtype=float)
    if t_eval is not None:
        t_eval = as_float_array(t_eval, "t_eval")
        if (
            t_eval.ndim != 1
            or t_eval.size < 1
            or not np.all(np.isfinite(t_eval))
            or np.any(np.diff(t_eval) <= 0)
            or t_eval[0] < t0
            or t_eval[-1] > t1
        ):
            raise ValueError("t_eval must be a non-empty, finite, strictly increasing sequence inside t_span")
        nodes = np.concatenate([nodes, t_eval])
    first = evaluate_controls(fn, t0)
    if first.d != d:
        raise ValueError(f"x0 has d={d} but controls act on d={first.d}")
    _check_ff(ff, first)
    pieces = _pieces(t0, t1, nodes, steps, max_step, max_steps)
    dev = resolve_device(device)
    if kernel_dtype is not None:
        kernel_dtype = resolve_dtype(kernel_dtype, "kernel_dtype")
    records = _record_count(pieces, record_every, t_eval, t0)
    _check_memory(N, d, first.heads, records, bool(keep_tokens), dtype, dev)
    src = arr.detach() if isinstance(arr, torch.Tensor) else torch.as_tensor(arr)
    return _Plan(
        x=src.to(dtype=dtype, device=dev).clone(),
        fn=fn,
        pieces=pieces,
        solver=SOLVERS[method](),
        method=method,
        cache=_ControlCache(dtype, dev, kernel_dtype),
        ff=ff,
        average=average,
        record_at=None if t_eval is None else set(float(t) for t in t_eval),
        record_every=record_every,
        records=records,
        keep_tokens=bool(keep_tokens),
        blowup_norm=blowup_norm,
        threads=_thread_count(N, d, first.heads),
    )


class _Recorder:
    """The recorded times, moments and (optionally) tokens of a :func:`simulate` run."""

    def __init__(self, records: int, N: int, d: int, keep_tokens: bool) -> None:
        self.ts: list[float] = []
        self.mus: list[np.ndarray] = []
        self.Sigmas: list[np.ndarray] = []
        self.tokens = np.empty((records, N, d)) if keep_tokens else None  # allocated once (no stacking copy)

    def __call__(self, t: float, y: torch.Tensor, mu: torch.Tensor, S: torch.Tensor) -> None:
        if self.tokens is not None:
            self.tokens[len(self.ts)] = y.double().cpu().numpy()
        self.ts.append(t)
        self.mus.append(mu.double().cpu().numpy())
        self.Sigmas.append(S.double().cpu().numpy())


def _run(plan: _Plan, progress: bool | None) -> ParticleTrajectory:
    """The stepping loop of :func:`simulate` (checks made, threads set, gradients off)."""
    fn, cache, ff, average = plan.fn, plan.cache, plan.ff, plan.average
    d = plan.x.shape[1]

    def velocity_on_step(t_lo: float, t_hi: float) -> VelocityFn:
        """The velocity with controls read inside [t_lo, t_hi): a break at a step edge is exact."""
        inside = np.nextafter(t_hi, t_lo)

        def f(t: float, y: torch.Tensor) -> torch.Tensor:
            ctl = fn if isinstance(fn, Controls) else evaluate_controls(fn, min(t, inside), d=d)
            return _velocity(y, cache(ctl), ff, average)

        return f

    x, total = plan.x, sum(n for _, _, n in plan.pieces)
    record = _Recorder(plan.records, x.shape[0], d, plan.keep_tokens)
    mu, S = empirical_moments_torch(x)
    record(plan.pieces[0][0], x, mu, S)
    status, crossed = Status.COMPLETED, None
    heads = evaluate_controls(fn, plan.pieces[0][0]).heads
    show = (
        progress
        if progress is not None
        else (_expected_seconds(x.shape[0], d, total, plan.method, heads, average) > PROGRESS_AFTER_S)
    )
    bar = progress_bar(_schedule(plan.pieces), f"{plan.method} N={x.shape[0]}", enabled=bool(show), total=total)
    for k, (t, t_next, h) in enumerate(bar):
        y = plan.solver.step(velocity_on_step(t, t_next), t, x, h)
        mu_y, S_y = empirical_moments_torch(y)
        norm = float(torch.linalg.matrix_norm(S_y))
        if not np.isfinite(norm) or norm > plan.blowup_norm:
            status, crossed = Status.BLOWUP, t_next
            if record.ts[-1] != t:
                record(t, x, mu, S)
            break
        x, mu, S = y, mu_y, S_y
        last = k == total - 1
        if (t_next in plan.record_at) if plan.record_at is not None else ((k + 1) % plan.record_every == 0 or last):
            record(t_next, x, mu, S)
    tokens = None if record.tokens is None else record.tokens[: len(record.ts)]
    return ParticleTrajectory(
        t=np.array(record.ts),
        mu=np.stack(record.mus),
        Sigma=psd_project(np.stack(record.Sigmas)),
        tokens=tokens,
        final_tokens=x.double().cpu().numpy(),
        status=status,
        threshold_time=crossed,
        method=plan.method,
        steps=total,
        h=max((b - a) / n for a, b, n in plan.pieces),
    )
