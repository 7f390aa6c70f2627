"""Chapter 5's effect-size profile, its readings, the update norms and the presentation objects.

The fractions are checked against numbers worked out by hand and against the criterion's own verdict (a
second implementation of the same ratio); the update norms against the Hugging Face forward of a tiny BERT
and against a closed form (blocks that are a LayerNorm of a LayerNorm move nothing).
"""

import math

import numpy as np
import pytest

from gtbook.studies.pretrained import criterion as C
from gtbook.studies.pretrained import effects as E
from gtbook.studies.pretrained import presentation as R
from gtbook.studies.pretrained import profile as P

STATS = list(E.STATISTICS)


def _effects(value, low, high, rank=5):
    return E.EffectSizes(
        raw={},
        theta={},
        se={},
        value=dict(value),
        low=dict(low),
        high=dict(high),
        sequences=8,
        tokens=16,
        rank=rank,
        n_boot=10,
        level=0.95,
    )


def _same(v):
    return {s: v for s in STATS}


def _layers(triples, mode="pure", model="m"):
    """LayerEffects with, per layer, (value, low, high) for every statistic."""
    eff = [_effects(_same(v), _same(lo), _same(hi)) for v, lo, hi in triples]
    n = len(triples)
    return C.LayerEffects(model, mode, 8, 16, 0, np.arange(n), np.full(n, 5), np.full(n, 5), eff, {})


#: the reference: value 1.5 in [1.0, 2.0]
REF = {5: _effects(_same(1.5), _same(1.0), _same(2.0))}


def _study(pure, emb, sizes=(8,)):
    effects = {S: {"pure": _layers(pure), "embedding": _layers(emb, "embedding")} for S in sizes}
    refs = {(C.REFERENCE_NU, S): REF for S in sizes}
    verdicts = {(C.REFERENCE_NU, S): C.model_verdict(effects[S], REF) for S in sizes}
    return C.ModelStudy("m", 16, list(sizes), list(range(len(sizes))), effects, refs, verdicts, {})


# L = 4 blocks: h = 2
PURE = [(0, 0, 0.1), (0.3, 0.2, 0.6), (0.6, 0.4, 0.9), (1.2, 1.0, 1.6), (3.0, 2.4, 3.6)]
EMB = [(0, 0, 0.1), (0.1, 0, 0.2), (0.3, 0.1, 0.5), (0.6, 0.5, 0.8), (1.0, 0.8, 1.4)]


def test_fractions_by_hand():
    p = P.depth_profile(_study(PURE, EMB), 8)
    assert p.modes == ("pure", "embedding") and (p.n_blocks, p.half) == (4, 2)
    # pure mode, block 2: 0.6 / 1.5 = 0.4, interval [0.4 / 2.0, 0.9 / 1.0] = [0.2, 0.9]
    assert p.point[0, 0, 2] == pytest.approx(0.4)
    assert p.low[0, 0, 2] == pytest.approx(0.2) and p.high[0, 0, 2] == pytest.approx(0.9)
    F, lo, hi = p.largest()
    assert F[4] == pytest.approx(2.0) and lo[4] == pytest.approx(1.2) and hi[4] == pytest.approx(3.6)
    assert p.early_high == pytest.approx(0.9) and p.early_low == pytest.approx(0.2)
    assert p.growth == pytest.approx(1.2 / 0.9)
    assert p.point_range(1) == pytest.approx((0.1 / 1.5, 0.3 / 1.5))


def test_upper_end_is_the_criterions_ratio():
    """The profile's early upper end is the criterion's early ratio (a second implementation)."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        trip = [sorted(rng.uniform(0, 2, 3)) for _ in range(6)]
        pure = [(b, a, c) for a, b, c in trip]
        trip = [sorted(rng.uniform(0, 2, 3)) for _ in range(6)]
        emb = [(b, a, c) for a, b, c in trip]
        st = _study(pure, emb)
        p = P.depth_profile(st, 8)
        v = st.verdict(8)
        assert p.early_high == pytest.approx(v.early_ratio)
        assert (p.close_reading() is P.Reading.CONSISTENT) == (v.early_ratio < 1)


@pytest.mark.parametrize(
    "pure, close, grows",
    [
        (PURE, P.Reading.CONSISTENT, P.Reading.CONSISTENT),
        # block 2 straddles the reference ([0.2, 1.2]): inconclusive; the last block is resolved above it
        (
            [(0, 0, 0.1), (0.3, 0.2, 0.6), (0.6, 0.4, 1.2), (1.2, 1.0, 1.6), (3.0, 2.6, 3.6)],
            P.Reading.INCONCLUSIVE,
            P.Reading.CONSISTENT,
        ),
        # block 1 resolved beyond the reference (lower end 2.2 / 2 = 1.1): against; the last block's lower end
        # 2.0 / 2 = 1.0 is above block 2's upper end 0.9 / 1: the departure grows
        (
            [(0, 0, 0.1), (3.0, 2.2, 3.6), (0.6, 0.4, 0.9), (1.2, 1.0, 1.6), (3.0, 2.0, 3.6)],
            P.Reading.AGAINST,
            P.Reading.CONSISTENT,
        ),
        # the last block's interval [1.6 / 2, 3.6] overlaps block 2's [0.2, 0.9]: inconclusive
        (
            [(0, 0, 0.1), (0.3, 0.2, 0.6), (0.6, 0.4, 0.9), (1.2, 1.0, 1.6), (3.0, 1.6, 3.6)],
            P.Reading.CONSISTENT,
            P.Reading.INCONCLUSIVE,
        ),
        # the last block resolved nearer to Gaussian than block 2: the departure shrinks
        (
            [(0, 0, 0.1), (0.3, 0.2, 0.6), (0.9, 0.8, 0.9), (0.3, 0.2, 0.4), (0.1, 0, 0.2)],
            P.Reading.CONSISTENT,
            P.Reading.AGAINST,
        ),
    ],
)
def test_readings(pure, close, grows):
    emb = [(0, 0, 0.01)] * 5
    p = P.depth_profile(_study(pure, emb), 8)
    assert p.close_reading() is close
    assert p.growth_reading() is grows


def test_profile_text_table_and_figure():
    import matplotlib

    matplotlib.use("Agg")
    inconclusive = [(0, 0, 0.1), (0.3, 0.2, 0.6), (0.6, 0.4, 1.2), (1.2, 1.0, 1.6), (3.0, 2.6, 3.6)]
    prof = P.EffectProfile(
        {
            "m": {
                8: P.depth_profile(_study(inconclusive, EMB), 8),
                32: P.depth_profile(_study(PURE, EMB, sizes=(32,)), 32),
            }
        }
    )
    text = prof.reading("m")
    assert text == (
        "close through blocks 1-2: consistent with the statement at S = 32; inconclusive at S = 8; "
        "the departure grows with depth: consistent with the statement at S = 8 and S = 32"
    )
    summary = prof.summary().splitlines()
    # S = 32 (PURE): F(1) = 0.3 / 1.5 = 0.2 in [0.2 / 2, 0.6 / 1]; F(2) = 0.4 in [0.2, 0.9]; F(4) = 2.0 in [1.2, 3.6]
    assert summary[3] == "  S = 32: block 1: 0.20 [0.10, 0.60]; block 2: 0.40 [0.20, 0.90]; block 4: 2.00 [1.20, 3.60]"
    assert summary[1] == "m: " + text
    table = prof.table()
    assert "<- h" in table and table.count("\n") > 6
    fig = prof.figure(notes={"m": "moves 5 %"})
    assert fig.axes[0].get_title() == "m\nmoves 5 %"


def test_zero_reference_and_bad_input():
    assert list(P._divide(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.0, 4.0]))) == [0.0, math.inf, 0.5]
    st = _study(PURE, EMB)
    with pytest.raises(ValueError, match="sequences must be one of"):
        P.depth_profile(st, 9)
    with pytest.raises(ValueError, match="nu must be"):
        P.depth_profile(st, 8, nu=10.0)


# ------------------------------------------------------------------------------- the update norms
@pytest.fixture(scope="module")
def tiny_bert():
    import torch
    import transformers

    from gtcore.models import LoadedTransformer

    cfg = transformers.BertConfig(
        vocab_size=20,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.3)
    return LoadedTransformer(model, "bert", "tiny BERT", "test", False)


def test_update_norms_match_the_hugging_face_forward(tiny_bert):
    import torch

    from gtbook.studies.pretrained.effects import _TOKENS, stream
    from gtcore.stats.sampling import gaussian_tokens

    u = P.update_norms(tiny_bert, mode="pure", sequences=3, tokens=20, seed=5)
    x = gaussian_tokens(60, np.zeros(16), np.eye(16), seed=np.random.default_rng(stream(5, _TOKENS)))
    hs = [torch.as_tensor(x.reshape(3, 20, 16), dtype=torch.float32)]
    with torch.no_grad():  # the pure mode: the encoder's blocks, one after the other, on the Gaussian tokens
        for block in tiny_bert.model.encoder.layer:
            out = block(hs[-1])
            hs.append(out[0] if isinstance(out, tuple) else out)
    hs = [h.double().numpy() for h in hs]
    want = [
        np.mean(
            [
                np.linalg.norm(hs[k][s, t] - hs[k - 1][s, t]) / np.linalg.norm(hs[k - 1][s, t])
                for s in range(3)
                for t in range(20)
            ]
        )
        for k in range(1, 4)
    ]
    assert list(u.layers) == [0, 1, 2, 3] and math.isnan(u.mean[0])
    np.testing.assert_allclose(u.mean[1:], want, rtol=1e-4)
    assert np.all(u.low[1:] <= u.mean[1:]) and np.all(u.mean[1:] <= u.high[1:])
    assert u.largest == pytest.approx(max(want), rel=1e-4) and u.smallest == pytest.approx(min(want), rel=1e-4)
    rows = P.update_table({"tiny": u}).splitlines()
    assert (
        len(rows) == 5
        and rows[2].split()[0] == "1"
        and float(rows[2].split()[1]) == pytest.approx(100 * want[0], rel=1e-2)
    )


def test_a_block_that_only_normalises_moves_nothing(tiny_bert):
    """With every weight and bias of the blocks zero, a post-LayerNorm block maps an already normalised token
    to LayerNorm of itself: the update is 0 up to LayerNorm's epsilon."""
    import copy

    import torch

    from gtcore.models import LoadedTransformer

    model = copy.deepcopy(tiny_bert.model)
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if "LayerNorm" not in name:
                p.zero_()
    lt = LoadedTransformer(model, "bert", "identity BERT", "test", False)
    u = P.update_norms(lt, mode="embedding", sequences=2, tokens=10, seed=1)
    assert u.largest < 1e-4
    assert P.update_norms(tiny_bert, mode="embedding", sequences=2, tokens=10, seed=1).smallest > 0.05


def test_update_norms_bad_input(tiny_bert):
    with pytest.raises(ValueError, match="sequences must be a positive integer"):
        P.update_norms(tiny_bert, sequences=0, seed=0)
    with pytest.raises(ValueError, match="LoadedTransformer"):
        P.update_norms(object(), seed=0)


# ------------------------------------------------------------------------------- presentation
def test_criterion_run_and_sweep_tables(tiny_bert):
    import matplotlib

    matplotlib.use("Agg")
    from gtbook.scope import parse_scope

    st = E.Settings(n_projections=16, n_boot=10, null_repeats=8)
    a = C.study_model(tiny_bert, sizes=[4, 6], seeds=[3, 4], tokens=32, settings=st, nus=(20.0,), controls=False)
    b = C.study_model(tiny_bert, sizes=[2], seeds=[5], tokens=32, settings=st, nus=(20.0,), controls=False)
    run = R.CriterionRun({"tiny": a}, {"tiny": b})
    assert run.verdict_table().count("\n") == 3  # header, two sizes, one initialisation
    assert "blocks [1, 2, 3]" in run.fraction_table()
    assert "reference (Student-t" in run.detail_table("tiny")
    assert run.disagreements() == sum(len(d) for d in a.disagreements().values())
    prof = run.profile()
    assert prof.profiles["tiny"][4].early_high == pytest.approx(a.verdict(4).early_ratio)
    prof.figure(initial=run.initial_profiles())
    run.effects_figure("tiny")
    sw = R.size_sweep(b, a)
    assert sw.sizes == [2, 4, 6] and set(sw.band_blocks) == {"pure", "embedding"}
    assert sw.effect_blocks["pure"][1] == C.effect_verdict_block({"pure": a.effects[4]["pure"]}, a.references[20.0, 4])
    sw.figure()
    assert "first block out of band" in sw.table()
    clu = R.clustering_run(
        {"tiny": (tiny_bert, tiny_bert)}, run, {"tiny": "tiny BERT"}, sequences=2, tokens=32, seed=3, threshold=0.9
    )
    assert clu.fewest_clusters >= 1 and clu.table().count("tiny BERT") == 2
    # the clustering profile measures the same update on the same tokens (its own implementation)
    np.testing.assert_allclose(
        P.update_norms(tiny_bert, sequences=2, tokens=32, seed=3).mean[1:],
        clu.profiles["tiny"][0].update[1:],
        rtol=1e-10,
    )
    clu.figure()
    scope = parse_scope(R.model_scope(tiny_bert, "model code", "tiny BERT"))
    assert scope.independent and scope.d == (16,) and scope.heads == 2 and scope.family == "tiny BERT"
