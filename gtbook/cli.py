r"""``gtbook``: execute the chapters under a profile, collect their claims, build the book.

    gtbook run [--profile quick|full] [--only NAME ...] [--set name=value ...] [-j N] [--force]
    gtbook status [--profile ...] [--only ...] [--set ...] [-j N]   fresh / stale (and why) / failed / missing
    gtbook build [--force] [--mixed-profiles]
    gtbook all [run options] [--mixed-profiles]                        run, then build
    gtbook claims [--json] [--wide] [--failed] [--only ...] [--statement ID ...]
    gtbook mutations [--only NAME ...] [-j N] [--chapters NAME ...] [--verify]   what the claims can catch
    gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...] [--figure PATH]
    gtbook --version

The book's root is the working directory, or the first folder above it holding ``_config.yml``
(``--root PATH`` to choose; see :mod:`gtbook.root`), never the install location. Chapters are
jupytext percent-format ``notebooks/NN_name.py`` files. Each has one code cell tagged ``parameters``
holding the full (paper-scale) values; the ``quick`` profile's overrides live in
``notebooks/profiles.toml``.

**Profiles stick.** Without ``--profile``, ``gtbook run`` reruns each chapter with the profile it was
last run with (a chapter never run: the profile of the others, else ``quick``); ``gtbook all`` uses the
book's one profile. ``gtbook status`` takes the same arguments as ``run`` and says what that ``run``
would do.

**Cache.** A chapter runs only when its executed notebook's key differs from the current one: the key
hashes the chapter's source, its resolved parameters and profile, the ``gtcore`` sources, the versions
of Python and the packages that change numbers or figures, and the kernel's thread count
(:mod:`gtbook.provenance`). ``--force`` reruns (and clears the on-disk cache of
``gtbook.cache``). ``gtbook build`` likewise skips Jupyter Book when none of its inputs changed.

**Safety.** One ``gtbook run``/``build``/``all`` at a time per tree: a second one waits (or, with
``--no-wait``, fails with a message naming the first). Each chapter executes into its own scratch
folder under ``executed/.running/`` and is published to ``executed/NAME.ipynb`` (under a lock) only on
success, so a failed or interrupted run never destroys the last good output (a failed notebook is kept
in ``executed/failed/``). Workers and Jupyter Book die with the command that started them.

**Parallel.** ``-j N`` runs N chapters at once, each in its own kernel, with BLAS and torch threads set
to ``cores // N`` per kernel so the kernels do not oversubscribe the machine (the thread count is part
of the cache key: ``-j`` changes it). The chapters start longest first, by the wall time of their last
run with the same profile; chapters with no such run start first, in book order
(:func:`gtbook.execute.longest_first`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

# (the pipeline's modules are imported where a command needs them: `gtbook --help` imports no numpy)
from gtbook.chapters import Book, BookError, open_book
from gtbook.files import os_error_line
from gtbook.lock import LockBusy, LockFailed, TreeLock
from gtbook.root import ROOT_ENV

__all__ = ["main"]


# ------------------------------------------------------------------------------ CLI
def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("gaussian-transformer-book")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


_COMMANDS = {
    "run": (
        "execute the chapters that are not fresh, with papermill",
        "Execute the selected chapters whose executed notebook is not fresh (source, parameters, "
        "library, package versions or thread count changed), each in its own kernel, and publish "
        "each one that succeeds to executed/. Without --profile, each chapter reruns with the profile "
        "it was last run with. A failing claim stops the run (exit 2).",
    ),
    "status": (
        "each chapter: fresh, stale (and why), failed or missing",
        "Say, for each chapter, what `gtbook run` with the same options would do: fresh (nothing), "
        "stale (and which part of its key changed, or that its outputs were edited), failed or "
        "missing; then whether the HTML is up to date.",
    ),
    "build": (
        "render the executed chapters with Jupyter Book (if anything changed)",
        "Render the executed chapters, the prose and the report into _build/html with Jupyter Book "
        "(warnings are errors). Skipped when no input changed; a book whose chapters ran with "
        "different profiles is refused unless --mixed-profiles.",
    ),
    "pdf": (
        "print the whole book to one PDF (offline, headless Chromium)",
        "Render every chapter and prose page (not the API reference) into one HTML page with Jupyter Book, "
        "open it in headless Chromium, wait for MathJax and the figures, and print it to "
        "_build/pdf/gtbook.pdf (or --out). Needs the chapters executed (`gtbook run`) and Chromium.",
    ),
    "all": (
        "run, then build",
        "`gtbook run`, then `gtbook build`. Without --profile, every chapter runs with the book's "
        "profile (the one its executed chapters share).",
    ),
    "claims": (
        "print the claims of the executed chapters",
        "Print every claim recorded in the executed chapters, each evaluated again from its value "
        "and criterion: a table (chapter, claim, kind, value, result; --wide for every column) "
        "with a summary line, or JSON (--json, with numeric lower/upper bounds).",
    ),
    "mutations": (
        "what the claims can catch: the quick book under each registered mutation of gtcore",
        "Apply each plausible error of gtbook/mutations/registry.toml alone to a temporary copy "
        "of the tree, run the chapters that import the mutated module and its unit tests, and record "
        "which claim (if any) caught it in book/mutations.json, the source of the page 'What the "
        "claims can catch'. Takes about a minute per mutation per chapter run; --verify only checks "
        "that each entry applies once, compiles and changes its probe. The results file is checked "
        "before the first mutation and saved as each one finishes: a stopped run resumes.",
    ),
    "clean": (
        "remove executed notebooks whose chapter source is gone (--orphans)",
        "With --orphans: remove every executed notebook (and failed notebook) whose source "
        "notebooks/NN_name.py no longer exists, e.g. after a chapter was renamed; they are not counted "
        "by `gtbook claims` or the report, and `gtbook status` lists them as orphan.",
    ),
    "probe": (
        "per-layer Gaussianity of a pretrained Transformer fed Gaussian tokens",
        "Feed N(0, I) tokens to a pretrained model found on this machine (no download) and print "
        "per-layer Gaussianity statistics.",
    ),
    "atlas": (
        "the regime atlas sweep (chapter 8) on Dask: in-process, local, or a cluster",
        "Sweep the condition ensembles of chapter 8 (draws per attention type and dimension), classify "
        "each draw's regime, write the results as parquet chunks to --out (a rerun resumes) and print "
        "the regime fractions with Wilson 95 % intervals. Runs in this process, on a local Dask "
        "cluster (--scheduler local) or on a dask.distributed scheduler.",
    ),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtbook",
        description="gtbook: execute the book's chapters under a profile, "
        "collect their claims, build the book (the executable companion to arXiv:2606.07600).",
        epilog="`gtbook COMMAND --help` describes each command.",
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"gtbook {_version()}",
        help="print the version of the installed distribution and exit",
    )
    p.add_argument(
        "--root",
        default=None,
        metavar="PATH",
        help="the book's folder (default: the working directory or the first one above it holding _config.yml)",
    )
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="run, status, build, pdf, all, claims, clean, mutations, probe or atlas "
        "(`gtbook COMMAND --help` for its options)",
    )

    def add_book_parser(name):  # `--root` also after the command (`gtbook status --root PATH`)
        short, long = _COMMANDS[name]
        sp = sub.add_parser(name, help=short, description=long)
        sp.add_argument("--root", default=argparse.SUPPRESS, metavar="PATH", help="the book's folder")
        return sp

    def add_select_args(sp):
        sp.add_argument(
            "--only",
            nargs="+",
            action="extend",
            metavar="NAME",
            help="chapters (file stem, or without NN_); repeatable",
        )
        sp.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="override a parameter of the selected chapters (repeatable; the value has the "
            "type of the parameter's default)",
        )

    def add_profile_arg(sp):
        sp.add_argument(
            "--profile",
            default=None,
            help="quick (CI) or full (paper scale); default: the profile each chapter was last "
            "run with (a chapter never run: the book's, else quick)",
        )

    def add_jobs_arg(sp):
        sp.add_argument(
            "-j",
            "--jobs",
            type=int,
            default=1,
            metavar="N",
            help="chapters to run at once, each in its own kernel (threads divided among them), "
            "the longest last time first",
        )

    def add_run_args(sp):
        add_profile_arg(sp)
        add_select_args(sp)
        add_jobs_arg(sp)
        sp.add_argument(
            "--force",
            action="store_true",
            help="rerun even fresh chapters (and clear the on-disk cache of pure functions)",
        )
        sp.add_argument(
            "--no-wait", action="store_true", help="fail at once if another gtbook command is running on this book"
        )

    def add_mixed_arg(sp):
        sp.add_argument(
            "--mixed-profiles",
            action="store_true",
            help="build even when the chapters were run with different profiles",
        )

    add_run_args(add_book_parser("run"))
    st = add_book_parser("status")
    add_profile_arg(st)
    add_select_args(st)
    add_jobs_arg(st)
    bd = add_book_parser("build")
    bd.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    bd.add_argument("--no-wait", action="store_true", help="fail at once if another gtbook command is running")
    add_mixed_arg(bd)
    pf = add_book_parser("pdf")
    pf.add_argument("--out", default=None, metavar="PATH", help="the PDF file (default _build/pdf/gtbook.pdf)")
    pf.add_argument("--no-wait", action="store_true", help="fail at once if another gtbook command is running")
    add_mixed_arg(pf)
    al = add_book_parser("all")
    add_run_args(al)
    add_mixed_arg(al)
    cl = add_book_parser("claims")
    cl.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list (every field, numeric bounds; an infinite or NaN number as the string "
        '"inf", "-inf" or "nan")',
    )
    cl.add_argument(
        "--wide", action="store_true", help="every column (statement, criterion, profile, seed, --set values)"
    )
    cl.add_argument("--failed", action="store_true", help="only the claims that fail")
    cl.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="only these chapters (file stem, or without NN_); repeatable",
    )
    cl.add_argument(
        "--statement",
        nargs="+",
        action="extend",
        metavar="ID",
        help="only the claims that check these statements (ids of the statement registry)",
    )
    cn = add_book_parser("clean")
    cn.add_argument(
        "--orphans", action="store_true", required=True, help="remove executed notebooks whose chapter source is gone"
    )
    cn.add_argument("--no-wait", action="store_true", help="fail at once if another gtbook command is running")
    mu = add_book_parser("mutations")
    mu.add_argument("--only", nargs="+", action="extend", metavar="NAME", help="these mutations (default: all)")
    mu.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="chapters to run at once (default 1)")
    mu.add_argument("--profile", default="quick", help="the chapters' profile (default quick)")
    mu.add_argument(
        "--chapters",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="run only these chapters (default: every chapter that imports the mutated module)",
    )
    mu.add_argument("--no-unit-tests", action="store_true", help="do not run the unit tests of each mutated file")
    mu.add_argument(
        "--no-baseline",
        action="store_true",
        help="do not run the unmutated chapters and tests first (they are then assumed to pass)",
    )
    mu.add_argument(
        "--verify",
        action="store_true",
        help="only check that each mutation applies once, compiles and changes its probe",
    )
    mu.add_argument(
        "--output",
        default=None,
        metavar="PATH",
        help="results file (default book/mutations.json; other mutations' entries are kept)",
    )
    mu.add_argument("--keep", action="store_true", help="keep the temporary trees (for debugging)")
    mu.add_argument(
        "--restart",
        action="store_true",
        help="measure every mutation again, even those a stopped run of the same tree saved",
    )
    short, long = _COMMANDS["probe"]
    pr = sub.add_parser("probe", help=short, description=long)
    pr.add_argument(
        "model",
        nargs="?",
        default="minilm",
        help="minilm, modernbert, deit-tiny, a local path or a hub id org/name (local cache only)",
    )
    pr.add_argument(
        "--mode",
        default="pure",
        choices=["pure", "embedding"],
        help="pure: Gaussian tokens straight into the first layer; embedding: through the "
        "model's embedding layer (default pure)",
    )
    pr.add_argument("--tokens", type=int, default=256, help="tokens per sequence (default 256)")
    pr.add_argument("--sequences", type=int, default=16, help="number of sequences (default 16)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the Gaussian tokens (default 0)")
    pr.add_argument("--figure", default=None, metavar="PATH", help="save the figure here")
    short, long = _COMMANDS["atlas"]
    at = sub.add_parser("atlas", help=short, description=long)
    at.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDR",
        help="a dask.distributed scheduler (tcp://host:8786), or 'local' for a LocalCluster; default: in this process",
    )
    at.add_argument(
        "--out", default="atlas", metavar="DIR", help="folder of the parquet chunks (resumes; default atlas)"
    )
    at.add_argument(
        "--ds",
        type=int,
        nargs="+",
        default=[2, 3, 4, 5, 6, 7, 8],
        metavar="D",
        help="dimensions (default 2 3 4 5 6 7 8)",
    )
    at.add_argument("--draws", type=int, default=40, help="draws per (attention type, d) (default 40)")
    at.add_argument("--lanes", type=int, default=256, help="draws per chunk (default 256)")
    at.add_argument("--workers", type=int, default=2, help="workers of --scheduler local (default 2)")
    at.add_argument("--seed", type=int, default=0, help="seed of the condition draws (default 0)")
    at.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds a --scheduler has to accept the connection, and to answer whenever no chunk "
        "finished for that long (default 30)",
    )
    return p


def _clean_orphans(bk: Book) -> str:
    """Remove the orphan executed notebooks (and their failed runs); say which."""
    from gtbook import report

    gone = []
    for path in report.orphan_notebooks(bk.executed):
        path.unlink()
        (bk.failed / path.name).unlink(missing_ok=True)
        gone.append(path.stem)
    sources = bk.root / "notebooks"
    for path in sorted(bk.failed.glob("[0-9][0-9]_*.ipynb")) if bk.failed.is_dir() else []:
        if not (sources / f"{path.stem}.py").exists():
            path.unlink()
            gone.append(f"failed/{path.stem}")
    return ("removed orphan notebooks: " + ", ".join(gone)) if gone else "no orphan notebooks"


def _claims(bk: Book, args) -> str:
    from gtbook import report

    if not report.executed_notebooks(bk.executed):
        raise BookError(
            "nothing has run yet: no executed chapters in "
            f"{bk.shown(bk.executed)}/. Run `gtbook run` (quick profile, about a minute) or "
            "`make book` (full profile), then `gtbook claims`"
        )
    names = None
    if args.only:
        from gtbook.chapters import discover_chapters, select

        names = [c.name for c in select(discover_chapters(bk), args.only)]
    try:
        rows = report.collect_claims(bk.executed, names)
    except report.ReportError as exc:
        raise BookError(str(exc)) from None
    if args.statement:
        from gtbook.statements import load_statements

        known = load_statements()
        unknown = [s for s in args.statement if s not in known]
        if unknown:
            raise BookError(f"unknown statement(s) {', '.join(unknown)}; known statements: {', '.join(known)}")
        rows = [r for r in rows if r.statement in args.statement]
    shown = [r for r in rows if not r.passed] if args.failed else rows
    if args.json:  # valid JSON: no Infinity or NaN tokens
        return json.dumps(_json_safe([r.as_dict() for r in shown]), indent=2, allow_nan=False)
    table = report.claims_table(shown, wide=args.wide) if shown else "no claims match"
    orphans = [p.stem for p in report.orphan_notebooks(bk.executed)]
    note = (
        (
            f"\nnot counted: executed notebooks without a source (orphans): {', '.join(orphans)}; "
            "`gtbook clean --orphans` removes them"
        )
        if orphans and not names
        else ""
    )
    return table + "\n" + report.claims_summary(rows, shown=len(shown)) + note


def _json_safe(v: Any) -> Any:
    """``v`` with every non-finite float written as the string ``"inf"``, ``"-inf"`` or ``"nan"`` (JSON has no
    such numbers; Python's ``float()`` reads the strings back)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else "inf" if v > 0 else "-inf"
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def _mutations(bk: Book, args: argparse.Namespace) -> int:
    """``gtbook mutations``: run (or only verify) the mutation check, saving its results as it goes (a run
    stopped half-way resumes), then render its page."""
    from gtbook.mutations import RESULTS, load_results
    from gtbook.mutations.page import write_page
    from gtbook.mutations.registry import RegistryError
    from gtbook.mutations.run import run_check, verify

    out = Path(args.output) if args.output else bk.root / RESULTS
    try:
        if args.verify:
            problems = verify(bk.root, args.only)
            bad = {k: v for k, v in problems.items() if v}
            print(f"{len(problems) - len(bad)} of {len(problems)} mutations apply once, compile and change their probe")
            return 1 if bad else 0
        chapters = None
        if args.chapters:
            from gtbook.chapters import discover_chapters, select

            chapters = [c.name for c in select(discover_chapters(bk), args.chapters)]
        run, results = run_check(
            bk.root,
            args.only,
            profile=args.profile,
            jobs=args.jobs,
            chapters=chapters,
            unit_tests=not args.no_unit_tests,
            baseline=not args.no_baseline,
            keep=args.keep,
            results=out,
            writes=[bk.executed] if bk.executed.is_dir() else [],
            resume=not args.restart,
        )
    except RegistryError as exc:
        raise BookError(str(exc)) from None
    except KeyboardInterrupt:
        try:
            done = load_results(out)[0].get("done", [])
        except ValueError:
            done = []
        print(
            f"gtbook: interrupted; {len(done)} measured mutation(s) are saved in {bk.shown(out)}: the same "
            "command resumes with the others",
            file=sys.stderr,
        )
        return 130
    if bk.executed.is_dir():
        write_page(bk.executed, out)
    width = max(len(r.name) for r in results) if results else 8
    for r in results:
        ut = "-" if r.unit_tests is None or r.unit_tests.caught is None else ("y" if r.unit_tests.caught else "n")
        print(
            f"{r.name.ljust(width)}  {r.outcome.value:<11}  tests {ut}  "
            + (r.caught_by.describe() if r.caught_by else "")
        )
    print(f"results: {bk.shown(out)} ({run['wall_s'] / 60:.1f} min)")
    return 0


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
    """The ``gtbook`` command (``argv`` defaults to the command line); returns the exit code."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_broken_pipe()
    return code


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if argv is None:  # the command line: Ctrl-C and SIGTERM stop cleanly (exit 130)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
    if getattr(args, "jobs", 1) < 1:
        print("gtbook: error: -j takes a positive number of chapters", file=sys.stderr)
        return 2
    try:
        if args.command == "probe":
            from gtbook.studies.pretrained.statistics import probe
            from gtcore.models import ModelNotAvailable

            try:
                result = probe(
                    args.model,
                    mode=args.mode,
                    tokens=args.tokens,
                    sequences=args.sequences,
                    seed=args.seed,
                    figure_path=args.figure,
                )
            except (ModelNotAvailable, ValueError) as exc:
                raise BookError(str(exc)) from None
            print(result.table())
            if args.figure:
                print(f"figure: {args.figure}")
            return 0
        if args.command == "atlas":
            from gtbook.studies.atlas.sweep import SchedulerError, atlas

            try:
                res, table = atlas(
                    args.out,
                    ds=args.ds,
                    draws=args.draws,
                    seed=args.seed,
                    lanes=args.lanes,
                    scheduler=args.scheduler,
                    workers=args.workers,
                    timeout=args.timeout,
                )
            except (ValueError, SchedulerError) as exc:
                raise BookError(str(exc).replace("the same sweep", "the same gtbook atlas command")) from None
            except KeyboardInterrupt:
                print(
                    f"gtbook: interrupted; the finished chunks are kept in {args.out}: the same command resumes",
                    file=sys.stderr,
                )
                return 130
            print(table)
            print(res)
            return 0
        bk = open_book(args.root)
        os.environ[ROOT_ENV] = str(bk.root)  # this process's statement registry (the report) is the book's
        if args.command == "mutations":
            return _mutations(bk, args)
        from gtbook.build import build, built_state
        from gtbook.execute import book_profile, plan, run, status, status_table

        if args.command == "status":
            print(status_table(status(bk, args.profile, args.only, args.set, jobs=args.jobs)))
            print(f"HTML: {built_state(bk)}")
        elif args.command == "claims":
            print(_claims(bk, args))
        else:  # run, build, pdf, all, clean: one at a time per tree
            if args.command in ("run", "all"):  # a typo fails before the lock: nothing written, not even executed/
                plan(bk, args.profile, args.only, args.set or [], jobs=args.jobs)
            what = "gtbook " + " ".join(argv if argv is not None else sys.argv[1:])
            try:
                lock = TreeLock(bk.lock_file, wait=not args.no_wait, what=what)
                lock.acquire()
            except (LockBusy, LockFailed) as exc:
                raise BookError(str(exc)) from None
            try:
                if args.command in ("run", "all"):
                    profile = args.profile
                    if profile is None and args.command == "all" and not args.mixed_profiles:
                        profile = book_profile(bk, strict=True)  # the book's one profile (None: none ran)
                    times = run(profile, args.only, args.set, jobs=args.jobs, force=args.force, bk=bk, token=lock.token)
                    print(
                        "chapter times: "
                        + (", ".join(f"{k} {v:.1f} s" for k, v in times.items()) or "none (every chapter is fresh)")
                    )
                if args.command in ("build", "all"):
                    build(bk, force=args.force, mixed_profiles=args.mixed_profiles)
                if args.command == "clean":
                    print(_clean_orphans(bk))
                if args.command == "pdf":
                    from gtbook.pdf import build_pdf

                    build_pdf(bk, args.out, mixed_profiles=args.mixed_profiles)
            finally:
                lock.release()
    except BookError as exc:
        print(f"gtbook: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a read-only folder, a full disk: one line naming the path and the cause
        if isinstance(exc, BrokenPipeError):
            raise
        print(f"gtbook: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "gtbook: interrupted; finished chapters are kept, the others keep their last good output", file=sys.stderr
        )
        return 130
    return 0


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``gtbook status | head -2``): exit quietly, as a Unix tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


def _entry() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_worker":
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        from gtbook.execute import _worker

        try:
            return _worker(sys.argv[2])
        except KeyboardInterrupt:
            return 130
    return main()
