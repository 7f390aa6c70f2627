r"""Rendering the book with Jupyter Book v1, skipped when none of its inputs changed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from gtcore.book import files as _files
from gtcore.book import gallery, provenance, report
from gtcore.book.chapters import Book, BookError, _book

__all__ = ["build", "build_inputs", "build_key", "toc_chapters"]


# ---------------------------------------------------------------------------- build
def toc_chapters(bk: Book | None = None) -> list[str]:
    """The executed chapters that ``_toc.yml`` lists, in order."""
    import yaml

    toc = yaml.safe_load((_book(bk).root / "_toc.yml").read_text())
    files = [entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])]
    return [f.split("/", 1)[1] for f in files
            if f.startswith("executed/") and f not in ("executed/report", "executed/gallery")]


def build_inputs(bk: Book) -> list[Path]:
    """Every file Jupyter Book reads: the executed pages, the prose, the configuration, static files,
    and gtcore's sources (the API part, ``book/api/``, renders their docstrings)."""
    import gtcore

    files = [bk.root / "_config.yml", bk.root / "_toc.yml"]
    files += [*sorted(bk.executed.glob("[0-9][0-9]_*.ipynb")), bk.executed / "report.md"]
    for folder in ("book", "_static"):
        files += sorted(p for p in (bk.root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files += sorted(Path(gtcore.__file__).parent.rglob("*.py"))
    return [p for p in files if p.exists()]


def build_key(bk: Book) -> str:
    h = hashlib.sha256(provenance.package_version("jupyter-book").encode())
    for path in build_inputs(bk):
        h.update(bk.shown(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build(bk: Book | None = None, *, force: bool = False) -> Path:
    """Render the executed chapters and the prose with Jupyter Book v1 (warnings are errors).

    Skipped when none of :func:`build_inputs` changed since the last successful build.
    """
    bk = _book(bk)
    missing = [name for name in toc_chapters(bk) if not (bk.executed / f"{name}.ipynb").exists()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)}; run `gtbook run` first")
    try:
        report.write_report(bk.executed)
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    gallery.write_gallery(bk.executed)
    index = bk.build_dir / "html" / "index.html"
    stamp = bk.build_dir / ".gtbook-build"
    key = build_key(bk)
    if not force and index.exists() and stamp.exists() and stamp.read_text() == key:
        print(f"book up to date (nothing changed since the last build): {index}")
        return index
    stamp.unlink(missing_ok=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(bk.root), "--builder", "html", "-W", "-n",
           "--keep-going"]
    proc = subprocess.run(cmd, cwd=bk.root)
    if proc.returncode != 0:
        raise BookError("jupyter-book build failed (warnings count as errors); see the log above")
    _files.atomic_write_text(stamp, key)
    print(f"book built: {index}")
    return index
