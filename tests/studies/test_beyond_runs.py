"""Chapter 2's section functions (gtbook.studies.beyond.runs): the layer family against its closed-form fold."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.studies.beyond.runs import ReluLayer

W = [[1.5, -1.0], [1.0, 0.5]]


@pytest.mark.parametrize("c0", [0.0, 1.0, 2.5])
def test_identity_activation_layer_is_x_to_Wx_plus_drift_whatever_c0(c0):
    """b = -Wc + drift cancels the block's bias: the fold is A = W, b = drift for every offset."""
    ctl = ReluLayer(2.0, 0.5, W, [1.0, 0.0])(c0)
    np.testing.assert_allclose(ctl.affine_A, W, atol=1e-15)
    np.testing.assert_allclose(ctl.affine_b, [1.0, 0.0], atol=1e-14)
    np.testing.assert_allclose(ctl.c, [c0, c0])
    np.testing.assert_allclose(ctl.V[0], -2.0 * np.eye(2))
    np.testing.assert_allclose(ctl.B[0], 0.5 * np.eye(2))


def test_prediction_table_starts_at_the_input():
    table = ReluLayer(2.0, 0.5, W, [1.0, 0.0]).prediction([0.0, 1.0])
    assert table["t=0"]["mu"] == [0.0, 0.0] and table["t=0"]["Sigma"] == [[1.0, 0.0], [0.0, 1.0]]
    assert set(table) == {"t=0", "t=1"}
