"""A new attention type is one subclass: defined here, registered, and run through the moment ODE, the lanes,
the atlas and the particles without editing any other file.

The toy type is the dot product at temperature 2 (logits :math:`x_j^\\top Bx_i / 2`), whose Gaussian tilt is
:math:`\\mu + \\tfrac12\\Sigma Bx`. It defines only what the interface requires (``params``, ``logits``,
``tilt``): every consumer takes the base class's defaults (the lane-by-lane batched parts, the dense
finite-N kernel). The independent answer is the registered dot product with :math:`B/2`, whose code paths are
its own (the vectorised tilt, the fused kernel).
"""

import numpy as np
import pytest

from gtbook.studies.atlas.outcomes import classify_lanes
from gtcore import Controls, integrate_moments
from gtcore.attention import ATTENTION_TYPES, register
from gtcore.attention.base import AttentionType
from gtcore.moments import integrate_moments_lanes, moment_rhs
from gtcore.particles import simulate


class HalfTemperature(AttentionType):
    r"""Logits :math:`x_j^\top B_hx_i/2`, softmax over the keys :math:`j`.

    Gaussian tilt (completing the square in :math:`e^{y^\top Bx/2}\,dN(\mu,\Sigma)(y)`):
    :math:`\mu + \tfrac12\Sigma Bx`.
    """

    name = "toy-half"

    def params(self, controls):
        return controls.B

    def logits(self, xq, xk, B_h):
        return 0.5 * (xq @ B_h.T @ xk.T)

    def tilt(self, mu, Sigma, B_h):
        return 0.5 * (Sigma @ B_h), mu


@pytest.fixture()
def toy():
    """The toy type, registered for one test and removed after it (the registry is shared)."""
    att = register(HalfTemperature())
    yield att
    del ATTENTION_TYPES[att.name]


def _layers(rng, n, d=3, heads=2, scale=0.6):
    """n random general layers (non-symmetric B, non-scalar V, A != 0), as (toy, dot with B/2) pairs."""
    pairs = []
    for _ in range(n):
        A = scale * rng.standard_normal((d, d))
        V = scale * rng.standard_normal((heads, d, d))
        B = scale * rng.standard_normal((heads, d, d))
        b = rng.standard_normal(d)
        pairs.append((Controls(A=A, b=b, V=V, B=B, attention="toy-half"), Controls(A=A, b=b, V=V, B=0.5 * B)))
    return pairs


def test_toy_type_through_the_moment_ode(toy, rng):
    ((ctl, ref),) = _layers(rng, 1)
    mu0, S0 = rng.standard_normal(3), np.eye(3) + 0.2 * np.ones((3, 3))
    for a, b in zip(moment_rhs(mu0, S0, ctl), moment_rhs(mu0, S0, ref), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    t = np.linspace(0.0, 1.0, 5)
    got, want = (integrate_moments(mu0, S0, c, (0.0, 1.0), t_eval=t) for c in (ctl, ref))
    assert got.status == want.status == "completed"
    np.testing.assert_allclose(got.Sigma, want.Sigma, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got.mu, want.mu, rtol=1e-9, atol=1e-11)


def test_toy_type_through_the_lanes(toy, rng):
    pairs = _layers(rng, 5, scale=0.4)
    mu0, S0 = np.full(3, 0.3), np.eye(3)
    got = integrate_moments_lanes(mu0, S0, [p[0] for p in pairs], (0.0, 1.0))
    want = integrate_moments_lanes(mu0, S0, [p[1] for p in pairs], (0.0, 1.0))
    assert list(got.status) == list(want.status) == ["completed"] * 5
    np.testing.assert_allclose(got.Sigma, want.Sigma, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.mu, want.mu, rtol=1e-8, atol=1e-10)


def test_toy_type_through_the_atlas(toy, rng):
    pairs = _layers(rng, 8)
    S0 = np.eye(3)
    got = classify_lanes([p[0] for p in pairs], S0, horizon=20.0)
    want = classify_lanes([p[1] for p in pairs], S0, horizon=20.0)
    assert list(got.outcome) == list(want.outcome)
    assert list(got.rank) == list(want.rank)
    np.testing.assert_allclose(got.t_pole, want.t_pole, rtol=1e-6)
    assert len(set(got.outcome)) > 1  # the draws are not all alike


def test_toy_type_through_the_particles(toy, rng):
    ((ctl, ref),) = _layers(rng, 1, scale=0.4)
    x0 = rng.standard_normal((200, 3))
    got, want = (simulate(x0, c, (0.0, 0.5), 10, device="cpu") for c in (ctl, ref))
    np.testing.assert_allclose(got.final_tokens, want.final_tokens, rtol=1e-10, atol=1e-12)
    # and the toy type is not the dot product with B itself: the tokens tell them apart
    plain = simulate(x0, Controls(A=ctl.A, b=ctl.b, V=ctl.V, B=ctl.B), (0.0, 0.5), 10, device="cpu")
    assert np.abs(plain.final_tokens - got.final_tokens).max() > 1e-3
