r"""Chapter 3's sections as study functions: each runs one section's computations and returns a result
dataclass with its figure (and table) methods, so that the chapter shows the model in a few lines.

The computations are those of :mod:`~gtbook.studies.reachability.harness`,
:mod:`~gtbook.studies.reachability.rank_tokens`, :mod:`~gtbook.studies.reachability.steered_tokens` and
:mod:`gtcore.reachability`, called with the chapter's parameters in the same order and with the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtbook.studies.reachability import figures as figs
from gtbook.studies.reachability.harness import RankInvariance, rank_invariance, token_distances
from gtbook.studies.reachability.rank_tokens import RankOnTokens, rank_on_tokens
from gtbook.studies.reachability.steered_tokens import SteeredTokens, steered_tokens_and_control
from gtbook.studies.tables import Table
from gtcore.controls import Controls, PiecewiseControls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.reachability import (
    RankMismatchError,
    control_path,
    endpoint_error,
    steer,
    steer_min_energy,
    steer_min_energy_starts,
)
from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments
from gtcore.stats.inference import loglog_slope
from gtcore.stats.sampling import gaussian_tokens

__all__ = [
    "EXAMPLES",
    "AttentionExample",
    "EnergyStudy",
    "RankOnODE",
    "RankTokensStudy",
    "SteeredStudy",
    "SteeringExamples",
    "TokenDistances",
    "attention_example",
    "min_energy_study",
    "rank_on_ode",
    "rank_tokens_study",
    "steered_study",
    "steering_examples",
    "token_distance_study",
]


# ------------------------------------------------------------------------------------------- (a)
@dataclass
class RankOnODE:
    """Random piecewise controls with attention on, and the singular values of Sigma(t) along eq. (1.1)."""

    result: RankInvariance
    rank: int

    @property
    def eta(self) -> float:
        """The largest relative null singular value at the tightest tolerance."""
        return float(self.result.eta[-1])

    @property
    def rank_constant(self) -> bool:
        """Whether the numerical rank of Sigma(t) equals the initial rank at every time."""
        return bool(np.all(self.result.ranks == self.rank))

    def figure(self, tokens: RankTokensStudy | None = None):
        """:func:`gtbook.studies.reachability.figures.rank_figure`, with the token clouds' panel when given."""
        return figs.rank_figure(self.result, tokens)


def rank_on_ode(
    *, d: int, r: int, pieces: int, T: float, times: int, A_scale: float, attention_scale: float, seed: int
) -> RankOnODE:
    r"""A rank-r covariance :math:`FF^\top` in dimension d pushed by ``pieces`` random constant controls
    (entries :math:`N(0, 1)` times the scales; one head) on :math:`[0, T]`
    (:func:`~gtbook.studies.reachability.harness.rank_invariance`, ``times`` output times).

    Parameters
    ----------
    d, r, pieces : int
    T : float
    times : int
    A_scale, attention_scale : float
    seed : int
        ``numpy.random.default_rng(seed)`` draws F, then each piece's A, b, V, B.

    Returns
    -------
    RankOnODE
    """
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((d, r))
    controls = PiecewiseControls(
        np.linspace(0.0, T, pieces + 1),
        [
            Controls(
                A=A_scale * rng.standard_normal((d, d)),
                b=rng.standard_normal(d),
                V=attention_scale * rng.standard_normal((d, d)),
                B=attention_scale * rng.standard_normal((d, d)),
            )
            for _ in range(pieces)
        ],
    )
    return RankOnODE(rank_invariance(np.zeros(d), F @ F.T, controls, T, n_times=times), r)


@dataclass
class RankTokensStudy:
    """Rank on N softmax tokens: Gaussian clouds and the moment-matched uniform control."""

    gauss: RankOnTokens
    uniform: RankOnTokens
    se: float

    def figure(self):
        """Per-draw excess spread against N (:func:`~gtbook.studies.reachability.figures.ensemble_vs_n_figure`)."""
        Ns = self.gauss.Ns
        return figs.ensemble_vs_n_figure(
            [
                (
                    "excess spread $\\epsilon$",
                    [
                        ("Gaussian", Ns, self.gauss.excess, self.gauss.slope),
                        ("uniform (control)", Ns, self.uniform.excess, self.uniform.slope),
                    ],
                )
            ]
        )


def rank_tokens_study(
    *,
    d: int,
    r: int,
    Ns: list,
    draws: int,
    seeds: int,
    control_seeds: int,
    layers: int,
    kappa: float,
    kappa_cap: float,
    seed: int,
    boot_seed: int,
    n_boot: int,
) -> RankTokensStudy:
    """:func:`~gtbook.studies.reachability.rank_tokens.rank_on_tokens` for Gaussian and uniform clouds, and the
    bootstrap standard error of the Gaussian slope (``n_boot`` resamples, ``boot_seed``)."""
    gauss = rank_on_tokens(
        d, r, Ns, draws=draws, seeds=seeds, layers=layers, seed=seed, kappa=kappa, kappa_cap=kappa_cap
    )
    uniform = rank_on_tokens(
        d,
        r,
        Ns,
        draws=draws,
        seeds=control_seeds,
        layers=layers,
        law="uniform",
        seed=seed,
        kappa=kappa,
        kappa_cap=kappa_cap,
    )
    return RankTokensStudy(gauss, uniform, gauss.slope_standard_error(n_boot=n_boot, seed=boot_seed))


# ------------------------------------------------------------------------------------------- (b)
@dataclass
class SteeringExamples:
    """Two hand-picked targets steered on eq. (1.1), and a target of another rank refused."""

    problems: dict
    controls: dict
    trajectories: dict
    errors: dict
    refusal: str | None

    def figure(self):
        """:func:`~gtbook.studies.reachability.figures.steering_figure`."""
        p = self.problems
        return figs.steering_figure(self.trajectories["2d"], p["2d"][2:], self.trajectories["3d"], p["3d"][2:])


#: the hand-picked targets of chapter 3 (b): a d = 2 ellipse, and rank-1 segments u u^T in d = 3
EXAMPLES: dict[str, Any] = {
    "mu0_2d": [0.0, 0.0],
    "Sigma0_2d": [[1.0, 0.0], [0.0, 0.25]],
    "mu1_2d": [2.0, 1.0],
    "Sigma1_2d": [[0.5, 0.6], [0.6, 1.5]],
    "mu0_3d": [0.0, 0.0, 0.0],
    "u0_3d": [1.0, 0.0, 0.0],
    "mu1_3d": [1.0, 1.0, 0.5],
    "u1_3d": [0.0, 0.9, -1.2],
}


def steering_examples(T: float, examples: dict[str, Any] | None = None) -> SteeringExamples:
    r"""Steer a full-rank Gaussian in d = 2 and a rank-1 Gaussian in d = 3 (a segment) to their targets with
    :func:`gtcore.reachability.steer`, integrate eq. (1.1) under the controls (201 times), record the endpoint
    errors (:func:`gtcore.reachability.endpoint_error`), and ask ``steer`` for a rank-2 target from the rank-1
    start (it must refuse).

    Parameters
    ----------
    T : float
    examples : dict, optional
        ``mu0_2d, Sigma0_2d, mu1_2d, Sigma1_2d`` and ``mu0_3d, u0_3d, mu1_3d, u1_3d`` (rank-1 covariances
        :math:`uu^\top`); default ``EXAMPLES``.

    Returns
    -------
    SteeringExamples
    """
    e = {k: np.array(v, float) for k, v in (EXAMPLES if examples is None else examples).items()}
    problems = {
        "2d": (e["mu0_2d"], e["Sigma0_2d"], e["mu1_2d"], e["Sigma1_2d"]),
        "3d": (e["mu0_3d"], np.outer(e["u0_3d"], e["u0_3d"]), e["mu1_3d"], np.outer(e["u1_3d"], e["u1_3d"])),
    }
    controls = {k: steer(*p, T) for k, p in problems.items()}
    t = np.linspace(0.0, T, 201)
    traj = {k: integrate_moments(p[0], p[1], controls[k], (0.0, T), t_eval=t) for k, p in problems.items()}
    errors = {k: endpoint_error(controls[k], p[0], p[1], p[2], p[3], T) for k, p in problems.items()}
    m0, S0, m1, _ = problems["3d"]
    try:
        steer(m0, S0, m1, np.diag([1.0, 1.0, 0.0]), T)
        refusal = None
    except RankMismatchError as err:
        refusal = str(err)
    return SteeringExamples(problems, controls, traj, errors, refusal)


# ------------------------------------------------------------------------------------------- (c)
@dataclass
class TokenDistances:
    """Distances of N steered tokens (attention off) to the target, and their slope in N."""

    Ns: list
    distances: np.ndarray
    slope: float

    def figure(self):
        """:func:`~gtbook.studies.reachability.figures.distance_vs_n_figure`."""
        return figs.distance_vs_n_figure(self.Ns, self.distances, self.slope)


def token_distance_study(
    examples: SteeringExamples, T: float, *, Ns: list, repeats: int, steps: int, seed: int
) -> TokenDistances:
    """The d = 2 example's attention-free controls on N tokens
    (:func:`~gtbook.studies.reachability.harness.token_distances`); slope of the geometric mean over repeats."""
    m0, S0, m1, S1 = examples.problems["2d"]
    distances = token_distances(examples.controls["2d"], m0, S0, m1, S1, T, Ns, repeats, steps, seed=seed, device="cpu")
    return TokenDistances(list(Ns), distances, loglog_slope(Ns, np.exp(np.log(distances).mean(axis=1))))


# ------------------------------------------------------------------------------------------- (d)
@dataclass
class AttentionExample:
    """The d = 2 example steered with a fixed head compensated by the paper's formula; a token cloud."""

    error: float
    cloud: Any
    ode: Any
    target: tuple
    cloud_over_uncompensated: float

    def animation(self, **kwargs):
        """:func:`~gtbook.studies.reachability.figures.steering_animation` of the cloud."""
        return figs.steering_animation(self.cloud, self.ode, self.target, **kwargs)


def attention_example(
    examples: SteeringExamples, T: float, *, V: list, B: list, tokens: int, steps: int, seed: int
) -> AttentionExample:
    r"""``steer(..., heads=(V, B))`` on the d = 2 example: the endpoint error on eq. (1.1), and ``tokens``
    Gaussian tokens (seed ``seed``) moved with their empirical softmax (``steps`` RK4 steps, tokens kept)."""
    m0, S0, m1, S1 = examples.problems["2d"]
    Vh, Bh = np.array(V, float), np.array(B, float)
    ctl = steer(m0, S0, m1, S1, T, heads=(Vh, Bh))
    error = endpoint_error(ctl, m0, S0, m1, S1, T)
    unc = integrate_moments(m0, S0, ctl.uncompensated(Vh, Bh), (0.0, T), t_eval=np.linspace(0.0, T, 201))
    cloud = simulate(
        gaussian_tokens(tokens, m0, S0, seed=seed),
        ctl,
        (0.0, T),
        steps,
        average="empirical",
        device="cpu",
        keep_tokens=True,
        record_every=max(1, steps // 40),
    )
    ratio = bures_wasserstein(*empirical_moments(cloud.final_tokens), m1, S1) / bures_wasserstein(*unc.final, m1, S1)
    ode = integrate_moments(m0, S0, ctl, (0.0, T), t_eval=cloud.t)
    return AttentionExample(float(error), cloud, ode, (m1, S1), float(ratio))


# ------------------------------------------------------------------------------------------- (e)
@dataclass
class EnergyStudy:
    """Minimum-energy controls for the rank-1 example: from the construction, and from random starts."""

    best: Any
    from_construction: Any
    from_random: list
    energy_rtol: float

    @property
    def energies(self) -> np.ndarray:
        """The energies reached from the construction (first) and from each random start."""
        return np.array([self.from_construction.energy] + [r.energy for r in self.from_random])

    @property
    def feasible(self) -> np.ndarray:
        """Which of those optima hit the target (endpoint error below 1e-6)."""
        errs = [self.from_construction.endpoint_error] + [r.endpoint_error for r in self.from_random]
        return np.array(errs) < 1e-6

    @property
    def agree(self) -> int:
        """Starts reaching the lowest feasible energy within ``energy_rtol``."""
        lowest = self.energies[self.feasible].min()
        return int(np.sum(self.feasible & (np.abs(self.energies - lowest) <= self.energy_rtol * lowest)))

    @property
    def best_random(self) -> float:
        """The lowest feasible energy from a random start."""
        return float(min(r.energy for r in self.from_random if r.endpoint_error < 1e-6))

    def figure(self):
        """:func:`~gtbook.studies.reachability.figures.energy_figure` of the finer optimum."""
        b = self.best
        t = np.linspace(0.0, b.constructive.T, 201)
        return figs.energy_figure(
            t, control_path(b.constructive, t), control_path(b.controls, t), (b.constructive_energy, b.energy)
        )

    def table(self) -> Table:
        """The energy and endpoint error reached from every start."""
        fc = self.from_construction
        rows = [
            dict(
                start="construction",
                energy=round(fc.energy, 6),
                endpoint_error=fc.endpoint_error,
                converged=fc.success,
                iterations=fc.nit,
            )
        ]
        rows += [
            dict(
                start=f"random {k}",
                energy=round(r.energy, 6),
                endpoint_error=r.endpoint_error,
                converged=r.success,
                iterations=r.nit,
            )
            for k, r in enumerate(self.from_random)
        ]
        return Table(
            rows,
            caption=f"constructive energy {fc.constructive_energy:.4f}; starts reaching the lowest "
            f"energy: {self.agree}",
        )


def min_energy_study(
    examples: SteeringExamples,
    T: float,
    *,
    pieces: int,
    start_pieces: int,
    starts: int,
    start_scale: float,
    energy_rtol: float,
    seed: int,
) -> EnergyStudy:
    """:func:`gtcore.reachability.steer_min_energy` on ``pieces`` pieces from the construction, and on
    ``start_pieces`` from the construction and from ``starts`` random starts (seeds from ``seed``)."""
    m0, S0, m1, S1 = examples.problems["3d"]
    best = steer_min_energy(m0, S0, m1, S1, T, pieces=pieces)
    from_construction = steer_min_energy(m0, S0, m1, S1, T, pieces=start_pieces)
    from_random = steer_min_energy_starts(
        m0, S0, m1, S1, T, pieces=start_pieces, starts=starts, scale=start_scale, seed=seed
    )
    return EnergyStudy(best, from_construction, list(from_random), float(energy_rtol))


# ------------------------------------------------------------------------------------------- (f)
@dataclass
class SteeredStudy:
    """Random same-rank targets on N tokens with a general head: Gaussian clouds and the transposed control."""

    gauss: SteeredTokens
    transposed: SteeredTokens
    se_distance: float
    se_dynamic: float

    def figure(self):
        """Per-draw D_N and E_N against N (:func:`~gtbook.studies.reachability.figures.ensemble_vs_n_figure`)."""
        g, c = self.gauss, self.transposed
        return figs.ensemble_vs_n_figure(
            [
                ("distance to the target $D_N$", [("Gaussian tokens", g.Ns, g.distance, g.slope)]),
                (
                    "dynamic error $E_N$",
                    [
                        ("Gaussian tokens", g.Ns, g.dynamic, g.dynamic_slope),
                        ("tokens' head with $B^\\top$ (control)", c.Ns, c.dynamic, c.dynamic_slope),
                    ],
                ),
            ]
        )


def steered_study(
    *,
    d: int,
    r: int,
    Ns: list,
    draws: int,
    seeds: int,
    control_seeds: int,
    steps: int,
    head_scale: float,
    seed: int,
    boot_seed: int,
    n_boot: int,
) -> SteeredStudy:
    """:func:`~gtbook.studies.reachability.steered_tokens.steered_tokens` for Gaussian clouds and the
    transposed-head control (computed together:
    :func:`~gtbook.studies.reachability.steered_tokens.steered_tokens_and_control`), and the bootstrap standard
    errors of both Gaussian slopes."""
    gauss, transposed = steered_tokens_and_control(
        d, r, Ns, draws=draws, seeds=seeds, control_seeds=control_seeds, steps=steps, seed=seed, head_scale=head_scale
    )
    return SteeredStudy(
        gauss,
        transposed,
        gauss.slope_standard_error("distance", n_boot=n_boot, seed=boot_seed),
        gauss.slope_standard_error("dynamic", n_boot=n_boot, seed=boot_seed + 1),
    )
