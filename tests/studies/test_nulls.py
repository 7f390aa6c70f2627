"""gtbook.studies.nulls: signed deviations of clouds from their moment ODE, plain and extrapolated (the tests on them:
tests/core/test_inference.py)."""

import numpy as np
import pytest

from gtbook.studies.nulls import signed_deviation
from gtcore.stats.inference import extrapolated_deviations, hotelling_test


def test_signed_deviation_layout_and_scale():
    S = np.diag([4.0, 1.0])
    dev = signed_deviation([0.2, 0.0], S + np.array([[0.0, 0.1], [0.1, 0.0]]), [0.0, 0.0], S)
    nF = np.sqrt(17.0)
    np.testing.assert_allclose(dev, [0.2 / 2.0, 0.0, 0.0, 0.1 / nF, 0.0])
    assert signed_deviation([0, 0], S, [0, 0], S, mean=False).shape == (3,)
    with pytest.raises(ValueError, match="shapes"):
        signed_deviation([0, 0, 0], S, [0, 0], S)


def test_flow_deviations_accept_the_right_ode_and_reject_a_wrong_one():
    from gtbook.studies.nulls import flow_deviations
    from gtcore import Controls

    ctl = Controls(A=[[0.1, 0.5], [-0.5, 0.0]], b=[0.2, 0.0], V=[[0.4, 0.1], [0.0, 0.3]], B=[[-0.3, 0.2], [0.0, -0.2]])
    wrong = Controls(A=ctl.A, b=ctl.b, V=1.1 * ctl.V[0], B=ctl.B[0])  # the attention term 10 % too large
    no_att = Controls(A=ctl.A, b=ctl.b)
    dev = flow_deviations(no_att, [0.3, 0.0], np.eye(2), 1.0, 200, 8, 40, predictions={"right": no_att, "wrong": wrong})
    # an affine flow follows its ODE from the cloud's own moments exactly, up to RK4's O(h^4) error
    assert np.abs(dev["right"]).max() < 1e-9
    dev = flow_deviations(
        ctl, [0.3, 0.0], np.eye(2), 1.0, 1000, 12, 4, predictions={"right": ctl, "wrong": wrong}, seed=3
    )
    assert dev["right"].shape == (12, 5)
    assert hotelling_test(dev["wrong"]).ratio > 1 > hotelling_test(dev["right"]).ratio


def test_extrapolated_flow_deviations_pair_clouds_of_two_sizes_on_disjoint_seeds():
    from gtbook.studies.nulls import extrapolated_flow_deviations, flow_deviations
    from gtcore import Controls

    ctl = Controls(A=[[0.0, -0.3], [0.3, 0.0]], V=[[-0.8, -0.3], [0.3, -0.8]], B=[[0.5, 0.1], [0.0, 0.4]])
    mu0, S0, preds = [0.5, -0.3], [[1.0, 0.3], [0.3, 0.5]], {"own": ctl}
    z, large = extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, ratio=3, seed=7)
    big = flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, seed=7, mean=False, kernel_dtype=None)
    small = flow_deviations(ctl, mu0, S0, 0.5, 30, 4, 5, predictions=preds, seed=57, mean=False, kernel_dtype=None)
    np.testing.assert_array_equal(large["own"], big["own"])
    np.testing.assert_array_equal(z["own"], extrapolated_deviations(small["own"], big["own"], 30, 90))
    with pytest.raises(ValueError, match="share seeds"):
        extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 60, 5, predictions=preds)
    with pytest.raises(ValueError, match="ratio"):
        extrapolated_flow_deviations(ctl, mu0, S0, 0.5, 90, 4, 5, predictions=preds, ratio=1)
