"""Mean steering with a general V (gtbook.studies.stability.general_v)."""

import numpy as np

from gtbook.studies.stability.general_v import mean_steering_draws, mean_steering_tokens


def test_draws_are_general_and_the_closed_forms_match_the_integration():
    draws = mean_steering_draws(3, 3, seed=1)
    for dr in draws:
        V, B = dr.controls.V[0], dr.controls.B[0]
        assert np.linalg.eigvalsh(0.5 * (V + V.T)).max() < 0 and np.abs(V - V[0, 0] * np.eye(3)).max() > 1e-3
        assert np.linalg.eigvalsh(B + B.T).min() > 0 and np.abs(B - B.T).max() > 1e-3
        assert np.linalg.eigvalsh(dr.Sigma_star).min() > 0 and dr.rate >= 0.5 and dr.kappa < 0.45
        assert dr.ode_mean_error < 1e-8 and dr.ode_cov_error < 1e-8
        assert dr.ode_wrong_mean_error > 1e-2  # the bias from Sigma0 is not the one that steers


def test_tokens_follow_in_an_easy_draw_and_the_wrong_bias_does_not():
    draws = mean_steering_draws(1, 3, seed=1)
    right = mean_steering_tokens(draws, [100, 400], seeds=2, seed=3)
    wrong = mean_steering_tokens(draws, [100, 400], seeds=2, seed=3, wrong=True)
    assert right.error.shape == (1, 2, 2)
    assert right.error[:, -1].mean() < 0.5 * wrong.error[:, -1].mean()
