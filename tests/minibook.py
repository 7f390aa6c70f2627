"""A tiny book tree for the pipeline's tests: one or two chapters that run in a few seconds."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHAPTER = """# %% [markdown]
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
from gtbook.claims import claim

claim("{name}_x", x, lt=2.0, statement="invariance", kind="consistency")
"""


CONFIG = """title: mini
only_build_toc_files: true
exclude_patterns: [_build, "**/.*", "executed/.running", "executed/failed", notebooks]
execute:
  execute_notebooks: "off"
parse:
  myst_enable_extensions: [amsmath, dollarmath, colon_fence, deflist]
sphinx:
  config:
    suppress_warnings: ["mystnb.unknown_mime_type"]
    nb_mime_priority_overrides:
      - ["html", "application/vnd.gtbook.claim+json", null]
"""


def make_mini_book(path: Path, names: tuple[str, ...] = ("01_tiny",)) -> Path:
    """Write a book tree at ``path`` with the chapters ``names``; return ``path``."""
    path = Path(path)
    (path / "notebooks").mkdir(parents=True)
    (path / "book").mkdir()
    (path / "book" / "intro.md").write_text("# Mini\n\nA tiny book for the pipeline's tests.\n")
    (path / "_config.yml").write_text(CONFIG)  # as the real book's: nothing executed, warnings are errors
    toc = "format: jb-book\nroot: book/intro\nparts:\n  - caption: Chapters\n    chapters:\n"
    toc += "".join(f"      - file: executed/{n}\n" for n in names)
    toc += (
        "  - caption: Reproducibility\n    chapters:\n      - file: executed/gallery\n"
        "      - file: executed/paper_map\n      - file: executed/status\n"
        "      - file: executed/report\n"
    )
    (path / "_toc.yml").write_text(toc)
    profiles = "[full]\n\n[quick]\n\n" + "".join(f"[quick.{n}]\nx = 0.5\n\n" for n in names)
    (path / "notebooks" / "profiles.toml").write_text(profiles)
    for n in names:
        (path / "notebooks" / f"{n}.py").write_text(CHAPTER.format(title=n, name=n.split("_", 1)[1]))
    return path
