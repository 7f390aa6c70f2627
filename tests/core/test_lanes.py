"""Many ODEs side by side (gtcore.moments.lanes, integrate_moments_lanes, observe_regimes) against closed forms
and against scipy's solve_ivp run one system at a time."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from gtbook.studies.stability.harness import rotating_controls
from gtcore import Controls, integrate_moments
from gtcore.moments import integrate_moments_lanes
from gtcore.moments.lanes import integrate_lanes
from gtcore.riccati import blowup_time
from gtcore.stability import observe_regime, observe_regimes

B_MAP = np.array([[1.0, 0.4], [-0.2, 0.6]])
S0 = np.array([[1.0, 0.3], [0.3, 0.5]])


def test_linear_lanes_match_the_exponential():
    lam = np.array([-3.0, -0.5, 0.0, 0.7, 2.0])
    sol = integrate_lanes(lambda t, y, lanes: lam[lanes, None] * y, (0.0, 2.0), np.ones((5, 1)), rtol=1e-10, atol=1e-12)
    assert list(sol.status) == ["completed"] * 5
    np.testing.assert_allclose(sol.t, 2.0)
    np.testing.assert_allclose(sol.y[:, 0], np.exp(2.0 * lam), rtol=1e-8)


def test_lanes_take_the_steps_of_solve_ivp():
    # van der Pol with a different stiffness per lane: each lane's step sequence is its own
    mus = np.array([0.5, 2.0, 5.0])

    def vdp(mu):
        return lambda t, y: np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    def lanes_rhs(t, y, lanes):
        mu = mus[lanes]
        return np.stack([y[:, 1], mu * (1 - y[:, 0] ** 2) * y[:, 1] - y[:, 0]], axis=1)

    y0 = np.array([[2.0, 0.0]] * 3)
    sol = integrate_lanes(lanes_rhs, (0.0, 10.0), y0, rtol=1e-9, atol=1e-11)
    for k, mu in enumerate(mus):
        ref = solve_ivp(vdp(mu), (0.0, 10.0), y0[k], method="DOP853", rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(sol.y[k], ref.y[:, -1], rtol=1e-7, atol=1e-9)
        assert abs(sol.steps[k] - (ref.t.size - 1)) <= 2
        assert abs(sol.nfev[k] - ref.nfev) <= 24


def test_stop_fires_after_the_step_that_crosses():
    # y' = y^2 from y0 blows up at 1/y0
    y0 = np.array([[1.0], [2.0], [4.0]])
    sol = integrate_lanes(
        lambda t, y, lanes: y**2, (0.0, 5.0), y0, rtol=1e-10, atol=1e-12, stop=lambda y, lanes: y[:, 0] >= 1e8
    )
    assert list(sol.status) == ["stopped"] * 3
    assert np.all(sol.y[:, 0] >= 1e8)
    np.testing.assert_allclose(sol.t, 1.0 / y0[:, 0], rtol=1e-6)


def test_integrate_lanes_rejects_bad_input():
    f = lambda t, y, lanes: y  # noqa: E731
    with pytest.raises(ValueError, match="y0"):
        integrate_lanes(f, (0, 1), np.ones(3))
    with pytest.raises(ValueError, match="t_span"):
        integrate_lanes(f, (1, 0), np.ones((2, 1)))
    with pytest.raises(ValueError, match="rtol"):
        integrate_lanes(f, (0, 1), np.ones((2, 1)), rtol=0.0)
    with pytest.raises(ValueError, match="atol"):
        integrate_lanes(f, (0, 1), np.ones((2, 1)), atol=-1.0)


def test_moment_lanes_agree_with_integrate_moments():
    rng = np.random.default_rng(3)
    ctls = [
        Controls(
            A=rng.normal(size=(2, 2)) * 0.5,
            V=rng.normal(size=(2, 2, 2)) * 0.3,
            B=rng.normal(size=(2, 2, 2)) * 0.3,
            b=rng.normal(size=2),
        )
        for _ in range(4)
    ]
    ctls.append(rotating_controls(0.5, 1.0, B_MAP, omega=0.7))  # blows up before t = 3
    mu0 = np.array([0.3, -0.2])
    lanes = integrate_moments_lanes(mu0, S0, ctls, (0.0, 3.0))
    for k, c in enumerate(ctls):
        ref = integrate_moments(mu0, S0, c, (0.0, 3.0))
        assert lanes.status[k] == ref.status
        if ref.status == "completed":
            np.testing.assert_allclose(lanes.Sigma[k], ref.Sigma[-1], rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(lanes.mu[k], ref.mu[-1], rtol=1e-8, atol=1e-10)
    # the blow-up lane stops within one step after the exact pole's neighbourhood
    t_star = blowup_time(S0, ctls[-1]).t_star
    assert lanes.status[-1] == "blowup" and abs(lanes.t[-1] - t_star) < 1e-6 * t_star
    with pytest.raises(ValueError, match="controls"):
        integrate_moments_lanes(mu0, S0, [], (0.0, 1.0))
    with pytest.raises(ValueError, match="blowup_norm"):
        integrate_moments_lanes(mu0, S0, ctls, (0.0, 1.0), blowup_norm=0.1)


def test_observe_regimes_gives_the_verdicts_of_observe_regime():
    ctls = [rotating_controls(a, v, B_MAP, omega=0.7) for a in (-0.8, -0.2, 0.3, 0.9) for v in (-1.2, -0.3, 0.4, 1.1)]
    verdicts = observe_regimes(ctls, S0, 200.0)
    assert verdicts == [observe_regime(c, S0, 200.0) for c in ctls]
    assert {"converges", "collapses to 0", "blows up"} <= set(verdicts)


def test_a_lane_out_of_budget_stops_without_holding_up_the_others():
    # lane 0 is stiff (rate -1e6: explicit steps stay ~3e-6), lane 1 is not
    lam = np.array([-1e6, -0.5])

    def rhs(t, y, lanes):
        return lam[lanes, None] * (y - np.cos(t)[:, None])

    y0 = np.ones((2, 1))
    sol = integrate_lanes(rhs, (0.0, 10.0), y0, rtol=1e-8, atol=1e-10, max_nfev=5000)
    assert list(sol.status) == ["budget", "completed"]
    assert 0 < sol.t[0] < 1e-1 and sol.nfev[0] >= 5000 and sol.nfev[0] < 5000 + 12
    # the stopped lane's state is its last accepted step's: compare with solve_ivp to that time
    ref = solve_ivp(
        lambda t, y: lam[0] * (y - np.cos(t)), (0.0, sol.t[0]), [1.0], method="Radau", rtol=1e-11, atol=1e-13
    )
    np.testing.assert_allclose(sol.y[0, 0], ref.y[0, -1], rtol=1e-6)
    # the other lane ends as it does alone (to round-off: the stages are summed over a different batch)
    free = integrate_lanes(lambda t, y, lanes: rhs(t, y, lanes + 1), (0.0, 10.0), y0[1:], rtol=1e-8, atol=1e-10)
    assert sol.steps[1] == free.steps[0]
    np.testing.assert_allclose(sol.y[1], free.y[0], rtol=1e-12)
    with pytest.raises(ValueError, match="max_nfev must be a positive integer"):
        integrate_lanes(rhs, (0.0, 1.0), y0, max_nfev=0)


def test_dop853_tables_are_scipys():
    """The copied tables equal SciPy's private ones bit for bit (while SciPy still has them)."""
    from gtcore.moments import _dop853

    dop = pytest.importorskip("scipy.integrate._ivp.dop853_coefficients")
    n = dop.N_STAGES
    assert _dop853.N_STAGES == n == 12
    for mine, theirs in (
        (_dop853.A, dop.A[:n, :n]),
        (_dop853.B, dop.B),
        (_dop853.C, dop.C[:n]),
        (_dop853.E3, dop.E3),
        (_dop853.E5, dop.E5),
    ):
        assert mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)


def test_dop853_tables_are_a_consistent_8th_order_method():
    """Independent of SciPy: row sums of A are the nodes c, the weights sum to 1 and integrate t^k
    exactly up to k = 7, and both error estimators annihilate constants (they are differences of weights)."""
    from gtcore.moments import _dop853 as dop

    np.testing.assert_allclose(dop.A.sum(axis=1), dop.C, rtol=0, atol=1e-14)
    assert np.all(np.triu(dop.A) == 0)
    for k in range(8):  # quadrature conditions b . c^k = 1/(k+1)
        assert dop.B @ dop.C**k == pytest.approx(1.0 / (k + 1), rel=1e-13, abs=1e-14)
    assert dop.E3.sum() == pytest.approx(0.0, abs=1e-14)
    assert dop.E5.sum() == pytest.approx(0.0, abs=1e-14)
