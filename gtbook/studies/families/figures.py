"""Figures of chapter 7: attention families."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gtbook.studies.style import COLORS, figure, plot_ellipse


def clouds_by_type(runs: Mapping[str, Any], max_points: int = 1500):
    """One panel per attention type: tokens at the last time with the moment ODE's 1σ and 2σ
    ellipses (solid, dashed) and the initial 2σ ellipse (dotted)."""
    fig, axes = figure(len(runs), 1, width=3.2, height=3.2, sharex=True, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (label, run) in zip(axes, runs.items(), strict=True):
        x = run.particles.tokens[-1][:max_points]
        ax.scatter(x[:, 0], x[:, 1], s=2, alpha=0.35, color=COLORS["particles"], rasterized=True, label="tokens")
        for r, ls in ((1, "-"), (2, "--")):
            plot_ellipse(
                ax,
                run.ode.mu[-1],
                run.ode.Sigma[-1],
                radius=r,
                ls=ls,
                lw=1.4,
                color=COLORS["theory"],
                label=f"ODE {r}σ",
            )
        plot_ellipse(
            ax, run.ode.mu[0], run.ode.Sigma[0], radius=2, ls=":", lw=1.0, color=COLORS["floor"], label="t = 0, 2σ"
        )
        ax.set_title(f"{label}, t = {run.ode.t[-1]:g}")
        ax.set_xlabel("$x_1$")
        ax.set_aspect("equal", adjustable="box")
    axes[0].set_ylabel("$x_2$")
    axes[0].legend(loc="upper left", markerscale=4, fontsize=7)
    return fig


def growth_curves(
    trajs: Mapping[str, Any], t_star: float, rates: Mapping[str, float], particles: Mapping[str, Any] | None = None
):
    r""":math:`\log\lambda_{\max}(\Sigma(t))` per type (ODE lines, token clouds as dots), the dot product's
    blow-up time (vertical line) and each predicted asymptotic slope (dashed, anchored at the end)."""
    fig, ax = figure(1, 1, width=5.6, height=3.8)
    colors = {"dot": COLORS["theory"], "l2": COLORS["particles"], "sinkhorn": COLORS["target"]}
    for name, tr in trajs.items():
        c = colors.get(name, COLORS["alt"])
        lam = np.linalg.eigvalsh(tr.Sigma)[:, -1]
        ax.plot(tr.t, np.log(lam), color=c, label=f"{name} (ODE)")
        if name in rates:
            t1, y1 = tr.t[-1], np.log(lam[-1])
            ts = np.array([t1 - 2.0, t1])
            ax.plot(
                ts, y1 + rates[name] * (ts - t1), ls="--", color=c, lw=1.0, label=f"predicted slope {rates[name]:.3f}"
            )
        if particles and name in particles:
            p = particles[name]
            ax.plot(
                p.t,
                np.log(np.linalg.eigvalsh(p.Sigma)[:, -1]),
                "o",
                ms=4,
                color=c,
                mfc="none",
                label=f"{name} (tokens)",
            )
    ax.axvline(t_star, color=COLORS["floor"], ls=":", label=f"dot-product blow-up $t^*$ = {t_star:.3f}")
    ax.set_xlabel("$t$")
    ax.set_ylabel(r"$\log\lambda_{\max}(\Sigma(t))$")
    ax.legend(fontsize=7)
    return fig


def discrepancy_table(labels: Sequence[str], matrix: np.ndarray, floor: Sequence[float]):
    """Tokens of each type (rows) against the ODE of each type (columns), with the noise floor."""
    fig, ax = figure(1, 1, width=4.6, height=3.4)
    im = ax.imshow(np.log10(matrix), cmap="viridis")
    for i in range(len(labels)):
        for j in range(len(labels)):
            ax.text(
                j, i, f"{matrix[i, j]:.3f}", ha="center", va="center", color="white" if i == j else "black", fontsize=8
            )
    ax.set_xticks(range(len(labels)), [f"ODE {lab}" for lab in labels])
    ax.set_yticks(range(len(labels)), [f"tokens {lab}\n(floor {f:.3f})" for lab, f in zip(labels, floor, strict=True)])
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="log10 discrepancy")
    return fig
