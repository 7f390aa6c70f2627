r"""The criterion of chapter 5, per-sequence statistics, and power controls for the bands.

The paper's numerical statement (arXiv:2606.07600, abstract) is that practical Transformers with
Gaussian inputs "remain close to moment-matched Gaussian distributions through early and
intermediate layers". This module turns it into a criterion fixed before any model is run:

* **early and intermediate layers** of an :math:`L`-block model are the block outputs
  :math:`\ell = 1, \dots, \lceil L/2 \rceil` (:func:`early_layers`);
* **close to Gaussian** for a statistic means inside its 99% noise band, the band of the same
  statistic over true Gaussian samples of the same shape and rank
  (:class:`gtbook.studies.pretrained.statistics.LayerStatistics`);
* the statement holds for a statistic iff its first block out of band
  (:func:`first_block_departure`) comes after :math:`\lceil L/2 \rceil` (or never).

Pooling the :math:`S` sequences is fair only when they are interchangeable (the between-sequence
ratio :math:`F \approx 1`); when attention gives each sequence a shared component,
:func:`within_sequence_statistics` removes each sequence's own mean before pooling, so the
statistics describe the cloud of one sequence around its centre (the object the mean-field flow
moves), with a noise band computed for the same centring.

:func:`sample_statistics` evaluates the four pooled statistics and their bands on any
:math:`(S, T, d)` sample; chapter 5 feeds it non-Gaussian laws with the same first two moments
(:func:`student_t_tokens`, :func:`shared_component_tokens`) as power controls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from gtbook.studies.pretrained.statistics import STATISTICS, _statistics
from gtbook.studies.pretrained.statistics import _floor as _sequence_floor
from gtcore._linalg import numerical_rank, whiten
from gtcore.models import LoadedTransformer, iter_layers
from gtcore.stats.gaussianity import (
    excess_kurtosis_per_coordinate,
    mardia_kurtosis_excess_of_whitened,
    sliced_w2_of_whitened,
)
from gtcore.stats.sampling import gaussian_tokens

#: the statistics computed within sequences (the between-sequence ratio is 0 there by design)
WITHIN = ("sliced_w2", "mardia_excess", "coord_kurtosis")


def early_layers(n_layers: int) -> list[int]:
    r"""The block outputs :math:`1, \dots, \lceil L/2 \rceil` of an :math:`L`-block model."""
    if isinstance(n_layers, bool) or int(n_layers) != n_layers or n_layers < 1:
        raise ValueError(f"n_layers must be an integer >= 1, got {n_layers!r}")
    return list(range(1, math.ceil(int(n_layers) / 2) + 1))


def first_block_departure(stats: Any, statistic: str) -> int | None:
    r"""The first block :math:`\ell \ge 1` at which ``statistic`` leaves its band (``None``: never).

    ``stats`` is a :class:`~gtbook.studies.pretrained.statistics.LayerStatistics` or a
    :class:`WithinSequenceStatistics`. Layer 0 (the input of block 1) is not a block output and
    is skipped.
    """
    inside = stats.within_band(statistic)
    for layer, ok in zip(stats.layers, inside, strict=True):
        if layer >= 1 and not ok:
            return int(layer)
    return None


def _centre_sequences(x: np.ndarray, S: int, T: int) -> np.ndarray:
    y = x.reshape(S, T, -1)
    return (y - y.mean(axis=1, keepdims=True)).reshape(S * T, -1)


def _within_values(x: np.ndarray, S: int, T: int, n_projections: int, seed: int) -> np.ndarray:
    z = _centre_sequences(x, S, T)
    y = whiten(z)  # once, for both whitened statistics
    return np.array(
        [
            sliced_w2_of_whitened(y, n_projections=n_projections, seed=seed),
            mardia_kurtosis_excess_of_whitened(y),
            float(np.nanmean(np.abs(excess_kurtosis_per_coordinate(z)))),
        ]
    )


_pooled_values = _statistics  # the four statistics of layer_statistics, one definition


def _floor(kind: str, S: int, T: int, r: int, n_projections: int, repeats: int, seed: int):
    """The floor of the pooled statistics (the very floor of layer_statistics) or of the within-sequence
    ones: the same construction and seeds (:func:`gtbook.studies.pretrained.statistics._floor`, cached there)."""
    if kind == "pooled":
        return _sequence_floor(S, T, r, n_projections, repeats, seed)
    return _sequence_floor(S, T, r, n_projections, repeats, seed, _within_values)


@dataclass
class WithinSequenceStatistics:
    r"""Per-layer statistics of the tokens centred on their own sequence's mean, with bands.

    Attributes
    ----------
    model, mode : str
    sequences, tokens : int
    layers : (L+1,) int array
    rank : (L+1,) int array, rank of the pooled centred covariance
    values, floor_low, floor_high : dict name -> (L+1,) array, for the names of :data:`WITHIN`;
        the band is mean :math:`\pm z` std over ``repeats`` Gaussian samples of the same
        :math:`(S, T)` shape and rank, centred the same way
    level, repeats : float, int
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    layers: np.ndarray
    rank: np.ndarray
    values: dict
    floor_low: dict
    floor_high: dict
    level: float
    repeats: int

    def within_band(self, statistic: str) -> np.ndarray:
        """Per layer: whether ``statistic`` lies inside its band."""
        if statistic not in WITHIN:
            raise ValueError(f"statistic must be one of {WITHIN}, got {statistic!r}")
        v = self.values[statistic]
        return (v >= self.floor_low[statistic]) & (v <= self.floor_high[statistic])

    def table(self) -> str:
        """One row per layer: each statistic with its band (``*`` marks out of band)."""
        lines = [
            f"{self.model}, mode={self.mode}, within-sequence (each sequence centred on its "
            f"own mean): S={self.sequences} x T={self.tokens}; {self.level:g} bands over "
            f"{self.repeats} Gaussian samples centred the same way; * = outside",
            f"{'layer':>5} {'rank':>5} " + " ".join(f"{STATISTICS[s][0] + ' [band]':>26}" for s in WITHIN),
        ]
        for i, layer in enumerate(self.layers):
            row = [f"{layer:>5d}", f"{self.rank[i]:>5d}"]
            for s in WITHIN:
                v, lo, hi = self.values[s][i], self.floor_low[s][i], self.floor_high[s][i]
                row.append(f"{v:9.4g}{' ' if lo <= v <= hi else '*'}[{lo:7.3g},{hi:7.3g}]")
            lines.append(" ".join(row))
        return "\n".join(lines)


def _band(kind: str, S: int, T: int, r: int, n_projections: int, repeats: int, seed: int, level: float):
    fl = _floor(kind, S, T, r, n_projections, repeats, seed)
    lo, hi = fl.band(level, method="normal")
    return np.atleast_1d(lo), np.atleast_1d(hi)


def within_sequence_statistics(
    model: LoadedTransformer,
    *,
    sequences: int = 8,
    tokens: int = 512,
    seed: int = 0,
    mode: str = "pure",
    n_projections: int = 128,
    repeats: int = 32,
    level: float = 0.99,
) -> WithinSequenceStatistics:
    r"""As :func:`gtbook.studies.pretrained.statistics.layer_statistics` (same seeded tokens), centred per sequence.

    At each layer the tokens :math:`y_{s,t}` are replaced by :math:`y_{s,t} - \bar y_s` and the
    three statistics of :data:`WITHIN` are computed on the pooled :math:`ST` centred tokens. The
    noise band comes from Gaussian samples of the same :math:`(S, T)` shape and rank, centred the
    same way (the centring costs :math:`S` degrees of freedom, which the band accounts for).
    """
    if not isinstance(model, LoadedTransformer):
        raise ValueError("model must be a LoadedTransformer (gtcore.models.load_transformer)")
    S, T, d = int(sequences), int(tokens), model.d
    x = gaussian_tokens(S * T, np.zeros(d), np.eye(d), seed=int(seed)).reshape(S, T, d)
    layers, ranks, rows = [], [], []
    with threadpool_limits(limits=1, user_api="blas"):
        for layer, h in iter_layers(model, x, mode):
            X = h.reshape(S * T, d).double().cpu().numpy()
            Z = _centre_sequences(X, S, T)
            layers.append(layer)
            ranks.append(numerical_rank(Z.T @ Z / (S * T)))
            rows.append(_within_values(X, S, T, int(n_projections), int(seed)))
        vals = np.array(rows)
        lo, hi = np.empty_like(vals), np.empty_like(vals)
        floor_ranks: list[int] = []
        for i, r in enumerate(ranks):
            # ranks within 1% share one floor, as in layer_statistics (d and d - 1)
            near = [q for q in floor_ranks if abs(q - r) <= 0.01 * max(q, r)]
            q = near[0] if near else max(int(r), 1)
            if not near:
                floor_ranks.append(q)
            lo[i], hi[i] = _band("within", S, T, q, int(n_projections), int(repeats), int(seed), float(level))
    return WithinSequenceStatistics(
        model=model.name,
        mode=mode,
        sequences=S,
        tokens=T,
        layers=np.array(layers),
        rank=np.array(ranks),
        values={s: vals[:, j] for j, s in enumerate(WITHIN)},
        floor_low={s: lo[:, j] for j, s in enumerate(WITHIN)},
        floor_high={s: hi[:, j] for j, s in enumerate(WITHIN)},
        level=float(level),
        repeats=int(repeats),
    )


@dataclass
class SampleStatistics:
    """The four pooled statistics of one :math:`(S, T, d)` sample, each with its band."""

    values: dict
    floor_low: dict
    floor_high: dict

    def inside(self, statistic: str) -> bool:
        return bool(self.floor_low[statistic] <= self.values[statistic] <= self.floor_high[statistic])

    def margin(self, statistic: str) -> float:
        r"""Distance to the band's nearer edge in band widths (negative: outside)."""
        v, lo, hi = self.values[statistic], self.floor_low[statistic], self.floor_high[statistic]
        return float(min(v - lo, hi - v) / (hi - lo))

    def table(self) -> str:
        return "\n".join(
            f"{STATISTICS[s][0]:>10}: {self.values[s]:9.4g} "
            f"{' ' if self.inside(s) else '*'}[{self.floor_low[s]:7.3g}, "
            f"{self.floor_high[s]:7.3g}]"
            for s in self.values
        )


def sample_statistics(
    x: Any, *, within: bool = False, n_projections: int = 128, repeats: int = 32, level: float = 0.99, seed: int = 0
) -> SampleStatistics:
    r"""The four statistics of :data:`gtbook.studies.pretrained.statistics.STATISTICS` on an :math:`(S, T, d)`
    sample, with the same bands as :func:`gtbook.studies.pretrained.statistics.layer_statistics` (mean
    :math:`\pm z` std over ``repeats`` Gaussian samples of the same shape and rank); with
    ``within=True``, the three of :data:`WITHIN` after centring each sequence, with the bands of
    :func:`within_sequence_statistics`."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"x must have shape (S, T, d) with S, T >= 2, got {arr.shape}")
    S, T, d = arr.shape
    X = arr.reshape(S * T, d)
    kind, fn = ("within", _within_values) if within else ("pooled", _pooled_values)
    with threadpool_limits(limits=1, user_api="blas"):
        vals = fn(X, S, T, int(n_projections), int(seed))
        Z = _centre_sequences(X, S, T) if within else X - X.mean(axis=0)
        r = numerical_rank(Z.T @ Z / (S * T))
        lo, hi = _band(kind, S, T, r, int(n_projections), int(repeats), int(seed), float(level))
    names = list(WITHIN) if within else list(STATISTICS)
    return SampleStatistics(
        values=dict(zip(names, map(float, vals), strict=True)),
        floor_low=dict(zip(names, map(float, lo), strict=True)),
        floor_high=dict(zip(names, map(float, hi), strict=True)),
    )


def student_t_tokens(S: int, T: int, d: int, nu: float, *, seed: int = 0) -> np.ndarray:
    r""":math:`(S, T, d)` i.i.d. multivariate Student-t tokens with identity covariance.

    :math:`x = \sqrt{(\nu - 2)/\nu}\; z / \sqrt{g/\nu}`, :math:`z \sim N(0, I_d)`,
    :math:`g \sim \chi^2_\nu`: mean 0, covariance :math:`I_d` (:math:`\nu > 4` for a finite
    kurtosis), every coordinate with excess kurtosis :math:`6/(\nu - 4)`.
    """
    if not nu > 4:
        raise ValueError(f"nu must exceed 4 (finite kurtosis), got {nu!r}")
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((S, T, d))
    g = rng.chisquare(nu, size=(S, T, 1))
    return np.sqrt((nu - 2) / nu) * z / np.sqrt(g / nu)


def shared_component_tokens(S: int, T: int, d: int, c2: float, *, seed: int = 0) -> np.ndarray:
    r""":math:`(S, T, d)` Gaussian tokens with a component shared within each sequence.

    :math:`x_{s,t} = (z_{s,t} + m_s)/\sqrt{1 + c^2}`, :math:`z_{s,t}, m_s/c \sim N(0, I_d)`
    independent: every token is :math:`N(0, I_d)`, but the tokens of one sequence share
    :math:`m_s`, and the between-sequence ratio is about :math:`1 + Tc^2`.
    """
    if not c2 >= 0:
        raise ValueError(f"c2 must be >= 0, got {c2!r}")
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((S, T, d))
    m = np.sqrt(c2) * rng.standard_normal((S, 1, d))
    return (z + m) / np.sqrt(1 + c2)


__all__ = [
    "WITHIN",
    "SampleStatistics",
    "WithinSequenceStatistics",
    "early_layers",
    "first_block_departure",
    "sample_statistics",
    "shared_component_tokens",
    "student_t_tokens",
    "within_sequence_statistics",
]
