r"""Figures of chapter 8 (the book's shared style, :func:`gtbook.studies.style.figure`)."""

from __future__ import annotations

import numpy as np

from gtbook.studies.atlas.explorer import OUTCOME_COLORS
from gtbook.studies.atlas.maps import AtlasMap
from gtbook.studies.atlas.outcomes import OUTCOMES
from gtbook.studies.atlas.tables import Fractions
from gtbook.studies.style import COLORS, figure

__all__ = ["blowup_times_figure", "fractions_figure", "map_panels", "rank_histograms"]


def rank_histograms(rows, ds):
    """Per (attention, V) one panel: the limit's rank per d, exact (filled) against each scheme setting (outlined)."""
    keys = sorted({(r.attention, r.variant) for r in rows})
    fig, axes = figure(len(keys), 1, width=3.0, height=2.8, sharey=True)
    axes = np.atleast_1d(axes)
    styles = [
        dict(fill=False, edgecolor=COLORS["alt"], lw=1.2, hatch="//"),
        dict(fill=False, edgecolor=COLORS["particles"], lw=1.2, hatch="\\\\"),
    ]
    for ax, (att, var) in zip(axes, keys, strict=True):
        sel = [r for r in rows if r.attention == att and r.variant == var]
        for j, r in enumerate(sorted(sel, key=lambda r: r.d)):
            base = 8 * j
            x = np.arange(r.d + 1)
            ax.bar(base + x - 0.25, r.exact[: r.d + 1], 0.25, color=COLORS["theory"], label="exact" if j == 0 else None)
            for k, (name, s) in enumerate(r.schemes.items()):
                ax.bar(
                    base + x + 0.25 * k,
                    s["hist"][: r.d + 1],
                    0.25,
                    label=f"Euler, {name}" if j == 0 else None,
                    **styles[k % 2],
                )
            ax.text(base + r.d / 2, ax.get_ylim()[1] * 0.95 if j else 0, "")
        ticks = [8 * j + k for j in range(len(sel)) for k in range(sorted(sel, key=lambda r: r.d)[j].d + 1)]
        labels = [str(k) for j in range(len(sel)) for k in range(sorted(sel, key=lambda r: r.d)[j].d + 1)]
        ax.set_xticks(ticks, labels, fontsize=7)
        ax.set_xlabel("rank (groups: d = " + ", ".join(str(r.d) for r in sorted(sel, key=lambda r: r.d)) + ")")
        ax.set_title(f"{'softmax' if att == 'dot' else 'L2'}, V = {'I' if var == 'identity' else 'MᵀM'}")
    axes[0].set_ylabel("draws")
    axes[0].legend(fontsize=7)
    return fig


def fractions_figure(fr: Fractions):
    """Per attention type, the fraction of each outcome against d, with Wilson 95 % intervals."""
    fig, axes = figure(len(fr.attentions), 1, width=2.6, height=2.8, sharey=True)
    axes = np.atleast_1d(axes)
    ds = np.array(fr.ds)
    for i, (ax, att) in enumerate(zip(axes, fr.attentions, strict=True)):
        for k, name in enumerate(fr.outcomes):
            p = fr.fraction[i, :, k]
            if not np.any(fr.count[i, :, k]):
                continue
            ax.errorbar(
                ds + 0.06 * (k - 2.5),
                p,
                yerr=[np.maximum(p - fr.low[i, :, k], 0.0), np.maximum(fr.high[i, :, k] - p, 0.0)],
                marker="o",
                ms=3,
                capsize=2,
                color=OUTCOME_COLORS[name],
                label=name,
            )
        ax.set_title(att)
        ax.set_xlabel("d")
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("fraction of draws")
    axes[-1].legend(fontsize=6, loc="upper right")
    return fig


def blowup_times_figure(times_by_d: dict[int, np.ndarray]):
    """The dot product's blow-up times, one box per d."""
    fig, ax = figure(1, 1, width=4.6, height=3.0)
    ds = sorted(times_by_d)
    ax.boxplot([times_by_d[d] for d in ds], positions=ds, widths=0.5, showfliers=True)
    ax.set_yscale("log")
    ax.set_xlabel("d")
    ax.set_ylabel(r"blow-up time $t^*$")
    return fig


def map_panels(atlas: AtlasMap, frames: list[tuple[int, int]]):
    """Static regime maps for the readers without JavaScript: the (eps, beta) frames listed."""
    from matplotlib.colors import ListedColormap

    names = [o.value for o in OUTCOMES]
    cmap = ListedColormap([OUTCOME_COLORS[n] for n in names])
    fig, axes = figure(len(frames), 1, width=2.9, height=2.9, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (e, b) in zip(axes, frames, strict=True):
        codes = np.vectorize({n: k for k, n in enumerate(names)}.get)(atlas.outcome[e, b])
        ax.imshow(
            codes,
            origin="lower",
            cmap=cmap,
            vmin=-0.5,
            vmax=len(names) - 0.5,
            aspect="auto",
            extent=(atlas.a[0], atlas.a[-1], atlas.v[0], atlas.v[-1]),
            interpolation="nearest",
        )
        ax.set_title(rf"$\varepsilon = {atlas.eps[e]:g}$, $\beta = {atlas.beta[b]:g}$")
        ax.set_xlabel(r"$a = \mathrm{Re}\,\lambda(A)$")
        ax.grid(False)
    axes[0].set_ylabel(r"$v$")
    handles = [
        __import__("matplotlib.patches", fromlist=["Patch"]).Patch(color=OUTCOME_COLORS[n], label=n) for n in names
    ]
    axes[-1].legend(handles=handles, fontsize=6, loc="lower right")
    return fig
