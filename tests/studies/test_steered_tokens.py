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


def _one_at_a_time(d, r, Ns, *, draws, seeds, steps, seed, transposed, T=1.0, kappa_cap=0.45):
    """The study's D_N and E_N computed directly, one cloud and one simulate() at a time (the reference answer)."""
    from gtcore.attention import max_sampling_strength
    from gtcore.moments import integrate_moments
    from gtcore.particles import simulate
    from gtcore.reachability import steer
    from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments

    rng = np.random.default_rng(seed)
    D, E = np.empty((draws, len(Ns), seeds)), np.empty((draws, len(Ns), seeds))
    for k in range(draws):
        while True:
            mu0, F0, mu1, F1, V, B = random_steering_draw(d, r, rng)
            S0, S1 = F0 @ F0.T, F1 @ F1.T
            ctl = steer(mu0, S0, mu1, S1, T, heads=(V, B))
            ref = integrate_moments(mu0, S0, ctl, (0.0, T), t_eval=np.linspace(0.0, T, 41), rtol=1e-11, atol=1e-13)
            if ref.status == "completed" and max_sampling_strength(ctl, ref.t, ref.Sigma) < kappa_cap:
                break
        scale = np.sqrt(np.trace(S1))
        for i, N in enumerate(Ns):
            for s in range(seeds):
                x0 = mu0 + np.random.default_rng(seed + 1000 * (k + 1) + s).standard_normal((N, r)) @ F0.T
                run = simulate(
                    x0, _TransposedHead(ctl) if transposed else ctl, (0.0, T), steps, record_every=steps, device="cpu"
                )
                m, S = empirical_moments(run.final_tokens)
                own = integrate_moments(*empirical_moments(x0), ctl, (0.0, T), rtol=1e-10, atol=1e-12)
                D[k, i, s] = bures_wasserstein(m, S, mu1, S1) / scale
                E[k, i, s] = bures_wasserstein(m, S, own.mu[-1], own.Sigma[-1]) / scale
    return D, E


def test_the_study_and_its_control_computed_together_match_one_cloud_at_a_time():
    from gtbook.studies.reachability.steered_tokens import steered_tokens_and_control

    kw = dict(draws=2, steps=6, seed=4)
    gauss, control = steered_tokens_and_control(3, 2, [60, 120], seeds=3, control_seeds=2, **kw)
    for res, seeds, transposed in ((gauss, 3, False), (control, 2, True)):
        D, E = _one_at_a_time(3, 2, [60, 120], seeds=seeds, transposed=transposed, **kw)
        assert res.transposed is transposed and res.distance.shape == (2, 2, seeds)
        np.testing.assert_allclose(res.distance, D, rtol=1e-12, atol=0)
        np.testing.assert_allclose(res.dynamic, E, rtol=1e-12, atol=0)
    alone = steered_tokens(3, 2, [60, 120], seeds=2, transposed=True, **kw)  # the single-head entry point
    assert np.array_equal(alone.distance, control.distance) and np.array_equal(alone.dynamic, control.dynamic)
