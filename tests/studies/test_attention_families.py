"""L2, Sinkhorn and multi-head attention against independent answers.

* Controls: ``Q, K`` per head, named errors.
* The covariance right-hand side at zero mean against an independent implementation of the peer's
  published formulas (Castin, Rouzé, Ablin, Peyré, Kim 2025, "A unified perspective on the dynamics
  of deep Transformers"; their conventions: ``A = K^T Q / sqrt(d)`` for softmax and L2, heads as
  row blocks of width ``k = d / H`` scaled by ``1/sqrt(k)``, ``A = K^T Q`` for Sinkhorn), to round-off.
* The Sinkhorn tilt against a quadrature solution of the continuous Sinkhorn problem, and against
  finite-N Sinkhorn attention with an N^(-1/2) error; the L2 tilt with a general (rectangular) K
  against 2e6 samples.
* Particles against the moment ODE with an N^(-1/2) slope (several heads, rectangular maps).
* The Sinkhorn solver: marginals, status and warning, fused vs blocked, extreme logits.
"""

import warnings

import numpy as np
import pytest
import scipy.linalg
import torch
from numpy.polynomial.hermite_e import hermegauss

from conftest import particle_moment_errors, random_spd
from gtbook.studies.families.harness import head_cancellation
from gtcore import Controls, gaussian_tokens, integrate_moments, moment_rhs
from gtcore.attention import ATTENTION_TYPES
from gtcore.attention.sinkhorn import SinkhornConvergenceWarning, gaussian_column_potential, gaussian_conditional_gain
from gtcore.attention.sinkhorn_scaling import sinkhorn_average, sinkhorn_potentials
from gtcore.stats.inference import loglog_slope


# ----------------------------------------------------------------------------- the peer's formulas
def peer_softmax(S, Q, K, V):
    d = S.shape[0]
    A = K.T @ Q / np.sqrt(d)
    r = V @ S @ A @ S
    return r + r.T


def peer_l2(S, Q, K, V):
    d = S.shape[0]
    A = K.T @ Q / np.sqrt(d)
    r = 2 * V @ S @ np.linalg.inv(np.eye(d) + 2 * K.T @ K @ S) @ A @ S
    return r + r.T


def peer_multihead(S, Q, K, V, H):
    d = S.shape[0]
    k = d // H
    r = np.zeros((d, d))
    for h in range(H):
        rows = slice(k * h, k * (h + 1))
        A_h = K[rows].T @ Q[rows] / np.sqrt(k)
        C_h = np.eye(d)[rows].T @ V[rows]
        r += C_h @ S @ A_h @ S
    return r + r.T


def peer_sinkhorn(S, Q, K, V):
    d = S.shape[0]
    Sh = scipy.linalg.sqrtm(S).real
    A = K.T @ Q
    P = Sh @ A.T
    C_S = 0.5 * (Sh @ scipy.linalg.sqrtm(4 * P @ S @ P.T + np.eye(d)).real @ np.linalg.pinv(Sh) - np.eye(d))
    r = V @ np.linalg.pinv(A.T) @ np.linalg.pinv(S) @ C_S @ S
    return r + r.T


def _qkv(rng, d, scale=0.6):
    return (scale * rng.standard_normal((d, d)) for _ in range(3))


@pytest.mark.parametrize("d", [2, 3, 5])
def test_covariance_rhs_matches_the_peer_formulas_at_zero_mean(d, rng):
    S = random_spd(rng, d, 4.0)
    Q, K, V = _qkv(rng, d)
    mu = np.zeros(d)
    cases = [
        ("dot", dict(V=V, Q=Q / np.sqrt(d), K=K), peer_softmax(S, Q, K, V)),
        ("l2", dict(V=V, Q=Q / np.sqrt(d), K=K), peer_l2(S, Q, K, V)),
        ("sinkhorn", dict(V=V, Q=Q, K=K), peer_sinkhorn(S, Q, K, V)),
    ]
    for name, kw, expected in cases:
        dmu, dS = moment_rhs(mu, S, Controls(attention=name, **kw))
        np.testing.assert_allclose(dS, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max(), err_msg=name)
        np.testing.assert_array_equal(dmu, 0.0)


@pytest.mark.parametrize("H", [2, 3])
def test_multihead_rhs_matches_the_peer_formula(H, rng):
    d = 6
    S = random_spd(rng, d, 4.0)
    Q, K, V = _qkv(rng, d)
    k = d // H
    rows = [slice(k * h, k * (h + 1)) for h in range(H)]
    ctl = Controls(V=[np.eye(d)[r].T @ V[r] for r in rows], Q=[Q[r] / np.sqrt(k) for r in rows], K=[K[r] for r in rows])
    expected = peer_multihead(S, Q, K, V, H)
    np.testing.assert_allclose(
        moment_rhs(np.zeros(d), S, ctl)[1], expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max()
    )


@pytest.mark.parametrize("name", ["dot", "l2", "sinkhorn"])
def test_two_heads_of_opposite_signs_cancel(name, rng):
    d = 3
    Q, K, V = _qkv(rng, d)
    A, b = 0.3 * rng.standard_normal((d, d)), rng.standard_normal(d)
    mu, S = rng.standard_normal(d), random_spd(rng, d, 3.0)
    both = Controls(A=A, b=b, V=[V, -V], Q=[Q, Q], K=[K, K], attention=name)
    got = moment_rhs(mu, S, both)
    ref = moment_rhs(mu, S, Controls(A=A, b=b))
    np.testing.assert_allclose(got[0], ref[0], atol=1e-13)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-13)


@pytest.mark.parametrize("name", ["l2", "sinkhorn"])
def test_head_cancellation_measures_a_departure_only_when_there_is_one(name, rng):
    """The chapter's statistic: 0 for opposite heads, clearly positive for two equal heads."""
    d = 2
    Q, K, V = _qkv(rng, d)
    mu, S = rng.standard_normal(d), random_spd(rng, d, 3.0)
    x0 = gaussian_tokens(200, mu, S, seed=1)
    bare = Controls(A=0.2 * np.eye(d))
    opposite = Controls(A=0.2 * np.eye(d), V=[V, -V], Q=[Q, Q], K=[K, K], attention=name)
    equal = Controls(A=0.2 * np.eye(d), V=[V, V], Q=[Q, Q], K=[K, K], attention=name)
    assert max(head_cancellation(opposite, bare, mu, S, x0, 0.5, 5)) < 1e-12
    assert min(head_cancellation(equal, bare, mu, S, x0, 0.5, 5)) > 1e-3


# ----------------------------------------------------------------------------- Controls
def test_controls_build_B_from_Q_and_K(rng):
    d, k = 4, 2
    Q, K = rng.standard_normal((3, k, d)), rng.standard_normal((3, k, d))
    V = rng.standard_normal((3, d, d))
    for name, factor in (("dot", 1.0), ("sinkhorn", 1.0), ("l2", 2.0)):
        c = Controls(V=V, Q=Q, K=K, attention=name)
        np.testing.assert_allclose(c.B, factor * np.swapaxes(K, 1, 2) @ Q, rtol=1e-14)
        assert c.Q.shape == (3, k, d) and c.heads == 3 and c.d == d
    c = Controls(Q=Q[0], K=K[0])  # d inferred from Q, V zero
    assert c.d == d and c.heads == 1 and not np.any(c.V)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(attention="cosine"), "attention"),
        (dict(attention=["dot", "l2"]), "attention"),
        (dict(attention="l2"), "l2.*Q and K"),
        (dict(Q=np.eye(2)), "K is missing"),
        (dict(K=np.eye(2)), "Q is missing"),
        (dict(Q=np.eye(2), K=np.ones((3, 2))), "same shape"),
        (dict(Q=np.eye(2), K=np.eye(2), B=np.eye(2)), "B or Q and K"),
        (dict(Q=np.ones((2, 3)), K=np.ones((2, 3))), "Q must have shape"),
        (dict(Q=np.ones((2, 2, 2)), K=np.ones((2, 2, 2)), V=np.ones((3, 2, 2))), "heads"),
        (dict(Q=[[np.nan, 0], [0, 1]], K=np.eye(2)), "Q has non-finite"),
    ],
)
def test_controls_errors_name_the_argument(kw, match):
    base = dict(A=np.eye(2))
    base.update(kw)
    with pytest.raises(ValueError, match=match):
        Controls(**base)


# ----------------------------------------------------------------------------- tilts
def test_l2_tilt_with_rectangular_keys_matches_many_samples(rng):
    """k = 2 < d = 3: the tilt against a self-normalised average over 2e6 Gaussian keys."""
    d, k = 3, 2
    mu, Sigma = rng.standard_normal(d), random_spd(rng, d, 0.6)
    Q, K = 0.5 * rng.standard_normal((k, d)), 0.5 * rng.standard_normal((k, d))
    att = ATTENTION_TYPES["l2"]
    params_h = att.head(att.params(Controls(Q=Q, K=K, attention="l2")), 0)
    y = torch.as_tensor(gaussian_tokens(2_000_000, mu, Sigma, seed=5))
    xq = torch.as_tensor(0.7 * rng.standard_normal((4, d)))
    mc = att.average(xq, y, torch.as_tensor(params_h)).numpy()
    M, c = att.tilt(mu, Sigma, params_h)
    np.testing.assert_allclose(mc, xq.numpy() @ M.T + c, atol=5e-3)


def test_l2_gain_is_capped_by_invertible_keys(rng):
    """M(t Sigma) -> K^{-1} Q as t -> infinity (the cap that rules out finite-time blow-up)."""
    d = 3
    Q, K = rng.standard_normal((d, d)), rng.standard_normal((d, d)) + 2 * np.eye(d)
    att, S = ATTENTION_TYPES["l2"], random_spd(rng, d, 3.0)
    limit = np.linalg.solve(K, Q)
    errs = [np.linalg.norm(att.tilt(np.zeros(d), t * S, np.stack([Q, K]))[0] - limit) for t in (1e2, 1e4, 1e6)]
    assert errs[2] < 1e-5 * np.linalg.norm(limit)
    assert errs[0] / errs[1] == pytest.approx(100, rel=0.05)  # the correction is O(1/t)


def _gauss_hermite_2d(mu, Sigma, n):
    z, w = hermegauss(n)
    Z = np.stack(np.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
    W = np.outer(w / w.sum(), w / w.sum()).ravel()
    keep = W > 1e-280
    return mu + Z[keep] @ np.linalg.cholesky(Sigma).T, np.log(W[keep])


@pytest.mark.parametrize("symmetric", [True, False])
def test_sinkhorn_tilt_matches_the_continuous_problem_by_quadrature(symmetric, rng):
    """The closed forms (gain and column potential) against Sinkhorn scaling on a 40 x 40
    Gauss-Hermite rule (a discretisation of the Gaussian, not a sample), started from g = 0 so that
    no closed form enters the solver: agreement to 1e-9. The discrete potential is
    log a_j + g(y_j) + const; nodes of weight below 1e-8 (the rule's tails, integrated less
    accurately) are left out of that comparison."""
    d = 2
    mu, Sigma = rng.standard_normal(d), random_spd(rng, d, 3.0)
    B = 0.5 * rng.standard_normal((d, d))
    if symmetric:
        B = B + B.T
    y, logw = _gauss_hermite_2d(mu, Sigma, 40)
    xq = mu + rng.standard_normal((5, d))
    avg, res = sinkhorn_average(
        torch.as_tensor(y),
        torch.as_tensor(B),
        torch.as_tensor(logw),
        queries=torch.as_tensor(xq),
        tol=1e-13,
        init="zero",
    )
    assert res.converged
    M = gaussian_conditional_gain(Sigma, B)
    np.testing.assert_allclose(avg.numpy(), mu + (xq - mu) @ M.T, atol=1e-9)
    heavy = logw > np.log(1e-8)
    gap = (res.g.numpy() - logw - gaussian_column_potential(y, mu, Sigma, B))[heavy]
    assert np.ptp(gap) < 1e-9


def test_sinkhorn_gain_limits(rng):
    """Small B: the dot product's tilt Sigma B; B = I/s^2: Janati et al.'s cross-covariance."""
    d = 3
    S, B = random_spd(rng, d, 3.0), rng.standard_normal((d, d))
    eps = 1e-5
    np.testing.assert_allclose(gaussian_conditional_gain(S, eps * B) / eps, S @ B, rtol=1e-8, atol=1e-8)
    s2 = 0.7
    C_janati = 0.5 * (scipy.linalg.sqrtm(4 * S @ S + s2**2 * np.eye(d)).real - s2 * np.eye(d))
    np.testing.assert_allclose(gaussian_conditional_gain(S, np.eye(d) / s2) @ S, C_janati, rtol=1e-10, atol=1e-12)


def test_sinkhorn_attention_preserves_the_mean(rng):
    """Doubly stochastic: at any Sigma the mean drift is (A + sum_h V_h) mu + b."""
    d = 3
    ctl = Controls(
        A=rng.standard_normal((d, d)),
        b=rng.standard_normal(d),
        V=rng.standard_normal((2, d, d)),
        B=rng.standard_normal((2, d, d)),
        attention="sinkhorn",
    )
    mu, S = rng.standard_normal(d), random_spd(rng, d, 5.0)
    np.testing.assert_allclose(moment_rhs(mu, S, ctl)[0], (ctl.A + ctl.V.sum(0)) @ mu + ctl.b, rtol=1e-12)


def test_finite_n_sinkhorn_approaches_the_tilt_like_inverse_sqrt_n(rng):
    """Finite-N Sinkhorn attention at out-of-sample queries against the closed form, N = 200..3200."""
    d = 2
    mu, Sigma = np.array([0.3, -0.5]), np.array([[1.0, 0.4], [0.4, 0.7]])
    B = torch.as_tensor([[0.8, 0.5], [-0.3, 0.6]], dtype=torch.float64)
    xq = mu + rng.standard_normal((8, d))
    M = gaussian_conditional_gain(Sigma, B.numpy())
    exact = mu + (xq - mu) @ M.T
    Ns, errs = [200, 800, 3200], []
    for N in Ns:
        e = [
            np.abs(
                sinkhorn_average(torch.as_tensor(gaussian_tokens(N, mu, Sigma, seed)), B, queries=torch.as_tensor(xq))[
                    0
                ].numpy()
                - exact
            ).mean()
            for seed in range(6)
        ]
        errs.append(np.mean(e))
    assert -0.7 <= loglog_slope(Ns, errs) <= -0.3, errs


# ----------------------------------------------------------------------------- particles
@pytest.mark.parametrize("name", ["l2", "sinkhorn"])
def test_multihead_particles_converge_to_the_moment_ode(name, rng):
    """Two heads with rectangular maps (k = 1 < d = 2): moment error against the ODE ~ N^(-1/2)."""
    mu0, S0 = np.array([0.5, -0.2]), np.array([[1.0, 0.3], [0.3, 0.6]])
    ctl = Controls(
        A=[[0.1, 0.4], [-0.4, 0.0]],
        b=[0.2, 0.0],
        V=np.array([0.5 * np.eye(2), [[0.0, 0.3], [-0.2, 0.4]]]),
        Q=[[[0.4, -0.3]], [[0.2, 0.5]]],
        K=[[[0.5, 0.2]], [[-0.4, 0.3]]],
        attention=name,
    )
    Ns = [200, 800, 3200] if name == "l2" else [100, 400, 1600]
    errs = particle_moment_errors(ctl, mu0, S0, Ns)
    assert -0.7 <= loglog_slope(Ns, errs) <= -0.3, errs


# ----------------------------------------------------------------------------- the Sinkhorn solver
def test_sinkhorn_scaling_is_doubly_stochastic_and_reports_its_status(rng):
    N, d = 200, 3
    x = torch.as_tensor(rng.standard_normal((N, d)))
    B = torch.as_tensor(rng.standard_normal((d, d)))
    res = sinkhorn_potentials(x, B, tol=1e-12)
    P = torch.exp(res.f[:, None] + res.g[None, :] + x @ B.T @ x.T)
    assert res.converged and res.status == "converged"
    np.testing.assert_allclose(N * P.sum(1).numpy(), 1.0, atol=1e-11)
    np.testing.assert_allclose(N * P.sum(0).numpy(), 1.0, atol=1e-11)
    with pytest.warns(SinkhornConvergenceWarning, match="max_iter=2"):
        _, short = sinkhorn_average(x, B, max_iter=2)
    assert not short.converged and short.status == "max_iter" and short.marginal_error > 1e-9
    with pytest.raises(ValueError, match="tol"):
        sinkhorn_potentials(x, B, tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        sinkhorn_potentials(x, B, max_iter=0)
    with pytest.raises(ValueError, match="method"):
        sinkhorn_potentials(x, B, method="dense")
    with pytest.raises(ValueError, match="init"):
        sinkhorn_potentials(x, B, init="ones")
    with pytest.raises(ValueError, match="anderson"):
        sinkhorn_potentials(x, B, anderson=-1)


@pytest.mark.parametrize("case", ["gaussian", "weighted", "strong", "shifted"])
def test_accelerated_sinkhorn_gives_the_plain_answer(case, rng):
    """The defaults (Gaussian warm start, Anderson depth 4) against plain Sinkhorn from g = 0, both
    to tol = 1e-10 on the marginals. Two pairs within tol of the marginals have potentials that
    differ by tol over the spectral gap of the scaling (here at least 1/5 at the strongest
    logits): potentials within 100 tol up to a constant, averages within 100 tol max|x|."""
    N, d, tol = 600, 4, 1e-10
    x = rng.standard_normal((N, d)) + (2.0 if case == "shifted" else 0.0)
    B = (4.0 if case == "strong" else 1.0) * rng.standard_normal((d, d)) / d
    lw = torch.as_tensor(rng.standard_normal(N)) if case == "weighted" else None
    x, B = torch.as_tensor(x), torch.as_tensor(B)
    a0, plain = sinkhorn_average(x, B, lw, tol=tol, init="zero", anderson=0)
    a1, fast = sinkhorn_average(x, B, lw, tol=tol)
    assert plain.converged and fast.converged and fast.iterations < plain.iterations
    gap = (fast.g - plain.g).numpy()
    assert np.ptp(gap) < 100 * tol
    np.testing.assert_allclose(a1.numpy(), a0.numpy(), rtol=0, atol=100 * tol * float(x.abs().max()))


def test_accelerated_sinkhorn_certifies_both_marginals_where_plain_sinkhorn_stalls(rng):
    """Two well-separated clusters (a mode plain Sinkhorn contracts by a factor near 1): the
    defaults converge, and the returned pair's marginals, summed from the dense kernel, are within
    tol on rows and columns (the certificate holds for Anderson-mixed pairs, where neither marginal
    is exact by construction); plain Sinkhorn is still far from tol after as many row updates."""
    N, d, tol = 400, 3, 1e-10
    side = np.where(np.arange(N) < N // 2, -2.0, 2.0)[:, None]
    x = torch.as_tensor(0.3 * rng.standard_normal((N, d)) + side)
    B = torch.as_tensor(rng.standard_normal((d, d)) / d)
    res = sinkhorn_potentials(x, B, tol=tol)
    P = torch.exp(res.f[:, None] + res.g[None, :] + x @ B.T @ x.T)
    assert res.converged and res.marginal_error <= tol
    assert np.abs(N * P.sum(1).numpy() - 1).max() <= 1.01 * tol
    assert np.abs(N * P.sum(0).numpy() - 1).max() <= 1.01 * tol
    plain = sinkhorn_potentials(x, B, tol=tol, init="zero", anderson=0, max_iter=res.iterations)
    assert not plain.converged and plain.marginal_error > 1e3 * tol


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_fused_and_blocked_sinkhorn_agree(scale, rng):
    """Fused kernel (dummy-key log-sum-exp) vs explicit blocks of 64 rows, including logits of
    several hundred (scale 30), where the fused method falls back row-wise."""
    N, d = 500, 4
    x = torch.as_tensor(rng.standard_normal((N, d)))
    B = torch.as_tensor(scale * rng.standard_normal((d, d)) / d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SinkhornConvergenceWarning)
        a1, r1 = sinkhorn_average(x, B, max_iter=50, dense=False)
        a2, r2 = sinkhorn_average(x, B, max_iter=50, method="blocked", block=64, dense=False)
    assert r1.iterations == r2.iterations
    np.testing.assert_allclose(a1.numpy(), a2.numpy(), rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------- asymptotic rates
def test_l2_predicted_rate_holds_only_when_sigma_grows_in_every_direction():
    """The rate 2 max Re spec(A + V K^-1 Q) assumes Sigma^-1 -> 0. With every eigenvalue of that matrix
    in the right half-plane it matches the integrated ODE; with one in the left half-plane Sigma stays
    bounded along it, the gain does not reach K^-1 Q, the integrated rate differs, and the
    prediction refuses."""
    from gtbook.studies.families.harness import growth_rate, predicted_rate

    I2 = np.eye(2)
    # real eigenvalues 0.87, 0.44 (complex ones make log lambda_max oscillate about the rate); the
    # neglected terms are O(1/lambda_min(Sigma)), lambda_min(Sigma(10)) ~ 2e3
    t = np.linspace(0.0, 10.0, 401)
    good = Controls(V=[[1.0, 0.4], [0.0, 0.7]], Q=[[0.9, 0.4], [0.1, 0.7]], K=[[1.2, 0.3], [0.0, 0.9]], attention="l2")
    assert (
        abs(growth_rate(integrate_moments(np.zeros(2), I2, good, (0.0, 10.0), t_eval=t), 1.0) - predicted_rate(good))
        < 1e-2
    )
    bad = Controls(V=I2, Q=[[1.0, 3.0], [0.0, -1.0]], K=I2, attention="l2")
    traj = integrate_moments(np.zeros(2), I2, bad, (0.0, 6.0), t_eval=np.linspace(0.0, 6.0, 241))
    assert abs(growth_rate(traj, 1.0) - 2.0) > 0.1  # 2 max Re spec(Q) = 2 would be wrong
    with pytest.raises(ValueError, match="positive real part"):
        predicted_rate(bad)


def test_sinkhorn_float32_converges_with_its_default_tolerance(rng):
    """float32 cannot reach the float64 tolerance (round-off floor ~10 eps): the default tolerance
    follows the dtype, so a float32 scaling converges without a warning, and its average agrees
    with float64 to float32 precision; an explicit float64 tolerance still warns."""
    x64 = torch.as_tensor(rng.standard_normal((1000, 3)))
    B64 = torch.as_tensor(rng.standard_normal((3, 3)) / 3)
    x32, B32 = x64.float(), B64.float()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SinkhornConvergenceWarning)
        a32, r32 = sinkhorn_average(x32, B32)
        a64, _ = sinkhorn_average(x64, B64)
    assert r32.converged and r32.iterations < 100
    np.testing.assert_allclose(a32.double().numpy(), a64.numpy(), atol=1e-4)
    with pytest.warns(SinkhornConvergenceWarning):
        sinkhorn_average(x32, B32, tol=1e-9, max_iter=50)


def test_formulas_only_the_dot_product_has_are_refused_by_name():
    """Mixture averages and the sampling strength exist for the dot product only: a ValueError naming the type."""
    from gtcore.attention import AttentionType, max_sampling_strength

    with pytest.raises(TypeError):
        AttentionType()  # the interface: tilt, logits and params are abstract
    ctl = Controls(V=np.eye(2), Q=np.eye(2), K=np.eye(2), attention="l2")
    with pytest.raises(ValueError, match="'l2'"):
        max_sampling_strength(ctl, [0.0], np.eye(2)[None])
    with pytest.raises(ValueError, match="'sinkhorn'"):
        ATTENTION_TYPES["sinkhorn"].mixture_average(
            np.zeros((1, 2)), np.ones(1), np.zeros((1, 2)), np.eye(2)[None], np.eye(2)
        )


def test_near_misses_scale_the_drift_and_transpose_the_tilt():
    from gtbook.studies.families.harness import near_misses
    from gtcore.moments import moment_rhs

    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    S = np.array([[1.0, 0.3], [0.3, 0.5]])
    for name in ("dot", "l2", "sinkhorn"):
        ctl = Controls(A=0.3 * np.eye(2), V=[[0.5, 0.2], [-0.1, 0.4]], Q=Q, K=K, attention=name)
        nm = near_misses(ctl, 1.1)
        base = moment_rhs(np.zeros(2), S, Controls(A=ctl.A))[1]
        att = moment_rhs(np.zeros(2), S, ctl)[1] - base
        np.testing.assert_allclose(
            moment_rhs(np.zeros(2), S, nm["attention term x 1.1"])[1] - base, 1.1 * att, rtol=1e-12, atol=1e-14
        )
        sw = nm["queries and keys swapped"]
        np.testing.assert_array_equal(sw.Q[0], K)
        np.testing.assert_array_equal(sw.K[0], Q)
        assert np.abs(moment_rhs(np.zeros(2), S, sw)[1] - moment_rhs(np.zeros(2), S, ctl)[1]).max() > 1e-3
    dot = Controls(V=np.eye(2), B=Q)
    np.testing.assert_array_equal(near_misses(dot)["queries and keys swapped"].B[0], Q.T)


def test_deviation_decay_vanishes_for_the_right_ode_and_levels_off_for_a_wrong_one():
    from gtbook.studies.families.harness import deviation_decay, near_misses

    ctl = Controls(
        A=[[0.0, -0.3], [0.3, 0.0]],
        V=[[-0.8, -0.3], [0.3, -0.8]],
        Q=[[0.45, 0.2], [-0.1, 0.35]],
        K=[[2.0, 0.4], [0.2, 1.6]],
        attention="l2",
    )
    wrong = near_misses(ctl, 1.5)["attention term x 1.5"]
    dec = deviation_decay(
        ctl,
        np.array([0.5, -0.3]),
        np.array([[1.0, 0.3], [0.3, 0.5]]),
        1.0,
        [100, 1600],
        4,
        8,
        predictions={"right": ctl, "wrong": wrong},
        n_boot=200,
    )
    assert dec["right"].slope < -0.3 and dec["wrong"].slope > -0.1 and dec["right"].se > 0


def test_dot_sampling_strength_is_the_weights_variance_exponent_for_non_symmetric_B():
    r"""kappa = sup_x x^T B^T Sigma B x / x^T Sigma^-1 x (the exponent deciding whether E_x e^{x^T B^T Sigma B x}
    over Gaussian queries is finite), a generalised symmetric eigenproblem solved independently here."""
    from gtcore.attention import ATTENTION_TYPES

    rng = np.random.default_rng(7)
    for _ in range(5):
        W = rng.standard_normal((3, 3))
        S = W @ W.T / 3 + 0.2 * np.eye(3)
        B = rng.standard_normal((3, 3))
        want = scipy.linalg.eigh(B.T @ S @ B, np.linalg.inv(S), eigvals_only=True).max()
        assert ATTENTION_TYPES["dot"].sampling_strength(S, B) == pytest.approx(want, rel=1e-10)
