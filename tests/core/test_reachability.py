"""Rank invariance and exact steering: controls checked through integrate_moments and on tokens."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.linalg import expm
from scipy.stats import special_ortho_group

from conftest import random_psd
from gtbook.studies.reachability.harness import rank_invariance, token_distances
from gtcore import Controls, PiecewiseControls, integrate_moments
from gtcore.particles import simulate
from gtcore.reachability import (
    RankMismatchError,
    SteeringControls,
    control_path,
    covariance_rank,
    endpoint_error,
    steer,
    steer_min_energy,
)
from gtcore.reachability.steering import _rotation_log
from gtcore.stats.inference import loglog_slope

HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_rank_problem(data, d, seed):
    """A drawn rank r <= d, and start and target Gaussians of that rank (with the generator)."""
    r = data.draw(st.integers(1, d), label="rank")
    rng = np.random.default_rng(seed)
    S0, S1 = psd_of_rank(rng, d, r), psd_of_rank(rng, d, r)
    return rng, rng.standard_normal(d), S0, rng.standard_normal(d), S1


def psd_of_rank(rng, d, r, scale=1.0):
    """A PSD matrix of rank r with eigenvalues in [0.2, 2] * scale (well conditioned on its range)."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = np.zeros(d)
    w[:r] = rng.uniform(0.2, 2.0, r) * scale
    S = (Q * w) @ Q.T
    return 0.5 * (S + S.T)


# --------------------------------------------------------------------------------- rank
def test_covariance_rank_closed_forms():
    assert covariance_rank(np.diag([3.0, 1.0, 0.0])) == 2
    assert covariance_rank(np.zeros((3, 3))) == 0
    assert covariance_rank(np.eye(4)) == 4
    assert covariance_rank(np.diag([1.0, 1e-9])) == 1  # below the default 1e-8
    assert covariance_rank(np.diag([1.0, 1e-9]), rtol=1e-10) == 2
    rng = np.random.default_rng(0)
    assert covariance_rank(random_psd(rng, 5, 3)) == 3


def test_covariance_rank_rejects_bad_input():
    with pytest.raises(ValueError, match="Sigma"):
        covariance_rank(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="rtol"):
        covariance_rank(np.eye(2), rtol=0.0)


def test_rank_is_invariant_along_the_moment_ode():
    rng = np.random.default_rng(1)
    d, r = 4, 2
    pieces = [
        Controls(
            A=0.5 * rng.standard_normal((d, d)),
            b=rng.standard_normal(d),
            V=0.3 * rng.standard_normal((d, d)),
            B=0.3 * rng.standard_normal((d, d)),
        )
        for _ in range(4)
    ]
    ctl = PiecewiseControls(np.linspace(0, 2, 5), pieces)
    out = rank_invariance(np.zeros(d), random_psd(rng, d, r), ctl, 2.0, n_times=21, rtols=(1e-8, 1e-11, 2.5e-14))
    assert out.rank0 == r and np.all(out.ranks == r)
    eta = out.eta
    assert eta[0] > eta[-1]  # the null singular values are the solver's error
    assert eta[-1] < 1e-12  # at the tightest tolerance: round-off
    assert np.min(out.singular_values[:, r - 1] / out.singular_values[:, 0]) > 1e-3


# ----------------------------------------------------------------------- matrix blocks
@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_rotation_log_is_a_real_skew_logarithm(d):
    R = special_ortho_group.rvs(d, random_state=d)
    L = _rotation_log(R)
    np.testing.assert_allclose(L, -L.T, atol=1e-14)
    np.testing.assert_allclose(expm(L), R, atol=1e-12)


@pytest.mark.parametrize(
    "R", [np.diag([-1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, -1.0, -1.0, 1.0])]
)
def test_rotation_log_handles_the_eigenvalue_minus_one(R):
    L = _rotation_log(R)
    assert np.isrealobj(L)
    np.testing.assert_allclose(expm(L), R, atol=1e-12)


# ----------------------------------------------------------------------------- steering
@HYP
@given(d=st.integers(2, 5), data=st.data(), seed=st.integers(0, 2**31 - 1), T=st.floats(0.5, 2.0))
def test_steer_hits_random_targets_of_the_same_rank(d, data, seed, T):
    _, m0, S0, m1, S1 = same_rank_problem(data, d, seed)
    ctl = steer(m0, S0, m1, S1, T)
    assert isinstance(ctl, SteeringControls) and ctl.d == d and ctl.span == (0.0, T)
    assert endpoint_error(ctl, m0, S0, m1, S1, T) < 1e-8
    # also under integrate_moments' default tolerances
    traj = integrate_moments(m0, S0, ctl, (0.0, T))
    assert traj.status == "completed"
    np.testing.assert_allclose(traj.final[0], m1, atol=1e-8)
    np.testing.assert_allclose(traj.final[1], S1, atol=1e-8)


def test_steer_full_rank_is_one_symmetric_stage_and_deficient_rank_two():
    rng = np.random.default_rng(2)
    full = steer(np.zeros(3), psd_of_rank(rng, 3, 3), np.ones(3), psd_of_rank(rng, 3, 3), 1.0)
    assert len(full.stages) == 1 and full.breaks == ()
    np.testing.assert_allclose(full.stages[0].A, full.stages[0].A.T, atol=1e-12)
    deficient = steer(np.zeros(3), psd_of_rank(rng, 3, 1), np.ones(3), psd_of_rank(rng, 3, 1), 1.0)
    assert len(deficient.stages) == 2 and deficient.breaks == (0.5,)
    A2 = deficient.stages[1].A
    np.testing.assert_allclose(A2, -A2.T, atol=1e-12)


def test_steer_zero_covariance_moves_the_mean_only():
    m0, m1 = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    ctl = steer(m0, np.zeros((2, 2)), m1, np.zeros((2, 2)), 2.0)
    np.testing.assert_allclose(ctl.stages[0].A, 0.0)
    np.testing.assert_allclose(ctl.stages[0].b, (m1 - m0) / 2.0)
    assert endpoint_error(ctl, m0, np.zeros((2, 2)), m1, np.zeros((2, 2)), 2.0) < 1e-12


def test_reference_trajectory_matches_the_moment_ode():
    rng = np.random.default_rng(3)
    d = 3
    S0, S1 = psd_of_rank(rng, d, 2), psd_of_rank(rng, d, 2)
    m0, m1 = rng.standard_normal(d), rng.standard_normal(d)
    ctl = steer(m0, S0, m1, S1, 1.5)
    t = np.linspace(0, 1.5, 13)
    traj = integrate_moments(m0, S0, ctl, (0, 1.5), t_eval=t, rtol=1e-12, atol=1e-14)
    for k, s in enumerate(t):
        mu, S = ctl.reference(s)
        np.testing.assert_allclose(traj.mu[k], mu, atol=1e-9)
        np.testing.assert_allclose(traj.Sigma[k], S, atol=1e-9)


def test_energy_is_exact_for_constant_stages():
    rng = np.random.default_rng(4)
    S0, S1 = psd_of_rank(rng, 2, 1), psd_of_rank(rng, 2, 1)
    ctl = steer(np.zeros(2), S0, np.ones(2), S1, 1.0)
    expected = sum(0.5 * (np.sum(c.A**2) + np.sum(c.b**2)) for c in ctl.stages)
    assert ctl.energy() == pytest.approx(expected, rel=1e-14)
    # compensating zero attention heads gives the same controls, through the quadrature
    zero = steer(np.zeros(2), S0, np.ones(2), S1, 1.0, heads=(np.zeros((2, 2)), np.zeros((2, 2))))
    assert zero.energy() == pytest.approx(expected, rel=1e-12)
    a, _ = control_path(ctl, [0.25, 0.75])
    np.testing.assert_allclose(a, [np.linalg.norm(c.A) for c in ctl.stages])


# ------------------------------------------------------------------------ attention on
@HYP
@given(d=st.integers(2, 5), data=st.data(), seed=st.integers(0, 2**31 - 1), heads=st.integers(1, 2))
def test_steer_with_attention_compensated(d, data, seed, heads):
    rng, m0, S0, m1, S1 = same_rank_problem(data, d, seed)
    # fixed, non-zero heads of moderate size (the compensation is open loop: perturbations of
    # the reference grow at a rate ~ 2 ||V|| ||B|| ||Sigma||)
    V = 0.4 * rng.standard_normal((heads, d, d)) / np.sqrt(d)
    B = 0.4 * rng.standard_normal((heads, d, d)) / np.sqrt(d)
    ctl = steer(m0, S0, m1, S1, 1.0, heads=(V, B))
    c = ctl(0.3)
    np.testing.assert_array_equal(c.V, V)
    np.testing.assert_array_equal(c.B, B)
    assert endpoint_error(ctl, m0, S0, m1, S1, 1.0) < 1e-8
    # without the compensation the same heads push the Gaussian off target
    off = steer(m0, S0, m1, S1, 1.0)
    uncompensated = lambda t: Controls(A=off(t).A, b=off(t).b, V=V, B=B)  # noqa: E731
    uncompensated.breaks = off.breaks
    assert endpoint_error(uncompensated, m0, S0, m1, S1, 1.0) > 1e-4


# ---------------------------------------------------------------------------- errors
def test_rank_mismatch_is_refused_with_both_ranks():
    S0 = np.diag([1.0, 2.0, 0.0])
    S1 = np.diag([1.0, 0.0, 0.0])
    with pytest.raises(RankMismatchError) as info:
        steer(np.zeros(3), S0, np.zeros(3), S1, 1.0)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.rank0, err.rank1) == (2, 1)
    msg = str(err)
    assert "rank(Sigma0) = 2" in msg and "rank(Sigma1) = 1" in msg and "invariant" in msg
    with pytest.raises(RankMismatchError):
        steer_min_energy(np.zeros(3), S0, np.zeros(3), S1, 1.0, pieces=2)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"Sigma1": np.array([[1.0, 0.5], [0.0, 1.0]])}, "Sigma1"),  # not symmetric
        ({"Sigma1": np.array([[1.0, 0.0], [0.0, -1.0]])}, "Sigma1"),  # not PSD
        ({"Sigma1": np.array([[1.0, np.nan], [np.nan, 1.0]])}, "Sigma1"),  # not finite
        ({"Sigma1": np.eye(3)}, "Sigma1"),  # wrong shape
        ({"mu1": np.array([0.0, np.inf])}, "mu1"),
        ({"mu1": np.zeros(3)}, "mu1"),
        ({"Sigma0": np.array([[1.0, 2.0], [2.0, 1.0]])}, "Sigma0"),
        ({"T": 0.0}, "T"),
        ({"T": -1.0}, "T"),
        ({"T": np.nan}, "T"),
        ({"T": "soon"}, "T"),
    ],
)
def test_bad_arguments_are_named(kwargs, name):
    args = {"mu0": np.zeros(2), "Sigma0": np.eye(2), "mu1": np.ones(2), "Sigma1": 2 * np.eye(2), "T": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name) as info:
        steer(args["mu0"], args["Sigma0"], args["mu1"], args["Sigma1"], args["T"])
    assert not isinstance(info.value, RankMismatchError)


def test_bad_heads_are_named():
    with pytest.raises(ValueError, match="heads"):
        steer(np.zeros(2), np.eye(2), np.ones(2), np.eye(2), 1.0, heads=(np.eye(3), np.eye(3)))
    with pytest.raises(ValueError, match="heads"):
        steer(np.zeros(2), np.eye(2), np.ones(2), np.eye(2), 1.0, heads=np.eye(2))
    with pytest.raises(ValueError, match="heads"):
        steer(
            np.zeros(2),
            np.eye(2),
            np.ones(2),
            np.eye(2),
            1.0,
            heads=(np.eye(2), np.eye(2)),
            attention=(np.eye(2), np.eye(2)),
        )


def test_attention_keyword_is_a_deprecated_alias_of_heads(rng):
    V, B = 0.3 * rng.standard_normal((2, 2)), 0.3 * rng.standard_normal((2, 2))
    new = steer(np.zeros(2), np.eye(2), np.ones(2), 2 * np.eye(2), 1.0, heads=(V, B))
    with pytest.warns(DeprecationWarning, match="heads"):
        old = steer(np.zeros(2), np.eye(2), np.ones(2), 2 * np.eye(2), 1.0, attention=(V, B))
    with pytest.warns(DeprecationWarning, match="heads"):
        np.testing.assert_array_equal(old.attention[0], new.heads[0])
    np.testing.assert_array_equal(old(0.3).A, new(0.3).A)


# ------------------------------------------------------------------------ min energy
def test_min_energy_hits_the_target_with_less_energy():
    rng = np.random.default_rng(5)
    S0, S1 = psd_of_rank(rng, 2, 1), psd_of_rank(rng, 2, 1)
    m0, m1 = rng.standard_normal(2), rng.standard_normal(2)
    res = steer_min_energy(m0, S0, m1, S1, 1.0, pieces=4)
    assert isinstance(res.controls, PiecewiseControls) and len(res.controls.pieces) == 4
    assert res.endpoint_error < 1e-8
    assert res.endpoint_error == pytest.approx(endpoint_error(res.controls, m0, S0, m1, S1, 1.0))
    assert res.constructive_endpoint_error < 1e-8
    assert res.energy <= res.constructive_energy
    expected = 0.25 * sum(np.sum(c.A**2) + np.sum(c.b**2) for c in res.controls.pieces)
    assert res.energy == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="pieces"):
        steer_min_energy(m0, S0, m1, S1, 1.0, pieces=0)


# ------------------------------------------------------------------------------ tokens
def exact_moment_cloud(rng, n, mu, Sigma):
    """n tokens whose 1/N empirical moments are exactly (mu, Sigma) (Sigma of full rank)."""
    z = rng.standard_normal((n, mu.shape[0]))
    z -= z.mean(axis=0)
    C = z.T @ z / n
    z = z @ np.linalg.inv(np.linalg.cholesky(C)).T
    return mu + z @ np.linalg.cholesky(Sigma).T


def test_tokens_follow_the_exact_affine_flow_without_attention():
    rng = np.random.default_rng(6)
    d = 3
    S0, S1 = psd_of_rank(rng, d, 2), psd_of_rank(rng, d, 2)
    m0, m1 = rng.standard_normal(d), rng.standard_normal(d)
    ctl = steer(m0, S0, m1, S1, 1.0)
    x0 = rng.standard_normal((40, d))
    run = simulate(x0, ctl, (0.0, 1.0), 200, device="cpu")
    x = x0.copy()
    for c, tau in zip(ctl.stages, ctl.durations, strict=True):  # x' = Ax + b: the augmented exponential
        G = np.zeros((d + 1, d + 1))
        G[:d, :d], G[:d, d] = c.A, c.b
        E = expm(tau * G)
        x = x @ E[:d, :d].T + E[:d, d]
    np.testing.assert_allclose(run.final_tokens, x, atol=1e-8)
    assert run.status == "completed" and run.t[0] == 0.0 and run.t[-1] == 1.0


def test_gaussian_attention_tokens_reach_the_target_moments():
    rng = np.random.default_rng(7)
    d = 2
    S0, S1 = psd_of_rank(rng, d, 2), psd_of_rank(rng, d, 2)
    m0, m1 = rng.standard_normal(d), rng.standard_normal(d)
    V, B = 0.3 * np.eye(d), -0.3 * np.eye(d)
    ctl = steer(m0, S0, m1, S1, 1.0, heads=(V, B))
    x0 = exact_moment_cloud(rng, 64, m0, S0)
    run = simulate(x0, ctl, (0.0, 1.0), 200, average="gaussian", device="cpu")
    np.testing.assert_allclose(run.mu[-1], m1, atol=1e-7)
    np.testing.assert_allclose(run.Sigma[-1], S1, atol=1e-7)


def test_token_distances_and_slope():
    rng = np.random.default_rng(8)
    S0, S1 = psd_of_rank(rng, 2, 2), psd_of_rank(rng, 2, 2)
    ctl = steer(np.zeros(2), S0, np.ones(2), S1, 1.0)
    D = token_distances(
        ctl, np.zeros(2), S0, np.ones(2), S1, 1.0, [100, 400], 3, 20, seed=1, progress=False, device="cpu"
    )
    assert D.shape == (2, 3) and np.all(D > 0) and np.all(np.isfinite(D))
    assert D[1].mean() < D[0].mean()
    x = np.array([10.0, 100.0, 1000.0])
    assert loglog_slope(x, 3.0 * x**-0.5) == pytest.approx(-0.5, abs=1e-12)
    with pytest.raises(ValueError):
        loglog_slope(x, [1.0, -1.0, 2.0])


# ----------------------------------------------------------------------------- figures
def test_figures_build():
    import matplotlib.pyplot as plt

    from gtbook.studies.reachability import figures as figs

    rng = np.random.default_rng(9)
    S0, S1 = psd_of_rank(rng, 2, 2), psd_of_rank(rng, 2, 2)
    ctl = steer(np.zeros(2), S0, np.ones(2), S1, 1.0)
    t = np.linspace(0, 1, 11)
    tr = integrate_moments(np.zeros(2), S0, ctl, (0, 1), t_eval=t)
    u = np.array([1.0, 0.0, 0.0])
    ctl3 = steer(np.zeros(3), np.outer(u, u), np.ones(3), np.outer(u[::-1], u[::-1]), 1.0)
    tr3 = integrate_moments(np.zeros(3), np.outer(u, u), ctl3, (0, 1), t_eval=t)
    inv = rank_invariance(np.zeros(3), np.outer(u, u), ctl3, 1.0, n_times=5, rtols=(1e-8, 1e-12))
    D = np.array([[0.3, 0.2], [0.1, 0.12]])
    out = [
        figs.rank_figure(inv),
        figs.steering_figure(tr, (np.ones(2), S1), tr3, (np.ones(3), np.outer(u[::-1], u[::-1]))),
        figs.distance_vs_n_figure([100, 1000], D, loglog_slope([100, 1000], np.exp(np.log(D).mean(axis=1)))),
        figs.attention_figure(
            tr, tr, rng.standard_normal((20, 2)), (np.zeros(2), S0), (np.ones(2), S1), t, *[control_path(ctl, t)[0]] * 2
        ),
        figs.energy_figure(t, control_path(ctl, t), control_path(ctl, t), (1.0, 0.5)),
    ]
    for fig in out:
        assert isinstance(fig, plt.Figure)
        fig.canvas.draw()  # renders the mathtext labels
        plt.close(fig)


def test_min_energy_from_random_starts_hits_the_target_and_rejects_bad_starts():
    from gtcore.reachability import steer_min_energy, steer_min_energy_starts

    u0, u1 = np.array([1.0, 0.0]), np.array([0.6, 0.8])
    args = (np.zeros(2), np.outer(u0, u0), np.array([1.0, 0.5]), np.outer(u1, u1), 1.0)
    runs = steer_min_energy_starts(*args, pieces=2, starts=2, seed=0)
    assert len(runs) == 2
    feasible = [r for r in runs if r.endpoint_error < 1e-6]
    assert feasible
    # an independent optimum of a feasible problem is never worse than the constructive start by much,
    # and every feasible result is a stationary point of the same energy functional
    ref = steer_min_energy(*args, pieces=2)
    assert min(r.energy for r in feasible) <= ref.constructive_energy
    with pytest.raises(ValueError, match="start"):
        steer_min_energy(*args, pieces=2, start=np.zeros(3))


def test_each_random_start_is_its_own_documented_draw():
    """Start k begins at scale * N(0, I) from numpy.random.default_rng(seed + k) (its docstring), drawn here
    independently of the library: the starts are distinct points, so several of them agreeing on a minimum
    (chapter 3's claim) is evidence from several starts, not one start repeated."""
    from gtcore.reachability import steer_min_energy, steer_min_energy_starts

    u0, u1 = np.array([1.0, 0.0]), np.array([0.6, 0.8])
    args = (np.zeros(2), np.outer(u0, u0), np.array([1.0, 0.5]), np.outer(u1, u1), 1.0)
    K, d, seed, scale = 2, 2, 7, 0.5
    runs = steer_min_energy_starts(*args, pieces=K, starts=3, scale=scale, seed=seed, maxiter=1)

    def pieces(res):
        ctl = res.controls.pieces
        return np.concatenate([np.ravel([c.A for c in ctl]), np.ravel([c.b for c in ctl])])

    for k, run in enumerate(runs):
        start = scale * np.random.default_rng(seed + k).standard_normal(K * d * d + K * d)
        assert np.allclose(
            pieces(run), pieces(steer_min_energy(*args, pieces=K, start=start, maxiter=1)), rtol=1e-12, atol=1e-12
        )
    for i in range(3):
        for j in range(i):
            assert not np.allclose(pieces(runs[i]), pieces(runs[j]))
