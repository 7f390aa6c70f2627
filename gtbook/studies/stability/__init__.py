"""Chapter 4: regimes of constant controls, unselected ensembles over the sign conditions, and tokens.

The names the chapter calls (``from gtbook.studies.stability import run_ensemble, ...``), each imported on first
use from the module that owns it (the ``_LAZY`` table, which the book's import graph reads: a chapter depends on
the modules of the names it imports, and importing one module of this package, as chapter 8 does, loads and
depends on no other). The names are documented in their modules."""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that owns it
_LAZY: dict[str, str] = {
    "Outcome": "gtbook.studies.stability.ensembles",
    "chapter_ensembles": "gtbook.studies.stability.ensembles",
    "counterexample_lines": "gtbook.studies.stability.ensembles",
    "cloud_equilibria": "gtbook.studies.stability.cloud_equilibria",
    "closed_form_checks": "gtbook.studies.stability.sections",
    "filter_ensemble": "gtbook.studies.stability.kalman",
    "filter_figure": "gtbook.studies.stability.filter_figures",
    "finite_n_section": "gtbook.studies.stability.sections",
    "general_v_poles": "gtbook.studies.stability.pole_checks",
    "markdown_table": "gtbook.studies.stability.ensembles",
    "outcomes_figure": "gtbook.studies.stability.ensemble_figures",
    "planar_section": "gtbook.studies.stability.sections",
    "regime_section": "gtbook.studies.stability.sections",
    "run_ensemble": "gtbook.studies.stability.ensembles",
    "scalar_poles": "gtbook.studies.stability.pole_checks",
    "scalar_section": "gtbook.studies.stability.sections",
    "steering_draws": "gtbook.studies.stability.steering",
    "steering_figure": "gtbook.studies.stability.ensemble_figures",
    "steering_study": "gtbook.studies.stability.steering",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gtbook.studies.stability' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
