r"""``gtbook``: execute the chapters under a profile, collect their claims, build the book.

    gtbook run [--profile quick|full] [--only NAME ...] [--set name=value ...] [-j N] [--force]
    gtbook status [--profile ...] [--set ...]     fresh / stale (and why) / failed / missing
    gtbook build [--force]
    gtbook all [run options]                      run, then build
    gtbook claims [--json]
    gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...] [--figure PATH]

The book's root is the working directory, or the first folder above it holding ``_config.yml``
(``--root PATH`` to choose; see :mod:`gtcore.book.root`), never the install location. Chapters are
jupytext percent-format ``notebooks/NN_name.py`` files. Each has one code cell tagged ``parameters``
holding the full (paper-scale) values; the ``quick`` profile's overrides live in
``notebooks/profiles.toml``.

**Cache.** A chapter runs only when its executed notebook's key differs from the current one: the key
hashes the chapter's source, its resolved parameters and profile, the ``gtcore`` sources and the
versions of Python, numpy, scipy, torch and transformers (:mod:`gtcore.book.provenance`). ``--force``
reruns (and clears the on-disk cache of ``gtcore._cache``). ``gtbook build`` likewise skips Jupyter
Book when none of its inputs changed.

**Safety.** One ``gtbook run``/``build``/``all`` at a time per tree: a second one waits (or, with
``--no-wait``, fails with a message naming the first). Each chapter executes into its own scratch
folder under ``executed/.running/`` and is published to ``executed/NAME.ipynb`` (under a lock) only on
success, so a failed or interrupted run never destroys the last good output (a failed notebook is kept
in ``executed/failed/``).

**Parallel.** ``-j N`` runs N chapters at once, each in its own kernel, with BLAS and torch threads set
to ``cores // N`` per kernel so the kernels do not oversubscribe the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from gtcore.book import report
from gtcore.book.build import build
from gtcore.book.chapters import Book, BookError, open_book
from gtcore.book.execute import _worker, run, status, status_table
from gtcore.book.lock import LockBusy, TreeLock
from gtcore.book.root import ROOT_ENV

__all__ = ["main"]


# ------------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gtbook", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=None, metavar="PATH",
                   help="the book's folder (default: the working directory or the first one above it "
                        "holding _config.yml)")
    sub = p.add_subparsers(dest="command", required=True)
    add_parser = sub.add_parser

    def add_book_parser(*args, **kw):  # `--root` also after the command (`gtbook status --root PATH`)
        sp = add_parser(*args, **kw)
        sp.add_argument("--root", default=argparse.SUPPRESS, metavar="PATH", help="the book's folder")
        return sp

    sub.add_parser = add_book_parser  # type: ignore[method-assign]  # every subcommand takes --root

    def add_select_args(sp):
        sp.add_argument("--only", nargs="+", action="extend", metavar="NAME",
                        help="chapters (file stem, or without NN_); repeatable")
        sp.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the selected chapters (repeatable)")

    def add_run_args(sp):
        sp.add_argument("--profile", default="quick", help="quick (CI) or full (paper scale); default quick")
        add_select_args(sp)
        sp.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                        help="chapters to run at once, each in its own kernel (threads divided among them)")
        sp.add_argument("--force", action="store_true",
                        help="rerun even fresh chapters (and clear the on-disk cache of pure functions)")
        sp.add_argument("--no-wait", action="store_true",
                        help="fail at once if another gtbook command is running on this book")

    add_run_args(sub.add_parser("run", help="execute the chapters that are not fresh, with papermill"))
    st = sub.add_parser("status", help="each chapter: fresh, stale (and why), failed or missing")
    st.add_argument("--profile", default=None,
                    help="compare against this profile (default: the one each chapter was last run with)")
    add_select_args(st)
    bd = sub.add_parser("build", help="render the executed chapters with Jupyter Book (if anything changed)")
    bd.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    bd.add_argument("--no-wait", action="store_true", help="fail at once if another gtbook command is running")
    add_run_args(sub.add_parser("all", help="run, then build"))
    cl = sub.add_parser("claims", help="print every claim of the executed chapters")
    cl.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    pr = add_parser("probe", help="per-layer Gaussianity of a pretrained Transformer fed Gaussian tokens")
    pr.add_argument("model", nargs="?", default="minilm",
                    help="minilm, modernbert, deit-tiny, a local path or a hub id org/name (local cache only)")
    pr.add_argument("--mode", default="pure", choices=["pure", "embedding"])
    pr.add_argument("--tokens", type=int, default=256, help="tokens per sequence")
    pr.add_argument("--sequences", type=int, default=16, help="number of sequences")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--figure", default=None, metavar="PATH", help="save the figure here")
    at = add_parser("atlas", help="the regime atlas sweep (chapter 8) on Dask: in-process, local, or a cluster")
    at.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="a dask.distributed scheduler (tcp://host:8786), or 'local' for a LocalCluster; "
                         "default: in this process")
    at.add_argument("--out", default="atlas", metavar="DIR", help="folder of the parquet chunks (resumes)")
    at.add_argument("--ds", type=int, nargs="+", default=[2, 3, 4, 5, 6, 7, 8], help="dimensions")
    at.add_argument("--draws", type=int, default=40, help="draws per (attention type, d)")
    at.add_argument("--lanes", type=int, default=256, help="draws per chunk")
    at.add_argument("--workers", type=int, default=2, help="workers of --scheduler local")
    at.add_argument("--seed", type=int, default=0)
    return p


def _claims(bk: Book, as_json: bool) -> str:
    if not report.executed_notebooks(bk.executed):
        raise BookError("nothing has run yet: no executed chapters in "
                        f"{bk.shown(bk.executed)}/. Run `gtbook run` (quick profile, about a minute) or "
                        "`make book` (full profile), then `gtbook claims`")
    try:
        rows = report.collect_claims(bk.executed)
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    return json.dumps([r.as_dict() for r in rows], indent=2) if as_json else report.claims_table(rows)


def _interrupt(signum, frame):
    """Ctrl-C or SIGTERM: unwind (so scratch files are removed and kernels shut down) in silence.

    The libraries' own complaints while unwinding (a kernel that died waiting for a reply, an asyncio
    task whose exception was never retrieved) are not the user's business: logging is switched off, and
    :func:`main` prints one line.
    """
    import logging

    logging.disable(logging.CRITICAL)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if argv is None:  # the command line: Ctrl-C and SIGTERM stop cleanly (exit 130)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
    if getattr(args, "jobs", 1) < 1:
        print("gtbook: error: -j takes a positive number of chapters", file=sys.stderr)
        return 2
    try:
        if args.command == "probe":
            from gtcore.models import ModelNotAvailable
            from gtcore.studies.pretrained.statistics import probe

            try:
                result = probe(args.model, mode=args.mode, tokens=args.tokens, sequences=args.sequences,
                               seed=args.seed, figure_path=args.figure)
            except (ModelNotAvailable, ValueError) as exc:
                raise BookError(str(exc)) from None
            print(result.table())
            if args.figure:
                print(f"figure: {args.figure}")
            return 0
        if args.command == "atlas":
            from gtcore.studies.atlas.sweep import atlas

            try:
                res, table = atlas(args.out, ds=args.ds, draws=args.draws, seed=args.seed, lanes=args.lanes,
                                   scheduler=args.scheduler, workers=args.workers)
            except (ValueError, OSError) as exc:
                raise BookError(str(exc)) from None
            print(table)
            print(res)
            return 0
        bk = open_book(args.root)
        os.environ[ROOT_ENV] = str(bk.root)  # this process's statement registry (the report) is the book's
        if args.command == "status":
            print(status_table(status(bk, args.profile, args.only, args.set)))
        elif args.command == "claims":
            print(_claims(bk, args.json))
        else:  # run, build, all: one at a time per tree
            what = "gtbook " + " ".join(argv if argv is not None else sys.argv[1:])
            try:
                lock = TreeLock(bk.lock_file, wait=not args.no_wait, what=what)
                lock.acquire()
            except LockBusy as exc:
                raise BookError(str(exc)) from None
            try:
                if args.command in ("run", "all"):
                    times = run(args.profile, args.only, args.set, jobs=args.jobs, force=args.force, bk=bk)
                    print("chapter times: " + (", ".join(f"{k} {v:.1f} s" for k, v in times.items())
                                               or "none (every chapter is fresh)"))
                if args.command in ("build", "all"):
                    build(bk, force=args.force)
            finally:
                lock.release()
    except BookError as exc:
        print(f"gtbook: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gtbook: interrupted; finished chapters are kept, the others keep their last good output",
              file=sys.stderr)
        return 130
    return 0


def _entry() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_worker":
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            return _worker(sys.argv[2])
        except KeyboardInterrupt:
            return 130
    return main()
