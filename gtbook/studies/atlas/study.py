r"""The harness of chapter 8: the peer comparison, the checks against closed forms, finite-N verification."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gtbook.studies.atlas.ensembles import Draw, draw_controls
from gtbook.studies.atlas.peer import PEER_SETTINGS, PeerSetting, exact_ranks, projected_euler_lanes
from gtbook.studies.atlas.tables import PeerRow
from gtbook.studies.families.harness import moment_discrepancy, noise_floor, run_family
from gtbook.studies.traced import Sides, collect, predicted
from gtcore.attention import DotProduct
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.moments.batched import stack_controls
from gtcore.riccati import blowup_time
from gtcore.stability import classify

__all__ = [
    "FiniteNCheck",
    "PeerComparison",
    "classify_agreement",
    "finite_n_checks",
    "peer_comparison",
    "pole_time_errors",
]


@dataclass
class PeerComparison:
    """The peers' experiment, exact against their scheme.

    Attributes
    ----------
    rows : one :class:`~gtbook.studies.atlas.tables.PeerRow` per (attention, V, d)
    cf_disagreements : draws where the closed form applies and the doubling test finds another rank
    examples : up to 6 draws where a scheme setting counts another rank than the exact one, with both
        and the scheme's last eigenvalues
    """

    rows: list[PeerRow]
    cf_disagreements: int
    examples: list[dict]

    def markdown(self, settings: Sequence[PeerSetting] = PEER_SETTINGS) -> str:
        head = ["attention", "V", "d", "exact ranks"]
        for s in settings:
            head += [f"{s.name} (h={s.h:g}, tol={s.tol:g}) ranks", "miscounted", "not converged"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r.markdown_cells()) + " |" for r in self.rows]
        return "\n".join(lines)

    def total(self, what: str) -> int:
        return int(sum(s[what] for r in self.rows for s in r.schemes.values()))


def peer_comparison(draws: Sequence[Draw], settings: Sequence[PeerSetting] = PEER_SETTINGS) -> PeerComparison:
    """Exact ranks and the projected-Euler scheme on every (attention, V, d) group of peer draws."""
    groups: dict[tuple, list[Draw]] = {}
    for dr in draws:
        groups.setdefault((dr.attention, dr.variant, dr.d), []).append(dr)
    examples: list[dict] = []
    rows, cf_dis = [], 0
    for (att, var, d), group in sorted(groups.items()):
        ctls = [draw_controls(dr)[0] for dr in group]
        ex = exact_ranks(ctls, np.eye(d))
        cf = ex.method == "closed form"
        cf_dis += int(np.sum(cf & (ex.doubling_rank != ex.rank)))
        decided = ex.rank >= 0
        schemes = {}
        for s in settings:
            run = projected_euler_lanes(stack_controls(ctls), np.eye(d), s)
            wrong = decided & (run.rank != ex.rank)
            schemes[s.name] = {
                "hist": np.bincount(run.rank, minlength=d + 1),
                "miscount": int(wrong.sum()),
                "unconverged": int(np.sum(run.status != "converged")),
            }
            for i in np.flatnonzero(wrong)[:2]:
                if len(examples) < 6:
                    examples.append(
                        {
                            "draw": group[i].key,
                            "setting": s.name,
                            "exact": int(ex.rank[i]),
                            "scheme": int(run.rank[i]),
                            "status": str(run.status[i]),
                            "iterations": int(run.iterations[i]),
                            "eigenvalues": np.round(run.eigenvalues[i], 4).tolist(),
                        }
                    )
        rows.append(
            PeerRow(
                att,
                var,
                d,
                np.bincount(ex.rank[decided], minlength=d + 1),
                int(np.sum(~decided)),
                int(cf.sum()),
                schemes,
            )
        )
    return PeerComparison(rows, cf_dis, examples)


_VERDICT = {"converges": "equilibrium", "collapses to 0": "collapse to 0", "blows up": "finite-time blow-up"}


def classify_agreement(result, draws: Sequence[Draw]) -> tuple[int, int, list[dict]]:
    """The lane verdicts against :func:`gtcore.stability.classify` on the one-head dot draws with :math:`V = vI`.

    Only draws where ``classify`` decides from its closed form (method "closed form", verdict not
    "undetermined") count. Returns (agreements, draws compared, disagreements).
    """
    out = dict(zip(result.column("key"), result.column("outcome"), strict=True))
    agree, total, dis = 0, 0, []
    for dr in draws:
        if dr.attention != "dot":
            continue
        ctl, S0, _ = draw_controls(dr)
        if ctl.heads != 1 or not np.allclose(ctl.V[0], ctl.V[0, 0, 0] * np.eye(ctl.d), rtol=0, atol=1e-14):
            continue
        reg = classify(ctl, S0)
        if reg.method != "closed form" or reg.verdict not in _VERDICT:
            continue
        total += 1
        if _VERDICT[reg.verdict] == out[dr.key]:
            agree += 1
        else:
            dis.append({"draw": dr.key, "classify": reg.verdict, "lanes": out[dr.key]})
    return agree, total, dis


def pole_time_errors(result, draws: Sequence[Draw]) -> np.ndarray:
    """Relative gaps between the lanes' pole times and :func:`gtcore.riccati.blowup_time`'s closed form (one-head
    dot, :math:`V = vI`)."""
    tp = dict(zip(result.column("key"), result.column("t_pole"), strict=True))
    out = dict(zip(result.column("key"), result.column("outcome"), strict=True))
    errs = []
    for dr in draws:
        if dr.attention != "dot" or out[dr.key] != "finite-time blow-up":
            continue
        ctl, S0, _ = draw_controls(dr)
        if ctl.heads != 1 or not np.allclose(ctl.V[0], ctl.V[0, 0, 0] * np.eye(ctl.d), rtol=0, atol=1e-14):
            continue
        bt = blowup_time(S0, ctl)
        if bt.method.startswith("closed form") and math.isfinite(bt.t_star):
            errs.append(abs(tp[dr.key] - bt.t_star) / bt.t_star)
    return np.array(errs)


#: the finite-N check of a dot-product draw stops where the softmax weights' strength reaches this
KAPPA_CHECK = 0.25


def _check_time(ctl: Controls, S0: np.ndarray, t_max: float) -> float:
    r"""``t_max``, or for dot-product attention the first time on a grid of 50 where
    :math:`\kappa = \max_h\lambda_{\max}(B_h^\top\Sigma B_h\Sigma)` reaches :data:`KAPPA_CHECK` (the N-token
    average has finite variance only for :math:`\kappa < 1/2`: chapters 1 and 4), whichever is first."""
    if ctl.attention != "dot":
        return t_max
    grid = np.linspace(0.0, t_max, 51)
    ode = integrate_moments(np.zeros(ctl.d), S0, ctl, (0.0, t_max), t_eval=grid)
    for t, S in zip(ode.t, ode.Sigma, strict=True):
        if max(DotProduct().sampling_strength(S, B) for B in ctl.B) >= KAPPA_CHECK:
            return float(max(t, grid[1]))
    return t_max


@dataclass
class FiniteNCheck:
    """One draw followed by N tokens: the moment discrepancy against its ODE, the attention-free ODE, and the floor."""

    draw: str
    outcome: str
    t: float
    D: float
    D_off: float
    floor: float
    #: the traced sides of ``D`` against ``floor`` (:mod:`gtbook.studies.traced`): the tokens (observed); the moment
    #: ODE from their own moments and the floor, Gaussian samples and the statistic on them (predicted)
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)


def finite_n_checks(
    result,
    draws: Sequence[Draw],
    n_per_type: int,
    n_tokens: int,
    steps: int,
    repeats: int,
    *,
    seed: int = 0,
    t_check: float = 0.5,
) -> list[FiniteNCheck]:
    r"""``n_per_type`` draws per attention type, chosen with ``seed``: tokens against the moment ODE at a fixed time.

    The time is ``t_check``, or half the escape time when the lane escaped earlier, and for
    dot-product attention no later than where :math:`\kappa` reaches ``KAPPA_CHECK``
    (``_check_time``); Sinkhorn draws use half the tokens. The statistic is
    :func:`gtbook.studies.families.harness.moment_discrepancy`, the floor its 99th percentile for i.i.d.
    Gaussian tokens with the ODE's moments (:func:`~gtbook.studies.families.harness.noise_floor`), and the
    control the same tokens against the ODE without attention (:math:`A` only).
    """

    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many small steps: one thread each (a loaded machine makes more threads slower)
    try:
        with threadpool_limits(limits=1):
            return _finite_n_checks(result, draws, n_per_type, n_tokens, steps, repeats, seed, t_check)
    finally:
        torch.set_num_threads(threads)


def _finite_n_checks(result, draws, n_per_type, n_tokens, steps, repeats, seed, t_check):
    rng = np.random.default_rng(seed)
    t_end = dict(zip(result.column("key"), result.column("t_end"), strict=True))
    out = dict(zip(result.column("key"), result.column("outcome"), strict=True))
    checks = []
    for att in sorted({dr.attention for dr in draws}):
        pool = [dr for dr in draws if dr.attention == att]
        for k in rng.choice(len(pool), size=min(n_per_type, len(pool)), replace=False):
            dr = pool[int(k)]
            ctl, S0, _ = draw_controls(dr)
            t = _check_time(ctl, S0, min(t_check, 0.5 * t_end[dr.key]))
            n = n_tokens if att != "sinkhorn" else max(n_tokens // 2, 100)  # Sinkhorn scaling: N^2 per pass
            with collect() as sides:  # the attention-free ODE (the control) runs on neither side
                run = run_family(ctl, np.zeros(ctl.d), S0, t, n, steps, seed=seed + int(k), record=1)
                off = integrate_moments(run.ode.mu[0], run.ode.Sigma[0], Controls(A=ctl.A), (0.0, t))
                with predicted():
                    floor = noise_floor(run.ode.mu[-1], run.ode.Sigma[-1], n, repeats, seed=1000 + int(k))
            checks.append(
                FiniteNCheck(
                    dr.key,
                    out[dr.key],
                    t,
                    run.discrepancy,
                    moment_discrepancy(run.particles.mu[-1], run.particles.Sigma[-1], off.mu[-1], off.Sigma[-1]),
                    floor,
                    sides,
                )
            )
    return checks
