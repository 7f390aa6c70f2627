r"""Figures of chapter 9 (reachability seen from learning); each function returns a Figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.learning.harness import (
    EnergyComparison,
    LearningRun,
    PairLosses,
    SlackSlope,
    Target,
)
from gtbook.studies.learning.learned_clouds import (
    Thickness,
)
from gtbook.studies.style import COLORS, figure

#: the central band drawn for a noise floor: from its 1% to its 99% quantile
BAND = (0.01, 0.99)


def _band(null: PairLosses) -> tuple[float, float]:
    lo, hi = np.quantile(null.losses, BAND)
    return float(lo), float(hi)


def _n_axis(ax: plt.Axes, ns: np.ndarray) -> None:
    """A log axis of token counts, ticked at the counts used."""
    ax.set_xscale("log")
    ax.set_xticks(ns, [f"{int(n)}" for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("number of tokens $N$")


def _running_mean(x: np.ndarray, w: int) -> np.ndarray:
    w = max(1, min(int(w), x.size))
    c = np.cumsum(np.insert(x, 0, 0.0))
    out = np.empty_like(x)
    out[w - 1 :] = (c[w:] - c[:-w]) / w
    out[: w - 1] = c[1:w] / np.arange(1, w)
    return out


def training_curves(
    runs: Mapping[str, LearningRun], nulls: Mapping[str, PairLosses], floor: float, window: int = 10
) -> plt.Figure:
    r"""Left: the training loss per step (light) and its running mean (bold), one curve per run, with
    each run's noise floor (its 1–99% band, right edge) and the rank floor :math:`F_r` (dashed).
    Right: the same for the squared Bures–Wasserstein distance of the output moments."""
    fig, (ax1, ax2) = figure(2, 1, width=4.4, height=3.4)
    colors = [COLORS["particles"], COLORS["alt"], COLORS["target"]]
    for (name, run), c in zip(runs.items(), colors, strict=False):
        t = run.training
        steps = np.arange(t.loss.size)
        for ax, y in ((ax1, t.loss), (ax2, t.moment_w2sq)):
            ax.plot(steps, y, color=c, alpha=0.25, lw=0.8)
            ax.plot(steps, _running_mean(y, window), color=c, label=name)
        lo, hi = _band(nulls[name])
        x0 = 0.8 * steps[-1]
        ax1.fill_between([x0, steps[-1]], lo, hi, color=c, alpha=0.25, lw=0)
    for ax in (ax1, ax2):
        ax.axhline(floor, color=COLORS["theory"], ls="--", lw=1.2, label=r"rank floor $F_r$")
        ax.set_yscale("log")
        ax.set_xlabel("Adam step")
    ax1.set_ylabel(r"$W_2^2$(output tokens, target sample)")
    ax1.set_title("loss on fresh tokens; bands: noise floors")
    ax2.set_ylabel(r"$W_2^2$ of the output moments (Bures)")
    ax2.set_title("the Gaussian part of the loss")
    ax1.legend(loc="upper right")
    return fig


def wall_clouds(
    target: Target, outputs: Mapping[str, np.ndarray], target_tokens: np.ndarray, max_points: int = 400
) -> plt.Figure:
    r"""Output tokens and a target sample in the target's eigen-coordinates
    :math:`(u_1^\top(x - \mu_1),\ u_d^\top(x - \mu_1))`, largest and smallest eigenvalue, one panel per run."""
    _w, U = np.linalg.eigh(target.Sigma)
    basis = U[:, [-1, 0]]
    fig, axes = figure(len(outputs), 1, width=3.6, height=3.4, sharex=True, sharey=True)
    axes = np.atleast_1d(axes)
    y = (target_tokens - target.mu) @ basis
    for ax, (name, x) in zip(axes, outputs.items(), strict=True):
        p = (x - target.mu) @ basis
        ax.scatter(y[:max_points, 0], y[:max_points, 1], s=4, color=COLORS["target"], alpha=0.45, label="target sample")
        ax.scatter(
            p[:max_points, 0], p[:max_points, 1], s=4, color=COLORS["particles"], alpha=0.6, label="trained output"
        )
        ax.set_title(name)
        ax.set_xlabel(r"$u_1^\top(x - \mu_1)$ (largest variance)")
        ax.set_aspect("equal", adjustable="box")
    axes[0].set_ylabel(r"$u_d^\top(x - \mu_1)$ (smallest variance)")
    axes[0].legend(loc="upper left", markerscale=3)
    return fig


def ensemble_figure(
    groups: Mapping[str, Sequence[tuple[str, LearningRun, LearningRun, PairLosses, float]]],
) -> plt.Figure:
    r"""Per target: the mean test loss with attention (filled) and with :math:`V = 0` (open) against the
    noise floor's 1–99% band (bar) and, behind the wall, the rank floor :math:`F_r` (red tick).

    ``groups`` maps a panel title to rows ``(label, run, run_without_attention, null, floor)``."""
    fig, axes = figure(len(groups), 1, width=3.2, height=3.4)
    axes = np.atleast_1d(axes)
    for ax, (title, rows) in zip(axes, groups.items(), strict=True):
        for i, (_label, run, run0, null, floor) in enumerate(rows):
            lo, hi = _band(null)
            ax.plot(
                [i, i],
                [lo, hi],
                color=COLORS["floor"],
                lw=7,
                alpha=0.45,
                solid_capstyle="butt",
                label="noise floor 1–99%" if i == 0 else None,
            )
            ax.plot(i - 0.12, run.test_loss, "o", color=COLORS["particles"], label="trained" if i == 0 else None)
            ax.plot(
                i + 0.12,
                run0.test_loss,
                "o",
                mfc="none",
                color=COLORS["particles"],
                label="trained, $V = 0$" if i == 0 else None,
            )
            if floor > 0:
                ax.plot(
                    [i - 0.3, i + 0.3],
                    [floor, floor],
                    color=COLORS["theory"],
                    lw=1.6,
                    label=r"$F_r$" if i == 0 else None,
                )
        ax.set_xticks(range(len(rows)), [r[0] for r in rows])
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_title(title)
        ax.set_xlabel("target")
    axes[0].set_ylabel(r"mean test $W_2^2$")
    axes[-1].legend(loc="best")
    return fig


def slack_figure(
    ns: Sequence[int] | np.ndarray,
    full: Sequence[LearningRun],
    full_nulls: Sequence[PairLosses],
    wall: Sequence[LearningRun],
    wall_nulls: Sequence[PairLosses],
    wall_attention: Sequence[LearningRun],
    floor: float,
    trained_slope: SlackSlope,
    null_slope: SlackSlope,
) -> plt.Figure:
    r"""Left: the mean test loss against N, from a full-rank start (attention on) and from a rank-:math:`r` start
    (:math:`V = 0`, and attention on, open), with the noise floors' 1–99% bands and :math:`F_r`. Right: the slack
    :math:`\ell - F_r(\hat\Sigma_Y)` of the :math:`V = 0` networks against N and of the nearest
    rank-:math:`r` Gaussian, with their fitted slopes."""
    ns = np.asarray(ns, float)
    fig, (ax1, ax2) = figure(2, 1, width=4.4, height=3.5)
    for runs, nulls, c, name in (
        (full, full_nulls, COLORS["particles"], "full-rank start"),
        (wall, wall_nulls, COLORS["alt"], "rank-$r$ start, $V = 0$"),
    ):
        bands = np.array([_band(n) for n in nulls])
        ax1.fill_between(ns, bands[:, 0], bands[:, 1], color=c, alpha=0.2, lw=0)
        ax1.plot(ns, [r.test_loss for r in runs], "o-", color=c, label=name)
    ax1.plot(
        ns,
        [r.test_loss for r in wall_attention],
        "s--",
        mfc="none",
        color=COLORS["alt"],
        label="rank-$r$ start, attention",
    )
    ax1.axhline(floor, color=COLORS["theory"], ls="--", lw=1.2, label=r"$F_r$")
    ax1.set_yscale("log")
    ax1.set_ylabel(r"mean test $W_2^2$ (bands: noise floors)")
    ax1.legend()
    null_sl = np.array([n.slack for n in wall_nulls])
    lo, hi = np.quantile(null_sl, BAND, axis=1)
    ax2.fill_between(ns, lo, hi, color=COLORS["floor"], alpha=0.3, lw=0, label="nearest rank-$r$ Gaussian, 1–99%")
    ax2.plot(
        ns,
        null_slope.mean_slack,
        "--",
        color=COLORS["floor"],
        label=f"its mean: slope {null_slope.slope:.2f} ± {null_slope.se:.2f}",
    )
    ax2.plot(
        ns,
        trained_slope.mean_slack,
        "o-",
        color=COLORS["alt"],
        label=f"trained, $V = 0$: slope {trained_slope.slope:.2f} ± {trained_slope.se:.2f}",
    )
    ax2.set_yscale("log")
    ax2.set_ylabel(r"slack $W_2^2 - F_r(\hat\Sigma_Y)$")
    ax2.legend(fontsize=7)
    for ax in (ax1, ax2):
        _n_axis(ax, ns)
    return fig


def depth_figure(
    depths: Sequence[int],
    full: Sequence[LearningRun],
    full_null: PairLosses,
    wall: Sequence[LearningRun],
    wall_null: PairLosses,
    wall_attention: Sequence[LearningRun],
    floor: float,
    constructive: float,
    min_energy: float,
) -> plt.Figure:
    r"""Left: the mean test loss against the number of layers L at fixed T, from the full-rank start
    (attention on) and the rank-:math:`r` start (:math:`V = 0`, and attention on, open), with their noise floors
    (1–99% bands) and :math:`F_r`. Right: the learned energies against L (full-rank start: feed-forward part
    and the Gaussian velocity), with the constructive and minimum-energy controls."""
    L = np.asarray(depths, float)
    fig, (ax1, ax2) = figure(2, 1, width=4.4, height=3.4)
    for runs, null, c, name in (
        (full, full_null, COLORS["particles"], "full-rank start"),
        (wall, wall_null, COLORS["alt"], "rank-$r$ start, $V = 0$"),
    ):
        lo, hi = _band(null)
        ax1.fill_between(L, lo, hi, color=c, alpha=0.2, lw=0)
        ax1.plot(L, [r.test_loss for r in runs], "o-", color=c, label=name)
    ax1.plot(
        L,
        [r.test_loss for r in wall_attention],
        "s--",
        mfc="none",
        color=COLORS["alt"],
        label="rank-$r$ start, attention",
    )
    ax1.axhline(floor, color=COLORS["theory"], ls="--", lw=1.2, label=r"$F_r$")
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("layers $L$ (step $h = T/L$)")
    ax1.set_ylabel(r"mean test $W_2^2$")
    ax1.legend()
    ax2.plot(
        L,
        [r.training.energy for r in full],
        "o-",
        color=COLORS["particles"],
        label=r"learned $h\sum\|A_l\|^2 + \|b_l\|^2$",
    )
    ax2.plot(
        L,
        [r.gaussian_energy for r in full],
        "s--",
        color=COLORS["particles"],
        mfc="none",
        label="learned, Gaussian velocity",
    )
    ax2.axhline(constructive, color=COLORS["alt"], ls=":", label="constructive (ch. 3)")
    ax2.axhline(min_energy, color=COLORS["theory"], ls="-.", label="minimum energy (ch. 3)")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("layers $L$")
    ax2.set_ylabel("energy (full-rank start)")
    ax2.legend(fontsize=7)
    return fig


def energy_figure(labels: Sequence[str], comparisons: Sequence[EnergyComparison]) -> plt.Figure:
    """Grouped bars per target: learned energies (attention on, its Gaussian velocity, V = 0) beside the
    constructive and minimum-energy controls of chapter 3."""
    keys = [
        ("learned", "learned, $A, b$", COLORS["particles"], None),
        ("learned_gaussian", "learned, Gaussian velocity", COLORS["particles"], "//"),
        ("learned_no_attention", "learned, $V = 0$", "#9ecae1", None),
        ("constructive", "constructive", COLORS["alt"], None),
        ("min_energy", "minimum energy", COLORS["theory"], None),
    ]
    fig, ax = figure(1, 1, width=max(5.0, 0.9 * len(labels) + 2.0), height=3.4)
    x = np.arange(len(labels))
    width = 0.16
    for j, (key, name, color, hatch) in enumerate(keys):
        vals = [getattr(c, key) for c in comparisons]
        ax.bar(
            x + (j - 2) * width,
            vals,
            width,
            color=color,
            hatch=hatch,
            edgecolor="white" if hatch is None else "k",
            lw=0.4,
            label=name,
        )
    ax.set_xticks(x, labels)
    ax.set_yscale("log")
    ax.set_ylabel(r"$\int_0^T \|A\|_F^2 + \|b\|^2\,dt$")
    ax.set_xlabel("target")
    ax.legend(fontsize=7, ncol=2)
    return fig


def bending_figure(bending: Thickness, floor: float) -> plt.Figure:
    r"""One trained network (attention on, rank-:math:`r` start) on fresh clouds of several sizes N. Left: how far
    its output bends out of the :math:`r`-dimensional subspace, :math:`\sigma_{r+1}/\sigma_1` (dots: clouds;
    line: their mean; dashed: :math:`N^{-1/2}`). Right: its loss against a fresh target sample, with
    :math:`F_r` and the samples' floors :math:`F_r(\hat\Sigma_Y)`."""
    fig, (ax1, ax2) = figure(2, 1, width=4.2, height=3.4)
    n = bending.n_tokens
    m = bending.ratios.mean(axis=1)
    ax1.plot(n, bending.ratios, ".", color=COLORS["alt"], alpha=0.5)
    ax1.plot(n, m, "o-", color=COLORS["alt"], label=f"mean: slope {bending.slope:.2f}")
    ax1.plot(n, m[0] * (n / n[0]) ** -0.5, "--", color="k", lw=1, label=r"$\propto N^{-1/2}$")
    _n_axis(ax1, n)
    ax1.set_yscale("log")
    ax1.set_ylabel(r"bending $\sigma_{r+1}/\sigma_1$ of the output")
    ax1.set_title(rf"largest $\kappa$ of its layers: {bending.kappa:.3g}")
    ax1.legend(fontsize=7)
    if bending.losses is not None and bending.floors is not None:  # both or neither (a target given)
        ax2.plot(n, bending.losses, ".", color=COLORS["alt"], alpha=0.5)
        ax2.plot(n, bending.losses.mean(axis=1), "o-", color=COLORS["alt"], label="loss of the network")
        ax2.plot(n, bending.floors.mean(axis=1), "s:", color=COLORS["floor"], label=r"$F_r(\hat\Sigma_Y)$ (mean)")
        ax2.axhline(floor, color=COLORS["theory"], ls="--", lw=1.2, label=r"$F_r$")
        _n_axis(ax2, n)
        ax2.set_ylabel(r"$W_2^2$ to a fresh target sample")
        ax2.legend(fontsize=7)
    return fig


def escape_figure(rows: Sequence[tuple[float, float, bool]], rows_no_attention: Sequence[float]) -> plt.Figure:
    r"""Every network trained from the rank-:math:`r` start: its mean test loss over the lower edge :math:`q_1` of
    the wall's noise floor, against the largest :math:`\kappa` of its layers (with attention: filled when its
    tokens left its own Gaussian dynamics, open otherwise; :math:`V = 0`: crosses at the left edge).

    ``rows`` are ``(kappa, loss / q01, departed)``; ``rows_no_attention`` the ratios of the :math:`V = 0` runs."""
    fig, ax = figure(1, 1, width=5.4, height=3.6)
    kappas = np.array([k for k, _, _ in rows] or [1.0])
    left = 10 ** np.floor(np.log10(max(min(kappas.min(), 0.5) / 10, 1e-6)))
    ax.plot(
        np.full(len(rows_no_attention), left),
        rows_no_attention,
        "x",
        color=COLORS["floor"],
        label="$V = 0$ (plotted at the left edge)",
    )
    for k, y, gone in rows:
        ax.plot(k, y, "o", color=COLORS["alt"], mfc=COLORS["alt"] if gone else "none")
    ax.plot([], [], "o", color=COLORS["alt"], label="attention: tokens left their Gaussian dynamics")
    ax.plot([], [], "o", color=COLORS["alt"], mfc="none", label="attention: tokens follow them")
    ax.axhline(1.0, color=COLORS["theory"], ls="--", lw=1.2, label="lower edge of the wall's noise floor")
    ax.axvline(0.5, color="k", ls=":", lw=1, label=r"$\kappa = 1/2$")
    ax.set_xscale("log")
    ax.set_xlabel(r"largest $\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)$ of the trained layers")
    ax.set_ylabel(r"mean test $W_2^2$ / $q_1$ of the wall's floor")
    ax.legend(fontsize=7, loc="lower left")
    return fig


__all__ = [
    "bending_figure",
    "depth_figure",
    "energy_figure",
    "ensemble_figure",
    "escape_figure",
    "slack_figure",
    "training_curves",
    "wall_clouds",
]
