"""gtbook.studies.atlas.conditions and .summaries: every draw that meets a condition is counted (recounted here from
the matrices with plain numpy), the fractions' Wilson intervals (against the score equation solved directly), the
independent confirmation of a counterexample (against the V = vI equilibrium's closed form), and the scopes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import solve_continuous_lyapunov

from gtbook.studies.atlas.conditions import (
    CONFIRM_RATIO,
    ConditionCount,
    FiniteNStudy,
    condition_study,
    confirm_counterexamples,
)
from gtbook.studies.atlas.ensembles import draw_controls
from gtbook.studies.atlas.study import FiniteNCheck
from gtbook.studies.atlas.summaries import PEER_FAMILY, closed_form_checks, peer_study
from gtcore import Controls


@pytest.fixture(scope="module")
def study():
    # the chapter's d = 2 draws (a draw does not depend on the others): 4 attention types x 6, and 3 targeted
    # draws per (condition, dot type); they hold one stabilising counterexample with a general V
    return condition_study([2], 6, 3, seed=0)


def _sign(M):
    w = np.linalg.eigvalsh(0.5 * (M + M.T))
    return 1 if w[0] > 0 else -1 if w[-1] < 0 else 0


def _meets(ctl: Controls, condition: str) -> bool:
    """The condition from the matrices: every head's V and B definite (opposite / same signs), A anti-stable."""
    anti_stable = bool(np.all(np.linalg.eigvals(ctl.affine_A).real > 0))
    products = [_sign(V) * _sign(B) for V, B in zip(ctl.V, ctl.B, strict=True)]
    want = -1 if condition == "stab" else 1
    return anti_stable and all(p == want for p in products)


def _scalar(ctl: Controls) -> bool:
    return all(np.array_equal(V, V[0, 0] * np.eye(ctl.d)) for V in ctl.V)


def test_every_draw_that_meets_a_condition_is_counted(study):
    outcome = dict(zip(study.full.column("key"), study.full.column("outcome"), strict=True))
    for (cond, scalar), count in study.counts.items():
        expected = {
            dr.key
            for dr in study.draws
            if dr.attention in ("dot", "multihead")
            and _meets(draw_controls(dr)[0], cond)
            and _scalar(draw_controls(dr)[0]) == scalar
        }
        assert {r["key"] for r in count.rows} == expected, (cond, scalar)
        assert {r["key"] for r in count.bad} == {k for k in expected if outcome[k] != count.predicted}
        assert count.n == len(expected) and count.in_regime == count.n - len(count.bad)
    # the draws this test knows: the d = 2 stabilising counterexample with a general V, and draws in every count
    assert [r["key"] for r in study.count("stab", False).bad] == ["conditions/multihead/stab/d2/0"]
    assert all(c.n > 0 for c in study.counts.values())


def _wilson_by_roots(k, n, z=1.959963984540054):
    # the score interval: the p with (k/n - p)^2 = z^2 p (1 - p) / n, a quadratic in p
    ph = k / n
    roots = np.roots([1 + z * z / n, -(2 * ph + z * z / n), ph * ph])
    return float(min(roots.real)), float(max(roots.real))


def test_fraction_and_interval(study):
    for count in study.counts.values():
        assert count.fraction == pytest.approx(count.in_regime / count.n)
        lo, hi = _wilson_by_roots(count.in_regime, count.n)
        assert count.interval == pytest.approx((max(lo, 0.0), min(hi, 1.0)), abs=1e-12)
    empty = ConditionCount("stab", False, [], [], [])
    assert math.isnan(empty.fraction) and empty.interval == (0.0, 1.0)
    assert empty.scope() == {"system": "moment ODE", "V": "general", "heads": 2}


def test_scopes_read_the_draws(study):
    count = study.count("stab", True)
    s = count.scope()
    assert s["V"] == "scalar" and s["d"] == (2,) and s["attention"] == ("dot",)
    assert s["heads"] == max(2 if r["attention"] == "multihead" else 1 for r in count.rows)
    g = study.count("stab", False).scope()
    assert g["V"] == "symmetric" and g["B"] == "general" and g["A"] == "general"  # Wishart V, B with a skew part
    assert study.count("stab", False).scope(counterexamples=True)["heads"] == 2  # the counterexample has two heads
    assert study.scope(["l2", "sinkhorn"])["attention"] == ("l2", "sinkhorn")


def test_counterexample_confirmed_and_reference_at_the_closed_form_equilibrium(study):
    cex = confirm_counterexamples(study, horizon=100.0, references=1)
    assert [c.key for c in cex.items] == ["conditions/multihead/stab/d2/0"] and cex.all_confirmed
    assert cex.items[0].lam_min < CONFIRM_RATIO * cex.items[0].lam_max
    bad = draw_controls(next(dr for dr in study.draws if dr.key == cex.items[0].key))[0]
    assert cex.items[0].v_signs == tuple({-1: "negative", 1: "positive", 0: "indefinite"}[_sign(V)] for V in bad.V)
    # the reference (V = vI) ends at the equilibrium whose inverse solves P A + A^T P = -sum_h v_h (B_h + B_h^T)
    ref = cex.references[0]
    ctl = draw_controls(next(dr for dr in study.draws if dr.key == ref.key))[0]
    rhs = -sum(V[0, 0] * (B + B.T) for V, B in zip(ctl.V, ctl.B, strict=True))
    P = solve_continuous_lyapunov(ctl.affine_A.T, rhs)
    lam = np.linalg.eigvalsh(np.linalg.inv(P))
    assert ref.ratio[-1] == pytest.approx(lam[0] / lam[-1], rel=1e-6)
    assert not ref.confirmed
    assert "yes" in cex.table() and cex.figure() is not None
    with pytest.raises(ValueError, match="condition"):
        confirm_counterexamples(study, "blow")


def test_finite_n_scope_counts_the_informative_checks_only():
    dot = Controls(A=np.eye(2), V=-np.eye(2), B=np.eye(2))
    l2 = Controls(A=np.eye(3), V=np.diag([1.0, 2.0, 3.0]), Q=np.eye(3), K=np.eye(3), attention="l2")
    checks = [
        FiniteNCheck("a", "equilibrium", 0.5, 0.1, 0.05, 0.2),  # the attention-free ODE is below the floor
        FiniteNCheck("b", "exponential growth", 0.5, 0.1, 0.9, 0.3),
    ]
    fin = FiniteNStudy(checks, {"a": dot, "b": l2})
    assert [c.draw for c in fin.informative] == ["b"]
    assert fin.worst == pytest.approx(0.5)
    s = fin.scope()
    assert s["system"] == "tokens" and s["attention"] == ("l2",) and s["d"] == (3,) and s["V"] == "symmetric"
    assert "| `a` |" in fin.table() and "| no |" in fin.table()


def test_closed_form_checks_look_at_one_head_scalar_v_dot_draws(study):
    checks = closed_form_checks(study.sweep, study.ensemble)
    assert checks.layers and all(c.heads == 1 and _scalar(c) and c.attention == "dot" for c in checks.layers)
    assert checks.contradictions == [] and checks.scope()["V"] == "scalar"


def test_peer_scope_is_the_peers_family():
    peer = peer_study([3], 2, seed=0)
    ident = peer.scope(variant="identity", attention=["dot"])
    assert ident["family"] == PEER_FAMILY and ident["V"] == "scalar" and ident["A"] == "zero"
    assert ident["B"] == "symmetric" and ident["attention"] == ("dot",)
    assert peer.scope()["V"] == "symmetric" and peer.scope()["attention"] == ("dot", "l2")
    # off_rank counts V = I draws whose exact rank is not ceil(d/2): recounted from the rows
    rows = [r for r in peer.comparison.rows if r.variant == "identity"]
    assert peer.off_rank == sum(int(r.exact.sum()) - int(r.exact[2]) for r in rows)
