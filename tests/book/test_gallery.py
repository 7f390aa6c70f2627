"""The gallery generator, and the animations and gallery of the built book in headless Chromium.

The browser tests read a built book from :func:`built_html_dir`: ``$GTBOOK_HTML`` when set, else
``_build/html`` of this checkout. To test a book built elsewhere (say the pipeline's temporary
build of the quick profile), set ``GTBOOK_HTML`` or change that one function. When the folder
holds no built gallery, the fixture builds the quick book once (``gtbook all --profile quick``).
"""

import base64
import io
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import numpy as np
import pytest

from browser import Browser, chromium_or_skip
from gtbook import gallery
from gtbook.studies.animation import CloudPanel, animate_clouds

ROOT = Path(gallery.__file__).resolve().parents[1]
# chapters whose page must carry a playable animation (the browser test plays the first one on each page)
ANIMATED_CHAPTERS = ["01_gaussian_invariance", "03_rank_and_reachability", "06_prescribed_attention"]


def built_html_dir() -> Path:
    """The built book's HTML folder (the one place to point the browser tests elsewhere)."""
    return Path(os.environ.get("GTBOOK_HTML") or ROOT / "_build" / "html")


# ------------------------------------------------------------------ the generator, no build
def _png(color=(255, 0, 0)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, format="png")
    return buf.getvalue()


def _notebook(tmp_path: Path) -> Path:
    png = base64.b64encode(_png()).decode()
    rng = np.random.default_rng(0)
    anim = animate_clouds(
        CloudPanel(rng.standard_normal((3, 20, 2)), np.arange(3.0)), caption="A moving cloud.", dpi=30
    )
    html, meta = anim._repr_html_()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 9. A test chapter\n\nIntro."),
        nbformat.v4.new_markdown_cell("(my-label)=\n## (a) First: $h \\to 0$"),
        nbformat.v4.new_code_cell(
            "fig", outputs=[nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
        ),
        nbformat.v4.new_markdown_cell("*Left*: the cloud, e.g. a ball, moves; $a. b$ stays. More text."),
        nbformat.v4.new_markdown_cell("## Claims"),
        nbformat.v4.new_code_cell(
            "anim",
            outputs=[
                nbformat.v4.new_output(
                    "execute_result",
                    data={"text/html": html, "text/plain": "<anim>"},
                    metadata={"text/html": meta},
                    execution_count=1,
                )
            ],
        ),
        nbformat.v4.new_markdown_cell("## Claims\n\n### Sub"),
        nbformat.v4.new_code_cell(
            "fig2", outputs=[nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
        ),
    ]
    path = tmp_path / "09_test.ipynb"
    nbformat.write(nb, path)
    return path


def test_section_ids_are_docutils_ids(tmp_path):
    nb = nbformat.read(_notebook(tmp_path), as_version=4)
    where = gallery.section_ids(nb.cells)
    assert where[0] == ("a-test-chapter", "9. A test chapter")
    assert where[2][0] in ("a-first-h-to-0", "my-label") and where[2][1] == "(a) First: $h \\to 0$"
    assert where[5] == ("claims", "Claims")
    assert where[7] == ("sub", "Sub")  # the second "Claims" is id1, and Sub follows it
    assert gallery._parse_sections("## Claims\n\n## Claims\n")[1][0] == "id1"


def test_first_sentence_respects_math_and_abbreviations():
    text = "*Left*: the cloud, e.g. a ball, moves; $a. b$ stays. More text."
    assert gallery.first_sentence(text) == "*Left*: the cloud, e.g. a ball, moves; $a. b$ stays."
    long = "word " * 30 + "$x. y + z$ end " * 20 + "."
    cut = gallery.first_sentence(long, limit=160)
    assert cut.endswith(" …") and cut.count("$") % 2 == 0 and len(cut) <= 162


def test_collect_entries_and_write_gallery(tmp_path):
    _notebook(tmp_path)
    entries = gallery.collect_entries(tmp_path / "09_test.ipynb")
    assert [e.kind for e in entries] == ["figure", "animation", "figure"]
    fig, anim, fig2 = entries
    assert fig.caption.startswith("*Left*: the cloud") and fig.href == "09_test.html#" + fig.anchor
    assert anim.caption == "A moving cloud." and anim.anchor == "claims" and anim.png.startswith(b"\x89PNG")
    assert fig2.anchor == "sub"
    page = gallery.write_gallery(tmp_path)
    text = page.read_text()
    assert text.count(":::{grid-item-card}") == 3 and "{bdg-primary}`animation`" in text
    assert ":link: 09_test.html#claims" in text
    thumbs = sorted((tmp_path / "gallery").glob("*.png"))
    assert [p.name for p in thumbs] == ["09_test_01.png", "09_test_02.png", "09_test_03.png"]
    assert thumbs[0].read_bytes() == _png()


def test_cell_metadata_gives_caption_and_alt(tmp_path):
    path = _notebook(tmp_path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].metadata["mystnb"] = {
        "figure": {"name": "fig-a", "caption": "A red box, see {numref}`fig-b`."},
        "image": {"alt": "A small\nred rectangle."},
    }
    nb.cells[5].metadata["mystnb"] = {
        "figure": {"name": "anim-a", "caption": "A long caption about clouds. " + "word " * 60}
    }
    nbformat.write(nb, path)
    fig, anim, fig2 = gallery.collect_entries(path)
    assert fig.caption == "A red box, see." and fig.alt == "A small red rectangle."
    assert anim.caption == "A long caption about clouds." and anim.alt == ""  # over CAPTION_CHARS: its first sentence
    assert fig2.alt == ""
    text = gallery.write_gallery(tmp_path).read_text()
    assert ":img-alt: A small red rectangle." in text and ":img-alt: animation in 09_test" in text


def test_empty_gallery_says_what_to_do(tmp_path):
    assert "gtbook run" in gallery.write_gallery(tmp_path).read_text()


# ------------------------------------------------------------------- the built book, browser
@pytest.fixture(scope="module")
def html_dir(built_book) -> Path:
    """``$GTBOOK_HTML`` when set, else the quick book built in a temporary tree (``built_book``)."""
    if os.environ.get("GTBOOK_HTML"):
        folder = built_html_dir()
        if not (folder / "executed" / "gallery.html").exists():
            pytest.fail(f"GTBOOK_HTML={folder} holds no built gallery (executed/gallery.html)")
        return folder
    return built_book[0] / "_build" / "html"


@pytest.fixture(scope="module")
def browser():
    exe = chromium_or_skip()
    b = Browser(exe)
    yield b
    b.close()


LOADED = (
    "new Promise((r) => { const w = () => document.readyState === 'complete' ? setTimeout(r, 300) "
    ": setTimeout(w, 50); w(); })"
)

#: plays the first animation on the page and reports its frame before and after
PLAY = r"""
new Promise((resolve) => {
  const box = document.querySelector('div.animation');
  if (!box) { resolve(null); return; }
  const img = box.querySelector('img'), slider = box.querySelector('input[type=range]');
  const before = {src: img.src, value: slider.value, max: slider.max, ok: img.complete && img.naturalWidth > 0};
  const play = box.querySelector('button[title="Play"]');
  if (!play) { resolve({before: before, after: before, external: [], noplay: true}); return; }
  play.click();
  setTimeout(() => {
    resolve({before: before, after: {src: img.src, value: slider.value},
             external: Array.from(document.querySelectorAll('link[href*="font-awesome/4"], script[src^="http"]'))
               .map((e) => e.outerHTML)});
  }, 1500);
})
"""

#: every gallery card: its thumbnail (loaded?) and its link
CARDS = r"""
Array.from(document.querySelectorAll('.sd-card')).map((card) => {
  const img = card.querySelector('img.sd-card-img-top'), a = card.querySelector('a.sd-stretched-link');
  return {src: img && img.getAttribute('src'), ok: !!img && img.complete && img.naturalWidth > 0,
          href: a && a.getAttribute('href'), animation: !!card.querySelector('.sd-badge')};
})
"""


@pytest.mark.slow
@pytest.mark.parametrize("chapter", ANIMATED_CHAPTERS)
def test_animation_plays_offline(html_dir, browser, chapter):
    page = browser.open((html_dir / "executed" / f"{chapter}.html").as_uri())
    browser.evaluate(page, LOADED)
    seen = browser.evaluate(page, PLAY)
    assert seen is not None, f"{chapter}: no animation on the page"
    assert not seen.get("noplay"), "the animation has no Play button"
    assert seen["before"]["ok"], "the animation's first frame did not load"
    assert seen["before"]["src"].startswith("data:image/png;base64,")
    assert int(seen["before"]["max"]) >= 10
    assert seen["after"]["value"] != seen["before"]["value"], "the slider did not move after Play"
    assert seen["after"]["src"] != seen["before"]["src"], "the frame did not change after Play"
    assert not seen["external"], f"the page loads external resources: {seen['external']}"


@pytest.mark.slow
def test_gallery_thumbnails_load_and_link_to_anchors(html_dir, browser):
    page = browser.open((html_dir / "executed" / "gallery.html").as_uri())
    browser.evaluate(page, LOADED)
    cards = browser.evaluate(page, CARDS)
    assert len(cards) >= 10, f"expected a card per figure, found {len(cards)}"
    assert sum(c["animation"] for c in cards) >= len(ANIMATED_CHAPTERS), "animations missing from the gallery"
    broken = [c["src"] for c in cards if not c["ok"]]
    assert not broken, f"thumbnails that did not load: {broken}"
    targets: dict[str, set[str]] = {}
    for c in cards:
        assert c["href"], f"card without a link: {c}"
        parts = urlsplit(c["href"])
        targets.setdefault(parts.path, set()).add(parts.fragment)
    missing = []
    for path, anchors in targets.items():
        target = html_dir / "executed" / path
        assert target.exists(), f"gallery links to a missing page {path}"
        tab = browser.open(target.as_uri())
        browser.evaluate(tab, LOADED)
        found = browser.evaluate(
            tab, f"{json.dumps(sorted(a for a in anchors if a))}.filter((id) => !document.getElementById(id))"
        )
        missing += [f"{path}#{a}" for a in found]
    assert not missing, f"gallery links to anchors that do not exist: {missing}"
