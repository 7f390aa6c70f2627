"""Reachability on tokens (gtbook.studies.reachability.steered_tokens)."""

import numpy as np

from gtbook.studies.reachability.steered_tokens import _TransposedHead, random_steering_draw, steered_tokens


def test_draws_are_general_and_of_the_given_rank():
    _, F0, _, F1, V, B = random_steering_draw(4, 2, np.random.default_rng(0))
    assert np.linalg.matrix_rank(F0 @ F0.T) == 2 == np.linalg.matrix_rank(F1 @ F1.T)
    assert np.abs(B - B.T).max() > 1e-3 and np.abs(V - V[0, 0] * np.eye(4)).max() > 1e-3


def test_the_transposed_head_changes_only_B():
    from gtcore import Controls

    B = np.array([[0.1, 0.4], [-0.2, 0.3]])
    ctl = Controls(A=np.eye(2), b=np.ones(2), V=0.5 * np.eye(2), B=B)
    c = _TransposedHead(ctl)(0.0)
    assert np.array_equal(c.B[0], B.T) and np.array_equal(c.A, ctl.A) and np.array_equal(c.V, ctl.V)


def test_ode_steering_is_exact_and_tokens_approach_it():
    run = steered_tokens(3, 2, [100, 800], draws=2, seeds=2, steps=12, seed=4)
    assert run.ode_error < 1e-5  # the constructive controls hit the target on eq. (1.1)
    assert run.dynamic_slope < -0.2 and run.dynamic.mean() < 0.02
    wrong = steered_tokens(3, 2, [100, 800], draws=2, seeds=2, steps=12, seed=4, transposed=True)
    assert wrong.dynamic.mean() > 3 * run.dynamic.mean() and wrong.dynamic_slope > -0.15
