"""Mixtures, labelled statistics and clouds followed in time, against closed forms."""

import numpy as np
import pytest
from scipy import integrate

from conftest import random_spd
from gtbook.studies.beyond.harness import noise_floors, time_within, track_gaussianity
from gtcore import Controls, gaussian_tokens
from gtcore.stats.gaussianity import mardia_kurtosis, noise_floor, sliced_w2
from gtcore.stats.inference import loglog_slope
from gtcore.stats.mixtures import GaussianMixture, per_label_noise_floor, per_label_statistic, statistic_path


@pytest.fixture
def mix2():
    return GaussianMixture(
        [0.3, 0.7], [[-1.0, 0.5], [2.0, 0.0]], [[[0.5, 0.1], [0.1, 0.3]], [[1.0, -0.2], [-0.2, 0.8]]]
    )


# ------------------------------------------------------------------------------ mixtures
def test_mixture_moments_closed_form_and_sampling(mix2):
    mu, S = mix2.moments()
    np.testing.assert_allclose(mu, 0.3 * np.array([-1, 0.5]) + 0.7 * np.array([2, 0]), rtol=1e-14)
    # law of total covariance, written out for two components
    d = mix2.means[0] - mix2.means[1]
    expected = 0.3 * mix2.covariances[0] + 0.7 * mix2.covariances[1] + 0.3 * 0.7 * np.outer(d, d)
    np.testing.assert_allclose(S, expected, rtol=1e-12)
    s = mix2.sample(200_000, seed=1)
    assert s.tokens.shape == (200_000, 2) and s.labels.shape == (200_000,)
    frac = s.counts() / 200_000
    assert abs(frac[0] - 0.3) < 4 * np.sqrt(0.21 / 200_000)
    np.testing.assert_allclose(s.tokens.mean(0), mu, atol=0.02)
    np.testing.assert_allclose(np.cov(s.tokens.T), S, atol=0.03)
    for k in range(2):
        part = s.tokens[s.labels == k]
        np.testing.assert_allclose(part.mean(0), mix2.means[k], atol=0.02)
        np.testing.assert_allclose(np.cov(part.T), mix2.covariances[k], atol=0.03)


def test_mixture_sample_with_full_covariances_z_scores():
    """d = 3, three components whose covariances are rotated (R diag(0.2, 1, 3) R^T, R a seeded random rotation:
    off-diagonal entries as large as the diagonal ones). Each statistic of the sample is a z-score against its
    exact standard error: the label counts (binomial), per component every mean entry (sqrt(S_ii / n_k)), every
    covariance entry (sqrt((S_ii S_jj + S_ij^2) / n_k), the Gaussian fourth moment) and Mardia's fourth moment
    of the tokens whitened by the true Cholesky factor (E|w|^4 = d(d + 2), variance d(d+2)(d+4)(d+6) - (d(d+2))^2).
    33 z-scores; max |z| < 4.5 (a false alarm with probability about 2e-4)."""
    rng = np.random.default_rng(20260612)
    d, n, w = 3, 40_000, np.array([0.2, 0.3, 0.5])
    covs = []
    for _ in range(3):
        R, _ = np.linalg.qr(rng.standard_normal((d, d)))
        covs.append(R @ np.diag([0.2, 1.0, 3.0]) @ R.T)
    means = 2.0 * rng.standard_normal((3, d))
    assert min(abs(S[0, 1]) + abs(S[0, 2]) + abs(S[1, 2]) for S in covs) > 0.5  # far from diagonal
    s = GaussianMixture(w, means, covs).sample(n, seed=11)
    z = list((s.counts() - n * w) / np.sqrt(n * w * (1 - w)))
    for k, (m, S) in enumerate(zip(means, covs, strict=True)):
        x = s.tokens[s.labels == k]
        nk = x.shape[0]
        z += list((x.mean(0) - m) / np.sqrt(np.diag(S) / nk))
        C = (x - m).T @ (x - m) / nk  # about the true mean: unbiased, the exact standard error below
        se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / nk)
        z += list(((C - S) / se)[np.triu_indices(d)])
        white = np.linalg.solve(np.linalg.cholesky(S), (x - m).T).T
        b2, e2 = np.mean(np.sum(white**2, axis=1) ** 2), d * (d + 2)
        z.append((b2 - e2) / np.sqrt((d * (d + 2) * (d + 4) * (d + 6) - e2**2) / nk))
    assert len(z) == 33
    assert np.max(np.abs(z)) < 4.5, np.round(z, 2)


def test_mixture_sampling_is_seeded(mix2):
    a, b = mix2.sample(100, seed=7), mix2.sample(100, seed=7)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.tokens, mix2.sample(100, seed=8).tokens)


def test_rank_deficient_component():
    mix = GaussianMixture([0.5, 0.5], [[0, 0, 0], [1, 1, 1]], [np.diag([1.0, 0, 0]), np.eye(3)])
    s = mix.sample(500, seed=0)
    np.testing.assert_allclose(s.tokens[s.labels == 0][:, 1:], 0.0)


def test_attention_average_single_component_is_the_gaussian_tilt(rng):
    S = random_spd(rng, 3)
    mu, B = rng.standard_normal(3), rng.standard_normal((3, 3))
    g = GaussianMixture([1.0], [mu], [S])
    x = rng.standard_normal((20, 3))
    np.testing.assert_allclose(g.attention_average(x, B), mu + x @ B.T @ S, rtol=1e-12, atol=1e-12)


def test_attention_average_against_quadrature_1d():
    mix = GaussianMixture([0.4, 0.6], [[-1.0], [1.5]], [[[0.3]], [[0.8]]])
    beta = 0.7

    def density(y):
        return sum(
            w * np.exp(-((y - m[0]) ** 2) / (2 * s[0, 0])) / np.sqrt(2 * np.pi * s[0, 0])
            for w, m, s in zip(mix.weights, mix.means, mix.covariances, strict=True)
        )

    xs = np.array([-2.0, -0.3, 0.0, 0.9, 2.5])
    got = mix.attention_average(xs[:, None], [[beta]])[:, 0]
    for x, g in zip(xs, got, strict=True):
        num = integrate.quad(lambda y, x=x: y * np.exp(beta * x * y) * density(y), -30, 30, epsabs=1e-13)[0]
        den = integrate.quad(lambda y, x=x: np.exp(beta * x * y) * density(y), -30, 30, epsabs=1e-13)[0]
        assert g == pytest.approx(num / den, rel=1e-8, abs=1e-10)
    # and it is not affine: second differences do not vanish
    s = np.linspace(-3, 3, 7)[:, None]
    f = mix.attention_average(s, [[beta]])[:, 0]
    assert np.max(np.abs(np.diff(f, 2))) > 1e-2


def test_attention_average_against_grid_2d(mix2):
    B = np.array([[0.4, 0.1], [-0.2, 0.3]])
    g = np.linspace(-9, 9, 721)
    Y = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    dens = np.zeros(len(Y))
    for w, m, S in zip(mix2.weights, mix2.means, mix2.covariances, strict=True):
        Si = np.linalg.inv(S)
        z = Y - m
        dens += w * np.exp(-0.5 * np.einsum("ni,ij,nj->n", z, Si, z)) / (2 * np.pi * np.sqrt(np.linalg.det(S)))
    for x in ([0.3, -0.5], [1.0, 1.0]):
        wts = dens * np.exp(Y @ (B @ np.array(x)))
        expected = wts @ Y / wts.sum()
        np.testing.assert_allclose(mix2.attention_average([x], B)[0], expected, atol=1e-8)


# ---------------------------------------------------------------------- labelled statistics
def test_per_label_statistic_matches_subsets(mix2):
    s = mix2.sample(3000, seed=2)
    vals = per_label_statistic(s.tokens, s.labels, "mardia_kurtosis")
    assert vals.shape == (2,)
    for k in range(2):
        assert vals[k] == mardia_kurtosis(s.tokens[s.labels == k])
    series = per_label_statistic(np.stack([s.tokens, 2 * s.tokens]), s.labels, sliced_w2)
    assert series.shape == (2, 2)
    np.testing.assert_allclose(series[0], series[1], rtol=1e-8)  # scale-free
    np.testing.assert_allclose(
        statistic_path(np.stack([s.tokens, s.tokens + 1]), "mardia_kurtosis"), mardia_kurtosis(s.tokens), rtol=1e-10
    )


def test_per_label_noise_floor_sizes(mix2):
    s = mix2.sample(400, seed=3)
    floors = per_label_noise_floor("mardia_kurtosis_excess", s.labels, 2, repeats=8, seed=4)
    assert [f.n for f in floors] == s.counts().tolist()
    np.testing.assert_array_equal(
        floors[1].values, noise_floor("mardia_kurtosis_excess", floors[1].n, 2, repeats=8, seed=5).values
    )
    both = noise_floors(("sliced_w2", "mardia_kurtosis"), 300, 2, repeats=4)
    assert set(both) == {"sliced_w2", "mardia_kurtosis"} and both["sliced_w2"].n == 300
    per = noise_floors(("sliced_w2",), 0, 2, labels=s.labels, repeats=4)
    assert len(per["sliced_w2"]) == 2


# ------------------------------------------------------------------------ clouds in time
def linear_layer():
    """x' = A x + b through the feed-forward block alone (no attention)."""
    A = np.array([[-0.3, 0.8], [-0.5, 0.1]])
    return Controls(U=np.eye(2), W=A, c=np.array([0.2, -0.1])), A, A @ np.array([0.2, -0.1])


def test_prediction_error_vanishes_for_the_linearised_flow():
    ctl, _, _ = linear_layer()
    x0 = gaussian_tokens(200, [0.0, 1.0], [[1.0, 0.3], [0.3, 0.5]], seed=1)
    run = track_gaussianity(x0, ctl, np.geomspace(1e-3, 1.0, 5), statistics=("mardia_kurtosis",))
    assert run.prediction_error[0] == 0.0
    assert run.prediction_error.max() < 1e-7
    # an affine flow leaves every affine-invariant statistic unchanged
    np.testing.assert_allclose(run.statistics["mardia_kurtosis"], run.statistics["mardia_kurtosis"][0], rtol=1e-9)


def test_relu_error_grows_linearly_and_identity_with_gaussian_attention_does_not():
    ctl = Controls(V=-np.eye(2), B=0.5 * np.eye(2), U=np.eye(2), W=0.5 * np.eye(2), c=np.zeros(2))
    x0 = gaussian_tokens(400, np.zeros(2), np.eye(2), seed=2)
    times = np.geomspace(1e-3, 0.05, 5)
    ident = track_gaussianity(x0, ctl, times, average="gaussian", statistics=())
    assert ident.prediction_error.max() < 1e-7  # W2 from a difference of traces: ~sqrt(eps)
    relu = track_gaussianity(x0, ctl, times, ff="relu", average="gaussian", statistics=())
    assert 0.9 < loglog_slope(relu.t, relu.prediction_error, 0.05) < 1.1


def test_labelled_tracking_shapes(mix2):
    s = mix2.sample(300, seed=5)
    ctl = Controls(V=-0.5 * np.eye(2), B=0.2 * np.eye(2))
    run = track_gaussianity(s.tokens, ctl, [0.1, 0.2], labels=s.labels, max_step=0.1)
    assert run.statistics["sliced_w2"].shape == (3, 2)
    assert run.final_tokens.shape == (300, 2) and run.steps == 2


def test_time_within_and_slope():
    t = np.array([0.0, 0.1, 0.2, 0.3])
    assert time_within(t, [0.0, 0.01, 0.2, 0.01], 0.05) == 0.1
    assert time_within(t, [0.0, 0.01, 0.02, 0.03], 0.05) == 0.3
    assert np.isnan(time_within(t, [1.0, 0, 0, 0], 0.05))
    tt = np.geomspace(1e-3, 1, 9)
    assert loglog_slope(tt, 3 * tt**1.5, 0.1) == pytest.approx(1.5, rel=1e-10)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: GaussianMixture([-0.2, 1.2], [[0.0], [1.0]], [[[1.0]], [[1.0]]]), "weights"),
        (lambda: GaussianMixture([0.5, 0.6], [[0.0], [1.0]], [[[1.0]], [[1.0]]]), "weights"),
        (lambda: GaussianMixture([[0.5, 0.5]], [[0.0], [1.0]], [[[1.0]], [[1.0]]]), "weights"),
        (lambda: GaussianMixture([0.5, 0.5], [[0.0, 0.0], [1.0]], [np.eye(2), np.eye(2)]), "means"),
        (lambda: GaussianMixture([0.5, 0.5], [[0.0, 0.0], [1.0, 0.0]], [np.eye(2), np.eye(3)]), "covariances"),
        (lambda: GaussianMixture([0.5, 0.5], [[0.0, 0.0]], [np.eye(2), np.eye(2)]), "means"),
        (lambda: GaussianMixture([0.5, 0.5], [[0.0, 0.0], [1.0, 0.0]], [np.eye(2), -np.eye(2)]), "covariances"),
        (lambda: GaussianMixture([1.0], [[0.0, 0.0]], [np.eye(2)]).sample(0), "n"),
        (
            lambda: GaussianMixture([1.0], [[0.0, 0.0]], [np.eye(2)]).attention_average([[0.0, 0.0, 0.0]], np.eye(2)),
            "x",
        ),
        (lambda: GaussianMixture([1.0], [[0.0, 0.0]], [np.eye(2)]).attention_average([[0.0, 0.0]], np.eye(3)), "B"),
        (lambda: per_label_statistic(np.zeros((4, 2)), [0, 0, 1, 1, 1], "sliced_w2"), "labels"),
        (
            lambda: per_label_statistic(np.random.default_rng(0).standard_normal((4, 2)), [0, 0, 0, 1], "sliced_w2"),
            "labels",
        ),
        (lambda: per_label_statistic(np.zeros((4, 2)), [0, 0, 1, 1], "entropy"), "statistic"),
        (lambda: track_gaussianity(np.zeros((4, 2)), Controls(A=np.eye(2)), [0.2, 0.1]), "times"),
        (lambda: track_gaussianity(np.zeros((4, 2)), Controls(A=np.eye(2)), [0.1], max_step=0), "max_step"),
        (lambda: time_within([0, 1], [0, 1, 2], 0.1), "t"),
        (lambda: loglog_slope([0, 1e-3], [0, 1], 1e-4), "x_max"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()
