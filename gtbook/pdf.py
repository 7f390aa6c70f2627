r"""The whole book as one PDF, offline: ``gtbook pdf`` (``make pdf``).

Jupyter Book's LaTeX route needs a TeX installation and its ``pdfhtml`` route breaks the mathematics, so
the book is printed the way a reader's browser would print it:

1. the pages generated from the executed chapters are written as for the HTML
   (:func:`gtbook.build.write_generated_pages`);
2. Jupyter Book renders every page of the table of contents but the API reference into **one** HTML page
   (``--builder singlehtml``, in a staging folder; the user's ``_build/html`` is not touched);
3. headless Chromium (:mod:`gtbook.chromium`) opens it, opens every collapsed block (dropdowns,
   hidden code), waits for MathJax to typeset every equation and every image to load, and prints it
   (A4). The PDF is written atomically to ``_build/pdf/gtbook.pdf`` (or ``--out``).

Needs Chromium (``apt-get install chromium`` on Debian); the equations come from the offline MathJax of
``sphinx-mathjax-offline``, so nothing is fetched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gtbook import children
from gtbook import files as _files
from gtbook.chapters import Book, BookError, _book

__all__ = ["PDF", "build_pdf", "reading_toc"]

#: where the PDF goes by default, relative to the book's build folder
PDF = Path("pdf") / "gtbook.pdf"
#: the toc parts left out of the PDF (the API reference is for the screen)
LEFT_OUT = ("API reference",)

#: opens every collapsed block, then resolves once MathJax has typeset the page and every image has loaded
_READY = r"""
new Promise((resolve) => {
  const settle = () => {
    const print = document.createElement('style');  // the page without the site's chrome
    print.textContent = '.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, ' +
      '.bd-footer, .bd-footer-article, .prev-next-area, .headerlink, .search-button, .skip-link, ' +
      '#pst-back-to-top, .primary-toggle, .secondary-toggle {display: none !important}' +
      '.bd-main .bd-content .bd-article-container, .bd-page-width {max-width: 100% !important}';
    document.head.appendChild(print);
    document.querySelectorAll('details').forEach((d) => { d.open = true; });
    document.querySelectorAll('.toggle-hidden, .tag_hide-input .cell_input').forEach((e) => {
      e.classList.remove('toggle-hidden'); e.style.display = '';
    });
    const images = Array.from(document.images).map((img) => img.complete ? Promise.resolve() :
      new Promise((r) => { img.onload = r; img.onerror = r; }));
    const math = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise
               : Promise.resolve();
    Promise.all([math, ...images]).then(() => {
      const text = document.body.innerText;
      resolve({mathjax: document.querySelectorAll('mjx-container').length,
               raw_tex: /\\\[|\\\(|\$\$/.test(text), images: document.images.length});
    });
  };
  if (document.readyState === 'complete') settle(); else window.addEventListener('load', settle);
})
"""


def reading_toc(bk: Book) -> str:
    """The book's ``_toc.yml`` without the parts of ``LEFT_OUT``, as YAML text."""
    import yaml

    toc = yaml.safe_load((bk.root / "_toc.yml").read_text())
    toc["parts"] = [p for p in toc.get("parts", []) if p.get("caption") not in LEFT_OUT]
    return yaml.safe_dump(toc, sort_keys=False)


def _single_html(bk: Book, staging: Path) -> Path:
    """Render the reading toc into one HTML page under ``staging``; return the page."""
    toc = staging / "_toc.yml"
    toc.write_text(reading_toc(bk))
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [
        str(jb) if jb.exists() else "jupyter-book",
        "build",
        str(bk.root),
        "--builder",
        "singlehtml",
        "--toc",
        str(toc),
        "--keep-going",
        "--path-output",
        str(staging),
    ]
    proc = subprocess.run(children.command_dying_with_parent(cmd), cwd=bk.root, capture_output=True, text=True)
    import yaml

    root_doc = str(yaml.safe_load(toc.read_text()).get("root", "index"))
    page = staging / "_build" / "singlehtml" / f"{root_doc}.html"  # index.html only redirects there
    if proc.returncode != 0 or not page.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise BookError(f"jupyter-book could not render the book as one page:\n{tail}")
    # its links (_static/, _images/) are relative to the builder's folder, whatever folder the root doc is in
    # (the book's is book/intro): the page is read from there, or MathJax, the styles and the figures are not found
    flat = page.parents[len(Path(root_doc).parts) - 1] / page.name
    if flat != page:
        flat.write_text(page.read_text())
    return flat


def build_pdf(bk: Book | None = None, out: str | os.PathLike | None = None, *, mixed_profiles: bool = False) -> Path:
    """Print the book to one PDF (see the module docstring); return its path.

    Parameters
    ----------
    bk : Book, optional
        The book (default: the one in the working directory).
    out : path, optional
        The PDF file (default ``_build/pdf/gtbook.pdf``).
    mixed_profiles : bool
        Allow chapters run with different profiles (as ``gtbook build --mixed-profiles``).

    Returns
    -------
    Path
        The PDF written.
    """
    from gtbook.build import check_buildable, toc_chapters, write_generated_pages
    from gtbook.chromium import Browser, chromium_path

    bk = _book(bk)
    names = toc_chapters(bk)
    check_buildable(bk, names, mixed_profiles=mixed_profiles)
    exe = chromium_path()
    if exe is None:
        raise BookError("Chromium is needed to print the book (`apt-get install chromium` on Debian)")
    write_generated_pages(bk, names)
    target = Path(out) if out is not None else bk.build_dir / PDF
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".pdf-staging.", dir=bk.build_dir if bk.build_dir.is_dir() else None))
    try:
        page = _single_html(bk, staging)
        browser = Browser(exe)
        try:
            session = browser.open(page.resolve().as_uri(), width=1100)
            state = browser.evaluate(session, _READY, timeout_ms=180_000)
            if state.get("raw_tex"):
                raise BookError("MathJax left raw TeX in the page; the PDF was not written")
            tmp = target.with_name(f".{target.name}.tmp")
            browser.print_pdf(session, tmp)
            os.replace(tmp, target)
        finally:
            browser.close()
    except OSError as exc:
        raise BookError(_files.os_error_line(exc)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"PDF written: {bk.shown(target)} ({state.get('mathjax', 0)} equations, {state.get('images', 0)} images)")
    return target
