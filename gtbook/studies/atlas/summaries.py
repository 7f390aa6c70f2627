r"""Sections (a) and (c) of chapter 8, and the checks of the lanes against closed forms, as results with their
tables, figures and claim scopes.

* :func:`peer_study`: the peers' rank experiment (:func:`~gtbook.studies.atlas.study.peer_comparison`) with the
  numbers the chapter reports;
* :func:`closed_form_checks`: the lane verdicts against :func:`gtcore.stability.classify` and the lanes' pole
  times against :func:`gtcore.riccati.blowup_time` on the one-head dot-product draws with :math:`V = vI`;
* :func:`map_study`: the wider regime map (:mod:`~gtbook.studies.atlas.maps`) with chapter 4's theory on its
  :math:`\varepsilon = \beta = 0` frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtbook.studies.atlas.ensembles import Draw, draw_controls, peer_draws
from gtbook.studies.atlas.maps import MAP_B0, MAP_SIGMA0, AtlasMap, assemble_map, map_draws
from gtbook.studies.atlas.outcomes import DECIDED
from gtbook.studies.atlas.study import PeerComparison, classify_agreement, peer_comparison, pole_time_errors
from gtbook.studies.atlas.sweep import SweepResult, run_sweep
from gtbook.studies.scoping import layer_scope
from gtcore.controls import Controls

__all__ = ["PEER_FAMILY", "ClosedFormChecks", "MapStudy", "PeerStudy", "closed_form_checks", "map_study", "peer_study"]

#: the peers' experiment is a special family inside the classes
PEER_FAMILY = "K = -Q, Q of floor(d/2) rows (the peers' experiment)"
#: chapter 4's plane, widened
MAP_FAMILY = "A = aI + 0.7J, V = v(I + eps E), B = B0 + beta J, Sigma0 of chapter 4"


def _is_scalar_v(ctl: Controls) -> bool:
    return bool(np.allclose(ctl.V[0], ctl.V[0, 0, 0] * np.eye(ctl.d), rtol=0, atol=1e-14))


@dataclass
class PeerStudy:
    """The peers' experiment, exact against their scheme, with the chapter's numbers.

    Attributes
    ----------
    comparison : the :class:`~gtbook.studies.atlas.study.PeerComparison`
    draws : the draws
    off_rank : V = I draws (softmax and L2) whose decided rank is not ceil(d/2)
    modal : whether the scheme's most frequent rank with V = I is ceil(d/2) in every group and setting
    """

    comparison: PeerComparison
    draws: list[Draw]
    off_rank: int
    modal: bool

    def table(self) -> str:
        return self.comparison.markdown()

    def figure(self, ds: Sequence[int]):
        """The rank histograms, exact against the scheme's settings."""
        from gtbook.studies.atlas.figures import rank_histograms

        return rank_histograms(self.comparison.rows, ds)

    def miscounts(self, setting: str) -> int:
        return int(sum(r.schemes[setting]["miscount"] for r in self.comparison.rows))

    @property
    def undecided(self) -> int:
        return int(sum(r.undecided for r in self.comparison.rows))

    @property
    def total(self) -> int:
        return int(sum(r.exact.sum() + r.undecided for r in self.comparison.rows))

    def scope(self, *, variant: str | None = None, attention: Sequence[str] | None = None) -> dict[str, Any]:
        """The moment-ODE scope of the draws of one V ("identity", "wishart"; None: both) and attention types."""
        sel = [
            dr
            for dr in self.draws
            if (variant is None or dr.variant == variant) and (attention is None or dr.attention in attention)
        ]
        return layer_scope([draw_controls(dr)[0] for dr in sel], system="moment ODE", family=PEER_FAMILY)

    def __repr__(self) -> str:
        return (
            f"PeerStudy({len(self.draws)} draws; off rank {self.off_rank}, modal {self.modal}, miscounted "
            f"{self.comparison.total('miscount')})"
        )


def peer_study(ds: Sequence[int], n: int, *, seed: int) -> PeerStudy:
    """The peers' experiment on ``n`` draws per (attention, V, d) (:func:`~gtbook.studies.atlas.ensembles.peer_draws`).

    Parameters
    ----------
    ds : sequence of int
    n : int
    seed : int

    Returns
    -------
    PeerStudy
    """
    draws = peer_draws(ds, n, seed=seed)
    peer = peer_comparison(draws)
    ident = [r for r in peer.rows if r.variant == "identity"]
    off_rank = sum(int(r.exact.sum() - r.exact[int(np.ceil(r.d / 2))]) for r in ident)
    modal = all(int(np.argmax(s["hist"])) == int(np.ceil(r.d / 2)) for r in ident for s in r.schemes.values())
    return PeerStudy(peer, draws, off_rank, bool(modal))


@dataclass
class ClosedFormChecks:
    """The lanes against the closed forms on the one-head dot-product ensemble draws with V = vI.

    Attributes
    ----------
    agree, compared : draws where the lanes agree with :func:`gtcore.stability.classify`'s closed-form verdict,
        and draws it decides by its closed form
    disagreements : the others (draw, classify's verdict, the lanes')
    pole_errors : relative gaps between the lanes' pole times and the closed-form :math:`t^*`
    layers : the one-head dot-product V = vI ensemble draws' layers (the draws both checks look at)
    """

    agree: int
    compared: int
    disagreements: list[dict]
    pole_errors: np.ndarray
    layers: list[Controls]

    @property
    def contradictions(self) -> list[dict]:
        """Disagreements where the lanes gave a verdict (one of the five decided outcomes): a contradiction,
        not an abstention."""
        return [row for row in self.disagreements if row["lanes"] in DECIDED]

    def scope(self) -> dict[str, Any]:
        return layer_scope(self.layers, system="moment ODE")

    def __repr__(self) -> str:
        return (
            f"ClosedFormChecks({self.agree}/{self.compared} agree, {len(self.contradictions)} contradictions, "
            f"{self.pole_errors.size} pole times)"
        )


def closed_form_checks(sweep: SweepResult, draws: Sequence[Draw]) -> ClosedFormChecks:
    """:func:`~gtbook.studies.atlas.study.classify_agreement` and :func:`~gtbook.studies.atlas.study.pole_time_errors`
    on ``draws`` (the ensemble draws of ``sweep``).

    Parameters
    ----------
    sweep : SweepResult
    draws : sequence of Draw

    Returns
    -------
    ClosedFormChecks
    """
    agree, compared, dis = classify_agreement(sweep, draws)
    layers = [
        c for c in (draw_controls(dr)[0] for dr in draws if dr.attention == "dot") if c.heads == 1 and _is_scalar_v(c)
    ]
    return ClosedFormChecks(agree, compared, dis, pole_time_errors(sweep, draws), layers)


@dataclass
class MapStudy:
    r"""The wider regime map and chapter 4's theory on its :math:`\varepsilon = \beta = 0` frame.

    Attributes
    ----------
    atlas : the :class:`~gtbook.studies.atlas.maps.AtlasMap`
    theory : (len(v), len(a)) the verdicts of :func:`gtcore.stability.classify` at :math:`\varepsilon = 0`, in the
        lanes' words
    same_beta : the fraction of points whose outcome at :math:`\varepsilon = 0` is the same for the first and the
        last :math:`\beta`
    agree : the fraction of points of the :math:`\varepsilon = \beta = 0` frame where the lanes agree with ``theory``
    """

    atlas: AtlasMap
    theory: np.ndarray
    same_beta: float
    agree: float

    def explorer(self):
        """The offline regime explorer (sliders for eps and beta)."""
        from gtbook.studies.atlas.explorer import regime_explorer

        return regime_explorer(
            self.atlas,
            caption="Regime explorer over (a, v) for V = v(I + eps E), B = B0 + beta J",
            alt="A regime map over a (horizontal) and v (vertical) with two sliders, for the anisotropy eps of V and "
            "the skew part beta of B; coloured cells mark equilibrium, collapse, blow-up, exponential growth and "
            "other.",
        )

    def figure(self):
        """Static maps: V = vI, and the largest eps without and with the skew part of B."""
        from gtbook.studies.atlas.figures import map_panels

        e, b = len(self.atlas.eps) - 1, len(self.atlas.beta) - 1
        return map_panels(self.atlas, [(0, 0), (e, 0), (e, b)])

    def scope(self) -> dict[str, Any]:
        """The moment-ODE scope of the eps = 0 frames (where the claims look)."""
        from gtbook.studies.atlas.maps import map_controls

        layers = [map_controls(dr)[0] for dr in map_draws(self.atlas.a, self.atlas.v, [0.0], list(self.atlas.beta))]
        return layer_scope(layers, system="moment ODE", family=MAP_FAMILY)

    def __repr__(self) -> str:
        return (
            f"MapStudy({self.atlas!r}; same for every beta {self.same_beta:.3f}, agrees with theory {self.agree:.3f})"
        )


def map_study(
    a_range: Sequence[float],
    v_range: Sequence[float],
    n: int,
    eps: Sequence[float],
    beta: Sequence[float],
    *,
    out: Any = None,
    lanes: int = 128,
    horizon: float = 100.0,
    scheduler: str | None = None,
    workers: int = 2,
) -> MapStudy:
    r"""Sweep the map over an ``n`` by ``n`` grid of :math:`(a, v)` per :math:`(\varepsilon, \beta)`, and compare the
    :math:`\varepsilon = \beta = 0` frame with :func:`gtcore.stability.classify`.

    Parameters
    ----------
    a_range, v_range : (low, high)
    n : int
        Grid points per axis.
    eps, beta : sequences of float
        The anisotropies of V and the skew parts of B (the first of each is 0 for the checks).
    out, lanes, horizon, scheduler, workers
        Passed to :func:`~gtbook.studies.atlas.sweep.run_sweep`.

    Returns
    -------
    MapStudy
    """
    from gtbook.studies.stability.harness import rotating_controls
    from gtcore.stability import classify

    a_grid = np.linspace(float(a_range[0]), float(a_range[1]), n)
    v_grid = np.linspace(float(v_range[0]), float(v_range[1]), n)
    sweep = run_sweep(
        map_draws(a_grid, v_grid, eps, beta), out, lanes=lanes, horizon=horizon, scheduler=scheduler, workers=workers
    )
    atlas = assemble_map(sweep, a_grid, v_grid, eps, beta)
    same_beta = float(np.mean(atlas.outcome[0, 0] == atlas.outcome[0, -1]))
    theory = np.array(
        [
            [
                classify(rotating_controls(a, v, MAP_B0, omega=0.7), MAP_SIGMA0, t_max=2 * horizon).verdict
                for a in a_grid
            ]
            for v in v_grid
        ]
    )
    names = {"converges": "equilibrium", "collapses to 0": "collapse to 0", "blows up": "finite-time blow-up"}
    theory = np.vectorize(lambda x: names.get(x, "other"))(theory)
    lanes_map = np.where(np.isin(atlas.outcome[0, 0], DECIDED), atlas.outcome[0, 0], "other")  # abstentions: other
    return MapStudy(atlas, theory, same_beta, float(np.mean(theory == lanes_map)))
