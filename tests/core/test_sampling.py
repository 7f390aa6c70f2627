import numpy as np
import pytest

from gtcore import gaussian_tokens


def test_seeded_and_moments():
    mu, S = np.array([1.0, -2.0]), np.array([[2.0, 0.5], [0.5, 1.0]])
    a = gaussian_tokens(200_000, mu, S, seed=3)
    np.testing.assert_array_equal(a, gaussian_tokens(200_000, mu, S, seed=3))
    np.testing.assert_allclose(a.mean(0), mu, atol=5 * np.sqrt(2.0 / 200_000))
    np.testing.assert_allclose(np.cov(a.T), S, atol=0.02)


def test_rank_deficient_tokens_lie_in_the_range():
    u = np.array([1.0, 2.0, 2.0]) / 3
    x = gaussian_tokens(1000, np.zeros(3), 4 * np.outer(u, u), seed=0)
    resid = x - np.outer(x @ u, u)
    assert np.abs(resid).max() < 1e-12
    assert np.linalg.matrix_rank(np.cov(x.T), tol=1e-8) == 1


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_bad_n(n):
    with pytest.raises(ValueError, match="n"):
        gaussian_tokens(n, np.zeros(2), np.eye(2))


def test_bad_covariance_names_sigma():
    with pytest.raises(ValueError, match="Sigma"):
        gaussian_tokens(10, np.zeros(2), -np.eye(2))
