"""Shared fixtures: seeded random problems."""

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run: CI is reproducible, like the chapters.
settings.register_profile("gtbook", derandomize=True, database=None, deadline=None)
settings.load_profile("gtbook")


@pytest.fixture
def rng():
    return np.random.default_rng(20260529)


def random_spd(rng, d, cond=10.0):
    """A symmetric positive-definite matrix with eigenvalues in [1, cond]."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return Q @ np.diag(np.linspace(1.0, cond, d)) @ Q.T


def random_psd(rng, d, r, scale=1.0):
    """A PSD matrix of rank r."""
    F = rng.standard_normal((d, r)) * scale
    S = F @ F.T
    return 0.5 * (S + S.T)
