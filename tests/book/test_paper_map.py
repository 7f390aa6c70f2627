"""The paper map and the status page, generated from the registry and the executed chapters."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import nbformat

from gtbook import paper_map, status_page
from gtbook.chapters import open_book
from gtbook.statements import load_statements
from minibook import make_mini_book

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e5270de3"
        "0000000049454e44ae426082"
    )
).decode()
SCOPE = {
    "system": "finite-N tokens",
    "d": [3],
    "A": "general",
    "B": "general",
    "V": "scalar",
    "heads": 1,
    "attention": ["dot"],
    "family": "",
}


def _chapter(path, claims_by_section):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 4. A chapter")]
    for k, (title, claims, figure) in enumerate(claims_by_section):
        nb.cells.append(nbformat.v4.new_markdown_cell(f"## {title}"))
        if figure:
            cell = nbformat.v4.new_code_cell("plot()")
            cell.metadata["mystnb"] = {
                "figure": {"name": f"fig-{k}", "caption": f"Figure {k}."},
                "image": {"alt": f"alt {k}"},
            }
            cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "fig"})]
            nb.cells.append(cell)
        cell = nbformat.v4.new_code_cell("claim(...)")
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={"text/plain": "x", "application/vnd.gtbook.claim+json": c})
            for c in claims
        ]
        nb.cells.append(cell)
    nb.metadata["gtbook"] = {"profile": "quick", "parameters": {"seed": 0}, "runtime_s": 2.0}
    nbformat.write(nb, path)


def _c(name, statement, kind, scope=SCOPE):
    return {
        "name": name,
        "statement": statement,
        "kind": kind,
        "value": 0.5,
        "threshold": "value < 1",
        "passed": True,
        "criterion": {"lt": 1.0, "gt": None},
        "scope": scope,
    }


def test_a_node_has_status_scope_claims_figures_and_functions(tmp_path):
    _chapter(
        tmp_path / "04_x.ipynb",
        [
            (
                "Stable draws",
                [_c("a", "stabilising", "reproduces"), _c("b", "stabilising", "derivation", {"system": "moment ODE"})],
                True,
            ),
            ("Blow-up", [_c("c", "blowup", "derivation", {"system": "moment ODE"})], True),
            ("Elsewhere", [], True),
        ],
    )
    from gtbook.gallery import write_gallery

    write_gallery(tmp_path)
    text = paper_map.paper_map_markdown(tmp_path, ["04_x"])
    node = text[text.index("### Stabilising regime") : text.index("### Destabilising")]
    # the statement is stated for V = vI (statements.toml), which the token claim's scope (V = vI, d = 3) covers
    assert "**Status:** reproduced." in node
    assert "**Stated for:** any d; general A, general B, V = vI; dot; constant parameters" in node
    assert "{doc}`04_x <04_x>`: 1 reproduces, 1 derivation" in node
    assert "{py:obj}`gtcore.stability.equilibrium`" in node
    assert ":link: 04_x.html#fig-0" in node and "fig-1" not in node and "fig-2" not in node  # its section's only
    blow = text[text.index("### Destabilising") : text.index("### Riccati")]
    assert ":link: 04_x.html#fig-1" in blow and "derived only" in blow
    nodes = text.count("\n### ")
    assert nodes == len(load_statements())  # one node per statement, checked or not
    assert "`gtcore.stability.equilibrium`" in paper_map.paper_map_markdown(tmp_path, ["04_x"], api=False)


def test_the_status_page_says_when_each_chapter_ran_and_whether_it_is_fresh(tmp_path):
    book = make_mini_book(tmp_path / "mini", ("01_tiny", "02_small"))
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    subprocess.run(
        [sys.executable, "-m", "gtbook", "run", "-j", "2"], cwd=book, check=True, capture_output=True, env=env
    )
    bk = open_book(book)
    rows = {r["chapter"]: r for r in status_page.status_rows(bk)}
    assert rows["01_tiny"]["state"] == rows["02_small"]["state"] == "fresh"  # fresh at the threads they ran with
    assert rows["01_tiny"]["passed"] == rows["01_tiny"]["claims"] == 1 and rows["01_tiny"]["profile"] == "quick"
    src = book / "notebooks" / "02_small.py"
    src.write_text(src.read_text() + "\n# %%\nprint(2)\n")
    (book / "executed" / "01_tiny.ipynb").unlink()
    rows = {r["chapter"]: r for r in status_page.status_rows(bk)}
    assert rows["02_small"]["state"] == "stale" and rows["02_small"]["detail"] == "source"
    assert rows["01_tiny"]["state"] == "missing" and rows["01_tiny"]["claims"] == 0
    page = status_page.status_markdown(list(rows.values()))
    assert "| 1 of 1 | stale (source) |" in page and "| 01_tiny |" in page
