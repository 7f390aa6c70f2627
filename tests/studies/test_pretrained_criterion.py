"""The effect-size criterion of chapter 5 (gtbook.studies.pretrained.criterion), each against an
independent answer: closed forms and quadrature for known laws, an explicit resample, and the coverage of
the bootstrap intervals over many seeded data sets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from gtbook.studies.pretrained import criterion as C
from gtbook.studies.pretrained import effects as E
from gtcore.stats.gaussianity import excess_kurtosis_per_coordinate, mardia_kurtosis_excess, sliced_w2


def _centred(x):
    return (x - x.mean(axis=1, keepdims=True)).reshape(-1, x.shape[-1])


def _w2_standardised_t(nu: float) -> float:
    """W2 between a unit-variance Student-t_nu and N(0, 1), by quadrature of the quantile functions."""
    s = math.sqrt((nu - 2) / nu)
    f = lambda u: (s * stats.t.ppf(u, nu) - stats.norm.ppf(u)) ** 2  # noqa: E731
    return math.sqrt(integrate.quad(f, 0, 1, limit=400, points=[1e-6, 1e-3, 0.5, 1 - 1e-3, 1 - 1e-6])[0])


# ------------------------------------------------------------------------------ the statistics
def test_statistics_match_the_library_functions_on_the_centred_cloud():
    rng = np.random.default_rng(11)
    S, T, d = 6, 300, 5
    x = rng.standard_normal((S, T, d)) @ rng.standard_normal((d, d)) + rng.standard_normal((S, 1, d))
    x = x + 0.3 * x**2  # not Gaussian
    got = E.cloud_statistics(x, n_projections=4000, seed=3)
    z = _centred(x)
    assert got["mardia_excess"] == pytest.approx(mardia_kurtosis_excess(z), rel=1e-5)
    assert got["coord_kurtosis"] == pytest.approx(np.mean(np.abs(excess_kurtosis_per_coordinate(z))), rel=1e-6)
    # other directions, another whitening basis: the same average over directions, to Monte Carlo error
    assert got["sliced_w2"] == pytest.approx(sliced_w2(z, n_projections=4000, seed=5), rel=0.05)


def test_a_resample_is_the_statistic_of_the_explicitly_resampled_cloud():
    rng = np.random.default_rng(2)
    S, T, d = 7, 80, 4
    x = rng.standard_t(6, size=(S, T, d)) * rng.uniform(0.5, 2, size=(S, 1, 1))
    cl = E._cloud(x, 64, 1)
    counts = np.array([0, 3, 1, 0, 2, 1, 0])
    explicit = x[np.repeat(np.arange(S), counts)]
    want = E.cloud_statistics(explicit, n_projections=64, seed=1)
    np.testing.assert_allclose(E._values(cl, counts), [want[s] for s in E.STATISTICS], rtol=2e-5)
    # every sequence twice: the same empirical measure, the same statistics
    np.testing.assert_allclose(
        E._values(cl, 2 * np.ones(S, dtype=int)), E._values(cl, np.ones(S, dtype=int)), rtol=1e-5
    )


# ------------------------------------------------------------------ effect sizes of known laws
def test_a_gaussian_cloud_has_no_effect():
    x = np.random.default_rng(5).standard_normal((16, 256, 8))
    e = E.effect_sizes(x, seed=7, settings=E.Settings(n_boot=40, null_repeats=32))
    for s in E.STATISTICS:
        assert e.low[s] == 0.0, s  # the interval reaches zero effect
        assert e.high[s] < 0.1, s


def test_student_t_effect_sizes_match_their_closed_forms():
    nu = 30.0
    x = E.student_t_cloud(32, 512, 6, nu, np.random.SeedSequence(3))
    e = E.effect_sizes(x, seed=1, settings=E.Settings(n_boot=40, null_repeats=16))
    # sliced W2: every projection of a spherical t is a unit-variance t_nu (quadrature)
    assert e.value["sliced_w2"] == pytest.approx(_w2_standardised_t(nu), rel=0.15)
    assert e.low["sliced_w2"] > 0
    # Mardia's relative excess of a multivariate t: 2/(nu - 4); per coordinate: 6/(nu - 4)
    assert abs(e.value["mardia_excess"] - 2 / (nu - 4)) < 4 * e.se["mardia_excess"]
    assert abs(e.value["coord_kurtosis"] - 6 / (nu - 4)) < 4 * e.se["coord_kurtosis"] + 0.05


def test_bootstrap_intervals_cover_under_within_sequence_dependence():
    """Tokens of one sequence interact through one softmax attention layer (non-symmetric B) followed by a
    nonlinearity, so the sequence is the sampling unit, as in a Transformer. Over 120 seeded data sets of
    S = 8 sequences, each 95% interval of theta must cover the true mean of theta-hat (estimated from 1500
    other data sets) in at least 88% of them (3 binomial sd below 95%)."""
    S, T, d = 8, 64, 3
    settings = E.Settings(n_projections=16, n_boot=60, null_repeats=64)
    null = E.null_moments(S, T, d, seed=0, settings=settings)
    B = np.array([[1.0, 0.3, 0.0], [0.0, 0.8, 0.2], [0.1, 0.0, 1.2]])

    def draw(rng):
        x = rng.standard_normal((S, T, d))
        logits = np.einsum("sid,de,sje->sij", x, B, x)
        p = np.exp(logits - logits.max(-1, keepdims=True))
        y = x + (p / p.sum(-1, keepdims=True)) @ x
        return y + 0.5 * np.abs(y)

    rng = np.random.default_rng(123)
    truth = np.mean(
        [E._square(E._values(E._cloud(draw(rng), 16, 0), np.ones(S, dtype=int))) for _ in range(1500)], axis=0
    ) - np.array([null.mean_sq[s] for s in E.STATISTICS])
    hits = np.zeros(3)
    m = 120
    tq = stats.t.ppf(0.975, S - 1)
    for _ in range(m):
        e = E.effect_sizes(draw(rng), seed=0, settings=settings, null=null)
        for j, s in enumerate(E.STATISTICS):
            hits[j] += abs(e.theta[s] - truth[j]) <= tq * e.se[s]
            assert (e.low[s], e.high[s]) == pytest.approx(
                (math.sqrt(max(e.theta[s] - tq * e.se[s], 0)), math.sqrt(max(e.theta[s] + tq * e.se[s], 0)))
                if s == "sliced_w2"
                else E.magnitude_interval(e.theta[s] - tq * e.se[s], e.theta[s] + tq * e.se[s])
            )
    assert np.all(hits / m >= 0.88), dict(zip(E.STATISTICS, hits / m, strict=True))


def test_bootstrap_error_of_a_gaussian_cloud_matches_its_sampling_spread():
    """In dimension 64 with n = 1024 tokens, resampling sequences (duplicates) moves the statistics by far
    more than sampling does; each replicate is debiased by Gaussian samples resampled the same way, so the
    bootstrap standard error of a Gaussian cloud must be within a factor 3 of the actual spread of the
    estimate over 40 independent Gaussian samples (without that debiasing it is 9 times too large)."""
    S, T, d = 8, 128, 64
    st = E.Settings(n_projections=64, n_boot=40, null_repeats=40, null_pool=4)
    null = E.null_moments(S, T, d, seed=5, settings=st)
    se = [
        E.effect_sizes(np.random.default_rng(k).standard_normal((S, T, d)), seed=5, settings=st, null=null).se
        for k in range(4)
    ]
    for s in E.STATISTICS:
        ratio = np.mean([e[s] for e in se]) / null.sd_sq[s]
        assert 0.5 < ratio < 3, (s, ratio)


def test_magnitude_interval():
    assert E.magnitude_interval(0.1, 0.3) == (0.1, 0.3)
    assert E.magnitude_interval(-0.3, -0.1) == (0.1, 0.3)
    assert E.magnitude_interval(-0.3, 0.1) == (0.0, 0.3)
    assert E.magnitude_interval(-0.1, 0.3) == (0.0, 0.3)


def test_seeded_and_independent_of_the_worker_count(monkeypatch):
    x = np.random.default_rng(1).standard_normal((6, 64, 4)) ** 3
    st = E.Settings(n_boot=12, null_repeats=4)
    monkeypatch.setattr(E, "_workers", lambda: 1)
    a = E.effect_sizes(x, seed=2, settings=st)
    monkeypatch.setattr(E, "_workers", lambda: 2)
    b = E.effect_sizes(x, seed=2, settings=st)
    assert a.low == b.low and a.high == b.high and a.value == b.value
    assert E.effect_sizes(x, seed=3, settings=st).high != a.high


# ------------------------------------------------------------------------------------ verdicts
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


def _layers(highs, mode="pure"):
    """LayerEffects whose every statistic has upper ends ``highs`` per layer (lower = value = high / 2)."""
    eff = [
        _effects(*({s: h / 2 for s in E.STATISTICS}, {s: h / 2 for s in E.STATISTICS}, {s: h for s in E.STATISTICS}))
        for h in highs
    ]
    n = len(highs)
    return C.LayerEffects("m", mode, 8, 16, 0, np.arange(n), np.full(n, 5), np.full(n, 5), eff, {})


REF = {5: _effects({s: 1.5 for s in E.STATISTICS}, {s: 1.0 for s in E.STATISTICS}, {s: 2.0 for s in E.STATISTICS})}


@pytest.mark.parametrize(
    "pure, emb, verdict, first",
    [
        # L = 5 blocks: early and intermediate = blocks 1, 2, 3 (ceil(5/2))
        ([0, 0.1, 0.5, 0.9, 3, 3], [0, 0.1, 0.2, 0.3, 0.4, 5], C.Verdict.HOLDS, 4),
        ([0, 0.1, 0.5, 0.9, 3, 3], [0, 0.1, 0.2, 1.2, 0.4, 5], C.Verdict.NOT_CLOSE_EARLY, 4),
        ([0, 0.1, 0.5, 0.9, 0.9, 0.9], [0, 0.1, 0.2, 0.3, 0.4, 5], C.Verdict.CLOSE_AT_LAST, None),
    ],
)
def test_model_verdict(pure, emb, verdict, first):
    v = C.model_verdict({"pure": _layers(pure), "embedding": _layers(emb, "embedding")}, REF)
    assert v.verdict is verdict
    assert (v.n_blocks, v.half) == (5, 3)
    assert v.first_not_close["pure", "sliced_w2"] == first
    assert v.early_ratio == pytest.approx(max(max(pure[1:4]), max(emb[1:4])))


def test_close_needs_every_statistic():
    lay = _layers([0, 0.5])
    lay.effects[1].high["mardia_excess"] = 1.0  # equal to the reference's lower end: not below it
    assert list(lay.close(REF)) == [True, False]
    assert lay.first_not_close(REF, "mardia_excess") == 1
    assert lay.first_not_close(REF, "sliced_w2") is None


def test_interval_disagreements():
    a, b = _layers([0, 1, 1]), _layers([0, 1, 4])  # block 2: [0.5, 1] against [2, 4]
    assert C.interval_disagreements(a, b) == [(2, s) for s in sorted(E.STATISTICS)]
    assert C.interval_disagreements(b, a) == [(2, s) for s in sorted(E.STATISTICS)]
    assert C.interval_disagreements(a, a) == []


def test_band_criterion_moves_with_the_sample_size_the_effect_size_does_not():
    """A fixed small departure (Student-t, nu = 60) leaves the noise band of exact Gaussianity once the
    sample is large, while its effect size stays put within its intervals."""
    st = E.Settings(n_boot=30, null_repeats=24)
    small = E.effect_sizes(E.student_t_cloud(4, 128, 6, 60.0, np.random.SeedSequence(1)), seed=1, settings=st)
    large = E.effect_sizes(E.student_t_cloud(64, 512, 6, 60.0, np.random.SeedSequence(2)), seed=2, settings=st)
    n_small = E.null_moments(4, 128, 6, seed=1, settings=st)
    n_large = E.null_moments(64, 512, 6, seed=2, settings=st)
    lo, hi = n_small.band("mardia_excess")
    assert lo <= small.raw["mardia_excess"] <= hi
    lo, hi = n_large.band("mardia_excess")
    assert not lo <= large.raw["mardia_excess"] <= hi
    assert small.low["mardia_excess"] <= large.high["mardia_excess"]
    assert large.low["mardia_excess"] <= small.high["mardia_excess"]


def test_input_validation():
    with pytest.raises(ValueError, match="x must have shape"):
        E.effect_sizes(np.zeros((1, 4, 2)), seed=0)
    with pytest.raises(ValueError, match="n_boot"):
        E.Settings(n_boot=1)
    with pytest.raises(ValueError, match="level"):
        E.Settings(level=1.5)
    with pytest.raises(ValueError, match="seed"):
        E.stream(-1)
    with pytest.raises(ValueError, match="nu"):
        E.student_t_cloud(2, 2, 2, 3.0, 0)
    with pytest.raises(ValueError, match="null must have"):
        x = np.random.default_rng(0).standard_normal((4, 8, 2))
        E.effect_sizes(
            x, seed=0, null=E.null_moments(4, 9, 2, seed=0, settings=E.Settings(null_repeats=2, null_pool=1))
        )


def test_nulls_and_references_are_computed_once_per_shape_and_read_back_from_disk(tmp_path, monkeypatch):
    """A second process (the per-process cache cleared) reads the null and the reference back: no statistic is
    evaluated again, and the values are those computed the first time; another shape or seed is computed."""
    monkeypatch.setenv("GTBOOK_CACHE", str(tmp_path))
    monkeypatch.delenv("GTBOOK_NO_CACHE", raising=False)
    st = E.Settings(n_boot=3, null_repeats=3, null_pool=2, n_projections=8)
    first = E.null_moments(4, 16, 3, seed=7, settings=st)
    ref = E.reference_effect_sizes(20.0, 4, 16, 3, seed=7, settings=st)
    evaluated = []
    real = E._values
    monkeypatch.setattr(E, "_values", lambda cl, counts: evaluated.append(1) or real(cl, counts))
    for f in (E.null_moments, E.reference_effect_sizes):
        f.cache_clear()
    again = E.null_moments(4, 16, 3, seed=7, settings=st)
    ref_again = E.reference_effect_sizes(20.0, 4, 16, 3, seed=7, settings=st)
    assert evaluated == []
    assert again.mean == first.mean and np.array_equal(again.resampled, first.resampled)
    assert ref_again.value == ref.value and ref_again.low == ref.low
    E.null_moments(4, 16, 3, seed=8, settings=st)
    assert len(evaluated) > 0
    with pytest.raises(ValueError, match="seed"):
        E.null_moments(4, 16, 3, seed=-1, settings=st)


# --------------------------------------------------------------------------- a model, end to end
@pytest.fixture(scope="module")
def tiny_bert():
    """A 3-block BERT of width 16 with weights of standard deviation 0.3: far from the identity."""
    import torch
    import transformers

    from gtcore.models import LoadedTransformer

    cfg = transformers.BertConfig(
        vocab_size=20,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=512,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.3)
    return LoadedTransformer(model, "bert", "tiny BERT", "test", False)


def test_study_model_end_to_end(tiny_bert):
    st = E.Settings(n_projections=32, n_boot=20, null_repeats=16)
    study = C.study_model(tiny_bert, sizes=[8, 16], seeds=[1, 2], tokens=512, settings=st)
    assert set(study.verdicts) == {(nu, S) for nu in (20.0, 10.0, 50.0) for S in (8, 16)}
    res = study.effects[8]["pure"]
    assert list(res.layers) == [0, 1, 2, 3] and res.rank[0] == 16 and res.rank[1] == 15  # LayerNorm: d - 1
    assert study.gaussian_ratio(8) < 1  # layer 0 of the pure mode is the Gaussian input: close
    assert study.reference_low(8) > 0 and study.control_ratio(8) >= 1
    v = study.verdict(8)
    assert v.n_blocks == 3 and v.half == 2
    # the verdict is the one model_verdict gives on the stored effects
    assert v == C.model_verdict(study.effects[8], study.references[20.0, 8], 20.0)
    fr = study.fractions(8, "pure", [1, 3])
    assert len(fr["sliced_w2"]) == 2 and all(f >= 0 for f in fr["mardia_excess"])
    assert "tiny BERT" in res.table(study.references[20.0, 8])


def test_figures_draw(tiny_bert):
    import matplotlib

    matplotlib.use("Agg")
    from gtbook.studies.pretrained import figures
    from gtbook.studies.pretrained.clustering import clustering_profile

    st = E.Settings(n_projections=16, n_boot=10, null_repeats=8)
    study = C.study_model(tiny_bert, sizes=[4], seeds=[3], tokens=64, settings=st, controls=False)
    res = study.effects[4]
    refs = study.references[20.0, 4]
    figures.effect_size_figure({"pure": res["pure"], "embedding": res["embedding"]}, {"pure": refs, "embedding": refs})
    figures.criteria_across_sizes_figure([4], {"pure": [2]}, {"pure": [4]}, 3)
    prof = clustering_profile(tiny_bert, sequences=2, tokens=64, seed=3)
    assert prof.histogram.shape == (4, 50) and prof.clusters[0] == 64
    assert np.isnan(prof.update[0]) and np.all(prof.update[1:] > 0)
    ratio = np.max([res["pure"].ratio(refs, s) for s in E.STATISTICS], axis=0)
    figures.closeness_and_clustering_figure({"tiny": {"ratio": ratio, "profile": prof}})


def test_a_cloud_without_per_sequence_sums_gives_the_same_statistics():
    x = np.random.default_rng(4).standard_normal((5, 60, 6)) ** 2
    a = E._values(E._cloud(x, 32, 2), np.ones(5, dtype=int))
    b = E._values(E._cloud(x, 32, 2, per_sequence=False), np.ones(1, dtype=int))
    np.testing.assert_allclose(a, b, rtol=1e-5)
