"""The finite-N Sinkhorn solver: its engines, its warm start, its inputs and tokens without mass.

* The dense engines (alternating, and the symmetric iteration for symmetric positive semi-definite B)
  against the log-domain engine and against the marginals summed from the dense plan.
* A warm start gives the certified answer of the Gaussian start; simulate's warm-started kernel against
  a hand-written RK4 loop that starts every scaling from the Gaussian potential.
* Bad inputs refused up front, naming the argument; a token without mass (log-weight -inf) is no key, the
  scaling converges on the others.
"""

import math
import warnings

import numpy as np
import pytest
import torch

from gtcore import Controls, gaussian_tokens
from gtcore.attention import ATTENTION_TYPES
from gtcore.attention.sinkhorn import SinkhornConvergenceWarning
from gtcore.attention.sinkhorn_scaling import sinkhorn_average, sinkhorn_potentials, warm_starts
from gtcore.particles import simulate


def plan_marginal_error(x, B, res, logw=None):
    """max relative violation of both marginals, summed from the dense plan (independent of the solver)."""
    n = x.shape[0]
    loga = torch.full((n,), -math.log(n), dtype=x.dtype) if logw is None else logw - torch.logsumexp(logw, 0)
    keep = torch.isfinite(loga)
    logP = res.f[keep][:, None] + res.g[keep][None, :] + (x[keep] @ B.T) @ x[keep].T
    rows = torch.logsumexp(logP, 1) - loga[keep]
    cols = torch.logsumexp(logP, 0) - loga[keep]
    return float(torch.cat([rows, cols]).expm1().abs().max())


def cloud(rng, n, d, scale=1.0):
    return torch.as_tensor(scale * rng.standard_normal((n, d)))


# ----------------------------------------------------------------------------- the dense engines
@pytest.mark.parametrize("kind", ["symmetric PSD", "symmetric indefinite", "general"])
def test_dense_engines_give_the_log_domain_answer(kind, rng):
    """Strong kernels (tokens of scale 2.5, B of norm ~1): the dense iteration's pair certifies both marginals
    of the dense plan to tol, its potentials match the log-domain engine's up to a constant (within
    100 tol) and so do the averages."""
    N, d, tol = 500, 3, 1e-10
    x = cloud(rng, N, d, 2.5)
    G = torch.as_tensor(rng.standard_normal((d, d))) / d
    B = {"symmetric PSD": G @ G.T + 0.2 * torch.eye(d, dtype=x.dtype), "symmetric indefinite": G + G.T, "general": G}[
        kind
    ]
    a_log, r_log = sinkhorn_average(x, B, tol=tol, dense=False)
    a_dense, r_dense = sinkhorn_average(x, B, tol=tol, dense=True)
    assert r_log.converged and r_dense.converged
    assert plan_marginal_error(x, B, r_dense) <= 1.01 * tol
    gap = (r_dense.g - r_log.g).numpy()
    assert np.ptp(gap) < 100 * tol
    np.testing.assert_allclose(a_dense.numpy(), a_log.numpy(), rtol=0, atol=100 * tol * float(x.abs().max()))


def test_symmetric_iteration_needs_fewer_updates_where_alternating_sinkhorn_slows_down(rng):
    """B symmetric positive definite and a wide cloud: the alternating iteration contracts like sigma_2(P)^2,
    close to 1; the damped symmetric one by 1/2 at worst. Both certify; the symmetric one (the default
    for this B) in fewer row updates than the alternating one on the same problem."""
    N = 400
    x = cloud(rng, N, 2, 2.5)
    B = torch.tensor([[1.0, 0.3], [0.3, 0.6]], dtype=x.dtype)
    sym = sinkhorn_potentials(x, B)
    alt = sinkhorn_potentials(x, B + torch.tensor([[0.0, 1e-14], [0.0, 0.0]], dtype=x.dtype))  # not symmetric
    assert sym.converged and alt.converged
    assert torch.equal(sym.f, sym.g)  # the symmetric pair
    assert plan_marginal_error(x, B, sym) <= 1.01e-9
    assert sym.iterations < alt.iterations


def test_dense_engine_absorbs_potentials_far_from_its_start(rng):
    """From g = 0 with weights spanning e^-60: the potentials move far from the start (beyond the range the
    absorbed products keep exact), the engine absorbs them and still certifies the dense plan's marginals."""
    N, d, tol = 300, 2, 1e-10
    x = cloud(rng, N, d, 2.0)
    B = torch.as_tensor(rng.standard_normal((d, d)))
    logw = torch.as_tensor(-60.0 * rng.random(N))
    res = sinkhorn_potentials(x, B, logw, tol=tol, init="zero", dense=True)
    assert res.converged and plan_marginal_error(x, B, res, logw) <= 1.01 * tol
    assert float(res.g.max() - res.g.min()) > 70.0  # farther than one absorption's range


# ----------------------------------------------------------------------------- warm starts
def test_a_warm_start_gives_the_certified_answer_in_fewer_updates(rng):
    N, tol = 600, 1e-10
    x = cloud(rng, N, 2, 1.5)
    B = torch.tensor([[0.9, 0.4], [-0.2, 0.7]], dtype=x.dtype)
    _, r0 = sinkhorn_average(x, B, tol=tol)
    x1 = x + 0.01 * torch.as_tensor(rng.standard_normal((N, 2)))
    a_cold, cold = sinkhorn_average(x1, B, tol=tol)
    a_warm, warm = sinkhorn_average(x1, B, tol=tol, init=r0.g)
    assert cold.converged and warm.converged and warm.iterations < cold.iterations
    assert plan_marginal_error(x1, B, warm) <= 1.01 * tol
    np.testing.assert_allclose(a_warm.numpy(), a_cold.numpy(), rtol=0, atol=100 * tol * float(x1.abs().max()))


def _rk4_with_gaussian_starts(x0, B, t_end, steps):
    """RK4 of dx/dt = V a(x) with V = I and each Sinkhorn scaling started from the Gaussian potential."""
    x = torch.as_tensor(x0)
    h = t_end / steps

    def f(y):
        return sinkhorn_average(y, B, dense=False)[0]

    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + h / 2 * k1)
        k3 = f(x + h / 2 * k2)
        k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x.numpy()


@pytest.mark.parametrize("Q", [[[1.0, 0.3], [0.3, 0.6]], [[0.45, 0.2], [-0.1, 0.35]]])
def test_simulate_with_warm_started_sinkhorn_matches_a_loop_of_cold_scalings(Q):
    """simulate starts every scaling where the last one ended; a hand-written RK4 loop starts each from the
    Gaussian potential, in the log domain. Each scaling is certified to 1e-9, so the tokens agree to a few
    1e-9 after 6 steps (for the symmetric B of chapter 7's section (b) and a general one)."""
    x0 = gaussian_tokens(300, np.zeros(2), np.eye(2), seed=3)
    ctl = Controls(V=np.eye(2), Q=Q, K=np.eye(2), attention="sinkhorn")
    got = simulate(x0, ctl, (0.0, 0.5), 6, device="cpu").final_tokens
    ref = _rk4_with_gaussian_starts(x0, torch.as_tensor(np.array(Q)), 0.5, 6)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-7)


def test_warm_starts_carry_the_remainder_with_the_tokens(rng):
    """Inside warm_starts, the attention type's own kernel on tokens moved by 1e-3 starts from the carried
    remainder: fewer updates than a cold scaling, the same answer; outside, the Gaussian start again."""
    x = cloud(rng, 400, 2, 1.5)
    B = torch.tensor([[[0.9, 0.4], [-0.2, 0.7]]], dtype=x.dtype)
    x1 = x + 1e-3 * torch.as_tensor(rng.standard_normal(x.shape))
    kernel = ATTENTION_TYPES["sinkhorn"].kernel
    cold_avg, cold = sinkhorn_average(x1, B[0])
    with warm_starts() as ws:
        kernel(x, B)
        warm = kernel(x1, B)
    assert ws.iterations[1] < cold.iterations
    np.testing.assert_allclose(warm[0].numpy(), cold_avg.numpy(), rtol=0, atol=1e-8)
    with warm_starts() as fresh:
        kernel(x1, B)
    assert fresh.iterations == [cold.iterations]


def test_warm_starts_keep_one_remainder_per_problem(rng):
    """Two heads of different B in one kernel call: each starts from its own last scaling; a B never seen
    starts from the Gaussian potential (the answer of a cold scaling, the same number of updates)."""
    x = cloud(rng, 200, 2)
    B = torch.tensor([[[0.8, 0.1], [0.1, 0.5]], [[-0.8, 0.3], [0.0, 0.4]]], dtype=x.dtype)
    kernel = ATTENTION_TYPES["sinkhorn"].kernel
    x1 = x + 1e-3 * torch.as_tensor(rng.standard_normal(x.shape))
    with warm_starts() as ws:
        kernel(x, B)
        out = kernel(x1, B)
        other = kernel(x1, -B[:1])
    for h in range(2):
        np.testing.assert_allclose(out[h].numpy(), sinkhorn_average(x1, B[h])[0].numpy(), atol=1e-8)
    _, cold = sinkhorn_average(x1, -B[0])
    assert ws.iterations[-1] == cold.iterations
    np.testing.assert_allclose(other[0].numpy(), sinkhorn_average(x1, -B[0])[0].numpy(), atol=1e-12)


# ----------------------------------------------------------------------------- inputs
X = torch.zeros(4, 2, dtype=torch.float64).normal_(generator=torch.Generator().manual_seed(0))
B2 = torch.eye(2, dtype=torch.float64)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(x=X.long(), B=B2), "x must be a floating-point tensor"),
        (dict(x=X[:0], B=B2), "x must hold at least one token"),
        (dict(x=X[0], B=B2), r"x must have shape \(N, d\)"),
        (dict(x=X, B=torch.eye(3, dtype=torch.float64)), r"B must have shape \(2, 2\)"),
        (dict(x=X, B=B2, log_weights=torch.zeros(3, dtype=torch.float64)), r"log_weights must have shape \(4,\)"),
        (dict(x=X, B=B2.float()), "B has dtype torch.float32 .* but x has torch.float64"),
        (dict(x=X.float(), B=B2), "B has dtype torch.float64 .* but x has torch.float32"),
        (dict(x=X, B=B2, log_weights=torch.zeros(4)), "log_weights has dtype torch.float32"),
        (dict(x=X, B=B2, log_weights=torch.full((4,), -math.inf, dtype=torch.float64)), "no token any mass"),
        (
            dict(x=X, B=B2, log_weights=torch.tensor([0.0, math.nan, 0.0, 0.0], dtype=torch.float64)),
            "log_weights has NaN",
        ),
        (dict(x=X, B=B2, init=torch.zeros(3, dtype=torch.float64)), r"init must have shape \(4,\)"),
        (dict(x=X, B=B2, dense="yes"), "dense must be True, False or None"),
    ],
)
def test_bad_inputs_are_refused_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sinkhorn_potentials(**kwargs)
    with pytest.raises(ValueError, match=match):
        sinkhorn_average(**kwargs)


@pytest.mark.parametrize("where", ["x", "B"])
def test_non_finite_tokens_are_refused_at_once(where):
    """A NaN token used to run max_iter iterations and warn: now one ValueError, before any iteration."""
    x, B = X.clone(), B2.clone()
    (x if where == "x" else B)[1, 0] = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", SinkhornConvergenceWarning)
        with pytest.raises(ValueError, match=f"{where} has non-finite entries"):
            sinkhorn_average(x, B)


def test_queries_of_another_width_or_dtype_are_refused():
    with pytest.raises(ValueError, match=r"queries must have shape \(n, 2\)"):
        sinkhorn_average(X, B2, queries=torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"queries has dtype torch\.float32"):
        sinkhorn_average(X, B2, queries=torch.zeros(3, 2))


# ----------------------------------------------------------------------------- tokens without mass
@pytest.mark.parametrize("dense", [True, False])
def test_a_token_without_mass_is_no_key_and_the_others_converge(dense, rng):
    """log-weight -inf for one token: the scaling converges (status converged, finite marginal error) in as
    many updates as without that token; that token has f = g = -inf; the average at every token (that one
    included, as a query) is the average of the scaling run on the other tokens alone."""
    N, drop = 300, 17
    x = cloud(rng, N, 2)
    B = torch.tensor([[0.7, 0.2], [-0.3, 0.5]], dtype=x.dtype)
    logw = torch.as_tensor(rng.standard_normal(N))
    logw[drop] = -math.inf
    keep = torch.arange(N) != drop
    with warnings.catch_warnings():
        warnings.simplefilter("error", SinkhornConvergenceWarning)
        avg, res = sinkhorn_average(x, B, logw, dense=dense)
        ref_avg, ref = sinkhorn_average(x[keep], B, logw[keep], queries=x, dense=dense)
    assert res.converged and res.marginal_error <= 1e-9
    assert res.iterations == ref.iterations
    assert res.f[drop] == -math.inf and res.g[drop] == -math.inf
    assert bool(torch.isfinite(res.g[keep]).all())
    np.testing.assert_allclose(avg.numpy(), ref_avg.numpy(), rtol=0, atol=1e-12)
    # and the limit of a vanishing weight: e^-800 relative mass gives the same averages
    tiny = logw.clone()
    tiny[drop] = float(torch.logsumexp(logw[keep], 0)) - 800.0
    np.testing.assert_allclose(sinkhorn_average(x, B, tiny, dense=dense)[0].numpy(), avg.numpy(), atol=1e-9)


def test_the_gain_takes_the_closed_form_inverse_where_i_plus_r_is_singular_in_floating_point():
    """A trial state of the moment ODE (found by the fuzz test): |Sigma| ~ 1e59 with a rank-1 B, where I + R lost
    its identity to round-off and np.linalg.solve raised; and the closed form agrees with the solve elsewhere."""
    from gtcore._linalg import psd_sqrt
    from gtcore.attention.sinkhorn_gaussian import _gain_where_ill_conditioned, gaussian_conditional_gain

    S = np.array([[2.35966543e06, 2.19273887e59], [2.19273887e59, 4.42470107e59]])
    M = gaussian_conditional_gain(S[None], np.array([[[1.0, -1.0], [0.0, 0.0]]]))
    assert np.isfinite(M).all()
    rng = np.random.default_rng(5)
    F = rng.standard_normal((4, 3, 2))
    Sigma = (F @ np.swapaxes(F, -1, -2))[None]  # rank 2 of 3, four lanes
    B = 2.0 * rng.standard_normal((2, 1, 3, 3))  # two heads
    Sh = psd_sqrt(Sigma)
    T = Sh @ B @ Sigma @ np.swapaxes(B, -1, -2) @ Sh
    R = psd_sqrt(np.eye(3) + 2.0 * (T + np.swapaxes(T, -1, -2)))
    solved = gaussian_conditional_gain(Sigma, B)
    np.testing.assert_allclose(
        _gain_where_ill_conditioned(Sh, B, R, np.zeros((2, 4), bool)), solved, rtol=0, atol=1e-12 * np.abs(solved).max()
    )
    well = np.arange(8).reshape(2, 4) % 3 == 0
    np.testing.assert_array_equal(_gain_where_ill_conditioned(Sh, B, R, well)[well], solved[well])


def test_a_float32_gain_far_out_takes_the_closed_form_without_an_overflow_warning():
    """A float32 trial state near 1.6e19 (found by the fuzz test of simulate): G^T G overflows float32, the closed
    form takes over from G, and the gain is the float64 gain to float32 precision, with no RuntimeWarning."""
    import warnings

    from gtcore.attention.sinkhorn_gaussian import gaussian_conditional_gain

    S = np.diag([1.6e19, 1.0, 2.0])
    B = np.array([[1.0, 0.2, 0.0], [0.0, 1.0, 0.3], [0.1, 0.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        M32 = gaussian_conditional_gain(S.astype(np.float32), B.astype(np.float32))
    assert M32.dtype == np.float32
    M64 = gaussian_conditional_gain(S, B)  # float64: the solve, no closed form
    np.testing.assert_allclose(M32, M64, rtol=0, atol=1e-6)


def test_an_anderson_mix_beyond_the_range_limit_is_a_plain_step():
    """Residuals that hardly change (a stalled secant) give huge coefficients: the mix is refused."""
    from gtcore.attention.sinkhorn_scaling import _Anderson

    mixer = _Anderson(3, limit=70.0)
    g0 = torch.zeros(3, dtype=torch.float64)
    drift = torch.tensor([0.5, 0.6931, 0.6931], dtype=torch.float64)
    G1 = mixer.step(g0, g0 + drift, False)
    G2 = g0 + 2 * drift + 1e-7
    assert torch.equal(mixer.step(G1, G2, False), G2)  # the plain image
    assert not mixer.dR  # and the history restarts
