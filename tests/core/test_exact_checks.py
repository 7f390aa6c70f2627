"""The independent answers behind chapter 2's section (c) and chapter 4's general-parameter closed forms."""

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from gtbook.studies.beyond.exact_statistics import (
    _w2sq_mixture_1d,
    mixture_attention_quadrature,
    sliced_w2_mixture_population,
)
from gtbook.studies.stability.closed_forms import _kron_lyapunov, flow_map_spectrum
from gtcore.stats.mixtures import GaussianMixture


def test_quadrature_of_one_gaussian_is_its_tilt():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 3))
    S = W @ W.T / 3 + 0.2 * np.eye(3)
    mu, B, x = rng.standard_normal(3), 0.4 * rng.standard_normal((3, 3)), rng.standard_normal((5, 3))
    got = mixture_attention_quadrature(GaussianMixture([1.0], [mu], [S]), x, B, nodes=32)
    np.testing.assert_allclose(got, mu + (x @ B.T) @ S, atol=1e-11)


def test_w2_of_a_unit_gaussian_is_zero_and_of_a_split_one_is_positive():
    assert abs(_w2sq_mixture_1d(0.0, 0.9)) < 1e-10
    # c = 1, m -> 0 is a Gaussian too; m = 0.9 is bimodal and far from N(0, 1)
    assert abs(_w2sq_mixture_1d(1.0, 1e-4)) < 1e-10
    mean, var = sliced_w2_mixture_population(0.9)
    assert 0 < mean < _w2sq_mixture_1d(1.0, 0.9) and var > 0


def test_kron_lyapunov_solves_the_precision_equation():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 3)) - 3 * np.eye(3)
    Q = np.eye(3) + 0.1 * np.ones((3, 3))
    Y = _kron_lyapunov(A, Q)
    np.testing.assert_allclose(A.T @ Y + Y @ A, -Q, atol=1e-12)
    np.testing.assert_allclose(Y, solve_continuous_lyapunov(A.T, -Q), atol=1e-12)


def test_flow_map_spectrum_of_a_linear_equation():
    # no attention (V = 0): Sigma' = A Sigma + Sigma A^T, spectrum lambda_i + lambda_j
    from gtcore.controls import Controls

    A = np.array([[-1.0, 2.0, 0.0], [0.0, -0.5, 1.0], [0.0, 0.0, -2.0]])
    lam = np.linalg.eigvals(A)
    want = np.sort_complex(np.array([lam[i] + lam[j] for i in range(3) for j in range(i, 3)]))
    got = np.sort_complex(flow_map_spectrum(Controls(A=A, V=np.zeros((3, 3)), B=np.eye(3)), np.eye(3)))
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_kappa_by_maximisation_is_the_generalised_rayleigh_maximum():
    from scipy.linalg import eigh

    from gtbook.studies.invariance.strength import kappa_by_maximisation

    rng = np.random.default_rng(2)
    W = rng.standard_normal((3, 3))
    S = W @ W.T / 3 + 0.2 * np.eye(3)
    B = rng.standard_normal((3, 3))
    want = eigh(B.T @ S @ B, np.linalg.inv(S), eigvals_only=True).max()
    assert abs(kappa_by_maximisation(S, B, seed=0) - want) < 1e-10 * want
