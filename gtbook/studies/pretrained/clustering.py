r"""What happens after "early and intermediate": pairwise cosine similarities and cluster counts per layer.

The mean-field analyses of self-attention predict that tokens cluster at depth (their directions
concentrate on few points). For each layer :math:`\ell` and each of a few sequences of :math:`T` tokens,

* the pairwise cosine similarities :math:`c_{ij} = \langle x_i, x_j\rangle / (\|x_i\|\|x_j\|)`,
  :math:`i < j`, pooled into a histogram on :math:`[-1, 1]`;
* a **cluster count**: the number of connected components of the graph joining :math:`i` and
  :math:`j` when :math:`c_{ij} \ge \tau` (default :math:`\tau = 0.9`, an angle of about 26 degrees),
  averaged over the sequences. Independent Gaussian tokens in dimension :math:`d` have
  :math:`c_{ij} \approx N(0, 1/d)`, hence :math:`T` clusters; tokens collapsed to one direction, 1;
* the **relative update** of block :math:`\ell`, :math:`\|x^{(\ell)}_i - x^{(\ell-1)}_i\| /
  \|x^{(\ell-1)}_i\|` averaged over the tokens: near 0, the block is nearly the identity on these tokens
  (and a network of such blocks nearly linear).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ClusteringProfile", "cluster_count", "clustering_profile", "cosine_similarities"]


def cosine_similarities(x: Any) -> np.ndarray:
    r"""The :math:`T(T-1)/2` cosine similarities :math:`c_{ij}`, :math:`i < j`, of a (T, d) array of tokens."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2:
        raise ValueError(f"x must have shape (T, d) with T >= 2, got {a.shape}")
    norms = np.linalg.norm(a, axis=1)
    if np.any(norms == 0):
        raise ValueError("x must have no zero token (its direction is undefined)")
    u = a / norms[:, None]
    g = np.clip(u @ u.T, -1.0, 1.0)
    return g[np.triu_indices(len(a), k=1)]


def cluster_count(x: Any, threshold: float = 0.9) -> int:
    r"""Connected components of :math:`\{(i, j): c_{ij} \ge \tau\}` over the (T, d) tokens ``x``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    if not -1 <= threshold <= 1:
        raise ValueError(f"threshold must lie in [-1, 1], got {threshold!r}")
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1:
        raise ValueError(f"x must have shape (T, d) with T >= 1, got {a.shape}")
    u = a / np.linalg.norm(a, axis=1, keepdims=True)
    adj = csr_matrix(u @ u.T >= threshold)
    return int(connected_components(adj, directed=False)[0])


@dataclass
class ClusteringProfile:
    r"""Cosine similarities and cluster counts of a model's tokens at every layer.

    Attributes
    ----------
    model, mode : str
    sequences, tokens : int
        The sequences used (a few) and :math:`T`.
    layers : (L+1,) int array
    edges : (bins+1,) array
        Histogram bin edges on :math:`[-1, 1]`.
    histogram : (L+1, bins) array
        Density of the pairwise cosine similarities at each layer (pooled over the sequences).
    mean_cosine : (L+1,) array
    clusters : (L+1,) array
        Mean cluster count over the sequences.
    threshold : float
    update : (L+1,) array
        Mean relative update of each block (NaN at layer 0).
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    layers: np.ndarray
    edges: np.ndarray
    histogram: np.ndarray
    mean_cosine: np.ndarray
    clusters: np.ndarray
    threshold: float
    update: np.ndarray

    def __repr__(self) -> str:
        return (
            f"ClusteringProfile({self.model!r}, {self.mode}: mean cosine {self.mean_cosine[0]:.2f} -> "
            f"{self.mean_cosine[-1]:.2f}, clusters {self.clusters[0]:.0f} -> {self.clusters[-1]:.1f})"
        )

    def table(self) -> str:
        """One row per layer: mean cosine similarity and cluster count."""
        lines = [
            f"{self.model}, mode={self.mode}: {self.sequences} sequences x T={self.tokens}; clusters at "
            f"cosine >= {self.threshold:g}; update = mean |x_l - x_(l-1)| / |x_(l-1)|",
            f"{'layer':>5} {'mean cos':>9} {'clusters':>9} {'update':>9}",
        ]
        lines += [
            f"{layer:>5d} {c:9.3f} {k:9.1f} {u:9.3g}"
            for layer, c, k, u in zip(self.layers, self.mean_cosine, self.clusters, self.update, strict=True)
        ]
        return "\n".join(lines)


def clustering_profile(
    model: Any,
    *,
    mode: str = "pure",
    sequences: int = 4,
    tokens: int = 512,
    seed: int,
    threshold: float = 0.9,
    bins: int = 50,
) -> ClusteringProfile:
    r"""Feed Gaussian tokens (the first ``sequences`` of stream ``tokens`` of ``seed``, as
    :func:`~gtbook.studies.pretrained.criterion.layer_effects` draws them) and measure, per layer, the
    cosine-similarity histogram and the cluster count.

    Parameters
    ----------
    model : gtcore.models.LoadedTransformer
    mode : {"pure", "embedding"}
    sequences, tokens : int
    seed : int
    threshold : float
        :math:`\tau` of :func:`cluster_count`.
    bins : int

    Returns
    -------
    ClusteringProfile
    """
    from gtbook.studies.pretrained.effects import _TOKENS, stream
    from gtcore.models import LoadedTransformer, iter_layers
    from gtcore.stats.sampling import gaussian_tokens

    if not isinstance(model, LoadedTransformer):
        raise ValueError("model must be a LoadedTransformer (gtcore.models.load_transformer)")
    for name, v in (("sequences", sequences), ("tokens", tokens), ("bins", bins)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    S, T, d = int(sequences), int(tokens), model.d
    x = gaussian_tokens(S * T, np.zeros(d), np.eye(d), seed=np.random.default_rng(stream(seed, _TOKENS)))
    edges = np.linspace(-1.0, 1.0, int(bins) + 1)
    layers, hists, means, counts, updates = [], [], [], [], []
    prev = None
    for layer, h in iter_layers(model, x.reshape(S, T, d), mode):
        arr = h.double().cpu().numpy()
        updates.append(
            math.nan
            if prev is None
            else float(np.mean(np.linalg.norm(arr - prev, axis=-1) / np.linalg.norm(prev, axis=-1)))
        )
        prev = arr
        cos = np.concatenate([cosine_similarities(a) for a in arr])
        layers.append(layer)
        hists.append(np.histogram(cos, bins=edges, density=True)[0])
        means.append(float(cos.mean()))
        counts.append(float(np.mean([cluster_count(a, threshold) for a in arr])))
    return ClusteringProfile(
        model.name,
        mode,
        S,
        T,
        np.array(layers),
        edges,
        np.array(hists),
        np.array(means),
        np.array(counts),
        float(threshold),
        np.array(updates),
    )
