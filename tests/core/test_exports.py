"""Every name a module exports exists: each ``__all__`` entry of every gtcore module resolves.

Guards against an ``__all__`` that names what the module does not define (the layout of issue 21 found seven
such names in the pretrained statistics module: ``from ... import *`` would have failed). ruff's F822 catches
this for a literal ``__all__``; this test also covers the lazy packages, whose ``__all__`` is computed.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "gtcore"


def _module_names() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "__pycache__" in parts or parts[-1] == "__main__":  # running __main__ would start the CLI
            continue
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


@pytest.mark.parametrize("name", _module_names())
def test_every_exported_name_exists(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
