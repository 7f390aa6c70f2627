"""What the browser tests measure in a rendered page (the driver itself is :mod:`gtbook.chromium`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gtbook.chromium import FLAGS, Browser, chromium_path

__all__ = ["FLAGS", "PAGE_REPORT", "Browser", "chromium_path"]

#: waits for the page and MathJax, then reports what a reader would see
PAGE_REPORT = r"""
new Promise((resolve) => {
  const done = () => {
    document.querySelectorAll('details').forEach((d) => { d.open = true; });  // collapsed detail counts too
    const imgs = Array.from(document.querySelectorAll('article img, main img'));
    const text = (document.querySelector('article') || document.body).innerText;
    resolve({
      mathjax: document.querySelectorAll('mjx-container').length,
      raw_tex: /\\\[|\\\(|\$\$/.test(text),
      images: imgs.map((i) => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0})),
      // tables whose right edge passes the article's while their content cannot scroll into view
      clipped_tables: Array.from(document.querySelectorAll('article table')).filter((t) => {
        const box = (document.querySelector('article') || document.body).getBoundingClientRect();
        const scrolls = t.scrollWidth > t.clientWidth && getComputedStyle(t).overflowX === 'auto';
        return t.getBoundingClientRect().right > box.right + 1 && !scrolls;
      }).map((t) => t.innerText.slice(0, 60)),
      text: text,
    });
  };
  const wait = () => {
    if (document.readyState !== 'complete') { setTimeout(wait, 100); return; }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => setTimeout(done, 200));
    } else { setTimeout(done, 500); }
  };
  wait();
})
"""


#: what overflows on a page at the current width (dropdowns opened first, so their tables count):
#: ``wide``, elements that reach past the content column and are not inside a box that scrolls within
#: it (the outermost of each); ``broken``, words (tokens) a table cell splits across lines; ``page``,
#: ``cut``, code blocks a reader must scroll sideways and content clipped out of reach; ``page``,
#: whether the whole page scrolls sideways; ``captions`` and ``body``, the lowest contrast ratio of a
#: caption and that of the body text, in the dark theme
OVERFLOW_REPORT = r"""
new Promise((resolve) => {
  const describe = (el) => {
    const cls = (el.className && el.className.baseVal === undefined ? el.className : '').toString();
    return el.tagName.toLowerCase() + (cls ? '.' + cls.trim().split(/\s+/).slice(0, 2).join('.') : '') +
      ': ' + (el.innerText || el.getAttribute('alt') || '').trim().slice(0, 50);
  };
  const scrolls = (el) => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX);
  const luminance = (rgb) => {
    const [r, g, b] = rgb.map((c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const rgb = (text) => (text.match(/[\d.]+/g) || []).slice(0, 4).map(Number);
  const background = (el) => {
    for (let p = el; p; p = p.parentElement) {
      const c = rgb(getComputedStyle(p).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const measure = () => {
    const closed = document.documentElement.scrollHeight;  // the page's height as it opens
    // code a reader sees as the page opens: non-blank lines of cell inputs not inside a closed <details>,
    // the parameters cell counted apart
    let code = 0, parameters = 0;
    for (const input of document.querySelectorAll('div.cell .cell_input')) {
      const hidden = input.closest('details');
      if ((hidden && !hidden.open) || input.offsetParent === null) continue;
      const n = input.innerText.split('\n').filter((l) => l.trim()).length;
      if (input.closest('div.cell').classList.contains('tag_parameters')) parameters += n; else code += n;
    }
    document.querySelectorAll('details').forEach((d) => { d.open = true; });
    const article = document.querySelector('article.bd-article') || document.querySelector('article') || document.body;
    const col = article.getBoundingClientRect();
    const wide = [];
    const seen = new Set();
    for (const el of article.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.right <= col.right + 1 && r.left >= col.left - 1) continue;
      let p = el.parentElement, inside = false;
      while (p && p !== article) {
        if (seen.has(p)) { inside = true; break; }
        if (scrolls(p)) {
          const q = p.getBoundingClientRect();
          if (q.right <= col.right + 1 && q.left >= col.left - 1) { inside = true; break; }
        }
        p = p.parentElement;
      }
      if (inside) continue;
      seen.add(el);
      wide.push(describe(el) + ` (${Math.round(r.left)}..${Math.round(r.right)}` +
                ` of ${Math.round(col.left)}..${Math.round(col.right)})`);
    }
    const broken = [];
    for (const cell of article.querySelectorAll('td, th')) {
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let node;
      while ((node = walker.nextNode())) {
        // a line may end after a hyphen or dash (blow-|up), never inside a word
        const re = /[^\s\-\u2013]+[\-\u2013]?/g;
        let m;
        while ((m = re.exec(node.textContent))) {
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const tops = new Set(Array.from(range.getClientRects()).filter((q) => q.width > 0)
                                   .map((q) => Math.round(q.top)));
          if (tops.size > 1) broken.push(m[0]);
        }
      }
    }
    // code that a reader must scroll sideways to read, and content clipped with no way to scroll to it
    const cut = [];
    for (const el of article.querySelectorAll('div.cell_input pre, div.cell_output pre, div.highlight pre')) {
      if (el.scrollWidth > el.clientWidth + 1) {
        cut.push('code: ' + (el.innerText || '').split('\n').find((l) => l.length > 0).slice(0, 60));
      }
    }
    for (const el of article.querySelectorAll('*')) {
      if (el.closest('.math, mjx-container')) continue;  // glyphs a pixel past an inline formula's box
      const ox = getComputedStyle(el).overflowX;
      if ((ox === 'hidden' || ox === 'clip') && el.scrollWidth > el.clientWidth + 2 && el.clientWidth > 0) {
        cut.push('clipped ' + describe(el));
      }
    }
    const page = document.documentElement.scrollWidth > window.innerWidth + 1;
    document.documentElement.dataset.theme = 'dark';
    document.documentElement.dataset.mode = 'dark';
    let captions = null;
    const para = article.querySelector('section > p') || article.querySelector('p');
    const paraFg = para ? luminance(rgb(getComputedStyle(para).color).slice(0, 3)) : 0;
    const paraBg = para ? luminance(background(para)) : 0;
    const body = para ? (Math.max(paraFg, paraBg) + 0.05) / (Math.min(paraFg, paraBg) + 0.05) : null;
    for (const cap of article.querySelectorAll('figcaption, figcaption p, .caption-number, .caption-text')) {
      const fg = luminance(rgb(getComputedStyle(cap).color).slice(0, 3));
      const bg = luminance(background(cap));
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      captions = captions === null ? ratio : Math.min(captions, ratio);
    }
    resolve({wide, broken, cut, page, captions, body, closed, code, parameters,
             height: document.documentElement.scrollHeight});
  };
  const wait = () => {
    if (document.readyState !== 'complete') { setTimeout(wait, 100); return; }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => setTimeout(measure, 300));
    } else { setTimeout(measure, 600); }
  };
  wait();
})
"""


def chromium_or_skip() -> str:
    """The Chromium executable; without one the test is skipped, or fails under CI (``.ci/run`` installs it)."""
    import pytest

    exe = chromium_path()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (CI installs it in .ci/run)")
        pytest.skip("chromium not installed: `apt-get install chromium` to run the browser test")
    return exe


def measure_pages(browser: Browser, pages: list[Path], widths=(1400, 420)) -> dict[str, dict]:
    """:data:`OVERFLOW_REPORT` of every page at every width: ``{"WIDTH PAGE": report}``."""
    out = {}
    for width in widths:
        for page in pages:
            session = browser.open(Path(page).as_uri(), width=width)
            try:
                out[f"{width} {Path(page).parent.name}/{Path(page).name}"] = browser.evaluate(
                    session, OVERFLOW_REPORT, timeout_ms=180000
                )
            finally:
                browser.close_tab(session)
    return out


def overflow_problems(results: dict[str, dict], min_contrast: float = 4.5) -> list[str]:
    """What a reader would trip over, one line per page and width (empty when every page reads well).

    Captions must reach the contrast of the page's body text (within 10 %) in the dark theme, and at
    least ``min_contrast`` (WCAG AA): a caption says what to look at, it is text to read."""
    problems = []
    for where, r in results.items():
        if r["wide"]:
            problems.append(f"{where}: {len(r['wide'])} element(s) wider than the column, e.g. {r['wide'][:3]}")
        if r["broken"]:
            problems.append(f"{where}: {len(r['broken'])} token(s) broken inside table cells, e.g. {r['broken'][:5]}")
        if r["page"]:
            problems.append(f"{where}: the page scrolls sideways")
        if r.get("cut"):
            problems.append(f"{where}: {len(r['cut'])} block(s) cut at the column's edge, e.g. {r['cut'][:3]}")
        wanted = max(min_contrast, 0.9 * (r.get("body") or 0))
        if r["captions"] is not None and r["captions"] < wanted:
            problems.append(
                f"{where}: captions have contrast {r['captions']:.2f} in the dark theme, the body text "
                f"{r.get('body') or 0:.2f}"
            )
    return problems


if __name__ == "__main__":  # python tests/browser.py BUILD/html [OUT.json]: measure a built book by hand
    import sys

    html = Path(sys.argv[1])
    pages = sorted([*(html / "executed").glob("*.html"), *(html / "book").glob("*.html")])
    browser = Browser(chromium_path())
    try:
        results = measure_pages(browser, pages)
    finally:
        browser.close()
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(results, indent=1))
    for where, r in results.items():
        captions = "-" if r["captions"] is None else format(r["captions"], ".2f")
        print(
            f"{where:45s} wide {len(r['wide']):3d}  broken tokens {len(r['broken']):4d}  cut {len(r['cut']):3d}  "
            f"page scrolls {'yes' if r['page'] else 'no '}  caption contrast (dark) {captions} "
            f"(body {r['body'] or 0:.2f})  height {r['closed']} (all open {r['height']})  "
            f"code lines {r['code']} (+{r['parameters']} parameters)"
        )


#: what a chapter page may show as it opens, at 1400 px (issue: a book written for its readers)
MAX_CODE_LINES, MAX_PARAMETER_LINES, MAX_HEIGHT_PX = 80, 25, 12_000


def budget_problems(results: dict[str, dict]) -> list[str]:
    """The chapter pages (``executed/NN_*.html``) over the reading budget at 1400 px, one line each."""
    problems = []
    for where, r in results.items():
        width, page = where.split(" ", 1)
        if width != "1400" or not page.split("/")[-1][:2].isdigit():
            continue
        if r["code"] > MAX_CODE_LINES:
            problems.append(f"{page}: {r['code']} visible code lines (at most {MAX_CODE_LINES})")
        if r["parameters"] > MAX_PARAMETER_LINES:
            problems.append(f"{page}: a parameters cell of {r['parameters']} lines (at most {MAX_PARAMETER_LINES})")
        if r["closed"] > MAX_HEIGHT_PX:
            problems.append(
                f"{page}: {r['closed']} px tall with its collapsed sections closed (at most {MAX_HEIGHT_PX})"
            )
    return problems
