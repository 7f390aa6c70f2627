"""How an executed chapter was made: its cache key, the environment, the commit, and the page's box.

A chapter's **cache key** hashes five components, each kept separately so ``gtbook status`` can say
which one changed:

* ``source``: the chapter's ``notebooks/NN_name.py`` text;
* ``parameters``: the profile and every parameter value the kernel sees (defaults, profile overrides,
  ``--set`` values);
* ``library``: the sources of the ``gtcore`` modules the chapter imports, directly or through other
  modules (the static import graph of ``gtbook.imports``): editing one chapter's study reruns
  that chapter only;
* ``versions``: Python and every package whose version can change a number or a figure
  (``KEY_PACKAGES`` of ``gtbook.imports``: numpy, scipy, torch, transformers, matplotlib, pillow,
  safetensors and the MiniLM weights);
* ``threads``: the number of BLAS/torch threads the kernel ran with. Torch's parallel reductions add
  in an order that depends on it, so chapter 3 under ``-j 2`` (one thread per kernel) differs from
  ``-j 1`` in the last bits of some values: the thread count is part of what the key pins, and a run
  with another thread count reruns the chapter.

Nothing here imports torch or transformers: versions come from package metadata, the GPU from
``nvidia-smi``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gtbook import imports
from gtbook.imports import KEY_PACKAGES, key_versions, package_version

#: reported on the report page besides KEY_PACKAGES
REPORT_PACKAGES = (*KEY_PACKAGES, "jupyter-book", "myst-nb", "papermill")
#: the components of a cache key, in the order ``gtbook status`` reports them
COMPONENTS = ("source", "parameters", "library", "versions", "threads")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr).encode()


def library_hash(source: str, root: str | os.PathLike | Mapping[str, str | os.PathLike] | None = None) -> str:
    """A hash of the ``gtcore`` and ``gtbook`` modules a chapter's ``source`` can run (the ``library``
    component); ``root``: where the packages are (default: where this process imports them)."""
    return imports.modules_hash(imports.chapter_modules(source, root), root)


def key_components(
    source: str,
    profile: str,
    parameters: dict[str, Any],
    *,
    library: str | None = None,
    versions: dict[str, str] | None = None,
    threads: int | None = None,
) -> dict[str, str]:
    """The components of a chapter's cache key (see the module docstring); ``threads`` is kept as the
    number itself (``"2"``), so ``gtbook status`` can say what it was."""
    return {
        "source": _sha(source.encode()),
        "parameters": _sha(_canonical({"profile": profile, "parameters": parameters})),
        "library": library if library is not None else library_hash(source),
        "versions": _sha(_canonical(versions if versions is not None else key_versions())),
        "threads": str(threads) if threads is not None else "default",
    }


def cache_key(components: dict[str, str]) -> str:
    """The key: one hash of the components (16 hex digits)."""
    return _sha(_canonical({k: components[k] for k in COMPONENTS}))[:16]


def stale_reasons(recorded: dict[str, str] | None, current: dict[str, str]) -> list[str]:
    """The components that differ between a recorded key and the current one (all, if none recorded)."""
    if not recorded:
        return list(COMPONENTS)
    return [k for k in COMPONENTS if recorded.get(k) != current[k]]


# ------------------------------------------------------------------------ environment
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def environment() -> dict[str, Any]:
    """Python, the key packages' versions, the OS, CPU and GPU of this machine (no paths)."""
    return {
        "python": platform.python_version(),
        "packages": {p: package_version(p) for p in REPORT_PACKAGES},
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu_model(),
        "cores": _cores(),
        "gpu": ", ".join(_gpus()) or "none",
    }


def git_state(root: str | os.PathLike) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the book's tree (None outside git)."""
    git = shutil.which("git")
    if not git:
        return {"commit": None, "dirty": None}
    try:
        head = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            [git, "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def now_utc() -> str:
    """The date and time, UTC, to the minute."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# -------------------------------------------------------------------- the page's box
def seconds_text(value: Any) -> str:
    """A run time for people (``"12.3 s"``); ``"? s"`` for a value that is not a finite number."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "? s"
    return f"{v:.1f} s" if v == v and abs(v) != float("inf") else "? s"


def code_span(text: Any) -> str:
    """``text`` as a Markdown code span shown literally, whatever it holds (backticks, ``<`` ``>``, ``$``).

    The fence is one backtick longer than the longest run of backticks inside, so the value cannot close
    the span early and turn the rest into Markdown or raw HTML; newlines become spaces.
    """
    text = " ".join(str(text).splitlines())
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if (text.startswith("`") or text.endswith("`") or (text[:1] == " " and text[-1:] == " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}" if text else "` `"


def _value_text(v: Any) -> str:
    return json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else v


def rerun_command(chapter: str, profile: str, overrides: dict[str, Any]) -> str:
    """The exact ``gtbook`` command that reruns a chapter this way, every argument shell-quoted.

    Pasted into a POSIX shell it passes each ``--set name=value`` through unchanged (``shlex.quote``):
    a value holding ``;``, ``$(...)``, backticks or quotes is an argument, never a command.
    """
    import shlex

    parts = ["gtbook", "run", "--only", chapter, "--profile", profile]
    for k, v in overrides.items():
        parts += ["--set", f"{k}={_value_text(v)}"]
    return " ".join(shlex.quote(p) for p in parts)


def commit_text(git: dict[str, Any]) -> str:
    if not git.get("commit"):
        return "not a git checkout"
    return code_span(str(git["commit"])[:10]) + (" (working tree with uncommitted changes)" if git.get("dirty") else "")


def parameters_text(meta: dict[str, Any]) -> str:
    """The parameters that ran and differ from the chapter's own, each marked with where it came from."""
    changed = meta.get("changed", {}) or {}
    overrides = meta.get("overrides", {}) or {}
    items = []
    for k, v in changed.items():
        source = "`--set`" if k in overrides else f"profile {code_span(meta.get('profile', '?'))}"
        items.append(f"{code_span(f'{k} = {_value_text(v)}')} ({source})")
    return ", ".join(items) or "none (the chapter's own values)"


def box_markdown(meta: dict[str, Any], claims: list[dict[str, Any]]) -> str:
    """The MyST admonition that opens a chapter page (``meta`` is the notebook's ``gtbook`` metadata).

    Every value that a user can choose (``--set`` values, the profile) is shown in a code span
    (:func:`code_span`), so it reaches the page as text, never as Markdown or HTML.
    """
    n_pass = sum(bool(c.get("passed")) for c in claims)
    statements = sorted({str(s) for c in claims if (s := c.get("statement"))})  # a claim without one names none
    listed = f" (statements: {', '.join(code_span(s) for s in statements)})" if statements else ""
    claims_text = f"{n_pass} of {len(claims)} passed{listed}" if claims else "none"
    rerun = rerun_command(str(meta["chapter"]), str(meta["profile"]), meta.get("overrides", {}) or {})
    threads = meta.get("threads")
    lines = [
        ":::{admonition} How this page was made",
        ":class: note gtbook-provenance",
        "",
        f"- **Profile** {code_span(meta['profile'])}, **seed** "
        f"{code_span(_value_text(meta.get('parameters', {}).get('seed', 'n/a')))}; "
        f"**parameters that ran, where they differ from the chapter's own:** {parameters_text(meta)}",
        f"- **Run** {seconds_text(meta.get('runtime_s'))} on {code_span(meta.get('date', '?'))}"
        + (f" ({code_span(threads)} thread{'s' if threads != 1 else ''})" if threads is not None else "")
        + f"; **commit** {commit_text(meta.get('git', {}) or {})}; **cache key** "
        f"{code_span(meta.get('cache', {}).get('key', '?'))}",
        f"- **Claims:** {claims_text}",
        f"- **Rerun:** {code_span(rerun)} (then `gtbook build`)",
        ":::",
    ]
    return "\n".join(lines)
