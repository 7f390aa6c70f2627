"""The regime explorer: offline HTML, and in headless Chromium the sliders change the image, the pointer gives a
readout, and nothing is fetched from the network."""

import numpy as np
import pytest

from browser import Browser, chromium_or_skip
from gtbook.studies.atlas.explorer import map_png, regime_explorer
from gtbook.studies.atlas.maps import AtlasMap
from gtbook.studies.atlas.outcomes import OUTCOMES


def _atlas():
    a, v = np.linspace(-1, 1, 6), np.linspace(-1, 1, 5)
    names = np.array([o.value for o in OUTCOMES])
    rng = np.random.default_rng(0)
    out = names[rng.integers(len(names), size=(2, 3, 5, 6))]
    out[0, 0, :, :] = "equilibrium"  # frame 0 plain green: frame (1, 0) differs from it
    rank = np.where(out == "equilibrium", 2, -1)
    tp = np.where(out == "finite-time blow-up", 0.5, np.nan)
    return AtlasMap(a, v, np.array([0.0, 1.0]), np.array([0.0, 0.5, 1.0]), out, rank, tp)


def test_html_is_self_contained():
    ex = regime_explorer(_atlas(), caption="c", alt='a "map" <b>')
    html = ex.data
    assert "http://" not in html and "https://" not in html and "<link" not in html and ' src="//' not in html
    assert html.count("data:image/png;base64,") == 6 + 1  # the six frames in the JSON, and the default image
    assert 'alt="a &quot;map&quot; &lt;b&gt;"' in html
    assert ex.n_frames == 6 and ex._repr_html_()[1]["gtbook"]["kind"] == "explorer"


def test_map_png_colours_each_outcome():
    import io

    from PIL import Image

    out = np.array([[o.value for o in OUTCOMES]])
    img = Image.open(io.BytesIO(map_png(out, cell=2))).convert("RGB")
    px = np.asarray(img)
    assert px.shape == (2, 2 * len(OUTCOMES), 3)
    assert len({tuple(px[0, 2 * k]) for k in range(len(OUTCOMES))}) == len(OUTCOMES)


PROBE = r"""
new Promise((resolve) => {
  const start = Date.now();
  const wait = () => {
    const im = document.querySelector('.gt-explorer img');
    const ready = document.readyState === 'complete' && im && im.complete && im.naturalWidth > 0;
    if (!ready && Date.now() - start < 10000) { setTimeout(wait, 50); return; }
    const root = document.querySelector('.gt-explorer'), img = root.querySelector('img');
    const out = root.querySelector('.gt-readout');
    const before = {src: img.src, frame: img.getAttribute('data-frame'), readout: out.textContent,
                    loaded: img.complete && img.naturalWidth > 0};
    const eps = root.querySelector('input[name=eps]');
    eps.value = '1'; eps.dispatchEvent(new Event('input'));
    const after = {src: img.src, frame: img.getAttribute('data-frame')};
    const box = img.getBoundingClientRect();
    img.dispatchEvent(new MouseEvent('mousemove', {clientX: box.left + 0.95 * box.width,
                                                   clientY: box.top + 0.1 * box.height, bubbles: true}));
    const hover = out.textContent;
    const resources = performance.getEntriesByType('resource').map((e) => e.name);
    resolve({before: before, after: after, hover: hover, loaded: before.loaded,
             resources: resources});
  };
  wait();
})
"""


@pytest.mark.slow
def test_explorer_works_offline_in_chromium(tmp_path):
    exe = chromium_or_skip()
    atlas = _atlas()
    page = tmp_path / "explorer.html"
    page.write_text(
        "<!doctype html><html><body>" + regime_explorer(atlas, caption="c", alt="map").data + "</body></html>"
    )
    browser = Browser(exe)
    try:
        tab = browser.open(page.as_uri())
        seen = browser.evaluate(tab, PROBE)
        browser.screenshot(tab, tmp_path / "explorer.png")
    finally:
        browser.close()
    assert seen["loaded"], "the default map did not load"
    assert seen["before"]["frame"] == "0" and seen["after"]["frame"] == "3"  # eps index 1, beta index 0
    assert seen["after"]["src"] != seen["before"]["src"], "moving the slider did not change the image"
    # the top-right cell of frame (eps=1, beta=0): a = 1, v = 1, its outcome named
    want = atlas.outcome[1, 0, -1, -1]
    assert seen["hover"].startswith("a = 1, v = 1: " + want), seen["hover"]
    assert not [r for r in seen["resources"] if not r.startswith(("data:", "file:"))], seen["resources"]
