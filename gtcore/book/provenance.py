"""How an executed chapter was made: its cache key, the environment, the commit, and the page's box.

A chapter's **cache key** hashes four components, each kept separately so ``gtbook status`` can say
which one changed:

* ``source``: the chapter's ``notebooks/NN_name.py`` text;
* ``parameters``: the profile and every parameter value the kernel sees (defaults, profile overrides,
  ``--set`` values);
* ``library``: the sources of the ``gtcore`` modules the chapter imports, directly or through other
  modules (the static import graph of ``gtcore._dependencies``): editing one chapter's study reruns
  that chapter only;
* ``versions``: Python, numpy, scipy, torch and transformers.

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
from pathlib import Path
from typing import Any

from gtcore import _dependencies as imports
from gtcore._dependencies import KEY_PACKAGES, key_versions, package_version

#: reported on the report page besides KEY_PACKAGES
REPORT_PACKAGES = (*KEY_PACKAGES, "matplotlib", "safetensors", "jupyter-book", "myst-nb", "papermill")
#: the components of a cache key, in the order ``gtbook status`` reports them
COMPONENTS = ("source", "parameters", "library", "versions")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr).encode()


def library_hash(source: str, package_dir: str | os.PathLike | None = None) -> str:
    """A hash of the ``gtcore`` modules a chapter's ``source`` can run (the ``library`` component)."""
    root = None if package_dir is None else Path(package_dir)
    return imports.modules_hash(imports.chapter_modules(source, root), root)


def key_components(source: str, profile: str, parameters: dict[str, Any], *,
                   library: str | None = None, versions: dict[str, str] | None = None) -> dict[str, str]:
    """The four hashed components of a chapter's cache key (see the module docstring)."""
    return {
        "source": _sha(source.encode()),
        "parameters": _sha(_canonical({"profile": profile, "parameters": parameters})),
        "library": library if library is not None else library_hash(source),
        "versions": _sha(_canonical(versions if versions is not None else key_versions())),
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
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
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
        head = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run([git, "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def now_utc() -> str:
    """The date and time, UTC, to the minute."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# -------------------------------------------------------------------- the page's box
def _fmt(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def rerun_command(chapter: str, profile: str, overrides: dict[str, Any]) -> str:
    """The exact ``gtbook`` command that reruns a chapter this way."""
    parts = ["gtbook", "run", "--only", chapter, "--profile", profile]
    for k, v in overrides.items():
        text = json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else v
        parts += ["--set", f"{k}={text}" if all(c not in text for c in " \"'[]{}") else f"'{k}={text}'"]
    return " ".join(parts)


def commit_text(git: dict[str, Any]) -> str:
    if not git.get("commit"):
        return "not a git checkout"
    return f"`{git['commit'][:10]}`" + (" (working tree with uncommitted changes)" if git.get("dirty") else "")


def box_markdown(meta: dict[str, Any], claims: list[dict[str, Any]]) -> str:
    """The MyST admonition that opens a chapter page (``meta`` is the notebook's ``gtbook`` metadata)."""
    changed = meta.get("changed", {})
    changed_text = ", ".join(f"`{k} = {_fmt(v)}`" for k, v in changed.items()) or "none (the chapter's own values)"
    n_pass = sum(bool(c.get("passed")) for c in claims)
    statements = sorted({c.get("statement", "") for c in claims} - {""})
    claims_text = (f"{n_pass} of {len(claims)} passed" + (f" (statements: {', '.join(statements)})"
                                                           if statements else "")) if claims else "none"
    rerun = rerun_command(meta["chapter"], meta["profile"], meta.get("overrides", {}))
    lines = [
        ":::{admonition} How this page was made",
        ":class: note gtbook-provenance",
        "",
        f"- **Profile** `{meta['profile']}`, **seed** `{meta.get('parameters', {}).get('seed', 'n/a')}`; "
        f"**parameters changed from the chapter's defaults:** {changed_text}",
        f"- **Run** {meta.get('runtime_s', float('nan')):.1f} s on {meta.get('date', '?')}; "
        f"**commit** {commit_text(meta.get('git', {}))}; **cache key** `{meta.get('cache', {}).get('key', '?')}`",
        f"- **Claims:** {claims_text}",
        f"- **Rerun:** `{rerun}` (then `gtbook build`)",
        ":::",
    ]
    return "\n".join(lines)
