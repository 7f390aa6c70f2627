"""Figures of chapter 4's unselected ensembles and of mean steering on tokens."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.stability.ensembles import Ensemble, Outcome
from gtbook.studies.stability.steering import SteeringStudy
from gtbook.studies.style import COLORS, figure

#: one colour per outcome
OUTCOME_COLORS = {
    Outcome.EQUILIBRIUM: COLORS["target"],
    Outcome.LOWER_RANK: COLORS["particles"],
    Outcome.BLOWUP: COLORS["theory"],
    Outcome.UNDECIDED: COLORS["floor"],
}


def outcomes_figure(ensembles: Sequence[Ensemble]) -> plt.Figure:
    """Left: each ensemble's outcome fractions (stacked), with the Wilson 95 % interval of the predicted
    outcome. Middle: lambda_min / lambda_max along every lower-rank counterexample, the library's integration
    (lines) and the independent LSODA one (dots). Right: ||Sigma(t)|| of every blow-up counterexample, with the
    decimal Taylor integrator's pole (dotted)."""
    fig, (ax, bx, cx) = figure(3, width=4.2, height=3.1)
    labels = [f"{e.condition[:5]}., {e.kind}" for e in ensembles]
    y = np.arange(len(ensembles))[::-1]
    for yi, e in zip(y, ensembles, strict=True):
        left = 0.0
        for o in Outcome:
            f = e.fraction(o)[0]
            ax.barh(
                yi,
                f,
                left=left,
                color=OUTCOME_COLORS[o],
                edgecolor="white",
                height=0.7,
                label=o.value if yi == y[0] else None,
            )
            left += f
        f, lo, hi = e.fraction(e.predicted)
        edge = f if e.predicted is Outcome.EQUILIBRIUM else 1.0
        ax.errorbar(edge, yi, xerr=[[f - lo], [hi - f]], color="black", capsize=3, lw=1)
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of draws")
    ax.legend(loc="lower left", fontsize=7, bbox_to_anchor=(0.0, 1.0), ncol=2)
    for e in ensembles:
        for c in e.counterexamples:
            conf = e.confirmations.get(c.draw.index)
            if c.outcome is Outcome.LOWER_RANK:
                (line,) = bx.semilogy(c.t, np.clip(c.ratios, 1e-20, None), lw=1)
                if conf is not None and conf.t.size:
                    bx.semilogy(conf.t[::4], conf.ratios[::4], ".", color=line.get_color(), ms=4)
            elif c.outcome is Outcome.BLOWUP:
                n0 = c.norms[0]
                (line,) = cx.semilogy(c.t, c.norms / n0, "-", lw=1)
                if conf is not None and np.isfinite(conf.t_pole):
                    cx.axvline(conf.t_pole, color=line.get_color(), ls=":", lw=1)
    bx.axhline(1e-8, color=COLORS["floor"], ls="--", lw=1)
    bx.set_xlabel("t")
    bx.set_ylabel(r"$\lambda_{\min}/\lambda_{\max}$ of $\Sigma(t)$")
    bx.set_title("lower-rank limits (dots: LSODA)", fontsize=9)
    cx.set_xlabel("t")
    cx.set_ylabel(r"$\|\Sigma(t)\|_F / \|\Sigma_0\|_F$")
    cx.set_title("blow-ups (dotted: Taylor pole)", fontsize=9)
    return fig


def steering_figure(study: SteeringStudy) -> plt.Figure:
    """Per steered draw, the seed-median statistic D for the steering bias and for the control, against the
    null's 99 % quantile and the band."""
    fig, ax = figure(1, width=7.5, height=2.8)
    k = np.arange(1, len(study.steered) + 1)
    ax.semilogy(k, np.maximum(np.median(study.D, axis=1), 1e-4), "o", color=COLORS["particles"], label="steering bias")
    ax.semilogy(
        k,
        np.median(study.D_wrong, axis=1),
        "s",
        color=COLORS["alt"],
        mfc="none",
        label="control: bias without the tilt term",
    )
    ax.axhline(study.q99, color=COLORS["floor"], ls=":", label="null 99 % quantile")
    ax.axhline(study.band * study.q99, color=COLORS["floor"], ls="--", label=f"band ({study.band:g} × quantile)")
    ax.set_xlabel("steered draw")
    ax.set_ylabel(r"$D = N(\hat\mu - \mu_{\rm target})^\top\hat\Sigma^{-1}(\hat\mu - \mu_{\rm target})$")
    ax.legend(fontsize=7)
    return fig
