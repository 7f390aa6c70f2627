r"""Steering with attention on, compensated by a response *measured on tokens* (chapter 3, (d)).

The paper's construction holds a head :math:`(V, B)` fixed and removes its drift along the reference
trajectory with the tilt formula of eq. (1.1): :math:`A = \tilde A - V\Sigma_\text{ref}B`,
:math:`b = \tilde b - V\mu_\text{ref}` (:class:`gtcore.reachability.SteeringControls`). On the moment ODE
that compensation cancels the ODE's own attention term whatever the formula is, so an endpoint check there
holds by construction. Here the compensation never consults eq. (1.1): a **pilot cloud** of N Gaussian
tokens (its own seed) is moved by the attention-free reference flow :math:`x \mapsto F(t)x + g(t)`, and at
the midpoint :math:`t_k` of each of K equal pieces of :math:`[0, T]` the softmax average of the pilot
tokens,

.. math::

    a_i = \sum_j \frac{e^{x_j^\top Bx_i}}{\sum_l e^{x_l^\top Bx_i}}\,x_j ,

is regressed on :math:`(1, x_i)` by least squares, :math:`a_i \approx \hat c_k + \hat K_kx_i` (NumPy, not
the library's kernel). The controls are piecewise constant, :math:`A_k = \tilde A(t_k) - V\hat K_k`,
:math:`b_k = \tilde b(t_k) - V\hat c_k`, with the head on. Two statistics then test two things
(relative to the target's scale :math:`\sqrt{\operatorname{tr}\Sigma_1}`):

* :math:`D_N`, the Bures–Wasserstein distance of a fresh cloud's final moments to the target: the tokens
  reach the target when the softmax average on a Gaussian cloud is affine in the query up to an
  :math:`N^{-1/2}` fluctuation (predicted :math:`D_N \propto N^{-1/2}`);
* :math:`E_N`, the distance of that cloud to eq. (1.1) integrated under the same measured controls from the
  cloud's own initial moments: the moment ODE predicts where the tokens go only if its attention term
  :math:`V\Sigma B` (the tilt formula) is the response the pilot measured (predicted
  :math:`E_N \propto N^{-1/2}`; a wrong formula makes it level off).

Controls of the statistics: the tokens moved with :math:`B^\top` in place of :math:`B` (the compensation
measured for :math:`B`) for :math:`D_N`; eq. (1.1) evaluated with :math:`B^\top` (a transposition error in
the tilt formula, invisible for symmetric :math:`B`) for :math:`E_N`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import expm

from gtbook.studies.traced import Sides, collect, no_prediction, observed, predicted
from gtcore.controls import Controls, PiecewiseControls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate_batch
from gtcore.reachability import SteeringControls, steer
from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error

__all__ = [
    "MeasuredSteering",
    "affine_flow",
    "measured_compensation",
    "measured_steering",
    "response_fit",
    "softmax_average",
]


def softmax_average(x: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""The softmax attention average of every token over the cloud, :math:`a_i = \sum_j w_{ij}x_j`,
    :math:`w_{ij} \propto e^{x_j^\top Bx_i}` (NumPy, max-subtracted).

    Parameters
    ----------
    x : (N, d) array
        The tokens (queries and keys).
    B : (d, d) array
        The query-key matrix.

    Returns
    -------
    (N, d) array
    """
    x = np.asarray(x, float)
    logits = (x @ B.T) @ x.T  # row i: x_j^T B x_i over j
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    return (w @ x) / w.sum(axis=1, keepdims=True)


def response_fit(x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Least-squares affine fit :math:`a_i \approx c + Kx_i` (minimum norm when the cloud is rank-deficient).

    Parameters
    ----------
    x, a : (N, d) arrays
        The tokens and their attention averages.

    Returns
    -------
    c : (d,) array
    K : (d, d) array
    """
    X = np.hstack([np.ones((x.shape[0], 1)), x])
    coef = np.linalg.lstsq(X, a, rcond=None)[0]
    return coef[0], coef[1:].T


def affine_flow(base: SteeringControls, t: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The attention-free reference flow :math:`x \mapsto F(t)x + g(t)` of ``base`` from 0 to ``t``.

    Each stage is :math:`x' = \tilde A_kx + \tilde b_k`, composed exactly through
    :math:`\exp\begin{bmatrix}\tilde A_k & \tilde b_k\\ 0 & 0\end{bmatrix}s` (scipy's ``expm``).

    Parameters
    ----------
    base : SteeringControls
        Attention-free steering controls (``heads is None``).
    t : float
        The time, in :math:`[0, T]`.

    Returns
    -------
    F : (d, d) array
    g : (d,) array
    """
    d = base.d
    G = np.eye(d + 1)
    start = 0.0
    for stage, tau in zip(base.stages, base.durations, strict=True):
        s = min(max(t - start, 0.0), tau)
        M = np.zeros((d + 1, d + 1))
        M[:d, :d], M[:d, d] = stage.A, stage.b
        G = expm(M * s) @ G
        start += tau
    return G[:d, :d], G[:d, d]


def measured_compensation(
    base: SteeringControls, V: np.ndarray, B: np.ndarray, pilot: np.ndarray, pieces: int
) -> PiecewiseControls:
    r"""Piecewise-constant controls that compensate the head :math:`(V, B)` with the response measured on
    the pilot cloud (module docstring).

    Parameters
    ----------
    base : SteeringControls
        The attention-free controls (their reference flow moves the pilot).
    V, B : (d, d) arrays
        The fixed head.
    pilot : (N, d) array
        The pilot tokens at time 0.
    pieces : int
        Equal pieces of :math:`[0, T]`, one measurement at each midpoint.

    Returns
    -------
    PiecewiseControls
        ``pieces`` Controls :math:`(\tilde A(t_k) - V\hat K_k,\ \tilde b(t_k) - V\hat c_k,\ V, B)`.
    """
    if base.heads is not None:
        raise ValueError("base must be attention-free steering controls (steer(...) without heads)")
    edges = np.linspace(0.0, base.T, int(pieces) + 1)
    out = []
    for t in 0.5 * (edges[:-1] + edges[1:]):
        F, g = affine_flow(base, float(t))
        x = pilot @ F.T + g
        c, K = response_fit(x, softmax_average(x, B))
        stage = base(float(t))
        out.append(Controls(A=stage.A - V @ K, b=stage.b - V @ c, V=V, B=B))
    return PiecewiseControls(edges, out)


def _transposed(ctl: PiecewiseControls) -> PiecewiseControls:
    """The same pieces with every head's B transposed."""
    edges = (ctl.span[0], *ctl.breaks, ctl.span[1]) if ctl.span else ctl.breaks
    return PiecewiseControls(edges, [Controls(A=c.A, b=c.b, V=c.V, B=np.swapaxes(c.B, -1, -2)) for c in ctl.pieces])


@dataclass(frozen=True)
class MeasuredSteering:
    r"""Token clouds steered with a token-measured compensation, over draws, N and seeds.

    Attributes
    ----------
    Ns : (n,) int array
    distance, dynamic : (draws, n, seeds) arrays
        :math:`D_N` and :math:`E_N` (module docstring).
    dynamic_transposed : (draws, n, seeds) array
        :math:`E_N` against eq. (1.1) evaluated with :math:`B^\top` (the control of :math:`E_N`).
    distance_transposed : (draws, n, control_seeds) array
        :math:`D_N` of clouds whose head is :math:`(V, B^\top)` (the control of :math:`D_N`).
    kappa : float
        The sampling strength every draw's head was scaled to (module docstring of ``measured_steering``).
    traced : Sides
        The traced sides of :math:`E_N` (:mod:`gtbook.studies.traced`): the steering, the pilot's measured
        compensation and the token run (observed); eq. (1.1) under the same controls (predicted).
    """

    Ns: np.ndarray
    distance: np.ndarray
    dynamic: np.ndarray
    dynamic_transposed: np.ndarray
    distance_transposed: np.ndarray
    kappa: float
    traced: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def sides(self, which: str = "distance") -> Sides:
        """The traced sides of :meth:`slope`'s ``"distance"`` (:math:`D_N`, against the target at the rate
        :math:`N^{-1/2}`: a prediction that runs no library code) or ``"dynamic"`` (:math:`E_N`, against eq. (1.1))."""
        if which not in ("distance", "dynamic"):
            raise ValueError(f"which must be 'distance' or 'dynamic', got {which!r}")
        return no_prediction(self.traced) if which == "distance" else self.traced

    def slope(self, which: str = "distance") -> float:
        """Pooled log-log slope in N (one intercept per draw) of ``"distance"``, ``"dynamic"``,
        ``"dynamic_transposed"`` or ``"distance_transposed"``."""
        return pooled_loglog_slope(self.Ns, getattr(self, which))

    def standard_error(self, which: str = "distance", n_boot: int = 2000, seed: int = 0) -> float:
        """Bootstrap standard error of :meth:`slope` (seeds resampled within each draw and N)."""
        return pooled_slope_standard_error(self.Ns, getattr(self, which), n_boot=n_boot, seed=seed)

    def figure(self):
        """Per-draw :math:`D_N` and :math:`E_N` with their controls
        (:func:`gtbook.studies.reachability.figures.measured_figure`)."""
        from gtbook.studies.reachability.figures import measured_figure

        return measured_figure(self)

    def __repr__(self) -> str:
        return (
            f"MeasuredSteering(draws={self.distance.shape[0]}, Ns={self.Ns.tolist()}, "
            f"slopes D={self.slope():.3f}, E={self.slope('dynamic'):.3f}, "
            f"E(B^T)={self.slope('dynamic_transposed'):.3f}, D(B^T)={self.slope('distance_transposed'):.3f})"
        )


def measured_steering(
    d: int,
    Ns: Sequence[int],
    *,
    draws: int,
    seeds: int,
    control_seeds: int,
    steps: int,
    T: float = 1.0,
    seed: int = 0,
    head_scale: float = 0.5,
    kappa: float = 0.2,
) -> MeasuredSteering:
    r"""Steer full-rank token clouds to random targets, the head compensated by a measured response.

    Draw ``k``: :func:`~gtbook.studies.reachability.steered_tokens.random_steering_draw` with ``r = d``
    (a full-rank start :math:`N(0, F_0F_0^\top)`, a random target, a Ginibre head), every draw kept, its
    :math:`B` scaled so that the largest sampling strength :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)`
    along the reference path (11 times) is ``kappa`` (the finite-variance regime is :math:`\kappa < 1/2`). For each
    N and seed ``s``: a pilot cloud (seed ``seed + 1000 (k+1) + 500 + s``) gives the compensation
    (``measured_compensation``, ``steps`` pieces), a fresh cloud (seed ``seed + 1000 (k+1) + s``) is
    moved by :func:`gtcore.particles.simulate` (RK4, one step per piece) and its :math:`D_N`, :math:`E_N` are
    recorded; the first ``control_seeds`` clouds are moved again with the head :math:`(V, B^\top)`.

    Parameters
    ----------
    d : int
        Dimension (the clouds have full rank).
    Ns : sequence of int
        Token counts.
    draws, seeds, control_seeds : int
        Problems, clouds per draw and N, and of those the ones also run as the control.
    steps : int
        Pieces of the compensation and RK4 steps.
    T : float
        Steering time.
    seed : int
        Seeds the draws and the clouds.
    head_scale : float
        Scale of the head's Ginibre entries (before :math:`B` is scaled to ``kappa``).
    kappa : float
        The sampling strength of every draw's head along its reference path.

    Returns
    -------
    MeasuredSteering
    """
    from gtbook.studies.reachability.steered_tokens import random_steering_draw

    if not 1 <= control_seeds <= seeds:
        raise ValueError(f"control_seeds must lie in 1..seeds={seeds}, got {control_seeds!r}")
    rng = np.random.default_rng(seed)
    sizes = np.asarray(Ns, int)
    shape = (draws, len(sizes), seeds)
    D, E, Et = np.empty(shape), np.empty(shape), np.empty(shape)
    Dt = np.empty((draws, len(sizes), control_seeds))
    with collect() as traced:  # the controls of both statistics (B^T) run on neither side
        for k in range(draws):
            mu0, F0, mu1, F1, V, B = random_steering_draw(d, d, rng, head_scale=head_scale)
            S0, S1 = F0 @ F0.T, F1 @ F1.T
            with observed():  # the attention-free steering the compensation is measured along
                base = steer(mu0, S0, mu1, S1, T)
            scale = np.sqrt(np.trace(S1))
            path = max(
                float(np.max(np.linalg.eigvals(B.T @ S @ B @ S).real))
                for S in (base.reference(float(t))[1] for t in np.linspace(0.0, T, 11))
            )
            B = B * np.sqrt(kappa / path)  # kappa is quadratic in B
            jobs = [(i, s) for i in range(len(sizes)) for s in range(seeds)]
            x0s, ctls = {}, {}
            for i, s in jobs:
                N = int(sizes[i])
                g_pilot = np.random.default_rng(seed + 1000 * (k + 1) + 500 + s)
                pilot = mu0 + g_pilot.standard_normal((N, d)) @ F0.T
                x0s[i, s] = mu0 + np.random.default_rng(seed + 1000 * (k + 1) + s).standard_normal((N, d)) @ F0.T
                with observed():  # the compensation measured on the pilot
                    ctls[i, s] = measured_compensation(base, V, B, pilot, steps)
            # the draw's clouds advance together (simulate_batch: the numbers of one simulate() per cloud)
            with observed():  # the tokens the compensation steers
                runs = simulate_batch(
                    [x0s[job] for job in jobs],
                    [ctls[job] for job in jobs],
                    (0.0, T),
                    steps,
                    record_every=steps,
                    device="cpu",
                )
            controls = [(i, s) for i, s in jobs if s < control_seeds]
            control_runs = simulate_batch(
                [x0s[job] for job in controls],
                [_transposed(ctls[job]) for job in controls],
                (0.0, T),
                steps,
                record_every=steps,
                device="cpu",
            )
            for (i, s), run in zip(jobs, runs, strict=True):
                ctl = ctls[i, s]
                m, S = empirical_moments(run.final_tokens)
                D[k, i, s] = bures_wasserstein(m, S, mu1, S1) / scale
                own0 = empirical_moments(x0s[i, s])
                with predicted():  # eq. (1.1) under the same controls, from the cloud's own moments
                    own = integrate_moments(*own0, ctl, (0.0, T), rtol=1e-10, atol=1e-12)
                E[k, i, s] = bures_wasserstein(m, S, own.mu[-1], own.Sigma[-1]) / scale
                own = integrate_moments(*own0, _transposed(ctl), (0.0, T), rtol=1e-10, atol=1e-12)
                Et[k, i, s] = bures_wasserstein(m, S, own.mu[-1], own.Sigma[-1]) / scale
            for (i, s), run in zip(controls, control_runs, strict=True):
                Dt[k, i, s] = bures_wasserstein(*empirical_moments(run.final_tokens), mu1, S1) / scale
    return MeasuredSteering(sizes, D, E, Et, Dt, float(kappa), traced)
