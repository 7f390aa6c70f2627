"""The census of chapter 1's ensembles (gtbook.studies.invariance.census) against general_draws itself."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.studies.invariance.census import DrawFate, draw_census
from gtbook.studies.invariance.ensemble import general_draws


def test_census_counts_every_draw_and_keeps_what_general_draws_keeps():
    kept = general_draws(4, 3, T=1.0, seed=2211, kappa=0.25, kappa_cap=0.45)
    census = draw_census(kept, 4, 3, T=1.0, seed=2211, kappa=0.25, kappa_cap=0.45)
    assert census.count(DrawFate.KEPT) == 4
    assert census.tries == sum(census.count(f) for f in DrawFate)
    # the kept draws' kappa is the generator's, and every rejected one is at or above the cap
    np.testing.assert_allclose(census.kappas[[f is DrawFate.KEPT for f in census.fates]], [dr.kappa_max for dr in kept])
    rejected = census.kappas[[f is DrawFate.ABOVE_CAP for f in census.fates]]
    assert np.all(rejected >= 0.45)
    frac, lo, hi = census.kept_fraction
    assert lo <= frac <= hi and frac == pytest.approx(4 / census.tries)
    assert census.table()["draws made"] == census.tries


def test_census_refuses_another_ensemble():
    other = general_draws(3, 3, T=1.0, seed=7, kappa=0.25, kappa_cap=0.45)
    with pytest.raises(ValueError, match="other draws"):
        draw_census(other, 3, 3, T=1.0, seed=8, kappa=0.25, kappa_cap=0.45)
