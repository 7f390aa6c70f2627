"""Chapter 4's figures for the Kalman–Bucy reproduction and mean steering with a general V."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.stability.general_v import MeanSteeringTokens
from gtbook.studies.stability.kalman import FilterEnsemble
from gtbook.studies.style import COLORS, figure, reference_slope


def filter_figure(ens: FilterEnsemble) -> plt.Figure:
    """Left: the filter error's relative gap to Sigma(t) over time, per draw; right: each draw's largest
    likelihood-ratio statistic against the Bonferroni threshold, identification and control."""
    fig, (ax, bx) = figure(2, width=4.4, height=3.0)
    for i, (run, ctl) in enumerate(zip(ens.runs, ens.control_runs, strict=True)):
        ax.plot(
            run.t[1:],
            run.relative_gap()[1:],
            color=COLORS["particles"],
            alpha=0.7,
            label="filter with eq. (1.1)'s Σ(t)" if i == 0 else None,
        )
        ax.plot(
            ctl.t[1:],
            ctl.relative_gap()[1:],
            color=COLORS["alt"],
            alpha=0.7,
            label=f"control: information × {ens.control_scale:g}" if i == 0 else None,
        )
    ax.set_yscale("log")
    ax.set_xlabel("t")
    ax.set_ylabel(r"$\|S(t) - \Sigma(t)\|_F / \|\Sigma(t)\|_F$")
    ax.legend()
    k = np.arange(1, len(ens.runs) + 1)
    bx.semilogy(k, [r.lrt.max() for r in ens.runs], "o", color=COLORS["particles"], label="identification")
    bx.semilogy(k, [r.lrt.max() for r in ens.control_runs], "s", color=COLORS["alt"], label="control")
    bx.axhline(ens.threshold, color=COLORS["floor"], ls="--", label="threshold")
    bx.set_xlabel("draw")
    bx.set_ylabel(r"largest $\Lambda$ over the recorded times")
    bx.legend()
    return fig


def mean_steering_tokens_figure(right: MeanSteeringTokens, wrong: MeanSteeringTokens) -> plt.Figure:
    """The cloud's mean error at T against N, per draw (seed means): the bias from Sigma* and from Sigma0."""
    fig, ax = figure(1, width=5.0)
    for k in range(right.error.shape[0]):
        ax.loglog(
            right.Ns,
            right.error[k].mean(axis=1),
            "o-",
            color=COLORS["particles"],
            alpha=0.8,
            label=r"bias from $\Sigma^*$ (Newton)" if k == 0 else None,
        )
        ax.loglog(
            wrong.Ns,
            wrong.error[k].mean(axis=1),
            "s--",
            color=COLORS["alt"],
            alpha=0.8,
            label=r"control: bias from $\Sigma_0$" if k == 0 else None,
        )
    reference_slope(ax, right.Ns, float(np.median(right.error[:, 0].mean(axis=1))), -0.5)
    ax.set_xlabel("N (tokens)")
    ax.set_ylabel(r"$\|\hat\mu_N(T) - \mu_{\rm target}\| / \sqrt{\operatorname{tr}\Sigma^*}$")
    ax.legend()
    return fig
