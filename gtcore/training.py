r"""Training the finite-N Transformer to a distribution target, by gradient descent through the tokens.

The model is the book's Transformer on N tokens: L residual layers of step :math:`h = T/L`, each with
its own controls :math:`(A_l, b_l, V_{l,k}, B_{l,k})` (heads :math:`k = 1..H`),

.. math::

    x_i^{l+1} = x_i^l + h\Big(A_l x_i^l + b_l
        + \sum_k V_{l,k} \sum_{j=1}^N \frac{e^{x_j^{l\top} B_{l,k} x_i^l}}{\sum_m e^{x_m^{l\top} B_{l,k} x_i^l}}\,
          x_j^l\Big),

which is :func:`gtcore.particles.simulate` with ``method="euler"`` and ``steps=L`` for the piecewise-constant
controls :math:`t \mapsto (A_l, b_l, V_l, B_l)` on :math:`[lh, (l+1)h)` (a test checks it to round-off). The
softmax average is :meth:`gtcore.attention.DotProduct.kernel` (torch's fused attention), through which
torch autograd differentiates.

The loss compares the output tokens :math:`X = (x_i^L)` with a sample :math:`Y = (y_i)` of the target,
of the same size, without assuming that either is Gaussian: the squared 2-Wasserstein distance of the
two empirical measures,

.. math::

    \ell(X, Y) = W_2^2\Big(\tfrac1N\textstyle\sum_i\delta_{x_i},\ \tfrac1N\sum_i\delta_{y_i}\Big)
        = \min_{\sigma \in S_N} \frac1N \sum_{i=1}^N \|x_i - y_{\sigma(i)}\|^2,

an optimal assignment (:func:`scipy.optimize.linear_sum_assignment`; for uniform weights and equal sizes a
permutation is optimal among all couplings, Birkhoff–von Neumann). It is differentiated with the
optimal :math:`\sigma` held fixed: :math:`\ell` is a minimum of smooth functions, and where the minimiser
is unique its gradient is that of the minimising term (Danskin), :math:`\partial\ell/\partial x_i =
\frac2N(x_i - y_{\sigma(i)})`.

The rank floor. If :math:`\Sigma_0` has rank :math:`r`, no controls raise the rank (chapter 3), and at
finite N the tokens stay in an affine subspace of dimension :math:`r` (the differences
:math:`x_i - \bar x` are moved by a linear map of themselves, attention included). For any measure
:math:`\nu` carried by an affine subspace :math:`m + E`, :math:`\dim E = r`,

.. math::

    W_2^2\big(\nu, N(\mu_1, \Sigma_1)\big) \ \ge\ F_r(\Sigma_1) = \sum_{k=r+1}^{d} \lambda_k(\Sigma_1)
    \qquad(\lambda_1 \ge \dots \ge \lambda_d),

with equality for :math:`\nu = N(\mu_1, P\Sigma_1P)`, :math:`P` the projection on the top :math:`r`
eigenvectors (:func:`rank_floor`, :func:`best_rank_approximation`; the chapter derives it). The same
argument for the empirical target :math:`Y` gives the exact finite-sample floor
:math:`F_r(\hat\Sigma_Y)` (the :math:`1/N` covariance of :math:`Y`).

The distances and the floors (:func:`optimal_assignment`, :func:`w2_squared`, :func:`rank_floor`,
:func:`best_rank_approximation`, :func:`empirical_rank_floor`) need no torch: they live in
``gtcore._transport`` and are re-exported here. torch is imported by this module; ``import gtcore`` does
not import it.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gtcore._checkpoint import Checkpoint, _checked_state, _checkpoint_key
from gtcore._linalg import empirical_moments
from gtcore._progress import progress as progress_bar
from gtcore._transport import (
    best_rank_approximation,
    empirical_rank_floor,
    optimal_assignment,
    rank_floor,
    w2_squared,
)
from gtcore._validation import (
    check_count,
    check_moments,
    check_nonnegative,
    check_positive,
    check_tokens,
)
from gtcore.attention import DotProduct, gaussian_velocity
from gtcore.controls import Controls, PiecewiseControls
from gtcore.moments import layer_stack
from gtcore.stats.gaussianity import bures_wasserstein

_DOT = DotProduct()


@contextlib.contextmanager
def _one_thread():
    """torch on one thread inside (restored after): the tensors here are tiny, and a fixed thread count keeps
    the floating-point reductions, hence a training run, the same whatever the caller's setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ------------------------------------------------------------------------------ the network
def transformer_tokens(
    x0: torch.Tensor, A: torch.Tensor, b: torch.Tensor, V: torch.Tensor | None, B: torch.Tensor | None, h: float
) -> torch.Tensor:
    r"""The L-layer residual Transformer on N tokens (module docstring's equation), differentiable.

    Parameters
    ----------
    x0 : (N, d) tensor
    A : (L, d, d) tensor
    b : (L, d) tensor
    V, B : (L, H, d, d) tensors, or both None (attention off)
    h : float
        Layer step.

    Returns
    -------
    (N, d) tensor: the tokens after layer L
    """
    x = x0
    for layer in range(A.shape[0]):
        v = x @ A[layer].T + b[layer]
        if V is not None and B is not None:  # both or neither
            avg = _DOT.kernel(x, B[layer])  # (H, N, d)
            v = v + torch.einsum("hnj,hij->ni", avg, V[layer])
        x = x + h * v
    return x


def layer_controls(A: Any, b: Any, V: Any = None, B: Any = None) -> tuple[Controls, ...]:
    """Per-layer :class:`~gtcore.controls.Controls` from stacked arrays ``A`` (L, d, d), ``b`` (L, d), ``V``,
    ``B`` (L, H, d, d).

    Parameters
    ----------
    A : (L, d, d) array
        The layers' linear parts.
    b : (L, d) array
        The layers' biases.
    V, B : (L, H, d, d) arrays, optional
        The layers' value and query-key matrices; both None: attention off.

    Returns
    -------
    tuple of Controls
        One per layer.
    """
    A, b = np.asarray(A, float), np.asarray(b, float)
    if V is None:
        return tuple(Controls(A=A[k], b=b[k]) for k in range(A.shape[0]))
    V, B = np.asarray(V, float), np.asarray(B, float)
    return tuple(Controls(A=A[k], b=b[k], V=V[k], B=B[k]) for k in range(A.shape[0]))


def piecewise(controls: tuple[Controls, ...], T: float) -> PiecewiseControls:
    """The layers as controls constant on :math:`[lh, (l+1)h)`, :math:`h = T/L` (for :func:`gtcore.particles.simulate`).

    Parameters
    ----------
    controls : tuple of Controls
        The L layers.
    T : float
        The depth, :math:`Lh`.

    Returns
    -------
    PiecewiseControls
        Layer :math:`l` on :math:`[lh, (l+1)h)`.
    """
    return PiecewiseControls(np.linspace(0.0, check_positive(T, "T"), len(controls) + 1), list(controls))


def apply_transformer(x0: Any, controls: tuple[Controls, ...], h: float) -> np.ndarray:
    r"""The trained network on new tokens: :func:`transformer_tokens` without gradients, float64.

    Parameters
    ----------
    x0 : (N, d) array
    controls : the per-layer :class:`~gtcore.controls.Controls` (one head count for all layers, dot-product attention)
    h : float
        Layer step.

    Returns
    -------
    (N, d) array
    """
    x0 = check_tokens(x0, "x0", min_n=2)
    A, b, V, B = _stack(controls, x0.shape[1])
    with torch.no_grad(), _one_thread():

        def t(a):
            return None if a is None else torch.as_tensor(a, dtype=torch.float64)

        return transformer_tokens(t(x0), t(A), t(b), t(V), t(B), check_positive(h, "h")).numpy()


def _stack(controls: tuple[Controls, ...], d: int):
    if not controls:
        raise ValueError("controls must hold at least one layer")
    for k, c in enumerate(controls):
        if not isinstance(c, Controls) or c.d != d or c.attention != "dot" or c.has_feedforward:
            raise ValueError(
                f"controls[{k}] must be dot-product Controls of dimension {d} without a feed-forward block"
            )
    A = np.stack([c.A for c in controls])
    b = np.stack([c.b for c in controls])
    if not any(np.any(c.V) for c in controls):
        return A, b, None, None
    if len({c.heads for c in controls}) != 1:
        raise ValueError("controls: every layer must have the same number of heads")
    return A, b, np.stack([c.V for c in controls]), np.stack([c.B for c in controls])


# ------------------------------------------------------------------------------ energies
def control_energy(controls: tuple[Controls, ...], h: float) -> float:
    r"""The energy of the layers' feed-forward controls, :math:`h\sum_l \|A_l\|_F^2 + \|b_l\|^2`.

    The Riemann sum of :math:`\int_0^T \|A\|_F^2 + \|b\|^2\,dt` for controls constant on each layer
    (the energy of :func:`gtcore.reachability.steer_min_energy`).

    Parameters
    ----------
    controls : tuple of Controls
        The L layers.
    h : float
        The layer step.

    Returns
    -------
    float
        The energy.
    """
    h = check_positive(h, "h")
    return float(h * sum(np.sum(c.affine_A**2) + np.sum(c.affine_b**2) for c in controls))


def gaussian_energy(controls: tuple[Controls, ...], h: float, mu0: Any, Sigma0: Any) -> float:
    r"""The energy of the affine velocity the layers apply to the Gaussian, :math:`h\sum_l \|F_l\|_F^2 + \|g_l\|^2`.

    Along the exact layer maps from :math:`N(\mu_0, \Sigma_0)` (:func:`gtcore.moments.layer_stack`) layer
    :math:`l` moves the Gaussian with the velocity :math:`v(x) = F_lx + g_l`,
    :math:`F_l = A_l + \sum_k V_{l,k}\Sigma_lB_{l,k}`, :math:`g_l = b_l + \sum_k V_{l,k}\mu_l`
    (:func:`gtcore.attention.gaussian_velocity`): the attention-free controls that move the Gaussian as
    the layers do. Equal to :func:`control_energy` when attention is off.

    Parameters
    ----------
    controls : tuple of Controls
        The L layers.
    h : float
        The layer step.
    mu0, Sigma0 : (d,) and (d, d) arrays
        The input Gaussian's moments.

    Returns
    -------
    float
        The energy; ``inf`` when the layer maps blow up.
    """
    h = check_positive(h, "h")
    mu0, Sigma0 = check_moments(mu0, Sigma0)
    traj = layer_stack(mu0, Sigma0, list(controls), h)
    if traj.status != "completed":
        return float("inf")
    total = 0.0
    for c, mu, S in zip(controls, traj.mu[:-1], traj.Sigma[:-1], strict=True):
        F, G = gaussian_velocity(S, c)
        total += np.sum(F**2) + np.sum((G @ mu + c.affine_b) ** 2)
    return float(h * total)


# ------------------------------------------------------------------------------ the trainer
class TrainingStatus(enum.Enum):
    """How a training ended."""

    COMPLETED = "completed"
    DIVERGED = "diverged"  # the loss or the tokens became non-finite or passed blowup_norm


@dataclass
class TrainingResult:
    r"""A trained Transformer and its training history (:func:`train_transformer`).

    Attributes
    ----------
    loss : (n,) array
        The training loss :math:`W_2^2(X, Y)` before each step, then after the last (``n = steps + 1``
        when completed).
    moment_w2sq : (n,) array
        Reported beside it: the squared Bures–Wasserstein distance from the Gaussian with the output
        tokens' moments to the target's moments (``target_moments``, else the target sample's).
    controls : tuple of L :class:`~gtcore.controls.Controls`
        The learned layers (the last iterate).
    h, T : float
        Layer step and depth in time, :math:`h = T/L`.
    energy : float
        :func:`control_energy` of ``controls``: :math:`h\sum_l\|A_l\|_F^2 + \|b_l\|^2`.
    n_tokens : int
        N, the number of tokens the network was trained on.
    attention : bool
        Whether the attention heads were trained (False: :math:`V = B = 0` throughout).
    status : TrainingStatus
    steps, lr, seed : the optimisation's settings
    resumed_from : int
        The step a checkpoint resumed from (0: a fresh start).
    """

    loss: np.ndarray
    moment_w2sq: np.ndarray
    controls: tuple[Controls, ...]
    h: float
    T: float
    energy: float
    n_tokens: int
    attention: bool
    status: TrainingStatus
    steps: int
    lr: float
    seed: int
    resumed_from: int = 0

    @property
    def layers(self) -> int:
        """Number of layers L."""
        return len(self.controls)

    @property
    def final_loss(self) -> float:
        """The last training loss."""
        return float(self.loss[-1])

    def __repr__(self) -> str:
        att = "on" if self.attention else "off"
        return (
            f"TrainingResult(L={self.layers}, N={self.n_tokens}, attention {att}, "
            f"{self.status.value}, final loss {self.final_loss:.4g}, energy {self.energy:.4g})"
        )


Tokens = np.ndarray | Callable[[np.random.Generator], np.ndarray]


def _token_source(x: Any, name: str) -> Callable[[np.random.Generator], np.ndarray]:
    """``x`` as a function of the sampling generator: fixed tokens, or a sampler called each step."""
    if callable(x):
        return x
    fixed = check_tokens(x, name, min_n=2)
    return lambda rng: fixed


def train_transformer(
    x0: Tokens,
    target: Tokens,
    *,
    layers: int = 8,
    T: float = 1.0,
    heads: int = 1,
    attention: bool = True,
    steps: int = 300,
    lr: float = 0.05,
    final_lr: float = 5e-4,
    init_scale: float = 0.1,
    seed: int = 0,
    target_moments: tuple[Any, Any] | None = None,
    checkpoint: Checkpoint | None = None,
    checkpoint_every: int = 50,
    blowup_norm: float = 1e6,
    progress: bool = True,
) -> TrainingResult:
    r"""Train the L-layer Transformer (module docstring) so that it moves ``x0`` onto ``target``.

    Minimises :math:`\ell(\theta) = W_2^2(X_L(\theta), Y)` over
    :math:`\theta = (A_l, b_l, V_{l,k}, B_{l,k})_{l,k}` with Adam, learning rate
    :math:`\eta_t = \eta_f + (\eta - \eta_f)\tfrac12(1 + \cos(\pi t/\text{steps}))` (cosine decay from
    ``lr`` :math:`= \eta` to ``final_lr`` :math:`= \eta_f`), gradients by torch autograd through the tokens
    with the optimal assignment held fixed. Each of ``x0`` and ``target`` is either fixed tokens (the same
    at every step: full-batch descent on one pair of samples) or a sampler called at every step with one
    ``numpy.random.default_rng(seed)`` (stochastic descent on fresh samples: the loss recorded at a step is
    then measured on tokens the network has not been trained on). Start: :math:`A_l = 0`, :math:`b_l = 0`
    (each layer the identity) and, with attention, i.i.d. :math:`N(0, \text{init\_scale}^2)` entries of
    :math:`V, B` from ``torch.Generator().manual_seed(seed)``. Deterministic on CPU.

    Parameters
    ----------
    x0 : (N, d) array, or callable ``rng -> (N, d) array``
        Input tokens (a sample of the initial distribution), or a sampler of them.
    target : (N, d) array, or callable ``rng -> (N, d) array``
        A sample of the target distribution of the same shape, or a sampler of them.
    layers : int
        L, number of residual layers; the step is :math:`h = T/L`.
    T : float
        Depth in time, positive.
    heads : int
        Attention heads per layer.
    attention : bool
        Train attention heads (False: :math:`V = B = 0`, not trained: the feed-forward alone).
    steps : int
        Adam steps.
    lr, final_lr : float
        Initial and final learning rates of the cosine schedule, positive.
    init_scale : float
        Standard deviation of the initial entries of :math:`V` and :math:`B`.
    seed : int
        Seeds the initial heads and the samplers.
    target_moments : (mu1, Sigma1), optional
        The target Gaussian's moments for the reported Bures–Wasserstein distance (default: each
        target sample's mean and :math:`1/N` covariance).
    checkpoint : Checkpoint, optional
        Where the training state (parameters, optimiser, sampler state, history) is kept: an object with
        ``load()`` and ``save(state)`` (:class:`Checkpoint`; the book's file store is
        :class:`gtbook.checkpoints.TorchFile`), saved every ``checkpoint_every`` steps and at the end. A
        run started with a saved state of the same problem and settings resumes from it and ends exactly
        where an uninterrupted run would; a state of another problem, or anything that is not a training
        state, is a ``ValueError`` naming the checkpoint. Samplers must then be describable (module-level
        functions or ``functools.partial`` of them).
    checkpoint_every : int
    blowup_norm : float
        Tokens with a coordinate beyond this (or a non-finite loss) stop the run: status
        ``DIVERGED``, with the controls of the last finite step.
    progress : bool
        Show a progress bar over the steps.

    Returns
    -------
    TrainingResult

    Notes
    -----
    torch runs on one thread during the training (the caller's setting is restored), so that a run does not
    depend on the machine's thread count.
    """
    with _one_thread():
        return _train(
            x0,
            target,
            layers=layers,
            T=T,
            heads=heads,
            attention=attention,
            steps=steps,
            lr=lr,
            final_lr=final_lr,
            init_scale=init_scale,
            seed=seed,
            target_moments=target_moments,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
            blowup_norm=blowup_norm,
            progress=progress,
        )


def _train(
    x0,
    target,
    *,
    layers,
    T,
    heads,
    attention,
    steps,
    lr,
    final_lr,
    init_scale,
    seed,
    target_moments,
    checkpoint,
    checkpoint_every,
    blowup_norm,
    progress,
) -> TrainingResult:
    if checkpoint is not None and not all(callable(getattr(checkpoint, m, None)) for m in ("load", "save")):
        raise TypeError(
            f"checkpoint must have load() and save(state) methods (a Checkpoint), got "
            f"{type(checkpoint).__name__} {checkpoint!r}; for a file, pass "
            "gtbook.checkpoints.TorchFile(path)"
        )
    draw_x, draw_y = _token_source(x0, "x0"), _token_source(target, "target")
    L = check_count(layers, "layers")
    H = check_count(heads, "heads")
    steps = check_count(steps, "steps")
    checkpoint_every = check_count(checkpoint_every, "checkpoint_every")
    T = check_positive(T, "T")
    lr = check_positive(lr, "lr")
    final_lr = check_positive(final_lr, "final_lr")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    init_scale = check_nonnegative(init_scale, "init_scale")
    if isinstance(seed, (float, np.floating)) and math.isfinite(seed) and seed == int(seed):
        seed = int(seed)  # an integral float, as before
    seed = check_count(seed, "seed", minimum=0)
    if target_moments is not None and (not isinstance(target_moments, (tuple, list)) or len(target_moments) != 2):
        raise ValueError(f"target_moments must be a pair (mu1, Sigma1), got {type(target_moments).__name__}")
    rng = np.random.default_rng(int(seed))
    probe_x = check_tokens(draw_x(np.random.default_rng(int(seed))), "x0", min_n=2)
    probe_y = check_tokens(draw_y(np.random.default_rng(int(seed))), "target", min_n=2)
    if probe_x.shape != probe_y.shape:
        raise ValueError(f"x0 and target must have the same shape (N, d), got {probe_x.shape} and {probe_y.shape}")
    N, d = probe_x.shape
    moments_given = None
    if target_moments is not None:
        mu_target, Sigma_target = target_moments
        moments_given = check_moments(mu_target, Sigma_target, "target_moments[0]", "target_moments[1]", d)
    h = T / L

    dt = torch.float64
    gen = torch.Generator().manual_seed(int(seed))
    A = torch.zeros(L, d, d, dtype=dt, requires_grad=True)
    b = torch.zeros(L, d, dtype=dt, requires_grad=True)
    params = [A, b]
    V = B = None
    if attention:
        V = (init_scale * torch.randn(L, H, d, d, generator=gen, dtype=dt)).requires_grad_()
        B = (init_scale * torch.randn(L, H, d, d, generator=gen, dtype=dt)).requires_grad_()
        params += [V, B]
    opt = torch.optim.Adam(params, lr=lr)

    key = (
        ""
        if checkpoint is None
        else _checkpoint_key(
            x0, target, L, H, bool(attention), steps, lr, final_lr, float(init_scale), int(seed), T, moments_given
        )
    )
    losses: list[float] = []
    moments: list[float] = []
    start = 0
    state = None if checkpoint is None else checkpoint.load()
    if state is not None:
        state = _checked_state(state, checkpoint, key, params)
        with torch.no_grad():
            for p, saved in zip(params, state["params"], strict=True):
                p.copy_(saved)
        opt.load_state_dict(state["optimizer"])
        rng.bit_generator.state = state["rng"]
        losses, moments, start = list(state["loss"]), list(state["moment_w2sq"]), int(state["step"])

    def save(step: int) -> None:
        if checkpoint is not None:
            checkpoint.save(
                {
                    "key": key,
                    "step": step,
                    "params": [p.detach().clone() for p in params],
                    "optimizer": opt.state_dict(),
                    "rng": rng.bit_generator.state,
                    "loss": losses,
                    "moment_w2sq": moments,
                }
            )

    def draw() -> tuple[np.ndarray, np.ndarray]:
        x, y = draw_x(rng), draw_y(rng)
        if np.shape(x) != (N, d) or np.shape(y) != (N, d):
            raise ValueError(
                f"the samplers must return ({N}, {d}) tokens every step, got {np.shape(x)} and {np.shape(y)}"
            )
        return np.asarray(x, float), np.asarray(y, float)

    def evaluate(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        out = transformer_tokens(torch.as_tensor(x, dtype=dt), A, b, V, B, h)
        arr = out.detach().numpy()
        if not np.isfinite(arr).all():
            return out, torch.tensor(float("inf"), dtype=dt)
        sigma = torch.as_tensor(optimal_assignment(arr, y))
        return out, torch.mean(torch.sum((out - torch.as_tensor(y, dtype=dt)[sigma]) ** 2, dim=1))

    def record(out: torch.Tensor, loss: torch.Tensor, y: np.ndarray) -> bool:
        arr = out.detach().numpy()
        value = float(loss.detach())
        ok = math.isfinite(value) and float(np.abs(arr).max()) <= blowup_norm
        mu1, Sigma1 = moments_given if moments_given is not None else empirical_moments(y)
        losses.append(value)
        moments.append(bures_wasserstein(*empirical_moments(arr), mu1, Sigma1) ** 2 if ok else float("inf"))
        return ok

    status = TrainingStatus.COMPLETED
    last_good = [p.detach().clone() for p in params]
    for step in progress_bar(range(start, steps), f"training L={L} N={N}", enabled=progress, total=steps - start):
        for group in opt.param_groups:
            group["lr"] = final_lr + (lr - final_lr) * 0.5 * (1.0 + math.cos(math.pi * step / steps))
        opt.zero_grad()
        x, y = draw()
        out, loss = evaluate(x, y)
        if not record(out, loss, y):
            status = TrainingStatus.DIVERGED
            break
        last_good = [p.detach().clone() for p in params]
        loss.backward()
        opt.step()
        if (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            save(step + 1)
    if status is TrainingStatus.COMPLETED and start < steps:
        x, y = draw()
        with torch.no_grad():
            out, loss = evaluate(x, y)
        if record(out, loss, y):
            last_good = [p.detach().clone() for p in params]
        else:
            status = TrainingStatus.DIVERGED
        save(steps)
    with torch.no_grad():
        for p, good in zip(params, last_good, strict=True):
            p.copy_(good)
    controls = layer_controls(
        A.detach().numpy(),
        b.detach().numpy(),
        None if V is None else V.detach().numpy(),
        None if B is None else B.detach().numpy(),
    )
    return TrainingResult(
        loss=np.array(losses),
        moment_w2sq=np.array(moments),
        controls=controls,
        h=h,
        T=T,
        energy=control_energy(controls, h),
        n_tokens=N,
        attention=bool(attention),
        status=status,
        steps=steps,
        lr=lr,
        seed=int(seed),
        resumed_from=start,
    )


__all__ = [
    "Checkpoint",
    "TrainingResult",
    "TrainingStatus",
    "apply_transformer",
    "best_rank_approximation",
    "control_energy",
    "empirical_rank_floor",
    "gaussian_energy",
    "layer_controls",
    "optimal_assignment",
    "piecewise",
    "rank_floor",
    "train_transformer",
    "transformer_tokens",
    "w2_squared",
]
