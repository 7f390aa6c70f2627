"""The traced sides of a claim (gtbook.sides): a reproduction whose prediction runs the code path of its
observation is refused; one whose sides are independent is recorded with both lists."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.claims import evaluate_claim
from gtbook.sides import shared_code, side
from gtcore import Controls, integrate_moments, moment_rhs, simulate

TOKENS = {"system": "tokens", "d": 3}


@pytest.fixture
def layer():
    rng = np.random.default_rng(0)
    d = 3
    return Controls(
        A=-np.eye(d) + 0.1 * rng.standard_normal((d, d)),
        V=0.2 * rng.standard_normal((d, d)),
        B=0.2 * rng.standard_normal((d, d)),
    )


def test_tokens_against_the_ode_share_no_model_code(layer):
    x0 = np.random.default_rng(1).standard_normal((64, 3))
    with side("observed") as obs:
        cloud = simulate(x0, layer, (0.0, 0.2), steps=4, device="cpu")
    with side("predicted") as pred:
        traj = integrate_moments(np.zeros(3), np.eye(3), layer, (0.0, 0.2))
    assert any(f.startswith("gtcore.particles:") for f in obs.functions)
    assert any(f.startswith("gtcore.moments") for f in pred.functions)
    assert shared_code(obs, pred) == []
    c = evaluate_claim(
        "ok",
        float(np.linalg.norm(cloud.mu[-1] - traj.mu[-1])),
        statement="invariance",
        kind="reproduces",
        lt=10.0,
        scope=TOKENS,
        sides=(obs, pred),
    )
    assert c.sides["observed"] and c.sides["predicted"]


def test_a_prediction_computed_by_the_code_it_checks_is_refused(layer):
    with side("observed") as obs:
        a = integrate_moments(np.zeros(3), np.eye(3), layer, (0.0, 0.2))
    with side("predicted") as pred:
        b = moment_rhs(np.zeros(3), np.eye(3), layer)
    shared = shared_code(obs, pred)
    assert any("gtcore.moments.ode" in f for f in shared), shared
    with pytest.raises(ValueError, match="computed by the code path it is compared with"):
        evaluate_claim(
            "circular",
            float(np.abs(a.mu[-1]).sum() + np.abs(b[0]).sum()),
            statement="invariance",
            kind="reproduces",
            lt=10.0,
            scope=TOKENS,
            sides=(obs, pred),
        )
    # a derivation may run eq. (1.1) on both sides: it checks the mathematics, not the model
    assert evaluate_claim(
        "d", 0.1, statement="reduction", kind="derivation", lt=1.0, scope="moment ODE", sides=(obs, pred)
    ).passed


def test_the_plumbing_both_sides_share_is_not_counted(layer):
    with side("observed") as obs:
        Controls(A=np.eye(2))
    with side("predicted") as pred:
        Controls(A=2 * np.eye(2))
    assert obs.functions and shared_code(obs, pred) == []
    with pytest.raises(ValueError, match="observed, predicted"):
        evaluate_claim("x", 0.1, statement="invariance", kind="reproduces", lt=1.0, scope=TOKENS, sides=(obs,))
