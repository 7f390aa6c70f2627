r"""Chapter 9's grid of trained networks, and what the chapter reads from it: one call trains (or reads back) every
network, and the result carries the chapter's tables and figures.

``train_grid`` runs :func:`gtbook.studies.learning.harness.run_for` and
:func:`~gtbook.studies.learning.harness.null_losses` (both cached on disk) for

* the ensemble: every full-rank target from the full-rank start and from the rank-:math:`r` start, every
  rank-:math:`r` target from the rank-:math:`r` start, each with attention and with :math:`V = 0`, with the noise
  floor of each (the target's own, or that of its nearest rank-:math:`r` Gaussian);
* the :math:`N` ladder and the depth ladder on the first full-rank target.

Training seed of a run: ``run_seed`` (``seed + 1_000_000 group + 100_000 k + 100 N + L``, group 1: full-rank
start, 2: rank-:math:`r` start to a full-rank target, 3: rank-:math:`r` target), so no two runs share samples.
Noise-floor seeds: ``seed + 50_000 + k`` (full-rank targets), ``+ 60_000 + k`` (their nearest rank-:math:`r`
Gaussians), ``+ 70_000 + k`` (rank-:math:`r` targets), ``+ 80_000 + N`` and ``+ 90_000 + N`` on the ladder (the
ensemble's own floor at the ensemble's :math:`N`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtbook.studies.learning import figures as figs
from gtbook.studies.learning.harness import (
    EnergyComparison,
    LearningRun,
    PairLosses,
    SlackSlope,
    Target,
    TrainingSettings,
    energy_comparison,
    null_losses,
    output_tokens,
    run_for,
    slack_slope,
)
from gtbook.studies.learning.learned_clouds import (
    MeanFieldDeparture,
    Thickness,
    attended_tokens,
    mean_field_departure,
    off_subspace_ratio,
    thickness_against_n,
)
from gtbook.studies.traced import Sides, merge
from gtcore.stats.sampling import gaussian_tokens
from gtcore.training import rank_floor

__all__ = ["LEVEL", "Escape", "LearningGrid", "against", "band", "run_seed", "train_grid"]

#: the band of a noise floor: from its 1% to its 99% quantile
LEVEL = 0.98


def band(null: PairLosses) -> tuple[float, float]:
    """The 1%–99% band of a noise floor."""
    return null.noise_floor().band(LEVEL)


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, Iterable) and not isinstance(x, (LearningRun, PairLosses)) else [x]


def against(
    observed_from: LearningRun | PairLosses | Iterable[LearningRun | PairLosses],
    predicted_from: LearningRun | PairLosses | Iterable[LearningRun | PairLosses] | None = None,
) -> Sides:
    r"""The traced sides of a claim on trained networks: the observed sides of ``observed_from`` (their training and
    test inputs) against the predicted sides of ``predicted_from`` (noise floors; by default the networks' own
    exact floors :math:`F_r(\hat\Sigma_Y)`), each merged over the items (:mod:`gtbook.studies.traced`)."""
    obs = _as_list(observed_from)
    pred = obs if predicted_from is None else _as_list(predicted_from)
    return Sides(merge(*(x.sides for x in obs)).observed, merge(*(x.sides for x in pred)).predicted)


def run_seed(seed: int, group: int, k: int, n: int, L: int) -> int:
    """One training seed per (group, target, N, L): runs never share samples."""
    return seed + 1_000_000 * group + 100_000 * k + 100 * n + L


@dataclass
class Escape:
    r"""Every network trained with attention from the rank-:math:`r` start to a full-rank target, against its own
    Gaussian (mean-field) dynamics (:meth:`LearningGrid.escape`).

    Attributes
    ----------
    rows : list of (name, run, target, floor, departure)
        One per network: the ensemble, the :math:`N` ladder, the depth ladder.
    rank : int
    """

    rows: list[tuple[str, LearningRun, Target, PairLosses, MeanFieldDeparture]]
    rank: int

    @property
    def deepest(self) -> tuple[str, LearningRun, Target, PairLosses, MeanFieldDeparture]:
        """The network with the lowest test loss relative to the lower edge of its wall's floor."""
        return min(self.rows, key=lambda row: row[1].test_loss / band(row[3])[0])

    @property
    def n_below(self) -> int:
        """How many networks ended below the lower edge of their wall's floor."""
        return sum(bool(run.test_loss <= band(nl)[0]) for _, run, _, nl, _ in self.rows)

    @property
    def at_wall_or_departed(self) -> bool:
        """Whether every network stays above the floor's lower edge or has left its Gaussian dynamics."""
        return bool(all(run.test_loss > band(nl)[0] or m.departed for _, run, _, nl, m in self.rows))

    @property
    def least_endpoint_over_floor(self) -> float:
        r"""The least :math:`W_2^2` of the exact layer maps' endpoint to the target, over :math:`F_r`."""
        return min(m.endpoint_w2sq / rank_floor(t.Sigma, self.rank) for _, _, t, _, m in self.rows)

    @property
    def endpoints_keep_rank(self) -> bool:
        """Whether every exact layer map keeps the start's rank."""
        return bool(all(m.endpoint_rank == self.rank for *_, m in self.rows))

    @property
    def sides(self) -> Sides:
        """The traced sides of :attr:`at_wall_or_departed`: every network's training, test inputs and fresh clouds
        (observed) against its wall's noise floor, its exact layer maps and their floor (predicted)."""
        pairs = [
            Sides(merge(run.sides, m.sides).observed, merge(nl.sides, m.sides).predicted)
            for _, run, _, nl, m in self.rows
        ]
        return merge(*pairs)

    def least_bending(self, *, seed: int) -> float:
        r"""The least :math:`\sigma_{r+1}/\sigma_1` of the networks' outputs on one fresh cloud each (seed ``seed``)."""
        return min(
            off_subspace_ratio(output_tokens(run, run.training.n_tokens, seed=seed)[1], self.rank)
            for _, run, *_ in self.rows
        )

    def table(self) -> list[dict[str, Any]]:
        """Per network: loss, wall, :math:`F_r`, :math:`\\kappa`, departure and its floor, the Gaussian prediction."""
        return [
            {
                "run": name,
                "mean test loss": round(run.test_loss, 4),
                "q01 of the wall": round(band(nl)[0], 4),
                f"F_{self.rank}": round(rank_floor(t.Sigma, self.rank), 4),
                "below the wall": bool(run.test_loss <= band(nl)[0]),
                "kappa max": float(f"{m.kappa:.3g}"),
                "departure": float(f"{m.departure:.3g}"),
                "departure floor q99": float(f"{m.floor.band(LEVEL)[1]:.3g}"),
                "left its Gaussian dynamics": m.departed,
                "Gaussian prediction W2^2": float(f"{m.endpoint_w2sq:.3g}"),
                "its rank": m.endpoint_rank,
            }
            for name, run, t, nl, m in self.rows
        ]


@dataclass
class LearningGrid:
    r"""Every trained network of the chapter and its noise floors (``train_grid``).

    Attributes
    ----------
    full_targets, low_targets : list of Target
        Full-rank targets, and targets of rank ``rank``.
    d, rank, n_tokens : int
    runs, runs0 : dict name -> LearningRun
        Full-rank targets from the full-rank start, with attention and with :math:`V = 0`.
    wall, wall0 : dict name -> LearningRun
        Full-rank targets from the rank-``rank`` start.
    low, low0 : dict name -> LearningRun
        Rank-``rank`` targets from the rank-``rank`` start.
    null_full, null_wall, null_low : dict name -> PairLosses
        The noise floors: of each full-rank target, of its nearest rank-``rank`` Gaussian, of each low target.
    ladder_ns, depths : list of int
    ladder_full, ladder_wall, ladder_wall0, ladder_null_full, ladder_null_wall : lists over ``ladder_ns``
        The first full-rank target at each N (full-rank start; rank-``rank`` start with and without attention) and
        the floors at each N.
    depth_full, depth_wall, depth_wall0 : lists over ``depths``
        The same target at each depth L (same T, N = ``n_tokens``).
    """

    full_targets: list[Target]
    low_targets: list[Target]
    d: int
    rank: int
    n_tokens: int
    runs: dict[str, LearningRun]
    runs0: dict[str, LearningRun]
    wall: dict[str, LearningRun]
    wall0: dict[str, LearningRun]
    low: dict[str, LearningRun]
    low0: dict[str, LearningRun]
    null_full: dict[str, PairLosses]
    null_wall: dict[str, PairLosses]
    null_low: dict[str, PairLosses]
    ladder_ns: list[int]
    ladder_full: list[LearningRun]
    ladder_wall: list[LearningRun]
    ladder_wall0: list[LearningRun]
    ladder_null_full: list[PairLosses]
    ladder_null_wall: list[PairLosses]
    depths: list[int]
    depth_full: list[LearningRun]
    depth_wall: list[LearningRun]
    depth_wall0: list[LearningRun]

    # ---------------------------------------------------------------------------- what the chapter reads
    @property
    def t0(self) -> Target:
        """The first full-rank target (the ladders')."""
        return self.full_targets[0]

    @property
    def floors(self) -> dict[str, float]:
        r"""The rank floor :math:`F_r(\Sigma_1)` of each full-rank target."""
        return {t.name: rank_floor(t.Sigma, self.rank) for t in self.full_targets}

    @property
    def behind(self) -> list[tuple[str, LearningRun, Target, PairLosses]]:
        """Every network trained with attention from the rank-``rank`` start to a full-rank target, with its floor."""
        t0 = self.t0
        return (
            [(f"{n}", self.wall[n], t, self.null_wall[n]) for n, t in zip(self.wall, self.full_targets, strict=True)]
            + [
                (f"{t0.name}, N = {n}", run, t0, nl)
                for n, run, nl in zip(self.ladder_ns, self.ladder_wall, self.ladder_null_wall, strict=True)
            ]
            + [
                (f"{t0.name}, L = {L}", run, t0, self.null_wall[t0.name])
                for L, run in zip(self.depths, self.depth_wall, strict=True)
            ]
        )

    @property
    def deepest(self) -> tuple[str, LearningRun, Target, PairLosses]:
        """The network of :attr:`behind` with the lowest test loss relative to the lower edge of its wall's floor."""
        return min(self.behind, key=lambda row: row[1].test_loss / band(row[3])[0])

    @property
    def attention_free_wall_runs(self) -> list[LearningRun]:
        """Every network trained with :math:`V = 0` from the rank-``rank`` start (ensemble, ladder, depths)."""
        return [*self.wall0.values(), *self.ladder_wall0, *self.depth_wall0]

    def reached(self) -> dict[str, float]:
        """Same-rank targets with attention: mean test loss over the q99 of the target's own floor."""
        out = {f"full-rank target {n}": run.test_loss / band(self.null_full[n])[1] for n, run in self.runs.items()}
        out.update(
            {f"rank-{self.rank} target {n}": run.test_loss / band(self.null_low[n])[1] for n, run in self.low.items()}
        )
        return out

    def attention_free_reached(self) -> bool:
        """Every :math:`V = 0` network reaches its same-rank target (mean test loss below the floor's q99)."""
        return bool(
            all(run.test_loss < band(self.null_full[n])[1] for n, run in self.runs0.items())
            and all(run.test_loss < band(self.null_low[n])[1] for n, run in self.low0.items())
        )

    def ladder_reached(self) -> float:
        """The largest mean test loss over the q99 of its floor, full-rank start, over the N ladder."""
        return max(run.test_loss / band(nl)[1] for run, nl in zip(self.ladder_full, self.ladder_null_full, strict=True))

    def ladder_at_wall(self) -> bool:
        """Whether the :math:`V = 0` rank-``rank`` start ends inside its wall's floor at every N."""
        return bool(
            all(
                band(nl)[0] < run.test_loss < band(nl)[1]
                for run, nl in zip(self.ladder_wall0, self.ladder_null_wall, strict=True)
            )
        )

    def depths_ok(self) -> bool:
        """At every depth the full-rank start reaches the target and the :math:`V = 0` rank-``rank`` start stops at
        the wall."""
        t0 = self.t0.name
        lo, hi = band(self.null_wall[t0])
        return bool(
            all(run.test_loss < band(self.null_full[t0])[1] for run in self.depth_full)
            and all(lo < run.test_loss < hi for run in self.depth_wall0)
        )

    def depths_sides(self) -> Sides:
        """The traced sides of :meth:`depths_ok`: the depth ladder's networks against their floors."""
        t0 = self.t0.name
        return against([*self.depth_full, *self.depth_wall0], [self.null_full[t0], self.null_wall[t0]])

    def attention_free_sides(self) -> Sides:
        """The traced sides of :meth:`attention_free_reached`: the :math:`V = 0` networks against their floors."""
        return against([*self.runs0.values(), *self.low0.values()], [*self.null_full.values(), *self.null_low.values()])

    def attention_gap(self) -> dict[str, float]:
        """Same-rank targets: mean test loss with attention minus without."""
        gap = {n: round(self.runs[n].test_loss - self.runs0[n].test_loss, 4) for n in self.runs}
        gap.update({n: round(self.low[n].test_loss - self.low0[n].test_loss, 4) for n in self.low})
        return gap

    def least_slack(self) -> float:
        r"""The least :math:`\ell - F_r(\hat\Sigma_Y)` over every test pair of every :math:`V = 0` rank-``rank``-start
        network (:math:`\ge 0` by the exact floor)."""
        return min(float(np.min(run.test.slack)) for run in self.attention_free_wall_runs)

    def largest_thickness(self, *, seed: int) -> float:
        r"""The largest :math:`\sigma_{r+1}/\sigma_1` of those networks' outputs, one fresh cloud each (seed
        ``seed``)."""
        return max(
            off_subspace_ratio(output_tokens(run, run.training.n_tokens, seed=seed)[1], self.rank)
            for run in self.attention_free_wall_runs
        )

    def slack_slopes(self, *, n_boot: int, seed: int) -> tuple[SlackSlope, SlackSlope]:
        """The slack's log–log slope in N: of the :math:`V = 0` networks (seed ``seed``) and of the nearest
        rank-``rank`` Gaussian (``seed + 1``)."""
        return (
            slack_slope([run.test for run in self.ladder_wall0], n_boot=n_boot, seed=seed),
            slack_slope(self.ladder_null_wall, n_boot=n_boot, seed=seed + 1),
        )

    def energies(self, *, pieces: int) -> tuple[dict[str, EnergyComparison], dict[str, EnergyComparison]]:
        """Energies of the learned controls beside chapter 3's, per same-rank target, and behind the wall."""
        same = {
            t.name: energy_comparison(t, self.d, self.runs[t.name], self.runs0[t.name], pieces=pieces)
            for t in self.full_targets
        }
        same.update(
            {
                t.name: energy_comparison(t, self.rank, self.low[t.name], self.low0[t.name], pieces=pieces)
                for t in self.low_targets
            }
        )
        wall = {
            t.name: energy_comparison(t, self.rank, self.wall[t.name], self.wall0[t.name], pieces=pieces)
            for t in self.full_targets
        }
        return same, wall

    def escape(self, *, clouds: int, repeats: int, seed: int) -> Escape:
        r""":func:`gtbook.studies.learning.learned_clouds.mean_field_departure` of every network of :attr:`behind` (seed
        ``seed + i`` for the i-th)."""
        return Escape(
            [
                (
                    name,
                    run,
                    t,
                    nl,
                    mean_field_departure(run, t.mu, t.Sigma, clouds=clouds, repeats=repeats, seed=seed + i),
                )
                for i, (name, run, t, nl) in enumerate(self.behind)
            ],
            self.rank,
        )

    # ---------------------------------------------------------------------------- tables
    def table(self, test_repeats: int) -> list[dict[str, Any]]:
        """Every ensemble run: training and test losses, its floor's mean and band, :math:`F_r`, the z of the mean."""

        def row(group: str, name: str, run: LearningRun, null: PairLosses, floor: float) -> dict[str, Any]:
            lo, hi = band(null)
            return {
                "group": group,
                "target": name,
                "attention": run.training.attention,
                "final training loss (last 10)": round(float(np.mean(run.training.loss[-10:])), 4),
                "mean test loss": round(run.test_loss, 4),
                "noise floor mean": round(null.mean, 4),
                "q01": round(lo, 4),
                "q99": round(hi, 4),
                f"F_{self.rank}": round(floor, 4),
                "z of the mean": round(
                    float((run.test_loss - null.mean) / (np.std(null.losses, ddof=1) / np.sqrt(test_repeats))), 2
                ),
                "train s": round(run.seconds, 1),
            }

        out = []
        floors = self.floors
        for group, rs, nulls, fl in (
            ("full from full", (self.runs, self.runs0), self.null_full, None),
            (f"rank {self.rank} from rank {self.rank}", (self.low, self.low0), self.null_low, None),
            (f"full from rank {self.rank}", (self.wall, self.wall0), self.null_wall, floors),
        ):
            for name in rs[0]:
                for run in (rs[0][name], rs[1][name]):
                    out.append(row(group, name, run, nulls[name], 0.0 if fl is None else fl[name]))
        return out

    def depth_table(self) -> dict[str, dict[str, float]]:
        """Per depth: the three test losses and the energies of the full-rank start's controls."""
        r = self.rank
        return {
            f"L = {L}": {
                "full start": round(a.test_loss, 4),
                f"rank-{r} start, V = 0": round(b0.test_loss, 4),
                f"rank-{r} start, attention": round(b.test_loss, 4),
                "energy (A, b)": round(a.training.energy, 3),
                "energy (Gaussian velocity)": round(a.gaussian_energy, 3),
            }
            for L, a, b0, b in zip(self.depths, self.depth_full, self.depth_wall0, self.depth_wall, strict=True)
        }

    # ---------------------------------------------------------------------------- figures
    def training_figure(self) -> Any:
        """:func:`gtbook.studies.learning.figures.training_curves` for the first target."""
        n, r = self.t0.name, self.rank
        return figs.training_curves(
            {
                "full-rank start": self.runs[n],
                f"rank-{r} start, V = 0": self.wall0[n],
                f"rank-{r} start, attention": self.wall[n],
            },
            {
                "full-rank start": self.null_full[n],
                f"rank-{r} start, V = 0": self.null_wall[n],
                f"rank-{r} start, attention": self.null_wall[n],
            },
            self.floors[n],
        )

    def wall_clouds_figure(self, *, seed: int) -> Any:
        """:func:`gtbook.studies.learning.figures.wall_clouds` for the target of :attr:`deepest`: the :math:`V = 0`
        and full-rank outputs (seed ``seed + 4``), the deepest network's, a target sample (``seed + 3``)."""
        name, run, t, _ = self.deepest
        r, n = self.rank, self.n_tokens
        return figs.wall_clouds(
            t,
            {
                f"rank-{r} start, V = 0": output_tokens(self.wall0[t.name], n, seed=seed + 4)[1],
                "full-rank start": output_tokens(self.runs[t.name], n, seed=seed + 4)[1],
                f"rank-{r} start, attention ({name})": output_tokens(run, run.training.n_tokens, seed=seed + 4)[1],
            },
            gaussian_tokens(n, t.mu, t.Sigma, seed=seed + 3),
        )

    def ensemble_figure(self) -> Any:
        """:func:`gtbook.studies.learning.figures.ensemble_figure`."""
        fl = self.floors
        return figs.ensemble_figure(
            {
                "same rank (full)": [(n, self.runs[n], self.runs0[n], self.null_full[n], 0.0) for n in self.runs],
                f"same rank (rank {self.rank})": [
                    (n, self.low[n], self.low0[n], self.null_low[n], 0.0) for n in self.low
                ],
                "behind the wall": [(n, self.wall[n], self.wall0[n], self.null_wall[n], fl[n]) for n in self.wall],
            }
        )

    def slack_figure(self, slopes: tuple[SlackSlope, SlackSlope]) -> Any:
        """:func:`gtbook.studies.learning.figures.slack_figure`."""
        return figs.slack_figure(
            self.ladder_ns,
            self.ladder_full,
            self.ladder_null_full,
            self.ladder_wall0,
            self.ladder_null_wall,
            self.ladder_wall,
            self.floors[self.t0.name],
            *slopes,
        )

    def depth_figure(self, energies: dict[str, EnergyComparison]) -> Any:
        """:func:`gtbook.studies.learning.figures.depth_figure` with chapter 3's energies for the first target."""
        n = self.t0.name
        return figs.depth_figure(
            self.depths,
            self.depth_full,
            self.null_full[n],
            self.depth_wall0,
            self.null_wall[n],
            self.depth_wall,
            self.floors[n],
            energies[n].constructive,
            energies[n].min_energy,
        )

    def escape_figure(self, escape: Escape) -> Any:
        """:func:`gtbook.studies.learning.figures.escape_figure`: every attention network behind the wall, and the
        :math:`V = 0` ones."""
        n0 = self.t0.name
        return figs.escape_figure(
            [(m.kappa, run.test_loss / band(nl)[0], m.departed) for _, run, _, nl, m in escape.rows],
            [run.test_loss / band(self.null_wall[n])[0] for n, run in self.wall0.items()]
            + [run.test_loss / band(nl)[0] for run, nl in zip(self.ladder_wall0, self.ladder_null_wall, strict=True)]
            + [run.test_loss / band(self.null_wall[n0])[0] for run in self.depth_wall0],
        )

    def scaled_floor(self, scale: float, *, repeats: int, seed: int) -> PairLosses:
        r"""The first target's floor with the reachable law scaled: :math:`W_2^2` between N-samples of
        :math:`N(\mu_1, c\,\Sigma_1)` and of the target (:func:`gtbook.studies.learning.harness.null_losses`)."""
        t = self.t0
        return null_losses(t.mu, t.Sigma, n_tokens=self.n_tokens, rank=self.d, repeats=repeats, seed=seed, scale=scale)

    def bending_figure(self, bending: Thickness) -> Any:
        """:func:`gtbook.studies.learning.figures.bending_figure` against the deepest network's target's floor."""
        return figs.bending_figure(bending, self.floors[self.deepest[2].name])

    @staticmethod
    def energy_figure(energies: dict[str, EnergyComparison]) -> Any:
        """:func:`gtbook.studies.learning.figures.energy_figure` of the same-rank targets."""
        labels = list(energies)
        return figs.energy_figure(labels, [energies[n] for n in labels])

    def bending(self, escape: Escape, ns: Sequence[int], *, clouds: int, seed: int) -> Thickness:
        """:func:`gtbook.studies.learning.learned_clouds.thickness_against_n` of the deepest network of ``escape``."""
        _, run, t, *_ = escape.deepest
        return thickness_against_n(run, ns, clouds=clouds, seed=seed, target=t)

    def attended(self, escape: Escape, *, seed: int) -> np.ndarray:
        """:func:`gtbook.studies.learning.learned_clouds.attended_tokens` of the deepest network of ``escape``."""
        return attended_tokens(escape.deepest[1], seed=seed)


def train_grid(
    full_targets: Sequence[Target],
    low_targets: Sequence[Target],
    settings: TrainingSettings,
    *,
    d: int,
    rank: int,
    n_tokens: int,
    null_repeats: int,
    ladder_ns: Sequence[int],
    depths: Sequence[int],
    seed: int,
) -> LearningGrid:
    r"""Train (or read back from the disk cache) every network of the chapter and compute every noise floor (module
    docstring for the seeds).

    Returns
    -------
    LearningGrid
    """
    L0, r = settings.layers, int(rank)

    def rs(group: int, k: int, n: int = n_tokens, L: int = L0) -> int:
        return run_seed(seed, group, k, n, L)

    full, lowt = list(full_targets), list(low_targets)
    t0, k0 = full[0], 0

    def floor(t: Target, rk: int, n: int, s: int) -> PairLosses:
        return null_losses(t.mu, t.Sigma, n_tokens=n, rank=rk, repeats=null_repeats, seed=s)

    return LearningGrid(
        full_targets=full,
        low_targets=lowt,
        d=int(d),
        rank=r,
        n_tokens=int(n_tokens),
        runs={t.name: run_for(t, d, n_tokens, settings, seed=rs(1, k)) for k, t in enumerate(full)},
        runs0={t.name: run_for(t, d, n_tokens, settings, seed=rs(1, k), attention=False) for k, t in enumerate(full)},
        wall={t.name: run_for(t, r, n_tokens, settings, seed=rs(2, k)) for k, t in enumerate(full)},
        wall0={t.name: run_for(t, r, n_tokens, settings, seed=rs(2, k), attention=False) for k, t in enumerate(full)},
        low={t.name: run_for(t, r, n_tokens, settings, seed=rs(3, k)) for k, t in enumerate(lowt)},
        low0={t.name: run_for(t, r, n_tokens, settings, seed=rs(3, k), attention=False) for k, t in enumerate(lowt)},
        null_full={t.name: floor(t, d, n_tokens, seed + 50_000 + k) for k, t in enumerate(full)},
        null_wall={t.name: floor(t, r, n_tokens, seed + 60_000 + k) for k, t in enumerate(full)},
        null_low={t.name: floor(t, r, n_tokens, seed + 70_000 + k) for k, t in enumerate(lowt)},
        ladder_ns=list(ladder_ns),
        ladder_full=[run_for(t0, d, n, settings, seed=rs(1, k0, n)) for n in ladder_ns],
        ladder_wall=[run_for(t0, r, n, settings, seed=rs(2, k0, n)) for n in ladder_ns],
        ladder_wall0=[run_for(t0, r, n, settings, seed=rs(2, k0, n), attention=False) for n in ladder_ns],
        ladder_null_full=[
            floor(t0, d, n, seed + 50_000 + k0 if n == n_tokens else seed + 80_000 + n) for n in ladder_ns
        ],
        ladder_null_wall=[
            floor(t0, r, n, seed + 60_000 + k0 if n == n_tokens else seed + 90_000 + n) for n in ladder_ns
        ],
        depths=list(depths),
        depth_full=[run_for(t0, d, n_tokens, settings, seed=rs(1, k0, L=L), layers=L) for L in depths],
        depth_wall=[run_for(t0, r, n_tokens, settings, seed=rs(2, k0, L=L), layers=L) for L in depths],
        depth_wall0=[
            run_for(t0, r, n_tokens, settings, seed=rs(2, k0, L=L), layers=L, attention=False) for L in depths
        ],
    )
