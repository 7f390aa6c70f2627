"""Chapter 8's study code against independent answers: the stacked drift against gtcore.moment_rhs, the lane
verdicts against closed forms, the peers' scheme and exact ranks, the draws."""

import math

import numpy as np
import pytest

from gtbook.studies.atlas.ensembles import Draw, conditions, draw_controls, ensemble_draws, peer_draws, targeted_draws
from gtbook.studies.atlas.outcomes import classify_lanes, growth_exponent
from gtbook.studies.atlas.peer import PeerSetting, closed_form_rank, exact_ranks, projected_euler_lanes
from gtcore import Controls, moment_rhs
from gtcore.moments.batched import stack_controls

I2 = np.eye(2)
J = np.array([[0.0, -1.0], [1.0, 0.0]])
B_MAP = np.array([[1.0, 0.4], [-0.2, 0.6]])
S0 = np.array([[1.0, 0.3], [0.3, 0.5]])


@pytest.mark.parametrize("attention", ["dot", "multihead", "l2", "sinkhorn"])
@pytest.mark.parametrize("d", [2, 5])
def test_stacked_drift_is_moment_rhs_lane_by_lane(attention, d):
    draws = ensemble_draws([d], 6, attentions=[attention]) + (
        targeted_draws([d], 2, attentions=[attention]) if attention in ("dot", "multihead") else []
    )
    built = [draw_controls(dr) for dr in draws]
    stack = stack_controls([b[0] for b in built])
    rng = np.random.default_rng(1)
    G = rng.standard_normal((len(built), d, d))
    S = G @ np.swapaxes(G, 1, 2) / d + 0.1 * np.eye(d)
    got = stack.covariance_rhs(S, np.arange(len(built)))
    for k, (ctl, _, _) in enumerate(built):
        want = moment_rhs(np.zeros(d), S[k], ctl)[1]
        np.testing.assert_allclose(got[k], want, rtol=1e-11, atol=1e-13 * np.abs(want).max())


def test_stack_refuses_mixed_lanes():
    with pytest.raises(ValueError, match="every lane needs d = 2"):
        stack_controls([Controls(A=I2), Controls(A=np.eye(3))])
    with pytest.raises(ValueError, match="at least one"):
        stack_controls([])


# ------------------------------------------------------------------ the lane verdicts, closed-form cases
def test_verdicts_of_cases_with_known_fates():
    cases = [
        (Controls(A=0.5 * I2 + 0.7 * J, V=-I2, B=B_MAP), "equilibrium", 2),  # chapter 4: converges
        (Controls(A=0.5 * I2 + 0.7 * J, V=I2, B=B_MAP), "finite-time blow-up", -1),
        (Controls(A=-0.5 * I2 + 0.7 * J, V=-I2, B=B_MAP), "collapse to 0", 0),
        (Controls(A=I2, V=np.diag([1.0, 2.0]), B=np.zeros((2, 2))), "exponential growth", -1),  # issue 24 item 1
        (Controls(V=I2, B=-np.diag([1.0, 0.0])), "lower-rank limit", 1),  # Sigma = (P0 + 2t e1 e1^T)^-1
        (Controls(A=J), "rotation", -1),  # a rotating covariance
    ]
    v = classify_lanes([c for c, _, _ in cases], S0)
    assert list(v.outcome) == [o for _, o, _ in cases]
    assert list(v.rank) == [r for _, _, r in cases]
    # the exponents: a simple pole has kappa ~ 0, exponential growth kappa = -1
    assert abs(v.kappa[1]) < 0.05 and abs(v.kappa[3] + 1) < 1e-6
    # the 1/t decay halves per doubling of t
    assert abs(v.alpha[4, 0] + 1) < 0.01 and abs(v.alpha[4, 1]) < 0.01


def test_what_the_doubling_test_leaves_undecided_is_named_or_decided_later():
    """Exponential decay at rate 2 eps = 0.004 has alpha = -0.004 T / ln 2 = -0.58 on [100, 200], between the
    bands, but -1.15 on [200, 400]: the adaptive horizon decides a collapse. Growth e^(2t) along one axis with
    collapse e^(-6t) across it loses float64's resolution of lambda_min (ratio e^(-8t) < 2.2e-13 at t = 3.6,
    norm 1.3e3 >= 100): growth with collapse. A nilpotent A grows Sigma like t^2, which has not reached the
    escape level at 8T while an eigenvalue still grows: undecided at the horizon."""
    from gtbook.studies.atlas.outcomes import DECIDED, EXTENSIONS

    cases = [
        (Controls(A=-0.002 * I2), "collapse to 0"),
        (Controls(A=np.diag([1.0, -3.0])), "growth with collapse"),
        (Controls(A=[[0.0, 1.0], [0.0, 0.0]]), "undecided at the horizon"),
    ]
    v = classify_lanes([c for c, _ in cases], np.eye(2))
    assert list(v.outcome) == [o for _, o in cases]
    assert v.t_end[0] == 400.0 and 400.0 <= 100.0 * 2 ** (1 + EXTENSIONS)
    assert abs(v.alpha[0, 0] - (-0.004 * 200 / np.log(2))) < 1e-6
    assert v.unresolved[1] and 3.0 < v.t_end[1] < 4.0
    assert v.t_end[2] == 800.0 and v.alpha[2, -1] > 1.5 and "undecided at the horizon" not in DECIDED


def test_pole_time_is_the_closed_form():
    from gtcore.riccati import blowup_time

    ctl = Controls(A=0.5 * I2 + 0.7 * J, V=I2, B=B_MAP)
    v = classify_lanes([ctl], S0)
    t_star = blowup_time(S0, ctl).t_star
    assert abs(v.t_pole[0] - t_star) / t_star < 1e-8


def test_growth_exponent_of_closed_forms():
    # ||S|| = c/(t* - t)^p: q = ||S||'/||S||^2 = p (t* - t)^(p-1)/c, so kappa = 1/p - 1
    for p in (1.0, 2.0, 0.5):
        t1, t2 = 1e-2, 1e-4
        n1, n2 = t1**-p, t2**-p
        assert abs(growth_exponent(n1, p * t1 ** (p - 1), n2, p * t2 ** (p - 1)) - (1 / p - 1)) < 1e-12
    # e^(rt): q = r e^(-rt)
    assert abs(growth_exponent(math.e**3, 2 * math.e**-3, math.e**9, 2 * math.e**-9) + 1) < 1e-12
    assert math.isnan(growth_exponent(1.0, 1.0, 1.0, 1.0))


def test_sinkhorn_and_l2_never_blow_up():
    # the same (V, Q, K) as chapter 7 (b): the dot product blows up, L2 and Sinkhorn grow exponentially
    Q = np.array([[1.0, 0.3], [0.3, 0.6]])
    ctls = [Controls(V=I2, Q=Q, K=I2, attention=a) for a in ("dot", "l2", "sinkhorn")]
    out = [classify_lanes([c], I2).outcome[0] for c in ctls]
    assert out == ["finite-time blow-up", "exponential growth", "exponential growth"]


def test_classify_lanes_rejects_bad_input():
    with pytest.raises(ValueError, match="positive definite"):
        classify_lanes([Controls(A=I2)], np.diag([1.0, 0.0]))
    with pytest.raises(ValueError, match="horizon"):
        classify_lanes([Controls(A=I2)], I2, horizon=-1.0)


# ----------------------------------------------------------------------------- the peers' experiment
def test_euler_scheme_against_the_closed_form():
    # V = I, B = -W: Sigma(t) = (P0 + 2tW)^-1; one Euler-projected run with a tiny step is close to it
    W = np.diag([2.0, 0.5, 0.0])
    ctl = Controls(V=np.eye(3), B=-W)
    run = projected_euler_lanes([ctl], np.eye(3), PeerSetting("t", 1e-3, 1e-12, 2000))
    assert run.status[0] == "max_iter" and run.iterations[0] == 2000
    exact = np.linalg.inv(np.eye(3) + 2 * 2.0 * W)
    np.testing.assert_allclose(run.Sigma[0], exact, atol=2e-3)
    # stops on the change: with a loose tolerance it converges early and counts a decaying eigenvalue
    early = projected_euler_lanes([ctl], np.eye(3), PeerSetting("t", 0.1, 1e-2, 10_000))
    assert early.status[0] == "converged" and early.rank[0] > closed_form_rank(ctl) == 1


def test_projection_keeps_sigma_psd_and_explosions_stop():
    ctl = Controls(V=np.eye(2), B=np.eye(2))  # sigma' = 2 sigma^2: blows up at t* = 1/2
    run = projected_euler_lanes([ctl], I2, PeerSetting("t", 0.01, 1e-9, 10_000), explode=1e3)
    assert run.status[0] == "exploded" and 0.45 < 0.01 * run.iterations[0] < 0.65
    assert np.all(run.eigenvalues >= 0)


def test_exact_ranks_of_the_peer_draws():
    draws = [dr for dr in peer_draws([3, 4], 4) if dr.variant == "identity"]
    for d in (3, 4):
        ctls = [draw_controls(dr)[0] for dr in draws if dr.d == d and dr.attention == "dot"]
        ex = exact_ranks(ctls, np.eye(d))
        assert list(ex.method) == ["closed form"] * len(ctls)
        assert list(ex.rank) == [math.ceil(d / 2)] * len(ctls) == list(ex.doubling_rank)


def test_closed_form_rank_refuses_its_outside():
    with pytest.raises(ValueError, match="V = I and A = 0"):
        closed_form_rank(Controls(A=I2, V=I2, B=-I2))
    with pytest.raises(ValueError, match="positive semidefinite"):
        closed_form_rank(Controls(V=I2, B=I2))


# ------------------------------------------------------------------------------------------- draws
def test_draws_are_reproducible_and_independent_of_their_company():
    a = draw_controls(Draw("conditions", "l2", 4, 7, 3))
    b = draw_controls(ensemble_draws([4], 10, seed=3, attentions=["l2"])[7])
    np.testing.assert_array_equal(a[0].Q, b[0].Q)
    np.testing.assert_array_equal(a[1], b[1])
    c = draw_controls(Draw("conditions", "l2", 4, 7, 4))
    assert not np.array_equal(a[0].Q, c[0].Q)  # another seed
    assert not np.array_equal(a[0].Q, draw_controls(Draw("conditions", "l2", 4, 8, 3))[0].Q)  # another index
    # L2 draws carry the drawn bilinear part: 2 K^T Q = B
    ctl = a[0]
    assert ctl.attention == "l2" and np.linalg.cond(ctl.K[0]) < 1e6


def test_peer_draws_follow_the_published_recipe():
    ctl, _, info = draw_controls(Draw("peer", "dot", 5, 0, 0, "identity"))
    Q = -ctl.K[0]
    assert Q.shape == (2, 5) and info["rank_Q"] == 2
    np.testing.assert_allclose(ctl.B[0], -Q.T @ Q / math.sqrt(5))
    np.testing.assert_array_equal(ctl.V[0], np.eye(5))
    w = draw_controls(Draw("peer", "l2", 4, 1, 0, "wishart"))[0]
    assert np.all(np.linalg.eigvalsh(w.V[0]) > 0) and w.attention == "l2"


def test_targeted_draws_mostly_satisfy_their_condition():
    for cond in ("stab", "blow"):
        got = [conditions(draw_controls(Draw("conditions", "dot", 4, i, 0, cond))[0])[cond] for i in range(20)]
        assert sum(got) >= 15


def test_conditions_read_signs_head_by_head():
    c = conditions(Controls(A=I2 + 0.1 * J, V=[-I2, np.diag([1.0, 2.0])], B=[I2, -B_MAP]))
    assert c["opposite"] and not c["same"] and c["stab"] and not c["scalar_V"] and c["A_class"] == "anti-stable"
    c = conditions(Controls(A=-I2, V=I2, B=B_MAP))
    assert c["same"] and not c["blow"]  # Hurwitz A: not the destabilising condition
