"""Rank invariance on tokens (gtbook.studies.reachability.rank_tokens)."""

import numpy as np
import pytest

from gtbook.studies.reachability.rank_tokens import excess_spread, random_rank_draw, rank_on_tokens
from gtcore import Controls, simulate
from gtcore.attention import max_sampling_strength


def test_excess_spread_of_known_clouds():
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((500, 2)) @ rng.standard_normal((2, 4))
    assert excess_spread(flat, 2) < 1e-7
    iso = rng.standard_normal((200_000, 3))
    assert excess_spread(iso, 1) == pytest.approx(1.0, abs=0.02)


def test_an_affine_velocity_keeps_the_cloud_in_its_subspace():
    # without attention the velocity is affine: the excess stays at round-off for any N
    rng = np.random.default_rng(1)
    ctl, F = random_rank_draw(4, 2, rng)
    no_attention = Controls(A=ctl.A, b=ctl.b)
    x0 = rng.standard_normal((300, 2)) @ F.T
    tr = simulate(x0, no_attention, (0.0, 1.0), 10, method="euler", record_every=10, keep_tokens=True, device="cpu")
    assert excess_spread(tr.tokens[-1], 2) < 1e-7
    with_attention = simulate(x0, ctl, (0.0, 1.0), 10, method="euler", record_every=10, keep_tokens=True, device="cpu")
    assert excess_spread(with_attention.tokens[-1], 2) > 1e-4  # softmax over 300 tokens is not affine


def test_draws_are_general_and_in_the_finite_variance_regime():
    rng = np.random.default_rng(2)
    ctl, F = random_rank_draw(4, 2, rng, kappa=0.15)
    assert max_sampling_strength(ctl, [0.0], [F @ F.T]) == pytest.approx(0.15, rel=1e-9)
    assert np.abs(ctl.B[0] - ctl.B[0].T).max() > 1e-3 and np.abs(ctl.A).max() > 0
    V = ctl.V[0]
    assert np.abs(V - V[0, 0] * np.eye(4)).max() > 1e-3  # not a multiple of the identity


def test_gaussian_excess_shrinks_uniform_does_not():
    g = rank_on_tokens(3, 1, [200, 1600], draws=2, seeds=2, layers=4, seed=3)
    u = rank_on_tokens(3, 1, [200, 1600], draws=2, seeds=2, layers=4, seed=3, law="uniform")
    assert g.kappa_max < 0.45 and g.excess.shape == (2, 2, 2)
    assert g.slope < -0.25 and u.slope > -0.2
