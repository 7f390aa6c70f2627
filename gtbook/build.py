r"""Rendering the book with Jupyter Book v1, skipped when none of its inputs changed.

**Atomic.** Jupyter Book writes into a staging folder of its own (``_build/.staging.TAG.*``, TAG the
``PID-TICKS`` tag of the process, which a later build checks); only a build that succeeded replaces
``_build/html``, in one step (Linux's ``renameat2(RENAME_EXCHANGE)``
swaps the two folders; elsewhere two renames, which the next build completes if it was cut between
them). The stamp that says which inputs the HTML was built from lives inside it
(``_build/html/.gtbook-build``), so the stamp and the pages are swapped together: a reader, a killed
build and ``gtbook status`` always see one complete build, the old one or the new one.

**Dies with its command.** Jupyter Book runs through :func:`gtbook.children.command_dying_with_parent`:
a ``kill -9`` of ``gtbook build`` kills it too, so no orphan keeps writing while a second build runs.

**One profile.** A book whose chapters were run with different profiles is refused unless asked for
(``gtbook build --mixed-profiles``); so is a chapter whose outputs no longer match what its run
recorded (:func:`gtbook.verify.digest_problem`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gtbook import children, provenance, verify
from gtbook import files as _files
from gtbook.chapters import Book, BookError, _book
from gtbook.mutations import page as mutations_page
from gtbook.processes import process_tag, tag_alive, tag_in_name

__all__ = [
    "STAMP",
    "build",
    "build_inputs",
    "build_key",
    "built_state",
    "chapter_profiles",
    "check_buildable",
    "toc_chapters",
    "write_generated_pages",
]

#: the file inside ``_build/html`` that holds the key of the inputs the pages were built from
STAMP = ".gtbook-build"


# ---------------------------------------------------------------------------- build
def toc_chapters(bk: Book | None = None) -> list[str]:
    """The executed chapters that ``_toc.yml`` lists, in order."""
    import yaml

    toc = yaml.safe_load((_book(bk).root / "_toc.yml").read_text())
    files = [entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])]
    generated = ("executed/report", "executed/gallery", "executed/mutations", "executed/paper_map", "executed/status")
    return [f.split("/", 1)[1] for f in files if f.startswith("executed/") and f not in generated]


def build_inputs(bk: Book) -> list[Path]:
    """Every file Jupyter Book reads: the executed pages, the prose, the configuration, static files,
    and the sources of gtcore and gtbook (the API part, ``book/api/``, renders their docstrings)."""
    import gtbook
    import gtcore

    files = [bk.root / "_config.yml", bk.root / "_toc.yml"]
    files += [
        *sorted(bk.executed.glob("[0-9][0-9]_*.ipynb")),
        bk.executed / "report.md",
        bk.executed / "mutations.md",
        bk.executed / "statuses.md",
        bk.executed / "paper_map.md",
        bk.executed / "status.md",
        *sorted((bk.executed / "openings").glob("*.md")),
    ]
    for folder in ("book", "_static"):
        files += sorted(p for p in (bk.root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for package in (gtcore, gtbook):
        files += sorted(Path(str(package.__file__)).parent.rglob("*.py"))
    return [p for p in files if p.exists()]


def build_key(bk: Book) -> str:
    h = hashlib.sha256(provenance.package_version("jupyter-book").encode())
    for path in build_inputs(bk):
        h.update(bk.shown(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _html(bk: Book) -> Path:
    return bk.build_dir / "html"


def built_state(bk: Book) -> str:
    """``"up to date"``, ``"out of date"`` (an input changed since the last build) or ``"not built"``."""
    html = _html(bk)
    stamp = html / STAMP
    if not (html / "index.html").exists() or not stamp.is_file():
        return "not built"
    try:
        return "up to date" if stamp.read_text() == build_key(bk) else "out of date"
    except OSError:
        return "out of date"


def chapter_profiles(bk: Book, names: list[str]) -> dict[str, list[str]]:
    """``{profile: [chapter, ...]}`` of the executed chapters ``names``."""
    from gtbook.execute import read_meta

    out: dict[str, list[str]] = {}
    for name in names:
        meta = read_meta(bk.executed / f"{name}.ipynb") or {}
        out.setdefault(str(meta.get("profile", "unknown")), []).append(name)
    return out


def _edited_chapters(bk: Book, names: list[str]) -> list[str]:
    import json

    out = []
    for name in names:
        try:
            nb = json.loads((bk.executed / f"{name}.ipynb").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # the report names an unreadable notebook
        problem = verify.digest_problem(nb)
        if problem:
            out.append(f"{name} ({problem})")
    return out


# ----------------------------------------------------------------------- the swap
def _exchange_folders(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _aside(html: Path) -> Path:
    return html.with_name(f".{html.name}.previous")


def _recover(bk: Book) -> None:
    """Finish a swap that was cut between its two renames, and remove dead builds' staging folders."""
    html = _html(bk)
    aside = _aside(html)
    if aside.is_dir():
        if not html.exists():
            os.rename(aside, html)
        else:
            shutil.rmtree(aside, ignore_errors=True)
    if bk.build_dir.is_dir():
        for path in bk.build_dir.glob(".staging.*"):
            tag = tag_in_name(path.name)
            if tag is not None and tag_alive(tag) is False:
                shutil.rmtree(path, ignore_errors=True)
    legacy = bk.build_dir / STAMP  # where an older gtbook kept the stamp
    legacy.unlink(missing_ok=True)


def _put_in_place(new: Path, html: Path) -> None:
    """Make the finished folder ``new`` the book's ``html`` folder; the old one is removed."""
    if not html.exists():
        os.rename(new, html)
        return
    if _exchange_folders(new, html):
        shutil.rmtree(new, ignore_errors=True)  # now the previous build
        return
    aside = _aside(html)
    shutil.rmtree(aside, ignore_errors=True)
    os.rename(html, aside)
    os.rename(new, html)
    shutil.rmtree(aside, ignore_errors=True)


def write_generated_pages(bk: Book, names: list[str]) -> None:
    """Write the pages generated from the executed chapters: the report, the chapters' openings and the
    intro's status lists, the gallery, the paper map, the status page and the mutation page."""
    from gtbook import gallery, openings, paper_map, report, status_page

    try:
        report.write_report(bk.executed)
        openings.write_pages(bk.executed, names)  # the chapters' openings and the intro's status lists
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    gallery.write_gallery(bk.executed, chapters=names)
    paper_map.write_paper_map(
        bk.executed,
        names,  # after the gallery: it shows the gallery's thumbnails
        api=(bk.root / "book" / "api").is_dir(),
    )
    status_page.write_status_page(bk)
    mutations_page.write_page(bk.executed)  # "What the claims can catch", from book/mutations.json


def check_buildable(bk: Book, names: list[str], *, mixed_profiles: bool = False) -> None:
    """BookError unless every chapter of the toc is executed, with one profile (unless ``mixed_profiles``)
    and outputs that match their run."""
    missing = [name for name in names if not (bk.executed / f"{name}.ipynb").exists()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)}; run `gtbook run` first")
    profiles = chapter_profiles(bk, names)
    if len(profiles) > 1 and not mixed_profiles:
        raise BookError(
            "the chapters were run with different profiles ("
            + "; ".join(f"{p}: {', '.join(c)}" for p, c in profiles.items())
            + "); rerun them with one (`gtbook run --profile full`), or pass --mixed-profiles "
            "to build a book that mixes them"
        )
    edited = _edited_chapters(bk, names)
    if edited:
        raise BookError(
            "executed chapters changed after their run: "
            + "; ".join(edited)
            + "; rerun them (`gtbook run`) before building"
        )


def build(bk: Book | None = None, *, force: bool = False, mixed_profiles: bool = False) -> Path:
    """Render the executed chapters and the prose with Jupyter Book v1 (warnings are errors).

    Skipped when none of :func:`build_inputs` changed since the last successful build. Refuses a book
    whose chapters ran with different profiles (unless ``mixed_profiles``) and a chapter whose outputs
    were changed after its run.
    """
    bk = _book(bk)
    names = toc_chapters(bk)
    check_buildable(bk, names, mixed_profiles=mixed_profiles)
    write_generated_pages(bk, names)
    html = _html(bk)
    index = html / "index.html"
    try:
        bk.build_dir.mkdir(parents=True, exist_ok=True)
        _recover(bk)
    except OSError as exc:
        raise BookError(_files.os_error_line(exc)) from None
    key = build_key(bk)
    stamp = html / STAMP
    if not force and index.exists() and stamp.is_file() and stamp.read_text() == key:
        print(f"book up to date (nothing changed since the last build): {bk.shown(index)}")
        return index
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".staging.{process_tag()}.", dir=bk.build_dir))
    except OSError as exc:
        raise BookError(_files.os_error_line(exc)) from None
    try:
        doctrees = bk.build_dir / ".doctrees"
        if doctrees.is_dir():  # Sphinx rereads only the pages that changed
            shutil.copytree(doctrees, staging / "_build" / ".doctrees", symlinks=True)
        jb = Path(sys.executable).with_name("jupyter-book")
        cmd = [
            str(jb) if jb.exists() else "jupyter-book",
            "build",
            str(bk.root),
            "--builder",
            "html",
            "-W",
            "-n",
            "--keep-going",
            "--path-output",
            str(staging),
        ]
        proc = subprocess.run(children.command_dying_with_parent(cmd), cwd=bk.root)
        if proc.returncode != 0:
            raise BookError(
                "jupyter-book build failed (warnings count as errors); see the log above; "
                f"the previous build in {bk.shown(html)} is untouched"
            )
        new = staging / "_build" / "html"
        _files.atomic_write_text(new / STAMP, key)
        _put_in_place(new, html)
        new_trees = staging / "_build" / ".doctrees"
        if new_trees.is_dir():
            shutil.rmtree(doctrees, ignore_errors=True)
            os.rename(new_trees, doctrees)
    except OSError as exc:
        raise BookError(f"{_files.os_error_line(exc)}; the previous build is untouched") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"book built: {bk.shown(index)}")
    return index
