"""Chapter 4: regimes of constant controls, unselected ensembles over the sign conditions, and tokens.

The names the chapter calls, each imported on first use from the module that owns it (so that importing one
module of this package, as chapter 8 does, loads and depends on no other)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

__all__ = [
    "Outcome",
    "chapter_ensembles",
    "closed_form_checks",
    "cloud_equilibria",
    "counterexample_lines",
    "filter_ensemble",
    "filter_figure",
    "finite_n_section",
    "general_v_poles",
    "markdown_table",
    "outcomes_figure",
    "planar_section",
    "regime_section",
    "run_ensemble",
    "scalar_poles",
    "scalar_section",
    "steering_draws",
    "steering_figure",
    "steering_study",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gtbook.studies.stability' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # the same names, for type checkers
    from gtbook.studies.stability.cloud_equilibria import cloud_equilibria
    from gtbook.studies.stability.ensemble_figures import outcomes_figure, steering_figure
    from gtbook.studies.stability.ensembles import (
        Outcome,
        chapter_ensembles,
        counterexample_lines,
        markdown_table,
        run_ensemble,
    )
    from gtbook.studies.stability.filter_figures import filter_figure
    from gtbook.studies.stability.kalman import filter_ensemble
    from gtbook.studies.stability.pole_checks import general_v_poles, scalar_poles
    from gtbook.studies.stability.sections import (
        closed_form_checks,
        finite_n_section,
        planar_section,
        regime_section,
        scalar_section,
    )
    from gtbook.studies.stability.steering import steering_draws, steering_study
