r"""The mutation check: what the book's claims can catch.

A registry (:mod:`~gtbook.mutations.registry`, package data ``registry.toml``) lists plausible errors
in gtcore's equations and statistics, each as (file, exact original snippet, replacement, what it models,
the unit-test modules that guard the file, a probe). ``gtbook mutations`` (:func:`~gtbook.mutations.run.run_check`)
applies each alone to a temporary copy of the tree, runs the quick book on the chapters that import the
mutated module and the mapped unit tests, and records which chapter and claim caught it, with the claim's
kind, or "survived" (:mod:`~gtbook.mutations.results`). :func:`save_check` writes the records to
``book/mutations.json``; :mod:`~gtbook.mutations.page` renders them as the book's page
"What the claims can catch", and the reproducibility report's headline summarises them.

Modules: ``registry`` (the mutations and applying them), ``trees`` (the copies of the book, probes, unit tests),
``run`` (chapters under a mutation, the baseline, the check),
``results`` (outcomes and the JSON file), ``page`` (the book's page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gtbook.mutations.registry import REGISTRY, Mutation, RegistryError, load_registry
from gtbook.mutations.results import MutationResult, Outcome, load_results, save_results

__all__ = [
    "REGISTRY",
    "RESULTS",
    "Mutation",
    "MutationResult",
    "Outcome",
    "RegistryError",
    "load_registry",
    "load_results",
    "save_check",
]

#: where the results live, relative to the book's root
RESULTS = Path("book") / "mutations.json"


def save_check(path: Path, run: dict[str, Any], results: list[MutationResult]) -> Path:
    """Merge ``results`` into the results file at ``path`` (entries of other mutations are kept, those no
    longer registered dropped, the registry's order kept) and write it; returns the path."""
    registry = load_registry()
    _, old = load_results(path)
    merged = {r.name: r for r in old if r.name in registry}
    merged.update({r.name: r for r in results})
    ordered = [merged[n] for n in registry if n in merged]
    return save_results(path, run, ordered)
