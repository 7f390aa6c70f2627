r"""Chapter 1 over general parameters: invariance and the reduction on a seeded ensemble of layers.

The chapter's worked examples use :math:`d = 2` and :math:`V = vI`. The paper's statements hold for
every layer, so each is also tested over an ensemble of D seeded draws (:func:`general_draws`) with
:math:`d \ge 3`, a non-zero :math:`A`, a non-scalar :math:`V`, a non-symmetric :math:`B` and a full-rank,
anisotropic :math:`\Sigma_0`, scaled so that the sampling strength
:math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)` stays below :math:`\tfrac12` along the moment ODE
(the finite-variance regime, where the finite-N rate :math:`N^{-1/2}` is predicted).

* **The reduction** (:func:`stack_ensemble`): L residual layers with softmax attention over N tokens
  against the exact Gaussian layer map started from each sample's own moments
  (:func:`gtbook.studies.invariance.nongaussian.softmax_stack_study`'s computation, the clouds of one N of every
  draw and seed advanced together); the pooled
  log–log slope in N (:func:`gtcore.stats.inference.pooled_loglog_slope`, one intercept per draw) is
  predicted :math:`-\tfrac12`; for a uniform law with the same two moments the error levels off.
* **Invariance** (the same runs): the invariance rests on the attention average against a Gaussian
  being affine in the query, so the flow map of a Gaussian cloud is affine. At finite N the softmax
  average fluctuates around it by :math:`O(N^{-1/2})`: the non-affine residual of each sample's map
  through the stack (:func:`gtbook.studies.invariance.nongaussian.nonaffine_residual`) is predicted
  :math:`\propto N^{-1/2}`, and levels off for the uniform law, whose average is not affine.
* **Gaussianity at one N** (:func:`gaussianity_ensemble`): the sliced :math:`W_2` of each draw's cloud
  after the flow to time T, to be compared with the null of Gaussian samples of that size
  (``gtbook.studies.nulls.mean_of_k_quantile`` for the ensemble mean); with a ReLU block
  :math:`W\,\mathrm{relu}(x - \mu_0)` added (:func:`relu_variant`), whose kink runs through the cloud,
  the cloud stops being Gaussian.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtbook.studies.invariance.nongaussian import nonaffine_residual
from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import observed, predicted
from gtcore._progress import progress as progress_bar
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls, as_control_function, evaluate_controls
from gtcore.moments import integrate_moments, layer_stack
from gtcore.particles import simulate_batch
from gtcore.stats.gaussianity import sliced_w2
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error
from gtcore.stats.sampling import gaussian_tokens, moment_matched_tokens

__all__ = [
    "EnsembleStack",
    "GeneralDraw",
    "gaussianity_ensemble",
    "general_draw",
    "general_draws",
    "relu_variant",
    "stack_ensemble",
]


@dataclass(frozen=True)
class GeneralDraw:
    """One layer of the ensemble and its Gaussian input.

    Attributes
    ----------
    controls : Controls
        :math:`A, b, V, B` (one head).
    mu0, Sigma0 : (d,), (d, d)
    kappa_max : float
        The largest sampling strength along the moment ODE on :math:`[0, T]`.
    """

    controls: Controls
    mu0: np.ndarray
    Sigma0: np.ndarray
    kappa_max: float

    def __repr__(self) -> str:
        return f"GeneralDraw(d={self.controls.d}, kappa_max={self.kappa_max:.3f})"


def general_draw(d: int, rng: np.random.Generator, *, kappa: float = 0.25) -> tuple[Controls, np.ndarray, np.ndarray]:
    r"""Random general parameters: :math:`A, V, B` Ginibre, :math:`\Sigma_0` anisotropic, at strength ``kappa``.

    :math:`A, V, B` have i.i.d. entries :math:`N(0, s^2/d)` with :math:`s = 0.5, 0.8, 0.5`;
    :math:`b \sim N(0, 0.09 I)`; :math:`\mu_0 \sim N(0, 0.25 I)`;
    :math:`\Sigma_0 = c\,(FF^\top/d + \tfrac14 I)` with :math:`F` Ginibre and :math:`c` chosen so that
    :math:`\lambda_{\max}(B^\top\Sigma_0B\Sigma_0) = \kappa` (:math:`\kappa` scales like :math:`c^2`).

    Parameters
    ----------
    d : int
        Dimension (>= 2).
    rng : numpy Generator
    kappa : float
        The sampling strength at :math:`t = 0`, in (0, 1/2).

    Returns
    -------
    controls, mu0, Sigma0
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    if not 0.0 < kappa < 0.5:
        raise ValueError(f"kappa must lie in (0, 1/2), got {kappa!r}")
    g = lambda s: s * rng.standard_normal((d, d)) / np.sqrt(d)  # noqa: E731
    A, V, B = g(0.5), g(0.8), g(0.5)
    b = 0.3 * rng.standard_normal(d)
    mu0 = 0.5 * rng.standard_normal(d)
    F = rng.standard_normal((d, d))
    Sigma0 = F @ F.T / d + 0.25 * np.eye(d)
    ctl = Controls(A=A, b=b, V=V, B=B)
    k0 = max_sampling_strength(ctl, [0.0], [Sigma0])
    Sigma0 = Sigma0 * np.sqrt(kappa / k0)
    return ctl, mu0, 0.5 * (Sigma0 + Sigma0.T)


def general_draws(
    n: int, d: int, *, T: float, seed: int, kappa: float = 0.25, kappa_cap: float = 0.45, max_tries: int = 200
) -> list[GeneralDraw]:
    r"""``n`` draws of :func:`general_draw` whose moment ODE completes on :math:`[0, T]`, with a cap on :math:`\kappa`.

    Kept: the draws with :math:`\kappa <` ``kappa_cap`` along the path.

    Draws that leave the finite-variance regime along the way (or blow up) are redrawn; the draws
    kept are the first ``n`` that pass, in the order of the seeded generator.

    Parameters
    ----------
    n, d : int
        Number of draws and dimension.
    T : float
        Horizon of the flow.
    seed : int
        Seeds the generator.
    kappa, kappa_cap : float
        Initial strength and the cap along the trajectory.
    max_tries : int

    Returns
    -------
    list of GeneralDraw
    """
    rng = np.random.default_rng(seed)
    out: list[GeneralDraw] = []
    tries = 0
    while len(out) < int(n):
        tries += 1
        if tries > max_tries:
            raise ValueError(f"only {len(out)} of {n} draws kept kappa below {kappa_cap} in {max_tries} tries")
        ctl, mu0, S0 = general_draw(d, rng, kappa=kappa)
        ode = integrate_moments(mu0, S0, ctl, (0.0, float(T)), t_eval=np.linspace(0.0, float(T), 21))
        if ode.status != "completed":
            continue
        k = max_sampling_strength(ctl, ode.t, ode.Sigma)
        if k < kappa_cap:
            out.append(GeneralDraw(ctl, mu0, S0, float(k)))
    return out


def relu_variant(controls: Controls, mu0: Any, gain: float = 0.5) -> Controls:
    r"""The layer ``controls`` plus a ReLU block :math:`\text{gain}\cdot\mathrm{relu}(x - \mu_0)`.

    The block has :math:`U = I`, :math:`W = \text{gain}\,I`, :math:`c = -\mu_0`.

    Moved with ``ff="relu"`` the tokens on the positive side of each coordinate's kink (through the
    initial mean :math:`\mu_0`) are pushed out and the others not: the cloud stops being Gaussian. (The
    moment ODE of this ``Controls`` is that of the identity activation, which is not what the tokens
    follow.)

    Parameters
    ----------
    controls : Controls
        A layer without a feed-forward block (its :math:`A, b, V, B` are kept).
    mu0 : (d,) array
        Where the kinks go.
    gain : float

    Returns
    -------
    Controls
    """
    c = controls
    if c.has_feedforward:
        raise ValueError("controls: relu_variant needs a layer without a feed-forward block")
    d = c.d
    return Controls(A=c.A, b=c.b, V=c.V, B=c.B, U=np.eye(d), W=float(gain) * np.eye(d), c=-np.asarray(mu0, float))


@dataclass(frozen=True)
class EnsembleStack:
    r"""The softmax L-layer stack against the exact layer map, over draws, N and seeds.

    Attributes
    ----------
    Ns : (n,) int array
    errors : (draws, n, seeds) array
        :math:`\|\hat\mu_L - \mu_L\| + \|\hat\Sigma_L - \Sigma_L\|_F` (layer map from each sample's moments).
    nonaffine : (draws, n, seeds) array
        :func:`gtbook.studies.invariance.nongaussian.nonaffine_residual` of each sample's map through the stack.
    law : str
    slope : float
        :func:`gtcore.stats.inference.pooled_loglog_slope` of ``errors``.
    nonaffine_slope : float
        The same for ``nonaffine``.
    """

    Ns: np.ndarray
    errors: np.ndarray
    nonaffine: np.ndarray
    law: str
    slope: float
    nonaffine_slope: float

    def slope_standard_error(self, which: str = "errors", n_boot: int = 2000, seed: int = 0) -> float:
        """Bootstrap standard error of ``slope`` (``which="errors"``) or ``nonaffine_slope``
        (``"nonaffine"``), by :func:`gtcore.stats.inference.pooled_slope_standard_error`."""
        if which not in ("errors", "nonaffine"):
            raise ValueError(f"which must be 'errors' or 'nonaffine', got {which!r}")
        return pooled_slope_standard_error(self.Ns, getattr(self, which), n_boot=n_boot, seed=seed)

    def __repr__(self) -> str:
        return (
            f"EnsembleStack(law={self.law!r}, draws={self.errors.shape[0]}, Ns={self.Ns.tolist()}, "
            f"seeds={self.errors.shape[2]}, slope={self.slope:.3f}, nonaffine_slope={self.nonaffine_slope:.3f})"
        )


def stack_ensemble(
    draws: Sequence[GeneralDraw],
    T: float,
    n_layers: int,
    Ns: Sequence[int],
    seeds: int,
    *,
    law: str = "gaussian",
    seed: int = 0,
    progress: bool = False,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
) -> EnsembleStack:
    r""":func:`~gtbook.studies.invariance.nongaussian.softmax_stack_study` on every draw, the clouds of one N
    advanced together.

    Draw ``k`` uses the sample seeds ``seed + 1000 k + s``, ``s < seeds``. For each N, the clouds of every draw
    and seed go through :func:`gtcore.particles.simulate_batch` (the same numbers as one
    :func:`~gtcore.particles.simulate` per cloud, several clouds at a time); each is then compared, as in
    ``softmax_stack_study``, with the exact layer map from its own moments and measured by its non-affine
    residual.

    Returns
    -------
    EnsembleStack
    """
    if len(draws) < 1:
        raise ValueError("draws must hold at least one draw")
    N_arr = np.asarray(Ns, dtype=int)
    if N_arr.ndim != 1 or N_arr.size < 2 or np.any(N_arr < 2):
        raise ValueError(f"Ns must hold at least two token counts >= 2, got {Ns!r}")
    if isinstance(n_layers, bool) or int(n_layers) != n_layers or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    if int(seeds) < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds!r}")
    L, S = int(n_layers), int(seeds)
    h = float(T) / L
    per_layer = [[evaluate_controls(as_control_function(dr.controls), k * h) for k in range(L)] for dr in draws]
    errors = np.empty((len(draws), N_arr.size, S))
    nonaffine = np.empty_like(errors)
    for i in progress_bar(range(N_arr.size), f"stack ensemble ({law})", enabled=progress):
        jobs = [(k, s) for k in range(len(draws)) for s in range(S)]
        with observed():  # the tokens (gtbook.studies.traced: recorded when a caller collects the sides)
            x0s = [
                moment_matched_tokens(law, int(N_arr[i]), draws[k].mu0, draws[k].Sigma0, int(seed) + 1000 * k + s)
                for k, s in jobs
            ]
            runs = simulate_batch(
                x0s,
                [draws[k].controls for k, _ in jobs],
                (0.0, float(T)),
                L,
                method="euler",
                record_every=L,
                device="cpu",
                kernel_dtype=kernel_dtype,
                keep_tokens=True,
            )
        for (k, s), x0, tr in zip(jobs, x0s, runs, strict=True):
            with predicted():  # the exact layer map from the cloud's own moments
                mus, Sigmas = layer_stack(tr.mu[0], tr.Sigma[0], per_layer[k], h)
            errors[k, i, s] = np.linalg.norm(tr.mu[-1] - mus[-1]) + np.linalg.norm(tr.Sigma[-1] - Sigmas[-1])
            assert tr.tokens is not None  # keep_tokens=True
            nonaffine[k, i, s] = nonaffine_residual(x0, tr.tokens[-1])
    return EnsembleStack(N_arr, errors, nonaffine, law, _slope_or_nan(N_arr, errors), _slope_or_nan(N_arr, nonaffine))


def _slope_or_nan(Ns: np.ndarray, values: np.ndarray) -> float:
    """The pooled slope, or nan when a value is 0 (an exactly affine stack: no rate to fit)."""
    return pooled_loglog_slope(Ns, values) if np.all(values > 0) else float("nan")


def gaussianity_ensemble(
    draws: Sequence[GeneralDraw],
    T: float,
    steps: int,
    n_tokens: int,
    *,
    relu: bool = False,
    gain: float = 0.5,
    seed: int = 0,
    projections_seed: int = 0,
    progress: bool = False,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
) -> np.ndarray:
    r"""Sliced :math:`W_2` (:func:`gtcore.stats.gaussianity.sliced_w2`) of each draw's cloud at time T.

    Draw ``k``: ``n_tokens`` tokens from :math:`N(\mu_0, \Sigma_0)` (seed ``seed + k``), ``steps`` RK4
    steps of the N-token Transformer with softmax attention; with ``relu=True`` the layer is
    :func:`relu_variant` (``gain``) moved with ``ff="relu"``. The draws' clouds advance together
    (:func:`gtcore.particles.simulate_batch`).

    Returns
    -------
    (draws,) array
    """
    with observed():  # the tokens (gtbook.studies.traced: recorded when a caller collects the sides)
        x0s = [gaussian_tokens(int(n_tokens), dr.mu0, dr.Sigma0, int(seed) + k) for k, dr in enumerate(draws)]
        ctls = [relu_variant(dr.controls, dr.mu0, gain) if relu else dr.controls for dr in draws]
        runs = simulate_batch(
            x0s,
            ctls,
            (0.0, float(T)),
            int(steps),
            ff="relu" if relu else "identity",
            record_every=int(steps),
            keep_tokens=True,
            device="cpu",
            kernel_dtype=kernel_dtype,
        )
    out = np.empty(len(draws))
    for k, tr in enumerate(progress_bar(runs, "Gaussianity ensemble", enabled=progress)):
        assert tr.tokens is not None  # keep_tokens=True
        out[k] = sliced_w2(tr.tokens[-1], seed=projections_seed)
    return out
