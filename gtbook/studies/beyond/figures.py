r"""Figures of the chapter *Where invariance ends*: ReLU feed-forward layers and Gaussian mixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.style import COLORS, figure, noise_band, reference_slope
from gtcore.attention import ATTENTION_TYPES

#: colours of mixture components / labels
LABEL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")

_NAMES = {
    "sliced_w2": r"sliced $W_2$ to the moment-matched Gaussian",
    "mardia_kurtosis_excess": r"Mardia kurtosis excess $b_{2,d}/d(d+2) - 1$",
    "mardia_skewness": r"Mardia skewness $b_{1,d}$",
}


def _series_colors(keys: Sequence[str]) -> dict:
    """Black for the identity control, a sequential colour map for the other runs."""
    others = [k for k in keys if k != "identity"]
    cmap = plt.get_cmap("plasma")
    cols: dict[str, Any] = {k: cmap(0.1 + 0.7 * i / max(len(others) - 1, 1)) for i, k in enumerate(others)}
    cols["identity"] = "k"
    return cols


def relu_gaussianity(
    paths: Mapping,
    floors: Mapping,
    *,
    level: float = 0.99,
    statistics: Sequence[str] = ("sliced_w2", "mardia_kurtosis_excess"),
) -> plt.Figure:
    """Distance to Gaussianity over time, one curve per run, with the noise-floor band.

    Parameters
    ----------
    paths : dict label -> :class:`gtbook.studies.beyond.harness.GaussianityPath` (whole-cloud statistics);
        the key ``"identity"`` is drawn in black as the control
    floors : dict statistic name -> :class:`gtcore.stats.gaussianity.NoiseFloor`
    level : band level
    statistics : the statistics to draw, one panel each (sliced W2 on log–log axes)
    """
    fig, axes = figure(len(statistics), 1, width=4.4, height=3.5)
    axes = np.atleast_1d(axes)
    cols = _series_colors(list(paths))
    for ax, name in zip(axes, statistics, strict=True):
        t_all: Any = None
        for key, p in paths.items():
            t, v = p.t[1:], p.statistics[name][1:]
            t_all = t
            ax.plot(t, v, marker="o", ms=3, color=cols[key], label=key, lw=2.2 if key == "identity" else 1.6)
        lo, hi = floors[name].band(level)
        noise_band(ax, t_all, lo, hi, label=f"Gaussian noise floor ({level:.0%} band)")
        ax.set_xscale("log")
        if name == "sliced_w2":
            ax.set_yscale("log")
        ax.set_xlabel(r"time $t$")
        ax.set_ylabel(_NAMES.get(name, name))
    axes[0].legend(loc="upper left")
    return fig


def prediction_error(
    paths: Mapping, tol: float, *, slope_until: float | None = None, tol_label: str = "tolerance"
) -> plt.Figure:
    r"""Relative Bures–Wasserstein error of the identity-activation moment ODE, log–log, with the tolerance.

    Parameters
    ----------
    paths : dict label -> :class:`gtbook.studies.beyond.harness.GaussianityPath`
    tol : the tolerance (horizontal line)
    tol_label : its legend label (followed by its value)
    slope_until : draw a slope-1 reference line from the first time up to this time
    """
    fig, ax = figure(1, 1, width=5.0, height=3.6)
    cols = _series_colors(list(paths))
    first = None
    for key, p in paths.items():
        t, e = p.t[1:], p.prediction_error[1:]
        ax.plot(t, e, marker="o", ms=3, color=cols[key], label=key)
        if key != "identity" and first is None:
            first = (t, e)
    ax.axhline(tol, color=COLORS["floor"], ls=":", lw=1.2, label=f"{tol_label} {tol:g}")
    if first is not None and slope_until is not None:
        t, e = first
        seg = t[t <= slope_until]
        if seg.size >= 2:
            reference_slope(ax, seg, 0.6 * e[0], 1.0, label=r"$\propto t$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"time $t$")
    ax.set_ylabel(r"$W_2(\hat\rho_t, \bar\rho_t)\,/\,\sqrt{\mathrm{tr}\,\bar\Sigma_t}$")
    ax.legend(loc="lower right", ncol=2)
    return fig


def mixture_gaussianity(
    mixture_path,
    control_path,
    floors: Mapping,
    final_labels: np.ndarray,
    *,
    level: float = 0.99,
    statistics: Sequence[str] = ("sliced_w2", "mardia_kurtosis_excess"),
) -> plt.Figure:
    """Per-component Gaussianity of a mixture against a single-Gaussian control.

    Left: the mixture's tokens at the final time, coloured by component. Then one panel per
    statistic: each component (solid) and the control's sub-cloud with the same label (dashed),
    with each label's own noise-floor band.

    Parameters
    ----------
    mixture_path, control_path : :class:`gtbook.studies.beyond.harness.GaussianityPath` with per-label statistics
    floors : dict statistic name -> list of :class:`gtcore.stats.gaussianity.NoiseFloor`, one per label
    final_labels : (N,) labels of the mixture's tokens
    """
    fig, axes = figure(1 + len(statistics), 1, width=3.9, height=3.5)
    ax = axes[0]
    x = mixture_path.final_tokens
    for k in range(int(final_labels.max()) + 1):
        sel = final_labels == k
        ax.scatter(
            x[sel, 0],
            x[sel, 1],
            s=2,
            alpha=0.35,
            color=LABEL_COLORS[k % len(LABEL_COLORS)],
            label=f"component {k + 1}",
            rasterized=True,
        )
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(r"$x_1$")
    ax.set_ylabel(r"$x_2$")
    ax.set_title(f"mixture tokens at $t = {mixture_path.t[-1]:g}$")
    ax.legend(loc="upper right", markerscale=4)
    for ax, name in zip(axes[1:], statistics, strict=True):
        t = mixture_path.t[1:]
        for k, fl in enumerate(floors[name]):
            col = LABEL_COLORS[k % len(LABEL_COLORS)]
            lo, hi = fl.band(level)
            noise_band(
                ax, t, lo, hi, color=col, alpha=0.15, label=f"noise floor, $n = {fl.n}$" if k == 0 else f"$n = {fl.n}$"
            )
            ax.plot(t, mixture_path.statistics[name][1:, k], color=col, marker="o", ms=3, label=f"component {k + 1}")
            ax.plot(
                t,
                control_path.statistics[name][1:, k],
                color=col,
                ls="--",
                lw=1.2,
                label="single-Gaussian control" if k == 0 else None,
            )
        ax.set_xscale("log")
        if name == "sliced_w2":
            ax.set_yscale("log")
        ax.set_xlabel(r"time $t$")
        ax.set_ylabel(_NAMES.get(name, name))
    axes[1].legend(loc="upper left", fontsize=7)
    return fig


def mixture_attention(mixture, B: np.ndarray, *, span: float = 3.0, n: int = 241) -> plt.Figure:
    r"""Why mixtures are not invariant: the attention average along the :math:`x_1` axis.

    Draws the first coordinate of the exact attention average against the mixture,
    (:meth:`gtcore.attention.DotProduct.mixture_average`), and against its moment-matched Gaussian
    (the tilt, :meth:`gtcore.attention.DotProduct.tilt`: a straight line), at queries :math:`x = (s, 0, \dots)`.

    Parameters
    ----------
    mixture : :class:`gtcore.stats.mixtures.GaussianMixture`
    B : (d, d) query-key matrix
    span : queries for :math:`s \in [-\text{span}, \text{span}]`
    """
    s = np.linspace(-span, span, n)
    q = np.zeros((n, mixture.d))
    q[:, 0] = s
    mix = mixture.attention_average(q, B)[:, 0]
    mu, Sigma = mixture.moments()
    M, c = ATTENTION_TYPES["dot"].tilt(mu, Sigma, np.asarray(B, float))  # the Gaussian tilt M x + c
    gauss = (q @ M.T + c)[:, 0]
    fig, ax = figure(1, 1, width=5.0, height=3.5)
    ax.plot(s, gauss, color=COLORS["theory"], label=r"moment-matched Gaussian: $\mu + \Sigma B x$ (affine)")
    ax.plot(s, mix, color=COLORS["particles"], label=r"mixture: $\sum_k \pi_k(x)(\mu_k + \Sigma_k B x)$")
    for k in range(mixture.components):
        ax.axvline(mixture.means[k, 0], color=LABEL_COLORS[k % len(LABEL_COLORS)], ls=":", lw=1.0)
    ax.set_xlabel(r"query $x = (s, 0)$")
    ax.set_ylabel(r"first coordinate of the attention average")
    ax.legend(loc="upper left")
    return fig


def relu_departure_rates(t: np.ndarray, rates: Mapping) -> plt.Figure:
    r"""Short-time departure of ReLU clouds from the identity-activation cloud against the closed form.

    ``rates`` maps :math:`c_0` to a dict with ``D`` (the departure over ``t``), ``closed`` (the
    closed-form rate :math:`r(c_0)`), ``measured`` (:math:`D(t_1)/t_1`) and ``band`` (the 99% sampling
    band of measured / closed). Left: :math:`D(t)` and :math:`r(c_0)t`, log–log; right: the ratio with
    its band at each :math:`c_0`."""
    fig, (ax, bx) = figure(2, 1, width=4.4, height=3.4)
    cols = _series_colors([f"ReLU, c0={c0:g}" for c0 in rates])
    for c0, r in rates.items():
        col = cols[f"ReLU, c0={c0:g}"]
        ax.plot(t[1:], r["D"][1:], marker="o", ms=3, color=col, label=f"$c_0 = {c0:g}$")
        ax.plot(t[1:], r["closed"] * t[1:], ls="--", color=col, lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time $t$")
    ax.set_ylabel(r"$D(t)$ (dashed: $r(c_0)\,t$)")
    ax.legend(fontsize=7)
    c0s = np.array(list(rates))
    ratio = np.array([r["measured"] / r["closed"] for r in rates.values()])
    lo = np.array([r["band"][0] for r in rates.values()])
    hi = np.array([r["band"][1] for r in rates.values()])
    bx.errorbar(
        c0s,
        0.5 * (lo + hi),
        yerr=0.5 * (hi - lo),
        fmt="none",
        ecolor=COLORS["floor"],
        capsize=4,
        lw=6,
        alpha=0.4,
        label="99% sampling band",
    )
    bx.plot(c0s, ratio, "o", color=COLORS["particles"], label="measured / closed form")
    bx.axhline(1.0, color=COLORS["theory"], lw=1)
    bx.set_xlabel("kink offset $c_0$")
    bx.set_ylabel("rate ratio")
    bx.legend(fontsize=7)
    return fig
