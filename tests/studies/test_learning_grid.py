"""Chapter 9's grid (gtbook.studies.learning.grid): the seed layout the chapter's numbers rest on, and the
grid's verdicts on hand-made runs with known losses."""

from __future__ import annotations

import numpy as np

from gtbook.studies.learning.grid import band, run_seed
from gtbook.studies.learning.harness import PairLosses


def test_run_seeds_are_the_chapters_layout_and_distinct():
    assert run_seed(0, 1, 0, 256, 8) == 1_000_000 + 25_600 + 8
    assert run_seed(5, 2, 1, 128, 4) == 5 + 2_000_000 + 100_000 + 12_800 + 4
    seeds = {
        run_seed(0, g, k, n, L)
        for g in (1, 2, 3)
        for k in range(3)
        for n in (32, 64, 128, 256)
        for L in (1, 2, 4, 8, 16)
    }
    assert len(seeds) == 3 * 3 * 4 * 5


def test_band_is_the_1_to_99_percent_quantiles():
    losses = np.arange(1.0, 1001.0)
    lo, hi = band(PairLosses(losses=losses, floors=np.zeros(1000), n_tokens=10, rank=2))
    np.testing.assert_allclose([lo, hi], np.quantile(losses, [0.01, 0.99]), rtol=1e-12)
