"""The particle Transformer against a naive reference, the moment ODE and the layer map."""

import numpy as np
import pytest
import torch

from conftest import random_spd, softmax_average_by_quadrature
from gtcore import Controls, PiecewiseControls, gaussian_tokens, integrate_moments
from gtcore.particles import SOLVERS, simulate, velocity


def naive_velocity(x, ctl, ff="identity"):
    """Full N x N softmax in NumPy float64 (the style of published peers)."""
    v = x @ ctl.A.T + ctl.b
    if ctl.U is not None:
        pre = x @ ctl.U.T + ctl.c
        v = v + (np.maximum(pre, 0) if ff == "relu" else pre) @ ctl.W.T
    for Vh, Bh in zip(ctl.V, ctl.B, strict=True):
        logits = (x @ Bh.T) @ x.T  # [i, j] = x_j^T B x_i
        logits -= logits.max(axis=1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=1, keepdims=True)
        v = v + (w @ x) @ Vh.T
    return v


def random_controls(rng, d, heads=1, scale=0.5, ff=False):
    kw = {}
    if ff:
        m = 5
        kw = dict(U=rng.standard_normal((m, d)), W=rng.standard_normal((d, m)) * 0.3, c=rng.standard_normal(m))
    return Controls(
        A=scale * rng.standard_normal((d, d)),
        b=rng.standard_normal(d),
        V=scale * rng.standard_normal((heads, d, d)),
        B=scale * rng.standard_normal((heads, d, d)),
        **kw,
    )


@pytest.mark.parametrize("d, heads, ff", [(2, 1, "identity"), (3, 2, "identity"), (4, 3, "relu")])
def test_fused_attention_equals_naive_reference(rng, d, heads, ff):
    x = rng.standard_normal((300, d))
    ctl = random_controls(rng, d, heads, ff=True)
    np.testing.assert_allclose(velocity(x, ctl, ff=ff), naive_velocity(x, ctl, ff), rtol=1e-12, atol=1e-12)


def quadrature_velocity(x, ctl):
    """The Gaussian-average velocity by its definition, without the tilt formula: each head's softmax
    average over N(mu, Sigma) of the cloud's (1/N) moments, by Gauss-Hermite quadrature over the keys."""
    mu = x.mean(axis=0)
    S = (x - mu).T @ (x - mu) / x.shape[0]
    v = x @ ctl.A.T + ctl.b
    for Vh, Bh in zip(ctl.V, ctl.B, strict=True):
        v = v + softmax_average_by_quadrature(x, mu, S, Bh, n=80) @ Vh.T
    return v


def test_gaussian_average_trajectory_against_softmax_quadrature(rng):
    """simulate(average="gaussian") against an independent solution of the same particle system:
    the velocity by quadrature of the softmax (quadrature_velocity), integrated by scipy's DOP853 at
    rtol 1e-11; every token compared at t = 0.5 and 1 (RK4 with 200 steps: measured 2e-11)."""
    from scipy.integrate import solve_ivp

    d, N = 2, 40
    ctl = random_controls(rng, d, heads=2, scale=0.4)
    x0 = gaussian_tokens(N, 0.5 * rng.standard_normal(d), random_spd(rng, d, 3.0), seed=1)
    traj = simulate(x0, ctl, (0, 1), 200, method="rk4", average="gaussian", record_every=100, keep_tokens=True)
    ref = solve_ivp(
        lambda t, y: quadrature_velocity(y.reshape(N, d), ctl).ravel(),
        (0, 1),
        x0.ravel(),
        method="DOP853",
        rtol=1e-11,
        atol=1e-12,
        t_eval=[0.5, 1.0],
    )
    np.testing.assert_allclose(traj.t, [0, 0.5, 1.0])
    for k in (1, 2):
        want = ref.y[:, k - 1].reshape(N, d)
        assert np.abs(traj.tokens[k] - want).max() < 1e-9 * np.abs(want).max()


def test_one_euler_step_with_gaussian_average_against_softmax_quadrature(rng):
    """One explicit Euler step of simulate(average="gaussian") is x + h v(x), with v the softmax
    average over the Gaussian of the cloud's moments, evaluated by quadrature (two heads, non-symmetric B)."""
    d, h = 2, 0.1
    ctl = random_controls(rng, d, heads=2)
    x0 = gaussian_tokens(200, np.zeros(d), random_spd(rng, d), seed=2)
    traj = simulate(x0, ctl, (0, h), 1, method="euler", average="gaussian", keep_tokens=True)
    want = x0 + h * quadrature_velocity(x0, ctl)
    np.testing.assert_allclose(traj.tokens[1], want, rtol=1e-11, atol=1e-11 * np.abs(want).max())


@pytest.mark.parametrize("method", sorted(SOLVERS))
def test_integrators_reach_their_order_on_a_linear_flow(method):
    """No attention: x' = A x, exact solution expm(A t) x0."""
    from scipy.linalg import expm

    A = np.array([[0.0, 1.0], [-1.0, -0.1]])
    x0 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    exact = x0 @ expm(A).T
    errs = []
    for n in (20, 40):
        tr = simulate(x0, Controls(A=A), (0, 1), n, method=method, keep_tokens=True)
        errs.append(np.abs(tr.tokens[-1] - exact).max())
    order = np.log2(errs[0] / errs[1])
    assert abs(order - SOLVERS[method].order) < 0.3


@pytest.mark.parametrize("method", sorted(SOLVERS))
def test_integrators_reach_their_order_on_a_time_varying_flow(method):
    """No attention, controls that change with time: x' = t A x, exact solution expm(A t^2 / 2) x0 (A commutes
    with itself at all times). A stage evaluated at the wrong time keeps the order on x' = A x but not here."""
    from scipy.linalg import expm

    A = np.array([[0.0, 1.0], [-1.0, -0.1]])
    x0 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    exact = x0 @ expm(A / 2).T
    errs = []
    for n in (20, 40):
        tr = simulate(x0, lambda t: Controls(A=t * A), (0, 1), n, method=method, keep_tokens=True)
        errs.append(np.abs(tr.tokens[-1] - exact).max())
    order = np.log2(errs[0] / errs[1])
    assert abs(order - SOLVERS[method].order) < 0.3


def test_empirical_attention_error_decays_like_inverse_sqrt_N():
    """Weak attention (kappa < 0.2): error of the cloud's moments against the ODE ~ N^(-1/2)."""
    d = 2
    mu0, S0 = np.array([0.5, -0.2]), np.array([[1.0, 0.3], [0.3, 0.6]])
    ctl = Controls(A=[[0.1, 0.4], [-0.4, 0.0]], b=[0.2, 0.0], V=0.5 * np.eye(d), B=[[-0.3, 0.1], [0.0, -0.2]])
    ref = integrate_moments(mu0, S0, ctl, (0, 1), t_eval=np.linspace(0, 1, 6))
    kappa = max(np.linalg.eigvals(ctl.B[0].T @ S @ ctl.B[0] @ S).real.max() for S in ref.Sigma)
    assert kappa < 0.2
    Ns, errs = [500, 2000, 8000], []
    for N in Ns:
        e = []
        for seed in range(8):
            tr = simulate(gaussian_tokens(N, mu0, S0, seed), ctl, (0, 1), 4, record_every=4)
            e.append(np.linalg.norm(tr.mu[-1] - ref.mu[-1]) + np.linalg.norm(tr.Sigma[-1] - ref.Sigma[-1]))
        errs.append(np.mean(e))
    slope = np.polyfit(np.log(Ns), np.log(errs), 1)[0]
    assert -0.65 <= slope <= -0.35, slope


def test_t_eval_steps_exactly_to_the_times_of_the_exact_linear_flow():
    from scipy.linalg import expm

    A = np.array([[-0.3, 0.8], [-0.5, 0.1]])  # x' = A x + b through the feed-forward block alone
    ctl, b = Controls(U=np.eye(2), W=A, c=np.array([0.2, -0.1])), A @ np.array([0.2, -0.1])
    x0 = gaussian_tokens(50, [0.0, 1.0], np.eye(2), seed=0)
    times = [0.01, 0.1, 0.7]
    path = simulate(x0, ctl, (0.0, times[-1]), t_eval=times, max_step=0.05, keep_tokens=True)
    np.testing.assert_array_equal(path.t, [0.0, *times])
    assert path.status == "completed" and path.steps == 1 + 2 + 12
    for t, x in zip(path.t, path.tokens, strict=True):
        # x(t) = e^{At} x0 + A^{-1}(e^{At} - I) b
        E = expm(A * t)
        exact = x0 @ E.T + np.linalg.solve(A, (E - np.eye(2)) @ b)
        np.testing.assert_allclose(x, exact, atol=1e-7)
    np.testing.assert_allclose(path.mu[-1], path.tokens[-1].mean(0), rtol=1e-12)


def test_breaks_are_stepped_to_exactly(rng):
    """Pieces share the steps in proportion to their length; a break off the uniform grid is exact."""
    from scipy.linalg import expm

    A1, A2 = np.array([[0.0, 1.0], [-1.0, 0.0]]), np.array([[-0.5, 0.0], [0.3, 0.2]])
    ctl = PiecewiseControls([0.0, 0.37, 1.0], [Controls(A=A1), Controls(A=A2)])
    x0 = rng.standard_normal((5, 2))
    tr = simulate(x0, ctl, (0, 1), 100, keep_tokens=True)
    assert tr.steps == 37 + 63
    exact = x0 @ expm(0.37 * A1).T @ expm(0.63 * A2).T
    np.testing.assert_allclose(tr.final_tokens, exact, atol=1e-9)
    assert 0.37 in tr.t


def test_blowup_is_a_status_not_nan():
    x0 = gaussian_tokens(100, [0.0], [[1.0]], seed=0)
    tr = simulate(x0, Controls(A=[[0.0]], V=[[1.0]], B=[[1.0]]), (0, 5), 500, blowup_norm=1e4)
    assert tr.status == "blowup" and 0 < tr.threshold_time < 5
    assert np.all(np.isfinite(tr.Sigma)) and np.linalg.norm(tr.Sigma[-1]) <= 1e4


def test_piecewise_and_callable_controls_are_accepted(rng):
    c1, c2 = Controls(A=np.eye(2)), Controls(A=-np.eye(2))
    x0 = gaussian_tokens(50, np.zeros(2), np.eye(2), seed=0)
    tr = simulate(x0, PiecewiseControls([0, 0.5, 1], [c1, c2]), (0, 1), 100, average="gaussian")
    np.testing.assert_allclose(tr.Sigma[-1], tr.Sigma[0], rtol=1e-8)
    tr2 = simulate(x0, lambda t: c1 if t < 0.5 else c2, (0, 1), 100, average="gaussian")
    np.testing.assert_allclose(tr2.Sigma[-1], tr.Sigma[-1], rtol=1e-12)


def test_seeded_runs_are_identical():
    x0 = gaussian_tokens(300, np.zeros(2), np.eye(2), seed=5)
    ctl = Controls(V=np.eye(2), B=-np.eye(2))
    a = simulate(x0, ctl, (0, 1), 10)
    b = simulate(gaussian_tokens(300, np.zeros(2), np.eye(2), seed=5), ctl, (0, 1), 10)
    np.testing.assert_array_equal(a.Sigma, b.Sigma)


def test_torch_input_and_float32(rng):
    x0 = torch.as_tensor(rng.standard_normal((100, 2)), dtype=torch.float32)
    ctl = Controls(V=np.eye(2), B=-np.eye(2))
    tr = simulate(x0, ctl, (0, 1), 5, dtype=torch.float32, keep_tokens=True)
    ref = simulate(x0.double().numpy(), ctl, (0, 1), 5, keep_tokens=True)
    np.testing.assert_allclose(tr.tokens[-1], ref.tokens[-1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(x0=np.zeros((5, 3))), "x0"),
        (dict(x0=np.zeros(5)), "x0"),
        (dict(x0=np.zeros((1, 2))), "x0"),
        (dict(x0=np.array([[0.0, np.nan], [1.0, 1.0]])), "x0"),
        (dict(method="dopri"), "method"),
        (dict(ff="gelu"), "ff"),
        (dict(ff="relu"), "ff"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(average="exact"), "average"),
        (dict(record_every=0), "record_every"),
        (dict(t_span=(1, 0)), "t_span"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(
        x0=np.random.default_rng(0).standard_normal((10, 2)), controls=Controls(A=np.eye(2)), t_span=(0, 1), steps=3
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        simulate(args.pop("x0"), args.pop("controls"), args.pop("t_span"), args.pop("steps"), **args)


def test_velocity_bad_input():
    with pytest.raises(ValueError, match="floating"):
        velocity(torch.ones((3, 2), dtype=torch.int64), Controls(A=0.5 * np.eye(2)))
    with pytest.raises(ValueError, match="controls"):
        velocity(np.zeros((3, 2)), "not controls", ff="relu")
    with pytest.raises(ValueError, match="controls"):
        velocity(np.zeros((3, 2)), Controls(A=np.eye(3)))
    with pytest.raises(ValueError, match="ff"):
        velocity(np.zeros((3, 2)), Controls(A=np.eye(2)), ff="tanh")


def test_float32_kernel_stays_within_its_round_off_of_float64():
    # the studies' mixed precision (STUDY_KERNEL_DTYPE): the softmax average in float32, all else in
    # float64; the moments must agree with the float64 run to ~1e-7 relative, far below N^-1/2
    from gtbook.studies.precision import STUDY_KERNEL_DTYPE

    ctl = Controls(A=[[0.2, 0.6], [-0.6, 0.1]], b=[0.3, 0.0], V=0.5 * np.eye(2), B=[[-0.6, 0.1], [0.1, -0.5]])
    x0 = gaussian_tokens(1500, [0.5, -0.3], [[1.0, 0.4], [0.4, 0.7]], 3)
    full = simulate(x0, ctl, (0.0, 1.0), 10, record_every=5)
    mixed = simulate(x0, ctl, (0.0, 1.0), 10, record_every=5, kernel_dtype=STUDY_KERNEL_DTYPE)
    assert mixed.final_tokens.dtype == np.float64
    np.testing.assert_allclose(mixed.Sigma, full.Sigma, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(mixed.mu, full.mu, rtol=1e-6, atol=1e-7)
    assert np.abs(mixed.Sigma - full.Sigma).max() > 0  # the float32 kernel was used
    with pytest.raises(ValueError, match="kernel_dtype"):
        simulate(x0, ctl, (0.0, 1.0), 2, kernel_dtype=torch.int32)


def test_small_problems_run_on_one_thread_and_the_callers_setting_is_restored():
    """simulate's thread choice (issue 21: on a loaded machine a second thread made N = 1024 three times
    slower): one thread below SERIAL_WORK whatever the caller set, the caller's count above it, restored
    after; the numbers do not depend on the caller's setting."""
    from gtcore import particles

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert particles._thread_count(1024, 2, 1) == 1
        assert particles._thread_count(16384, 2, 1) == 2  # 5e8 multiply-adds per evaluation
        seen = []
        real = particles._run

        def spy(plan, progress):
            seen.append(torch.get_num_threads())
            return real(plan, progress)

        x0 = gaussian_tokens(64, np.zeros(2), np.eye(2), seed=0)
        ctl = Controls(A=0.1 * np.eye(2), V=np.eye(2), B=-0.5 * np.eye(2))
        particles._run = spy
        try:
            two = simulate(x0, ctl, (0.0, 0.5), 5, device="cpu")
            torch.set_num_threads(1)
            one = simulate(x0, ctl, (0.0, 0.5), 5, device="cpu")
        finally:
            particles._run = real
        assert seen == [1, 1] and torch.get_num_threads() == 1
        np.testing.assert_array_equal(one.Sigma, two.Sigma)
    finally:
        torch.set_num_threads(before)
