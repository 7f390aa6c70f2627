"""The attention contract: every registered attention type against its own definition.

Parametrised over :data:`gtcore.attention.ATTENTION_TYPES`, so a new type is checked by registering
it, without editing this file. The checks use only the type's ``logits`` (its definition):

* the Gaussian tilt against many-sample softmax averages (non-symmetric B, several queries);
* the batched fast paths (``value_responses``, ``mean_gain``, their derivative) against the
  per-head tilt;
* one Euler step of the particle model with ``average="gaussian"`` equals ``layer_map``;
* the finite-N kernel equals the naive dense softmax;
* with weak attention the N-token cloud's moments converge to the moment ODE like N^(-1/2).

Random controls are built from per-head query and key maps ``Q, K`` (``B = K^T Q`` for the types
that take ``B``), so that every type draws its parameters the same way. For types whose weights
couple all tokens (``local = False``, Sinkhorn), the many-key reference of the tilt is a
Gauss-Hermite product rule (a weighted measure) instead of 2e6 samples: their finite-N average
costs O(N^2) per iteration.
"""

import numpy as np
import pytest
import torch
from numpy.polynomial.hermite_e import hermegauss

from conftest import particle_moment_errors, random_spd
from gtcore import Controls, gaussian_tokens, layer_map
from gtcore.attention import ATTENTION_TYPES, DotProduct, attention_of
from gtcore.particles import simulate, velocity
from gtcore.stats.inference import loglog_slope

TYPES = sorted(ATTENTION_TYPES)


def heads_controls(rng, d, name, heads=2, scale=0.4, **kw):
    """Random controls: queries ``Q = scale * N(0, 1)`` and keys ``K = I`` per head, so that ``B = K^T Q``
    has i.i.d. entries (general keys are checked in test_attention_families.py)."""
    Q = scale * rng.standard_normal((heads, d, d))
    return Controls(
        A=scale * rng.standard_normal((d, d)),
        b=rng.standard_normal(d),
        V=scale * rng.standard_normal((heads, d, d)),
        Q=Q,
        K=np.broadcast_to(np.eye(d), Q.shape),
        attention=name,
        **kw,
    )


def gauss_hermite_keys(mu, Sigma, nodes):
    """A tensor-product Gauss-Hermite rule for N(mu, Sigma): keys (n^d, d) and their log-weights."""
    z, w = hermegauss(nodes)
    d = len(mu)
    Z = np.stack(np.meshgrid(*[z] * d, indexing="ij"), -1).reshape(-1, d)
    logw = sum(np.meshgrid(*[np.log(w / w.sum())] * d, indexing="ij")).ravel()
    return mu + Z @ np.linalg.cholesky(Sigma).T, logw


def test_registry_holds_the_paper_type():
    assert isinstance(ATTENTION_TYPES["dot"], DotProduct)
    assert attention_of(Controls(A=np.eye(2))) is ATTENTION_TYPES["dot"]
    with pytest.raises(ValueError, match="attention"):
        Controls(A=np.eye(2), attention="nonexistent")


@pytest.mark.parametrize("name", TYPES)
def test_tilt_matches_many_sample_softmax(name, rng):
    """Self-normalised average over 2e6 Gaussian keys (a 16^3-node quadrature rule for non-local
    types), non-symmetric B, against M x + c."""
    att = ATTENTION_TYPES[name]
    d = 3
    mu = rng.standard_normal(d)
    Sigma = random_spd(rng, d, 0.6)
    ctl = heads_controls(rng, d, name, heads=1, scale=0.4)
    B = ctl.B[0]  # the logits' bilinear part
    assert np.linalg.norm(B - B.T) > 0.1
    params_h = np.array(att.head(att.params(ctl), 0))
    if att.local:
        y, logw = torch.as_tensor(gaussian_tokens(2_000_000, mu, Sigma, seed=3)), None
    else:
        y, logw = (torch.as_tensor(a) for a in gauss_hermite_keys(mu, Sigma, 16))
    xq = torch.as_tensor(0.7 * rng.standard_normal((4, d)))
    mc = att.average(xq, y, torch.as_tensor(params_h), logw).numpy()
    M, c = att.tilt(mu, Sigma, params_h)
    np.testing.assert_allclose(mc, xq.numpy() @ M.T + c, atol=5e-3)


@pytest.mark.parametrize("name", TYPES)
def test_batched_paths_equal_the_per_head_tilt(name, rng):
    att = ATTENTION_TYPES[name]
    d, H = 3, 3
    mu, Sigma = rng.standard_normal(d), random_spd(rng, d)
    ctl = heads_controls(rng, d, name, heads=H, scale=1.0)
    V, B = np.array(ctl.V), np.array(att.params(ctl))  # B: the type's head parameters
    tilts = [att.tilt(mu, Sigma, B[h]) for h in range(H)]
    np.testing.assert_allclose(
        att.value_responses(Sigma, V, B), np.stack([V[h] @ t[0] for h, t in enumerate(tilts)]), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        att.mean_gain(Sigma, V, B) @ mu, sum(V[h] @ t[1] for h, t in enumerate(tilts)), rtol=1e-12, atol=1e-12
    )
    Hdir = random_spd(rng, d)
    eps = 1e-6
    fd = (att.value_responses(Sigma + eps * Hdir, V, B) - att.value_responses(Sigma - eps * Hdir, V, B)) / (2 * eps)
    np.testing.assert_allclose(att.value_responses_derivative(Sigma, Hdir, V, B), fd, rtol=1e-6, atol=1e-7)
    # the torch path (particles, average="gaussian") gives the same numbers
    tS, tV, tB = (torch.as_tensor(a) for a in (Sigma, V, B))
    np.testing.assert_allclose(att.linear_part(tS, tV, tB).numpy(), att.linear_part(Sigma, V, B), rtol=1e-13)
    np.testing.assert_allclose(att.mean_gain(tS, tV, tB).numpy(), att.mean_gain(Sigma, V, B), rtol=1e-13)


@pytest.mark.parametrize("name", TYPES)
def test_parts_over_lanes_are_the_parts_of_each_lane(name, rng):
    """The Gaussian parts of a stack of layers (a leading lane axis, fewer heads padded with zero heads:
    gtcore.moments.batched.stack_controls) are each layer's own, bit for bit, and one evaluation of both parts
    (gaussian_parts) is the two separate ones; a lane's parts are those of its own Sigma and parameters."""
    from gtcore.moments.batched import stack_controls

    att = ATTENTION_TYPES[name]
    d = 3
    ctls = [heads_controls(rng, d, name, heads=h, scale=0.8) for h in (1, 3, 2, 3)]
    stack = stack_controls(ctls)
    assert stack.V.shape == (4, 3, d, d) and stack.attention is att
    Sigmas = np.stack([random_spd(rng, d, 5.0) for _ in ctls])
    lin, gain = att.gaussian_parts(Sigmas, stack.V, stack.params)
    np.testing.assert_array_equal(lin, att.linear_part(Sigmas, stack.V, stack.params))
    np.testing.assert_array_equal(gain, att.mean_gain(Sigmas, stack.V, stack.params))
    for k, c in enumerate(ctls):
        p = att.params(c)
        np.testing.assert_array_equal(lin[k], att.linear_part(Sigmas[k], c.V, p))
        np.testing.assert_array_equal(gain[k], att.mean_gain(Sigmas[k], c.V, p))
        np.testing.assert_array_equal(stack.velocity_matrix(Sigmas, np.arange(4))[k], c.affine_A + lin[k])
    # a lane sees its own covariance: swapping two lanes' Sigmas changes both lanes' parts
    swapped = att.linear_part(Sigmas[[1, 0, 2, 3]], stack.V, stack.params)
    assert not np.allclose(swapped[:2], lin[:2])


@pytest.mark.parametrize("name", TYPES)
def test_one_euler_step_with_gaussian_average_is_the_layer_map(name, rng):
    d, h = 3, 0.1
    ctl = heads_controls(rng, d, name)
    x0 = gaussian_tokens(200, rng.standard_normal(d), random_spd(rng, d), seed=2)
    traj = simulate(x0, ctl, (0, h), 1, method="euler", average="gaussian")
    mu1, S1 = layer_map(traj.mu[0], traj.Sigma[0], ctl, h)
    np.testing.assert_allclose(traj.mu[1], mu1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(traj.Sigma[1], S1, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", TYPES)
def test_kernel_equals_naive_softmax(name, rng):
    att = ATTENTION_TYPES[name]
    d, H = 3, 2
    x = torch.as_tensor(rng.standard_normal((300, d)))
    B = att.torch_params(heads_controls(rng, d, name, heads=H, scale=0.5), torch.float64, "cpu")
    got = att.kernel(x, B)
    assert got.shape == (H, 300, d)
    ref = torch.stack([torch.softmax(att.logits(x, x, B[h]), dim=1) @ x for h in range(H)])
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)
    # and the particle velocity is A x + b + sum_h V_h (kernel)_h
    ctl = heads_controls(rng, d, name, heads=H)
    xn = x.numpy()
    avg = att.kernel(x, torch.as_tensor(np.array(att.params(ctl)))).numpy()
    expected = xn @ ctl.A.T + ctl.b + np.einsum("hnj,hij->ni", avg, ctl.V)
    np.testing.assert_allclose(velocity(xn, ctl, device="cpu"), expected, rtol=1e-12, atol=1e-12)


def test_dot_kernel_with_zero_logits_is_the_mean(rng):
    x = torch.as_tensor(rng.standard_normal((50, 2)))
    B = torch.zeros(1, 2, 2, dtype=torch.float64)
    np.testing.assert_allclose(
        ATTENTION_TYPES["dot"].kernel(x, B)[0].numpy(), np.tile(x.mean(0).numpy(), (50, 1)), rtol=1e-13
    )


@pytest.mark.parametrize("name", TYPES)
def test_particles_converge_to_the_moment_ode_like_inverse_sqrt_n(name):
    """Weak attention: the moment error of N tokens against the ODE decays like N^(-1/2)."""
    mu0, S0 = np.array([0.5, -0.2]), np.array([[1.0, 0.3], [0.3, 0.6]])
    ctl = Controls(
        A=[[0.1, 0.4], [-0.4, 0.0]],
        b=[0.2, 0.0],
        V=0.5 * np.eye(2),
        Q=[[-0.3, 0.1], [0.0, -0.2]],
        K=np.eye(2),
        attention=name,
    )  # B = K^T Q
    # non-local kernels cost O(N^2) per Sinkhorn iteration: a 4x smaller ladder, the same ratios
    Ns = [400, 1600, 6400] if attention_of(ctl).local else [100, 400, 1600]
    errs = particle_moment_errors(ctl, mu0, S0, Ns)
    assert -0.7 <= loglog_slope(Ns, errs) <= -0.3, errs


def test_mixture_average_single_component_is_the_tilt(rng):
    att = ATTENTION_TYPES["dot"]
    d = 3
    mu, S, B = rng.standard_normal(d), random_spd(rng, d), rng.standard_normal((d, d))
    x = rng.standard_normal((7, d))
    M, c = att.tilt(mu, S, B)
    np.testing.assert_allclose(
        att.mixture_average(x, np.ones(1), mu[None], S[None], B), x @ M.T + c, rtol=1e-12, atol=1e-12
    )
