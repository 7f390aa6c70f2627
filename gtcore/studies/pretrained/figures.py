r"""Figures for pretrained Transformers fed Gaussian tokens (:mod:`gtcore.models`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gtcore.studies.style import COLORS, figure

#: line colours for successive models / modes in one figure
PALETTE = (COLORS["particles"], COLORS["alt"], COLORS["target"], COLORS["theory"],
           "#9467bd", "#8c564b", "#e377c2", "#17becf")

_AXES = {
    "sliced_w2": r"sliced $W_2$ to $N(\hat\mu_\ell,\hat\Sigma_\ell)$",
    "mardia_excess": r"Mardia kurtosis excess $\kappa_\ell$",
    "coord_kurtosis": r"mean$_a\,|\kappa_{\ell,a}|$ (per coordinate)",
    "between_ratio": r"between-sequence ratio $F_\ell$",
}


def layer_statistics_figure(results: Sequence, labels: Sequence[str] | None = None, *,
                            relative_depth: bool = False):
    r"""Each Gaussianity statistic against depth, with the noise band of a true Gaussian.

    Four panels (sliced :math:`W_2`, Mardia kurtosis excess, mean per-coordinate
    :math:`|\kappa|`, between-sequence ratio). Each result is a coloured line with markers;
    its noise band (central ``level`` band of Gaussian samples of the same size and rank) is
    shaded in the same colour; markers outside the band are filled black.

    Parameters
    ----------
    results : sequence of :class:`gtcore.studies.pretrained.statistics.LayerStatistics`
    labels : sequence of str, optional
        Legend entries (default ``"<model>, <mode>"``).
    relative_depth : bool
        Plot against :math:`\ell / L` so models of different depth share the axis.

    Returns
    -------
    matplotlib Figure
    """
    from gtcore.studies.pretrained.statistics import STATISTICS

    results = list(results)
    if not results:
        raise ValueError("results must hold at least one LayerStatistics")
    if labels is None:
        labels = [f"{r.model}, {r.mode}" for r in results]
    if len(labels) != len(results):
        raise ValueError(f"labels must have {len(results)} entries, got {len(labels)}")
    fig, axes = figure(2, 2, width=4.6, height=3.2)
    axes = np.asarray(axes).ravel()
    for ax, stat in zip(axes, STATISTICS, strict=True):
        for k, (res, lab) in enumerate(zip(results, labels, strict=True)):
            c = PALETTE[k % len(PALETTE)]
            x = res.layers / (res.layers[-1] if relative_depth else 1)
            ax.fill_between(x, res.floor_low[stat], res.floor_high[stat], color=c, alpha=0.15,
                            lw=0)
            ax.plot(x, res.values[stat], "-o", color=c, ms=3.5, label=lab)
            out = ~res.within_band(stat)
            ax.plot(x[out], res.values[stat][out], "o", color="k", ms=3.5, zorder=3)
        ax.set_ylabel(_AXES[stat])
        ax.set_xlabel(r"relative depth $\ell/L$" if relative_depth else r"layer $\ell$")
    axes[0].plot([], [], "o", color="k", ms=3.5, label="outside its noise band")
    axes[0].fill_between([], [], [], color=COLORS["floor"], alpha=0.3, lw=0,
                         label=f"Gaussian noise band ({results[0].level:g})")
    axes[0].legend(loc="best")
    return fig


__all__ = ["PALETTE", "layer_statistics_figure"]
