"""gtcore.poles: the pole certificates against poles found by an independent integration of eq. (1.1)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from gtcore import Controls
from gtcore.poles import no_pole_rate, trace_certificate
from gtcore.riccati import blowup_time


def _integrated_pole(A, V, B, S0, t_max):
    """The time ||Sigma||_F reaches 1e8 under eq. (1.1), written out here (one head), by SciPy's DOP853."""
    d = len(A)

    def rhs(t, y):
        S = y.reshape(d, d)
        return (A @ S + S @ A.T + V @ S @ B @ S + S @ B.T @ S @ V.T).ravel()

    def crossing(t, y):
        return np.linalg.norm(y) - 1e8

    crossing.terminal = True
    sol = solve_ivp(rhs, (0.0, t_max), S0.ravel(), method="DOP853", rtol=1e-10, atol=1e-12, events=crossing)
    assert sol.t_events[0].size, "no pole within t_max"
    return float(sol.t_events[0][0])


def _skew(rng, d):
    K = rng.normal(size=(d, d))
    return K - K.T


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trace_certificate_is_attained_by_an_isotropic_cloud(seed):
    """A = 0, B = I, V = vI + skew (not scalar), Sigma0 = sI: Sigma = s(t) I with s' = 2v s^2, so the pole is
    at 1/(2vs); tr Sigma' = 2v tr(Sigma^2) >= (2v/d)(tr Sigma)^2 with equality here, so the certificate's
    time is that pole exactly, and blowup_time (numerical route, capped by the certificate) finds it."""
    rng = np.random.default_rng(seed)
    d, v, s = 3, 0.7, 0.5
    V = v * np.eye(d) + 0.4 * _skew(rng, d)
    ctl = Controls(A=np.zeros((d, d)), V=V, B=np.eye(d))
    S0 = s * np.eye(d)
    exact = 1.0 / (2 * v * s)
    assert _integrated_pole(ctl.affine_A, V, np.eye(d), S0, 2 * exact) == pytest.approx(exact, rel=1e-6)
    T, how = trace_certificate(ctl, S0)
    assert T == pytest.approx(exact, rel=1e-9), how
    bt = blowup_time(S0, ctl)
    assert bt.t_star == pytest.approx(exact, rel=1e-4), bt


@pytest.mark.parametrize("seed", range(5))
def test_trace_certificate_bounds_the_integrated_pole(seed):
    """General draws (d = 3, A != 0, non-symmetric B, V with positive-definite symmetric part and a skew part):
    the certified time is never before the pole."""
    rng = np.random.default_rng(100 + seed)
    d = 3
    M, W, G = (rng.normal(size=(d, d)) for _ in range(3))
    V = M @ M.T / d + 0.3 * np.eye(d) + 0.8 * _skew(rng, d) / 2
    A, B = 0.3 * G, np.eye(d) + 0.2 * rng.normal(size=(d, d))
    S0 = W @ W.T / d + 0.2 * np.eye(d)
    cert = trace_certificate(Controls(A=A, V=V, B=B), S0)
    assert cert is not None, "the draws' quadratic form is positive definite (these seeds)"
    assert _integrated_pole(A, V, B, S0, 10 * cert[0]) <= cert[0] * (1 + 1e-9)


def _l2_response(Sigma, Q, K):
    """The L2 attention's linear response M = 2 (Sigma^{-1} + 2 K^T K)^{-1} K^T Q, written out here."""
    return 2.0 * np.linalg.solve(np.linalg.inv(Sigma) + 2.0 * K.T @ K, K.T @ Q)


def test_l2_no_pole_rate_is_the_supremum_of_the_response():
    """Keys K = kI with k < 1 and a general Q: ||M(tI)|| = 2t k ||Q|| / (1 + 2t k^2) rises to ||K^T Q|| / k^2
    = ||Q|| / k as t grows, so the rate (A = 0, V = I) is that supremum; never exceeded, and attained in the limit."""
    rng = np.random.default_rng(7)
    d, k = 3, 0.5
    Q, K = rng.normal(size=(d, d)), k * np.eye(d)
    rate = no_pole_rate(Controls(A=np.zeros((d, d)), V=np.eye(d), Q=Q, K=K, attention="l2"))
    norms = [np.linalg.norm(_l2_response(t * np.eye(d), Q, K), 2) for t in (0.1, 1.0, 1e2, 1e6)]
    assert max(norms) <= rate * (1 + 1e-12)
    assert norms[-1] == pytest.approx(rate, rel=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_l2_no_pole_rate_bounds_the_response_of_general_keys(seed):
    """Rectangular full-rank keys, two heads with general V_h: sum_h ||V_h M_h(Sigma)|| <= the rate - ||A||."""
    rng = np.random.default_rng(200 + seed)
    d = 3
    A = rng.normal(size=(d, d))
    V, Q, K = rng.normal(size=(2, d, d)), rng.normal(size=(2, 4, d)), 0.4 * rng.normal(size=(2, 4, d))
    rate = no_pole_rate(Controls(A=A, V=V, Q=Q, K=K, attention="l2"))
    for _ in range(20):
        W = rng.normal(size=(d, d))
        Sigma = np.exp(rng.uniform(-3, 6)) * (W @ W.T + 1e-3 * np.eye(d))
        drift = sum(np.linalg.norm(V[h], 2) * np.linalg.norm(_l2_response(Sigma, Q[h], K[h]), 2) for h in range(2))
        assert drift <= (rate - np.linalg.norm(A, 2)) * (1 + 1e-9)
