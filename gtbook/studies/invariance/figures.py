"""Figures of chapter 1: Gaussian invariance with real tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gtbook.studies.style import COLORS, figure, noise_band, plot_ellipse, reference_slope


def cloud_with_ellipses(
    tokens: np.ndarray, times: Sequence[float], mus: np.ndarray, Sigmas: np.ndarray, max_points: int = 3000
):
    """Token clouds at a few times, each with the moment ODE's 1- and 2-sigma ellipses."""
    fig, axes = figure(len(times), 1, width=3.3, height=3.2, sharex=True, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, x, t, mu, S in zip(axes, tokens, times, mus, Sigmas, strict=True):
        pts = x[:max_points]
        ax.scatter(pts[:, 0], pts[:, 1], s=2, alpha=0.35, color=COLORS["particles"], rasterized=True, label="tokens")
        for r, ls in ((1, "-"), (2, "--")):
            plot_ellipse(ax, mu, S, radius=r, ls=ls, lw=1.4, label=f"ODE {r}σ" if t == times[0] else None)
        ax.set_title(f"t = {t:g}")
        ax.set_xlabel("$x_1$")
        ax.set_aspect("equal", adjustable="box")
    axes[0].set_ylabel("$x_2$")
    axes[0].legend(loc="upper left", markerscale=4)
    return fig


def n_ticks(ax, Ns: Sequence[int]) -> None:
    """Label a log x-axis with the N values used, and nothing else (no colliding minor labels)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter, NullLocator

    ax.xaxis.set_major_locator(FixedLocator(list(Ns)))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{int(n)}" for n in Ns]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _errors_against_n(studies: Mapping[str, Any], label, ylabel: str):
    """Mean error over seeds (with its standard error) against N, log–log, one curve per study
    (``label(name, study)`` names it), and the N^(-1/2) reference line."""
    fig, ax = figure(1, 1, width=5.0, height=3.6)
    colors = [COLORS["particles"], COLORS["alt"], COLORS["target"]]
    for (name, st), c in zip(studies.items(), colors, strict=False):
        m = st.errors.mean(axis=1)
        sd = st.errors.std(axis=1, ddof=1) / np.sqrt(st.errors.shape[1])
        ax.errorbar(st.Ns, m, yerr=sd, marker="o", color=c, capsize=2, label=label(name, st))
    first = next(iter(studies.values()))
    reference_slope(ax, first.Ns, first.errors.mean(axis=1)[0], -0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    n_ticks(ax, sorted({int(n) for st in studies.values() for n in st.Ns}))
    ax.set_xlabel("number of tokens $N$")
    ax.set_ylabel(ylabel)
    ax.legend()
    return fig


def error_against_n(studies: Mapping[str, object]):
    """Moment error against N on log–log axes, one curve per setting, with the N^(-1/2) line."""
    return _errors_against_n(
        studies,
        lambda name, st: f"{name}: κ = {st.kappa:.2f}, slope {st.slope:.2f}",
        r"$\|\hat\mu - \mu\| + \|\hat\Sigma - \Sigma\|_F$ at $t = T$",
    )


def layer_errors(errors: Mapping[str, np.ndarray]):
    """Per-layer discrepancy between the token Transformer and the exact layer map."""
    fig, ax = figure(1, 1, width=5.0, height=3.2)
    for (label, e), c in zip(errors.items(), [COLORS["theory"], COLORS["particles"]], strict=False):
        ax.semilogy(np.arange(1, len(e) + 1), np.maximum(e, 1e-17), marker="o", color=c, label=label)
    ax.set_xlabel("layer $l$")
    ax.set_ylabel("relative moment discrepancy")
    ax.legend()
    return fig


def stack_error_against_n(studies: Mapping[str, object]):
    """Softmax-stack error against N (log–log), one curve per law, with the N^(-1/2) line.

    ``studies`` maps a label to a :class:`gtbook.studies.invariance.nongaussian.StackStudy`."""
    return _errors_against_n(
        studies,
        lambda name, st: f"{name}: slope {st.slope:.2f}",
        r"$\|\hat\mu_L - \mu_L\| + \|\hat\Sigma_L - \Sigma_L\|_F$",
    )


def statistics_with_controls(
    times: Sequence[float],
    flows: Mapping[str, Mapping[str, np.ndarray]],
    bands: Mapping[str, tuple[float, float]],
    controls: Mapping[str, Mapping[str, float]],
    level: float = 0.99,
):
    """Each Gaussianity statistic over time for several flows, inside the noise band, with the
    values of moment-matched non-Gaussian samples (controls) marked at t = 0."""
    names = list(bands)
    fig, axes = figure(len(names), 1, width=4.4, height=3.2)
    axes = np.atleast_1d(axes)
    colors = [COLORS["particles"], COLORS["alt"], COLORS["target"], COLORS["theory"]]
    markers = ["s", "^", "D", "v"]
    for ax, name in zip(axes, names, strict=True):
        lo, hi = bands[name]
        noise_band(ax, times, lo, hi, label=f"{int(level * 100)}% band of a Gaussian sample")
        for (label, stats), c in zip(flows.items(), colors, strict=False):
            ax.plot(times, stats[name], marker="o", ms=3, color=c, label=label)
        for (law, vals), mk in zip(controls.items(), markers, strict=False):
            ax.plot([times[0]], [vals[name]], marker=mk, ls="none", color="k", label=f"{law} (t = 0)")
        ax.set_yscale("log")
        ax.set_xlabel("time $t$")
        ax.set_ylabel(name)
    axes[0].legend(fontsize=7)
    return fig


def ode_animation(cloud, ode, *, max_frames: int = 40, max_tokens: int = 500, **kwargs):
    r"""Tokens following the moment ODE's ellipses (chapter 1), as an embedded animation.

    Parameters
    ----------
    cloud : :class:`gtcore.particles.ParticleTrajectory`
        A run with ``keep_tokens=True`` (record every step, or every few).
    ode : :class:`gtcore.moments.MomentTrajectory`
        The moment ODE from the same initial moments with ``t_eval=cloud.t``.
    max_frames, max_tokens, **kwargs : passed to :func:`gtbook.studies.animation.animate_clouds`

    Returns
    -------
    CloudAnimation
    """
    from gtbook.studies.animation import CloudPanel, animate_clouds, moments_at

    if getattr(cloud, "tokens", None) is None:
        raise ValueError("cloud has no tokens: run simulate(..., keep_tokens=True)")
    mu, Sigma = moments_at(ode, cloud.t, name="ode")
    kwargs.setdefault(
        "caption",
        "The token cloud (dots) moved by the Transformer with softmax attention, and "
        "the $2\\sigma$ ellipse of the Gaussian solving the moment ODE (1.1).",
    )
    return animate_clouds(
        CloudPanel(cloud.tokens, cloud.t, mu=mu, Sigma=Sigma, title="tokens and ODE"),
        max_frames=max_frames,
        max_tokens=max_tokens,
        **kwargs,
    )


def ensemble_figure(
    gauss_stack,
    uniform_stack,
    affine_gauss,
    affine_uniform,
    flow_values: np.ndarray,
    relu_values: np.ndarray,
    null_values: np.ndarray,
    threshold: float,
):
    r"""The chapter's statements over an ensemble of general layers (three panels).

    Left and middle: each draw's stack moment error (``gauss_stack``, ``uniform_stack``) and non-affine
    residual (``affine_gauss``, ``affine_uniform``; mean over seeds, divided by its value at the smallest N)
    against N, Gaussian tokens (blue) and the moment-matched uniform control
    (orange), with the :math:`N^{-1/2}` reference. Right: each draw's sliced :math:`W_2` at :math:`T` for
    the flow and for the flow plus a ReLU block, with their means (bars), over the null values of
    Gaussian samples (grey dots) and the 99% quantile of the null's ensemble mean (dashed).

    Parameters
    ----------
    gauss_stack, uniform_stack, affine_gauss, affine_uniform : :class:`gtbook.studies.invariance.ensemble.EnsembleStack`
    flow_values, relu_values : (draws,) arrays
    null_values : (n,) array
    threshold : float
    """
    fig, axes = figure(3, 1, width=3.8, height=3.4)
    panels = (
        (axes[0], "errors", "moment error", gauss_stack, uniform_stack),
        (axes[1], "nonaffine", "non-affine residual", affine_gauss, affine_uniform),
    )
    for ax, which, ylabel, g, u in panels:
        for st, c, name in ((g, COLORS["particles"], "Gaussian"), (u, COLORS["alt"], "uniform")):
            m = getattr(st, which).mean(axis=2)
            m = m / m[:, :1]
            slope = st.slope if which == "errors" else st.nonaffine_slope
            for k, row in enumerate(m):
                ax.plot(st.Ns, row, color=c, lw=0.8, alpha=0.7, label=f"{name}: slope {slope:.2f}" if k == 0 else None)
        reference_slope(ax, g.Ns, 1.0, -0.5, label="$N^{-1/2}$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens $N$")
        ax.set_ylabel(f"{ylabel} / its value at the smallest $N$")
        ax.legend(fontsize=7)
    bx = axes[2]
    rng = np.random.default_rng(0)
    bx.plot(
        rng.uniform(-0.25, 0.25, len(null_values)),
        null_values,
        ".",
        color=COLORS["floor"],
        ms=2,
        label="Gaussian samples (null)",
    )
    for x, vals, c, name in (
        (1.0, flow_values, COLORS["particles"], "flow"),
        (2.0, relu_values, COLORS["alt"], "flow + ReLU block"),
    ):
        bx.plot(np.full(len(vals), x), vals, "o", ms=4, color=c, label=name)
        bx.plot([x - 0.25, x + 0.25], [np.mean(vals)] * 2, color=c, lw=2)
    bx.axhline(threshold, color="k", ls="--", lw=1, label="99% quantile of the null's ensemble mean")
    bx.set_xticks([0, 1, 2], ["null", "flow", "ReLU"])
    bx.set_yscale("log")
    bx.set_ylabel("sliced $W_2$ at $t = T$")
    bx.legend(fontsize=7)
    return fig
