"""Chapter 2's checks over general parameters (gtbook.studies.beyond.general): the layer with a feed-forward
block, the fold's Hotelling check, and the mixture sampler's z-scores, each against an independent answer."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.studies.beyond.general import (
    _moment_z,
    feedforward_fold_check,
    general_feedforward_layer,
    general_mixture,
    mixture_sample_check,
)
from gtcore.attention import max_sampling_strength
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.mixtures import GaussianMixture, LabelledTokens
from gtcore.stats.sampling import gaussian_tokens


def test_general_layer_is_general_and_calibrated():
    layer = general_feedforward_layer(3, T=1.0, seed=5)
    c = layer.controls
    assert not np.allclose(c.U, np.eye(3)) and not np.allclose(c.U, c.U.T)
    assert np.all(np.abs(c.c) > 0) and not np.allclose(c.B[0], c.B[0].T) and not np.allclose(c.V[0], c.V[0].T)
    # the largest kappa along the path, recomputed on a finer grid, is the calibrated one
    ode = integrate_moments(layer.mu0, layer.Sigma0, c, (0.0, 1.0), t_eval=np.linspace(0, 1, 201))
    assert max_sampling_strength(c, ode.t, ode.Sigma) == pytest.approx(0.2, rel=2e-2)
    again = general_feedforward_layer(3, T=1.0, seed=5)
    np.testing.assert_array_equal(again.Sigma0, layer.Sigma0)


def test_the_fold_is_what_the_tokens_do_without_attention():
    """Independent of the Hotelling machinery: with V = 0 the identity-activation layer is affine, so the
    empirical moments of any cloud follow the moment ODE of the fold exactly (up to the integrators)."""
    layer = general_feedforward_layer(3, T=1.0, seed=6)
    c = layer.controls
    from gtcore.controls import Controls

    no_att = Controls(A=c.A, b=c.b, U=c.U, W=c.W, c=c.c)
    x0 = gaussian_tokens(200, layer.mu0, layer.Sigma0, 1)
    tr = simulate(x0, no_att, (0.0, 1.0), 200, record_every=200, device="cpu")
    ode = integrate_moments(tr.mu[0], tr.Sigma[0], no_att, (0.0, 1.0), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(tr.mu[-1], ode.final[0], atol=1e-8)
    np.testing.assert_allclose(tr.Sigma[-1], ode.final[1], atol=1e-8)
    wrong = Controls(A=c.A, b=c.b, U=c.U, W=c.W, c=np.zeros(3))
    assert np.linalg.norm(integrate_moments(tr.mu[0], tr.Sigma[0], wrong, (0.0, 1.0)).final[0] - tr.mu[-1]) > 1e-2


def test_fold_check_accepts_the_fold_and_rejects_the_wrong_ones():
    chk = feedforward_fold_check(3, T=0.5, seed=11, n_tokens=300, clouds=14, steps=4)
    assert chk.tests["without W c"].ratio > 10 and chk.tests["U taken as I"].ratio > 10
    assert chk.tests["fold"].ratio < chk.tests["without W c"].ratio / 10
    assert set(chk.table()) == {"fold", "without W c", "U taken as I"}


def test_general_mixture_has_full_covariances():
    mix = general_mixture(3, seed=1)
    for S in mix.covariances:
        off = S[np.triu_indices(3, 1)]
        assert np.all(np.abs(off) > 1e-3)
        assert np.all(np.linalg.eigvalsh(S) > 0)


def test_moment_z_is_standard_normal_on_gaussian_samples():
    rng = np.random.default_rng(3)
    Sigma = np.array([[1.0, 0.6], [0.6, 2.0]])
    mu = np.array([0.5, -1.0])
    z = np.array([_moment_z(rng.multivariate_normal(mu, Sigma, 400), mu, Sigma, plug_in=False) for _ in range(600)])
    zp = np.array([_moment_z(rng.multivariate_normal(mu, Sigma, 400), mu, Sigma, plug_in=True) for _ in range(600)])
    for zz in (z, zp):
        assert np.all(np.abs(zz.mean(axis=0)) < 0.2)
        np.testing.assert_allclose(zz.std(axis=0), 1.0, atol=0.12)


class _DiagonalSampler(GaussianMixture):
    """The plausible error the check guards: components sampled with the diagonal of their covariance only."""

    def sample(self, n, seed=0):
        rng = np.random.default_rng(seed)
        labels = rng.choice(self.components, size=int(n), p=self.weights)
        z = rng.standard_normal((int(n), self.d))
        x = self.means[labels] + z * np.sqrt(np.diagonal(self.covariances, axis1=1, axis2=2))[labels]
        return LabelledTokens(tokens=x, labels=labels)


def test_mixture_sample_check_passes_the_sampler_and_catches_a_diagonal_one():
    mix = general_mixture(3, seed=2)
    good = mixture_sample_check(mix, 20000, seed=4)
    assert good.max_abs_z < 4.0 and good.count == 3 * 9 + 3 + 9
    bad = mixture_sample_check(_DiagonalSampler(mix.weights, mix.means, mix.covariances), 20000, seed=4)
    assert bad.max_abs_z > 10.0


def test_mixture_sample_check_refuses_tiny_samples():
    with pytest.raises(ValueError, match="n must be"):
        mixture_sample_check(general_mixture(3, seed=2), 3, seed=0)
