r"""Figures of the rank-and-reachability chapter (each function returns a Figure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from gtbook.studies.style import COLORS, STYLE, ellipse_points, figure, plot_ellipse, reference_slope

if TYPE_CHECKING:
    from gtbook.studies.reachability.harness import RankInvariance


def rank_figure(result: RankInvariance, tokens=None) -> plt.Figure:
    r"""Left: singular values of :math:`\Sigma(t)` (log scale); right: the largest relative null
    singular value :math:`\eta` against the solver tolerance (from
    :func:`gtbook.studies.reachability.harness.rank_invariance`); with ``tokens`` (a
    :class:`~gtbook.studies.reachability.sections.RankTokensStudy`) a third panel: the excess spread of token
    clouds against N, Gaussian and uniform (as ``ensemble_vs_n_figure``)."""
    if tokens is not None:
        fig, (ax1, ax2, ax3) = figure(3, 1, width=3.3, height=3.0)
        g, u = tokens.gauss, tokens.uniform
        _bundles(
            ax3,
            "excess spread $\\epsilon$",
            [("Gaussian", g.Ns, g.excess, g.slope), ("uniform (control)", u.Ns, u.excess, u.slope)],
        )
        ax3.set_title("on $N$ softmax tokens")
    else:
        fig, (ax1, ax2) = figure(2, 1, width=4.3)
    t, sv, r = result.t, result.singular_values, result.rank0
    floor = np.finfo(float).tiny
    for k in range(sv.shape[1]):
        color = COLORS["theory"] if k < r else COLORS["floor"]
        ax1.semilogy(
            t,
            np.maximum(sv[:, k], floor),
            color=color,
            alpha=1.0 if k < r else 0.8,
            label=("non-zero" if k == 0 else None) if k < r else ("zero at $t=0$" if k == r else None),
        )
    ax1.axhline(
        np.finfo(float).eps * sv[:, 0].max(), color="k", ls=":", lw=1, label=r"$\varepsilon_{\rm mach}\,\max\sigma_1$"
    )
    ax1.set_xlabel("$t$")
    ax1.set_ylabel(r"singular values of $\Sigma(t)$")
    ax1.set_title(f"rank {r} of d = {sv.shape[1]}: the zero ones stay zero")
    ax1.legend(loc="center right")
    ax2.loglog(result.rtols, np.maximum(result.eta, floor), "o-", color=COLORS["theory"])
    ax2.loglog(result.rtols, result.rtols, "--", color="k", lw=1, label="= rtol")
    ax2.set_xlabel("solver relative tolerance")
    ax2.set_ylabel(r"$\eta=\max_t\,\sigma_{r+1}/\sigma_1$")
    ax2.set_title("null singular values are solver error")
    ax2.legend()
    return fig


_TIME_CMAP = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.0, 0.9, 256)))


def _time_colors(n: int):
    return _TIME_CMAP(np.linspace(0.0, 1.0, n))


def steering_figure(traj2, target2: tuple[Any, Any], traj3, target3: tuple[Any, Any], snapshots: int = 9) -> plt.Figure:
    r"""Left: a d = 2 Gaussian's 2-sd ellipse along the steering trajectory (colour = time),
    the target dashed. Right: a rank-1 Gaussian in d = 3, drawn as its 2-sd segment
    :math:`\mu \pm 2\sqrt{\lambda_1}u_1`, steered to another rank-1 target."""
    plt.rcParams.update(STYLE)
    fig = plt.figure(figsize=(9.0, 4.0), constrained_layout=True)
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2, projection="3d")
    idx = np.linspace(0, len(traj2.t) - 1, snapshots).round().astype(int)
    for c, i in zip(_time_colors(len(idx)), idx, strict=True):
        plot_ellipse(ax1, traj2.mu[i], traj2.Sigma[i], color=c, lw=1.2)
        ax1.plot(*traj2.mu[i], ".", color=c)
    ax1.plot(traj2.mu[:, 0], traj2.mu[:, 1], color="k", lw=0.8, alpha=0.5, label="mean path")
    plot_ellipse(ax1, target2[0], target2[1], color=COLORS["target"], ls="--", lw=2.2, label="target")
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.set_xlabel("$x_1$")
    ax1.set_ylabel("$x_2$")
    ax1.set_title("d = 2: ellipse steered in time T")
    ax1.legend(loc="best")
    idx = np.linspace(0, len(traj3.t) - 1, snapshots).round().astype(int)

    def segment(mu, S):
        w, U = np.linalg.eigh(S)
        half = 2 * np.sqrt(max(w[-1], 0.0)) * U[:, -1]
        return np.stack([mu - half, mu + half])

    for c, i in zip(_time_colors(len(idx)), idx, strict=True):
        seg = segment(traj3.mu[i], traj3.Sigma[i])
        ax2.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=c, lw=1.6)
    seg = segment(*target3)
    ax2.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=COLORS["target"], ls="--", lw=2.5, label="target")
    ax2.plot(traj3.mu[:, 0], traj3.mu[:, 1], traj3.mu[:, 2], color="k", lw=0.8, alpha=0.5)
    ax2.set_xlabel("$x_1$")
    ax2.set_ylabel("$x_2$")
    ax2.set_zlabel("$x_3$")
    ax2.set_title("d = 3, rank 1: a segment steered")
    ax2.legend(loc="upper left")
    sm = plt.cm.ScalarMappable(cmap=_TIME_CMAP, norm=plt.Normalize(0, traj3.t[-1]))
    fig.colorbar(sm, ax=[ax1, ax2], shrink=0.7, label="$t$")
    return fig


def distance_vs_n_figure(ns: Sequence[int] | np.ndarray, distances: np.ndarray, slope: float) -> plt.Figure:
    r"""Bures–Wasserstein distance of the steered token cloud's moments to the target, against
    N (each repeat a dot, the geometric mean a line), with the :math:`N^{-1/2}` reference."""
    fig, ax = figure(1, 1, width=5.0, height=3.6)
    ns = np.asarray(ns, float)
    D = np.asarray(distances, float)
    for j in range(D.shape[1]):
        ax.loglog(ns, D[:, j], ".", color=COLORS["particles"], alpha=0.35, label="one sample" if j == 0 else None)
    gm = np.exp(np.log(D).mean(axis=1))
    ax.loglog(ns, gm, "o-", color=COLORS["particles"], label=f"geometric mean (slope {slope:.2f})")
    reference_slope(ax, ns, gm[0], -0.5, label=r"$\propto N^{-1/2}$")
    ax.set_xlabel("number of tokens $N$")
    ax.set_ylabel(r"$W_2(N(\hat\mu_N(T),\hat\Sigma_N(T)),\ N(\mu_1,\Sigma_1))$")
    ax.set_title("steered tokens: sampling error only")
    ax.legend()
    return fig


def attention_figure(
    comp_traj,
    uncomp_traj,
    tokens: np.ndarray,
    start: tuple[Any, Any],
    target: tuple[Any, Any],
    t: np.ndarray,
    norms_comp: np.ndarray,
    norms_base: np.ndarray,
) -> plt.Figure:
    r"""Left: steering with attention on. Initial and target ellipses, the moment ODE under the
    compensated controls (its path and endpoint) and under the attention-free controls with the
    heads left on (uncompensated), and N tokens moved by the compensated controls with empirical
    softmax attention. Right: :math:`\|A(t)\|_F` of the compensated and attention-free controls."""
    fig, (ax1, ax2) = figure(2, 1, width=4.4, height=3.8)
    ax1.scatter(
        tokens[:, 0], tokens[:, 1], s=2, color=COLORS["particles"], alpha=0.25, label=f"{len(tokens)} tokens at $T$"
    )
    plot_ellipse(ax1, *start, color=COLORS["floor"], lw=1.2, label="start")
    plot_ellipse(ax1, *target, color=COLORS["target"], ls="--", lw=2.4, label="target")
    plot_ellipse(ax1, comp_traj.mu[-1], comp_traj.Sigma[-1], color=COLORS["theory"], lw=1.2, label="compensated (ODE)")
    ax1.plot(comp_traj.mu[:, 0], comp_traj.mu[:, 1], color=COLORS["theory"], lw=0.8)
    mu_u, S_u = uncomp_traj.mu[-1], uncomp_traj.Sigma[-1]
    pts = ellipse_points(mu_u, S_u)
    ax1.plot(pts[:, 0], pts[:, 1], color=COLORS["alt"], lw=1.2, label="heads on, uncompensated")
    ax1.plot(uncomp_traj.mu[:, 0], uncomp_traj.mu[:, 1], color=COLORS["alt"], lw=0.8)
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.set_xlabel("$x_1$")
    ax1.set_ylabel("$x_2$")
    ax1.set_title("attention on, held fixed")
    ax1.legend(loc="best", fontsize=7)
    ax2.plot(t, norms_comp, color=COLORS["theory"], label=r"compensated $A(t)$")
    ax2.plot(t, norms_base, color=COLORS["floor"], ls="--", label=r"attention-free $\tilde A(t)$")
    ax2.set_xlabel("$t$")
    ax2.set_ylabel(r"$\|A(t)\|_F$")
    ax2.set_title("the controls absorb the attention")
    ax2.legend()
    return fig


def energy_figure(
    t: np.ndarray,
    constructive: tuple[np.ndarray, np.ndarray],
    optimal: tuple[np.ndarray, np.ndarray],
    energies: tuple[float, float],
) -> plt.Figure:
    r"""The control paths :math:`\|A(t)\|_F` (left) and :math:`\|b(t)\|` (right) of the
    constructive and minimum-energy controls, energies in the legend."""
    fig, (ax1, ax2) = figure(2, 1, width=4.2)
    labels = (f"constructive (E = {energies[0]:.3g})", f"minimum energy (E = {energies[1]:.3g})")
    for ax, k, name in ((ax1, 0, r"$\|A(t)\|_F$"), (ax2, 1, r"$\|b(t)\|$")):
        ax.plot(t, constructive[k], color=COLORS["floor"], ls="--", label=labels[0])
        ax.plot(t, optimal[k], color=COLORS["theory"], label=labels[1])
        ax.set_xlabel("$t$")
        ax.set_ylabel(name)
    ax1.legend()
    ax1.set_title(r"energy $\int_0^T\|A\|_F^2+\|b\|^2\,dt$")
    return fig


def steering_animation(run, ode, target: tuple[Any, Any], *, max_frames: int = 40, max_tokens: int = 400, **kwargs):
    r"""A token cloud steered onto a Gaussian target with attention on (chapter 3), animated.

    Parameters
    ----------
    run : :class:`gtcore.particles.ParticleTrajectory`
        The tokens under the steering controls (``simulate(x0, controls, (0, T), steps,
        keep_tokens=True, attention="empirical")``).
    ode : :class:`gtcore.moments.MomentTrajectory`
        The moment ODE under the same controls with ``t_eval=run.t`` (its ellipse is drawn).
    target : (mu1, Sigma1)
        The target Gaussian (dashed ellipse).
    max_frames, max_tokens, **kwargs : passed to :func:`gtbook.studies.animation.animate_clouds`

    Returns
    -------
    CloudAnimation
    """
    from gtbook.studies.animation import CloudPanel, animate_clouds, moments_at

    if getattr(run, "tokens", None) is None:
        raise ValueError("run has no tokens: run simulate(..., keep_tokens=True)")
    mu, Sigma = moments_at(ode, run.t, name="ode")
    m1, S1 = np.asarray(target[0], float), np.asarray(target[1], float)
    emp = np.asarray(run.mu, float)
    notes = [f"|mean - target mean| = {np.linalg.norm(m - m1):.3f}" for m in emp]
    kwargs.setdefault(
        "caption",
        "Exact steering with attention on: the tokens (softmax attention over the "
        "cloud) and the moment ODE's $2\\sigma$ ellipse land on the target (dashed) "
        "at $t = T$.",
    )
    return animate_clouds(
        CloudPanel(
            run.tokens, run.t, mu=mu, Sigma=Sigma, target=(m1, S1), annotations=notes, title="steering, attention on"
        ),
        max_frames=max_frames,
        max_tokens=max_tokens,
        **kwargs,
    )


def _n_ticks(ax, Ns) -> None:
    """Label the log N axis at the token counts themselves (no overlapping minor labels)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(Ns))
    ax.set_xticklabels([str(int(n)) for n in Ns])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _bundles(ax, ylabel: str, series) -> None:
    """Per-draw curves of each series (mean over seeds, divided by the value at the smallest N), and N^-1/2."""
    colors = [COLORS["particles"], COLORS["alt"], COLORS["target"]]
    for (label, Ns, values, slope), c in zip(series, colors, strict=False):
        m = np.asarray(values, float).mean(axis=2)
        m = m / m[:, :1]
        for k, row in enumerate(m):
            ax.plot(Ns, row, color=c, lw=0.8, alpha=0.7, label=f"{label}: slope {slope:.2f}" if k == 0 else None)
    Ns0 = np.asarray(series[0][1], float)
    ax.plot(Ns0, (Ns0 / Ns0[0]) ** -0.5, "k--", lw=1.0, label="$N^{-1/2}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _n_ticks(ax, Ns0)
    ax.set_xlabel("tokens $N$")
    ax.set_ylabel(f"{ylabel}, relative to the smallest $N$")
    ax.legend(fontsize=7)


def ensemble_vs_n_figure(panels: Sequence[tuple[str, Sequence[tuple[str, Any, np.ndarray, float]]]]) -> plt.Figure:
    r"""Per-draw curves against N, one panel per statistic, with the :math:`N^{-1/2}` reference.

    Parameters
    ----------
    panels : sequence of ``(ylabel, series)``, each series a sequence of ``(label, Ns, values, slope)``
        with ``values`` of shape (draws, len(Ns), seeds): each draw's mean over seeds is drawn as a thin
        line, divided by its value at the smallest N (so the draws share a start), and the label shows
        the pooled slope.

    Returns
    -------
    matplotlib Figure
    """
    fig, axes = figure(len(panels), 1, width=4.2, height=3.4)
    axes = np.atleast_1d(axes)
    for ax, (ylabel, series) in zip(axes, panels, strict=False):
        _bundles(ax, ylabel, series)
    return fig


def heads_figure(steered, measured) -> plt.Figure:
    r"""Steering with a head held fixed on N tokens, two compensations (rows) and two distances (columns).

    Top: the paper's compensation (:class:`~gtbook.studies.reachability.sections.SteeredStudy`); bottom: the
    response measured on a pilot cloud (:class:`~gtbook.studies.reachability.measured.MeasuredSteering`). Left:
    the distance to the target :math:`D_N`; right: the distance to eq. (1.1) from the cloud's own moments
    :math:`E_N`; with their controls (:math:`B^\top`), as in ``ensemble_vs_n_figure``."""
    fig, axes = figure(2, 2, width=4.2, height=2.7, squeeze=False)
    g, c, m = steered.gauss, steered.transposed, measured
    _bundles(axes[0, 0], "$D_N$", [("tokens", g.Ns, g.distance, g.slope)])
    _bundles(
        axes[0, 1],
        "$E_N$",
        [
            ("tokens", g.Ns, g.dynamic, g.dynamic_slope),
            ("tokens' head $B^\\top$ (control)", c.Ns, c.dynamic, c.dynamic_slope),
        ],
    )
    _bundles(
        axes[1, 0],
        "$D_N$",
        [
            ("tokens", m.Ns, m.distance, m.slope("distance")),
            ("tokens' head $B^\\top$ (control)", m.Ns, m.distance_transposed, m.slope("distance_transposed")),
        ],
    )
    _bundles(
        axes[1, 1],
        "$E_N$",
        [
            ("eq. (1.1)", m.Ns, m.dynamic, m.slope("dynamic")),
            ("eq. (1.1) with $B^\\top$ (control)", m.Ns, m.dynamic_transposed, m.slope("dynamic_transposed")),
        ],
    )
    titles = (
        "to the target; compensation by eq. (1.1)",
        "to eq. (1.1); compensation by eq. (1.1)",
        "to the target; measured compensation",
        "to eq. (1.1); measured compensation",
    )
    for ax, title in zip(axes.flat, titles, strict=True):
        ax.set_title(title, fontsize=9)
    return fig


def measured_figure(result) -> plt.Figure:
    r"""Steering with a token-measured compensation (:class:`~gtbook.studies.reachability.measured.MeasuredSteering`):
    per-draw :math:`D_N` and :math:`E_N` against N with their controls, via ``ensemble_vs_n_figure``."""
    Ns = result.Ns
    return ensemble_vs_n_figure(
        [
            (
                "distance to the target $D_N$",
                [
                    ("Gaussian tokens", Ns, result.distance, result.slope("distance")),
                    (
                        "tokens' head with $B^\\top$ (control)",
                        Ns,
                        result.distance_transposed,
                        result.slope("distance_transposed"),
                    ),
                ],
            ),
            (
                "distance to eq. (1.1) $E_N$",
                [
                    ("eq. (1.1)", Ns, result.dynamic, result.slope("dynamic")),
                    (
                        "eq. (1.1) with $B^\\top$ (control)",
                        Ns,
                        result.dynamic_transposed,
                        result.slope("dynamic_transposed"),
                    ),
                ],
            ),
        ]
    )


def attention_only_figure(result) -> plt.Figure:
    r"""Steering by the attention alone (:class:`~gtbook.studies.reachability.attention_only.AttentionOnlySteering`).

    Left: each draw's seed-mean distance to the target against N, relative to its value at the smallest N
    (reached draws solid, the others dashed), with :math:`N^{-1/2}`. Right: each draw's amplification at the
    largest N (its distance over the attention-free steering's on the same clouds) against the one eq. (1.1)
    predicts from independent perturbed starts (``inf`` drawn at the right edge), and the control's
    (:math:`B^\top`) at the same abscissa."""
    fig, (ax, bx) = figure(2, 1, width=4.2, height=3.4)
    Ns = np.asarray(result.Ns, float)
    m = result.distance.mean(axis=2)
    for k, row in enumerate(m / m[:, :1]):
        ok = bool(result.reached[k])
        first = k == int(np.flatnonzero(result.reached == ok)[0])
        ax.plot(
            Ns,
            row,
            color=COLORS["particles"] if ok else COLORS["alt"],
            ls="-" if ok else "--",
            lw=0.9,
            label=("reached" if ok else "not reached") if first else None,
        )
    ax.plot(Ns, (Ns / Ns[0]) ** -0.5, "k:", lw=1.0, label="$N^{-1/2}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _n_ticks(ax, Ns)
    ax.set_xlabel("tokens $N$")
    ax.set_ylabel("distance to the target / value at the smallest $N$")
    ax.legend(fontsize=7)
    pred = np.asarray(result.predicted, float)
    finite = pred[np.isfinite(pred)]
    right = 10 ** np.ceil(np.log10(max(finite.max() if finite.size else 10.0, 10.0) * 3))
    x = np.where(np.isfinite(pred), pred, right)
    control = result.control_amplification
    bx.scatter(x, result.amplification, color=COLORS["particles"], zorder=3, label="tokens")
    bx.scatter(x, control, marker="x", color=COLORS["floor"], label="tokens, $B^\\top$ (control)")
    lo = min(np.min(result.amplification), np.min(x), 0.5)
    hi = max(np.max(control), right)
    bx.plot([lo, hi], [lo, hi], color=COLORS["theory"], lw=0.8, ls="--", label="tokens = eq. (1.1)")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel("amplification predicted by eq. (1.1) (right edge: blows up)")
    bx.set_ylabel("amplification on tokens")
    bx.legend(fontsize=7)
    return fig
