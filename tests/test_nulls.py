"""gtbook.studies.nulls: Hotelling's test of signed deviations and the null of an ensemble mean; pooled slopes."""

import numpy as np
import pytest
from scipy import stats

from gtbook.studies.fits import pooled_loglog_slope, pooled_slope_standard_error
from gtbook.studies.nulls import hotelling_test, mean_of_k_quantile, signed_deviation


def test_signed_deviation_layout_and_scale():
    S = np.diag([4.0, 1.0])
    dev = signed_deviation([0.2, 0.0], S + np.array([[0.0, 0.1], [0.1, 0.0]]), [0.0, 0.0], S)
    nF = np.sqrt(17.0)
    np.testing.assert_allclose(dev, [0.2 / 2.0, 0.0, 0.0, 0.1 / nF, 0.0])
    assert signed_deviation([0, 0], S, [0, 0], S, mean=False).shape == (3,)
    with pytest.raises(ValueError, match="shapes"):
        signed_deviation([0, 0, 0], S, [0, 0], S)


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


def test_flow_deviations_accept_the_right_ode_and_reject_a_wrong_one():
    from gtbook.studies.nulls import flow_deviations
    from gtcore import Controls

    ctl = Controls(A=[[0.1, 0.5], [-0.5, 0.0]], b=[0.2, 0.0], V=[[0.4, 0.1], [0.0, 0.3]], B=[[-0.3, 0.2], [0.0, -0.2]])
    wrong = Controls(A=ctl.A, b=ctl.b, V=1.1 * ctl.V[0], B=ctl.B[0])  # the attention term 10 % too large
    no_att = Controls(A=ctl.A, b=ctl.b)
    dev = flow_deviations(no_att, [0.3, 0.0], np.eye(2), 1.0, 200, 8, 40, predictions={"right": no_att, "wrong": wrong})
    # an affine flow follows its ODE from the cloud's own moments exactly, up to RK4's O(h^4) error
    assert np.abs(dev["right"]).max() < 1e-9
    dev = flow_deviations(ctl, [0.3, 0.0], np.eye(2), 1.0, 1000, 12, 4, predictions={"right": ctl, "wrong": wrong},
                          seed=3)
    assert dev["right"].shape == (12, 5)
    assert hotelling_test(dev["wrong"]).ratio > 1 > hotelling_test(dev["right"]).ratio


def test_extrapolation_removes_a_one_over_n_bias():
    from gtbook.studies.nulls import extrapolated_deviations

    rng = np.random.default_rng(8)
    R, p, c = 40, 3, np.array([20.0, -10.0, 6.0])
    def devs(N):  # a c/N bias plus a zero-mean N^-1/2 fluctuation
        return c / N + rng.standard_normal((R, p)) / np.sqrt(N)
    small, large = devs(100), devs(400)
    assert hotelling_test(large).ratio > 1  # the bias is resolved at N = 400 with 40 clouds
    z = extrapolated_deviations(small, large, 100, 400)
    np.testing.assert_allclose(extrapolated_deviations(c / 100 + 0 * small, c / 400 + 0 * large, 100, 400), 0 * z,
                               atol=1e-15)
    assert hotelling_test(z).ratio < 1
    with pytest.raises(ValueError, match="n_small"):
        extrapolated_deviations(small, large, 400, 100)


def test_extrapolated_flow_deviations_pair_clouds_of_two_sizes_on_disjoint_seeds():
    from gtbook.studies.nulls import extrapolated_deviations, extrapolated_flow_deviations, flow_deviations
    from gtcore import Controls

    ctl = Controls(A=[[0.0, -0.3], [0.3, 0.0]], V=[[-0.8, -0.3], [0.3, -0.8]], B=[[0.5, 0.1], [0.0, 0.4]])
    mu0, S0, preds = [0.5, -0.3], [[1.0, 0.3], [0.3, 0.5]], {"own": ctl}
    z, large = extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, ratio=3, seed=7)
    big = flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, seed=7, mean=False, kernel_dtype=None)
    small = flow_deviations(ctl, mu0, S0, 0.5, 30, 4, 5, predictions=preds, seed=57, mean=False, kernel_dtype=None)
    np.testing.assert_array_equal(large["own"], big["own"])
    np.testing.assert_array_equal(z["own"], extrapolated_deviations(small["own"], big["own"], 30, 90))
    with pytest.raises(ValueError, match="share seeds"):
        extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 60, 5, predictions=preds)
    with pytest.raises(ValueError, match="ratio"):
        extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, ratio=1)
