"""gtcore.stability against closed forms and direct integration of the moment ODE."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm, solve_continuous_lyapunov
from scipy.optimize import minimize_scalar

from conftest import random_psd, random_spd
from gtbook.studies.stability.harness import regime_map
from gtcore import Controls, integrate_moments
from gtcore.riccati import blowup_time, closed_form_covariance, critical_gain, gain_threshold, riccati_quadratic
from gtcore.stability import (
    NoEquilibriumError,
    asymptotic_mean,
    bias_for_mean_target,
    classify,
    equilibrium,
    linear_stability,
    mean_matrix,
    observe_regime,
)

J = np.array([[0.0, -1.0], [1.0, 0.0]])


def rotation_controls(a, v, omega=0.7, B=None, b=None):
    B = np.array([[1.0, 0.4], [-0.2, 0.6]]) if B is None else B  # non-symmetric, B + B^T > 0
    return Controls(A=a * np.eye(2) + omega * J, V=v * np.eye(2), B=B, b=b)


S0_2 = np.array([[1.0, 0.3], [0.3, 0.5]])


def assert_same_spectrum(a, b, tol):
    """Same multiset of complex eigenvalues: a greedy matching with distance <= tol."""
    a, b = list(np.asarray(a)), list(np.asarray(b))
    assert len(a) == len(b)
    for x in a:
        k = int(np.argmin([abs(x - y) for y in b]))
        assert abs(x - b[k]) <= tol, (x, b)
        b.pop(k)


# ------------------------------------------------------------------ blow-up time, d = 1
@pytest.mark.parametrize(
    "a, v, beta, s0",
    [(0.5, 1.0, 1.0, 0.5), (0.0, 1.0, 0.7, 1.0), (-0.3, 2.0, 0.5, 1.0), (1.0, -1.0, -2.0, 0.2), (1e-9, 1.0, 1.0, 1.0)],
)
def test_scalar_blowup_matches_integration(a, v, beta, s0):
    ctl = Controls(A=[[a]], V=[[v]], B=[[beta]])
    bt = blowup_time([[s0]], ctl)
    assert bt.method == "closed form (d = 1)"
    expected = (math.log1p(a / (v * beta * s0)) / (2 * a)) if a else 1 / (2 * v * beta * s0)
    assert bt.t_star == pytest.approx(expected, rel=1e-12)
    traj = integrate_moments([0.0], [[s0]], ctl, (0.0, 2 * bt.t_star))
    assert traj.status == "blowup"
    assert abs(traj.crossing_time - bt.t_star) <= 1e-6 * bt.t_star
    num = blowup_time([[s0]], ctl, method="numerical")
    assert num.method == "numerical"
    assert abs(num.t_star - bt.t_star) <= 1e-9 * bt.t_star


@pytest.mark.parametrize("a, v, beta, s0", [(0.5, 1.0, -1.0, 0.5), (-0.5, 1.0, 1.0, 0.5), (0.3, 0.0, 1.0, 1.0)])
def test_scalar_no_blowup(a, v, beta, s0):
    ctl = Controls(A=[[a]], V=[[v]], B=[[beta]])
    assert blowup_time([[s0]], ctl).t_star == math.inf
    traj = integrate_moments([0.0], [[s0]], ctl, (0.0, 30.0))
    assert traj.status == "completed"


def test_scalar_two_heads_add():
    ctl = Controls(A=[[0.2]], V=[[[1.0]], [[0.5]]], B=[[[0.3]], [[0.8]]])
    q = 2 * (1.0 * 0.3 + 0.5 * 0.8)
    bt = blowup_time([[1.0]], ctl)
    assert bt.t_star == pytest.approx(math.log(1 + 0.4 / q) / 0.4, rel=1e-12)


def _scalar_pole_by_integration(a, q, s0, horizon=60.0):
    """The pole of sigma' = 2 a sigma + q sigma^2 (eq. (1.1) in d = 1, q = 2 sum_h v_h beta_h), found without
    the closed form: p = 1/sigma solves p' = -2 a p - q, integrated here by solve_ivp to its first zero
    (an event); inf when p stays positive up to ``horizon``."""
    hit = lambda _t, p: p[0]  # noqa: E731
    hit.terminal, hit.direction = True, -1
    sol = solve_ivp(
        lambda _t, p: [-2.0 * a * p[0] - q],
        (0.0, horizon),
        [1.0 / s0],
        method="DOP853",
        events=hit,
        rtol=1e-12,
        atol=1e-14,
    )
    assert sol.success
    return float(sol.t_events[0][0]) if sol.t_events[0].size else math.inf


@pytest.mark.parametrize("branch", ["pole, a > 0", "pole, a < 0", "no pole, decay wins", "no pole, q < 0"])
def test_scalar_blowup_with_a_feed_forward_block_and_two_heads_against_integration(branch):
    """d = 1 with a feed-forward block (a = A + WU, hidden width 3, c != 0) and two heads whose products
    v_h beta_h have opposite signs (q = 2(v_1 beta_1 + v_2 beta_2)): the closed form against the pole of the
    integrated precision. Seeded draws; A and sigma0 are then set so that each draw lies in ``branch``
    (x = 2a/(q sigma0) in (-0.9, -0.1) for a pole with a < 0, in (-3, -1.1) where the decay wins)."""
    rng = np.random.default_rng(20260611)
    for _ in range(6):
        U, W, c = rng.normal(0.0, 0.7, (3, 1)), rng.normal(0.0, 0.7, (1, 3)), rng.normal(0.0, 1.0, 3)
        v, beta = rng.normal(0.0, 1.0, 2), rng.normal(0.0, 1.0, 2)
        if v[0] * beta[0] * v[1] * beta[1] > 0:
            v[1] = -v[1]
        q = 2.0 * float(v @ beta)
        if (q < 0) != (branch == "no pole, q < 0"):
            beta, q = -beta, -q
        a = rng.uniform(0.1, 1.0) * (1.0 if branch in ("pole, a > 0", "no pole, q < 0") else -1.0)
        if branch == "pole, a < 0":
            s0 = 2.0 * a / (q * rng.uniform(-0.9, -0.1))
        elif branch == "no pole, decay wins":
            s0 = 2.0 * a / (q * rng.uniform(-3.0, -1.1))
        else:
            s0 = rng.uniform(0.3, 2.0)
        a0 = a - float((W @ U)[0, 0])
        ctl = Controls(A=[[a0]], b=[0.4], V=v.reshape(2, 1, 1), B=beta.reshape(2, 1, 1), U=U, W=W, c=c)
        expected = _scalar_pole_by_integration(a0 + float((W @ U)[0, 0]), q, s0)
        assert math.isfinite(expected) == branch.startswith("pole")
        bt = blowup_time([[s0]], ctl)
        assert bt.method == "closed form (d = 1)"
        if math.isfinite(expected):
            assert bt.t_star == pytest.approx(expected, rel=1e-9)
        else:
            assert bt.t_star == math.inf and bt.proved


# ---------------------------------------------------- blow-up time, V = vI, d = 2, 3
@pytest.mark.parametrize("d, shift", [(2, 0.3), (3, 0.3), (2, -0.4), (3, 0.0)])
def test_matrix_blowup_matches_integration(d, shift, rng):
    A = 0.4 * rng.standard_normal((d, d)) + shift * np.eye(d)
    if shift == 0.0:
        A[:, 0] = 0.0  # singular A: the augmented exponential still works
    G = rng.standard_normal((d, d))
    B = G @ G.T + np.eye(d) + 0.5 * rng.standard_normal((d, d))  # non-symmetric
    B = B + (1.0 - min(0.0, np.linalg.eigvalsh(B + B.T)[0])) * np.eye(d)
    Sigma0 = 2.0 * random_spd(rng, d, cond=3.0)
    ctl = Controls(A=A, V=0.8 * np.eye(d), B=B)
    bt = blowup_time(Sigma0, ctl)
    assert bt.method == "closed form (V = vI)"
    assert math.isfinite(bt.t_star)
    traj = integrate_moments(np.zeros(d), Sigma0, ctl, (0.0, 2 * bt.t_star))
    assert traj.status == "blowup"
    assert abs(traj.crossing_time - bt.t_star) <= 1e-6 * bt.t_star
    # independent check: lambda_min(P(t)) by the plain formula crosses 0 at t*
    P0 = np.linalg.inv(Sigma0)
    Q = 0.8 * (B + B.T)

    def lam_min_P(t, n=400):
        s = np.linspace(0, t, n + 1)
        vals = np.array([expm(A.T * x) @ Q @ expm(A * x) for x in s])
        w = np.full(n + 1, 2.0)
        w[0] = w[-1] = 1.0
        w[1:-1:2] = 4.0
        Y = (t / n / 3.0) * np.tensordot(w, vals, axes=1)
        E = expm(-A * t)
        return np.linalg.eigvalsh(E.T @ (P0 - Y) @ E)[0]

    assert lam_min_P(0.999 * bt.t_star) > 0 > lam_min_P(1.001 * bt.t_star)
    num = blowup_time(Sigma0, ctl, method="numerical")
    assert abs(num.t_star - bt.t_star) <= 1e-8 * bt.t_star


def test_closed_form_covariance_matches_integration(rng):
    for d in (2, 3):
        A = 0.5 * rng.standard_normal((d, d)) + 0.3 * np.eye(d)
        B = -(np.eye(d) + 0.3 * rng.standard_normal((d, d)))
        ctl = Controls(A=A, V=0.7 * np.eye(d), B=B)
        Sigma0 = random_spd(rng, d)
        t = np.linspace(0, 2.0, 9)
        traj = integrate_moments(np.zeros(d), Sigma0, ctl, (0, 2.0), t_eval=t)
        exact = closed_form_covariance(Sigma0, ctl, t)
        np.testing.assert_allclose(traj.Sigma, exact, rtol=1e-8, atol=1e-10)


def test_rank_deficient_sigma0_blowup(rng):
    d = 3
    Sigma0 = 3.0 * random_psd(rng, d, 1)
    ctl = Controls(A=0.1 * rng.standard_normal((d, d)), V=np.eye(d), B=np.eye(d))
    bt = blowup_time(Sigma0, ctl)
    traj = integrate_moments(np.zeros(d), Sigma0, ctl, (0, 10))
    assert traj.status == "blowup"
    assert abs(traj.crossing_time - bt.t_star) <= 1e-6 * bt.t_star
    np.testing.assert_allclose(
        closed_form_covariance(Sigma0, ctl, [0.5 * bt.t_star])[0],
        integrate_moments(np.zeros(d), Sigma0, ctl, (0, 0.5 * bt.t_star)).Sigma[-1],
        rtol=1e-8,
        atol=1e-10,
    )


def test_indefinite_Q_scan(rng):
    A = np.array([[0.2, 0.5], [-0.5, 0.1]])
    B = np.diag([1.0, -0.5])
    ctl = Controls(A=A, V=np.eye(2), B=B)
    bt = blowup_time(np.eye(2), ctl)
    traj = integrate_moments(np.zeros(2), np.eye(2), ctl, (0, 50))
    if traj.status == "blowup":
        assert abs(traj.crossing_time - bt.t_star) <= 1e-6 * bt.t_star
    else:
        assert bt.t_star == math.inf


def test_general_V_blowup_is_numerical(rng):
    ctl = Controls(A=0.1 * np.eye(2), V=np.array([[1.0, 0.3], [0.0, 0.8]]), B=np.eye(2))
    bt = blowup_time(np.eye(2), ctl)
    assert bt.method == "numerical" and math.isfinite(bt.t_star)
    with pytest.raises(ValueError, match="closed form"):
        blowup_time(np.eye(2), ctl, method="closed form")


# ------------------------------------------------------------------------------ equilibria
@pytest.mark.parametrize("d", [2, 3])
def test_equilibrium_closed_form_residual_and_attraction(d, rng):
    A = 0.3 * rng.standard_normal((d, d)) + 0.6 * np.eye(d)  # anti-stable
    assert np.linalg.eigvals(A).real.min() > 0
    G = rng.standard_normal((d, d))
    B = G @ G.T + np.eye(d) + 0.3 * rng.standard_normal((d, d))
    B = B + (1.0 - min(0.0, np.linalg.eigvalsh(B + B.T)[0])) * np.eye(d)
    ctl = Controls(A=A, V=-0.5 * np.eye(d), B=B)  # opposite definiteness
    eq = equilibrium(ctl)
    assert eq.method == "closed form (Lyapunov)"
    assert eq.relative_residual < 1e-12
    assert np.linalg.eigvalsh(eq.Sigma)[0] > 0
    ls = linear_stability(ctl, eq.Sigma)
    lam = np.linalg.eigvals(A)
    expected = np.array([-(lam[i] + lam[j]) for i in range(d) for j in range(i, d)])
    assert_same_spectrum(ls.eigenvalues, expected, 1e-10)
    assert ls.verdict == "stable"
    T = 25.0 / abs(ls.max_real)  # e^-25 of the initial distance
    traj = integrate_moments(np.zeros(d), random_spd(rng, d), ctl, (0, T))
    assert np.linalg.norm(traj.Sigma[-1] - eq.Sigma) < 1e-8 * np.linalg.norm(eq.Sigma)
    # M* = A + V Sigma* B has purely imaginary spectrum
    Ms = A + ctl.attention_drift(eq.Sigma)
    assert np.abs(np.linalg.eigvals(Ms).real).max() < 1e-10
    # Newton from a perturbed guess reaches the same matrix
    eqn = equilibrium(ctl, Sigma_guess=eq.Sigma + 0.05 * np.eye(d))
    assert eqn.method == "Newton"
    np.testing.assert_allclose(eqn.Sigma, eq.Sigma, rtol=1e-10, atol=1e-12)


def test_equilibrium_with_hurwitz_A_is_unstable():
    ctl = rotation_controls(-0.5, 1.0)
    eq = equilibrium(ctl)
    assert eq.relative_residual < 1e-12
    assert linear_stability(ctl, eq.Sigma).verdict == "unstable"


def test_newton_on_general_V(rng):
    d = 3
    A = 0.8 * np.eye(d) + 0.2 * rng.standard_normal((d, d))
    V = -(np.eye(d) + 0.25 * rng.standard_normal((d, d)))
    B = np.eye(d) + 0.2 * rng.standard_normal((d, d))
    ctl = Controls(A=A, V=V, B=B)
    assert riccati_quadratic(ctl) is None
    eq = equilibrium(ctl)
    assert eq.method == "Newton"
    assert eq.relative_residual < 1e-12
    assert np.linalg.eigvalsh(eq.Sigma)[0] > 0
    _, dS = __import__("gtcore").moment_rhs(np.zeros(d), eq.Sigma, ctl)  # independent residual
    assert np.linalg.norm(dS) < 1e-11 * np.linalg.norm(eq.Sigma)
    ls = linear_stability(ctl, eq.Sigma)
    # finite-difference Jacobian eigenvalues agree
    from gtcore._linalg import symmetric_basis
    from gtcore.stability.equilibria import _F, _sym_coords

    h = 1e-6
    cols = [
        (_sym_coords(_F(ctl, eq.Sigma + h * E)) - _sym_coords(_F(ctl, eq.Sigma - h * E))) / (2 * h)
        for E in symmetric_basis(d)
    ]
    fd = np.linalg.eigvals(np.stack(cols, axis=1))
    assert_same_spectrum(ls.eigenvalues, fd, 1e-6)
    if ls.verdict == "stable":
        traj = integrate_moments(np.zeros(d), eq.Sigma + 0.01 * np.eye(d), ctl, (0, 80))
        assert np.linalg.norm(traj.Sigma[-1] - eq.Sigma) < 1e-6


def test_no_pd_equilibrium_raises_with_reason():
    with pytest.raises(NoEquilibriumError, match="smallest eigenvalue"):
        equilibrium(rotation_controls(0.5, 1.0))  # same definiteness: P* < 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_equilibrium_when_newton_shrinks_to_the_singular_root(seed):
    """Skew A, B = I and V = -I + skew (not scalar, so Newton's route): tr F(Sigma) = tr(A Sigma + Sigma A^T)
    + 2 tr(V Sigma^2) = -2 tr(Sigma^2) < 0 for every Sigma != 0, so 0 is the only equilibrium, and Sigma(t)
    shrinks to it. Newton's iterates shrink with it; a limit must not be certified positive definite."""
    rng = np.random.default_rng(seed)
    S, T = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    ctl = Controls(A=S - S.T, V=-np.eye(3) + 0.3 * (T - T.T), B=np.eye(3))
    with pytest.raises(NoEquilibriumError, match=r"not certified positive definite|no convergence|no descent"):
        equilibrium(ctl)


# ----------------------------------------------------------------------------- classify
def test_classify_each_verdict():
    conv = classify(rotation_controls(0.5, -1.0), S0_2)
    assert conv.verdict == "converges"
    assert "anti-stable" in conv.reason and "negative definite" in conv.reason
    traj = integrate_moments(np.zeros(2), S0_2, rotation_controls(0.5, -1.0), (0, 50))
    np.testing.assert_allclose(traj.Sigma[-1], conv.Sigma_star, rtol=1e-9)

    col = classify(rotation_controls(-0.5, -1.0), S0_2)
    assert col.verdict == "collapses to 0" and "Hurwitz" in col.reason
    assert (
        np.linalg.norm(
            integrate_moments(np.zeros(2), S0_2, rotation_controls(-0.5, -1.0), (0, 50), atol=1e-30).Sigma[-1]
        )
        < 1e-15
    )

    bl = classify(rotation_controls(0.5, 1.0), S0_2)
    assert bl.verdict == "blows up" and bl.t_star > 0
    assert "positive definite" in bl.reason

    und = classify(Controls(A=np.diag([0.5, -0.5]), V=-np.eye(2), B=np.eye(2)), S0_2)
    assert und.verdict == "undetermined"
    assert "both sides" in und.reason


def test_classify_hurwitz_threshold():
    A = -0.5 * np.eye(2) + 0.7 * J
    B = np.array([[1.0, 0.4], [-0.2, 0.6]])
    vc = critical_gain(A, B, S0_2)
    assert classify(Controls(A=A, V=0.95 * vc * np.eye(2), B=B), S0_2).verdict == "collapses to 0"
    assert classify(Controls(A=A, V=1.05 * vc * np.eye(2), B=B), S0_2).verdict == "blows up"
    assert observe_regime(Controls(A=A, V=0.95 * vc * np.eye(2), B=B), S0_2, 200) == "collapses to 0"
    assert observe_regime(Controls(A=A, V=1.05 * vc * np.eye(2), B=B), S0_2, 200) == "blows up"


def test_classify_general_V_numerical(rng):
    ctl = Controls(A=0.6 * np.eye(2) + 0.3 * J, V=-np.array([[1.0, 0.2], [0.0, 0.8]]), B=np.eye(2))
    r = classify(ctl, S0_2, t_max=80)
    assert r.method == "numerical" and r.verdict == "converges"
    assert np.linalg.norm(_residual(ctl, r.Sigma_star)) < 1e-10


def _residual(ctl, S):
    from gtcore.stability.equilibria import _F

    return _F(ctl, S)


def test_regime_map_small_grid():
    rm = regime_map(lambda a, v: rotation_controls(a, v), [-0.6, 0.6], [-1.0, 1.0], S0_2, 100, progress=False)
    assert rm.theory.shape == (2, 2)
    assert rm.agreement == 1.0 and rm.disagreements == []
    assert rm.theory[0, 1] == "converges" and rm.theory[1, 1] == "blows up"


# --------------------------------------------------------------------------------- mean
def test_mean_steered_to_target():
    ctl = rotation_controls(0.5, -1.0)
    eq = equilibrium(ctl)
    target = np.array([1.5, -2.0])
    b = bias_for_mean_target(ctl, eq.Sigma, target)
    steered = rotation_controls(0.5, -1.0, b=b)
    np.testing.assert_allclose(asymptotic_mean(steered, eq.Sigma), target, rtol=1e-12)
    # rate of the mean is v: M* + vI has eigenvalues v + i omega
    assert np.linalg.eigvals(mean_matrix(steered, eq.Sigma)).real == pytest.approx([-1.0, -1.0], abs=1e-10)
    traj = integrate_moments(np.zeros(2), S0_2, steered, (0, 60))
    assert np.linalg.norm(traj.mu[-1] - target) < 1e-8


def test_bias_with_feedforward_block():
    U = np.array([[1.0, 0.0]])
    W = np.array([[0.5], [0.1]])
    c = np.array([0.3])
    base = Controls(A=0.5 * np.eye(2), V=-np.eye(2), B=np.eye(2), U=U, W=W, c=c)
    eq = equilibrium(base)
    target = np.array([0.2, 0.7])
    b = bias_for_mean_target(base, eq.Sigma, target)
    steered = Controls(A=0.5 * np.eye(2), b=b, V=-np.eye(2), B=np.eye(2), U=U, W=W, c=c)
    np.testing.assert_allclose(asymptotic_mean(steered, eq.Sigma), target, rtol=1e-12)


def test_bias_with_a_general_feed_forward_block_steers_equation_1_1():
    """d = 3, general V (not a multiple of I), non-symmetric B, a feed-forward block with U of shape 4 x 3 and
    c != 0. Sigma* is made an equilibrium by hand: with A + WU = -V Sigma* B + S Sigma*^-1 (S skew) the
    covariance field of eq. (1.1) vanishes at Sigma*, and the mean's matrix is V + S Sigma*^-1 (Hurwitz here;
    B is drawn with B Sigma* near I, so that Sigma* attracts and the integration below stays on it).
    The bias is checked against its closed form written out here, and by integrating eq. (1.1) (written in the
    test, with the block W(Ux + c) as its own term) from Sigma* with solve_ivp: the mean must reach the target."""
    rng = np.random.default_rng(20260613)
    d, m = 3, 4
    S_star = random_spd(rng, d, cond=3.0) / 2.0
    V = -np.eye(d) + 0.25 * rng.standard_normal((d, d))
    B = (np.eye(d) + 0.3 * rng.standard_normal((d, d))) @ np.linalg.inv(S_star)  # B Sigma* near I: a stable Sigma*
    assert np.abs(B - B.T).max() > 0.1
    skew = rng.standard_normal((d, d))
    skew = 0.4 * (skew - skew.T)
    U, W, c = 0.5 * rng.standard_normal((m, d)), 0.5 * rng.standard_normal((d, m)), rng.standard_normal(m)
    A = -V @ S_star @ B + skew @ np.linalg.inv(S_star) - W @ U
    assert np.abs(A).min() > 1e-3 and np.abs(A - A.T).max() > 0.1  # a general A
    M = V + skew @ np.linalg.inv(S_star)
    assert np.linalg.eigvals(M).real.max() < -0.2
    target = np.array([1.5, -0.7, 0.4])
    base = Controls(A=A, b=rng.standard_normal(d), V=V, B=B, U=U, W=W, c=c)  # its own b is ignored
    bias = bias_for_mean_target(base, S_star, target)
    np.testing.assert_allclose(bias, -(A + W @ U + V + V @ S_star @ B) @ target - W @ c, rtol=1e-12, atol=1e-12)
    steered = Controls(A=A, b=bias, V=V, B=B, U=U, W=W, c=c)
    np.testing.assert_allclose(asymptotic_mean(steered, S_star), target, rtol=1e-10)

    def rhs(_t, y):  # eq. (1.1); the block W(Ux + c) averaged over N(mu, Sigma) is W(U mu + c), its Jacobian WU
        mu, S = y[:d], y[d:].reshape(d, d)
        dmu = (A + V) @ mu + V @ S @ B @ mu + bias + W @ (U @ mu + c)
        F = A + W @ U
        dS = F @ S + S @ F.T + V @ S @ B @ S + S @ B.T @ S @ V.T
        return np.concatenate([dmu, dS.ravel()])

    assert np.abs(rhs(0.0, np.concatenate([target, S_star.ravel()]))).max() < 1e-12  # the target is a fixed point
    sol = solve_ivp(
        rhs, (0.0, 40.0), np.concatenate([np.zeros(d), S_star.ravel()]), method="DOP853", rtol=1e-11, atol=1e-13
    )
    assert sol.success
    np.testing.assert_allclose(sol.y[d:, -1].reshape(d, d), S_star, atol=1e-8)
    np.testing.assert_allclose(sol.y[:d, -1], target, atol=1e-6)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: blowup_time([[1.0, np.nan], [np.nan, 1.0]], rotation_controls(0.5, 1.0)), "Sigma0"),
        (lambda: blowup_time(np.eye(3), rotation_controls(0.5, 1.0)), "Sigma0"),
        (lambda: blowup_time(np.diag([1.0, -1.0]), rotation_controls(0.5, 1.0)), "Sigma0"),
        (lambda: blowup_time(np.eye(2), rotation_controls(0.5, 1.0), t_max=-1), "t_max"),
        (lambda: blowup_time(np.eye(2), "not controls"), "controls"),
        (lambda: classify(rotation_controls(0.5, 1.0), np.diag([1.0, -1.0])), "Sigma0"),
        (lambda: classify(rotation_controls(0.5, 1.0), np.ones((2, 3))), "Sigma0"),
        (lambda: equilibrium(rotation_controls(0.5, -1.0), Sigma_guess=np.diag([1.0, 0.0])), "Sigma_guess"),
        (lambda: linear_stability(rotation_controls(0.5, -1.0), [[np.inf, 0], [0, 1]]), "Sigma_star"),
        (lambda: asymptotic_mean(rotation_controls(0.5, -1.0), np.eye(3)), "Sigma_star"),
        (lambda: bias_for_mean_target(rotation_controls(0.5, -1.0), np.eye(2), [1.0, 2.0, 3.0]), "mu_target"),
        (lambda: critical_gain(np.eye(2), np.eye(2), np.eye(2)), "Hurwitz"),
        (lambda: closed_form_covariance(np.eye(2), rotation_controls(0.5, 1.0), [10.0]), "blow-up"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_regime_boundary_and_rotating_family():
    from gtbook.studies.stability.harness import regime_boundary
    from gtbook.studies.stability.harness import rotating_controls as rc

    B = np.array([[1.0, 0.4], [-0.2, 0.6]])
    c = rc(-0.3, 0.5, B, omega=0.7)
    np.testing.assert_allclose(np.linalg.eigvals(c.A), [-0.3 + 0.7j, -0.3 - 0.7j])
    bd = regime_boundary([-0.6, -0.3, 0.2], B, S0_2, omega=0.7)
    np.testing.assert_array_equal(bd.a_curve, [-0.6, -0.3])
    for a, vc in zip(bd.a_curve, bd.v_curve, strict=True):
        assert classify(rc(a, 0.97 * vc, B, omega=0.7), S0_2).verdict == "collapses to 0"
        assert classify(rc(a, 1.03 * vc, B, omega=0.7), S0_2).verdict == "blows up"
    with pytest.raises(ValueError, match="B"):
        rc(0.1, 1.0, np.eye(3))


def _reference_blowup(A, Q, Sigma0, t_max, big=1e8):
    """t* of Sigma' = A Sigma + Sigma A^T + Sigma Q Sigma (V = vI, Q = v(B + B^T)), independently of gtcore:
    the right-hand side written out here, integrated by LSODA (ODEPACK Adams/BDF with the exact
    Jacobian; gtcore integrates with DOP853) at rtol 1e-11 to ||Sigma||_F = big ||Sigma0||, then the
    pole correction t_e + ||Sigma|| / (d/dt ||Sigma||), whose error is O((t* - t_e)^2). inf when it
    does not blow up by t_max. (The precision form P = Sigma^-1 is no reference here: for mixed or
    Hurwitz spectra P grows like e^(2|Re lambda| t) and lambda_min(P) shows false zeros.)"""
    A, Q, S0 = (np.asarray(m, float) for m in (A, Q, Sigma0))
    d, eye = A.shape[0], np.eye(A.shape[0])

    def rhs(t, y):
        S = y.reshape(d, d)
        return (A @ S + S @ A.T + S @ Q @ S).ravel()

    def jac(t, y):  # row-major vec: vec(X D Y) = (X kron Y^T) vec(D)
        S = y.reshape(d, d)
        return np.kron(A, eye) + np.kron(eye, A) + np.kron(S @ Q, eye) + np.kron(eye, (Q @ S).T)

    n0 = max(float(np.linalg.norm(S0)), 1.0)

    def event(t, y):
        return np.linalg.norm(y) - big * n0

    event.terminal = True
    sol = solve_ivp(rhs, (0.0, t_max), S0.ravel(), method="LSODA", jac=jac, rtol=1e-11, atol=1e-14 * n0, events=event)
    if sol.status != 1:
        return math.inf
    t_e, y = sol.t_events[0][0], sol.y_events[0][0]
    N = np.linalg.norm(y)
    return t_e + N / (np.dot(y, rhs(t_e, y)) / N)


def test_blowup_for_mixed_spectra_agrees_with_an_independent_integrator():
    """Indefinite Q with A of mixed spectrum, where e^{At} grows until I - K Y K is round-off
    (regression: false blow-ups and crashes): every answer, closed form or numerical fallback,
    against LSODA on the hand-written moment ODE (never gtcore's own integrator)."""
    rng = np.random.default_rng(1)
    methods = []
    for _ in range(40):
        d = int(rng.integers(2, 4))
        A = rng.standard_normal((d, d))
        G = rng.standard_normal((d, d))
        v = float(rng.uniform(-0.3, 0.3))
        F = rng.standard_normal((d, d))
        S0 = F @ F.T / d
        B = G + G.T
        bt = blowup_time(S0, Controls(A=A, V=v * np.eye(d), B=B), t_max=20)
        ref = _reference_blowup(A, v * (B + B.T), S0, 20)
        methods.append((bt.method, math.isfinite(ref)))
        if math.isfinite(ref):
            assert bt.t_star == pytest.approx(ref, rel=1e-7)
        else:
            assert bt.t_star == math.inf
    assert sum(f for _, f in methods) >= 15  # the sample has blow-ups, not only no-blow-ups
    assert any(m == "numerical" for m, _ in methods)  # and exercises the fallback


def test_fallback_is_labelled_numerical_and_matches_the_scalar_closed_form():
    """A rotated decoupled pair: direction 1 (a = 5, q = -2) saturates while e^{At} grows past the
    closed form's trusted range, direction 2 (a = -0.1, q = 0.3) blows up at the scalar
    t* = log(1 + 2a/q)/(2a) = 5.49. blowup_time falls back to the integrator and must say so;
    classify too."""
    th = 0.4
    R = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    ctl = Controls(A=R @ np.diag([5.0, -0.1]) @ R.T, V=np.eye(2), B=R @ np.diag([-1.0, 0.15]) @ R.T)
    exact = math.log1p(2 * -0.1 / 0.3) / (2 * -0.1)
    bt = blowup_time(np.eye(2), ctl)
    assert bt.method == "numerical" and "closed form ill-conditioned" in bt.reason
    assert bt.t_star == pytest.approx(exact, rel=1e-8)
    reg = classify(ctl, np.eye(2))
    assert reg.verdict == "blows up" and reg.method == "numerical"
    assert reg.t_star == pytest.approx(exact, rel=1e-8)


# ------------------------------------------ the domain of v_c: an indefinite B + B^T counterexample
A_IND = np.array([[-0.1, -1.0], [1.0, -0.1]])  # Hurwitz, -0.1 +- i
B_IND = np.diag([1.0, -1.0])  # B + B^T indefinite


def _formula_gain(A, B):
    """1 / lambda_max(Y_inf), A^T Y + Y A = -(B + B^T), Sigma0 = I: what v_c's formula would say."""
    Y = solve_continuous_lyapunov(A.T, -(B + B.T))
    return 1.0 / np.linalg.eigvalsh(0.5 * (Y + Y.T))[-1]


def _true_threshold(A, B, t_max=150.0):
    """1 / sup_t lambda_max(Y(t)) with Y' = e^{A^T t}(B + B^T)e^{At} integrated by DOP853 at 1e-12
    (Sigma0 = I), the supremum by bounded minimisation around the best point of a fine grid."""
    sol = solve_ivp(
        lambda t, y: (expm(A.T * t) @ (B + B.T) @ expm(A * t)).ravel(),
        (0, t_max),
        np.zeros(4),
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
        dense_output=True,
    )
    lam = lambda t: np.linalg.eigvalsh(sol.sol(t).reshape(2, 2))[-1]  # noqa: E731
    ts = np.linspace(0, t_max, 4001)
    k = int(np.argmax([lam(t) for t in ts]))
    best = minimize_scalar(
        lambda t: -lam(t), bounds=(ts[max(k - 1, 0)], ts[min(k + 1, 4000)]), method="bounded", options={"xatol": 1e-10}
    )
    return 1.0 / -best.fun


def test_critical_gain_and_regime_boundary_refuse_indefinite_B_plus_BT():
    from gtbook.studies.stability.harness import regime_boundary

    with pytest.raises(ValueError, match=r"B \+ B\^T positive semidefinite"):
        critical_gain(A_IND, B_IND, np.eye(2))
    with pytest.raises(ValueError, match=r"B \+ B\^T positive semidefinite"):
        regime_boundary([-0.5, -0.1], B_IND, np.eye(2))
    # semidefinite B + B^T is inside the domain: Y(t) increases to Y_inf, v_c is the formula
    B_psd = np.array([[1.0, 0.5], [-0.5, 0.0]])
    assert critical_gain(A_IND, B_psd, np.eye(2)) == pytest.approx(_formula_gain(A_IND, B_psd), rel=1e-12)
    assert critical_gain(A_IND, B_psd, np.eye(2)) == pytest.approx(_true_threshold(A_IND, B_psd), rel=1e-6)


@pytest.mark.parametrize("v", [0.6, 0.8, 1.0])
def test_indefinite_counterexample_blows_up_below_the_formula(v):
    """A = -0.1 I + J, B = diag(1, -1), Sigma0 = I: the formula says v_c = 1.005, yet v = 0.6, 0.8,
    1.0 all blow up; blowup_time must find the times the independent integrator finds."""
    assert v < _formula_gain(A_IND, B_IND)
    ctl = Controls(A=A_IND, V=v * np.eye(2), B=B_IND)
    ref = _reference_blowup(A_IND, v * (B_IND + B_IND.T), np.eye(2), 50.0)
    assert math.isfinite(ref)
    bt = blowup_time(np.eye(2), ctl)
    assert bt.t_star == pytest.approx(ref, rel=1e-8)
    assert bt.method == "closed form (V = vI)" and "confirmed by integrate_moments" in bt.reason
    assert classify(ctl, np.eye(2)).verdict == "blows up"


def test_indefinite_counterexample_true_threshold():
    """The exact threshold 1/sup_t lambda_max(Y(t)) (0.579 here, against the formula's 1.005):
    3 % below it nothing blows up, 3 % above it the covariance blows up, by both codes."""
    v_true = _true_threshold(A_IND, B_IND)
    assert v_true < 0.7 * _formula_gain(A_IND, B_IND)
    for v, blows in ((0.97 * v_true, False), (1.03 * v_true, True)):
        ref = _reference_blowup(A_IND, v * (B_IND + B_IND.T), np.eye(2), 40.0)
        bt = blowup_time(np.eye(2), Controls(A=A_IND, V=v * np.eye(2), B=B_IND), t_max=40.0)
        assert math.isfinite(ref) is blows and math.isfinite(bt.t_star) is blows
        if blows:
            assert bt.t_star == pytest.approx(ref, rel=1e-8)
        verdict = classify(Controls(A=A_IND, V=v * np.eye(2), B=B_IND), np.eye(2)).verdict
        assert verdict == ("blows up" if blows else "collapses to 0")


def test_gain_threshold_against_the_integrated_supremum():
    """gain_threshold (exact Y(t), semigroup grid) against _true_threshold (Y' integrated by DOP853):
    the indefinite counterexample's transient peak, and a semidefinite B + B^T, where the supremum is
    the limit and the threshold is critical_gain's formula."""
    gt = gain_threshold(A_IND, B_IND, np.eye(2))
    assert gt.threshold == pytest.approx(_true_threshold(A_IND, B_IND), rel=1e-6)
    assert gt.formula == pytest.approx(_formula_gain(A_IND, B_IND), rel=1e-12)
    assert gt.threshold < 0.7 * gt.formula and 0 < gt.t_peak < 10 and gt.peak > gt.limit
    B_psd = np.array([[1.0, 0.5], [-0.5, 0.0]])
    psd = gain_threshold(A_IND, B_psd, np.eye(2))
    assert psd.t_peak == math.inf and psd.threshold == pytest.approx(critical_gain(A_IND, B_psd, np.eye(2)), rel=1e-12)
    with pytest.raises(ValueError, match="Hurwitz"):
        gain_threshold(np.eye(2), B_IND, np.eye(2))


def test_tiny_gain_is_not_zero():
    """V = 1e-13 I, B = I: Q = 2e-13 I is positive definite, blow-up at t* = 1/(q_eff sigma0)."""
    bt = blowup_time(np.eye(2), Controls(V=1e-13 * np.eye(2), B=np.eye(2)), t_max=1e13)
    assert bt.t_star == pytest.approx(5e12, rel=1e-6)
