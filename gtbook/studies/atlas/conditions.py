r"""Section (b) of chapter 8: ensembles over the paper's sign conditions, every draw counted.

* :func:`condition_study`: the condition ensembles and the targeted draws (:mod:`~gtbook.studies.atlas.ensembles`)
  swept by :func:`~gtbook.studies.atlas.sweep.run_sweep`; the regime fractions of the ensembles, and for each
  condition (stabilising, destabilising) and each reading (:math:`V_h = v_hI`; general :math:`V`) every
  dot-product draw that meets it, how many are in the predicted regime, the fraction with its Wilson 95 %
  interval (``gtbook.studies.atlas.tables.wilson_interval``), and the counterexamples;
* :func:`confirm_counterexamples`: each counterexample integrated again, alone, by
  :func:`gtcore.moments.integrate_moments` (scipy's DOP853: a path independent of the lanes) to :math:`4T`, with
  the trajectory of :math:`\lambda_{\min}/\lambda_{\max}` for the figure;
* :func:`finite_n_study`: token clouds of a few draws per attention type against the draws' moment ODE.

No draw is dropped on its outcome: a draw enters a condition's count when it meets the condition (a property
of its parameters), whatever it then does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.atlas.ensembles import ATTENTIONS, Draw, draw_controls, ensemble_draws, targeted_draws
from gtbook.studies.atlas.outcomes import DECIDED
from gtbook.studies.atlas.study import FiniteNCheck, finite_n_checks
from gtbook.studies.atlas.sweep import SweepResult, run_sweep
from gtbook.studies.atlas.tables import Fractions, counterexamples, regime_fractions, wilson_interval
from gtbook.studies.scoping import layer_scope
from gtbook.studies.traced import Sides, merge
from gtcore.controls import Controls

__all__ = [
    "CONDITIONS",
    "CONFIRM_RATIO",
    "ConditionCount",
    "ConditionStudy",
    "Confirmation",
    "Counterexamples",
    "FiniteNStudy",
    "condition_study",
    "confirm_counterexamples",
    "finite_n_study",
]

#: condition -> (its name, the regime it predicts)
CONDITIONS = {"stab": ("stabilising", "equilibrium"), "blow": ("destabilising", "finite-time blow-up")}
#: a counterexample is confirmed when lambda_min(Sigma(4T)) < CONFIRM_RATIO lambda_max(Sigma(4T)) in the independent
#: integration (a positive-definite equilibrium keeps this ratio fixed, away from 0)
CONFIRM_RATIO = 1e-4
#: the dot-product attention types of the condition claims (one and two heads)
DOT_TYPES = ("dot", "multihead")


@dataclass
class ConditionCount:
    """Every dot-product draw (one or two heads) that meets one condition under one reading of V.

    Attributes
    ----------
    condition : "stab" or "blow"
    scalar : True for the draws with every V_h = v_h I, False for the others (general V)
    rows : the sweep's rows of the draws that meet it (every one, whatever its outcome)
    bad : the rows whose outcome is not the predicted one (the counterexamples)
    layers : the draws' layers, in the order of ``rows``
    """

    condition: str
    scalar: bool
    rows: list[dict]
    bad: list[dict]
    layers: list[Controls]

    @property
    def name(self) -> str:
        return CONDITIONS[self.condition][0]

    @property
    def predicted(self) -> str:
        return CONDITIONS[self.condition][1]

    @property
    def reading(self) -> str:
        """ "V = vI" or "general V"."""
        return "V = vI" if self.scalar else "general V"

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def in_regime(self) -> int:
        return self.n - len(self.bad)

    @property
    def fraction(self) -> float:
        """The fraction of the draws in the predicted regime (NaN when no draw meets the condition)."""
        return self.in_regime / self.n if self.n else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson's 95 % interval of :attr:`fraction` ((0, 1) when no draw meets the condition)."""
        return wilson_interval(self.in_regime, self.n) if self.n else (0.0, 1.0)

    def scope(self, system: str = "moment ODE", *, counterexamples: bool = False) -> dict[str, Any]:
        """The claim scope that covers every counted draw, or only the counterexamples
        (:func:`gtbook.studies.scoping.layer_scope`)."""
        bad = {r["key"] for r in self.bad}
        layers = [c for r, c in zip(self.rows, self.layers, strict=True) if not counterexamples or r["key"] in bad]
        if not layers:
            return {"system": system, "V": "scalar" if self.scalar else "general", "heads": 2}
        return layer_scope(layers, system=system)

    def __repr__(self) -> str:
        lo, hi = self.interval
        return (
            f"ConditionCount({self.name}, {self.reading}: {self.in_regime}/{self.n} {self.predicted}, "
            f"Wilson [{lo:.2f}, {hi:.2f}])"
        )


@dataclass
class ConditionStudy:
    """The condition ensembles and the targeted draws, swept.

    Attributes
    ----------
    ds : the dimensions
    draws : the ensemble draws, then the targeted ones (the sweep's row order)
    n_ensemble : how many of ``draws`` are ensemble draws
    full : the sweep of every draw
    fractions : the ensembles' regime fractions (targeted draws excluded: they are built to meet a condition)
    counts : (condition, scalar) -> ConditionCount, over ensemble and targeted draws
    """

    ds: list[int]
    draws: list[Draw]
    n_ensemble: int
    full: SweepResult
    fractions: Fractions
    counts: dict[tuple[str, bool], ConditionCount] = field(default_factory=dict)

    @property
    def sweep(self) -> SweepResult:
        """The ensemble draws' rows only."""
        f = self.full
        return SweepResult(f.table.slice(0, self.n_ensemble), f.computed, f.reused, f.seconds, f.where)

    @property
    def ensemble(self) -> list[Draw]:
        return self.draws[: self.n_ensemble]

    def count(self, condition: str, scalar: bool) -> ConditionCount:
        return self.counts[(condition, scalar)]

    def draw(self, key: str) -> Draw:
        return next(dr for dr in self.draws if dr.key == key)

    def table(self) -> str:
        """Markdown: per condition and reading of V, the draws that meet it, the fraction in the predicted
        regime with its Wilson 95 % interval, and the counterexamples."""
        lines = [
            "| condition | V | draws | in the predicted regime | fraction [95 % interval] | counterexamples |",
            "|---|---|---|---|---|---|",
        ]
        for c in self.counts.values():
            lo, hi = c.interval
            bad = ", ".join(f"`{r['key']}` ({r['outcome']})" for r in c.bad) or "none"
            frac = f"{c.fraction:.2f} [{lo:.2f}, {hi:.2f}]" if c.n else "no draw"
            lines.append(
                f"| {c.name} (predicts {c.predicted}) | {c.reading} | {c.n} | {c.in_regime} | {frac} | {bad} |"
            )
        return "\n".join(lines)

    def fractions_figure(self):
        """Per attention type, the fraction of each outcome against d, with Wilson 95 % intervals."""
        from gtbook.studies.atlas.figures import fractions_figure

        return fractions_figure(self.fractions)

    def blowup_times(self) -> dict[int, np.ndarray]:
        """The dot product's (one and two heads) blow-up times of the ensemble draws, per d."""
        s = self.sweep
        att, out, dd, tp = s.column("attention"), s.column("outcome"), s.column("d"), s.column("t_pole")
        sel = np.isin(att, DOT_TYPES) & (out == "finite-time blow-up")
        return {d: tp[sel & (dd == d)] for d in self.ds}

    def blowup_times_figure(self):
        """The dot product's blow-up times per d (:meth:`blowup_times`), one box each."""
        from gtbook.studies.atlas.figures import blowup_times_figure

        return blowup_times_figure(self.blowup_times())

    def outcome_count(self, attentions: Sequence[str], outcome: str) -> int:
        """How many ensemble draws of these attention types ended in ``outcome`` (``"undecided"``: in none of
        the five decided outcomes, :data:`gtbook.studies.atlas.outcomes.DECIDED`)."""
        s = self.sweep
        ended = s.column("outcome")
        hit = ~np.isin(ended, DECIDED) if outcome == "undecided" else ended == outcome
        return int(np.sum(np.isin(s.column("attention"), list(attentions)) & hit))

    def scope(self, attentions: Sequence[str], system: str = "moment ODE") -> dict[str, Any]:
        """The scope of every ensemble draw of these attention types."""
        return layer_scope([draw_controls(dr)[0] for dr in self.ensemble if dr.attention in attentions], system=system)

    def __repr__(self) -> str:
        return f"ConditionStudy({self.full!r}; " + "; ".join(repr(c) for c in self.counts.values()) + ")"


def condition_study(
    ds: Sequence[int],
    n: int,
    targeted: int,
    *,
    seed: int,
    out: Any = None,
    lanes: int = 128,
    horizon: float = 100.0,
    scheduler: str | None = None,
    workers: int = 2,
) -> ConditionStudy:
    r"""Sweep the condition ensembles and the targeted draws, and count every draw that meets a condition.

    Parameters
    ----------
    ds : sequence of int
        The dimensions.
    n : int
        Ensemble draws per (attention type, d) (:func:`~gtbook.studies.atlas.ensembles.ensemble_draws`).
    targeted : int
        Targeted draws per (condition, dot-product type, d) (:func:`~gtbook.studies.atlas.ensembles.targeted_draws`).
    seed : int
    out, lanes, horizon, scheduler, workers
        Passed to :func:`~gtbook.studies.atlas.sweep.run_sweep`.

    Returns
    -------
    ConditionStudy
    """
    ds = [int(d) for d in ds]
    ens = ensemble_draws(ds, n, seed=seed)
    tgt = targeted_draws(ds, targeted, seed=seed)
    full = run_sweep(ens + tgt, out, lanes=lanes, horizon=horizon, scheduler=scheduler, workers=workers)
    study = ConditionStudy(
        ds,
        ens + tgt,
        len(ens),
        full,
        regime_fractions(SweepResult(full.table.slice(0, len(ens)), 0, 0, 0.0, full.where), list(ATTENTIONS), ds),
    )
    keyed = {dr.key: dr for dr in ens + tgt}
    for cond, (_, predicted) in CONDITIONS.items():
        for scalar in (True, False):
            counted, bad = counterexamples(full, cond, predicted, attentions=list(DOT_TYPES), scalar=scalar)
            cols = full.table.to_pydict()
            rows = [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
            rows = [r for r in rows if r[cond] and r["attention"] in DOT_TYPES and r["scalar_V"] == scalar]
            if len(rows) != counted:  # the same selection as counterexamples(): a guard, not a filter
                raise RuntimeError(f"condition {cond!r}: {len(rows)} rows against {counted} counted")
            study.counts[(cond, scalar)] = ConditionCount(
                cond, scalar, rows, bad, [draw_controls(keyed[r["key"]])[0] for r in rows]
            )
    return study


@dataclass
class Confirmation:
    r"""One draw integrated alone by :func:`gtcore.moments.integrate_moments` to :math:`4T`.

    Attributes
    ----------
    key : the draw
    d : its dimension
    kinds : its value and bilinear kinds ("wishart+wishart / wishart+skew")
    v_signs : the definiteness of each head's V ("negative", "positive" or "indefinite"), in head order
    t : (n,) times
    ratio : (n,) :math:`\lambda_{\min}(\Sigma(t))/\lambda_{\max}(\Sigma(t))`
    lam_min, lam_max : the extreme eigenvalues at :math:`4T`
    status : the integrator's status
    confirmed : the integration completed and :math:`\lambda_{\min} < ` :data:`CONFIRM_RATIO` :math:`\lambda_{\max}`
        at :math:`4T`
    """

    key: str
    d: int
    kinds: str
    v_signs: tuple[str, ...]
    t: np.ndarray
    ratio: np.ndarray
    lam_min: float
    lam_max: float
    status: str
    confirmed: bool


@dataclass
class Counterexamples:
    """The counterexamples to one condition, confirmed independently, and reference draws of the V = vI reading.

    Attributes
    ----------
    items : one Confirmation per counterexample
    references : the same integration of the first V = vI draws that meet the condition (for the figure)
    horizon : T
    """

    items: list[Confirmation]
    references: list[Confirmation]
    horizon: float

    @property
    def all_confirmed(self) -> bool:
        return bool(all(c.confirmed for c in self.items))

    def table(self) -> str:
        """Markdown: each counterexample, its kinds, its eigenvalues at 4T and whether it is confirmed."""
        lines = [
            "| draw | d | V / B kinds | V definite | λ_min(4T) | λ_max(4T) | confirmed |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| `{c.key}` | {c.d} | {c.kinds} | {', '.join(c.v_signs)} | {c.lam_min:.2e} | {c.lam_max:.3g} | "
            f"{'yes' if c.confirmed else 'NO'} |"
            for c in self.items
        ]
        return "\n".join(lines)

    def figure(self):
        r""":math:`\lambda_{\min}/\lambda_{\max}` of :math:`\Sigma(t)` from the independent integration: every
        counterexample (solid) and the reference draws with :math:`V = vI` (dashed), with the confirmation
        threshold (dotted); ratios below :math:`10^{-16}` (round-off) are drawn at :math:`10^{-16}`."""
        import matplotlib as mpl

        from gtbook.studies.style import COLORS, figure

        fig, ax = figure(1, 1, width=5.6, height=2.9)
        floor = 1e-16
        for c in self.references:
            ax.plot(
                c.t[1:],
                np.maximum(c.ratio[1:], floor),
                ls="--",
                lw=1.2,
                color=COLORS["floor"],
                label=f"V = vI: {c.key}",
            )
        cmap = mpl.colormaps["plasma"]
        for i, c in enumerate(self.items):
            ax.plot(
                c.t[1:],
                np.maximum(c.ratio[1:], floor),
                lw=1.5,
                color=cmap(0.85 * i / max(len(self.items) - 1, 1)),
                label=f"general V: {c.key}",
            )
        ax.axhline(CONFIRM_RATIO, color="black", ls=":", lw=1.0, label="confirmation threshold")
        for t, name in ((self.horizon, "T"), (2 * self.horizon, "2T")):
            ax.axvline(t, color=COLORS["floor"], lw=0.6)
            ax.text(t, 0.5, f" {name}", fontsize=7, color=COLORS["floor"], va="top")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(floor / 3, 2.0)
        ax.set_xlabel("$t$")
        ax.set_ylabel(r"$\lambda_{\min}(\Sigma)/\lambda_{\max}(\Sigma)$")
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return fig

    def __repr__(self) -> str:
        return (
            f"Counterexamples({sum(c.confirmed for c in self.items)} of {len(self.items)} confirmed, "
            f"{len(self.references)} references)"
        )


def _definite(M: np.ndarray) -> str:
    w = np.linalg.eigvalsh(0.5 * (M + M.T))
    return "positive" if w[0] > 0 else "negative" if w[-1] < 0 else "indefinite"


def _integrate(dr: Draw, horizon: float, n_grid: int) -> Confirmation:
    from gtcore.moments import integrate_moments

    ctl, S0, info = draw_controls(dr)
    t = np.concatenate([[0.0], np.geomspace(1e-2, 4 * horizon, n_grid - 1)])
    tr = integrate_moments(np.zeros(ctl.d), S0, ctl, (0.0, 4 * horizon), t_eval=t, atol=1e-16, max_nfev=3_000_000)
    lam = np.linalg.eigvalsh(tr.Sigma)
    ok = tr.status == "completed" and lam[-1, 0] < CONFIRM_RATIO * lam[-1, -1]
    return Confirmation(
        dr.key,
        dr.d,
        f"{info['v_kind']} / {info['b_kind']}",
        tuple(_definite(V) for V in ctl.V),
        tr.t,
        lam[:, 0] / lam[:, -1],
        float(lam[-1, 0]),
        float(lam[-1, -1]),
        str(tr.status),
        bool(ok),
    )


def confirm_counterexamples(
    study: ConditionStudy, condition: str = "stab", *, horizon: float = 100.0, references: int = 3, n_grid: int = 401
) -> Counterexamples:
    r"""Integrate each general-V counterexample to ``condition`` again, alone, to :math:`4T` (module docstring).

    Parameters
    ----------
    study : ConditionStudy
    condition : str
        "stab" (the counterexamples end elsewhere than at a positive-definite equilibrium; confirmed by a
        vanishing :math:`\lambda_{\min}/\lambda_{\max}`).
    horizon : float
        The sweep's :math:`T`.
    references : int
        How many of the first V = vI draws that meet the condition to integrate too, for the figure.
    n_grid : int
        Output times on :math:`[0, 4T]`: 0, then geometrically spaced from :math:`10^{-2}` to :math:`4T`.

    Returns
    -------
    Counterexamples
    """
    if condition != "stab":
        raise ValueError(
            f"condition: only 'stab' counterexamples are confirmed by the eigenvalue ratio, got {condition!r}"
        )
    bad = study.count(condition, False).bad
    items = [_integrate(study.draw(r["key"]), horizon, n_grid) for r in bad]
    refs = [_integrate(study.draw(r["key"]), horizon, n_grid) for r in study.count(condition, True).rows[:references]]
    return Counterexamples(items, refs, float(horizon))


@dataclass
class FiniteNStudy:
    """Token clouds of a few ensemble draws per attention type against the draws' moment ODE.

    Attributes
    ----------
    checks : one :class:`~gtbook.studies.atlas.study.FiniteNCheck` per draw
    layers : draw key -> its layer
    """

    checks: list[FiniteNCheck]
    layers: dict[str, Controls]

    @property
    def informative(self) -> list[FiniteNCheck]:
        """The checks whose statistic sees the attention: the attention-free ODE is above the floor."""
        return [c for c in self.checks if c.D_off > c.floor]

    @property
    def worst(self) -> float:
        """The largest D over its floor, over every check."""
        return max(c.D / c.floor for c in self.checks)

    @property
    def sides(self) -> Sides:
        """The traced sides of :attr:`worst`: every check's, merged (:mod:`gtbook.studies.traced`)."""
        return merge(*(c.sides for c in self.checks))

    def scope(self) -> dict[str, Any]:
        """The tokens scope of the informative checks (where the check can tell the ODE from no attention)."""
        return layer_scope(
            [self.layers[c.draw] for c in self.informative] or list(self.layers.values()), system="tokens"
        )

    def table(self) -> str:
        """Markdown: per checked draw, its outcome, the time, D against its ODE and without attention, the floor."""
        lines = [
            "| draw | outcome | t | D | D without attention | floor | informative |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| `{c.draw}` | {c.outcome} | {c.t:.3g} | {c.D:.3g} | {c.D_off:.3g} | {c.floor:.3g} | "
            f"{'yes' if c.D_off > c.floor else 'no'} |"
            for c in self.checks
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"FiniteNStudy({len(self.checks)} draws, {len(self.informative)} informative, "
            f"worst D/floor {self.worst:.3g})"
        )


def finite_n_study(
    study: ConditionStudy, per_type: int, n_tokens: int, steps: int, repeats: int, *, seed: int
) -> FiniteNStudy:
    """:func:`~gtbook.studies.atlas.study.finite_n_checks` on the ensemble draws of ``study``.

    Parameters
    ----------
    study : ConditionStudy
    per_type, n_tokens, steps, repeats : int
        Draws per attention type, tokens, RK4 steps, samples of the floor.
    seed : int

    Returns
    -------
    FiniteNStudy
    """
    checks = finite_n_checks(study.sweep, study.ensemble, per_type, n_tokens, steps, repeats, seed=seed)
    return FiniteNStudy(checks, {c.draw: draw_controls(study.draw(c.draw))[0] for c in checks})
