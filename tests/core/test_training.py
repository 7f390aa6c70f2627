"""gtcore.training: the trainable finite-N Transformer, its W2 loss, the rank floor, the trainer."""

from __future__ import annotations

import functools
import itertools
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from gtbook.checkpoints import TorchFile
from gtcore import Controls, bures_wasserstein, gaussian_tokens, layer_stack, training
from gtcore.particles import simulate
from gtcore.training import (
    TrainingStatus,
    apply_transformer,
    best_rank_approximation,
    control_energy,
    empirical_rank_floor,
    gaussian_energy,
    layer_controls,
    piecewise,
    rank_floor,
    train_transformer,
    transformer_tokens,
    w2_squared,
)


def _random_layers(rng, L, d, H, scale=0.4):
    A = scale * rng.standard_normal((L, d, d))
    b = rng.standard_normal((L, d))
    V = scale * rng.standard_normal((L, H, d, d))
    B = scale * rng.standard_normal((L, H, d, d))
    return A, b, V, B


def _t(a):
    return torch.as_tensor(a, dtype=torch.float64)


# ------------------------------------------------------------------------------ the network
def test_transformer_tokens_is_simulate_with_euler_steps():
    """L layers with per-layer controls are simulate(method='euler', steps=L) for the piecewise controls."""
    rng = np.random.default_rng(0)
    L, d, H, T, N = 5, 3, 2, 1.3, 60
    A, b, V, B = _random_layers(rng, L, d, H)
    x0 = rng.standard_normal((N, d))
    ours = transformer_tokens(_t(x0), _t(A), _t(b), _t(V), _t(B), T / L).numpy()
    ctl = layer_controls(A, b, V, B)
    ref = simulate(x0, piecewise(ctl, T), (0.0, T), L, method="euler", device="cpu").final_tokens
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(apply_transformer(x0, ctl, T / L), ref, rtol=0, atol=1e-12)


def test_transformer_tokens_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    L, d, H, N = 2, 2, 1, 7
    A, b, V, B = (_t(a).requires_grad_() for a in _random_layers(rng, L, d, H, scale=0.5))
    x0 = _t(rng.standard_normal((N, d)))
    w = _t(rng.standard_normal((N, d)))
    assert torch.autograd.gradcheck(
        lambda *p: (transformer_tokens(x0, *p, 0.3) * w).sum(), (A, b, V, B), eps=1e-6, atol=1e-6
    )


# ------------------------------------------------------------------------------ distances
def test_w2_squared_against_every_permutation():
    rng = np.random.default_rng(2)
    for _ in range(5):
        x, y = rng.standard_normal((6, 2)), rng.standard_normal((6, 2)) + 0.5
        brute = min(np.mean(np.sum((x - y[list(p)]) ** 2, 1)) for p in itertools.permutations(range(6)))
        assert w2_squared(x, y) == pytest.approx(brute, rel=1e-12, abs=1e-14)


def test_w2_squared_in_one_dimension_is_the_sorted_matching():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((200, 1)), 2.0 * rng.standard_normal((200, 1)) + 1.0
    assert w2_squared(x, y) == pytest.approx(np.mean((np.sort(x[:, 0]) - np.sort(y[:, 0])) ** 2), rel=1e-12)


def test_w2_squared_refuses_unequal_shapes():
    with pytest.raises(ValueError, match="same shape"):
        w2_squared(np.zeros((4, 2)), np.zeros((5, 2)))


# ------------------------------------------------------------------------------ the rank floor
def _random_covariance(rng, d):
    G = rng.standard_normal((d, d))
    return G @ G.T / d + 0.1 * np.eye(d)


@pytest.mark.parametrize("d,r", [(3, 1), (3, 2), (4, 2), (4, 3)])
def test_rank_floor_is_the_least_w2_to_rank_r_gaussians(d, r):
    """F_r against a brute-force minimisation of W2^2 over N(m, G G^T), G of shape (d, r), from several starts.

    The objective is the Bures formula written with the singular values of Sigma1^(1/2) G,
    tr (Sigma1^(1/2) G G^T Sigma1^(1/2))^(1/2) = sum_k s_k(Sigma1^(1/2) G), which is smooth where the r singular
    values are positive (the eigenvalue form has d - r zero eigenvalues under a square root, too rough for
    finite-difference gradients); gtcore's bures_wasserstein is checked at the minimiser.
    """
    rng = np.random.default_rng(10 * d + r)
    mu1, S1 = rng.standard_normal(d), _random_covariance(rng, d)
    w, U = np.linalg.eigh(S1)
    root = (U * np.sqrt(w)) @ U.T

    def w2sq(p):
        m, G = p[:d], p[d:].reshape(d, r)
        return (
            np.sum((m - mu1) ** 2)
            + np.sum(G**2)
            + np.trace(S1)
            - 2.0 * np.sum(np.linalg.svd(root @ G, compute_uv=False))
        )

    sols = [minimize(w2sq, rng.standard_normal(d + d * r), method="BFGS", options={"gtol": 1e-10}) for _ in range(6)]
    best = min(sols, key=lambda s: s.fun)
    assert best.fun == pytest.approx(rank_floor(S1, r), rel=1e-7)
    m, G = best.x[:d], best.x[d:].reshape(d, r)
    assert bures_wasserstein(m, G @ G.T, mu1, S1) ** 2 == pytest.approx(best.fun, abs=1e-7)
    m_r, S_r = best_rank_approximation(mu1, S1, r)
    assert np.linalg.matrix_rank(S_r, tol=1e-10) == r
    assert bures_wasserstein(m_r, S_r, mu1, S1) ** 2 == pytest.approx(rank_floor(S1, r), abs=1e-7)
    assert rank_floor(S1, d) == 0.0


def test_rank_floor_validates_r():
    with pytest.raises(ValueError, match="r must be"):
        rank_floor(np.eye(3), 4)


def test_empirical_floor_is_exact_for_clouds_in_r_dimensional_subspaces():
    """Any cloud in an r-dim affine subspace is at W2^2 >= F_r(hat Sigma_Y) from Y; projecting Y on its own
    top-r principal subspace attains it."""
    rng = np.random.default_rng(4)
    N, d, r = 40, 3, 2
    y = rng.standard_normal((N, d)) @ rng.standard_normal((d, d)) + 1.0
    floor = empirical_rank_floor(y, r)
    ybar = y.mean(0)
    _w, U = np.linalg.eigh(np.cov(y.T, bias=True))
    P = U[:, -r:] @ U[:, -r:].T
    assert w2_squared(ybar + (y - ybar) @ P, y) == pytest.approx(floor, rel=1e-12)
    for _ in range(20):
        basis = np.linalg.qr(rng.standard_normal((d, r)))[0]
        x = rng.standard_normal(d) + rng.standard_normal((N, r)) @ basis.T * 2.0
        assert w2_squared(x, y) >= floor - 1e-12


# ------------------------------------------------------------------------------ rank at finite N
def test_attention_free_network_keeps_the_cloud_in_its_plane_and_attention_bends_it():
    """V = 0: an affine map, the centred cloud keeps rank r to round-off. Softmax attention at finite N is not
    affine on the cloud: it bends out of the plane, less as N grows (weak attention, kappa < 1/2)."""
    rng = np.random.default_rng(5)
    L, d, H = 4, 3, 1
    A, b, V, B = _random_layers(rng, L, d, H, scale=0.3)
    mu0, S0 = np.zeros(d), np.diag([1.0, 1.0, 0.0])

    def ratio(x):
        sv = np.linalg.svd(x - x.mean(0), compute_uv=False)
        return sv[2] / sv[0]

    x0 = gaussian_tokens(300, mu0, S0, seed=1)
    assert ratio(apply_transformer(x0, layer_controls(A, b), 0.25)) < 1e-13
    bent = [
        np.mean(
            [
                ratio(apply_transformer(gaussian_tokens(n, mu0, S0, seed=s), layer_controls(A, b, V, B), 0.25))
                for s in range(6)
            ]
        )
        for n in (100, 3200)
    ]
    assert bent[0] > 1e-6
    assert bent[1] < 0.5 * bent[0]  # N^(-1/2) predicts a factor 1/sqrt(32) ~ 0.18


# ------------------------------------------------------------------------------ energies
def test_gaussian_energy_is_the_energy_of_the_equivalent_attention_free_layers():
    rng = np.random.default_rng(6)
    L, d, H, h = 3, 3, 2, 0.2
    A, b, V, B = _random_layers(rng, L, d, H, scale=0.3)
    ctl = layer_controls(A, b, V, B)
    mu0, S0 = rng.standard_normal(d), _random_covariance(rng, d)
    traj = layer_stack(mu0, S0, list(ctl), h)
    # attention-free layers with A + sum_k V_k Sigma_l B_k and b + sum_k V_k mu_l move the Gaussian identically
    free = [
        Controls(A=c.A + sum(Vk @ S @ Bk for Vk, Bk in zip(c.V, c.B, strict=True)), b=c.b + sum(Vk for Vk in c.V) @ m)
        for c, m, S in zip(ctl, traj.mu[:-1], traj.Sigma[:-1], strict=True)
    ]
    free_traj = layer_stack(mu0, S0, free, h)
    np.testing.assert_allclose(free_traj.Sigma, traj.Sigma, atol=1e-12)
    np.testing.assert_allclose(free_traj.mu, traj.mu, atol=1e-12)
    assert gaussian_energy(ctl, h, mu0, S0) == pytest.approx(control_energy(free, h), rel=1e-12)
    plain = layer_controls(A, b)
    assert gaussian_energy(plain, h, mu0, S0) == pytest.approx(control_energy(plain, h), rel=1e-12)
    assert control_energy(plain, h) == pytest.approx(h * (np.sum(A**2) + np.sum(b**2)), rel=1e-12)


# ------------------------------------------------------------------------------ the trainer
def test_trainer_reaches_a_known_optimum():
    """Target = an affine image M x0 + c of the input tokens (M symmetric positive definite, so the identity
    matching is optimal): the loss has minimum 0, reached by one layer exactly at A = (M - I)/h, b = c/h."""
    rng = np.random.default_rng(7)
    N, d = 64, 2
    x0 = rng.standard_normal((N, d))
    M = np.array([[1.5, 0.4], [0.4, 0.8]])
    c = np.array([0.7, -0.3])
    res = train_transformer(
        x0, x0 @ M.T + c, layers=1, T=1.0, attention=False, steps=600, lr=0.05, final_lr=1e-4, seed=0, progress=False
    )
    assert res.status is TrainingStatus.COMPLETED
    assert res.final_loss < 1e-8
    np.testing.assert_allclose(res.controls[0].A, M - np.eye(d), atol=1e-4)
    np.testing.assert_allclose(res.controls[0].b, c, atol=1e-4)
    assert res.loss.shape == (601,) and res.loss[0] > 0.1
    assert "TrainingResult(L=1" in repr(res)


def _samplers(N=24):
    return (
        functools.partial(gaussian_tokens, N, np.zeros(2), np.eye(2)),
        functools.partial(gaussian_tokens, N, np.array([1.0, -1.0]), np.array([[2.0, 0.5], [0.5, 1.0]])),
    )


def test_trainer_is_deterministic_and_seeded():
    x, y = _samplers()
    kw = {"layers": 2, "steps": 8, "progress": False}
    a, b = train_transformer(x, y, seed=3, **kw), train_transformer(x, y, seed=3, **kw)
    np.testing.assert_array_equal(a.loss, b.loss)
    np.testing.assert_array_equal(a.controls[1].B, b.controls[1].B)
    assert not np.array_equal(train_transformer(x, y, seed=4, **kw).loss, a.loss)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        c = train_transformer(x, y, seed=3, **kw)  # torch runs on one thread inside, whatever the caller's
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(c.loss, a.loss)


def test_checkpoint_resumes_exactly(tmp_path, monkeypatch):
    x, y = _samplers()
    kw = {"layers": 2, "steps": 20, "seed": 1, "checkpoint_every": 5, "progress": False}
    whole = train_transformer(x, y, **kw)
    path = TorchFile(tmp_path / "run.pt")
    real, calls = training.optimal_assignment, {"n": 0}

    def failing(*args):
        calls["n"] += 1
        if calls["n"] == 13:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(training, "optimal_assignment", failing)
    with pytest.raises(KeyboardInterrupt):
        train_transformer(x, y, checkpoint=path, **kw)
    monkeypatch.setattr(training, "optimal_assignment", real)
    resumed = train_transformer(x, y, checkpoint=path, **kw)
    assert resumed.resumed_from == 10
    np.testing.assert_array_equal(resumed.loss, whole.loss)
    for c1, c2 in zip(resumed.controls, whole.controls, strict=True):
        np.testing.assert_array_equal(c1.A, c2.A)
        np.testing.assert_array_equal(c1.V, c2.V)
    again = train_transformer(x, y, checkpoint=path, **kw)  # a finished checkpoint: nothing left to run
    assert again.resumed_from == 20
    np.testing.assert_array_equal(again.loss, whole.loss)
    with pytest.raises(ValueError, match="another problem"):
        train_transformer(x, y, checkpoint=path, **{**kw, "seed": 2})


def test_trainer_reports_divergence_as_a_status():
    x, y = _samplers()
    res = train_transformer(x, y, layers=2, steps=30, lr=50.0, final_lr=50.0, blowup_norm=1e3, seed=0, progress=False)
    assert res.status is TrainingStatus.DIVERGED
    assert res.loss.size < 31
    assert all(np.isfinite(c.A).all() for c in res.controls)


def test_trainer_validates_its_inputs():
    x, y = _samplers()
    with pytest.raises(ValueError, match="same shape"):
        train_transformer(np.zeros((5, 2)), np.zeros((6, 2)), progress=False)
    with pytest.raises(ValueError, match="layers"):
        train_transformer(x, y, layers=0, progress=False)
    with pytest.raises(ValueError, match="seed"):
        train_transformer(x, y, seed=1.5, progress=False)
    with pytest.raises(ValueError, match="samplers must return"):
        calls = iter([np.zeros((24, 2)), np.zeros((24, 2)), np.zeros((23, 2))])
        train_transformer(lambda rng: next(calls), np.zeros((24, 2)), steps=3, progress=False)
    with pytest.raises(ValueError, match="checkpoint"):
        train_transformer(lambda rng: np.zeros((24, 2)), y, checkpoint=TorchFile("unused.pt"), progress=False)
    with pytest.raises(TypeError, match=r"load.*save.*TorchFile"):
        train_transformer(x, y, checkpoint="run.pt", progress=False)


class _Marker:
    """A pickled object that would create a file when unpickled (the attack a checkpoint must not run)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("content", ["code", "truncated", "empty", "text", "list", "wrong_entries", "wrong_shapes"])
def test_a_checkpoint_that_is_not_the_trainers_is_refused_with_its_path(tmp_path, content):
    x, y = _samplers()
    kw = {"layers": 2, "steps": 6, "seed": 1, "checkpoint_every": 3, "progress": False}
    good = tmp_path / "good.pt"
    train_transformer(x, y, checkpoint=TorchFile(good), **kw)
    path, marker = tmp_path / "bad.pt", tmp_path / "marker"
    if content == "code":
        torch.save({"key": _Marker(marker)}, path)
    elif content == "truncated":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif content == "empty":
        path.write_bytes(b"")
    elif content == "text":
        path.write_text("not a checkpoint\n")
    elif content == "list":
        torch.save([1, 2, 3], path)
    elif content == "wrong_entries":
        torch.save({"key": "x", "step": 1}, path)
    else:  # the trainer's own state for another width
        state = torch.load(good, weights_only=True)
        state["params"] = [torch.zeros(3, 3) for _ in state["params"]]
        torch.save(state, path)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        train_transformer(x, y, checkpoint=TorchFile(path), **kw)
    assert not marker.exists()  # no byte of the file was executed


def test_import_gtcore_does_not_import_the_trainer():
    code = "import sys, gtcore; assert 'gtcore.training' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
