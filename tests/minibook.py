"""A tiny book tree for the pipeline's tests: one or two chapters that run in a few seconds."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHAPTER = '''# %% [markdown]
# # {title}
#
# A chapter for the pipeline's tests.

# %% tags=["parameters"]
seed = 0
x = 1.0
n = 3
pause = 0.0
label = "a"
sizes = [1, 2]

# %%
import time

time.sleep(pause)
from gtcore.book.claims import claim

claim("{name}_x", x, lt=2.0, statement="invariance", kind="consistency")
'''


def make_mini_book(path: Path, names: tuple[str, ...] = ("01_tiny",)) -> Path:
    """Write a book tree at ``path`` with the chapters ``names``; return ``path``."""
    path = Path(path)
    (path / "notebooks").mkdir(parents=True)
    (path / "book").mkdir()
    (path / "_config.yml").write_text("title: mini\n")
    toc = "format: jb-book\nroot: book/intro\nparts:\n  - caption: Chapters\n    chapters:\n"
    toc += "".join(f"      - file: executed/{n}\n" for n in names)
    (path / "_toc.yml").write_text(toc)
    profiles = "[full]\n\n[quick]\n\n" + "".join(f"[quick.{n}]\nx = 0.5\n\n" for n in names)
    (path / "notebooks" / "profiles.toml").write_text(profiles)
    for n in names:
        (path / "notebooks" / f"{n}.py").write_text(CHAPTER.format(title=n, name=n.split("_", 1)[1]))
    return path
