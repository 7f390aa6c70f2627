"""gtbook.studies.invariance.nongaussian: moment-matched laws and the softmax-stack study (the slope's bootstrap SE:
tests/core/test_inference.py)."""

import numpy as np
import pytest

from gtbook.studies.invariance.nongaussian import softmax_stack_study
from gtcore import Controls
from gtcore.stats.sampling import LAWS, moment_matched_tokens

MU = np.array([0.5, -0.3])
SIGMA = np.array([[1.0, 0.4], [0.4, 0.7]])


@pytest.mark.parametrize("law", LAWS)
def test_population_moments_match(law):
    x = moment_matched_tokens(law, 400_000, MU, SIGMA, seed=1, weight=0.8)
    np.testing.assert_allclose(x.mean(axis=0), MU, atol=0.01)
    np.testing.assert_allclose(np.cov(x.T), SIGMA, atol=0.02)


def test_laws_have_their_shape():
    z = moment_matched_tokens("uniform", 200_000, np.zeros(1), np.eye(1), seed=2)[:, 0]
    assert abs(z.max() - np.sqrt(3)) < 1e-3 and abs(np.mean(z**4) - 1.8) < 0.02  # kurtosis of a uniform
    t = moment_matched_tokens("student_t", 400_000, np.zeros(1), np.eye(1), seed=3, dof=10)[:, 0]
    assert abs(np.mean(t**4) - 3 * (10 - 2) / (10 - 4)) < 0.15  # Student-t: 3(nu-2)/(nu-4)
    p, s = 0.8, 0.9
    m = moment_matched_tokens("mixture", 400_000, np.zeros(2), np.eye(2), seed=4, weight=p, separation=s)[:, 0]
    assert abs(np.mean(m**3) - s**3 * (1 - 2 * p) / np.sqrt(p * (1 - p))) < 0.02


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="law"):
        moment_matched_tokens("cauchy", 10, MU, SIGMA)
    with pytest.raises(ValueError, match="dof"):
        moment_matched_tokens("student_t", 10, MU, SIGMA, dof=2)
    with pytest.raises(ValueError, match="separation"):
        moment_matched_tokens("mixture", 10, MU, SIGMA, separation=1.0)


def test_stack_without_attention_is_exact():
    # affine layers: the Euler stack maps every cloud exactly as layer_stack maps its moments
    ctl = Controls(A=[[0.2, 0.6], [-0.6, 0.1]], b=[0.3, 0.0])
    st = softmax_stack_study(MU, SIGMA, ctl, 1.0, 12, [50, 100], 2, law="uniform")
    assert st.errors.max() < 1e-12


def test_nonaffine_residual_of_known_maps():
    from gtbook.studies.invariance.nongaussian import nonaffine_residual

    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((200_000, 2))
    M = np.array([[1.0, 0.5], [-0.3, 2.0]])
    assert nonaffine_residual(x0, x0 @ M.T + [1.0, -2.0]) < 1e-12
    # x1 = (z1 + eps z1^2, z2): the part of z1^2 not explained by (z1, z2, 1) is z1^2 - 1 (variance 2)
    eps = 0.1
    x1 = x0.copy()
    x1[:, 0] += eps * x0[:, 0] ** 2
    expected = eps * np.sqrt(2.0) / np.sqrt(1.0 + 2 * eps**2 + 1.0)  # ||residual|| / ||x1 - mean|| per token
    assert nonaffine_residual(x0, x1) == pytest.approx(expected, rel=0.02)
