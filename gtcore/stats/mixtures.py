r"""Where Gaussian invariance ends: Gaussian mixtures and labelled tokens.

The paper proves that a Gaussian stays Gaussian under self-attention with an affine feed-forward
layer, because the attention average against :math:`N(\mu, \Sigma)` is affine in the query (the
tilt of :mod:`gtcore.attention`). Against a Gaussian mixture
:math:`\rho = \sum_k w_k N(\mu_k, \Sigma_k)` it is a blend of the components' tilts, gated by a
softmax over components that depends on the query
(:meth:`gtcore.attention.DotProduct.mixture_average`),
which is not affine in :math:`x`: mixtures are not an invariant class, and each component
stops being Gaussian. This module samples mixtures with component labels, evaluates that exact
attention average (:meth:`gtcore.attention.DotProduct.mixture_average`) and measures statistics
per label (each against its own noise floor). Following a cloud in time is chapter 2's harness,
:mod:`gtbook.studies.beyond.harness`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._linalg import psd_factor
from gtcore._repr import short_repr
from gtcore._validation import (
    as_float_array,
    as_generator,
    check_covariance,
    check_finite,
    check_integer,
    check_tokens,
)
from gtcore.attention import ATTENTION_TYPES
from gtcore.stats.gaussianity import _STATISTICS, NoiseFloor, noise_floor

#: tolerance on the sum of the mixture weights
WEIGHT_ATOL = 1e-12


# ---------------------------------------------------------------------------- mixtures
@dataclass(frozen=True, eq=False)
class GaussianMixture:
    r"""A Gaussian mixture :math:`\rho = \sum_{k=1}^K w_k N(\mu_k, \Sigma_k)` on :math:`\mathbb{R}^d`.

    Parameters
    ----------
    weights : (K,) array
        Non-negative, summing to 1 (to 1e-12).
    means : (K, d) array, or a sequence of K (d,) vectors
        The components' means :math:`\mu_k`.
    covariances : (K, d, d) array, or a sequence of K (d, d) matrices
        The components' covariances :math:`\Sigma_k`, symmetric PSD (rank-deficient allowed).

    Raises
    ------
    ValueError
        Negative weights, weights not summing to 1, or components of mismatched dimension (the
        message names ``weights``, ``means`` or ``covariances``).

    Examples
    --------
    >>> from gtcore import GaussianMixture
    >>> gm = GaussianMixture([0.5, 0.5], [[-1.0], [1.0]], [[[1.0]], [[1.0]]])
    >>> mu, Sigma = gm.moments()
    >>> mu, Sigma
    (array([0.]), array([[2.]]))
    """

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    def __init__(self, weights: Any, means: Any, covariances: Any) -> None:
        w = as_float_array(weights, "weights")
        if w.ndim != 1 or w.size < 1:
            raise ValueError(f"weights must be a non-empty vector of shape (K,), got shape {w.shape}")
        check_finite(w, "weights")
        if np.any(w < 0):
            raise ValueError(f"weights must be non-negative, got {w.tolist()}")
        if abs(w.sum() - 1.0) > WEIGHT_ATOL:
            raise ValueError(f"weights must sum to 1, got sum {w.sum():.15g}")
        K = w.size
        means_list = _components(means, "means", K, ndim=1)
        covs_list = _components(covariances, "covariances", K, ndim=2)
        d = means_list[0].shape[0]
        for k, m in enumerate(means_list):
            if m.shape != (d,):
                raise ValueError(f"means: component {k} has dimension {m.shape[0]}, component 0 has {d}")
        for k, S in enumerate(covs_list):
            if S.shape != (d, d):
                raise ValueError(f"covariances: component {k} has shape {S.shape}, the means need ({d}, {d})")
        mu = np.stack([np.asarray(m, float) for m in means_list])
        check_finite(mu, "means")
        Sig = np.stack([check_covariance(S, f"covariances[{k}]") for k, S in enumerate(covs_list)])
        for name, arr in (("weights", w), ("means", mu), ("covariances", Sig)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def d(self) -> int:
        """Dimension of the tokens."""
        return self.means.shape[1]

    @property
    def components(self) -> int:
        """Number of components K."""
        return self.weights.size

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Mean and covariance of the mixture (those of its moment-matched Gaussian).

        .. math::

            \mu = \sum_k w_k \mu_k, \qquad
            \Sigma = \sum_k w_k \big(\Sigma_k + (\mu_k - \mu)(\mu_k - \mu)^\top\big).

        Returns
        -------
        mu : (d,) ndarray
            The mixture's mean.
        Sigma : (d, d) ndarray
            Its covariance, exactly symmetric.
        """
        mu = self.weights @ self.means
        dm = self.means - mu
        S = np.einsum("k,kij->ij", self.weights, self.covariances) + np.einsum("k,ki,kj->ij", self.weights, dm, dm)
        return mu, 0.5 * (S + S.T)

    def sample(self, n: int, seed: int | np.random.Generator | None = 0) -> LabelledTokens:
        r"""``n`` i.i.d. tokens with their component labels.

        Labels are drawn i.i.d. from ``weights`` (so component sizes are multinomial), then
        :math:`x_i = \mu_{k_i} + L_{k_i} z_i` with :math:`L_k L_k^\top = \Sigma_k`,
        :math:`z_i \sim N(0, I)`. The same seed gives the same tokens and labels.

        Parameters
        ----------
        n : int
            The number of tokens (at least 1).
        seed : int or numpy Generator
            The seed of the labels and tokens.

        Returns
        -------
        LabelledTokens
            The (n, d) tokens and their (n,) component labels.
        """
        n = check_integer(n, "n", 1)
        rng = as_generator(seed)
        labels = rng.choice(self.components, size=int(n), p=self.weights)
        z = rng.standard_normal((int(n), self.d))
        x = np.empty((int(n), self.d))
        for k in range(self.components):
            idx = labels == k
            x[idx] = self.means[k] + z[idx] @ psd_factor(self.covariances[k]).T
        return LabelledTokens(tokens=x, labels=labels)

    def attention_average(self, x: Any, B: Any) -> np.ndarray:
        r"""The exact dot-product attention average against the mixture
        (:meth:`gtcore.attention.DotProduct.mixture_average`).

        See the module docstring for :math:`\pi_k`. For one component it is the Gaussian tilt.

        Parameters
        ----------
        x : (n, d) array
            The query tokens.
        B : (d, d) array
            The query-key matrix (logits :math:`y^\top B x`).

        Returns
        -------
        (n, d) ndarray
            The attention average at each query.
        """
        x = check_tokens(x, "x", self.d)
        B = as_float_array(B, "B")
        if B.shape != (self.d, self.d):
            raise ValueError(f"B must have shape ({self.d}, {self.d}), got shape {B.shape}")
        check_finite(B, "B")
        return ATTENTION_TYPES["dot"].mixture_average(x, self.weights, self.means, self.covariances, B)


def _components(x: Any, name: str, K: int, ndim: int) -> list[np.ndarray]:
    if isinstance(x, (list, tuple)):
        parts = [as_float_array(p, f"{name}[{k}]") for k, p in enumerate(x)]
    else:
        arr = as_float_array(x, name)
        if arr.ndim != ndim + 1:
            raise ValueError(
                f"{name} must hold one {'vector' if ndim == 1 else 'matrix'} per component, got shape {arr.shape}"
            )
        parts = list(arr)
    if len(parts) != K:
        raise ValueError(f"{name} must hold one entry per weight: {K} expected, got {len(parts)}")
    for k, p in enumerate(parts):
        if p.ndim != ndim:
            raise ValueError(f"{name}: component {k} must have {ndim} dimension(s), got shape {p.shape}")
    return parts


@dataclass(frozen=True)
class LabelledTokens:
    """Tokens (N, d) with an integer label per token (N,).

    Attributes
    ----------
    tokens : (N, d) ndarray
        The tokens.
    labels : (N,) ndarray of int
        The component (or group) of each token, 0..K-1.

    Examples
    --------
    >>> from gtcore import GaussianMixture
    >>> gm = GaussianMixture([0.25, 0.75], [[-1.0], [1.0]], [[[1.0]], [[1.0]]])
    >>> lt = gm.sample(10_000, seed=0)
    >>> type(lt).__name__, round(float(np.mean(lt.labels == 1)), 2)
    ('LabelledTokens', 0.75)
    """

    tokens: np.ndarray
    labels: np.ndarray

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    def counts(self) -> np.ndarray:
        """Number of tokens per label 0..K-1.

        Returns
        -------
        (K,) ndarray of int
            ``numpy.bincount(labels)``.
        """
        return np.bincount(self.labels)


# -------------------------------------------------------------------- per-label statistics
def _statistic(statistic: Callable[[np.ndarray], Any] | str) -> Callable[[np.ndarray], Any]:
    if isinstance(statistic, str):
        if statistic not in _STATISTICS:
            raise ValueError(f"statistic must be a callable or one of {sorted(_STATISTICS)}, got {statistic!r}")
        return _STATISTICS[statistic]
    if not callable(statistic):
        raise ValueError(f"statistic must be callable, got {type(statistic).__name__}")
    return statistic


def _labels(labels: Any, n: int) -> np.ndarray:
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) (one per token), got shape {lab.shape}")
    if lab.size and (not np.issubdtype(lab.dtype, np.integer) or lab.min() < 0):
        raise ValueError("labels must be non-negative integers")
    return lab.astype(np.int64)


def per_label_statistic(tokens: Any, labels: Any, statistic: Callable[[np.ndarray], Any] | str) -> np.ndarray:
    r"""A statistic of each labelled sub-cloud: :math:`s(\{x_i : k_i = k\})` for :math:`k = 0..K-1`.

    Parameters
    ----------
    tokens : (N, d) or (T, N, d) array
        One cloud, or the same tokens at T times.
    labels : (N,) array of int
        Non-negative labels (every label 0..K-1 must hold at least 2 tokens).
    statistic : callable or str
        A statistic (N, d) -> float, or the name of a :mod:`gtcore.stats.gaussianity` statistic.

    Returns
    -------
    (K,) or (T, K) ndarray
        The statistic of each label's tokens (at each time).
    """
    fn = _statistic(statistic)
    x = as_float_array(tokens, "tokens")
    if x.ndim not in (2, 3):
        raise ValueError(f"tokens must have shape (N, d) or (T, N, d), got shape {x.shape}")
    lab = _labels(labels, x.shape[-2])
    counts = np.bincount(lab)
    if np.any(counts < 2):
        raise ValueError(
            f"labels: every label 0..{counts.size - 1} needs at least 2 tokens, got counts {counts.tolist()}"
        )
    frames = x[None] if x.ndim == 2 else x
    out = np.array([[float(fn(f[lab == k])) for k in range(counts.size)] for f in frames])
    return out[0] if x.ndim == 2 else out


def per_label_noise_floor(
    statistic: Callable[[np.ndarray], Any] | str, labels: Any, d: int, *, repeats: int = 64, seed: int = 0
) -> list[NoiseFloor]:
    """The noise floor of ``statistic`` for each label, at that label's sample size.

    Label ``k`` with :math:`n_k` tokens gets ``noise_floor(statistic, n_k, d, repeats=repeats,
    seed=seed + k)``: the band a true Gaussian sample of the same size would give.

    Parameters
    ----------
    statistic : callable or str
        As in :func:`~gtcore.stats.gaussianity.noise_floor`.
    labels : (N,) array of int
        The tokens' labels.
    d : int
        The dimension.
    repeats : int
        The number of Gaussian samples per label.
    seed : int
        Label ``k`` uses ``seed + k``.

    Returns
    -------
    list of NoiseFloor
        One per label 0..K-1.
    """
    lab = _labels(labels, np.asarray(labels).shape[0])
    counts = np.bincount(lab)
    check_integer(d, "d", 1)
    check_integer(repeats, "repeats", 2)
    seed = check_integer(seed, "seed", 0)
    return [noise_floor(statistic, int(n_k), d, repeats=repeats, seed=seed + k) for k, n_k in enumerate(counts)]


def statistic_path(tokens: Any, statistic: Callable[[np.ndarray], Any] | str) -> np.ndarray:
    """A statistic of the whole cloud at each time: ``tokens`` (T, N, d) -> (T,) array.

    Parameters
    ----------
    tokens : (T, N, d) array
        The cloud at T times.
    statistic : callable or str
        A statistic (N, d) -> float, or the name of a :mod:`gtcore.stats.gaussianity` statistic.

    Returns
    -------
    (T,) ndarray
        The statistic at each time.
    """
    fn = _statistic(statistic)
    x = as_float_array(tokens, "tokens")
    if x.ndim != 3:
        raise ValueError(f"tokens must have shape (T, N, d), got shape {x.shape}")
    return np.array([float(fn(f)) for f in x])


__all__ = [
    "GaussianMixture",
    "LabelledTokens",
    "per_label_noise_floor",
    "per_label_statistic",
    "statistic_path",
]
