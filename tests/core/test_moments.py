"""The moment ODE against closed forms, its invariants, and the exact layer map."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from scipy.linalg import expm, solve_continuous_lyapunov

from conftest import gauss_hermite_rule, random_psd, random_spd, softmax_average_by_quadrature
from gtcore import Controls, PiecewiseControls, integrate_moments, layer_map, layer_stack, moment_rhs


# ---------------------------------------------------------------- closed forms, d = 1
def scalar_sigma(t, s0, a, vb):
    """sigma' = 2 a sigma + 2 v beta sigma^2."""
    if a == 0:
        return s0 / (1 - 2 * vb * s0 * t)
    E = np.exp(2 * a * t)
    return s0 * E / (1 - (vb * s0 / a) * (E - 1))


def scalar_blowup(s0, a, vb):
    if a == 0:
        return 1 / (2 * vb * s0)
    return np.log(1 + a / (vb * s0)) / (2 * a)


@pytest.mark.parametrize(
    "a, v, beta, s0",
    [(0.5, 1.0, 1.0, 0.5), (0.0, 1.0, 0.7, 1.0), (-0.3, 2.0, 0.5, 1.0), (1.0, -1.0, -2.0, 0.2)],
)
def test_scalar_blowup_time_and_solution(a, v, beta, s0):
    vb = v * beta
    tstar = scalar_blowup(s0, a, vb)
    ctl = Controls(A=[[a]], V=[[v]], B=[[beta]])
    traj = integrate_moments([0.0], [[s0]], ctl, (0.0, 2 * tstar))
    assert traj.status == "blowup"
    assert abs(traj.crossing_time - tstar) <= 1e-6 * tstar
    assert np.all(np.isfinite(traj.Sigma))
    # sigma's sensitivity to a perturbation grows like sigma itself near the pole, so the
    # 1e-8 relative comparison is made while sigma has grown by at most 100x.
    before = (traj.t < traj.crossing_time) & (traj.Sigma[:, 0, 0] <= 100 * s0)
    assert before.sum() > 5
    expected = scalar_sigma(traj.t[before], s0, a, vb)
    np.testing.assert_allclose(traj.Sigma[before, 0, 0], expected, rtol=1e-8)


def test_scalar_no_blowup_when_signs_are_opposite():
    a, v, beta, s0 = 0.5, 1.0, -1.0, 0.5
    t = np.linspace(0, 5, 11)
    traj = integrate_moments([0.0], [[s0]], Controls(A=[[a]], V=[[v]], B=[[beta]]), (0, 5), t_eval=t)
    assert traj.status == "completed" and traj.crossing_time is None
    np.testing.assert_array_equal(traj.t, t)
    np.testing.assert_allclose(traj.Sigma[:, 0, 0], scalar_sigma(t, s0, a, v * beta), rtol=1e-8)


# ----------------------------------------------------- closed form for V = vI, d = 2, 3
def riccati_closed_form(A, v, B, Sigma0, t):
    P0 = np.linalg.inv(Sigma0)
    Pstar = solve_continuous_lyapunov(A.T, -v * (B + B.T))
    out = []
    for s in t:
        E = expm(-A * s)
        P = E.T @ (P0 - Pstar) @ E + Pstar
        out.append(np.linalg.inv(P))
    return np.array(out)


@pytest.mark.parametrize("d", [2, 3])
def test_linearising_inverse_matches_closed_form(d, rng):
    A = rng.standard_normal((d, d)) * 0.5 + np.eye(d) * 0.3
    B = rng.standard_normal((d, d))
    B = -(B @ B.T) - np.eye(d) + 0.3 * rng.standard_normal((d, d))  # non-symmetric, v(B+B^T) < 0
    v = 0.7
    Sigma0 = random_spd(rng, d, cond=3.0)
    t = np.linspace(0, 1.5, 16)
    traj = integrate_moments(np.zeros(d), Sigma0, Controls(A=A, V=v * np.eye(d), B=B), (0, 1.5), t_eval=t)
    assert traj.status == "completed"
    expected = riccati_closed_form(A, v, B, Sigma0, t)
    err = np.linalg.norm(traj.Sigma - expected, axis=(1, 2)) / np.linalg.norm(expected, axis=(1, 2))
    assert err.max() < 1e-8


@pytest.mark.parametrize("d", [2, 3])
def test_blowup_time_is_first_zero_of_lambda_min_P(d, rng):
    from scipy.optimize import brentq

    A = rng.standard_normal((d, d)) * 0.3
    G = rng.standard_normal((d, d))
    B = G @ G.T + np.eye(d)  # v B positive definite: blow-up
    v = 1.0
    Sigma0 = random_spd(rng, d, cond=2.0)
    P0 = np.linalg.inv(Sigma0)
    Pstar = solve_continuous_lyapunov(A.T, -v * (B + B.T))

    def lam_min(s):
        E = expm(-A * s)
        return np.linalg.eigvalsh(E.T @ (P0 - Pstar) @ E + Pstar)[0]

    grid = np.linspace(0, 10, 201)
    vals = np.array([lam_min(s) for s in grid])
    k = np.argmax(vals < 0)
    assert k > 0, "this problem must blow up"
    tstar = brentq(lam_min, grid[k - 1], grid[k], xtol=1e-14)
    traj = integrate_moments(np.zeros(d), Sigma0, Controls(A=A, V=v * np.eye(d), B=B), (0, 10))
    assert traj.status == "blowup"
    assert abs(traj.crossing_time - tstar) <= 1e-6 * tstar


# --------------------------------------------------------------------- invariants
@settings(max_examples=25, deadline=None)
@given(
    d=st.integers(2, 5),
    data=st.data(),
    seed=st.integers(0, 2**31 - 1),
)
def test_rank_is_invariant(d, data, seed):
    r = data.draw(st.integers(1, d - 1))
    rng = np.random.default_rng(seed)
    Sigma0 = random_psd(rng, d, r)
    ctl = Controls(
        A=0.5 * rng.standard_normal((d, d)),
        b=rng.standard_normal(d),
        V=0.3 * rng.standard_normal((d, d)),
        B=0.3 * rng.standard_normal((d, d)),
    )
    traj = integrate_moments(
        rng.standard_normal(d),
        Sigma0,
        ctl,
        (0, 1),
        t_eval=np.linspace(0, 1, 6),
        blowup_norm=1e3 * np.linalg.norm(Sigma0),
    )
    # Near a blow-up the integrator's absolute error (rtol * ||Sigma||) swamps the 1e-8 relative
    # criterion; the rank statement is checked where the solution is resolved.
    assume(traj.status == "completed")
    for S in traj.Sigma:
        np.testing.assert_array_equal(S, S.T)
        sv = np.linalg.svd(S, compute_uv=False)
        assert np.sum(sv > 1e-8 * np.linalg.norm(S, 2)) == r


def test_sigma_stays_symmetric_and_psd(rng):
    d = 4
    ctl = Controls(
        A=rng.standard_normal((d, d)), V=rng.standard_normal((d, d)) * 0.2, B=rng.standard_normal((d, d)) * 0.2
    )
    traj = integrate_moments(np.zeros(d), random_spd(rng, d), ctl, (0, 1), blowup_norm=1e6)
    assert np.all(traj.Sigma == np.swapaxes(traj.Sigma, 1, 2))
    assert np.linalg.eigvalsh(traj.Sigma).min() > 0


def test_two_heads_are_the_sum_of_their_contributions(rng):
    d = 3
    mu, S = rng.standard_normal(d), random_spd(rng, d)
    A, b = rng.standard_normal((d, d)), rng.standard_normal(d)
    V, B = rng.standard_normal((2, d, d)), rng.standard_normal((2, d, d))
    dmu, dS = moment_rhs(mu, S, Controls(A=A, b=b, V=V, B=B))
    dmu0, dS0 = moment_rhs(mu, S, Controls(A=A, b=b, V=V[0], B=B[0]))
    dmu1, dS1 = moment_rhs(mu, S, Controls(V=V[1], B=B[1]))
    np.testing.assert_allclose(dmu, dmu0 + dmu1, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dS, dS0 + dS1, rtol=1e-13, atol=1e-13)
    one = moment_rhs(mu, S, Controls(A=A, V=V[:1], B=B[:1]))
    same = moment_rhs(mu, S, Controls(A=A, V=V[0], B=B[0]))
    np.testing.assert_array_equal(one[0], same[0])
    np.testing.assert_array_equal(one[1], same[1])


def test_moment_rhs_is_equation_1_1(rng):
    d = 3
    mu, S = rng.standard_normal(d), random_spd(rng, d)
    A, b, V, B = (
        rng.standard_normal((d, d)),
        rng.standard_normal(d),
        rng.standard_normal((d, d)),
        rng.standard_normal((d, d)),
    )
    dmu, dS = moment_rhs(mu, S, Controls(A=A, b=b, V=V, B=B))
    np.testing.assert_allclose(dmu, (A + V) @ mu + V @ S @ B @ mu + b, rtol=1e-12)
    np.testing.assert_allclose(dS, A @ S + S @ A.T + V @ S @ B @ S + S @ B.T @ S @ V.T, rtol=1e-12)


def _feed_forward_layer(rng, d, m):
    """A general layer with a feed-forward block W(Ux + c): A, V, B, U, W Gaussian (B non-symmetric, V not
    a multiple of I, U neither I nor square when m != d), b and c non-zero."""
    g = lambda *shape: 0.4 * rng.standard_normal(shape)  # noqa: E731
    return dict(A=g(d, d), b=g(d), V=g(d, d), B=g(d, d), U=g(m, d), W=g(d, m), c=1.0 + g(m))


def _rhs_1_1_by_hand(A, b, V, B):
    """Eq. (1.1) for one head, written out here: mu' = (A + V) mu + V Sigma B mu + b,
    Sigma' = A Sigma + Sigma A^T + V Sigma B Sigma + Sigma B^T Sigma V^T (state: mu, then Sigma row by row)."""
    d = A.shape[0]

    def f(_t, y):
        mu, S = y[:d], y[d:].reshape(d, d)
        dmu = (A + V) @ mu + V @ S @ B @ mu + b
        dS = A @ S + S @ A.T + V @ S @ B @ S + S @ B.T @ S @ V.T
        return np.concatenate([dmu, dS.ravel()])

    return f


@pytest.mark.parametrize("m", [3, 4])
def test_moments_with_a_feed_forward_block_against_equation_1_1_by_hand(rng, m):
    """The identity-activation block W(Ux + c) enters eq. (1.1) as A -> A + WU, b -> b + Wc. The reference
    is scipy's solve_ivp on eq. (1.1) written in this test with the fold done by hand (m = d = 3: W U and
    U W have the same shape, so swapping them changes numbers instead of failing on shapes)."""
    d = 3
    p = _feed_forward_layer(rng, d, m)
    ctl = Controls(**p)
    mu0, S0 = rng.standard_normal(d), random_spd(rng, d, cond=3.0) / 3.0
    A_fold, b_fold = p["A"] + p["W"] @ p["U"], p["b"] + p["W"] @ p["c"]
    f = _rhs_1_1_by_hand(A_fold, b_fold, p["V"], p["B"])
    dmu, dS = moment_rhs(mu0, S0, ctl)
    np.testing.assert_allclose(
        np.concatenate([dmu, dS.ravel()]), f(0.0, np.concatenate([mu0, S0.ravel()])), rtol=1e-12, atol=1e-13
    )
    ts = np.linspace(0.0, 1.5, 7)
    ref = solve_ivp(
        f, (0.0, 1.5), np.concatenate([mu0, S0.ravel()]), method="DOP853", t_eval=ts, rtol=1e-11, atol=1e-13
    )
    assert ref.success
    traj = integrate_moments(mu0, S0, ctl, (0.0, 1.5), t_eval=ts)
    assert traj.status == "completed"
    np.testing.assert_allclose(traj.mu, ref.y[:d].T, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(traj.Sigma.reshape(len(ts), -1), ref.y[d:].T, rtol=1e-8, atol=1e-9)
    # the block must matter along this path (so that dropping it, or a part of it, cannot pass)
    bare = integrate_moments(mu0, S0, Controls(A=p["A"], b=p["b"], V=p["V"], B=p["B"]), (0.0, 1.5), t_eval=ts)
    assert np.abs(bare.mu[-1] - traj.mu[-1]).max() > 1e-2
    assert np.abs(bare.Sigma[-1] - traj.Sigma[-1]).max() > 1e-2


def test_piecewise_breaks_are_honoured(rng):
    """Piece by piece equals chaining two integrations by hand."""
    d = 2
    c1 = Controls(A=rng.standard_normal((d, d)), b=rng.standard_normal(d))
    c2 = Controls(A=rng.standard_normal((d, d)), V=0.2 * np.eye(d), B=-np.eye(d))
    mu0, S0 = np.zeros(d), random_spd(rng, d)
    pw = PiecewiseControls([0.0, 0.37, 1.0], [c1, c2])
    traj = integrate_moments(mu0, S0, pw, (0, 1), t_eval=[0.0, 0.2, 0.37, 0.5, 1.0])
    first = integrate_moments(mu0, S0, c1, (0, 0.37))
    second = integrate_moments(first.mu[-1], first.Sigma[-1], c2, (0.37, 1.0))
    np.testing.assert_allclose(traj.Sigma[-1], second.Sigma[-1], rtol=1e-10)
    np.testing.assert_allclose(traj.mu[-1], second.mu[-1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(traj.t, [0.0, 0.2, 0.37, 0.5, 1.0])
    # the same through a plain callable that exposes no breaks is only approximately equal
    traj2 = integrate_moments(mu0, S0, lambda t: pw(t), (0, 1))
    np.testing.assert_allclose(traj2.Sigma[-1], second.Sigma[-1], rtol=1e-6)


def test_default_output_is_the_solver_steps_without_duplicates(rng):
    c1, c2 = Controls(A=-np.eye(2)), Controls(A=np.eye(2))
    traj = integrate_moments(np.ones(2), np.eye(2), PiecewiseControls([0, 0.5, 1], [c1, c2]), (0, 1))
    assert np.all(np.diff(traj.t) > 0) and traj.t[0] == 0 and traj.t[-1] == 1
    np.testing.assert_allclose(traj.Sigma[-1], np.eye(2), rtol=1e-9)


# ---------------------------------------------------------------------- layer map
def test_layer_map_equals_affine_map_by_hand(rng):
    d, h = 3, 0.1
    mu, S = rng.standard_normal(d), random_spd(rng, d)
    A, b, V, B = (
        rng.standard_normal((d, d)),
        rng.standard_normal(d),
        rng.standard_normal((d, d)),
        rng.standard_normal((d, d)),
    )
    mu1, S1 = layer_map(mu, S, Controls(A=A, b=b, V=V, B=B), h)
    M = np.eye(d) + h * (A + V @ S @ B)
    c = h * (b + V @ mu)  # x -> M x + c
    np.testing.assert_allclose(mu1, M @ mu + c, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(S1, M @ S @ M.T, rtol=1e-13)


def test_layer_map_with_a_feed_forward_block_by_hand(rng):
    """A feed-forward block W(Ux + c) with identity activation (hidden width 4 != d) adds WU to the linear
    part and Wc to the bias: x -> x + h((A + WU + V Sigma B) x + b + Wc + V mu), written out here."""
    d, m, h = 3, 4, 0.1
    mu, S = rng.standard_normal(d), random_spd(rng, d)
    A, b, V, B = (
        rng.standard_normal((d, d)),
        rng.standard_normal(d),
        rng.standard_normal((d, d)),
        rng.standard_normal((d, d)),
    )
    U, W, c = rng.standard_normal((m, d)), rng.standard_normal((d, m)), rng.standard_normal(m)
    mu1, S1 = layer_map(mu, S, Controls(A=A, b=b, V=V, B=B, U=U, W=W, c=c), h)
    M = np.eye(d) + h * (A + W @ U + V @ S @ B)
    shift = h * (b + W @ c + V @ mu)
    np.testing.assert_allclose(mu1, M @ mu + shift, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(S1, M @ S @ M.T, rtol=1e-13)


def test_layer_map_is_the_push_forward_under_softmax_attention(rng):
    """The exact layer map against its definition, with no tilt formula on the reference side:
    nodes of N(mu, Sigma) are pushed by x + h v(x) with each head's *softmax* average over
    N(mu, Sigma) (Gauss-Hermite quadrature over the keys, 60 nodes a coordinate; non-symmetric B,
    two heads), and the image's mean and covariance are the weighted moments of the pushed nodes of
    a 4-node rule (exact for the degree-2 moments of an affine image; its nodes stay within 2.4
    standard deviations, where the inner rule is accurate to round-off)."""
    d, h = 2, 0.2
    mu, S = rng.standard_normal(d), random_spd(rng, d, cond=4)
    A, b = rng.standard_normal((d, d)), rng.standard_normal(d)
    V, B = 0.5 * rng.standard_normal((2, d, d)), 0.3 * rng.standard_normal((2, d, d))
    assert np.abs(B - B.transpose(0, 2, 1)).max(axis=(1, 2)).min() > 1e-2  # B_h^T != B_h: a transpose shows
    x, w = gauss_hermite_rule(mu, S, 4)
    y = x + h * (x @ A.T + b + sum(softmax_average_by_quadrature(x, mu, S, B[k], n=60) @ V[k].T for k in range(2)))
    mean = w @ y
    cov = (w[:, None] * (y - mean)).T @ (y - mean)
    mu1, S1 = layer_map(mu, S, Controls(A=A, b=b, V=V, B=B), h)
    np.testing.assert_allclose(mu1, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(S1, cov, rtol=1e-10, atol=1e-12)


def test_layer_stack_chains_layer_map(rng):
    d, L = 2, 5
    layers = [Controls(A=rng.standard_normal((d, d)), V=np.eye(d) * 0.1, B=np.eye(d)) for _ in range(L)]
    mus, Sigmas = layer_stack(np.zeros(d), np.eye(d), layers, 0.1)
    assert mus.shape == (L + 1, d) and Sigmas.shape == (L + 1, d, d)
    m, S = np.zeros(d), np.eye(d)
    for k, c in enumerate(layers):
        m, S = layer_map(m, S, c, 0.1)
        np.testing.assert_array_equal(Sigmas[k + 1], S)


def test_euler_layers_converge_to_the_ode(rng):
    d = 2
    ctl = Controls(A=rng.standard_normal((d, d)) * 0.5, b=np.ones(d), V=np.eye(d) * 0.3, B=-np.eye(d))
    mu0, S0 = np.zeros(d), np.eye(d)
    ref = integrate_moments(mu0, S0, ctl, (0, 1))
    errs = []
    for L in (50, 100, 200):
        _, Sig = layer_stack(mu0, S0, [ctl] * L, 1.0 / L)
        errs.append(np.linalg.norm(Sig[-1] - ref.Sigma[-1]))
    slope = np.polyfit(np.log([50, 100, 200]), np.log(errs), 1)[0]
    assert -1.1 < slope < -0.9  # Euler is first order


# --------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "mu0, Sigma0, match",
    [
        (np.zeros(2), np.eye(3), "Sigma0"),
        (np.zeros((2, 1)), np.eye(2), "mu0"),
        (np.array([0.0, np.nan]), np.eye(2), "mu0"),
        (np.zeros(2), np.array([[1.0, np.inf], [0.0, 1.0]]), "Sigma0"),
        (np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]]), "Sigma0 must be symmetric"),
        (np.zeros(2), np.diag([1.0, -1.0]), "Sigma0 must be positive semidefinite"),
    ],
)
def test_bad_initial_moments_name_the_argument(mu0, Sigma0, match):
    with pytest.raises(ValueError, match=match):
        integrate_moments(mu0, Sigma0, Controls(A=np.eye(2)), (0, 1))


def test_rank_deficient_initial_covariance_is_valid():
    traj = integrate_moments(np.zeros(2), np.diag([1.0, 0.0]), Controls(A=np.eye(2)), (0, 1))
    assert traj.status == "completed"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(t_span=(1.0, 0.0)), "t_span"),
        (dict(t_span=(0.0, np.inf)), "t_span"),
        (dict(t_span=(0.0, 1.0), t_eval=[0.5, 0.2]), "t_eval"),
        (dict(t_span=(0.0, 1.0), t_eval=[0.5, 2.0]), "t_eval"),
        (dict(t_span=(0.0, 1.0), blowup_norm=-1), "blowup_norm"),
        (dict(t_span=(0.0, 1.0), t_eval=[0.0, np.nan, 1.0]), "t_eval"),
        (dict(t_span=(0.0, 1.0), t_eval=[0.0, 0.5, 0.5]), "t_eval"),
        (dict(t_span=(0.0, 1.0), blowup_norm=1.0), "blowup_norm"),
    ],
)
def test_bad_time_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        integrate_moments(np.zeros(2), np.eye(2), Controls(A=np.eye(2)), **kwargs)


def test_controls_of_the_wrong_dimension():
    with pytest.raises(ValueError, match="controls"):
        integrate_moments(np.zeros(2), np.eye(2), Controls(A=np.eye(3)), (0, 1))
    with pytest.raises(ValueError, match="controls"):
        integrate_moments(np.zeros(2), np.eye(2), lambda t: "nope", (0, 1))
    with pytest.raises(ValueError, match=r"controls.*dimension"):
        integrate_moments(np.zeros(2), np.eye(2), lambda t: Controls(A=np.eye(3)), (0, 1))


def test_layer_map_validation():
    with pytest.raises(ValueError, match="h"):
        layer_map(np.zeros(2), np.eye(2), Controls(A=np.eye(2)), 0.0)
    with pytest.raises(ValueError, match="Sigma"):
        layer_map(np.zeros(2), -np.eye(2), Controls(A=np.eye(2)), 0.1)
    with pytest.raises(ValueError, match="controls"):
        layer_map(np.zeros(2), np.eye(2), Controls(A=np.eye(3)), 0.1)


# ------------------------------------------------- the constant-controls fast path of integrate_moments
def _fast_path_cases(rng):
    d = 3
    S = random_spd(rng, d)
    S = 0.5 * (S + S.T)  # exactly symmetric, as the integrator's state is made before each evaluation
    mat = lambda *shape: 0.4 * rng.standard_normal(shape)  # noqa: E731
    return S, [
        Controls(A=mat(d, d), b=mat(d), V=mat(d, d), B=mat(d, d)),
        Controls(A=mat(d, d), V=mat(2, d, d), B=mat(2, d, d)),
        Controls(A=mat(d, d), V=mat(d, d), B=mat(d, d), U=mat(4, d), W=mat(d, 4), c=mat(4)),
        Controls(V=mat(d, d), Q=mat(d, d), K=np.eye(d) + mat(d, d), attention="l2"),
        Controls(A=mat(d, d), V=mat(d, d), B=mat(d, d), attention="sinkhorn"),
    ]


def test_the_fast_right_hand_side_is_moment_rhs_bit_for_bit(rng):
    """integrate_moments' precomputed right-hand side (constant controls) against moment_rhs, the
    general path, every bit: the fast path may not change a result."""
    from gtcore.moments.ode import _flat_rhs

    S, cases = _fast_path_cases(rng)
    mu = rng.standard_normal(3)
    for ctl in cases:
        dmu, dS = moment_rhs(mu, S, ctl)
        np.testing.assert_array_equal(_flat_rhs(ctl)(mu, S), np.concatenate([dmu, dS.ravel()]))


def test_constant_controls_integrate_as_the_same_controls_given_as_a_function(rng):
    """Controls (fast path, set up once) and ``lambda t: controls`` (read at every evaluation) give the
    same trajectory bit for bit, blow-up and t_eval included."""
    S, cases = _fast_path_cases(rng)
    for ctl in cases[:3]:
        for kw in (dict(), dict(t_eval=np.linspace(0.0, 1.5, 7))):
            a = integrate_moments(np.ones(3), S, ctl, (0.0, 1.5), **kw)
            b = integrate_moments(np.ones(3), S, lambda t, c=ctl: c, (0.0, 1.5), **kw)
            assert a.status == b.status and a.nfev == b.nfev
            np.testing.assert_array_equal(a.t, b.t)
            np.testing.assert_array_equal(a.Sigma, b.Sigma)
            np.testing.assert_array_equal(a.mu, b.mu)


def test_an_event_located_at_a_control_break_keeps_the_times_strictly_increasing():
    """Found by the fuzz test: the second piece's bias blows the mean up within its first step, and the event,
    located at the break to round-off, used to repeat the break's time."""
    from gtcore.status import Status

    still = Controls(V=np.zeros((1, 1)), B=np.zeros((1, 1)))
    push = Controls(V=np.zeros((1, 1)), B=np.zeros((1, 1)), b=[1.0])
    tr = integrate_moments(
        np.zeros(1),
        np.zeros((1, 1)),
        PiecewiseControls([5e299], [still, push]),
        (0.0, 1e300),
        rtol=1e-13,
        atol=1e-13,
        max_nfev=5000,
    )
    assert tr.status is Status.BLOWUP and np.all(np.diff(tr.t) > 0) and len(tr.t) == len(tr.mu) == len(tr.Sigma)


# ------------------------------------------------ found by the fuzz test (test_fuzz_integrate_moments)
def _fuzz_case(kind):
    """The inputs of three failures of test_fuzz_integrate_moments in CI (shrunk by Hypothesis), written out."""
    if kind == "budget":  # a step past the budget was rejected three times and retried: 448 evaluations of 400
        mu0 = np.array([9.999999999999998, -9.651635915173639])
        Sigma0 = np.array([[0.10656999043488531, 3.264505941714386e-301], [3.264505941714386e-301, 0.0]])
        pieces = [
            Controls(
                A=np.array([[-6.971832298090716e-15, 1.4881341186929573], [-0.6286599928531407, -2.0]]),
                b=np.array([0.8935762987572198, 0.8935762987572198]),
                V=np.array([[[-0.8464904546420884, 0.6161259998017745], [-0.8197954939795806, -1.0228364627074382]]]),
                Q=np.array([[[3.328691252273566e-103, -0.4785143458116802]]]),
                K=np.array([[[-6.10452862630256e-90, -6.10452862630256e-90]]]),
                attention="l2",
            ),
            Controls(
                A=np.array([[2.6825729713291793e-142, 34.79647208131604], [-25.773041459235774, 33.84043459972315]]),
                b=np.array([-1.9, -1.8065252194923112]),
                V=np.array([[[17.876941693482806, 0.3333333333333333], [-8.650071895522649e-159, -2.2250738585e-313]]]),
                B=np.array([[[-22.112000787492107, -6.057416881482854e-139], [1e-05, 11.262126642908676]]]),
                attention="sinkhorn",
            ),
            Controls(
                A=np.array([[-0.0872103912410851, -0.676508711308992], [-1.1, -0.6720639215244295]]),
                b=np.array([-0.609301088015554, 0.23901904694145282]),
                V=np.array([[[1.0, 0.3781002007575478], [-1.357543383945246, 0.07372608753670695]]]),
                Q=np.array([[[-0.9259918971891752, 0.45], [0.8835648354403536, 0.3686467114146261]]]),
                K=np.array([[[4.4345128605134884e-98, 5e-05], [-0.527653224919168, 0.8939300697244468]]]),
                attention="l2",
            ),
        ]
        return dict(
            mu0=mu0,
            Sigma0=Sigma0,
            controls=PiecewiseControls([2.783815264279112, 6.876227188940373], pieces),
            t_span=(-1.7633090964556235, 7.330939625013848),
            t_eval=np.array([-1.763309081123313, -1.457857442719183, 7.330939625013848]),
            rtol=1e-13,
            atol=0.00046262939940835,
            max_nfev=400,
        )
    # rank-1 Sigma0, two Sinkhorn pieces
    zero = Controls(V=np.zeros((2, 2)), B=np.zeros((2, 2)))
    if kind == "end":  # the last step reached t1 past the budget: status BUDGET at t1
        second = Controls(
            A=np.array([[0.75, 0.0], [1.6, 0.0]]),
            V=np.array([[0.0, -1.7036903742014609], [0.0, 0.0]]),
            B=np.array([[0.0, 0.0], [-1.5285920663851993, 0.0]]),
            attention="sinkhorn",
        )
        third = Controls(
            V=np.array([[0.0, 0.0], [0.9862021044926359, 0.0]]),
            B=np.array([[0.0, 0.3947239773048783], [0.0, 0.3947239773048783]]),
            attention="sinkhorn",
        )
        rtol = 1e-13
    else:  # "singular": a trial state far out made I + R in the Sinkhorn gain exactly singular (LinAlgError)
        second = Controls(
            A=np.array([[0.75, 0.0], [1.6, 0.0]]),
            V=np.array([[-1.7036903742014609, 0.0], [0.0, 0.0]]),
            B=np.array([[0.0, 0.0], [-1.0, 0.0]]),
            attention="sinkhorn",
        )
        third = Controls(
            V=np.array([[0.0, 0.0], [1.0, 0.0]]), B=np.array([[1.0, -1.0], [0.0, 0.0]]), attention="sinkhorn"
        )
        rtol = 0.000582678105806683
    return dict(
        mu0=np.zeros(2),
        Sigma0=np.array([[0.10656999043488531, 0.0], [0.0, 0.0]]),
        controls=PiecewiseControls([4.547124360734736, 8.639536285395996], [zero, second, third]),
        t_span=(0.0, 9.094248721469471),
        t_eval=None,
        rtol=rtol,
        atol=0.0005869703805178812,
        max_nfev=400,
    )


def _integrate_fuzz_case(kind):
    case = _fuzz_case(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return case, integrate_moments(
            case["mu0"],
            case["Sigma0"],
            case["controls"],
            case["t_span"],
            t_eval=case["t_eval"],
            rtol=case["rtol"],
            atol=case["atol"],
            max_nfev=case["max_nfev"],
        )


def test_the_budget_holds_to_one_trial_step_when_a_step_past_it_is_rejected():
    """No trial step starts once max_nfev evaluations are spent: the one running then may finish (12
    evaluations of DOP853) and the event's dense output costs 3; a rejected trial is not retried, and the
    integration ends at the last accepted step."""
    from gtcore.status import Status

    case, tr = _integrate_fuzz_case("budget")
    assert tr.status is Status.BUDGET and tr.nfev <= case["max_nfev"] + 12 + 3
    assert tr.t[-1] < case["t_span"][1] and np.all(np.diff(tr.t) > 0)
    np.testing.assert_array_equal(tr.t[:-1], case["t_eval"][: len(tr.t) - 1])


def test_a_last_step_that_reaches_t1_past_the_budget_completes():
    from gtcore.status import Status

    case, tr = _integrate_fuzz_case("end")
    assert tr.t[-1] == case["t_span"][1] and tr.status is Status.COMPLETED


def test_a_rank_one_sigma0_under_sinkhorn_attention_integrates():
    """Rank-deficient Sigma0 and B: a trial state of the solver far out (|Sigma| ~ 1e59) made I + R of the Sinkhorn
    gain exactly singular in floating point; the gain now takes the closed-form inverse there."""
    from gtcore._validation import check_covariance

    _, tr = _integrate_fuzz_case("singular")
    assert np.isfinite(tr.mu).all() and np.isfinite(tr.Sigma).all()
    for S in tr.Sigma:
        check_covariance(S, "Sigma")


def test_initial_moments_near_the_largest_float_are_refused_without_an_overflow_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"mu0 has norm 1e\+300 >= blowup_norm"):
            integrate_moments(
                np.array([1e300, -735.0]), np.eye(2), Controls(A=-np.eye(2)), (0.0, 1.0), blowup_norm=1e12
            )
