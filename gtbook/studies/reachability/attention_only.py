r"""Steering the covariance with the attention controls alone: :math:`A = 0`, time-varying :math:`V(t), B(t)`
(chapter 3, (g); beyond the paper).

With :math:`A` free, reachability follows from :math:`GL^+(d)` being connected: :math:`A(t)` can be any
generator. With :math:`A = 0` the covariance moves only through the bilinear term,
:math:`\Sigma' = M\Sigma + \Sigma M^\top` with :math:`M = V\Sigma B`. When :math:`\Sigma` has full rank every
:math:`M` is still available: for an attention-free generator :math:`\tilde A(t)` that steers
:math:`\Sigma_0` to :math:`\Sigma_1` (:func:`gtcore.reachability.steer`, zero means) and a fixed rotation
:math:`O`,

.. math::

    B(t) = \beta\,\Sigma_\text{ref}^{-1/2}\,O\,\Sigma_\text{ref}^{-1/2}, \qquad
    V(t) = \beta^{-1}\,\tilde A(t)\,\Sigma_\text{ref}^{1/2}\,O^\top\Sigma_\text{ref}^{-1/2}
    \quad\Longrightarrow\quad V\Sigma_\text{ref}B = \tilde A ,

along the reference :math:`\Sigma_\text{ref}(t)` (non-symmetric :math:`B` and non-scalar :math:`V` for
:math:`O \ne I`), and the sampling strength :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma) = \beta^2`
along the reference. The mean stays 0 (:math:`b = 0`: the layer is odd, and an antithetic cloud
:math:`\pm z_k` keeps its mean exactly); a last stage of length ``translate`` with :math:`V = B = 0` and
:math:`b = \mu_1/\tau` moves the mean (a translation, exact on any cloud).

These controls are **open loop**: :math:`B(t)` whitens the *reference* covariance, not the cloud's. Eq.
(1.1) under them is a Riccati-type equation around the reference, and a cloud whose covariance starts
:math:`O(N^{-1/2})` away from :math:`\Sigma_0`, and whose softmax average carries its own
:math:`O(N^{-1/2})` error along the way, may end far from the target, or blow up. Each draw records, for
``seeds`` antithetic clouds at each N (relative Bures–Wasserstein distances, target scale
:math:`\sqrt{\operatorname{tr}\Sigma_1}`):

* :math:`D_N`, the clouds' distance to the target after the controls, and :math:`D^A_N`, the distance of the
  same clouds pushed by the attention-free steering (their sampling error alone, by the exact flow);
* the **amplification** :math:`a = \bar D_N/\bar D^A_N` at the largest N: the draw is **reached** when
  :math:`a` is below ``cut`` (the cloud lands on the target as precisely as the attention-free steering
  would put it, up to that factor); in the linear regime :math:`a` does not depend on N, so a draw that is
  not reached keeps missing by :math:`a` times the sampling error;
* the amplification eq. (1.1) predicts: the same ratio for the moment ODE started from ``perturbations``
  covariances of independent antithetic clouds of the largest N (none of the token clouds), median,
  ``inf`` when it blows up: what the initial sampling error alone does along the open-loop path;
* the control: the first cloud at each N moved with the tokens' head using :math:`B^\top`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import expm

from gtbook.studies.atlas.tables import wilson_interval
from gtbook.studies.tables import Table
from gtbook.studies.traced import Sides, collect, merge, observed
from gtbook.studies.traced import predicted as predicted_side
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate_batch
from gtcore.reachability import SteeringControls, steer
from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments

__all__ = ["AttentionOnlyControls", "AttentionOnlySteering", "attention_only_steering", "random_rotation"]


def _sym_power(S: np.ndarray, p: float) -> np.ndarray:
    w, U = np.linalg.eigh(0.5 * (S + S.T))
    return (U * np.maximum(w, 1e-300) ** p) @ U.T


def random_rotation(d: int, theta: float, rng: np.random.Generator) -> np.ndarray:
    r""":math:`O = e^{\theta K}`, :math:`K` a random skew matrix scaled to spectral norm 1 (a rotation by at most
    :math:`\theta` radians in each invariant plane).

    Parameters
    ----------
    d : int
    theta : float
    rng : numpy Generator

    Returns
    -------
    (d, d) orthogonal array
    """
    G = rng.standard_normal((d, d))
    K = G - G.T
    return expm(theta * K / np.linalg.norm(K, 2))


class AttentionOnlyControls:
    r"""The controls of the module docstring: :math:`A = 0` throughout; :math:`(V(t), B(t))` on
    :math:`[0, T]`, then :math:`b = \mu_1/\tau` on :math:`[T, T + \tau]`.

    Parameters
    ----------
    base : SteeringControls
        Attention-free controls steering :math:`(0, \Sigma_0)` to :math:`(0, \Sigma_1)` on :math:`[0, T]`.
    mu1 : (d,) array
        The target mean.
    beta : float
        The logit scale (:math:`\kappa = \beta^2` along the reference).
    rotation : (d, d) orthogonal array
        :math:`O`.
    translate : float
        :math:`\tau`, the length of the translation stage.
    transposed : bool
        Use :math:`B(t)^\top` (the control).
    """

    def __init__(
        self,
        base: SteeringControls,
        mu1: np.ndarray,
        beta: float,
        rotation: np.ndarray,
        translate: float,
        transposed: bool = False,
    ) -> None:
        if base.heads is not None:
            raise ValueError("base must be attention-free steering controls")
        self.base, self.mu1, self.beta = base, np.asarray(mu1, float), float(beta)
        self.rotation = np.asarray(rotation, float)
        self.tau, self.transposed = float(translate), bool(transposed)
        self.d, self.T = base.d, base.T
        self.breaks = (*base.breaks, base.T)
        self.span = (0.0, base.T + self.tau)

    def __call__(self, t: float) -> Controls:
        zero = np.zeros((self.d, self.d))
        if t >= self.T:
            return Controls(A=zero, b=self.mu1 / self.tau, V=zero, B=zero)
        S = self.base.reference(float(t))[1]
        R, Ri = _sym_power(S, 0.5), _sym_power(S, -0.5)
        B = self.beta * Ri @ self.rotation @ Ri
        V = self.base(float(t)).A @ R @ self.rotation.T @ Ri / self.beta
        return Controls(A=zero, b=np.zeros(self.d), V=V, B=B.T if self.transposed else B)


def _antithetic(F0: np.ndarray, n: int, seed: int) -> np.ndarray:
    z = np.random.default_rng(seed).standard_normal((n // 2, F0.shape[1])) @ F0.T
    return np.concatenate([z, -z])


@dataclass(frozen=True)
class AttentionOnlySteering:
    r"""Per-draw results of ``attention_only_steering``.

    Attributes
    ----------
    Ns : (n,) int array
    distance, free : (draws, n, seeds) arrays
        :math:`D_N` and :math:`D^A_N` (module docstring).
    control : (draws, n) array
        :math:`D_N` of the first cloud moved with :math:`B^\top`.
    predicted : (draws,) array
        The amplification eq. (1.1) predicts at the largest N (``inf``: it blew up).
    ode_error : float
        The largest relative distance of eq. (1.1), started at :math:`(0, \Sigma_0)`, to its target.
    cond0, cond1, log_norm : (draws,) arrays
        :math:`\operatorname{cond}\Sigma_0`, :math:`\operatorname{cond}\Sigma_1` and :math:`\|\tilde A\|_F T`.
    cut : float
        A draw is reached when its amplification is below this.
    sides : Sides
        The traced sides of :meth:`fraction` (:mod:`gtbook.studies.traced`): the attention-only controls and the
        token runs (observed); the attention-free steering's exact flow of each cloud, :math:`D^A_N` (predicted).
    """

    Ns: np.ndarray
    distance: np.ndarray
    free: np.ndarray
    control: np.ndarray
    predicted: np.ndarray
    ode_error: float
    cond0: np.ndarray
    cond1: np.ndarray
    log_norm: np.ndarray
    cut: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def slopes(self, which: str = "distance") -> np.ndarray:
        """Per-draw slope of the log seed-mean of ``"distance"`` (or ``"control"``) in log N."""
        v = self.distance.mean(axis=2) if which == "distance" else self.control
        x = np.log(self.Ns)
        return np.array(
            [np.polyfit(x, np.log(row), 1)[0] if np.all(np.isfinite(row)) and np.all(row > 0) else np.inf for row in v]
        )

    @property
    def amplification(self) -> np.ndarray:
        r""":math:`\bar D_N/\bar D^A_N` at the largest N, per draw."""
        return self.distance[:, -1].mean(axis=1) / self.free[:, -1].mean(axis=1)

    @property
    def control_amplification(self) -> np.ndarray:
        r"""The control cloud's :math:`D_N/D^A_N` at the largest N (its own cloud's :math:`D^A_N`)."""
        return self.control[:, -1] / self.free[:, -1, 0]

    @property
    def reached(self) -> np.ndarray:
        """Draws whose amplification is below ``cut``."""
        return self.amplification < self.cut

    def fraction(self, which: str = "reached") -> tuple[int, int, tuple[float, float]]:
        """``(k, n, Wilson 95 % interval)`` of the draws ``"reached"``, or reached under the ``"control"``."""
        flags = self.reached if which == "reached" else self.control_amplification < self.cut
        k, n = int(flags.sum()), int(flags.size)
        return k, n, wilson_interval(k, n)

    def table(self) -> Table:
        """One row per draw: slopes, amplifications (observed and predicted by eq. (1.1)), what the target asked."""
        return Table(
            [
                dict(
                    draw=k,
                    slope=round(float(sl), 2),
                    reached=bool(r),
                    amplification=round(float(a), 1),
                    predicted=round(float(p), 1),
                    control=round(float(c), 1),
                    cond0=round(float(c0), 1),
                    cond1=round(float(c1), 1),
                    log_norm=round(float(g), 2),
                )
                for k, (sl, r, a, p, c, c0, c1, g) in enumerate(
                    zip(
                        self.slopes(),
                        self.reached,
                        self.amplification,
                        self.predicted,
                        self.control_amplification,
                        self.cond0,
                        self.cond1,
                        self.log_norm,
                        strict=True,
                    )
                )
            ]
        )

    def figure(self):
        """Per-draw distances against N, and the amplification against eq. (1.1)'s
        (:func:`gtbook.studies.reachability.figures.attention_only_figure`)."""
        from gtbook.studies.reachability.figures import attention_only_figure

        return attention_only_figure(self)

    def __repr__(self) -> str:
        k, n, _ = self.fraction()
        return f"AttentionOnlySteering(reached {k}/{n}, Ns={self.Ns.tolist()}, ode_error={self.ode_error:.1e})"


def attention_only_steering(
    d: int,
    Ns,
    *,
    draws: int,
    seeds: int,
    perturbations: int,
    steps: int,
    beta: float = 0.5,
    theta: float = 0.6,
    T: float = 1.0,
    translate: float = 0.25,
    cut: float = 3.0,
    seed: int = 0,
) -> AttentionOnlySteering:
    r"""Steer full-rank antithetic token clouds to random targets by the attention alone (module docstring).

    Draw ``k``: :func:`~gtbook.studies.reachability.steered_tokens.random_steering_draw` with ``r = d`` (the
    start and the target; its head is not used) and ``random_rotation``; every draw kept. Cloud ``s`` at
    each N: seed ``seed + 1000 (k+1) + s``; perturbation ``j`` of the prediction: ``seed + 1000 (k+1) + 500 + j``.

    Parameters
    ----------
    d : int
    Ns : sequence of even int
        Tokens per cloud.
    draws, seeds, perturbations : int
        Problems; clouds per draw and N; starts of eq. (1.1)'s prediction per draw.
    steps : int
        RK4 steps of :func:`gtcore.particles.simulate` over :math:`[0, T + \tau]`.
    beta, theta : float
        Logit scale and rotation angle of ``AttentionOnlyControls``.
    T, translate : float
        The covariance stage and the translation stage.
    cut : float
        A draw is reached when its amplification is below this (fixed before the run).
    seed : int

    Returns
    -------
    AttentionOnlySteering
    """
    from gtbook.studies.reachability.harness import RememberedControls
    from gtbook.studies.reachability.measured import affine_flow
    from gtbook.studies.reachability.steered_tokens import random_steering_draw

    Ns = np.asarray(Ns, int)
    if np.any(Ns < 4) or np.any(Ns % 2):
        raise ValueError(f"Ns must be even integers >= 4, got {Ns.tolist()}")
    rng = np.random.default_rng(seed)
    zero = np.zeros(d)
    D, DA = np.empty((draws, len(Ns), seeds)), np.empty((draws, len(Ns), seeds))
    Dc, pred, extra, ode_error = np.empty((draws, len(Ns))), np.empty(draws), np.empty((draws, 3)), 0.0
    traced: list[Sides] = []
    problems = []  # per draw: F0, mu1, S1, scale, the attention-free flow F, the controls, the B^T controls
    for k in range(draws):
        _, F0, mu1, F1, _, _ = random_steering_draw(d, d, rng)
        rot = random_rotation(d, theta, rng)
        S0, S1 = F0 @ F0.T, F1 @ F1.T
        base = steer(zero, S0, zero, S1, T)
        with collect() as draw_sides:  # eq. (1.1)'s checks and the B^T control run on neither side
            with observed():
                ctl = AttentionOnlyControls(base, mu1, beta, rot, translate)
            wrong = AttentionOnlyControls(base, mu1, beta, rot, translate, transposed=True)
            with predicted_side():  # the attention-free steering's exact flow: the reference D^A_N
                scale, F = np.sqrt(np.trace(S1)), affine_flow(base, T)[0]
            traced.append(draw_sides)
            ref = integrate_moments(zero, S0, ctl, ctl.span, rtol=1e-11, atol=1e-13)
            ode_error = max(
                ode_error,
                np.inf
                if ref.status != "completed"
                else float(bures_wasserstein(ref.mu[-1], ref.Sigma[-1], mu1, S1) / scale),
            )
        w0, w1 = np.linalg.eigvalsh(S0), np.linalg.eigvalsh(S1)
        extra[k] = (w0[-1] / w0[0], w1[-1] / w1[0], np.linalg.norm(base.stages[0].A) * T)
        problems.append((F0, mu1, S1, scale, F, ctl, wrong))
    # every cloud (draw, N, seed) at once: the clouds of one draw share the step times, so each draw's controls
    # are evaluated once per time (RememberedControls); the B^T control clouds (seed 0) in a batch of their own
    jobs = [(k, i, s) for k in range(draws) for i in range(len(Ns)) for s in range(seeds)]
    x0s = {job: _antithetic(problems[job[0]][0], int(Ns[job[1]]), seed + 1000 * (job[0] + 1) + job[2]) for job in jobs}
    remembered = [(RememberedControls(p[5]), RememberedControls(p[6])) for p in problems]

    def run_batch(batch: list[tuple[int, int, int]], which: int) -> list:
        """simulate_batch of ``batch``'s clouds, grouped by their controls' span (each draw's (0, T + tau))."""
        out: dict[tuple[int, int, int], object] = {}
        for span in dict.fromkeys(problems[job[0]][5].span for job in batch):
            group = [job for job in batch if problems[job[0]][5].span == span]
            runs = simulate_batch(
                [x0s[job] for job in group],
                [remembered[job[0]][which] for job in group],
                span,
                steps,
                record_every=steps,
                device="cpu",
            )
            out.update(zip(group, runs, strict=True))
        return [out[job] for job in batch]

    with collect() as run_sides, observed():  # the token runs under the controls
        runs = run_batch(jobs, 0)
    traced.append(run_sides)
    control_jobs = [job for job in jobs if job[2] == 0]
    control_runs = run_batch(control_jobs, 1)  # the B^T control: neither side
    for job, run in zip(jobs, runs, strict=True):
        k, i, s = job
        _, mu1, S1, scale, F, _, _ = problems[k]
        DA[k, i, s] = bures_wasserstein(mu1, F @ empirical_moments(x0s[job])[1] @ F.T, mu1, S1) / scale
        D[k, i, s] = bures_wasserstein(*empirical_moments(run.final_tokens), mu1, S1) / scale
    for (k, i, _), run in zip(control_jobs, control_runs, strict=True):
        _, mu1, S1, scale, _, _, _ = problems[k]
        Dc[k, i] = bures_wasserstein(*empirical_moments(run.final_tokens), mu1, S1) / scale
    for k, (F0, mu1, S1, _, F, ctl, _) in enumerate(problems):
        ratios = []
        for j in range(perturbations):
            S_start = empirical_moments(_antithetic(F0, int(Ns[-1]), seed + 1000 * (k + 1) + 500 + j))[1]
            own = integrate_moments(zero, S_start, ctl, ctl.span, rtol=1e-10, atol=1e-12)
            free = bures_wasserstein(mu1, F @ S_start @ F.T, mu1, S1)
            ratios.append(
                bures_wasserstein(own.mu[-1], own.Sigma[-1], mu1, S1) / free if own.status == "completed" else np.inf
            )
        pred[k] = np.median(ratios)
    return AttentionOnlySteering(
        Ns, D, DA, Dc, pred, float(ode_error), extra[:, 0], extra[:, 1], extra[:, 2], float(cut), merge(*traced)
    )
