"""``gtbook``: execute the chapters under a profile, collect their claims, build the book.

    gtbook run [--profile quick|full] [--only NAME ...] [--set name=value ...]
    gtbook build
    gtbook all [--profile ...]            run, then build
    gtbook claims [--json]
    gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...] [--figure PATH]

Chapters are jupytext percent-format ``notebooks/NN_name.py`` files. Each has one code cell tagged
``parameters`` holding the full (paper-scale) values; the ``quick`` profile's overrides live in
``notebooks/profiles.toml``. papermill executes each chapter into ``executed/.running/`` and moves it
to ``executed/NAME.ipynb`` only on success, so a failed run never destroys the last good output
(the failed notebook is kept in ``executed/failed/``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._progress import QUIET_ENV
from . import gallery, report

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "executed"
PROFILES_FILE = NOTEBOOKS / "profiles.toml"


class BookError(RuntimeError):
    """A user-facing error of the book pipeline: printed as one message, exit code 2."""


# --------------------------------------------------------------------------- chapters
@dataclass
class Chapter:
    name: str
    path: Path
    defaults: dict[str, Any]

    @property
    def executed(self) -> Path:
        return EXECUTED / f"{self.name}.ipynb"


def _read_notebook(path: Path):
    import jupytext

    return jupytext.read(path)


def _shown(path: Path) -> str:
    """A path relative to the repository when it lies inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def chapter_defaults(path: Path) -> dict[str, Any]:
    """The literal assignments of a chapter's ``parameters`` cell, name -> value."""
    nb = _read_notebook(path)
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise BookError(f"{_shown(path)}: no code cell tagged 'parameters' "
                        f"(write it as `# %% tags=[\"parameters\"]`)")
    values: dict[str, Any] = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                values[node.targets[0].id] = ast.unparse(node.value)
    return values


def discover_chapters() -> dict[str, Chapter]:
    """Every ``notebooks/NN_*.py`` chapter, in order."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        out[path.stem] = Chapter(path.stem, path, chapter_defaults(path))
    return out


def load_profiles() -> dict[str, dict[str, dict[str, Any]]]:
    """``{profile: {chapter: {parameter: value}}}`` from ``notebooks/profiles.toml``."""
    with open(PROFILES_FILE, "rb") as fh:
        data = tomllib.load(fh)
    return {name: dict(tables) for name, tables in data.items()}


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare string


def resolve_parameters(chapters: dict[str, Chapter], profile: str, sets: list[str],
                       known: dict[str, Chapter] | None = None) -> dict[str, dict[str, Any]]:
    """The parameters injected into each selected chapter: profile overrides, then ``--set`` values.

    A ``--set name=value`` goes to every selected chapter whose parameters cell defines ``name``.
    Raises BookError for an unknown profile, a profile table naming no chapter of ``known`` (all
    chapters; a typo there would silently run a chapter at full scale), an override of a parameter
    the chapter does not have, or a ``--set`` name that no selected chapter defines (each listing
    the valid ones).
    """
    known = chapters if known is None else known
    profiles = load_profiles()
    if profile not in profiles:
        raise BookError(f"unknown profile {profile!r}; valid profiles: {', '.join(sorted(profiles))}")
    stray = sorted(set(profiles[profile]) - set(known))
    if stray:
        raise BookError(f"{_shown(PROFILES_FILE)}: [{profile}.{stray[0]}] names no chapter; valid chapters: "
                        f"{', '.join(known)}")
    injected: dict[str, dict[str, Any]] = {c: dict(profiles[profile].get(c, {})) for c in chapters}
    for chap, params in injected.items():
        unknown = sorted(set(params) - set(chapters[chap].defaults))
        if unknown:
            raise BookError(f"{chap}: unknown parameter(s) {', '.join(unknown)} in profile {profile!r}; "
                            f"valid parameters: {', '.join(sorted(chapters[chap].defaults))}")
    for item in sets:
        if "=" not in item:
            raise BookError(f"--set takes name=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        targets = [c for c in chapters.values() if key in c.defaults]
        if not targets:
            valid = sorted({p for c in chapters.values() for p in c.defaults})
            raise BookError(f"unknown parameter(s) {key} for {', '.join(chapters)}; valid parameters: "
                            f"{', '.join(valid)}")
        for chap in targets:
            parsed = _parse_value(value)
            default = chap.defaults[key]
            if isinstance(default, int) and not isinstance(default, bool) and isinstance(parsed, float) \
                    and parsed.is_integer():
                parsed = int(parsed)  # `--set n_tokens=1e4` keeps the parameter an int
            injected[chap.name][key] = parsed
    return {c: p for c, p in injected.items() if p}


def select(chapters: dict[str, Chapter], only: list[str] | None) -> list[Chapter]:
    if not only:
        return list(chapters.values())
    picked = []
    for name in only:
        matches = [c for c in chapters.values() if c.name == name or c.name.split("_", 1)[-1] == name
                   or c.name.startswith(name + "_")]
        if len(matches) != 1:
            raise BookError(f"unknown chapter {name!r}; valid chapters: {', '.join(chapters)}")
        picked.append(matches[0])
    return picked


# ------------------------------------------------------------------------------ run
def run_chapter(chapter: Chapter, params: dict[str, Any], profile: str) -> float:
    """Execute one chapter with papermill; return its wall time. Raises BookError on failure."""
    import jupytext
    import nbformat
    import papermill as pm

    running = EXECUTED / ".running"
    failed = EXECUTED / "failed"
    running.mkdir(parents=True, exist_ok=True)
    source = running / f"{chapter.name}.source.ipynb"
    out = running / f"{chapter.name}.ipynb"
    (failed / f"{chapter.name}.ipynb").unlink(missing_ok=True)  # a stale failure from an earlier run
    nb = jupytext.read(chapter.path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, source, fmt="ipynb")
    env_before = {k: os.environ.get(k) for k in ("GTBOOK_PROFILE", QUIET_ENV)}
    os.environ.update({"GTBOOK_PROFILE": profile, QUIET_ENV: "1"})  # inherited by the kernel
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(source), str(out), parameters=params, kernel_name="python3",
                            cwd=str(NOTEBOOKS), progress_bar={"desc": f"  cells of {chapter.name}",
                                                              "leave": False},
                            report_mode=False)
    except Exception as exc:  # a failed cell, a dead kernel, a timeout, a missing kernel
        failed.mkdir(parents=True, exist_ok=True)
        kept = failed / f"{chapter.name}.ipynb"
        if out.exists():
            shutil.move(str(out), kept)
        if isinstance(exc, pm.PapermillExecutionError):
            where = f"in cell {exc.exec_count} (cell index {exc.cell_index}): {exc.ename}: {exc.evalue}"
        else:
            where = f"({type(exc).__name__}: {exc})"
        raise BookError(
            f"chapter {chapter.name} failed {where}\n  "
            + (f"the failed notebook is kept at {_shown(kept)}; " if kept.exists() else "")
            + "the last good output is untouched"
        ) from None
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        source.unlink(missing_ok=True)
    elapsed = time.perf_counter() - start
    executed = nbformat.read(out, as_version=4)
    merged = {**chapter.defaults, **params}
    executed.metadata["gtbook"] = {
        "chapter": chapter.name,
        "profile": profile,
        "parameters": {k: v for k, v in merged.items() if _jsonable(v)},
        "runtime_s": round(elapsed, 2),
    }
    nbformat.write(executed, out)
    os.replace(out, chapter.executed)
    return elapsed


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except TypeError:
        return False


def run(profile: str = "quick", only: list[str] | None = None, sets: list[str] | None = None) -> dict[str, float]:
    """Execute the selected chapters; return their wall times. Stops at the first failure."""
    from tqdm.auto import tqdm

    chapters = discover_chapters()
    picked = select(chapters, only)
    params = resolve_parameters({c.name: c for c in picked}, profile, sets or [], known=chapters)
    times = {}
    bar = tqdm(picked, desc=f"chapters ({profile})", unit="chapter")
    for chap in bar:
        bar.set_postfix_str(chap.name)
        times[chap.name] = run_chapter(chap, params.get(chap.name, {}), profile)
        tqdm.write(f"  {chap.name}: {times[chap.name]:.1f} s, "
                   f"{len(report.collect_claims(EXECUTED, [chap.name]))} claims passed")
    report.write_report(EXECUTED)
    return times


# ---------------------------------------------------------------------------- build
def toc_chapters() -> list[str]:
    """The executed chapters that ``_toc.yml`` lists, in order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc.get("parts", []) for entry in part.get("chapters", [])]
    return [f.split("/", 1)[1] for f in files if f.startswith("executed/") and f not in ("executed/report", "executed/gallery")]


def build() -> Path:
    """Render the executed chapters and the prose with Jupyter Book v1 (warnings are errors)."""
    missing = [name for name in toc_chapters() if not (EXECUTED / f"{name}.ipynb").exists()]
    if missing:
        raise BookError(f"not executed yet: {', '.join(missing)}; run `gtbook run` first")
    report.write_report(EXECUTED)
    gallery.write_gallery(EXECUTED)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(ROOT), "--builder", "html", "-W", "-n",
           "--keep-going"]
    proc = subprocess.run(cmd, cwd=ROOT)
    if proc.returncode != 0:
        raise BookError("jupyter-book build failed (warnings count as errors); see the log above")
    index = ROOT / "_build" / "html" / "index.html"
    print(f"book built: {index}")
    return index


# ------------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gtbook", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def add_run_args(sp):
        sp.add_argument("--profile", default="quick", help="quick (CI) or full (paper scale); default quick")
        sp.add_argument("--only", nargs="+", metavar="NAME", help="chapters to run (file stem, or without NN_)")
        sp.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the selected chapters (repeatable)")

    add_run_args(sub.add_parser("run", help="execute chapters with papermill"))
    sub.add_parser("build", help="render the executed chapters with Jupyter Book")
    add_run_args(sub.add_parser("all", help="run, then build"))
    cl = sub.add_parser("claims", help="print every claim of the executed chapters")
    cl.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    pr = sub.add_parser("probe", help="per-layer Gaussianity of a pretrained Transformer fed Gaussian tokens")
    pr.add_argument("model", nargs="?", default="minilm", help="minilm, modernbert, deit-tiny or a local path")
    pr.add_argument("--mode", default="pure", choices=["pure", "embedding"])
    pr.add_argument("--tokens", type=int, default=256, help="tokens per sequence")
    pr.add_argument("--sequences", type=int, default=16, help="number of sequences")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--figure", default=None, metavar="PATH", help="save the figure here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in ("run", "all"):
            times = run(args.profile, args.only, args.set)
            print("chapter times: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
            if args.command == "all":
                build()
        elif args.command == "build":
            build()
        elif args.command == "claims":
            rows = report.collect_claims(EXECUTED)
            print(json.dumps([r.as_dict() for r in rows], indent=2) if args.json else report.claims_table(rows))
        elif args.command == "probe":
            from .pretrained import ModelNotAvailable, probe

            try:
                result = probe(args.model, mode=args.mode, tokens=args.tokens, sequences=args.sequences,
                               seed=args.seed, figure_path=args.figure)
            except (ModelNotAvailable, ValueError) as exc:
                raise BookError(str(exc)) from None
            print(result.table())
            if args.figure:
                print(f"figure: {args.figure}")
    except BookError as exc:
        print(f"gtbook: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
