"""environment.yml mirrors pyproject.toml."""

import re
import tomllib

import yaml
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _spec(req: str) -> str:
    return req.strip().replace(" ", "")


def test_environment_yml_mirrors_pyproject():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): _spec(r) for r in meta["dependencies"]}
    for extra in meta["optional-dependencies"].values():
        wanted.update({_name(r): _spec(r) for r in extra})
    spec = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = []
    for dep in spec["dependencies"]:
        entries.extend(dep["pip"] if isinstance(dep, dict) else [dep])
    env = {_name(e): _spec(e) for e in entries if not e.startswith(("-e", "pip", "python"))}
    assert set(env) == set(wanted), f"only in pyproject: {set(wanted) - set(env)}; only in environment.yml: {set(env) - set(wanted)}"
    for name, spec in wanted.items():
        if name == "torch":  # the environment pins the CPU wheel the Makefile installs
            assert env[name] == "torch==2.13.0"
            continue
        assert env[name] == spec, f"{name}: pyproject says {spec}, environment.yml says {env[name]}"
