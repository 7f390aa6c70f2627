"""gtbook.studies.stability.finite_n: the radius bound of a finite token cloud, and the pole study."""

import numpy as np
import pytest

from gtbook.studies.stability.finite_n import pole_study
from gtbook.studies.stability.harness import rotating_controls
from gtcore import Controls, gaussian_tokens
from gtcore.particles import simulate
from gtcore.poles import particle_radius_bound

B = np.array([[1.0, 0.4], [-0.2, 0.6]])
S0 = np.array([[1.0, 0.3], [0.3, 0.5]])


@pytest.mark.parametrize("vs", [(0.5,), (0.5, 0.25, 0.125)])
def test_radius_bound_is_attained_by_a_collapsed_cloud(vs):
    # all tokens at one point x parallel to b: every head's attention average is x itself, so
    # x' = (a + sum_h v_h) x + b and |x(t)| = e^{Lt}(|x0| + |b|/L) - |b|/L exactly (L = a + sum_h v_h);
    # with several heads, a rate from the largest head alone (or their mean) falls below the cloud
    a, b = 0.3, np.array([0.2, 0.0])
    ctl = Controls(A=a * np.eye(2), V=[v * np.eye(2) for v in vs], B=[B] * len(vs), b=b)
    x0 = np.tile([1.0, 0.0], (4, 1))
    tr = simulate(x0, ctl, (0, 2.0), 400, keep_tokens=True, device="cpu")
    R = np.linalg.norm(tr.tokens, axis=2).max(axis=1)
    np.testing.assert_allclose(R, particle_radius_bound(ctl, 1.0, tr.t), rtol=1e-9)


def test_radius_bound_of_a_collapsed_cloud_counts_the_feed_forward_block():
    # a feed-forward block W(Ux + c) (identity activation) adds WU = w I to the rate and Wc to the bias: with
    # x0 and b + Wc along e1, x' = (a + w + v) x + (b + Wc) exactly
    a, w, v = 0.2, 0.3, 0.4
    ctl = Controls(A=a * np.eye(2), V=v * np.eye(2), B=B, b=[0.1, 0.0], U=np.eye(2), W=w * np.eye(2), c=[0.5, 0.0])
    x0 = np.tile([1.0, 0.0], (4, 1))
    tr = simulate(x0, ctl, (0, 2.0), 400, keep_tokens=True, device="cpu")
    R = np.linalg.norm(tr.tokens, axis=2).max(axis=1)
    L, beta = a + w + v, 0.1 + w * 0.5
    np.testing.assert_allclose(R, np.exp(L * tr.t) * (1.0 + beta / L) - beta / L, rtol=1e-9)
    np.testing.assert_allclose(R, particle_radius_bound(ctl, 1.0, tr.t), rtol=1e-9)


def test_radius_bound_holds_for_a_random_cloud():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3))
    ctl = Controls(A=A, V=rng.normal(size=(3, 3)), B=2 * rng.normal(size=(3, 3)), b=rng.normal(size=3))
    x0 = rng.normal(size=(50, 3))
    tr = simulate(x0, ctl, (0, 1.0), 200, keep_tokens=True, device="cpu")
    R = np.linalg.norm(tr.tokens, axis=2).max(axis=1)
    bound = particle_radius_bound(ctl, float(np.linalg.norm(x0, axis=1).max()), tr.t)
    assert np.all(R <= bound * (1 + 1e-9))
    assert np.all(np.trace(tr.Sigma, axis1=1, axis2=2) <= bound**2)


def test_radius_bound_without_drift_growth():
    ctl = Controls(A=np.zeros((2, 2)), V=np.zeros((2, 2)), B=B, b=[3.0, 4.0])
    np.testing.assert_allclose(particle_radius_bound(ctl, 1.0, [0.0, 2.0]), [1.0, 11.0])


def test_pole_study_shapes_and_limits():
    ctl = rotating_controls(0.5, 1.0, B, omega=0.7)
    ps = pole_study(np.zeros(2), 0.25 * S0, ctl, [60, 240], 2, [0.25, 0.97], 40, device="cpu")
    assert ps.ratio.shape == (2, 2, 2) and ps.gap_mean().shape == (2, 2)
    assert ps.trace_bound_ok
    # far from the pole the cloud follows the ODE started from its own moments ...
    assert np.all(np.abs(ps.ratio[:, :, 0] - 1) < 0.05)
    # ... close to it, it cannot (its covariance is bounded by R(t)^2)
    assert np.all(ps.ratio[:, :, 1] < 0.8)
    # the recorded times are the integrator's grid points near f t*_seed
    np.testing.assert_allclose(ps.times[..., -1], 0.97 * ps.t_star_seed, rtol=1e-12)
    assert np.all(np.diff(ps.kappa) > 0)
    assert "kappa" in ps.table()


def test_pole_study_rejects_bad_input():
    ctl = rotating_controls(0.5, 1.0, B, omega=0.7)
    with pytest.raises(ValueError, match="fractions"):
        pole_study(np.zeros(2), S0, ctl, [50], 1, [0.5, 0.25], 10)
    with pytest.raises(ValueError, match="does not blow up"):
        pole_study(np.zeros(2), S0, rotating_controls(0.5, -1.0, B, omega=0.7), [50], 1, [0.5], 10)
    with pytest.raises(ValueError, match="Ns"):
        pole_study(np.zeros(2), S0, ctl, [1], 1, [0.5], 10)


def test_pole_study_keeps_one_cloud():
    ctl = rotating_controls(0.5, 1.0, B, omega=0.7)
    ps = pole_study(np.zeros(2), 0.25 * S0, ctl, [60, 80], 2, [0.5, 0.97], 40, device="cpu", keep=(80, 1))
    pc = ps.kept
    assert pc.run.tokens.shape == (41, 80, 2) and pc.ode.Sigma.shape == (41, 2, 2)
    # the cloud is seed 1's sample, and the ODE starts at its own moments (normalised by N)
    x0 = gaussian_tokens(80, np.zeros(2), 0.25 * S0, seed=1)
    np.testing.assert_array_equal(pc.run.tokens[0], x0)
    np.testing.assert_allclose(pc.ode.Sigma[0], np.cov(x0.T, bias=True), rtol=1e-12)
    np.testing.assert_allclose(pc.ode.mu[0], x0.mean(axis=0), atol=1e-14)
    np.testing.assert_allclose(pc.t_star, ps.t_star_seed[1, 1], rtol=1e-12)
    np.testing.assert_allclose(pc.run.t[-1], 0.97 * pc.t_star, rtol=1e-12)
    idx = np.rint(np.array([0.5, 0.97]) / 0.97 * 40).astype(int)  # the steps nearest 0.5 t*, 0.97 t*
    np.testing.assert_allclose(pc.ratio[idx], ps.ratio[1, 1], rtol=1e-9)
    assert pole_study(np.zeros(2), 0.25 * S0, ctl, [60], 1, [0.5], 10, device="cpu").kept is None
    for bad in ((70, 0), (60, 2), (60,)):
        with pytest.raises(ValueError, match="keep"):
            pole_study(np.zeros(2), 0.25 * S0, ctl, [60], 2, [0.5], 10, keep=bad)
