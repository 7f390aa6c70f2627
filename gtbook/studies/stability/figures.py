r"""Figures of chapter 4: phase line, the PSD cone, blow-up times, the regime map, the steered mean."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from gtbook.studies.style import COLORS, figure

if TYPE_CHECKING:
    from gtbook.studies.stability.harness import RegimeBoundary, RegimeMap

#: one colour per verdict (shared by the regime map and its legend)
VERDICT_COLORS = {
    "converges": COLORS["target"],
    "collapses to 0": "#9ecae1",
    "blows up": COLORS["theory"],
    "undetermined": COLORS["floor"],
}


def cone_coordinates(Sigma: np.ndarray) -> np.ndarray:
    r"""Coordinates :math:`(a - c,\ 2b,\ a + c)` of :math:`\begin{bmatrix} a & b\\ b & c\end{bmatrix}`.

    The PSD matrices are exactly the cone :math:`x^2 + y^2 \le z^2`, :math:`z \ge 0`.
    """
    S = np.asarray(Sigma, float).reshape(-1, 2, 2)
    return np.stack([S[:, 0, 0] - S[:, 1, 1], 2 * S[:, 0, 1], S[:, 0, 0] + S[:, 1, 1]], axis=1)


def phase_line(a: float, qs: Sequence[float], runs: Sequence[dict]) -> plt.Figure:
    r"""Left: the scalar vector field :math:`\sigma' = 2a\sigma + q\sigma^2` for each ``q``, with its
    equilibria. Right: explicit solutions (lines) against the integrator (dots).

    ``runs`` holds dicts with keys ``label, t, closed, t_num, num`` and optionally ``t_star``.
    """
    fig, (ax0, ax1) = figure(2, 1, width=4.4)
    for q, color in zip(qs, (COLORS["target"], COLORS["theory"], COLORS["alt"]), strict=False):
        star = -2 * a / q
        smax = 2.2 * abs(star) if star > 0 else 3.0
        s = np.linspace(0, smax, 200)
        ax0.plot(s, 2 * a * s + q * s**2, color=color, label=rf"$q = {q:g}$")
        ax0.plot([0], [0], "o", color="k", ms=4)
        if star > 0:
            ax0.plot([star], [0], "o", color=color, mfc="white", ms=6)
        for x0 in np.linspace(0.1 * smax, 0.9 * smax, 4):
            f = 2 * a * x0 + q * x0**2
            ax0.annotate(
                "",
                xy=(x0 + 0.06 * smax * np.sign(f), 0),
                xytext=(x0, 0),
                arrowprops=dict(arrowstyle="->", color=color, lw=1.2),
            )
    ax0.axhline(0, color="k", lw=0.6)
    ax0.set_xlabel(r"$\sigma$")
    ax0.set_ylabel(r"$\sigma' = 2a\sigma + q\sigma^2$")
    ax0.set_title(rf"phase line, $a = {a:g}$")
    ax0.legend()
    for run, color in zip(runs, (COLORS["target"], COLORS["theory"], COLORS["alt"], COLORS["particles"]), strict=False):
        ax1.plot(run["t"], run["closed"], color=color, label=run["label"])
        ax1.plot(run["t_num"], run["num"], ".", color=color, ms=3)
        if run.get("t_star") is not None and np.isfinite(run["t_star"]):
            ax1.axvline(run["t_star"], color=color, ls=":", lw=1)
    ax1.set_yscale("log")
    ax1.set_xlabel("$t$")
    ax1.set_ylabel(r"$\sigma(t)$")
    ax1.set_title("closed form (lines) vs DOP853 (dots)")
    ax1.legend()
    return fig


def psd_cone(
    trajectories: Sequence[np.ndarray],
    labels: Sequence[str],
    *,
    z_max: float = 6.0,
    equilibria: Sequence[np.ndarray] = (),
) -> plt.Figure:
    """Covariance trajectories of d = 2 inside the PSD cone (cut at trace ``z_max``)."""
    fig = plt.figure(figsize=(4.6, 3.8), constrained_layout=True)
    ax = fig.add_subplot(projection="3d")
    th = np.linspace(0, 2 * np.pi, 60)
    z = np.linspace(0, z_max, 12)
    Th, Z = np.meshgrid(th, z)
    ax.plot_surface(Z * np.cos(Th), Z * np.sin(Th), Z, color=COLORS["floor"], alpha=0.12, lw=0)
    for S, label, color in zip(trajectories, labels, (COLORS["target"], COLORS["theory"], COLORS["alt"]), strict=False):
        xyz = cone_coordinates(S)
        keep = xyz[:, 2] <= z_max
        cut = np.argmin(keep) if not keep.all() else len(keep)
        xyz = xyz[:cut]
        ax.plot(*xyz.T, color=color, label=label)
        ax.scatter(*xyz[0], color=color, s=15)
    for E in equilibria:
        ax.scatter(*cone_coordinates(E)[0], color="k", marker="*", s=60, label=r"$\Sigma^*$")
    ax.set_xlabel(r"$a - c$")
    ax.set_ylabel(r"$2b$")
    ax.set_zlabel(r"$a + c$")
    ax.legend(loc="upper left")
    return fig


def regime_map_figure(rm: RegimeMap, boundary: RegimeBoundary) -> plt.Figure:
    """The observed outcome on the grid, with the theory's boundary and every disagreement.

    ``boundary`` holds ``a_curve, v_curve`` (the collapse/blow-up curve for Hurwitz A) and the
    axis limits come from the map.
    """
    order = list(VERDICT_COLORS)
    codes = np.vectorize(order.index)(rm.observed)
    fig, ax = figure(1, 1, width=4.8, height=3.4)
    dx = (rm.xs[1] - rm.xs[0]) / 2 if rm.xs.size > 1 else 0.5
    dy = (rm.ys[1] - rm.ys[0]) / 2 if rm.ys.size > 1 else 0.5
    ax.imshow(
        codes,
        origin="lower",
        aspect="auto",
        cmap=ListedColormap(list(VERDICT_COLORS.values())),
        vmin=-0.5,
        vmax=len(order) - 0.5,
        interpolation="nearest",
        extent=(rm.xs[0] - dx, rm.xs[-1] + dx, rm.ys[0] - dy, rm.ys[-1] + dy),
    )
    ax.plot(boundary.a_curve, boundary.v_curve, color="k", lw=1.6, label="theory boundary")
    ax.plot([0, 0], [rm.ys[0] - dy, 0], color="k", lw=1.6)
    ax.plot([0, rm.xs[-1] + dx], [0, 0], color="k", lw=1.6)
    for x, y, *_ in rm.disagreements:
        ax.plot(x, y, "kx", ms=7)
    ax.set_xlim(rm.xs[0] - dx, rm.xs[-1] + dx)
    ax.set_ylim(rm.ys[0] - dy, rm.ys[-1] + dy)
    ax.set_xlabel(r"$a = \operatorname{Re}\,\lambda(A)$")
    ax.set_ylabel(r"$v$  ($V = vI$)")
    handles: list[Artist] = [Patch(color=c, label=k) for k, c in VERDICT_COLORS.items()]
    handles.append(plt.Line2D([], [], color="k", label="theory boundary"))
    ax.legend(handles=handles, loc="upper left", fontsize=7, framealpha=0.9)
    ax.grid(False)
    return fig


def mean_steering(t: np.ndarray, mu: np.ndarray, target: np.ndarray) -> plt.Figure:
    r"""Left: :math:`\|\mu(t) - \mu_{\text{target}}\|` (log scale). Right: the path of the mean."""
    fig, (ax0, ax1) = figure(2, 1, width=4.2)
    err = np.linalg.norm(mu - target, axis=1)
    ax0.semilogy(t, np.maximum(err, 1e-16), color=COLORS["theory"])
    ax0.set_xlabel("$t$")
    ax0.set_ylabel(r"$\|\mu(t) - \mu_{\mathrm{target}}\|$")
    ax1.plot(mu[:, 0], mu[:, 1], color=COLORS["theory"], label=r"$\mu(t)$")
    ax1.plot(*mu[0], "o", color=COLORS["theory"], ms=4)
    ax1.plot(*target, "*", color=COLORS["target"], ms=14, label="target")
    ax1.set_xlabel(r"$\mu_1$")
    ax1.set_ylabel(r"$\mu_2$")
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.legend()
    return fig


def regimes_animation(
    stab, stab_ode, blow, blow_ode, *, Sigma_star, t_star: float, max_frames: int = 30, max_tokens: int = 400, **kwargs
):
    r"""Settling onto :math:`\Sigma^*` versus the approach to the blow-up at :math:`t^*` (chapter 4).

    Left: the stabilising particle run with the moment ODE's :math:`2\sigma` ellipse and the
    equilibrium's (dashed, centred at the ODE's final mean), and
    :math:`\|\hat\Sigma(t)\|_F / \|\hat\Sigma(0)\|_F` on each frame. Right: the destabilising run
    up to a fraction of :math:`t^*` (the chapter's pole study, :class:`gtbook.studies.stability.finite_n.PoleCloud`),
    axes following the cloud, the ODE's ellipse (drawn while finite, and while at most 3 times the
    cloud's box), and on each frame the covariance norm relative to its start for the cloud and for
    the ODE, and :math:`t^* - t`: the ODE's diverges, the cloud's cannot.

    Parameters
    ----------
    stab, blow : :class:`gtcore.particles.ParticleTrajectory`
        Particle runs with ``keep_tokens=True``.
    stab_ode, blow_ode : :class:`gtcore.moments.MomentTrajectory`
        The moment ODEs with ``t_eval=stab.t`` and ``t_eval=blow.t`` (one that stops at its
        blow-up event shows no ellipse on later frames).
    Sigma_star : (d, d) array
        The equilibrium (:func:`gtcore.stability.equilibrium`).
    t_star : float
        The blow-up time of ``blow_ode`` (:func:`gtcore.riccati.blowup_time`).
    max_frames, max_tokens, **kwargs : passed to :func:`gtbook.studies.animation.animate_clouds`

    Returns
    -------
    CloudAnimation
    """
    from gtbook.studies.animation import CloudPanel, animate_clouds, moments_at

    for name, run in (("stab", stab), ("blow", blow)):
        if getattr(run, "tokens", None) is None:
            raise ValueError(f"{name} has no tokens: run simulate(..., keep_tokens=True)")
    mu_s, S_s = moments_at(stab_ode, stab.t, name="stab_ode")
    mu_b, S_b = moments_at(blow_ode, blow.t, name="blow_ode")
    S_star = np.asarray(Sigma_star, float)
    n_s = np.linalg.norm(stab.Sigma, axis=(1, 2)) / np.linalg.norm(stab.Sigma[0])
    n_b = np.linalg.norm(blow.Sigma, axis=(1, 2)) / np.linalg.norm(blow.Sigma[0])
    with np.errstate(invalid="ignore"):
        o_b = np.linalg.norm(S_b, axis=(1, 2)) / np.linalg.norm(S_b[0])
    norm = "\u2016\u03a3\u2016/\u2016\u03a3\u2080\u2016"  # plain text: mathtext per frame is slow
    left = CloudPanel(
        stab.tokens,
        stab.t,
        mu=mu_s,
        Sigma=S_s,
        target=(np.asarray(stab_ode.mu[-1]), S_star),
        annotations=[f"{norm} = {r:.3g}" for r in n_s],
        title="opposite signs: to \u03a3*",
    )
    right = CloudPanel(
        blow.tokens,
        blow.t,
        mu=mu_b,
        Sigma=S_b,
        limits="follow",
        annotations=[
            f"{norm}: cloud {r:.3g}, ODE {o:.3g}\nt* \u2212 t = {t_star - t:.3f}"
            for r, o, t in zip(n_b, o_b, blow.t, strict=True)
        ],
        title="same signs: toward t*",
    )
    kwargs.setdefault(
        "caption",
        "Left: with opposite definiteness the cloud and the ODE's ellipse settle on "
        "$\\Sigma^*$ (dashed). Right: with the same definiteness the ODE's covariance "
        "diverges as $t \\to t^*$, and the finite cloud falls behind it.",
    )
    return animate_clouds([left, right], max_frames=max_frames, max_tokens=max_tokens, **kwargs)
