"""The unselected sign-condition ensembles, the independent Taylor integrator and mean steering on tokens
(gtbook.studies.stability.ensembles, .taylor, .steering): each compared with an independent answer."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import expm

from gtbook.studies.stability.ensembles import (
    ConditionDraw,
    Outcome,
    classify_outcome,
    condition_draws,
    confirm_outcome,
    run_ensemble,
)
from gtbook.studies.stability.steering import hotelling, null_quantile
from gtbook.studies.stability.taylor import pole_time_hp, taylor_coefficients
from gtcore.controls import Controls


def _kron_lyapunov(A, Q):
    """P with P A + A^T P = -Q (Kronecker solve, row-major vec)."""
    d = A.shape[0]
    L = np.kron(np.eye(d), A.T) + np.kron(A.T, np.eye(d))
    P = np.linalg.solve(L, -Q.reshape(-1)).reshape(d, d)
    return 0.5 * (P + P.T)


@pytest.mark.parametrize(
    "a, v, beta, s0", [(0.5, 0.5, 1.0, 0.5), (-0.3, 1.0, 0.7, 2.0), (0.0, 0.8, 1.0, 1.0), (0.4, -0.6, -1.2, 0.3)]
)
def test_taylor_pole_matches_the_scalar_bernoulli_closed_form(a, v, beta, s0):
    q = 2 * v * beta  # sigma' = 2 a sigma + q sigma^2
    exact = 1 / (q * s0) if a == 0 else math.log1p(2 * a / (q * s0)) / (2 * a)
    assert pole_time_hp([[s0]], [[a]], [[v]], [[beta]]).t_star == pytest.approx(exact, rel=1e-10)


def test_taylor_finds_no_pole_when_the_scalar_solution_converges():
    assert math.isinf(pole_time_hp([[1.0]], [[0.5]], [[-1.0]], [[1.0]], t_max=20.0).t_star)


def test_taylor_pole_matches_the_precision_equation_for_v_scalar_in_d3():
    # V = vI: P = Sigma^-1 solves P' = -(PA + A^T P) - v(B + B^T); the pole is the first zero of
    # lambda_min(P(t)), found here by bisection on the exact P(t) (Van Loan exponential, written afresh)
    rng = np.random.default_rng(3)
    A = 0.3 * rng.standard_normal((3, 3))
    H, S = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    B = H @ H.T / 3 + 0.2 * np.eye(3) + 0.3 * (S - S.T)
    S0 = np.array([[0.8, 0.1, 0.0], [0.1, 0.6, 0.2], [0.0, 0.2, 0.9]])
    v = 0.6
    Q = v * (B + B.T)

    def lam_min_P(t):
        big = np.block([[-A.T, Q], [np.zeros((3, 3)), A]])
        F = expm(t * big)
        Y = F[3:, 3:].T @ F[:3, 3:]
        E = expm(-A * t)
        return np.linalg.eigvalsh(E.T @ (np.linalg.inv(S0) - Y) @ E)[0]

    lo, hi = 0.0, 0.1
    while lam_min_P(hi) > 0:
        lo, hi = hi, 2 * hi
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if lam_min_P(mid) > 0 else (lo, mid)
    assert pole_time_hp(S0, A, v * np.eye(3), B).t_star == pytest.approx(lo, rel=1e-9)


def test_taylor_coefficients_are_the_derivatives_of_the_equation():
    # S_1 = F(S_0) and 2 S_2 = dF(S_0)[S_1], by finite differences of F in float64
    from decimal import Decimal

    rng = np.random.default_rng(4)
    A, V, B = (rng.standard_normal((3, 3)) for _ in range(3))
    S0 = np.eye(3) + 0.1 * np.ones((3, 3))

    def F(S):
        return A @ S + S @ A.T + V @ S @ B @ S + S @ B.T @ S @ V.T

    def dec(X):
        out = np.empty(X.shape, dtype=object)
        for idx, x in np.ndenumerate(X):
            out[idx] = Decimal(float(x))
        return out

    coef = taylor_coefficients(dec(A), [dec(V)], [dec(B)], dec(S0), 2)
    S1 = np.array(coef[1], dtype=float)
    np.testing.assert_allclose(S1, F(S0), rtol=1e-13, atol=1e-13)
    h = 1e-6
    np.testing.assert_allclose(
        2 * np.array(coef[2], dtype=float), (F(S0 + h * S1) - F(S0 - h * S1)) / (2 * h), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("kind", ["scalar", "symmetric", "general", "commuting"])
@pytest.mark.parametrize("condition", ["stabilising", "destabilising"])
def test_draws_belong_to_the_class_the_condition_names(kind, condition):
    sign = -1 if condition == "stabilising" else 1
    for dr in condition_draws(6, 3, kind, seed=11, condition=condition):
        A, V, B = dr.controls.A, dr.controls.V[0], dr.controls.B[0]
        assert np.linalg.eigvals(A).real.min() > 0
        assert (sign * np.linalg.eigvalsh(V + V.T)).min() > 0
        assert np.linalg.eigvalsh(B + B.T).min() > 0 and np.linalg.eigvalsh(dr.Sigma0).min() > 0
        scalar = np.allclose(V, V[0, 0] * np.eye(3))
        assert scalar == (kind == "scalar")
        assert np.allclose(V, V.T) == (kind != "general")
        if kind == "commuting":
            assert np.allclose(B, B.T) and np.allclose(V @ B, B @ V)
        else:
            assert not np.allclose(B, B.T)


def test_v_scalar_draws_reach_the_lyapunov_equilibrium():
    for dr in condition_draws(3, 3, "scalar", seed=5):
        c = classify_outcome(dr)
        assert c.outcome is Outcome.EQUILIBRIUM and not c.counterexample
        v = dr.controls.V[0][0, 0]
        P = _kron_lyapunov(dr.controls.A, v * (dr.controls.B[0] + dr.controls.B[0].T))
        np.testing.assert_allclose(c.Sigma_star, np.linalg.inv(P), rtol=1e-8)


def test_v_scalar_destabilising_draws_blow_up_at_the_taylor_pole():
    for dr in condition_draws(2, 3, "scalar", seed=5, condition="destabilising"):
        c = classify_outcome(dr)
        assert c.outcome is Outcome.BLOWUP
        pole = pole_time_hp(dr.Sigma0, dr.controls.A, dr.controls.V, dr.controls.B)
        assert c.t_blowup < pole.t_star and c.t_blowup == pytest.approx(pole.t_star, rel=1e-6)


def test_a_lower_rank_counterexample_is_classified_and_confirmed():
    # symmetric V, opposite definiteness, A anti-stable: this draw (seed 777, #10) ends in a rank-2 limit
    dr = condition_draws(11, 3, "symmetric", seed=777)[10]
    c = classify_outcome(dr)
    assert c.outcome is Outcome.LOWER_RANK and c.counterexample
    conf = confirm_outcome(c)
    assert conf.confirmed and conf.ratio < 1e-8
    assert conf.log_det_drop[-1] < -30  # det Sigma shrinks by e^-30 while Sigma stays bounded


def test_a_decaying_direction_is_not_called_an_equilibrium():
    # decoupled scalars: sigma_1 converges to a1/(v1 b1); sigma_2 has a2 < 0 and decays to 0 (rank 1)
    ctl = Controls(A=np.diag([0.5, -0.3]), V=np.diag([-1.0, -1.0]), B=np.eye(2))
    c = classify_outcome(ConditionDraw(0, "symmetric", "stabilising", ctl, np.eye(2)))
    assert c.outcome is Outcome.LOWER_RANK


def test_ensemble_counts_every_draw_with_wilson_intervals():
    ens = run_ensemble(4, 3, "scalar", seed=2)
    assert ens.n == 4 and ens.count(Outcome.EQUILIBRIUM) == 4 and not ens.counterexamples
    f, lo, hi = ens.fraction(Outcome.EQUILIBRIUM)
    assert f == 1 and hi == 1 and lo == pytest.approx(0.510, abs=1e-3)  # Wilson 95 % for 4 of 4


def test_null_quantile_is_the_simulated_quantile_of_gaussian_clouds():
    rng = np.random.default_rng(0)
    N, d, mu = 60, 3, np.array([1.0, -2.0, 0.5])
    C = np.array([[1.0, 0.3, 0.0], [0.3, 0.5, 0.1], [0.0, 0.1, 2.0]])
    vals = []
    for _ in range(4000):
        x = rng.multivariate_normal(mu, C, size=N)
        vals.append(hotelling(x.mean(axis=0), np.cov(x.T, bias=True), mu, N))
    q = null_quantile(N, d, 0.9)
    # the fraction above the 90 % quantile is binomial(4000, 0.1): sd 0.0047
    assert abs(np.mean(np.array(vals) > q) - 0.1) < 0.02
    assert null_quantile(10**6, d, 0.99) == pytest.approx(stats.chi2.ppf(0.99, d), rel=1e-3)


def test_confirmation_reads_the_vanishing_eigenvalue_from_the_log_determinant():
    # decoupled Bernoulli equations sigma_i' = 2 a_i sigma_i + q_i sigma_i^2: sigma_1 -> 1/2, sigma_2 -> 0 like
    # e^{-0.6 t}; 1/sigma(t) = e^{-2at}(1/sigma0 + q/2a) - q/2a, so the ratio at t = 400 (about 1e-104, far below
    # round-off of the matrix) is known exactly
    ctl = Controls(A=np.diag([0.5, -0.3]), V=np.diag([-1.0, -1.0]), B=np.eye(2))
    c = classify_outcome(ConditionDraw(0, "symmetric", "stabilising", ctl, np.eye(2)))
    conf = confirm_outcome(c)

    def log_sigma(a, q, t):
        return -np.log(np.exp(-2 * a * t) * (1 + q / (2 * a)) - q / (2 * a))

    exact = log_sigma(-0.3, -2.0, 400.0) - log_sigma(0.5, -2.0, 400.0)
    assert conf.confirmed
    assert np.log(conf.ratio) == pytest.approx(exact, rel=1e-6)


def test_steering_draws_carry_a_general_feedforward_block_and_every_draw_is_counted():
    from gtbook.studies.stability.steering import Steerable, steering_draws

    draws = steering_draws(3, 3, seed=777)
    assert len(draws) == 3
    for dr in draws:
        ctl = dr.controls
        assert ctl.U is not None and ctl.U.shape == (4, 3) and np.abs(ctl.c).min() > 0
        assert np.linalg.eigvals(ctl.A + ctl.W @ ctl.U).real.min() > 0  # the folded A is the anti-stable draw
        assert dr.status in (Steerable.STEERED, Steerable.NO_EQUILIBRIUM, Steerable.NOT_HURWITZ)


def test_tokens_reach_the_target_with_the_steering_bias_and_miss_it_without_the_tilt():
    # the independent side: N softmax tokens with their own feed-forward W(Ux + c); seed 777's fourth draw
    from gtbook.studies.stability.steering import steering_draws, steering_study

    dr = steering_draws(4, 3, seed=777)[3:]
    res = steering_study(dr, 400, seeds=1, seed=5, band=3.0, null_clouds=0)
    assert res.within.all() and not res.wrong_within.any()


def test_pole_comparison_flags_a_pole_found_by_one_side_only():
    from gtbook.studies.stability.pole_checks import PoleComparison

    same = PoleComparison(np.array([1.0, np.inf]), np.array([1.0 + 1e-9, np.inf]), np.array([True, True]), np.zeros(0))
    assert same.error == pytest.approx(1e-9, rel=1e-3)
    assert math.isinf(
        PoleComparison(np.array([1.0, np.inf]), np.array([1.0, 2.0]), np.array([True, True]), np.zeros(0)).error
    )


def test_scalar_poles_agree_with_the_bernoulli_closed_form_written_here():
    from gtbook.studies.stability.pole_checks import scalar_poles

    res = scalar_poles(6, seed=1)
    rng = np.random.default_rng(1)
    for lib in res.library:
        a = rng.uniform(-1.0, 1.0)
        v, beta = rng.uniform(0.3, 1.5, size=2) * rng.choice([-1.0, 1.0], size=2)
        s0 = rng.uniform(0.2, 2.0)
        q = 2 * v * beta
        x = 2 * a / (q * s0)
        exact = math.log1p(x) / (2 * a) if q > 0 and x > -1 else math.inf
        assert lib == pytest.approx(exact, rel=1e-12) if math.isfinite(exact) else math.isinf(lib)
    assert res.error < 1e-10
