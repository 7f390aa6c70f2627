"""Chapter 3's new studies: the token-measured compensation and the attention-only controls, against
independent answers (the Gaussian tilt in closed form, scipy's integrator, explicit loops)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from gtbook.studies.reachability.attention_only import AttentionOnlyControls, random_rotation
from gtbook.studies.reachability.measured import (
    affine_flow,
    measured_compensation,
    response_fit,
    softmax_average,
)
from gtcore.moments import integrate_moments
from gtcore.reachability import steer
from gtcore.stats.gaussianity import bures_wasserstein


def test_softmax_average_matches_explicit_loops():
    rng = np.random.default_rng(0)
    x, B = rng.standard_normal((7, 3)), rng.standard_normal((3, 3))
    want = np.empty_like(x)
    for i in range(7):
        w = np.array([np.exp(x[j] @ B @ x[i]) for j in range(7)])
        want[i] = (w[:, None] * x).sum(0) / w.sum()
    np.testing.assert_allclose(softmax_average(x, B), want, rtol=1e-12)


def test_measured_response_is_the_gaussian_tilt():
    """On a large Gaussian cloud the fitted response is c = mu, K = Sigma B (the tilt, in closed form): a
    non-symmetric B, so a transposed logit would give Sigma B^T and fail."""
    rng = np.random.default_rng(1)
    L = np.array([[1.0, 0.0, 0.0], [0.4, 0.7, 0.0], [-0.2, 0.3, 0.5]])
    mu, S = np.array([0.3, -0.2, 0.1]), L @ L.T
    B = np.array([[0.2, 0.25, 0.0], [-0.15, 0.1, 0.05], [0.1, -0.2, 0.15]])
    x = mu + rng.standard_normal((6000, 3)) @ L.T
    c, K = response_fit(x, softmax_average(x, B))
    np.testing.assert_allclose(K, S @ B, atol=0.03)
    np.testing.assert_allclose(c, mu, atol=0.03)
    assert np.abs(K - S @ B.T).max() > 0.1  # the test can tell the two apart


def test_affine_flow_against_scipy():
    """Two stages (a stretch, then a rotation of a rank-1 segment): the exact flow equals solve_ivp's."""
    u0, u1 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.9, -1.2])
    base = steer(np.zeros(3), np.outer(u0, u0), np.array([1.0, 1.0, 0.5]), np.outer(u1, u1), 1.0)
    assert len(base.stages) == 2
    x0 = np.array([0.3, -0.5, 0.8])
    for t in (0.3, 0.5, 0.9):
        F, g = affine_flow(base, t)
        sol = solve_ivp(
            lambda s, x: base(s).A @ x + base(s).b,
            (0.0, t),
            x0,
            rtol=1e-12,
            atol=1e-13,
            t_eval=[t],
            first_step=1e-3,
            max_step=0.01,
        )
        np.testing.assert_allclose(F @ x0 + g, sol.y[:, -1], atol=1e-8)


def test_measured_compensation_approaches_the_formula():
    """The measured controls approach A~ - V Sigma_ref B, b~ - V mu_ref (the paper's compensation, computed
    here by hand from the reference) as the pilot grows."""
    rng = np.random.default_rng(2)
    F0 = np.array([[1.0, 0.2, 0.0], [0.0, 0.8, 0.1], [0.3, 0.0, 0.6]])
    base = steer(np.zeros(3), F0 @ F0.T, np.array([0.5, -0.3, 0.2]), np.diag([0.5, 1.2, 0.8]), 1.0)
    V = np.array([[0.4, 0.1, 0.0], [-0.2, 0.3, 0.1], [0.0, 0.2, 0.5]])
    B = np.array([[0.2, 0.1, 0.0], [-0.1, 0.15, 0.05], [0.05, -0.1, 0.2]])
    errs = []
    for n in (500, 8000):
        ctl = measured_compensation(base, V, B, rng.standard_normal((n, 3)) @ F0.T, 4)
        err = 0.0
        for k, piece in enumerate(ctl.pieces):
            t = (k + 0.5) / 4
            mu, S = base.reference(t)
            err = max(
                err, np.abs(piece.A - (base(t).A - V @ S @ B)).max(), np.abs(piece.b - (base(t).b - V @ mu)).max()
            )
        errs.append(err)
    assert errs[1] < 0.05 and errs[1] < errs[0]


def test_attention_only_controls_realise_the_generator_and_reach_the_target():
    rng = np.random.default_rng(3)
    rot = random_rotation(3, 0.6, rng)
    np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(rot) == pytest.approx(1.0)
    F0, F1 = rng.standard_normal((3, 3)) / np.sqrt(3), rng.standard_normal((3, 3)) / np.sqrt(3)
    S0, S1, mu1 = F0 @ F0.T, F1 @ F1.T, np.array([1.0, -0.5, 0.3])
    base = steer(np.zeros(3), S0, np.zeros(3), S1, 1.0)
    ctl = AttentionOnlyControls(base, mu1, 0.5, rot, 0.25)
    for t in (0.1, 0.5, 0.95):
        c, S = ctl(t), base.reference(t)[1]
        np.testing.assert_allclose(c.V[0] @ S @ c.B[0], base(t).A, atol=1e-9)  # V Sigma B = A~
        assert not np.any(c.A) and not np.any(c.b)
        assert np.max(np.linalg.eigvals(c.B[0].T @ S @ c.B[0] @ S).real) == pytest.approx(0.25)
        assert np.abs(c.B[0] - c.B[0].T).max() > 1e-3  # B is not symmetric
    np.testing.assert_allclose(ctl(1.1).b, mu1 / 0.25)
    ode = integrate_moments(np.zeros(3), S0, ctl, ctl.span, rtol=1e-11, atol=1e-13)
    assert ode.status == "completed"
    assert bures_wasserstein(ode.mu[-1], ode.Sigma[-1], mu1, S1) < 1e-5


def test_table_renders_rows_compactly_and_escapes():
    from gtbook.studies.tables import Table

    t = Table(
        [dict(name="<a>", x=0.123456, ok=True, gap=float("inf")), dict(name="b", x=float("nan"), ok=False)],
        caption="c & d",
    )
    text = repr(t).splitlines()
    assert text[0] == "c & d" and text[1].split() == ["name", "x", "ok", "gap"]
    assert text[2].split() == ["<a>", "0.123", "yes", "∞"] and text[3].split() == ["b", "–", "no"]
    html = t._repr_html_()
    assert "&lt;a&gt;" in html and "c &amp; d" in html and html.count("<tr>") == 3


def test_attention_only_batched_runs_match_one_cloud_at_a_time():
    """The study's D_N, D^A_N and B^T control for its first draw, against simulate() of each cloud by hand."""
    from gtbook.studies.reachability.attention_only import _antithetic, attention_only_steering
    from gtbook.studies.reachability.measured import affine_flow
    from gtbook.studies.reachability.steered_tokens import random_steering_draw
    from gtcore.particles import simulate
    from gtcore.reachability import steer
    from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments

    d, Ns, seed = 3, [40, 80], 7
    res = attention_only_steering(d, Ns, draws=2, seeds=2, perturbations=1, steps=5, seed=seed)
    rng = np.random.default_rng(seed)
    for k in range(2):
        _, F0, mu1, F1, _, _ = random_steering_draw(d, d, rng)
        rot = random_rotation(d, 0.6, rng)
        S1 = F1 @ F1.T
        base = steer(np.zeros(d), F0 @ F0.T, np.zeros(d), S1, 1.0)
        scale, F = np.sqrt(np.trace(S1)), affine_flow(base, 1.0)[0]
        for i, N in enumerate(Ns):
            for s in range(2):
                x0 = _antithetic(F0, N, seed + 1000 * (k + 1) + s)
                for transposed in (False, True) if s == 0 else (False,):
                    c = AttentionOnlyControls(base, mu1, 0.5, rot, 0.25, transposed=transposed)
                    run = simulate(x0, c, c.span, 5, record_every=5, device="cpu")
                    dist = bures_wasserstein(*empirical_moments(run.final_tokens), mu1, S1) / scale
                    got = res.control[k, i] if transposed else res.distance[k, i, s]
                    np.testing.assert_allclose(got, dist, rtol=1e-12, atol=0)
                free = bures_wasserstein(mu1, F @ empirical_moments(x0)[1] @ F.T, mu1, S1) / scale
                np.testing.assert_allclose(res.free[k, i, s], free, rtol=1e-12, atol=0)
