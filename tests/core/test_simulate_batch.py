"""simulate_batch and the ensemble studies that use it: the same numbers as one simulate per cloud.

The reference is the loop the studies ran before (one :func:`gtcore.particles.simulate` per cloud, or the
per-draw :func:`gtbook.studies.invariance.nongaussian.softmax_stack_study`): every array must be equal, not close.
"""

import numpy as np
import pytest
import torch

from gtbook.studies.invariance.ensemble import gaussianity_ensemble, general_draws, stack_ensemble
from gtbook.studies.invariance.nongaussian import softmax_stack_study
from gtbook.studies.stability.general_v import mean_steering_draws, mean_steering_tokens
from gtcore import Controls, gaussian_tokens
from gtcore.particles import simulate, simulate_batch
from gtcore.stats.gaussianity import sliced_w2


def _same(a, b):
    assert a.status == b.status and a.threshold_time == b.threshold_time
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.Sigma, b.Sigma)
    np.testing.assert_array_equal(a.final_tokens, b.final_tokens)
    if a.tokens is not None or b.tokens is not None:
        np.testing.assert_array_equal(a.tokens, b.tokens)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_batch_gives_the_numbers_of_one_simulate_per_cloud(workers):
    """Clouds of several sizes, one layer each (one of them blows up), float32 kernel, kept tokens."""
    rng = np.random.default_rng(4)
    ctls = [
        Controls(
            A=0.3 * rng.standard_normal((3, 3)),
            V=0.5 * rng.standard_normal((3, 3)),
            B=0.4 * rng.standard_normal((3, 3)),
        )
        for _ in range(3)
    ]
    ctls.append(Controls(A=12.0 * np.eye(3), V=np.eye(3), B=np.eye(3)))  # |Sigma| passes blowup_norm = 1e8
    x0s = [gaussian_tokens(N, np.zeros(3), np.eye(3), seed=s) for N in (60, 150) for s in range(4)]
    layers = [ctls[i % 4] for i in range(len(x0s))]
    opts = dict(method="rk4", keep_tokens=True, device="cpu", kernel_dtype=torch.float32, record_every=2)
    ref = [simulate(x, c, (0.0, 1.0), 8, **opts) for x, c in zip(x0s, layers, strict=True)]
    got = simulate_batch(x0s, layers, (0.0, 1.0), 8, workers=workers, **opts)
    assert any(r.status == "blowup" for r in ref)
    for a, b in zip(ref, got, strict=True):
        _same(a, b)


def test_one_layer_for_every_cloud_and_a_large_cloud_alone():
    """One Controls for all; a cloud above SERIAL_WORK (H N^2 d >= 2^26) runs alone with the caller's threads."""
    ctl = Controls(A=-0.2 * np.eye(4), V=0.3 * np.eye(4), B=0.2 * np.eye(4))
    x0s = [gaussian_tokens(4096, np.zeros(4), np.eye(4), seed=0), gaussian_tokens(50, np.zeros(4), np.eye(4), seed=1)]
    before = torch.get_num_threads()
    got = simulate_batch(x0s, ctl, (0.0, 0.2), 1, workers=2, device="cpu")
    assert torch.get_num_threads() == before
    for x, g in zip(x0s, got, strict=True):
        _same(simulate(x, ctl, (0.0, 0.2), 1, device="cpu"), g)


def test_bad_batches_are_refused_naming_the_cloud_or_option():
    ctl = Controls(A=-np.eye(2))
    good = gaussian_tokens(10, np.zeros(2), np.eye(2), seed=0)
    with pytest.raises(ValueError, match="cloud 1: x0 has non-finite"):
        simulate_batch([good, np.full((10, 2), np.nan)], ctl, (0.0, 1.0), 2)
    with pytest.raises(ValueError, match="controls: 1 given for 2 clouds"):
        simulate_batch([good, good], [ctl], (0.0, 1.0), 2)
    with pytest.raises(ValueError, match="progress"):
        simulate_batch([good], ctl, (0.0, 1.0), 2, progress=True)
    with pytest.raises(ValueError, match="unknown option"):
        simulate_batch([good], ctl, (0.0, 1.0), 2, stepz=3)
    with pytest.raises(ValueError, match="workers"):
        simulate_batch([good], ctl, (0.0, 1.0), 2, workers=0)


# ----------------------------------------------------------------------------- the studies
def test_stack_ensemble_equals_the_per_draw_study():
    draws = general_draws(2, 3, T=1.0, seed=5)
    Ns, seeds = [40, 80], 2
    got = stack_ensemble(draws, 1.0, 4, Ns, seeds, seed=11)
    for k, dr in enumerate(draws):
        st = softmax_stack_study(dr.mu0, dr.Sigma0, dr.controls, 1.0, 4, Ns, seeds, seed=11 + 1000 * k)
        np.testing.assert_array_equal(got.errors[k], st.errors)
        np.testing.assert_array_equal(got.nonaffine[k], st.nonaffine)


@pytest.mark.parametrize("relu", [False, True])
def test_gaussianity_ensemble_equals_one_simulate_per_draw(relu):
    from gtbook.studies.invariance.ensemble import relu_variant
    from gtbook.studies.precision import STUDY_KERNEL_DTYPE

    draws = general_draws(3, 3, T=1.0, seed=6)
    got = gaussianity_ensemble(draws, 1.0, 3, 120, relu=relu, seed=21, projections_seed=2)
    for k, dr in enumerate(draws):
        ctl = relu_variant(dr.controls, dr.mu0) if relu else dr.controls
        tr = simulate(
            gaussian_tokens(120, dr.mu0, dr.Sigma0, 21 + k),
            ctl,
            (0.0, 1.0),
            3,
            ff="relu" if relu else "identity",
            record_every=3,
            keep_tokens=True,
            device="cpu",
            kernel_dtype=STUDY_KERNEL_DTYPE,
        )
        assert got[k] == sliced_w2(tr.tokens[-1], seed=2)


def test_mean_steering_tokens_equals_one_simulate_per_cloud():
    draws = mean_steering_draws(2, 2, seed=3)
    got = mean_steering_tokens(draws, [30, 60], seeds=2, seed=9)
    for k, dr in enumerate(draws):
        steps = int(np.ceil(dr.T / 0.1))
        for i, N in enumerate([30, 60]):
            for s in range(2):
                run = simulate(
                    gaussian_tokens(N, dr.mu0, dr.Sigma_star, 9 + 1000 * (k + 1) + s),
                    dr.controls,
                    (0.0, dr.T),
                    steps,
                    record_every=steps,
                    device="cpu",
                )
                want = np.linalg.norm(run.final_tokens.mean(axis=0) - dr.mu_target) / np.sqrt(np.trace(dr.Sigma_star))
                assert got.error[k, i, s] == want
