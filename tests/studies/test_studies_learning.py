"""gtbook.studies.learning: chapter 9's harness (targets, noise floors, trained runs, slopes, departures)."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.studies.learning import learned_clouds
from gtbook.studies.learning.harness import (
    PairLosses,
    TrainingSettings,
    energy_comparison,
    haar_rotation,
    null_losses,
    random_targets,
    run_for,
    slack_slope,
    standard_start,
)
from gtbook.studies.learning.learned_clouds import (
    mean_field_departure,
    off_subspace_ratio,
    thickness_against_n,
)
from gtcore import bures_wasserstein, steer
from gtcore.training import best_rank_approximation, rank_floor


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("GTBOOK_NO_CACHE", "1")


def test_random_targets_are_seeded_general_and_of_the_asked_rank():
    a = random_targets(4, 3, 2, seed=5, eigenvalue_range=(0.5, 2.0))
    b = random_targets(4, 3, 2, seed=5, eigenvalue_range=(0.5, 2.0))
    for s, t in zip(a, b, strict=True):
        np.testing.assert_array_equal(s.Sigma, t.Sigma)
        lam = s.eigenvalues
        assert np.all(lam[:2] >= 0.5 - 1e-12) and np.all(lam[:2] <= 2.0 + 1e-12) and abs(lam[2]) < 1e-12
        assert np.linalg.matrix_rank(s.Sigma, tol=1e-9) == 2
        assert np.max(np.abs(np.linalg.eigh(s.Sigma)[1])) < 1.0 - 1e-6  # no eigenvector on an axis
    assert not np.array_equal(a[0].Sigma, random_targets(1, 3, 2, seed=6)[0].Sigma)
    Q = haar_rotation(4, np.random.default_rng(0))
    np.testing.assert_allclose(Q @ Q.T, np.eye(4), atol=1e-12)
    assert np.linalg.det(Q) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rank"):
        random_targets(1, 3, 4, seed=0)


def test_null_losses_behind_the_wall_have_nonnegative_slack_and_a_positive_mean():
    t = random_targets(1, 3, 3, seed=1)[0]
    wall = null_losses(t.mu, t.Sigma, n_tokens=40, rank=2, repeats=20, seed=3)
    assert np.all(wall.slack >= -1e-12)  # the nearest rank-2 Gaussian's samples are planar: the floor is exact
    assert wall.mean > rank_floor(t.Sigma, 2) * 0.5
    same = null_losses(t.mu, t.Sigma, n_tokens=40, rank=3, repeats=20, seed=3)
    np.testing.assert_array_equal(same.floors, 0.0)
    assert same.mean < wall.mean
    again = null_losses(t.mu, t.Sigma, n_tokens=40, rank=2, repeats=20, seed=3)
    np.testing.assert_array_equal(again.losses, wall.losses)
    lo, hi = wall.noise_floor().band(0.98)
    assert lo < wall.mean < hi


def test_slack_slope_recovers_a_known_power_law():
    rng = np.random.default_rng(0)
    pairs = []
    for n in (50, 100, 200, 400, 800):
        slack = 3.0 * n**-0.8 * (1.0 + 0.05 * rng.standard_normal(64))
        pairs.append(PairLosses(losses=slack + 1.0, floors=np.ones(64), n_tokens=n, rank=2))
    fit = slack_slope(pairs, n_boot=300, seed=1)
    assert 0 < fit.se < 0.05
    assert fit.slope == pytest.approx(-0.8, abs=4 * fit.se)
    with pytest.raises(ValueError, match="at least 2"):
        slack_slope(pairs[:1])


def test_off_subspace_ratio():
    rng = np.random.default_rng(2)
    plane = rng.standard_normal((50, 2)) @ rng.standard_normal((2, 3)) + 1.0
    assert off_subspace_ratio(plane, 2) < 1e-14
    assert off_subspace_ratio(rng.standard_normal((50, 3)), 2) > 0.3


SMALL = TrainingSettings(layers=2, steps=25, test_repeats=4)


def test_learning_run_attention_free_stays_planar_and_above_the_exact_floor():
    t = random_targets(1, 3, 3, seed=2)[0]
    run = run_for(t, 2, 32, SMALL, seed=1, attention=False)
    assert run.start_rank == 2 and run.test.losses.shape == (4,)
    assert np.all(run.test.slack >= -1e-12)
    assert run.gaussian_energy == pytest.approx(run.training.energy, rel=1e-12)
    th = thickness_against_n(run, [16, 64], clouds=2, seed=0, target=t)
    assert np.all(th.ratios < 1e-13) and th.kappa == 0.0
    assert np.all(th.losses - th.floors >= -1e-12)
    assert "start rank 2" in repr(run)


def test_mean_field_departure_separates_tokens_from_their_gaussian_dynamics():
    """Attention-free layers: tokens follow the exact layer maps, the departure is sampling. A hard-attention
    layer (huge B): far beyond its floor."""
    t = random_targets(1, 3, 3, seed=3)[0]
    run = run_for(t, 3, 64, SMALL, seed=2, attention=False)
    calm = mean_field_departure(run, t.mu, t.Sigma, clouds=4, repeats=50, seed=0)
    assert not calm.departed and calm.endpoint_rank == 3 and calm.kappa == 0.0
    from gtcore import Controls

    hard = Controls(A=np.zeros((3, 3)), b=np.zeros(3), V=np.eye(3), B=30.0 * np.eye(3))
    run.training.controls = (hard,) * 2
    sharp = mean_field_departure(run, t.mu, t.Sigma, clouds=4, repeats=50, seed=0)
    assert sharp.departed and sharp.kappa > 100


def test_energy_comparison_behind_the_wall_steers_to_the_nearest_gaussian():
    t = random_targets(1, 3, 3, seed=4)[0]
    run = run_for(t, 2, 24, SMALL, seed=3, attention=False)
    cmp = energy_comparison(t, 2, run, run, pieces=2)
    mu0, S0 = standard_start(3, 2)
    m, S = best_rank_approximation(t.mu, t.Sigma, 2)
    assert cmp.constructive == pytest.approx(steer(mu0, S0, m, S, 1.0).energy(), rel=1e-12)
    assert cmp.min_energy <= cmp.constructive * (1 + 1e-9) and cmp.min_energy_error < 1e-6
    # abs 1e-7: the Bures formula takes square roots of the d - r round-off eigenvalues of a rank-r product
    assert bures_wasserstein(m, S, t.mu, t.Sigma) ** 2 == pytest.approx(rank_floor(t.Sigma, 2), abs=1e-7)


def test_attended_tokens_is_n_for_uniform_attention_and_one_for_hard_attention():
    t = random_targets(1, 3, 3, seed=5)[0]
    run = run_for(t, 3, 40, SMALL, seed=4, attention=False)
    assert np.all(np.isinf(learned_clouds.attended_tokens(run, seed=0)))
    from gtcore import Controls

    run.training.controls = (
        Controls(A=np.zeros((3, 3)), V=np.eye(3), B=np.zeros((3, 3))),
        Controls(A=np.zeros((3, 3)), V=np.eye(3), B=200.0 * np.eye(3)),
    )
    ess = learned_clouds.attended_tokens(run, seed=0)
    assert ess[0] == pytest.approx(40.0) and ess[1] < 1.5
