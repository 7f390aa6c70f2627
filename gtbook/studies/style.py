r"""Shared figure style and generic plotting helpers.

Every chapter figure goes through :func:`figure` so the book has one look. Topic-specific
figures live in submodules of this package (one per chapter topic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from gtcore._linalg import psd_sqrt

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, Any] = {
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "image.cmap": "viridis",
}

#: colours used for recurring roles across chapters
COLORS = {
    "theory": "#d62728",  # moment ODE / closed form
    "particles": "#1f77b4",  # finite-N Transformer
    "floor": "#7f7f7f",  # noise floor of a true Gaussian
    "target": "#2ca02c",
    "alt": "#ff7f0e",
}


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.2, height: float = 3.4, **kwargs) -> tuple[Figure, Any]:
    """A figure in the book's style: ``ncols × nrows`` panels of ``width × height`` inches.

    The axes are what :func:`matplotlib.pyplot.subplots` returns: one ``Axes`` for a single panel, else
    an array of them (typed ``Any``, as matplotlib types them)."""
    plt.rcParams.update(STYLE)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), constrained_layout=True, **kwargs)
    return fig, axes


def ellipse_points(mu: np.ndarray, Sigma: np.ndarray, radius: float = 2.0, n: int = 200) -> np.ndarray:
    r"""Points of the ellipse :math:`\{\mu + r\,\Sigma^{1/2}u : \|u\| = 1\}` (first two coordinates)."""
    mu = np.asarray(mu, float)[:2]
    S = np.asarray(Sigma, float)[:2, :2]
    root = psd_sqrt(0.5 * (S + S.T))
    theta = np.linspace(0, 2 * np.pi, n)
    circle = np.stack([np.cos(theta), np.sin(theta)])
    return (mu[:, None] + radius * root @ circle).T


def plot_ellipse(ax: plt.Axes, mu: np.ndarray, Sigma: np.ndarray, radius: float = 2.0, **kwargs):
    """Draw the ``radius``-standard-deviation ellipse of N(mu, Sigma) on ``ax``."""
    pts = ellipse_points(mu, Sigma, radius)
    kwargs.setdefault("color", COLORS["theory"])
    return ax.plot(pts[:, 0], pts[:, 1], **kwargs)


def noise_band(
    ax: plt.Axes,
    x: Sequence[float] | np.ndarray,
    low: float | Sequence[float] | np.ndarray,
    high: float | Sequence[float] | np.ndarray,
    label: str = "Gaussian noise floor",
    **kwargs,
):
    """Shade the band a true Gaussian sample would fall in."""
    kwargs.setdefault("color", COLORS["floor"])
    kwargs.setdefault("alpha", 0.25)
    x = np.asarray(x, float)
    low = np.broadcast_to(np.asarray(low, float), x.shape)
    high = np.broadcast_to(np.asarray(high, float), x.shape)
    return ax.fill_between(x, low, high, label=label, lw=0, **kwargs)


def reference_slope(
    ax: plt.Axes, x: Sequence[float] | np.ndarray, y0: float, slope: float, label: str | None = None, **kwargs
):
    r"""A line :math:`y = y_0 (x / x_0)^{\text{slope}}` on log–log axes, through ``(x[0], y0)``."""
    x = np.asarray(x, float)
    kwargs.setdefault("color", "k")
    kwargs.setdefault("ls", "--")
    kwargs.setdefault("lw", 1.0)
    return ax.plot(x, y0 * (x / x[0]) ** slope, label=label or rf"$\propto N^{{{slope:g}}}$", **kwargs)
