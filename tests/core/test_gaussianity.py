"""Gaussianity statistics against closed forms, independent computations and the noise floor."""

import tracemalloc

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.linalg import sqrtm

from conftest import random_psd, random_spd
from gtcore.stats.gaussianity import (
    NoiseFloor,
    bures_wasserstein,
    empirical_moments,
    excess_kurtosis_per_coordinate,
    mardia_kurtosis,
    mardia_kurtosis_excess,
    mardia_skewness,
    noise_floor,
    sliced_w2,
    w2_to_standard_normal,
)


def uniform_cloud(n, d, seed):
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, d))


def mixture_cloud(n, d, seed, weight=0.5, sep=5.0):
    """Two unit-covariance Gaussians, means 0 and sep*e1, weights (weight, 1 - weight)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x[rng.random(n) < weight, 0] += sep
    return x


# ----------------------------------------------------------------------------- moments
def test_empirical_moments_match_numpy_and_accept_torch(rng):
    x = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 3)) + 2.0
    mu, S = empirical_moments(x)
    np.testing.assert_allclose(mu, x.mean(0), rtol=1e-14)
    np.testing.assert_allclose(S, np.cov(x.T, bias=True), rtol=1e-12)
    assert np.array_equal(S, S.T)
    mu_t, S_t = empirical_moments(torch.from_numpy(x))
    np.testing.assert_array_equal(mu_t, mu)
    np.testing.assert_array_equal(S_t, S)
    mu_f, _ = empirical_moments(torch.from_numpy(x).float())
    np.testing.assert_allclose(mu_f, mu, rtol=1e-6)


# -------------------------------------------------------------------- Bures–Wasserstein
def test_bures_wasserstein_commuting_closed_form(rng):
    d = 4
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    l1, l2 = rng.uniform(0.1, 3, d), rng.uniform(0.1, 3, d)
    S1, S2 = Q @ np.diag(l1) @ Q.T, Q @ np.diag(l2) @ Q.T
    m1, m2 = rng.standard_normal(d), rng.standard_normal(d)
    expected = np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(l1) - np.sqrt(l2)) ** 2)
    assert bures_wasserstein(m1, S1, m2, S2) ** 2 == pytest.approx(expected, rel=1e-10)


def test_bures_wasserstein_one_dimensional():
    assert bures_wasserstein([1.0], [[4.0]], [-2.0], [[0.25]]) == pytest.approx(np.hypot(3, 1.5), rel=1e-12)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_bures_wasserstein_against_independent_formula(rng, d):
    """tr(S1^{1/2} S2 S1^{1/2})^{1/2} = sum of sqrt(eig(S1 S2)) (S1 S2 is similar to a PSD matrix)."""
    S1, S2 = random_spd(rng, d, 5.0), random_spd(rng, d, 20.0)
    m1, m2 = rng.standard_normal(d), rng.standard_normal(d)
    cross = np.sum(np.sqrt(np.linalg.eigvals(S1 @ S2).real))
    expected = np.sum((m1 - m2) ** 2) + np.trace(S1) + np.trace(S2) - 2 * cross
    assert bures_wasserstein(m1, S1, m2, S2) ** 2 == pytest.approx(expected, rel=1e-9)
    # symmetric, zero on the diagonal, and the scipy sqrtm route agrees
    r1 = sqrtm(S1).real
    alt = np.sum((m1 - m2) ** 2) + np.trace(S1 + S2) - 2 * np.trace(sqrtm(r1 @ S2 @ r1).real)
    assert bures_wasserstein(m2, S2, m1, S1) ** 2 == pytest.approx(alt, rel=1e-9)
    assert bures_wasserstein(m1, S1, m1, S1) < 1e-6


def test_bures_wasserstein_rank_deficient(rng):
    S1, S2 = random_psd(rng, 3, 1), random_psd(rng, 3, 2)
    w = bures_wasserstein(np.zeros(3), S1, np.zeros(3), S2)
    assert np.isfinite(w) and w > 0
    # a rank-1 covariance against itself
    assert bures_wasserstein(np.ones(3), S1, np.ones(3), S1) < 1e-6


# ---------------------------------------------------------------------------- sliced W2
def test_exact_1d_w2_against_quadrature():
    p = np.array([-1.3, 0.2, 0.25, 0.9, 2.1])
    n = p.size

    def integrand(u, v):
        return (v - stats.norm.ppf(u)) ** 2

    expected = sum(
        integrate.quad(integrand, i / n, (i + 1) / n, args=(v,), epsabs=1e-13)[0] for i, v in enumerate(np.sort(p))
    )
    assert w2_to_standard_normal(p[::-1]) == pytest.approx(expected, rel=1e-8)
    cols = np.stack([p, 2 * p], axis=1)
    np.testing.assert_allclose(w2_to_standard_normal(cols)[0], expected, rtol=1e-8)


def test_sliced_w2_is_scale_free_seeded_and_decreases_with_n(rng):
    x = rng.standard_normal((4000, 2))
    a = sliced_w2(x, seed=3)
    assert sliced_w2(x, seed=3) == a
    # scaling and translating (no rotation: the whitening basis is then unchanged)
    assert sliced_w2(5.0 * x + 7.0, seed=3) == pytest.approx(a, rel=1e-8)
    big = sliced_w2(np.random.default_rng(1).standard_normal((64000, 2)), seed=3)
    assert big < a


def test_sliced_w2_one_dimension_is_exact_w2(rng):
    x = rng.standard_normal((500, 1))
    z = (x[:, 0] - x.mean()) / x.std()
    assert sliced_w2(x, n_projections=4) == pytest.approx(np.sqrt(w2_to_standard_normal(z)), rel=1e-12)


# ------------------------------------------------------------------------------- Mardia
def test_mardia_skewness_tensor_and_pairwise_agree(rng):
    x = mixture_cloud(700, 4, 5) ** 2 + rng.standard_normal((700, 4))
    t = mardia_skewness(x, method="tensor")
    p = mardia_skewness(x, method="pairwise")
    assert t > 0.1
    assert p == pytest.approx(t, rel=1e-10)


def test_mardia_skewness_pairwise_against_naive(rng):
    x = rng.exponential(size=(200, 3))
    y = x - x.mean(0)
    S = y.T @ y / len(y)
    Sinv = np.linalg.inv(S)
    G = y @ Sinv @ y.T
    assert mardia_skewness(x, method="pairwise") == pytest.approx(np.sum(G**3) / 200**2, rel=1e-10)
    assert mardia_kurtosis(x) == pytest.approx(np.mean(np.diag(G) ** 2), rel=1e-10)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_mardia_kurtosis_gaussian_expectation(d):
    n = 20000
    x = np.random.default_rng(d).standard_normal((n, d)) * np.arange(1, d + 1)
    expected = d * (d + 2) * (n - 1) / (n + 1)
    sd = np.sqrt(8 * d * (d + 2) / n)
    assert abs(mardia_kurtosis(x) - expected) < 4 * sd
    assert abs(mardia_kurtosis_excess(x)) < 4 * sd / (d * (d + 2))
    # skewness: E b1 ~ d(d+1)(d+2)/n, the chi-square's sd is sqrt(2k) * 6/n
    k = d * (d + 1) * (d + 2) / 6
    assert abs(mardia_skewness(x) - 6 * k / n) < 5 * 6 * np.sqrt(2 * k) / n


def test_mardia_affine_invariance(rng):
    x = mixture_cloud(1000, 3, 2)
    M, c = random_spd(rng, 3, 30.0) @ np.linalg.qr(rng.standard_normal((3, 3)))[0], rng.standard_normal(3)
    for f in (mardia_skewness, mardia_kurtosis, mardia_kurtosis_excess):
        assert f(x @ M.T + c) == pytest.approx(f(x), rel=1e-8)


def test_excess_kurtosis_per_coordinate(rng):
    x = np.column_stack([rng.uniform(-1, 1, 50000), rng.standard_normal(50000), np.full(50000, 2.0)])
    k = excess_kurtosis_per_coordinate(x)
    assert k.shape == (3,)
    assert k[0] == pytest.approx(-1.2, abs=0.05)
    assert abs(k[1]) < 0.1
    assert np.isnan(k[2])


# ------------------------------------------------------------------------ rank-deficient
def test_rank_deficient_cloud_equals_its_range(rng):
    """A rank-2 cloud in R^3 has the statistics of its 2-D coordinates (Mardia: exactly)."""
    z = rng.standard_normal((3000, 2))
    F = rng.standard_normal((3, 2))
    x = z @ F.T + 1.0
    assert mardia_kurtosis(x) == pytest.approx(mardia_kurtosis(z), rel=1e-8)
    assert mardia_skewness(x) == pytest.approx(mardia_skewness(z), rel=1e-8)
    floor = noise_floor(sliced_w2, 3000, 2, repeats=32, seed=9)
    lo, hi = floor.band(0.99)
    assert lo <= sliced_w2(x) <= 1.5 * hi


def test_layernorm_like_output(rng):
    x = rng.standard_normal((2000, 4))
    x = x - x.mean(axis=1, keepdims=True)  # rank d - 1
    assert abs(mardia_kurtosis_excess(x)) < 0.1
    assert np.isfinite(sliced_w2(x))


# -------------------------------------------------------------------------- noise floor
@pytest.fixture(scope="module")
def floors():
    n, d = 2000, 2
    return {
        name: noise_floor(name, n, d, repeats=64, seed=11)
        for name in ("sliced_w2", "mardia_kurtosis_excess", "mardia_skewness")
    }


def test_noise_floor_object(floors):
    f = floors["sliced_w2"]
    assert isinstance(f, NoiseFloor) and f.values.shape == (64,)
    assert f.n == 2000 and f.d == 2
    lo, hi = f.band(0.99)
    assert lo < f.mean < hi and f.std > 0
    np.testing.assert_allclose((lo, hi), np.quantile(f.values, [0.005, 0.995]))
    lo50, hi50 = f.band(0.5)
    assert lo <= lo50 < hi50 <= hi
    again = noise_floor("sliced_w2", 2000, 2, repeats=64, seed=11)
    np.testing.assert_array_equal(again.values, f.values)


def test_noise_floor_has_the_exact_moments_of_mardia_kurtosis(floors):
    """Mardia (1974): on Gaussian samples E b2 = d(d+2)(n-1)/(n+1) and
    Var b2 = 8d(d+2)(n-3)(n-d-1)(n-d+1) / ((n+1)^2 (n+3)(n+5)). The noise floor of the excess
    (b2 - d(d+2)) / (d(d+2)) must have that mean (within 4 standard errors of its 64 repeats) and
    that standard deviation (within 30 %: 3.4 standard errors of a 64-sample sd)."""
    f = floors["mardia_kurtosis_excess"]
    n, d, k = f.n, f.d, f.d * (f.d + 2)
    mean = (n - 1) / (n + 1) - 1
    sd = np.sqrt(8 * k * (n - 3) * (n - d - 1) * (n - d + 1) / ((n + 1) ** 2 * (n + 3) * (n + 5))) / k
    assert abs(f.mean - mean) < 4 * sd / np.sqrt(f.values.shape[0])
    assert 0.7 < f.std / sd < 1.3


def test_array_statistic_noise_floor_has_the_exact_moments_of_kurtosis():
    """Per coordinate, the sample excess kurtosis g2 of n Gaussian values has E g2 = -6/(n+1) and
    Var g2 = 24n(n-2)(n-3) / ((n+1)^2 (n+3)(n+5)) (Fisher 1930), whatever the coordinate's mean and
    scale. On columns 5 + z (0.1, 1, 30) with 400 repeats: the mean within 4 standard errors and the
    sd within 20 % (about 4 standard errors of a 400-sample sd) in every coordinate."""
    n, reps = 500, 400
    f = noise_floor(
        lambda z: excess_kurtosis_per_coordinate(5.0 + z * np.array([0.1, 1.0, 30.0])), n, 3, repeats=reps, seed=0
    )
    assert f.values.shape == (reps, 3) and f.mean.shape == (3,)
    lo, hi = f.band()
    assert lo.shape == hi.shape == (3,) and np.all(lo < hi)
    sd = np.sqrt(24 * n * (n - 2) * (n - 3) / ((n + 1) ** 2 * (n + 3) * (n + 5)))
    assert np.all(np.abs(f.mean - (-6 / (n + 1))) < 4 * sd / np.sqrt(reps))
    assert np.all((0.8 < f.std / sd) & (f.std / sd < 1.2))


def test_gaussian_sample_inside_its_noise_floor(floors):
    x = np.random.default_rng(123).standard_normal((2000, 2)) @ np.array([[2.0, 0.0], [1.5, 0.3]]) + 5.0
    assert floors["sliced_w2"].contains(sliced_w2(x))
    assert floors["mardia_kurtosis_excess"].contains(mardia_kurtosis_excess(x))
    assert floors["mardia_skewness"].contains(mardia_skewness(x))


@pytest.mark.parametrize("make", [uniform_cloud, mixture_cloud])
def test_non_gaussian_samples_far_outside(floors, make):
    x = make(2000, 2, 7)
    f = floors["sliced_w2"]
    assert sliced_w2(x) > f.band()[1] + 5 * f.std
    assert sliced_w2(x) > 3 * f.mean
    k = floors["mardia_kurtosis_excess"]
    assert mardia_kurtosis_excess(x) < k.band()[0] - 5 * k.std


def test_skewed_mixture_far_outside_skewness_floor(floors):
    f = floors["mardia_skewness"]
    assert mardia_skewness(mixture_cloud(2000, 2, 8, weight=0.2)) > f.band()[1] + 10 * f.std


# --------------------------------------------------------------------------------- scale
def test_large_sample_memory_and_speed():
    x = np.random.default_rng(0).standard_normal((100_000, 2))
    tracemalloc.start()
    try:
        mardia_skewness(x)
        mardia_kurtosis(x)
        sliced_w2(x, n_projections=32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**30
    # pairwise form on a chunked large sample stays in the same budget
    tracemalloc.start()
    try:
        mardia_skewness(x[:10000], method="pairwise")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**30


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: empirical_moments(np.zeros(5)), "x"),
        (lambda: empirical_moments(np.zeros((1, 2))), "x"),
        (lambda: empirical_moments(np.array([[0.0, np.nan], [1.0, 2.0]])), "x"),
        (lambda: sliced_w2(np.ones((10, 2))), "x"),
        (lambda: sliced_w2(np.random.default_rng(0).standard_normal((10, 2)), n_projections=0), "n_projections"),
        (lambda: mardia_skewness(np.random.default_rng(0).standard_normal((10, 2)), method="fast"), "method"),
        (lambda: mardia_kurtosis("abc"), "x"),
        (lambda: bures_wasserstein([0, 0], np.eye(2), [0, 0, 0], np.eye(3)), "mu2"),
        (lambda: bures_wasserstein([0, 0], -np.eye(2), [0, 0], np.eye(2)), "Sigma1"),
        (lambda: bures_wasserstein([0, 0], np.eye(2), [0, 0], [[1, 2], [0, 1]]), "Sigma2"),
        (lambda: noise_floor("entropy", 10, 2), "statistic"),
        (lambda: noise_floor(3.0, 10, 2), "statistic"),
        (lambda: noise_floor("sliced_w2", 1, 2), "n"),
        (lambda: noise_floor("sliced_w2", 10, 0), "d"),
        (lambda: noise_floor("sliced_w2", 10, 2, repeats=1), "repeats"),
        (lambda: noise_floor("sliced_w2", 10, 2, repeats=4).band(1.5), "level"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_whitened_entry_points_give_the_public_values():
    # the statistics of one sample whitened once (as the pretrained statistics do) are the values of
    # the public functions on the raw sample; and the per-coordinate kurtosis against scipy
    from gtcore._linalg import whiten
    from gtcore.stats.gaussianity import mardia_kurtosis_excess_of_whitened, sliced_w2_of_whitened

    rng = np.random.default_rng(11)
    x = rng.standard_t(5, size=(600, 7)) @ rng.normal(size=(7, 7))
    y = whiten(x)
    assert sliced_w2_of_whitened(y, 64, seed=3) == sliced_w2(x, n_projections=64, seed=3)
    assert mardia_kurtosis_excess_of_whitened(y) == mardia_kurtosis_excess(x)
    np.testing.assert_allclose(
        excess_kurtosis_per_coordinate(x), stats.kurtosis(x, axis=0, fisher=True, bias=True), rtol=1e-12
    )
