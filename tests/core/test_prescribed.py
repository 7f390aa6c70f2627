"""Prescribed-attention Transformers from `transformers` classes equal the particle model."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gtbook.studies.prescribed.harness import layer_map_blowup_depth, run_prescribed  # noqa: E402
from gtcore import Controls, gaussian_tokens, layer_map  # noqa: E402
from gtcore.models.prescribed import (  # noqa: E402
    FAMILIES,
    head_dim,
    hidden_states,
    prescribed_transformer,
)
from gtcore.models.prescribed_moments import layer_moments, split_schedule  # noqa: E402
from gtcore.particles import simulate  # noqa: E402
from gtcore.stats.gaussianity import empirical_moments  # noqa: E402

D, HEADS, N, LAYERS, H = 4, 2, 64, 6, 0.25


def _low_rank(rng, r, d=D):
    return rng.normal(size=(d, r)) @ rng.normal(size=(r, d)) / d


def _random_controls(seed, rank=D // HEADS, heads=HEADS, affine=False):
    rng = np.random.default_rng(seed)
    V = np.stack([_low_rank(rng, rank) for _ in range(heads)])
    B = np.stack([_low_rank(rng, rank) for _ in range(heads)])
    if affine:
        return Controls(A=rng.normal(size=(D, D)) / D, b=rng.normal(size=D), V=V, B=B)
    return Controls(V=V, B=B)


@pytest.fixture(scope="module")
def tokens():
    return gaussian_tokens(N, np.zeros(D), np.eye(D), seed=3)


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_bridge_to_particle_model(family, tokens):
    """The issue's exactness test: hidden states == L Euler steps of simulate, to 1e-10."""
    ctl = _random_controls(0)
    model = prescribed_transformer(family, ctl, LAYERS, h=H)
    hs = hidden_states(model, tokens)
    ref = simulate(tokens, ctl, (0.0, LAYERS * H), LAYERS, method="euler", keep_tokens=True, device="cpu")
    assert hs.shape == (LAYERS + 1, N, D)
    assert ref.tokens.shape == hs.shape
    np.testing.assert_allclose(hs, ref.tokens, rtol=0, atol=1e-10)


@pytest.mark.parametrize("family", FAMILIES)
def test_feed_forward_is_the_split_step(family, tokens):
    """With A, b realised in the MLP a block is attention sub-step then affine sub-step."""
    ctl = _random_controls(1, affine=True)
    model = prescribed_transformer(family, ctl, LAYERS, h=H, feed_forward=True)
    hs = hidden_states(model, tokens)
    ref = simulate(
        tokens,
        split_schedule(ctl, LAYERS, H),
        (0.0, 2 * LAYERS * H),
        2 * LAYERS,
        method="euler",
        keep_tokens=True,
        device="cpu",
    )
    np.testing.assert_allclose(hs, ref.tokens[::2], rtol=0, atol=1e-10)


def test_vit_full_rank_heads(tokens):
    """ViT's head_dim override allows several full-rank heads."""
    ctl = _random_controls(2, rank=D, heads=3)
    model = prescribed_transformer("vit", ctl, 3, h=H)
    ref = simulate(tokens, ctl, (0.0, 3 * H), 3, method="euler", keep_tokens=True, device="cpu")
    np.testing.assert_allclose(hidden_states(model, tokens), ref.tokens, rtol=0, atol=1e-10)


def test_per_layer_controls_and_batch(tokens):
    cs = [_random_controls(s) for s in range(3)]
    model = prescribed_transformer("bert", cs, 3, h=H)
    batch = np.stack([tokens, tokens[::-1]])
    hs = hidden_states(model, batch)
    assert hs.shape == (4, 2, N, D)
    x = tokens
    for ell, c in enumerate(cs):
        x = simulate(x, c, (0.0, H), 1, method="euler", keep_tokens=True, device="cpu").tokens[-1]
        np.testing.assert_allclose(hs[ell + 1, 0], x, atol=1e-10)
    # permutation equivariance: no position information reaches the logits
    np.testing.assert_allclose(hs[:, 1], hs[:, 0, ::-1], atol=1e-12)


def test_modernbert_rope_identity_matches_library_at_angle_zero():
    """The float64 identity used for RoPE equals the library's rotation at cos=1, sin=0 up to its float32 cast."""
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    rng = np.random.default_rng(0)
    q = torch.as_tensor(rng.normal(size=(1, 2, 5, 2)))
    k = torch.as_tensor(rng.normal(size=(1, 2, 5, 2)))
    cos, sin = torch.ones(1, 5, 2, dtype=q.dtype), torch.zeros(1, 5, 2, dtype=q.dtype)
    q2, k2 = apply_rotary_pos_emb(q, k, cos, sin)
    assert float((q2 - q).abs().max()) < 1e-6 and float((k2 - k).abs().max()) < 1e-6


def test_layer_norm_variants_run_and_bert_is_normalised(tokens):
    ctl = Controls(V=np.eye(D), B=0.5 * np.eye(D))
    for family in FAMILIES:
        hs = hidden_states(prescribed_transformer(family, ctl, 3, h=H, layer_norm=True), tokens)
        assert np.all(np.isfinite(hs))
    hs = hidden_states(prescribed_transformer("bert", ctl, 3, h=H, layer_norm=True), tokens)
    # post-LN: every output token has zero mean and unit variance across its coordinates
    np.testing.assert_allclose(hs[1:].mean(-1), 0, atol=1e-10)
    np.testing.assert_allclose(hs[1:].var(-1), 1, atol=1e-6)


def test_layer_moments_and_blowup_depth():
    ctl = Controls(A=0.2 * np.eye(2), V=np.eye(2), B=np.diag([1.0, 0.5]))
    _, Sigmas = layer_moments(np.zeros(2), np.eye(2), ctl, 4, 0.1)
    mu, S = np.zeros(2), np.eye(2)
    for _ in range(4):
        mu, S = layer_map(mu, S, Controls(V=ctl.V, B=ctl.B), 0.1)
        mu, S = layer_map(mu, S, Controls(A=ctl.A), 0.1)
    np.testing.assert_allclose(Sigmas[-1], S, rtol=1e-14)
    bd = layer_map_blowup_depth(np.zeros(2), np.eye(2), ctl, 0.1, factor=10.0)
    assert bd.depth is not None and bd.norms[bd.depth] > 10 >= bd.norms[bd.depth - 1]
    _, Ss = layer_moments(np.zeros(2), np.eye(2), ctl, bd.depth, 0.1)
    np.testing.assert_allclose(np.linalg.norm(Ss, axis=(1, 2)) / np.sqrt(2), bd.norms, rtol=1e-12)


def test_empirical_covariance_matches_layer_map_for_gaussian_attention():
    """Sanity: tokens through a model have the moments of the layer map up to finite-N noise."""
    ctl = Controls(V=0.5 * np.eye(2), B=0.2 * np.eye(2))
    x0 = gaussian_tokens(4000, np.zeros(2), np.eye(2), seed=0)
    hs = hidden_states(prescribed_transformer("vit", ctl, 2, h=0.5), x0)
    _, S = empirical_moments(hs[-1])
    _, S0 = empirical_moments(x0)
    _, ref = layer_moments(np.zeros(2), S0, ctl, 2, 0.5)
    assert np.linalg.norm(S - ref[-1]) / np.linalg.norm(ref[-1]) < 0.05


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(family="gpt2"), "family"),
        (dict(n_layers=0), "n_layers"),
        (dict(h=0.0), "h must"),
        (dict(h=float("nan")), "h must"),
    ],
)
def test_argument_errors(kwargs, match):
    args = dict(family="bert", controls=_random_controls(0), n_layers=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        prescribed_transformer(args.pop("family"), args.pop("controls"), args.pop("n_layers"), **args)


def test_head_and_rank_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="divisible"):
        prescribed_transformer("bert", Controls(V=np.stack([np.eye(4)] * 3), B=np.stack([np.eye(4)] * 3)), 1)
    with pytest.raises(ValueError, match=r"B\[0\] has rank 4"):
        prescribed_transformer(
            "modernbert", Controls(V=np.stack([_low_rank(rng, 2)] * 2), B=np.stack([np.eye(4)] * 2)), 1
        )
    with pytest.raises(ValueError, match=r"V\[1\] has rank 4"):
        prescribed_transformer(
            "bert", Controls(V=np.stack([_low_rank(rng, 2), np.eye(4)]), B=np.stack([_low_rank(rng, 2)] * 2)), 1
        )
    assert head_dim("vit", 4, 3) == 4 and head_dim("bert", 4, 2) == 2


def test_affine_needs_feed_forward_and_no_ff_block():
    with pytest.raises(ValueError, match="feed_forward=True"):
        prescribed_transformer("vit", Controls(A=np.eye(2), V=np.eye(2), B=np.eye(2)), 1)
    ctl = Controls(V=np.eye(2), B=np.eye(2), U=np.eye(2), W=np.eye(2), c=np.zeros(2))
    with pytest.raises(ValueError, match="not supported"):
        prescribed_transformer("vit", ctl, 1)
    with pytest.raises(ValueError, match="n_layers=3"):
        prescribed_transformer("vit", [Controls(V=np.eye(2), B=np.eye(2))] * 2, 3)
    with pytest.raises(ValueError, match="tokens must have shape"):
        hidden_states(prescribed_transformer("vit", Controls(V=np.eye(2), B=np.eye(2)), 1), np.zeros((3, 5)))


def test_run_prescribed_keeps_the_hidden_states(tokens):
    ctl = _random_controls(7)
    kept = run_prescribed("bert", ctl, tokens, 3, H, keep_tokens=True)
    hs = hidden_states(prescribed_transformer("bert", ctl, 3, h=H, feed_forward=False), tokens)
    np.testing.assert_array_equal(kept.tokens, hs)
    # the recorded covariances are those of the kept tokens (1/N normalisation)
    np.testing.assert_allclose(kept.Sigma_model, [np.cov(x.T, bias=True) for x in kept.tokens], rtol=1e-12, atol=1e-14)
    assert run_prescribed("bert", ctl, tokens, 3, H).tokens is None


def test_prescribed_deviations_null_and_near_miss():
    from gtbook.studies.prescribed.harness import prescribed_deviations
    from gtcore.stats.inference import hotelling_test

    J = np.array([[0.0, -0.7, 0.0], [0.7, 0.0, 0.0], [0.0, 0.0, 0.0]])
    affine = Controls(A=0.5 * np.eye(3) + J)
    wrong_A = Controls(A=1.1 * affine.A)
    dev = prescribed_deviations(
        "bert", affine, np.eye(3), 200, 3, 5, 0.1, 5, predictions={"right": affine, "wrong": wrong_A}
    )
    assert np.abs(dev["right"]).max() < 1e-12  # an affine model maps every cloud exactly as the layer map
    assert np.linalg.norm(dev["wrong"], axis=1).min() > 1e-2 and dev["right"].shape == (3, 6)
    B0 = np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.6]])
    ctl = Controls(V=25.0 * np.eye(3), B=0.02 * B0)
    wrong = Controls(V=1.1 * ctl.V[0], B=ctl.B[0])  # the attention term 10 % too large
    dev = prescribed_deviations(
        "bert", ctl, np.eye(3), 1000, 12, 12, 0.05, 12, predictions={"right": ctl, "wrong": wrong}, seed=5
    )
    assert hotelling_test(dev["wrong"]).ratio > 1 > hotelling_test(dev["right"]).ratio


def test_beta_dependence_same_map_worse_agreement_at_large_beta():
    from gtbook.studies.prescribed.harness import antithetic_gaussian_tokens, beta_dependence

    B0 = np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.6]])
    x0 = antithetic_gaussian_tokens(600, np.eye(3), seed=1)
    bd = beta_dependence("bert", B0, 0.5, [0.02, 0.5], x0, 20, 0.08)
    assert bd.deviation[1] > 3 * bd.deviation[0]
