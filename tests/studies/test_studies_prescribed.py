"""Chapter 6's general-parameter study: the class draws satisfy their conditions, the uniform control has the
Gaussian's two moments but not its shape, and a draw's Hotelling ratios separate the two laws."""

import numpy as np
import pytest

from gtbook.studies.prescribed.general import antithetic_uniform_tokens, general_layer, run_draw


@pytest.mark.parametrize("seed", range(20))
def test_general_layers_belong_to_their_class(seed):
    rng = np.random.default_rng(seed)
    for regime in ("destabilising", "stabilising"):
        c = general_layer(regime, 3, rng, beta=0.02)
        V, B, A = c.V[0], c.B[0], c.A
        sym = lambda M: 0.5 * (M + M.T)  # noqa: E731 - a one-line helper
        sign = 1 if regime == "destabilising" else -1
        assert np.linalg.eigvalsh(sign * sym(V))[0] > 0  # V definite, of the regime's sign
        assert np.linalg.eigvalsh(sym(B))[0] > 0
        assert np.abs(V - V.T).max() > 1e-6 and np.abs(B - B.T).max() > 1e-6  # not symmetric
        assert np.abs(V - V[0, 0] * np.eye(3)).max() > 1e-6  # not scalar
        assert np.any(A)
        if regime == "stabilising":
            assert np.linalg.eigvals(A).real.min() == pytest.approx(1.0)  # anti-stable, margin a_min
        c1 = general_layer(regime, 3, np.random.default_rng(seed + 100), beta=0.02)
        c2 = general_layer(regime, 3, np.random.default_rng(seed + 100), beta=0.5)
        np.testing.assert_allclose(c1.V[0] @ c1.B[0], c2.V[0] @ c2.B[0])  # V Sigma B does not depend on beta
        assert c1.B[0][0, 0] != pytest.approx(c2.B[0][0, 0])


def test_uniform_tokens_match_two_moments_not_the_shape():
    L = np.array([[1.0, 0.0, 0.0], [0.5, 0.8, 0.0], [0.2, -0.3, 0.6]])
    S = L @ L.T
    x = antithetic_uniform_tokens(200_000, S, seed=1)
    np.testing.assert_allclose(x.mean(0), 0.0, atol=1e-12)  # antithetic: exactly
    np.testing.assert_allclose(np.cov(x.T), S, atol=0.02)
    w = x @ np.linalg.inv(np.linalg.cholesky(S)).T  # whitened
    kurt = np.mean(w[:, 0] ** 4) / np.mean(w[:, 0] ** 2) ** 2
    assert kurt < 2.6  # a Gaussian has 3; these coordinates mix uniforms (1.8), well below


def test_run_draw_separates_gaussian_and_uniform_clouds():
    c = general_layer("destabilising", 3, np.random.default_rng(5), beta=0.02)
    r = run_draw("destabilising", "vit", c, n_tokens=600, clouds=10, n_layers=6, h=0.02, seed=3)
    assert r.compared == 6 and r.level == pytest.approx(1 - 0.01 / 6)
    assert r.gauss_ratio < 1.0 < r.uniform_ratio
    assert r.map_norm.shape == (7,) and r.model_norm[0] == pytest.approx(1.0)
