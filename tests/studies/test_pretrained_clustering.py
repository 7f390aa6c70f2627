"""Cosine similarities and cluster counts (gtbook.studies.pretrained.clustering), against scipy and
constructed clusters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from gtbook.studies.pretrained.clustering import cluster_count, cosine_similarities


def test_cosine_similarities_match_scipy():
    x = np.random.default_rng(0).standard_normal((40, 7)) + 0.5
    np.testing.assert_allclose(cosine_similarities(x), 1 - pdist(x, metric="cosine"), atol=1e-12)


def test_cluster_count_of_constructed_clusters():
    rng = np.random.default_rng(1)
    centres = np.linalg.qr(rng.standard_normal((16, 3)))[0].T * 5  # three orthogonal directions
    x = np.concatenate([c + 0.05 * rng.standard_normal((30, 16)) for c in centres])
    assert cluster_count(x, 0.9) == 3
    assert cluster_count(x, -1.0) == 1
    # independent Gaussian tokens in d = 200: cosines ~ N(0, 1/200), no pair above 0.9
    assert cluster_count(rng.standard_normal((50, 200)), 0.9) == 50


def test_scale_invariance_and_validation():
    x = np.random.default_rng(2).standard_normal((10, 4))
    scaled = x * np.arange(1, 11)[:, None]
    np.testing.assert_allclose(cosine_similarities(x), cosine_similarities(scaled), atol=1e-12)
    with pytest.raises(ValueError, match="zero token"):
        cosine_similarities(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="threshold"):
        cluster_count(x, 1.5)
