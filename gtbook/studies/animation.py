r"""Animated token clouds, embedded in the page offline (play/pause, a frame slider, no CDN).

:func:`animate_clouds` draws recorded token clouds (one or more side-by-side panels), optionally
with the :math:`r`-standard-deviation ellipse of a Gaussian :math:`N(\mu_t, \Sigma_t)` on every
frame, a fixed target (a Gaussian or points) and a per-frame annotation, and returns a
:class:`CloudAnimation`: an :class:`IPython.display.HTML` whose HTML is matplotlib's JavaScript
export (:meth:`matplotlib.animation.Animation.to_jshtml`) with every frame inlined as a
base64 PNG. The export's only external resource, a Font Awesome stylesheet for the button icons,
is removed and the icons are replaced by plain Unicode glyphs, so the page works offline. Jupyter
Book (myst-nb) passes a ``text/html`` output through verbatim, inline scripts included.

**Size budget.** Every embedded frame costs its PNG size times 4/3 (base64). The animation is
rendered at most ``max_frames`` frames (evenly subsampled in time, the last frame always kept) and
``max_tokens`` tokens (a fixed random subset, the same tokens in every frame), at ``dpi``. If the
HTML still exceeds ``budget_bytes``, ``over_budget="subsample"`` (default) re-renders with fewer
frames, and ``over_budget="raise"`` raises :class:`AnimationBudgetError` saying by how much and
what to change. The output's metadata (``metadata["text/html"]["gtbook"]``) records the kind,
caption, alt text, frame count and size; the gallery (:mod:`gtbook.gallery`) reads it.

**Caption and alt text in a chapter.** As for a figure, the chapter's cell carries the caption (and
a ``name`` that prose can ``{numref}``) in its metadata, ``mystnb: {figure: {name, caption}}``:
myst-nb wraps any output, this HTML included, in a numbered figure. The alt text cannot go through
``mystnb: {image: {alt}}``, which applies to image outputs only: pass it as ``alt=``, and it
becomes the ``alt`` of the player's ``<img>`` (and the ``aria-label`` of the player).
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Literal

import numpy as np
from IPython.display import HTML

from gtbook.studies.style import COLORS, STYLE, ellipse_points

__all__ = [
    "DEFAULT_BUDGET",
    "AnimationBudgetError",
    "CloudAnimation",
    "CloudPanel",
    "animate_clouds",
    "frame_uris",
    "moments_at",
]

#: default size budget of one animation's HTML, in bytes (the page budget is ~2 MB)
DEFAULT_BUDGET = 1_500_000

#: colours per frame: frames are stored as palette PNGs
PALETTE_COLORS = 64

#: Font Awesome icon -> plain glyph, so the controls need no external stylesheet
_GLYPHS = {
    "fa fa-minus": "&minus;",
    "fa fa-fast-backward": "|&#9664;&#9664;",
    "fa fa-step-backward": "|&#9664;",
    "fa fa-play fa-flip-horizontal": "&#9664;",
    "fa fa-pause": "&#10074;&#10074;",
    "fa fa-play": "&#9654;",
    "fa fa-step-forward": "&#9654;|",
    "fa fa-fast-forward": "&#9654;&#9654;|",
    "fa fa-plus": "+",
}


class AnimationBudgetError(ValueError):
    """The animation's HTML would exceed its size budget."""


@dataclass
class CloudPanel:
    r"""One panel of an animation: a recorded token cloud and what to draw with it.

    Attributes
    ----------
    frames : (T, N, k) array, k >= 2
        Token positions at the recorded times; the first two coordinates of ``dims`` are drawn.
    times : (T,) array
        The recorded times (or layer indices), increasing.
    mu, Sigma : (T, d) and (T, d, d) arrays, optional
        A Gaussian per frame whose ellipse is drawn (the moment ODE or the layer map); frames where
        it is not finite show no ellipse (after a blow-up).
    target : (mu, Sigma) tuple or (M, k) array, optional
        A fixed target: a Gaussian (ellipse, dashed) or points (crosses).
    annotations : sequence of T strings or callable ``index -> str``, optional
        A line written in the panel, per frame (e.g. the norm ratio).
    title : str
        The panel's title; the frame's time is appended as ``time_label = value``.
    time_label : str
        How the time is named in the title (``"t"``, ``r"layer $\ell$"``).
    limits : "fixed", "follow" or (xmin, xmax, ymin, ymax)
        Axis limits: fixed over the animation (from all frames), following the cloud frame by frame
        (for a cloud that blows up or collapses; the box holds the tokens, and the ellipse too
        unless it is more than 3 times larger), or given.
    """

    frames: Any
    times: Any
    mu: Any = None
    Sigma: Any = None
    target: Any = None
    annotations: Sequence[str] | Callable[[int], str] | None = None
    title: str = ""
    time_label: str = "t"
    limits: Literal["fixed", "follow"] | tuple[float, float, float, float] = "fixed"


class CloudAnimation(HTML):
    """An animation as page HTML (``IPython.display.HTML``), with what it took to make it.

    Attributes
    ----------
    n_frames : frames embedded
    n_tokens : tokens drawn per panel (after subsampling)
    nbytes : size of the HTML in bytes
    caption : the caption, also stored in the output's metadata for the gallery
    alt : the alt text of the player's image (also in the metadata, when given)
    """

    def __init__(self, html: str, *, n_frames: int, n_tokens: list[int], caption: str, alt: str = "") -> None:
        self.n_frames = n_frames
        self.n_tokens = n_tokens
        self.nbytes = len(html.encode())
        self.caption = caption
        self.alt = alt
        meta = {"gtbook": {"kind": "animation", "caption": caption, "frames": n_frames, "bytes": self.nbytes}}
        if alt:
            meta["gtbook"]["alt"] = alt
        super().__init__(html, metadata=meta)


def frame_uris(html: str) -> list[str]:
    """The frames embedded in an animation's HTML (``frames[i] = "data:..."``), in order."""
    found = re.findall(r'frames\[(\d+)\]\s*=\s*"(data:image/[a-z]+;base64,[^"]*)"', html)
    return [uri for _, uri in sorted(found, key=lambda p: int(p[0]))]


def moments_at(
    trajectory: Any, times: Any, *, name: str = "trajectory", rtol: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    r"""A trajectory's ``(mu, Sigma)`` at ``times``: its own entries where its ``t`` hits them, else ``inf``.

    For drawing an ODE's ellipses over recorded token clouds: integrate the moments with
    ``t_eval`` equal to the clouds' times. Times beyond the trajectory's end (after a blow-up
    event) get ``inf``, which :func:`animate_clouds` draws as no ellipse. Raises ``ValueError``
    naming ``name`` when the trajectory hits none of the times (a different ``t_eval``).
    """
    t = np.asarray(trajectory.t, float)
    mu, S = np.asarray(trajectory.mu, float), np.asarray(trajectory.Sigma, float)
    times = np.asarray(times, float)
    out_mu = np.full((times.size, mu.shape[1]), np.inf)
    out_S = np.full((times.size, *S.shape[1:]), np.inf)
    scale = max(1.0, float(np.abs(times).max(initial=0.0)))
    j = np.clip(np.searchsorted(t, times), 0, t.size - 1)
    for i, (tt, jj) in enumerate(zip(times, j, strict=True)):
        for k in (jj - 1, jj):
            if 0 <= k < t.size and abs(t[k] - tt) <= rtol * scale:
                out_mu[i], out_S[i] = mu[k], S[k]
    if not np.isfinite(out_mu).any():
        raise ValueError(
            f"{name}.t matches none of the recorded times: integrate it with t_eval=<the "
            f"clouds' times> (got t in [{t.min():.3g}, {t.max():.3g}] with {t.size} points)"
        )
    return out_mu, out_S


# ----------------------------------------------------------------------------- validation
def _panel_arrays(p: CloudPanel, k: int, dims: tuple[int, ...]) -> dict:
    name = f"panels[{k}]" if k >= 0 else ""
    pre = f"{name}." if name else ""
    frames = np.asarray(p.frames, float)
    if frames.ndim != 3 or frames.shape[2] < 2 or frames.shape[0] < 2 or frames.shape[1] < 1:
        raise ValueError(
            f"{pre}frames must have shape (T, N, k) with T >= 2 frames, N >= 1 tokens and "
            f"k >= 2 coordinates, got {frames.shape}"
        )
    if max(dims) >= frames.shape[2]:
        raise ValueError(f"dims {dims} out of range for {pre}frames with {frames.shape[2]} coordinates")
    T = frames.shape[0]
    times = np.asarray(p.times, float)
    if times.shape != (T,):
        raise ValueError(f"{pre}times must have shape ({T},) to match {pre}frames, got {times.shape}")
    if not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
        raise ValueError(f"{pre}times must be finite and strictly increasing")
    out: dict[str, Any] = {"frames": frames[:, :, list(dims)], "times": times, "mu": None, "Sigma": None}
    if (p.mu is None) != (p.Sigma is None):
        raise ValueError(f"{pre}mu and {pre}Sigma go together: give both or neither")
    if p.mu is not None:
        mu, S = np.asarray(p.mu, float), np.asarray(p.Sigma, float)
        if mu.ndim != 2 or mu.shape[0] != T or mu.shape[1] <= max(dims):
            raise ValueError(f"{pre}mu must have shape ({T}, d) with d > {max(dims)}, got {mu.shape}")
        if S.shape != (T, mu.shape[1], mu.shape[1]):
            raise ValueError(f"{pre}Sigma must have shape ({T}, {mu.shape[1]}, {mu.shape[1]}), got {S.shape}")
        ix = np.ix_(range(T), list(dims), list(dims))
        out["mu"], out["Sigma"] = mu[:, list(dims)], S[ix]
    out["target"] = None
    if p.target is not None:
        if isinstance(p.target, tuple) and len(p.target) == 2:
            tm, tS = np.asarray(p.target[0], float), np.asarray(p.target[1], float)
            if tm.ndim != 1 or tS.shape != (tm.size, tm.size) or tm.size <= max(dims):
                raise ValueError(
                    f"{pre}target as (mu, Sigma) needs shapes (d,) and (d, d) with d > "
                    f"{max(dims)}, got {tm.shape} and {tS.shape}"
                )
            out["target"] = ("gaussian", tm[list(dims)], tS[np.ix_(list(dims), list(dims))])
        else:
            pts = np.asarray(p.target, float)
            if pts.ndim != 2 or pts.shape[1] <= max(dims):
                raise ValueError(
                    f"{pre}target must be a (mu, Sigma) tuple or an (M, k) array of points "
                    f"with k > {max(dims)}, got shape {pts.shape}"
                )
            out["target"] = ("points", pts[:, list(dims)])
    if p.annotations is not None and not callable(p.annotations) and len(p.annotations) != T:
        raise ValueError(f"{pre}annotations must have {T} entries (one per frame), got {len(p.annotations)}")
    if not (p.limits in ("fixed", "follow") or (isinstance(p.limits, tuple) and len(p.limits) == 4)):
        raise ValueError(f"{pre}limits must be 'fixed', 'follow' or (xmin, xmax, ymin, ymax), got {p.limits!r}")
    return out


def _subsample(n: int, m: int) -> np.ndarray:
    """``m`` evenly spread indices of ``range(n)``, first and last included."""
    if n <= m:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, m)).astype(int))


def _box(points: np.ndarray, whole: np.ndarray | None = None, pad: float = 0.08) -> tuple[float, float, float, float]:
    """A square box around the bulk of ``points`` (0.2-99.8 % quantiles) and all of ``whole``."""
    sets = []
    pts = points[np.all(np.isfinite(points), axis=1)]
    if pts.size:
        sets += [np.quantile(pts, 0.002, axis=0), np.quantile(pts, 0.998, axis=0)]
    if whole is not None:
        w = whole[np.all(np.isfinite(whole), axis=1)]
        if w.size:
            sets += [w.min(axis=0), w.max(axis=0)]
    if not sets:
        return (-1.0, 1.0, -1.0, 1.0)
    lo, hi = np.min(sets, axis=0), np.max(sets, axis=0)
    c, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    half = np.maximum(half.max(), 1e-12) * (1 + pad)  # equal aspect
    return (c[0] - half, c[0] + half, c[1] - half, c[1] + half)


# ----------------------------------------------------------------------------- rendering
def _fixed_box(P: dict, idx: np.ndarray, radius: float) -> tuple[float, float, float, float]:
    """Limits that keep every drawn token, ellipse and the target of a panel in view."""
    shown = [np.empty((0, 2))]
    if P["mu"] is not None:
        shown += [
            ellipse_points(P["mu"][j], P["Sigma"][j], radius, n=24)
            for j in idx
            if np.all(np.isfinite(P["mu"][j])) and np.all(np.isfinite(P["Sigma"][j]))
        ]
    if P["target"] is not None:
        shown.append(
            ellipse_points(P["target"][1], P["target"][2], radius, n=24)
            if P["target"][0] == "gaussian"
            else P["target"][1]
        )
    return _box(P["frames"][idx].reshape(-1, 2), np.vstack(shown))


def _panel_artists(ax: Any, P: dict, spec: CloudPanel, idx: np.ndarray, radius: float) -> tuple[Any, Any, Any]:
    """Draw a panel's still parts (labels, target, limits, legend); return its moving artists:
    the tokens' scatter, the ellipse's line and the note."""
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(r"$x_1$")
    ax.set_ylabel(r"$x_2$")
    if P["target"] is not None:
        if P["target"][0] == "gaussian":
            pts = ellipse_points(P["target"][1], P["target"][2], radius)
            ax.plot(pts[:, 0], pts[:, 1], ls="--", color=COLORS["target"], lw=1.4, label="target")
        else:
            ax.plot(*P["target"][1].T, "x", color=COLORS["target"], ms=6, label="target")
    scat = ax.scatter(*P["frames"][idx[0]].T, s=5, alpha=0.6, color=COLORS["particles"], lw=0, label="tokens")
    (ell,) = ax.plot(
        [], [], color=COLORS["theory"], lw=1.5, label=rf"${radius:g}\sigma$ ellipse" if P["mu"] is not None else None
    )
    note = ax.text(
        0.03,
        0.97,
        "",
        transform=ax.transAxes,
        va="top",
        ha="left",
        fontsize=8,
        bbox=dict(boxstyle="round", fc="white", ec="none", alpha=0.75),
    )
    if isinstance(spec.limits, tuple):
        ax.set_xlim(spec.limits[:2])
        ax.set_ylim(spec.limits[2:])
    elif spec.limits == "fixed":
        box = _fixed_box(P, idx, radius)
        ax.set_xlim(box[:2])
        ax.set_ylim(box[2:])
    ax.legend(loc="lower right", fontsize=7)
    return scat, ell, note


def _show_frame(ax: Any, P: dict, spec: CloudPanel, j: int, artists: tuple[Any, Any, Any], radius: float) -> None:
    """Set a panel's moving artists (tokens, ellipse, limits when following, title, note) to its frame ``j``."""
    scat, ell, note = artists
    X = P["frames"][j]
    scat.set_offsets(X)
    outline = None
    if P["mu"] is not None and np.all(np.isfinite(P["mu"][j])) and np.all(np.isfinite(P["Sigma"][j])):
        outline = ellipse_points(P["mu"][j], P["Sigma"][j], radius)
        ell.set_data(outline[:, 0], outline[:, 1])
    else:
        ell.set_data([], [])
    if spec.limits == "follow":  # the tokens, and the ellipse unless it is far larger
        box = _box(X)
        if outline is not None:
            both = _box(X, outline)
            if both[1] - both[0] <= 3 * (box[1] - box[0]):
                box = both
        ax.set_xlim(box[:2])
        ax.set_ylim(box[2:])
    head = f"{spec.title}, " if spec.title else ""
    ax.set_title(f"{head}{spec.time_label} = {P['times'][j]:.3g}")
    if spec.annotations is not None:
        note.set_text(spec.annotations(j) if callable(spec.annotations) else spec.annotations[j])


def _png_base64(canvas: Any) -> str:
    """The canvas as a palette PNG, base64-encoded."""
    from PIL import Image

    img = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buf = BytesIO()
    # zlib level 7: about half the encoding time of level 9, frames about 9 % larger
    img.convert("RGB").quantize(colors=PALETTE_COLORS).save(buf, format="png", compress_level=7)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _render(
    panels: list[dict],
    specs: list[CloudPanel],
    index: list[np.ndarray],
    n_frames: int,
    *,
    radius: float,
    dpi: int,
    width: float,
    height: float,
    interval_ms: int,
    suptitle: str,
    alt: str = "",
) -> str:
    """Draw every frame once (Agg), store it as a palette PNG, and wrap the frames in the player."""
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = len(panels)
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(width * n, height), dpi=dpi)
        canvas = FigureCanvasAgg(fig)
        # fixed margins (no layout engine: it would re-run on every frame, and move the axes)
        W = width * n  # margins in inches: room for tick labels like "-1000" and the axis label
        fig.subplots_adjust(
            left=0.85 / W,
            right=1 - 0.1 / W,
            bottom=0.5 / height,
            top=1 - (0.65 if suptitle else 0.35) / height,
            wspace=0.4,
        )
        axes = fig.subplots(1, n, squeeze=False)[0]
        if suptitle:
            fig.suptitle(suptitle)
        artists = [
            _panel_artists(ax, P, spec, idx, radius)
            for ax, P, spec, idx in zip(axes, panels, specs, index, strict=True)
        ]

        # Blitting: a panel with fixed limits keeps its axes, ticks, labels and target in a background
        # drawn once; only its tokens, ellipse, legend, note and title are drawn per frame. A panel that
        # follows its cloud is drawn whole on every frame.
        fixed = [spec.limits != "follow" for spec in specs]
        blit = any(fixed)
        if blit:
            for ax, still, (scat, ell, note) in zip(axes, fixed, artists, strict=True):
                if still:
                    for a in (scat, ell, note, ax.get_legend(), ax.title):
                        a.set_animated(True)
                else:
                    ax.set_animated(True)
            canvas.draw()
            background = canvas.copy_from_bbox(fig.bbox)

        frames = []
        for k in range(n_frames):
            for ax, P, spec, idx, art in zip(axes, panels, specs, index, artists, strict=True):
                _show_frame(ax, P, spec, idx[round(k * (len(idx) - 1) / max(1, n_frames - 1))], art, radius)
            if blit:
                canvas.restore_region(background)
                for ax, still, (scat, ell, note) in zip(axes, fixed, artists, strict=True):
                    if still:
                        for a in (scat, ell, note, ax.get_legend(), ax.title):
                            ax.draw_artist(a)
                    else:
                        fig.draw_artist(ax)
            else:
                canvas.draw()
            frames.append(_png_base64(canvas))
    return _player(frames, interval_ms, alt)


def _player(frames: list[str], interval_ms: int, alt: str = "") -> str:
    """matplotlib's JavaScript player (the template of ``Animation.to_jshtml``, copied in
    :mod:`gtbook.studies._jshtml`) around the frames."""
    from gtbook.studies import _jshtml as tpl

    fill = "\n" + "".join(f'  frames[{i}] = "data:image/png;base64,{f}"\n' for i, f in enumerate(frames))
    ident = hashlib.sha1("".join(frames).encode()).hexdigest()[:16]  # stable across runs of the same frames
    html = (
        tpl.JS_INCLUDE
        + tpl.STYLE_INCLUDE
        + tpl.DISPLAY_TEMPLATE.format(
            id=ident,
            Nframes=len(frames),
            fill_frames=fill,
            interval=int(interval_ms),
            once_checked="",
            loop_checked="checked",
            reflect_checked="",
        )
    )
    if alt:  # the alt text of the frame image, and a label for the player as a whole
        text = _html.escape(alt, quote=True)
        html = html.replace(f'<img id="_anim_img{ident}">', f'<img id="_anim_img{ident}" alt="{text}">', 1)
        html = html.replace('<div class="animation">', f'<div class="animation" role="group" aria-label="{text}">', 1)
    return _offline(html)


def _offline(html: str) -> str:
    """Drop the CDN stylesheet and replace the icon fonts by glyphs; a stable element id."""
    html = re.sub(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">', "", html)
    for cls, glyph in _GLYPHS.items():
        html = html.replace(f'<i class="{cls}"></i>', glyph)
    if "http://" in html or "https://" in html:
        raise RuntimeError("the animation HTML still references an external resource")
    return html


def animate_clouds(
    panels: CloudPanel | Sequence[CloudPanel],
    *,
    caption: str = "",
    alt: str = "",
    suptitle: str = "",
    dims: tuple[int, int] = (0, 1),
    radius: float = 2.0,
    max_frames: int = 40,
    max_tokens: int = 400,
    dpi: int = 90,
    width: float = 3.6,
    height: float = 3.4,
    interval_ms: int = 150,
    budget_bytes: int = DEFAULT_BUDGET,
    over_budget: Literal["subsample", "raise"] = "subsample",
    seed: int = 0,
) -> CloudAnimation:
    r"""An offline, embedded animation of recorded token clouds, one panel per cloud.

    Each frame draws, per panel, the tokens :math:`x_i(t)` (blue), the ellipse
    :math:`\{\mu_t + r\,\Sigma_t^{1/2}u : \|u\| = 1\}` of the panel's Gaussian (red), the
    target (green, dashed) and the frame's annotation. Panels with different numbers of recorded
    frames play in step: animation frame :math:`k` of :math:`F` shows each panel's frame
    :math:`\operatorname{round}(k(T_p - 1)/(F - 1))` of its own (subsampled) record, with the
    panel's own time in its title.

    Parameters
    ----------
    panels : CloudPanel or sequence of CloudPanel
        The clouds (frames (T, N, k), times (T,), optional Gaussian, target, annotations).
    caption : str
        What the reader should look at; kept in the output's metadata for the gallery (in a chapter
        the cell's ``mystnb.figure.caption`` is the one shown under the player).
    alt : str
        Alt text: what the animation shows, for a reader who cannot see it. Written as the ``alt``
        of the player's image and the player's ``aria-label``.
    suptitle : str
        A title over all panels.
    dims : (i, j)
        The two coordinates drawn.
    radius : float
        The ellipse's radius in standard deviations.
    max_frames : int >= 2
        At most this many frames (evenly subsampled, first and last kept).
    max_tokens : int >= 1
        At most this many tokens per panel (a seeded random subset, the same in every frame).
    dpi, width, height : rendering: dots per inch, and inches per panel
    interval_ms : int
        Delay between frames when playing.
    budget_bytes : int
        The largest HTML accepted (default :data:`DEFAULT_BUDGET`, 1.5 MB, leaving room on a ~2 MB
        page for the chapter's figures).
    over_budget : "subsample" or "raise"
        Over budget, re-render with proportionally fewer frames (at least 2), or raise.
    seed : int
        Seed of the token subset.

    Returns
    -------
    CloudAnimation
        An ``IPython.display.HTML``: make it the last expression of a cell (or ``display`` it).

    Raises
    ------
    ValueError
        A panel's arrays of the wrong shape, non-increasing times, or a bad option; the message
        names the argument (``panels[k].frames``, ``max_frames``, ...).
    AnimationBudgetError
        The HTML exceeds ``budget_bytes`` with ``over_budget="raise"``, or even at 2 frames.
    """
    specs = [panels] if isinstance(panels, CloudPanel) else list(panels)
    if not specs or not all(isinstance(p, CloudPanel) for p in specs):
        raise ValueError("panels must be a CloudPanel or a non-empty sequence of CloudPanel")
    for name, value, low in (
        ("max_frames", max_frames, 2),
        ("max_tokens", max_tokens, 1),
        ("dpi", dpi, 20),
        ("budget_bytes", budget_bytes, 10_000),
        ("interval_ms", interval_ms, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if over_budget not in ("subsample", "raise"):
        raise ValueError(f"over_budget must be 'subsample' or 'raise', got {over_budget!r}")
    if len(dims) != 2 or dims[0] == dims[1] or min(dims) < 0:
        raise ValueError(f"dims must be two distinct coordinates, got {dims!r}")
    multi = not isinstance(panels, CloudPanel)
    data = [_panel_arrays(p, k if multi else -1, tuple(dims)) for k, p in enumerate(specs)]
    rng = np.random.default_rng(seed)
    n_tokens = []
    for P in data:
        N = P["frames"].shape[1]
        if N > max_tokens:
            keep = np.sort(rng.choice(N, max_tokens, replace=False))
            P["frames"] = P["frames"][:, keep]
        n_tokens.append(P["frames"].shape[1])
    frames_wanted = min(max_frames, max(P["frames"].shape[0] for P in data))
    while True:
        index = [_subsample(P["frames"].shape[0], frames_wanted) for P in data]
        n_frames = max(len(i) for i in index)
        html = _render(
            data,
            specs,
            index,
            n_frames,
            radius=radius,
            dpi=dpi,
            width=width,
            height=height,
            interval_ms=interval_ms,
            suptitle=suptitle,
            alt=alt,
        )
        size = len(html.encode())
        if size <= budget_bytes:
            return CloudAnimation(html, n_frames=n_frames, n_tokens=n_tokens, caption=caption, alt=alt)
        per_frame = size / n_frames
        fit = int(budget_bytes * 0.95 / per_frame)
        msg = (
            f"the animation is {size / 1e6:.2f} MB with {n_frames} frames at dpi={dpi} "
            f"({per_frame / 1e3:.0f} kB per frame), over budget_bytes={budget_bytes / 1e6:.2f} MB"
        )
        if over_budget == "raise" or fit < 2 or n_frames <= 2:
            raise AnimationBudgetError(
                f"{msg}; about {max(fit, 0)} frames would fit: lower max_frames or dpi, or raise budget_bytes"
            )
        frames_wanted = min(fit, n_frames - 1)
