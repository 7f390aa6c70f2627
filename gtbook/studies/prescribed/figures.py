r"""Figures of the prescribed-attention chapter: covariance norm per layer, blow-up depth vs h."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.style import COLORS, figure, reference_slope


def _finite(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, float).copy()
    y[~np.isfinite(y)] = np.nan
    return y


def regimes_figure(
    destab: Sequence,
    stab: Sequence,
    *,
    layer_norm: Sequence = (),
    unscaled: Sequence = (),
    no_affine: Sequence = (),
    factor: float = 1e3,
    Sigma_star_norm: float | None = None,
) -> plt.Figure:
    r""":math:`\|\Sigma_\ell\|_F / \|\Sigma_0\|_F` per layer, one column per family.

    Top: the destabilising configuration; the real model (blue), the exact layer map (red
    dots), the moment ODE at :math:`t = \ell h` (red line), :math:`t^*/h` (dashed), the
    threshold ``factor`` (dotted) and, when given, the LayerNorm model (orange) and the unscaled
    matrices (grey). Bottom: the stabilising configuration, with :math:`\|\Sigma^*_h\|_F` of the
    layer map (dashed) and the model without :math:`A` (grey). Arguments are sequences of
    :class:`gtbook.studies.prescribed.harness.PrescribedRun`, one per family, in the same order.
    """
    n = len(destab)
    fig, axes = figure(n, 2, width=3.5, height=3.0, squeeze=False)
    for k, run in enumerate(destab):
        ax = axes[0, k]
        ell = np.arange(run.Sigma_model.shape[0])
        ax.semilogy(ell, run.model_ratio, color=COLORS["particles"], marker=".", label="model")
        ax.semilogy(ell, _finite(run.map_ratio), "o", mfc="none", color=COLORS["theory"], ms=5, label="layer map")
        ax.semilogy(run.t_ode / run.h, run.ode_ratio, color=COLORS["theory"], lw=1, label="moment ODE")
        if k < len(layer_norm):
            ax.semilogy(ell, layer_norm[k].model_ratio, color=COLORS["alt"], label="model, LayerNorm")
        if k < len(unscaled):
            ax.semilogy(ell, unscaled[k].model_ratio, color=COLORS["floor"], ls="-.", label="model, unscaled B")
        ax.axvline(run.t_star / run.h, color="k", ls="--", lw=1, label=r"$t^*/h$")
        ax.axhline(factor, color=COLORS["floor"], ls=":", lw=1)
        ax.set_ylim(0.5, 1e5)
        ax.set_title(f"{run.family}: same definiteness")
        ax.set_xlabel(r"layer $\ell$")
        if k == 0:
            ax.set_ylabel(r"$\|\Sigma_\ell\|_F / \|\Sigma_0\|_F$")
            ax.legend(loc="upper left", fontsize=7)
    for k, run in enumerate(stab):
        ax = axes[1, k]
        ell = np.arange(run.Sigma_model.shape[0])
        ax.plot(ell, run.model_ratio, color=COLORS["particles"], label="model")
        ax.plot(ell, _finite(run.map_ratio), color=COLORS["theory"], ls="--", lw=1.2, label="layer map")
        ax.plot(run.t_ode / run.h, run.ode_ratio, color=COLORS["theory"], lw=0.8, alpha=0.6, label="moment ODE")
        if k < len(no_affine):
            ax.plot(ell, no_affine[k].model_ratio, color=COLORS["floor"], label="model, A = 0")
        if Sigma_star_norm is not None:
            ax.axhline(Sigma_star_norm, color="k", ls=":", lw=1, label=r"$\|\Sigma^*_h\|_F / \|\Sigma_0\|_F$")
        ax.set_title(f"{run.family}: opposite definiteness")
        ax.set_xlabel(r"layer $\ell$")
        if k == 0:
            ax.set_ylabel(r"$\|\Sigma_\ell\|_F / \|\Sigma_0\|_F$")
            ax.legend(fontsize=7)
    return fig


def depth_convergence_figure(dc) -> plt.Figure:
    r""":math:`|\ell^* h - t^*|` against :math:`h` (log–log) with a slope-1 reference line."""
    fig, ax = figure(1, 1, width=4.4, height=3.4)
    ax.loglog(dc.hs, dc.errors, "o-", color=COLORS["theory"], label=r"$|\ell^*h - t^*|$, layer map")
    reference_slope(ax, dc.hs, dc.errors[0], 1.0, label=r"$\propto h$")
    ax.set_xlabel(r"layer size $h$")
    ax.set_ylabel(r"$|\ell^* h - t^*|$")
    ax.set_title(rf"fitted order {dc.order:.2f}")
    ax.legend()
    return fig


def layers_animation(
    tokens_destab: np.ndarray,
    destab,
    tokens_stab: np.ndarray,
    stab,
    *,
    max_frames: int = 25,
    max_tokens: int = 300,
    **kwargs,
):
    r"""The token cloud layer by layer with the layer map's ellipse: destabilising vs stabilising.

    Left: the hidden states of the destabilising model (:math:`V, B` of the same definiteness)
    with the :math:`2\sigma` ellipse of :math:`N(0, \Sigma^{\text{map}}_\ell)`, the exact layer map
    from the input's moments; the axes follow the cloud, and the annotation gives
    :math:`\|\hat\Sigma_\ell\|_F/\|\hat\Sigma_0\|_F` for the model and the layer map. Right: the
    stabilising model settling onto the layer map's fixed point. The ellipses are centred at 0: the
    chapter's antithetic cloud keeps its mean exactly 0, and so does the layer map with ``b = 0``.

    Parameters
    ----------
    tokens_destab, tokens_stab : (L + 1, N, d) arrays
        Hidden states (:func:`gtcore.models.prescribed.hidden_states`) of the two models on the same input.
    destab, stab : :class:`gtbook.studies.prescribed.harness.PrescribedRun`
        The runs of the same models (their ``Sigma_map`` and norm ratios are drawn).
    max_frames, max_tokens, **kwargs : passed to :func:`gtbook.studies.animation.animate_clouds`

    Returns
    -------
    CloudAnimation
    """
    from gtbook.studies.animation import CloudPanel, animate_clouds

    panels = []
    for X, run, name in ((tokens_destab, destab, "same definiteness"), (tokens_stab, stab, "opposite")):
        X = np.asarray(X, float)
        if X.shape[0] != run.Sigma_map.shape[0]:
            raise ValueError(
                f"tokens of {name}: {X.shape[0]} hidden states but the run has {run.Sigma_map.shape[0]} layers (L + 1)"
            )
        mr, pr = run.model_ratio, run.map_ratio
        notes = [
            f"\u2016\u03a3\u2113\u2016/\u2016\u03a3\u2080\u2016: model {m:.3g}, map {p:.3g}"
            for m, p in zip(mr, pr, strict=True)
        ]  # plain text: mathtext per frame is slow
        mu = np.zeros((X.shape[0], X.shape[2]))
        panels.append(
            CloudPanel(
                X,
                np.arange(X.shape[0]),
                mu=mu,
                Sigma=run.Sigma_map,
                annotations=notes,
                title=f"{run.family}, {name}",
                time_label="layer \u2113",
                limits="follow" if name == "same definiteness" else "fixed",
            )
        )
    caption = (
        f"{destab.family}, layer by layer: the hidden-state cloud and the layer map's $2\\sigma$ "
        "ellipse; destabilising (left) blows up, stabilising (right) settles on $\\Sigma^*_h$."
    )
    kwargs.setdefault("caption", caption)
    return animate_clouds(panels, max_frames=max_frames, max_tokens=max_tokens, **kwargs)


def beta_figure(bd, beta_used: float, null_scale: float | None = None) -> plt.Figure:
    r"""The agreement with the layer map against the logit scale :math:`\beta` (same :math:`vB`), two panels.

    Left: the relative covariance deviation at the last layer where the layer map is within the cut of
    its start, log–log, with the :math:`\beta` the chapter uses (dotted) and, when given, the size of the
    finite-N null there (dashed). Right: the gap between the model's and the layer map's blow-up depths,
    with ``inf`` (no crossing) drawn at the top.

    Parameters
    ----------
    bd : :class:`gtbook.studies.prescribed.harness.BetaDependence`
    beta_used : float
    null_scale : float, optional
    """
    fig, (ax, bx) = figure(2, 1, width=4.0, height=3.2)
    ax.loglog(bd.betas, bd.deviation, "o-", color=COLORS["particles"], label="model vs layer map")
    ax.axvline(beta_used, color="k", ls=":", lw=1, label=rf"$\beta$ used ({beta_used:g})")
    if null_scale is not None:
        ax.axhline(null_scale, color=COLORS["floor"], ls="--", lw=1, label="finite-$N$ null (one cloud, sd)")
    ax.set_xlabel(r"logit scale $\beta$ (same $vB$)")
    ax.set_ylabel(r"$\|\hat\Sigma_\ell - \Sigma^{\rm map}_\ell\|_F / \|\Sigma^{\rm map}_\ell\|_F$")
    ax.legend(fontsize=7)
    gap = np.where(np.isfinite(bd.depth_gap), bd.depth_gap, np.nan)
    top = np.nanmax(np.concatenate([gap[np.isfinite(gap)], [1.0]])) + 2
    bx.semilogx(bd.betas, np.where(np.isfinite(bd.depth_gap), bd.depth_gap, top), "s-", color=COLORS["particles"])
    bx.axhline(1.5, color=COLORS["floor"], ls=":", lw=1, label="the claim's 1 layer")
    bx.axvline(beta_used, color="k", ls=":", lw=1)
    bx.set_xlabel(r"logit scale $\beta$")
    bx.set_ylabel("|model depth - layer-map depth| (top: never crosses)")
    bx.legend(fontsize=7)
    return fig


def general_figure(result) -> plt.Figure:
    r"""Prescribed regimes with general parameters (:class:`~gtbook.studies.prescribed.general.GeneralRegimes`).

    Top: :math:`\|\Sigma_\ell\|_F/\|\Sigma_0\|_F` per layer for each draw, the model (dots, first Gaussian
    cloud) on the layer map (line). Bottom: Hotelling's :math:`T^2` over its 99 % quantile per layer, Gaussian
    clouds (solid) and moment-matched uniform clouds (dashed); destabilising draws mark the last layer with
    :math:`\kappa < 1/2` (open circle). Left: destabilising; right: stabilising; one colour per encoder."""
    fig, axes = figure(2, 2, width=4.4, height=2.9, squeeze=False)
    colors = {"bert": COLORS["particles"], "vit": COLORS["alt"], "modernbert": COLORS["target"]}
    for j, regime in enumerate(("destabilising", "stabilising")):
        top, bot = axes[0, j], axes[1, j]
        seen: set[str] = set()
        for r in result.of(regime):
            c = colors.get(r.family, "k")
            label = r.family if r.family not in seen else None
            seen.add(r.family)
            ell = np.arange(len(r.map_norm))
            top.semilogy(ell, _finite(r.map_norm), color=c, lw=1.0, label=label)
            top.semilogy(ell, r.model_norm, ".", color=c, ms=3)
            lay = np.arange(1, len(r.gauss) + 1)
            bot.semilogy(lay, _finite(r.gauss), color=c, lw=1.0)
            bot.semilogy(lay, _finite(r.uniform), color=c, lw=1.0, ls="--")
            if regime == "destabilising":
                bot.plot(r.compared, r.gauss[r.compared - 1], "o", mfc="none", color=c)
        bot.axhline(1.0, color="k", lw=0.8, ls=":")
        top.set_title(f"{regime}: model (dots) on the layer map")
        top.set_ylabel(r"$\|\Sigma_\ell\|_F / \|\Sigma_0\|_F$")
        bot.set_ylabel(r"Hotelling $T^2 / q_{0.99}$")
        bot.set_xlabel(r"layer $\ell$")
        top.legend(fontsize=7)
        if regime == "destabilising":
            top.set_ylim(0.5, 1e5)
            bot.set_ylim(1e-2, 1e4)
    axes[1, 1].plot([], [], "k-", lw=1.0, label="Gaussian clouds")
    axes[1, 1].plot([], [], "k--", lw=1.0, label="uniform clouds (control)")
    axes[1, 1].legend(fontsize=7)
    return fig
