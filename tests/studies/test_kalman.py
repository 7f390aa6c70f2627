"""The Kalman–Bucy reproduction of the Riccati connection (gtbook.studies.stability.kalman)."""

import numpy as np
import pytest
from scipy.stats import chi2

from gtbook.studies.stability.kalman import (
    covariance_lrt,
    filter_ensemble,
    filter_riccati,
    kalman_bucy_error,
    lrt_null_quantile,
    observation_matrix,
)


def test_lrt_null_is_chi_square():
    # exact Gaussian samples: the statistic's mean and 95% quantile are those of chi2 with d(d+1)/2 dof
    rng = np.random.default_rng(0)
    d, n = 3, 3000
    L = np.linalg.cholesky(np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]]))
    Sigma = L @ L.T
    stats = []
    for _ in range(400):
        x = rng.standard_normal((n, d)) @ L.T
        stats.append(covariance_lrt(x.T @ x / n, Sigma, n))
    assert np.mean(stats) == pytest.approx(6.0, abs=0.4)  # SE of the mean: sqrt(12/400) = 0.17
    assert lrt_null_quantile(d, n, 0.95, repeats=800) == pytest.approx(chi2.ppf(0.95, 6), rel=0.1)


def test_scalar_filter_error_matches_the_closed_form_riccati_solution():
    # d = 1: sigma' = 2 a sigma - c^2 sigma^2 with c^2 = -2 v b; closed form of the logistic equation
    a, v, b, s0, T = 0.3, 0.8, -0.5, 1.5, 1.0
    run = kalman_bucy_error([[a]], v, [[b]], [[s0]], T, paths=20000, steps=1000, records=4, seed=1)
    c2 = -2 * v * b
    t = run.t
    exact = s0 * np.exp(2 * a * t) / (1 + s0 * c2 * (np.exp(2 * a * t) - 1) / (2 * a))
    se = exact * np.sqrt(2 / run.paths)  # standard error of a variance estimate
    assert np.all(np.abs(run.error_cov[:, 0, 0] - exact) < 4 * se + 1e-3 * exact)


def test_a_wrong_factor_in_the_identification_departs():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((3, 3)) / 2
    B = -np.eye(3) + np.array([[0, 0.4, 0], [-0.4, 0, 0.3], [0, -0.3, 0]])  # non-symmetric, B + B^T < 0
    S0 = np.eye(3)
    right = kalman_bucy_error(A, 0.7, B, S0, 1.0, paths=3000, steps=400, records=4, seed=2)
    wrong = kalman_bucy_error(A, 0.7, B, S0, 1.0, paths=3000, steps=400, records=4, seed=2, gain_scale=0.5)
    limit = chi2.ppf(1 - 0.01 / 4, 6)
    assert right.lrt.max() < limit < wrong.lrt.max()


def test_negative_information_is_refused():
    with pytest.raises(ValueError, match="positive semi-definite"):
        observation_matrix(1.0, np.eye(2))  # v(B + B^T) > 0: no filter has this equation


def test_ensemble_draws_satisfy_the_condition_and_are_general():
    ens = filter_ensemble(3, 3, 0.5, paths=500, steps=100, records=2, seed=5)
    for A, v, B, _S0 in ens.controls:
        assert np.linalg.eigvalsh(v * (B + B.T)).max() <= 1e-12
        assert np.abs(B - B.T).max() > 1e-3 and np.abs(A).max() > 0
    assert ens.threshold == pytest.approx(chi2.ppf(1 - 0.01 / 6, 6))


def test_the_filters_own_riccati_equation_is_the_closed_form_and_runs_no_library_code():
    # d = 1: p' = 2 a p - c^2 p^2, the logistic closed form; the observed side traces no gtcore.moments code
    a, c, p0, T = 0.3, 0.9, 1.5, 1.0
    t = np.linspace(0.0, T, 11)
    P = filter_riccati([[a]], [[c]], [[p0]], t)[:, 0, 0]
    exact = p0 * np.exp(2 * a * t) / (1 + p0 * c**2 * (np.exp(2 * a * t) - 1) / (2 * a))
    np.testing.assert_allclose(P, exact, rtol=1e-9)
    run = kalman_bucy_error([[a]], 0.8, [[-0.5]], [[p0]], T, paths=200, steps=100, records=4, seed=1)
    observed_side, predicted_side = run.sides
    assert not any(f.startswith("gtcore.moments") for f in observed_side.functions)
    assert any(f.startswith("gtcore.moments") for f in predicted_side.functions)


def test_the_filter_never_reads_the_prediction(monkeypatch):
    # the same paths with eq. (1.1)'s Sigma replaced by a wrong one: the measured error is bit for bit the same
    # (the filter's gain is its own), only the prediction moves
    from types import SimpleNamespace

    import gtbook.studies.stability.kalman as kalman

    A = [[0.3, 0.2], [-0.1, 0.1]]
    B = [[-0.6, 0.2], [0.0, -0.4]]
    S0 = [[1.2, 0.1], [0.1, 0.8]]
    right = kalman.kalman_bucy_error(A, 0.8, B, S0, 1.0, paths=500, steps=100, records=4, seed=3)
    real = kalman.integrate_moments

    def wrong(*args, **kwargs):
        res = real(*args, **kwargs)
        return SimpleNamespace(t=res.t, Sigma=1.5 * res.Sigma, status=res.status)

    monkeypatch.setattr(kalman, "integrate_moments", wrong)
    moved = kalman.kalman_bucy_error(A, 0.8, B, S0, 1.0, paths=500, steps=100, records=4, seed=3)
    np.testing.assert_array_equal(moved.error_cov, right.error_cov)
    assert np.all(moved.predicted[1:] != right.predicted[1:])
    assert moved.lrt.max() > 10 * right.lrt.max()  # and the statistic sees the wrong prediction
