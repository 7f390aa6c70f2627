"""gtcore.stats.inference against independent answers: Hotelling's test against Student's t and the F law's
false-alarm rate and power, the null of an ensemble mean against the Gamma law, slopes and their bootstrap
standard errors against the delta method, Wilson's interval against scipy, the normal band against scipy's
normal law, resampled counts and magnitude intervals against their definitions."""

import numpy as np
import pytest
from scipy import stats
from scipy.stats import binomtest

from gtcore.stats.inference import (
    extrapolated_deviations,
    hotelling_test,
    loglog_slope,
    magnitude_interval,
    mean_of_k_quantile,
    normal_band,
    pooled_loglog_slope,
    pooled_slope_standard_error,
    resample_counts,
    slope_difference_standard_error,
    slope_standard_error,
    wilson_interval,
)


def test_one_coordinate_is_the_two_sided_t_test():
    # p = 1: T^2 = t^2 and the F(1, R-1) quantile is the squared two-sided t quantile
    x = np.random.default_rng(0).standard_normal((12, 1)) + 0.3
    t = stats.ttest_1samp(x[:, 0], 0.0)
    h = hotelling_test(x, level=0.99)
    assert h.T2 == pytest.approx(t.statistic**2, rel=1e-12)
    assert h.threshold == pytest.approx(stats.t.ppf(0.995, 11) ** 2, rel=1e-12)
    assert h.p_value == pytest.approx(t.pvalue, rel=1e-10)


def test_false_alarm_rate_and_power():
    rng = np.random.default_rng(1)
    R, p, trials = 12, 5, 3000
    mix = rng.standard_normal((p, p))  # correlated coordinates of unequal scales
    null = rng.standard_normal((trials, R, p)) @ mix
    alarms = np.mean([hotelling_test(x).ratio > 1 for x in null])
    assert 0.005 < alarms < 0.018  # the 1 % level (binomial sd 0.0018)
    # a common offset of 2 sd (in whitened units) along the first mixing row: the power is the
    # non-central F's tail, noncentrality R * 2^2
    shifted = null[:1000] + 2.0 * mix[0]
    power = stats.ncf.sf(stats.f.ppf(0.99, p, R - p), p, R - p, R * 4.0)
    assert np.mean([hotelling_test(x).ratio > 1 for x in shifted]) == pytest.approx(power, abs=0.05)


def test_hotelling_refuses_what_it_cannot_test():
    with pytest.raises(ValueError, match="R > p"):
        hotelling_test(np.zeros((3, 3)))
    x = np.random.default_rng(2).standard_normal((10, 3))
    x[:, 1] = 0.0
    with pytest.raises(ValueError, match="singular"):
        hotelling_test(x)
    with pytest.raises(ValueError, match="level"):
        hotelling_test(np.random.default_rng(3).standard_normal((10, 2)), level=1.0)


def test_mean_of_k_quantile_against_the_normal_limit():
    # exponential(1) values: the mean of k = 50 is close to N(1, 1/50)
    v = np.random.default_rng(4).exponential(size=200_000)
    q = mean_of_k_quantile(v, 50, 0.99, resamples=40_000, seed=5)
    exact = stats.gamma(50, scale=1 / 50).ppf(0.99)  # the mean of 50 exponentials is Gamma(50, 1/50)
    assert q == pytest.approx(exact, rel=0.01)
    assert mean_of_k_quantile(v, 1, 0.5, resamples=40_000) == pytest.approx(np.log(2), rel=0.02)


def test_pooled_slope_one_rate_several_intercepts():
    Ns = np.array([100, 400, 1600])
    values = np.stack([c * Ns[:, None] ** -0.5 * np.ones((3, 4)) for c in (1.0, 7.0, 0.01)])
    assert pooled_loglog_slope(Ns, values) == pytest.approx(-0.5, abs=1e-12)
    rng = np.random.default_rng(6)
    noisy = values * np.exp(0.2 * rng.standard_normal(values.shape))
    se = pooled_slope_standard_error(Ns, noisy, n_boot=3000, seed=7)
    # delta method: sd of a log mean of 4 log-normal(0.2) values, over D = 3 draws
    x = np.log(Ns) - np.log(Ns).mean()
    sd_logmean = 0.2 / np.sqrt(4)
    assert se == pytest.approx(sd_logmean / np.sqrt(3 * (x @ x)), rel=0.25)
    with pytest.raises(ValueError, match="shape"):
        pooled_loglog_slope(Ns, values[0])


def test_extrapolation_removes_a_one_over_n_bias():
    rng = np.random.default_rng(8)
    R, p, c = 40, 3, np.array([20.0, -10.0, 6.0])

    def devs(N):  # a c/N bias plus a zero-mean N^-1/2 fluctuation
        return c / N + rng.standard_normal((R, p)) / np.sqrt(N)

    small, large = devs(100), devs(400)
    assert hotelling_test(large).ratio > 1  # the bias is resolved at N = 400 with 40 clouds
    z = extrapolated_deviations(small, large, 100, 400)
    np.testing.assert_allclose(
        extrapolated_deviations(c / 100 + 0 * small, c / 400 + 0 * large, 100, 400), 0 * z, atol=1e-15
    )
    assert hotelling_test(z).ratio < 1
    with pytest.raises(ValueError, match="n_small"):
        extrapolated_deviations(small, large, 400, 100)


def test_slope_standard_error_matches_the_delta_method():
    # errors with known relative scatter: SE of the slope is sd(log mean) / sqrt(sum (log N - mean)^2)
    rng = np.random.default_rng(0)
    Ns = np.array([100, 200, 400, 800, 1600])
    seeds = 400
    errors = Ns[:, None] ** -0.5 * np.exp(0.3 * rng.standard_normal((Ns.size, seeds)))
    x = np.log(Ns) - np.log(Ns).mean()
    rel = np.std(np.exp(0.3 * rng.standard_normal(100_000))) / np.mean(np.exp(0.3 * rng.standard_normal(100_000)))
    expected = rel / np.sqrt(seeds) / np.sqrt(x @ x)
    assert slope_standard_error(Ns, errors, n_boot=4000) == pytest.approx(expected, rel=0.1)


def test_slope_difference_standard_error_keeps_the_pairing():
    rng = np.random.default_rng(1)
    Ns = np.array([100, 200, 400, 800])
    a = Ns[:, None] ** -0.5 * np.exp(0.3 * rng.standard_normal((4, 50)))
    # the same noise on another rate: the difference of the slopes is exactly 0.1 in every resample
    assert slope_difference_standard_error(Ns, a, a * Ns[:, None] ** 0.1, n_boot=500) < 1e-12
    b = Ns[:, None] ** -0.4 * np.exp(0.3 * rng.standard_normal((4, 50)))  # independent noise
    expected = np.hypot(
        slope_standard_error(Ns, a, n_boot=4000, seed=2), slope_standard_error(Ns, b, n_boot=4000, seed=3)
    )
    assert slope_difference_standard_error(Ns, a, b, n_boot=4000, seed=4) == pytest.approx(expected, rel=0.1)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (47, 200), (1, 1)])
def test_wilson_interval_against_scipy(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    np.testing.assert_allclose(wilson_interval(k, n), (ci.low, ci.high), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(5, 3)


def test_loglog_slope_of_power_laws():
    x = np.array([1.0, 2.0, 8.0, 32.0])
    assert loglog_slope(x, 3.0 * x**-0.7) == pytest.approx(-0.7, abs=1e-12)
    # x_max keeps the small-x regime of a curve that bends (1/x, then a floor)
    y = 1.0 / x + np.where(x > 4, 10.0, 0.0)
    assert loglog_slope(x, y, x_max=2.0) == pytest.approx(-1.0, abs=1e-12)
    with pytest.raises(ValueError, match="positive"):
        loglog_slope(x, -y)


def test_normal_band_is_scipys_central_interval():
    for level in (0.5, 0.9, 0.99):
        lo, hi = normal_band(1.5, 0.3, level)
        np.testing.assert_allclose((lo, hi), stats.norm.interval(level, loc=1.5, scale=0.3), rtol=1e-14)
    lo, hi = normal_band(np.array([0.0, 1.0]), np.array([1.0, 2.0]), 0.95)
    np.testing.assert_allclose(hi - lo, 2 * 1.959963984540054 * np.array([1.0, 2.0]), rtol=1e-14)


def test_resample_counts_are_draws_with_replacement():
    rng = np.random.default_rng(0)
    c = resample_counts(5, 20000, rng)
    assert c.shape == (20000, 5) and np.all(c.sum(axis=1) == 5)
    # each unit's count is Binomial(5, 1/5): mean 1, variance 4/5
    assert c.mean() == pytest.approx(1.0, abs=0.02)
    assert c.var() == pytest.approx(0.8, abs=0.03)
    # the same generator state gives the same counts as drawing the indices by hand
    a = resample_counts(7, 3, np.random.default_rng(4))
    g = np.random.default_rng(4)
    np.testing.assert_array_equal(a, [np.bincount(g.integers(0, 7, 7), minlength=7) for _ in range(3)])


@pytest.mark.parametrize("lo, hi", [(0.1, 0.3), (-0.3, -0.1), (-0.3, 0.1), (-0.1, 0.3), (0.0, 0.0)])
def test_magnitude_interval_is_the_image_of_the_interval(lo, hi):
    grid = np.abs(np.linspace(lo, hi, 100_001))
    assert magnitude_interval(lo, hi) == pytest.approx((grid.min(), grid.max()), abs=1e-5)
