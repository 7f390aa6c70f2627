r"""Every draw an ensemble's generator made, kept or not, and why: the census behind chapter 1's ensembles.

:func:`gtbook.studies.invariance.ensemble.general_draws` keeps the first n draws of
:func:`~gtbook.studies.invariance.ensemble.general_draw` whose moment ODE completes on :math:`[0, T]` with the
sampling strength :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)` below a cap along the way. Both
conditions are properties of the layer and its Gaussian input, decided before any token moves; neither looks
at the outcome of a claim. ``draw_census`` replays the same seeded generator, classifies every draw it
makes (kept, the moment ODE did not complete, :math:`\kappa` reached the cap), and checks that the draws it
keeps are the ones ``general_draws`` returned, so the census describes the ensemble the chapter used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gtbook.studies.invariance.ensemble import GeneralDraw, general_draw
from gtcore.attention import max_sampling_strength
from gtcore.moments import integrate_moments
from gtcore.stats.inference import wilson_interval
from gtcore.status import Vocabulary

__all__ = ["DrawCensus", "DrawFate", "draw_census"]


class DrawFate(Vocabulary):
    """What became of one draw of the generator."""

    KEPT = "kept"
    NOT_COMPLETED = "moment ODE did not complete"
    ABOVE_CAP = "kappa reached the cap"


@dataclass(frozen=True)
class DrawCensus:
    r"""Every draw of one ensemble's generator, in order.

    Attributes
    ----------
    fates : tuple of DrawFate
    kappas : (tries,) array
        The largest :math:`\kappa` along each draw's moment ODE (``inf`` where it did not complete).
    cap : float
    """

    fates: tuple[DrawFate, ...]
    kappas: np.ndarray
    cap: float

    @property
    def tries(self) -> int:
        """How many draws the generator made."""
        return len(self.fates)

    def count(self, fate: DrawFate) -> int:
        """How many draws met ``fate``."""
        return sum(f is fate for f in self.fates)

    @property
    def kept_fraction(self) -> tuple[float, float, float]:
        """The fraction kept and its 95% Wilson interval."""
        k = self.count(DrawFate.KEPT)
        lo, hi = wilson_interval(k, self.tries)
        return k / self.tries, lo, hi

    def table(self) -> dict[str, object]:
        """Counts per fate, the kept fraction with its interval, the largest kappa of a rejected draw."""
        frac, lo, hi = self.kept_fraction
        rejected = self.kappas[[f is not DrawFate.KEPT for f in self.fates]]
        return {
            "draws made": self.tries,
            **{f.value: self.count(f) for f in DrawFate},
            "kept fraction (95% Wilson)": (round(frac, 3), round(lo, 3), round(hi, 3)),
            "kappa of the rejected draws": [round(float(k), 3) for k in rejected],
        }

    def __repr__(self) -> str:
        return (
            f"DrawCensus({self.tries} draws: {self.count(DrawFate.KEPT)} kept, "
            f"{self.count(DrawFate.ABOVE_CAP)} above the cap {self.cap:g}, "
            f"{self.count(DrawFate.NOT_COMPLETED)} not completed)"
        )


def draw_census(
    kept: Sequence[GeneralDraw], n: int, d: int, *, T: float, seed: int, kappa: float = 0.25, kappa_cap: float = 0.45
) -> DrawCensus:
    r"""Replay :func:`~gtbook.studies.invariance.ensemble.general_draws` (same arguments) and classify every draw.

    Parameters
    ----------
    kept : sequence of GeneralDraw
        What ``general_draws(n, d, T=T, seed=seed, kappa=kappa, kappa_cap=kappa_cap)`` returned.
    n, d : int
    T : float
    seed : int
    kappa, kappa_cap : float

    Returns
    -------
    DrawCensus

    Raises
    ------
    ValueError
        When the replay keeps other draws than ``kept`` (the generator changed: the census would describe
        another ensemble).
    """
    rng = np.random.default_rng(seed)
    fates: list[DrawFate] = []
    kappas: list[float] = []
    mine: list[np.ndarray] = []
    while len(mine) < int(n):
        ctl, mu0, S0 = general_draw(d, rng, kappa=kappa)
        ode = integrate_moments(mu0, S0, ctl, (0.0, float(T)), t_eval=np.linspace(0.0, float(T), 21))
        if ode.status != "completed":
            fates.append(DrawFate.NOT_COMPLETED)
            kappas.append(float("inf"))
            continue
        k = float(max_sampling_strength(ctl, ode.t, ode.Sigma))
        kappas.append(k)
        if k < kappa_cap:
            fates.append(DrawFate.KEPT)
            mine.append(mu0)
        else:
            fates.append(DrawFate.ABOVE_CAP)
        if len(fates) > 10_000:
            raise ValueError(f"draw_census: fewer than {n} draws kept in 10000 tries")
    if len(kept) != len(mine) or any(not np.array_equal(a, dr.mu0) for a, dr in zip(mine, kept, strict=True)):
        raise ValueError(
            "draw_census: the replay keeps other draws than the ensemble given (the generator "
            "general_draws changed); the census would describe another ensemble"
        )
    return DrawCensus(tuple(fates), np.array(kappas), float(kappa_cap))
