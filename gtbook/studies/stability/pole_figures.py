r"""Figures of chapter 4's finite-N section: token clouds on the way to a blow-up."""

from __future__ import annotations

import matplotlib.pyplot as plt

from gtbook.studies.style import COLORS, figure


def pole_figure(study, stab: dict) -> plt.Figure:
    r"""Left: the gap :math:`|1 - \|\hat\Sigma_N\|_F/\|\Sigma\|_F|` against :math:`N` at each
    fraction of :math:`t^*` (seed mean, bars :math:`\pm 2` standard errors), with the
    :math:`N^{-1/2}` slope for reference. Right: the stabilising particle run, the moment ODE
    and the control run (destabilising matrices, same tokens and horizon), as
    :math:`\|\Sigma(t)\|_F / \|\Sigma_0\|_F`.

    ``stab`` holds ``t_ode, n_ode, t_part, n_part, t_ctrl, n_ctrl, n_star``.
    """
    fig, (ax0, ax1) = figure(2, 1, width=4.4, height=3.0)
    g, se = study.gap_mean(), study.gap_se()
    cmap = plt.get_cmap("viridis")
    for j, f in enumerate(study.fractions):
        c = cmap(j / max(1, len(study.fractions) - 1))
        ax0.errorbar(
            study.Ns,
            g[:, j],
            yerr=2 * se[:, j],
            color=c,
            marker="o",
            capsize=3,
            label=rf"$t = {f:g}\,t^*$, $\kappa = {study.kappa[j]:.2g}$",
        )
    ref = g[0, 0] * (study.Ns / study.Ns[0]) ** -0.5
    ax0.plot(study.Ns, ref, color=COLORS["floor"], ls=":", label=r"$\propto N^{-1/2}$")
    ax0.set_xscale("log")
    ax0.set_yscale("log")
    ax0.set_xlabel("tokens $N$")
    ax0.set_ylabel(r"$|1 - \|\hat\Sigma_N(t)\|_F / \|\Sigma(t)\|_F|$")
    ax0.set_title("same definiteness: particles vs moment ODE")
    ax0.legend(fontsize=7)
    ax1.semilogy(stab["t_ode"], stab["n_ode"], color=COLORS["theory"], label="moment ODE (stabilising)")
    ax1.semilogy(stab["t_part"], stab["n_part"], color=COLORS["particles"], label="particles (stabilising)")
    ax1.semilogy(stab["t_ctrl"], stab["n_ctrl"], color=COLORS["alt"], label="particles, $V \\to -V$ (control)")
    ax1.axhline(stab["n_star"], color="k", ls="--", lw=1, label=r"$\|\Sigma^*\|_F / \|\Sigma_0\|_F$")
    ax1.axhline(2 * max(1.0, stab["n_star"]), color=COLORS["floor"], ls=":", lw=1, label="claim's bound")
    ax1.set_xlabel("$t$")
    ax1.set_ylabel(r"$\|\Sigma(t)\|_F / \|\Sigma_0\|_F$")
    ax1.set_title("opposite definiteness: bounded")
    ax1.legend(fontsize=7)
    return fig
