r"""The regime explorer: precomputed regime maps in the page, with sliders and a hover readout, offline.

:func:`regime_explorer` turns an :class:`~gtbook.studies.atlas.maps.AtlasMap` into one self-contained
HTML block (an :class:`IPython.display.HTML`, which Jupyter Book passes through verbatim, like the
animation player of :mod:`gtbook.studies.animation`): every map is a small palette PNG inlined as a
``data:`` URI, the outcome and rank of every grid point are inlined as JSON, and a few lines of
inline JavaScript swap the image when a slider moves and write what lies under the pointer. No
script, style sheet or font is fetched from anywhere (no CDN, no kernel). Without JavaScript the
block still shows the first map (its ``<img>`` carries it) and the legend.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import json
from io import BytesIO
from typing import Any

import numpy as np
from IPython.display import HTML

from gtbook.studies.atlas.maps import AtlasMap
from gtbook.studies.atlas.outcomes import OUTCOMES

__all__ = ["OUTCOME_COLORS", "ExplorerHTML", "map_png", "regime_explorer"]

#: one colour per outcome, shared with the static figures
OUTCOME_COLORS = {
    "equilibrium": "#2ca02c",
    "lower-rank limit": "#98df8a",
    "collapse to 0": "#9ecae1",
    "finite-time blow-up": "#d62728",
    "exponential growth": "#ff7f0e",
    "polynomial growth": "#ffbb78",
    "growth with collapse": "#c49c94",
    "slow algebraic decay": "#c5b0d5",
    "rotation": "#9467bd",
    "undecided at the horizon": "#7f7f7f",
    "integration failed": "#000000",
}


def _rgb(hexcolor: str) -> tuple[int, int, int]:
    return int(hexcolor[1:3], 16), int(hexcolor[3:5], 16), int(hexcolor[5:7], 16)


def map_png(outcome: np.ndarray, cell: int = 8) -> bytes:
    """One map (rows: v increasing upwards; columns: a) as a palette PNG, ``cell`` pixels per point."""
    from PIL import Image

    codes = np.vectorize({o.value: k for k, o in enumerate(OUTCOMES)}.get)(outcome).astype(np.uint8)
    img = Image.fromarray(np.kron(codes[::-1], np.ones((cell, cell), dtype=np.uint8)), mode="P")
    palette = [c for o in OUTCOMES for c in _rgb(OUTCOME_COLORS[o.value])]
    img.putpalette(palette + [0] * (768 - len(palette)))
    buf = BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


class ExplorerHTML(HTML):
    """The explorer's HTML, with its size and frame count (``nbytes``, ``n_frames``)."""

    def __init__(self, html: str, *, n_frames: int, caption: str, alt: str) -> None:
        self.nbytes = len(html.encode())
        self.n_frames = n_frames
        super().__init__(
            html,
            metadata={
                "gtbook": {"kind": "explorer", "caption": caption, "alt": alt, "frames": n_frames, "bytes": self.nbytes}
            },
        )


_SCRIPT = r"""
(function () {
  var root = document.getElementById("%(id)s");
  var data = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  var img = root.querySelector("img"), out = root.querySelector(".gt-readout");
  var se = root.querySelector("input[name=eps]"), sb = root.querySelector("input[name=beta]");
  function frame() { return (+se.value) * data.beta.length + (+sb.value); }
  function show() {
    img.src = data.frames[frame()];
    root.querySelector(".gt-eps").textContent = data.eps[+se.value];
    root.querySelector(".gt-beta").textContent = data.beta[+sb.value];
    img.setAttribute("data-frame", String(frame()));
  }
  se.addEventListener("input", show); sb.addEventListener("input", show);
  img.addEventListener("mousemove", function (ev) {
    var box = img.getBoundingClientRect();
    var j = Math.floor((ev.clientX - box.left) / box.width * data.a.length);
    var i = data.v.length - 1 - Math.floor((ev.clientY - box.top) / box.height * data.v.length);
    if (i < 0 || j < 0 || i >= data.v.length || j >= data.a.length) return;
    var f = frame(), code = data.outcome[f][i][j], rank = data.rank[f][i][j];
    out.textContent = "a = " + data.a[j] + ", v = " + data.v[i] + ": " + data.names[code] +
      (rank >= 0 ? " (rank " + rank + ")" : "") + (data.tpole[f][i][j] ? ", t* = " + data.tpole[f][i][j] : "");
  });
  img.addEventListener("mouseleave", function () { out.textContent = data.hint; });
})();
"""


def regime_explorer(atlas: AtlasMap, *, caption: str, alt: str, cell: int = 8) -> ExplorerHTML:
    r"""The explorer of ``atlas``: a slider for :math:`\varepsilon`, one for :math:`\beta`, a readout under the pointer.

    Parameters
    ----------
    atlas : the maps, one per (eps, beta)
    caption : stored in the output's metadata (the gallery reads it); the chapter's cell metadata
        carries the figure caption itself
    alt : the image's alt text and the block's ``aria-label``
    cell : pixels per grid point

    Returns
    -------
    ExplorerHTML
    """
    ne, nb, nv, na = atlas.outcome.shape
    names = [o.value for o in OUTCOMES]
    code = {n: k for k, n in enumerate(names)}
    frames, outcome, rank, tpole = [], [], [], []
    for e in range(ne):
        for b in range(nb):
            frames.append("data:image/png;base64," + base64.b64encode(map_png(atlas.outcome[e, b], cell)).decode())
            outcome.append([[code[x] for x in row] for row in atlas.outcome[e, b]])
            rank.append(atlas.rank[e, b].astype(int).tolist())
            tpole.append([[f"{x:.3g}" if np.isfinite(x) else "" for x in row] for row in atlas.t_pole[e, b]])
    hint = "move the pointer over the map to read a point's outcome"
    data: dict[str, Any] = {
        "a": [f"{x:.3g}" for x in atlas.a],
        "v": [f"{x:.3g}" for x in atlas.v],
        "eps": [f"{x:g}" for x in atlas.eps],
        "beta": [f"{x:g}" for x in atlas.beta],
        "names": names,
        "frames": frames,
        "outcome": outcome,
        "rank": rank,
        "tpole": tpole,
        "hint": hint,
    }
    uid = "gt-explorer-" + hashlib.sha256(json.dumps(data["outcome"]).encode()).hexdigest()[:10]
    payload = json.dumps(data).replace("</", "<\\/")
    legend = "".join(
        f'<span style="display:inline-block;margin-right:0.8em"><span style="display:inline-block;'
        f"width:0.9em;height:0.9em;background:{OUTCOME_COLORS[n]};margin-right:0.3em;"
        f'vertical-align:middle"></span>{_html.escape(n)}</span>'
        for n in names
    )
    w, h = na * cell, nv * cell
    a_lo, a_hi, v_lo, v_hi = atlas.a[0], atlas.a[-1], atlas.v[0], atlas.v[-1]
    html = f"""<div class="gt-explorer" id="{uid}" role="group" aria-label="{_html.escape(alt, quote=True)}">
<div style="display:flex;align-items:center;gap:0.4em">
<div style="writing-mode:vertical-rl;transform:rotate(180deg)">v (value gain), {v_lo:g} to {v_hi:g}</div>
<img src="{frames[0]}" width="{w}" height="{h}" alt="{_html.escape(alt, quote=True)}" data-frame="0"
 style="image-rendering:pixelated;border:1px solid #999;cursor:crosshair">
</div>
<div style="margin-left:1.6em">a = Re spec(A), {a_lo:g} to {a_hi:g}</div>
<div class="gt-readout" style="min-height:1.4em;font-family:monospace">{_html.escape(hint)}</div>
<label>&epsilon; (V = v(I + &epsilon; E)) = <span class="gt-eps">{data["eps"][0]}</span>
<input type="range" name="eps" min="0" max="{ne - 1}" step="1" value="0"></label><br>
<label>&beta; (B = B<sub>0</sub> + &beta; J) = <span class="gt-beta">{data["beta"][0]}</span>
<input type="range" name="beta" min="0" max="{nb - 1}" step="1" value="0"></label>
<div style="margin-top:0.4em">{legend}</div>
<script type="application/json">{payload}</script>
<script>{_SCRIPT % {"id": uid}}</script>
</div>"""
    return ExplorerHTML(html, n_frames=len(frames), caption=caption, alt=alt)
