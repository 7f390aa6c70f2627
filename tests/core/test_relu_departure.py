"""gtcore.relu: the closed-form short-time rate against quadrature, samples and a simulation."""

import numpy as np
import pytest

from gtcore import Controls, gaussian_tokens
from gtcore.particles import simulate
from gtcore.relu import first_order_w2, moment_departure, relu_departure_rate, relu_departure_rate_tokens
from gtcore.stats.gaussianity import bures_wasserstein

W = np.array([[1.5, -1.0], [1.0, 0.5]])
U = np.array([[1.0, 0.3], [-0.2, 0.8]])


def layer(c):
    return Controls(b=np.zeros(2), V=-np.eye(2), B=0.3 * np.eye(2), U=U, W=W, c=np.asarray(c, float))


def test_first_order_w2_is_the_derivative_of_bures_wasserstein():
    S = np.array([[1.3, 0.2], [0.2, 0.6]])
    dmu, dS = np.array([0.3, -0.1]), np.array([[0.5, -0.2], [-0.2, 0.1]])
    t = 1e-4  # small enough for the O(t) remainder, large enough against the cancellation in W2
    numeric = bures_wasserstein(np.zeros(2) + t * dmu, S + t * dS, np.zeros(2), S) / t
    assert first_order_w2(dmu, dS, S) == pytest.approx(numeric, rel=1e-4)


def test_closed_form_matches_quadrature_of_the_velocity_difference():
    mu, S = np.array([0.2, -0.1]), np.array([[1.0, 0.3], [0.3, 0.8]])
    c = np.array([0.4, -0.5])
    L = np.linalg.cholesky(S)
    # midpoint rule on a fine grid (independent of the Stein-lemma closed form; the kinked integrand
    # makes Gauss-Hermite converge slowly, the midpoint rule's error is O(h^2))
    h = 0.01
    g = np.arange(-8 + h / 2, 8, h)
    w = np.exp(-0.5 * g**2)
    w = w / w.sum()
    Z = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    wt = np.outer(w, w).ravel()
    X = mu + Z @ L.T
    dv = np.maximum(-(X @ U.T + c), 0.0) @ W.T
    dmu = wt @ dv
    C = ((dv - dmu) * wt[:, None]).T @ (X - mu)
    expected = first_order_w2(dmu, C + C.T, S) / np.sqrt(np.trace(S))
    assert relu_departure_rate(mu, S, layer(c)) == pytest.approx(expected, rel=1e-4)


def test_sample_rate_converges_to_the_closed_form():
    x = gaussian_tokens(400_000, np.zeros(2), np.eye(2), seed=3)
    ctl = layer([1.0, 1.0])
    assert relu_departure_rate_tokens(x, ctl) == pytest.approx(
        relu_departure_rate(np.zeros(2), np.eye(2), ctl), rel=0.02
    )


def test_simulated_short_time_departure_has_the_token_rate():
    x = gaussian_tokens(600, np.zeros(2), np.eye(2), seed=4)
    ctl = layer([0.5, 0.0])
    t = 1e-4
    a = simulate(x, ctl, (0.0, t), t_eval=[t], max_step=0.05, ff="relu", device="cpu")
    b = simulate(x, ctl, (0.0, t), t_eval=[t], max_step=0.05, ff="identity", device="cpu")
    D = moment_departure(a.mu, a.Sigma, b.mu, b.Sigma)
    assert D[0] < 1e-6  # identical clouds: the square root of round-off
    assert D[1] / t == pytest.approx(relu_departure_rate_tokens(x, ctl), rel=1e-3)


def test_needs_a_feedforward_block():
    with pytest.raises(ValueError, match="feed-forward"):
        relu_departure_rate(np.zeros(2), np.eye(2), Controls(A=np.eye(2)))


def test_vectorised_spread_equals_the_per_sample_rate():
    from gtcore.relu import relu_departure_rate_spread

    ctls = [layer([0.0, 0.0]), layer([1.0, -0.5])]
    spread = relu_departure_rate_spread(ctls, 300, 5, seed=np.random.default_rng(9), chunk=2)
    rng = np.random.default_rng(9)
    L = np.linalg.cholesky(np.eye(2))
    xs = []
    for m in (2, 2, 1):
        xs.extend(rng.standard_normal((m, 300, 2)) @ L.T)
    expected = np.array([[relu_departure_rate_tokens(x, c) for x in xs] for c in ctls])
    np.testing.assert_allclose(spread, expected, rtol=1e-12)
