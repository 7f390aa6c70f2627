r"""Figures of chapter 5 (pretrained Transformers fed Gaussian tokens, :mod:`gtcore.models`): the layer
statistics with their Gaussian noise bands; effect sizes against the reference, the two criteria across
sample sizes, training curves, and closeness to Gaussian next to clustering on one depth axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gtbook.studies.pretrained.effects import STATISTICS
from gtbook.studies.style import COLORS, figure

if TYPE_CHECKING:
    from gtbook.studies.pretrained.criterion import LayerEffects
    from gtbook.studies.pretrained.effects import EffectSizes
    from gtbook.studies.pretrained.training import TrainingRecord

#: line colours for successive models / modes in one figure
PALETTE = (
    COLORS["particles"],
    COLORS["alt"],
    COLORS["target"],
    COLORS["theory"],
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
)

#: the axis label of each per-layer statistic, in the table order of
#: :data:`gtbook.studies.pretrained.statistics.STATISTICS` (the same keys; a test checks it)
_AXES = {
    "sliced_w2": r"sliced $W_2$ to $N(\hat\mu_\ell,\hat\Sigma_\ell)$",
    "mardia_excess": r"Mardia kurtosis excess $\kappa_\ell$",
    "coord_kurtosis": r"mean$_a\,|\kappa_{\ell,a}|$ (per coordinate)",
    "between_ratio": r"between-sequence ratio $F_\ell$",
}


def layer_statistics_figure(results: Sequence, labels: Sequence[str] | None = None, *, relative_depth: bool = False):
    r"""Each Gaussianity statistic against depth, with the noise band of a true Gaussian.

    Four panels (sliced :math:`W_2`, Mardia kurtosis excess, mean per-coordinate
    :math:`|\kappa|`, between-sequence ratio). Each result is a coloured line with markers;
    its noise band (central ``level`` band of Gaussian samples of the same size and rank) is
    shaded in the same colour; markers outside the band are filled black.

    Parameters
    ----------
    results : sequence of :class:`gtbook.studies.pretrained.statistics.LayerStatistics`
    labels : sequence of str, optional
        Legend entries (default ``"<model>, <mode>"``).
    relative_depth : bool
        Plot against :math:`\ell / L` so models of different depth share the axis.

    Returns
    -------
    matplotlib Figure
    """
    results = list(results)
    if not results:
        raise ValueError("results must hold at least one LayerStatistics")
    if labels is None:
        labels = [f"{r.model}, {r.mode}" for r in results]
    if len(labels) != len(results):
        raise ValueError(f"labels must have {len(results)} entries, got {len(labels)}")
    fig, axes = figure(2, 2, width=4.6, height=3.2)
    axes = np.asarray(axes).ravel()
    for ax, stat in zip(axes, _AXES, strict=True):
        for k, (res, lab) in enumerate(zip(results, labels, strict=True)):
            c = PALETTE[k % len(PALETTE)]
            x = res.layers / (res.layers[-1] if relative_depth else 1)
            ax.fill_between(x, res.floor_low[stat], res.floor_high[stat], color=c, alpha=0.15, lw=0)
            ax.plot(x, res.values[stat], "-o", color=c, ms=3.5, label=lab)
            out = ~res.within_band(stat)
            ax.plot(x[out], res.values[stat][out], "o", color="k", ms=3.5, zorder=3)
        ax.set_ylabel(_AXES[stat])
        ax.set_xlabel(r"relative depth $\ell/L$" if relative_depth else r"layer $\ell$")
    axes[0].plot([], [], "o", color="k", ms=3.5, label="outside its noise band")
    axes[0].fill_between(
        [], [], [], color=COLORS["floor"], alpha=0.3, lw=0, label=f"Gaussian noise band ({results[0].level:g})"
    )
    axes[0].legend(loc="best")
    return fig


_LABELS = {
    "sliced_w2": r"sliced $W_2$: $\Delta_{SW}$",
    "mardia_excess": r"Mardia excess: $\Delta_{M}$",
    "coord_kurtosis": r"coordinate kurtosis: $\Delta_{\kappa}$",
}


def effect_size_figure(results: Mapping[str, LayerEffects], references: Mapping[str, Mapping[int, EffectSizes]]):
    r"""Each statistic's :math:`\Delta_s(\ell)` with its 95% interval against the layer, one series per
    entry of ``results`` (e.g. MiniLM pure and embedding at two sample sizes), and the reference
    interval of that series' shape shaded in its colour.

    Parameters
    ----------
    results : dict label -> LayerEffects
    references : dict label -> (dict rank -> EffectSizes), the references of each series

    Returns
    -------
    matplotlib Figure
    """
    if not results:
        raise ValueError("results must hold at least one LayerEffects")
    fig, axes = figure(3, 1, width=3.9, height=3.2)
    n = len(results)
    for ax, s in zip(np.atleast_1d(axes), STATISTICS, strict=True):
        for k, (label, res) in enumerate(results.items()):
            c = PALETTE[k % len(PALETTE)]
            x = res.layers + (k - (n - 1) / 2) * 0.08
            v, lo, hi = res.array("value", s), res.array("low", s), res.array("high", s)
            ax.errorbar(x, v, yerr=[v - lo, hi - v], color=c, marker="o", ms=3, lw=1.2, capsize=2, label=label)
            ref = references[label]
            rlo = np.array([ref[int(q)].low[s] for q in res.null_rank])
            rhi = np.array([ref[int(q)].high[s] for q in res.null_rank])
            ax.fill_between(res.layers, rlo, rhi, color=c, alpha=0.12, lw=0)
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_xlabel(r"layer $\ell$")
        ax.set_title(_LABELS[s])
    np.atleast_1d(axes)[0].set_ylabel(r"effect size $\Delta_s(\ell)$ (shaded: Student-$t$ reference)")
    np.atleast_1d(axes)[0].legend(loc="upper left")
    return fig


def criteria_across_sizes_figure(
    sizes: Sequence[int],
    band_blocks: Mapping[str, Sequence[int]],
    effect_blocks: Mapping[str, Sequence[int]],
    n_blocks: int,
    title: str = "",
):
    r"""The first block at which each criterion fails against the number of sequences :math:`S`.

    Parameters
    ----------
    sizes : the values of :math:`S`
    band_blocks, effect_blocks : dict label -> first block per size (:math:`L + 1`: none), for the old
        noise-band criterion and the effect-size criterion
    n_blocks : int
        :math:`L`; the dotted line marks :math:`\lceil L/2\rceil + 1`, the first block allowed to fail.

    Returns
    -------
    matplotlib Figure
    """
    fig, ax = figure(1, 1, width=5.6, height=3.6)
    n = max(len(band_blocks), 1)
    for k, (label, blocks) in enumerate(band_blocks.items()):  # series offset so equal ones stay visible
        ax.plot(
            sizes,
            np.asarray(blocks) + 0.08 * (k - (n - 1) / 2) - 0.04,
            color=PALETTE[k % len(PALETTE)],
            ls="--",
            marker="s",
            label=f"noise band (exact Gaussianity), {label}",
        )
    for k, (label, blocks) in enumerate(effect_blocks.items()):
        ax.plot(
            sizes,
            np.asarray(blocks) + 0.08 * (k - (n - 1) / 2) + 0.12,
            color=PALETTE[k % len(PALETTE)],
            ls="-",
            marker="o",
            label=f"effect size vs Student-$t$, {label}",
        )
    half = int(np.ceil(n_blocks / 2))
    ax.axhline(half + 0.5, color=COLORS["floor"], ls=":", lw=1)
    ax.text(
        sizes[0], half + 0.6, r"fails after $\lceil L/2\rceil$: statement can hold", fontsize=8, color=COLORS["floor"]
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), [str(s) for s in sizes])
    ax.set_yticks(range(1, n_blocks + 2), [str(b) for b in range(1, n_blocks + 1)] + ["none"])
    ax.set_xlabel(r"sequences $S$ (of $T$ tokens each)")
    ax.set_ylabel("first block that fails the criterion")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.93))
    return fig


def training_figure(records: Sequence[TrainingRecord]):
    """Held-out metric against training steps for each trained-here model, with its trivial baseline."""
    records = list(records)
    fig, axes = figure(len(records), 1, width=4.0, height=3.1)
    for ax, rec in zip(np.atleast_1d(axes), records, strict=True):
        ax.plot(rec.steps, rec.held_out, color=COLORS["particles"], marker="o", ms=3, label="held out")
        ax.plot(rec.steps[1:], rec.train_loss[1:], color=COLORS["alt"], lw=1, label="training loss (nats)")
        ax.axhline(rec.baseline, color=COLORS["floor"], ls="--", lw=1, label=rec.baseline_name)
        ax.set_xlabel("training step")
        ax.set_ylabel(rec.metric)
        ax.set_title(rec.task, fontsize=9)
        ax.legend(fontsize=7)
    return fig


def closeness_and_clustering_figure(columns: Mapping[str, Mapping[str, Any]]):
    r"""Closeness to Gaussian and clustering on one depth axis, one column per model.

    Parameters
    ----------
    columns : dict title -> {"ratio": (L+1,) array, "profile": ClusteringProfile,
        "initial_ratio": array or None, "initial_profile": ClusteringProfile or None}
        ``ratio``: :math:`\max_s` of the upper end of :math:`\Delta_s(\ell)` over the lower end of the
        reference's (close below 1), pure mode.

    Returns
    -------
    matplotlib Figure
    """
    fig, axes = figure(len(columns), 3, width=3.5, height=2.4)
    axes = np.asarray(axes).reshape(3, len(columns))
    finite = [float(r) for c in columns.values() for r in np.ravel(c["ratio"]) if np.isfinite(r)]
    top = max(finite, default=1.0)
    for j, (title, col) in enumerate(columns.items()):
        prof = col["profile"]
        depth = prof.layers / prof.layers[-1]
        ax = axes[0, j]
        ax.plot(
            depth,
            np.clip(col["ratio"], 1e-3, None),
            color=COLORS["particles"],
            marker="o",
            ms=3,
            label="trained / pretrained",
        )
        if col.get("initial_ratio") is not None:
            ax.plot(
                depth,
                np.clip(col["initial_ratio"], 1e-3, None),
                color=COLORS["floor"],
                ls="--",
                marker=".",
                label="random initialisation",
            )
        ax.axhline(1.0, color=COLORS["theory"], lw=1)
        ax.axvline(0.5, color=COLORS["floor"], ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_ylim(0.05, max(2.0, 1.5 * top))
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("upper $\\Delta$ / lower $\\Delta_{ref}$\n(close below 1)")
        ax = axes[1, j]
        ax.imshow(
            prof.histogram.T,
            origin="lower",
            aspect="auto",
            cmap="viridis",
            extent=(-0.5 / prof.layers[-1], 1 + 0.5 / prof.layers[-1], -1, 1),
            vmax=np.quantile(prof.histogram, 0.99),
        )
        ax.plot(depth, prof.mean_cosine, color="w", lw=1)
        ax.set_ylabel("cosine similarity\n(histogram; white: mean)")
        ax.grid(False)
        ax = axes[2, j]
        ax.plot(depth, prof.clusters, color=COLORS["particles"], marker="o", ms=3)
        if col.get("initial_profile") is not None:
            ip = col["initial_profile"]
            ax.plot(ip.layers / ip.layers[-1], ip.clusters, color=COLORS["floor"], ls="--", marker=".")
        ax.set_yscale("log")
        ax.set_ylim(0.8, 1.3 * prof.tokens)
        ax.set_ylabel(f"clusters (cos $\\geq$ {prof.threshold:g})")
        ax.set_xlabel(r"relative depth $\ell / L$")
    for ax in axes[0]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
    return fig


__all__ = [
    "PALETTE",
    "closeness_and_clustering_figure",
    "criteria_across_sizes_figure",
    "effect_size_figure",
    "layer_statistics_figure",
    "training_figure",
]
