"""gtbook.studies.invariance.ensemble: general draws, the stack over an ensemble, Gaussianity of the flow."""

import numpy as np
import pytest

from gtbook.studies.invariance.ensemble import (
    GeneralDraw,
    gaussianity_ensemble,
    general_draw,
    general_draws,
    relu_variant,
    stack_ensemble,
)
from gtcore import Controls, simulate
from gtcore.attention import max_sampling_strength


def test_draws_are_general_and_at_the_requested_strength():
    ctl, _mu0, S0 = general_draw(3, np.random.default_rng(0), kappa=0.2)
    assert max_sampling_strength(ctl, [0.0], [S0]) == pytest.approx(0.2, rel=1e-9)
    B, V = ctl.B[0], ctl.V[0]
    assert np.abs(B - B.T).max() > 1e-2 and np.abs(V - V[0, 0] * np.eye(3)).max() > 1e-2 and np.abs(ctl.A).max() > 0
    ev = np.linalg.eigvalsh(S0)
    assert ev[0] > 0 and ev[-1] / ev[0] > 1.5  # full rank and anisotropic
    draws = general_draws(4, 3, T=1.0, seed=1, kappa=0.3, kappa_cap=0.45)
    assert len(draws) == 4 and all(dr.kappa_max < 0.45 for dr in draws)


def test_relu_variant_folds_to_the_layer_plus_gain_identity():
    dr = general_draws(1, 3, T=1.0, seed=2)[0]
    c = relu_variant(dr.controls, dr.mu0, gain=0.5)
    np.testing.assert_allclose(c.affine_A, dr.controls.A + 0.5 * np.eye(3))
    np.testing.assert_allclose(c.affine_b, dr.controls.b - 0.5 * dr.mu0)
    # coordinates above the kink (through mu0) are pushed by 0.5 (x - mu0), those below not at all
    x = dr.mu0 + np.array([[1.0, -1.0, -2.0], [-1.0, 2.0, 0.5]])
    no_att = Controls(A=np.zeros((3, 3)), U=c.U, W=c.W, c=c.c)
    v = simulate(x, no_att, (0.0, 1e-6), 1, method="euler", ff="relu", device="cpu").final_tokens - x
    np.testing.assert_allclose(v / 1e-6, [[0.5, 0.0, 0.0], [0.0, 1.0, 0.25]], atol=1e-8)


def test_stack_without_attention_is_exact_for_every_draw():
    # affine layers: the Euler stack maps each sample exactly as the layer map maps its moments
    draws = [
        GeneralDraw(Controls(A=dr.controls.A, b=dr.controls.b), dr.mu0, dr.Sigma0, 0.0)
        for dr in general_draws(2, 3, T=1.0, seed=3)
    ]
    st = stack_ensemble(draws, 1.0, 6, [40, 80], 2, law="uniform")
    assert st.errors.shape == (2, 2, 2) and st.errors.max() < 1e-12 and st.nonaffine.max() < 1e-12


def test_stack_error_shrinks_for_gaussian_tokens_only():
    draws = general_draws(2, 3, T=1.0, seed=4)
    g = stack_ensemble(draws, 1.0, 6, [100, 1600], 3, seed=5)
    u = stack_ensemble(draws, 1.0, 6, [100, 1600], 3, law="uniform", seed=5)
    assert g.slope < -0.3 and u.slope > -0.2
    assert g.nonaffine_slope < -0.3 and u.nonaffine_slope > -0.2
    assert g.slope_standard_error(n_boot=200) > 0 and g.slope_standard_error("nonaffine", n_boot=200) > 0


def test_relu_block_breaks_gaussianity_the_flow_does_not():
    draws = general_draws(3, 3, T=1.0, seed=6)
    flow = gaussianity_ensemble(draws, 1.0, 6, 800, seed=7)
    relu = gaussianity_ensemble(draws, 1.0, 6, 800, relu=True, seed=7)
    assert np.all(relu > flow) and relu.mean() > 1.5 * flow.mean()
