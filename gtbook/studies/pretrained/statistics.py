r"""Per-layer statistics of a Transformer fed Gaussian tokens, with noise floors, and the one-call probe.

The models and the two input modes are described in :mod:`gtcore.models`.

Statistics and pooling
----------------------
Attention couples the tokens of one sequence, so the sampling unit is the sequence. The
statistics of a layer are computed on the pooled sample of all :math:`n = S T` tokens of the
:math:`S` independent sequences (:mod:`gtcore.stats.gaussianity`, whitening with the pseudo-inverse:
post-LayerNorm outputs have rank :math:`d - 1`), and the *between-sequence ratio*
(:func:`between_sequence_ratio`) says whether pooling is legitimate: it is about 1 when the
sequences' token clouds are interchangeable, and large when each sequence carries its own
shared component. Every statistic comes with its noise floor: its mean and standard deviation
over ``repeats`` true Gaussian samples of the same :math:`(S, T)` shape and the layer's rank,
and the band :math:`\text{mean} \pm z\,\text{std}` (:math:`z = 2.576` for a 0.99 band).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri
from threadpoolctl import threadpool_limits

from gtcore._linalg import numerical_rank, whiten
from gtcore._validation import check_moments, check_positive
from gtcore.models.forward import _check_mode, _check_tokens, iter_layers
from gtcore.models.loading import LoadedTransformer, _as_loaded, load_transformer
from gtcore.stats.gaussianity import (
    empirical_moments,
    excess_kurtosis_per_coordinate,
    mardia_kurtosis_excess_of_whitened,
    noise_floor,
    sliced_w2_of_whitened,
)
from gtcore.stats.sampling import gaussian_tokens

#: the per-layer statistics, in table order: name -> (column header, description)
STATISTICS = {
    "sliced_w2": ("SW2", "sliced W2 to the moment-matched Gaussian (whitened)"),
    "mardia_excess": ("Mardia k", "Mardia kurtosis relative excess (b2 - r(r+2))/(r(r+2))"),
    "coord_kurtosis": ("mean|k_a|", "mean over coordinates of |excess kurtosis|"),
    "between_ratio": ("between", "between-sequence ratio (1 for interchangeable sequences)"),
}


# ================================================================================= statistics
def between_sequence_ratio(x: Any) -> float:
    r"""How much more the sequences' means spread than independent tokens would make them.

    With the pooled sample whitened, :math:`y_{s,t} = \Lambda_r^{-1/2}U_r^\top(x_{s,t}-\hat\mu)`,
    sequence means :math:`\bar y_s` and grand mean :math:`\bar y`,

    .. math::

        F = T\,\frac{\frac{1}{S-1}\sum_s \|\bar y_s - \bar y\|^2}
                    {\frac{1}{S(T-1)}\sum_{s,t} \|y_{s,t} - \bar y_s\|^2},

    the one-way ANOVA ratio of between- to within-sequence variance (traces). For i.i.d.
    tokens :math:`F \approx 1`; a component shared by the tokens of a sequence makes
    :math:`F \gg 1`. Affine invariant.

    Parameters
    ----------
    x : (S, T, d) array, S >= 2 sequences of T >= 2 tokens

    Returns
    -------
    float
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"x must have shape (S, T, d) with S >= 2 and T >= 2, got {arr.shape}")
    S, T, d = arr.shape
    return _between_ratio_of_whitened(whiten(arr.reshape(S * T, d)).reshape(S, T, -1))


def _between_ratio_of_whitened(y: np.ndarray) -> float:
    """:func:`between_sequence_ratio` of the pooled sample already whitened, reshaped (S, T, r)."""
    S, T = y.shape[:2]
    means = y.mean(axis=1)
    between = np.sum((means - means.mean(axis=0)) ** 2) / (S - 1)
    within = np.sum((y - means[:, None, :]) ** 2) / (S * (T - 1))
    return float(T * between / within)


def _statistics(x: np.ndarray, S: int, T: int, n_projections: int, seed: int) -> np.ndarray:
    """The four statistics of :data:`STATISTICS` on a pooled (S*T, d) sample (whitened once: the
    values of :func:`sliced_w2`, :func:`mardia_kurtosis_excess` and :func:`between_sequence_ratio`)."""
    y = whiten(x)
    return np.array(
        [
            sliced_w2_of_whitened(y, n_projections=n_projections, seed=seed),
            mardia_kurtosis_excess_of_whitened(y),
            float(np.nanmean(np.abs(excess_kurtosis_per_coordinate(x)))),
            _between_ratio_of_whitened(y.reshape(S, T, -1)),
        ]
    )


@functools.lru_cache(maxsize=32)
def _floor(S: int, T: int, r: int, n_projections: int, repeats: int, seed: int, values=_statistics):
    """The noise floor of a statistics vector ``values(x, S, T, n_projections, seed)`` of an
    (S*T, r) sample (default: the four of :data:`STATISTICS`), over ``repeats`` Gaussian samples."""

    def stat(z):
        return values(z, S, T, n_projections, seed)

    return noise_floor(stat, S * T, r, repeats=repeats, seed=seed + 7919)


@dataclass
class LayerStatistics:
    r"""Per-layer Gaussianity of a Transformer's token cloud, with noise floors.

    Attributes
    ----------
    model : str
        The model's label (says "random init" for random weights).
    mode : str
        ``"embedding"`` or ``"pure"``.
    sequences, tokens : int
        :math:`S` and :math:`T`; each statistic is computed on the pooled :math:`n = ST` tokens.
    layers : (L+1,) int array
        :math:`0..L` (0: what block 1 sees).
    mu : (L+1, d) array
        Pooled mean per layer.
    Sigma : (L+1, d, d) array
        Pooled :math:`1/n` covariance per layer.
    rank : (L+1,) int array
        Numerical rank of ``Sigma`` (LayerNorm outputs: :math:`d-1`).
    values : dict name -> (L+1,) array
        The statistics of :data:`STATISTICS`.
    floor_mean, floor_low, floor_high : dict name -> (L+1,) array
        The noise band of each statistic: mean :math:`m` and standard deviation :math:`s`
        over ``repeats`` true Gaussian samples of the same :math:`(S, T)` shape and the layer's
        rank (ranks within 1% of each other, such as :math:`d` and :math:`d-1`, share the floor
        of the first one met), and the band :math:`m \pm z s`,
        :math:`z = \Phi^{-1}((1 + \text{level})/2)` (2.576 for 0.99): a normal-approximation
        band whose coverage does not depend on ``repeats``, unlike empirical quantiles of a few
        dozen values (which are close to their range).
    level, repeats : float, int
    pooling : str
        How the tokens were pooled (one sentence).
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    layers: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    rank: np.ndarray
    values: dict
    floor_mean: dict
    floor_low: dict
    floor_high: dict
    level: float
    repeats: int
    pooling: str = field(default="")

    def within_band(self, statistic: str) -> np.ndarray:
        """Per layer: whether ``statistic`` lies inside its noise band."""
        self._check_stat(statistic)
        v = self.values[statistic]
        return (v >= self.floor_low[statistic]) & (v <= self.floor_high[statistic])

    def first_departure(self, statistic: str) -> int | None:
        """The first layer at which ``statistic`` leaves its band (``None``: it never does)."""
        out = np.flatnonzero(~self.within_band(statistic))
        return int(self.layers[out[0]]) if out.size else None

    def departures(self) -> dict:
        """``{statistic: first_departure(statistic)}`` for every statistic."""
        return {s: self.first_departure(s) for s in STATISTICS}

    def _check_stat(self, statistic: str) -> None:
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}")

    def table(self) -> str:
        """One row per layer: moments, each statistic with its band (``*`` marks out of band)."""
        cols = [f"{'layer':>5}", f"{'|mu|':>8}", f"{'trS/d':>8}", f"{'rank':>5}"]
        cols += [f"{STATISTICS[s][0] + ' [band]':>26}" for s in STATISTICS]
        lines = [
            f"{self.model}, mode={self.mode}: S={self.sequences} sequences x T={self.tokens} "
            f"tokens pooled (n={self.sequences * self.tokens}); {self.level:g} bands: mean "
            f"+- {ndtri(0.5 + self.level / 2):.3g} std over {self.repeats} Gaussian samples; "
            f"* = outside",
            " ".join(cols),
        ]
        d = self.mu.shape[1]
        for i, layer in enumerate(self.layers):
            row = [
                f"{layer:>5d}",
                f"{np.linalg.norm(self.mu[i]):8.3g}",
                f"{np.trace(self.Sigma[i]) / d:8.3g}",
                f"{self.rank[i]:>5d}",
            ]
            for s in STATISTICS:
                v, lo, hi = self.values[s][i], self.floor_low[s][i], self.floor_high[s][i]
                mark = " " if lo <= v <= hi else "*"
                row.append(f"{v:9.4g}{mark}[{lo:7.3g},{hi:7.3g}]")
            lines.append(" ".join(row))
        return "\n".join(lines)


def layer_statistics(
    model: LoadedTransformer | str | os.PathLike,
    mu: Any = None,
    Sigma: Any = None,
    *,
    sequences: int = 8,
    tokens: int = 512,
    seed: int = 0,
    mode: str = "pure",
    n_projections: int = 128,
    repeats: int = 32,
    level: float = 0.99,
    progress: bool = False,
) -> LayerStatistics:
    r"""Feed Gaussian tokens to a Transformer and measure their Gaussianity after every layer.

    Draws :math:`x_{s,t} \sim N(\mu, \Sigma)` i.i.d. for :math:`S` sequences of :math:`T`
    tokens (:func:`gtcore.stats.sampling.gaussian_tokens`, one seeded draw of :math:`ST` tokens),
    passes them through the model in ``mode`` (:func:`~gtcore.models.iter_layers`) and, at each layer
    :math:`\ell = 0..L`, on the pooled :math:`n = ST` tokens: mean :math:`\hat\mu_\ell`,
    covariance :math:`\hat\Sigma_\ell` and its rank, sliced :math:`W_2` to the moment-matched
    Gaussian in whitened coordinates, Mardia's kurtosis relative excess
    :math:`(b_{2,r} - r(r+2))/(r(r+2))`, the mean of :math:`|\kappa_a|` over coordinates
    (excess kurtosis of coordinate :math:`a`), and :func:`between_sequence_ratio`; each with
    the noise floor of :func:`gtcore.stats.gaussianity.noise_floor` for the same :math:`(S, T)` shape
    in the layer's rank.

    Parameters
    ----------
    model : LoadedTransformer, model name or path
    mu : (d,) array, optional
        Mean of the tokens (default 0).
    Sigma : (d, d) PSD array, optional
        Covariance of the tokens (default :math:`I_d`).
    sequences : int
        :math:`S \ge 2`.
    tokens : int
        :math:`T \ge 2` tokens per sequence.
    seed : int
        Seed of the tokens, the projections and the noise floors.
    mode : {"pure", "embedding"}
    n_projections : int
        Directions of the sliced :math:`W_2`.
    repeats : int
        Gaussian samples per noise floor (cached across calls with the same shape).
    level : float
        Central probability of the band.
    progress : bool
        tqdm bars over layers and noise-floor repeats.

    Returns
    -------
    LayerStatistics
    """
    lt = _as_loaded(model)
    _check_mode(mode)
    for name, val in (("sequences", sequences), ("tokens", tokens)):
        if isinstance(val, bool) or int(val) != val or val < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {val!r}")
    for name, val in (("n_projections", n_projections), ("repeats", repeats)):
        if isinstance(val, bool) or int(val) != val or val < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {val!r}")
    check_positive(level, "level")
    if not level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    S, T, d = int(sequences), int(tokens), lt.d
    mu = np.zeros(d) if mu is None else mu
    Sigma = np.eye(d) if Sigma is None else Sigma
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma", d=d)
    _check_tokens(lt, T, mode)
    # torch's OpenMP threads and OpenBLAS's threads spin against each other on few cores: a
    # 384 x 384 eigh ran 5-10x slower with 2 BLAS threads than with 1 in a torch process.
    with threadpool_limits(limits=1, user_api="blas"):
        return _layer_statistics(
            lt, mu, Sigma, S, T, int(seed), mode, int(n_projections), int(repeats), float(level), progress
        )


def _layer_statistics(lt, mu, Sigma, S, T, seed, mode, n_projections, repeats, level, progress):
    d = lt.d
    x = gaussian_tokens(S * T, mu, Sigma, seed=seed).reshape(S, T, d)

    layers, mus, Sigmas, ranks, rows = [], [], [], [], []
    for layer, h in iter_layers(lt, x, mode, progress=progress):
        X = h.reshape(S * T, d).double().cpu().numpy()
        m, C = empirical_moments(X)
        layers.append(layer)
        mus.append(m)
        Sigmas.append(C)
        ranks.append(numerical_rank(C))
        rows.append(_statistics(X, S, T, int(n_projections), int(seed)))
    vals = np.array(rows)
    lo, hi, mean = (np.empty_like(vals) for _ in range(3))
    floor_ranks: list[int] = []
    for i, r in enumerate(ranks):
        # ranks within 1% share one floor (a post-LayerNorm rank d-1 and an input rank d)
        near = [q for q in floor_ranks if abs(q - r) <= 0.01 * max(q, r)]
        q = near[0] if near else max(r, 1)
        if not near:
            floor_ranks.append(q)
        fl = _floor(S, T, q, int(n_projections), int(repeats), int(seed))
        mean[i] = fl.mean
        lo[i], hi[i] = fl.band(level, method="normal")
    names = list(STATISTICS)
    pooling = (
        f"statistics on the pooled n = S*T = {S}*{T} = {S * T} tokens of {S} independent "
        f"sequences; the between-sequence ratio checks that the sequences are "
        f"interchangeable; noise floors from {repeats} Gaussian samples of the same "
        f"(S, T) shape in the layer's rank"
    )
    return LayerStatistics(
        model=lt.name,
        mode=mode,
        sequences=S,
        tokens=T,
        layers=np.array(layers),
        mu=np.array(mus),
        Sigma=np.array(Sigmas),
        rank=np.array(ranks),
        values={s: vals[:, j] for j, s in enumerate(names)},
        floor_mean={s: mean[:, j] for j, s in enumerate(names)},
        floor_low={s: lo[:, j] for j, s in enumerate(names)},
        floor_high={s: hi[:, j] for j, s in enumerate(names)},
        level=float(level),
        repeats=int(repeats),
        pooling=pooling,
    )


def departure_table(results: Sequence[LayerStatistics]) -> str:
    """For each result: the first layer at which each statistic leaves its band ("-": never)."""
    head = f"{'model':<34} {'mode':<9} {'L':>3} " + " ".join(f"{STATISTICS[s][0]:>10}" for s in STATISTICS)
    rows = [head]
    for r in results:
        dep = r.departures()
        cells = " ".join(f"{'-' if dep[s] is None else dep[s]:>10}" for s in STATISTICS)
        rows.append(f"{r.model:<34} {r.mode:<9} {int(r.layers[-1]):>3} {cells}")
    return "\n".join(rows)


# ====================================================================================== probe
@dataclass
class ProbeResult:
    """What :func:`probe` found: the model's per-layer statistics."""

    statistics: LayerStatistics
    source: str

    def table(self) -> str:
        """The per-layer table (one row per layer) and the first departure of each statistic."""
        dep = self.statistics.departures()
        tail = ", ".join(f"{STATISTICS[s][0]}: {'never' if v is None else f'layer {v}'}" for s, v in dep.items())
        return f"{self.statistics.table()}\nfirst layer out of band -> {tail}"

    def figure(self):
        """The four statistics against depth with their noise bands."""
        from gtbook.studies.pretrained.figures import layer_statistics_figure

        return layer_statistics_figure([self.statistics])


def _check_figure_path(path: Path) -> None:
    """Refuse a figure path whose folder is missing or whose format matplotlib cannot write."""
    from matplotlib.figure import Figure

    if not path.parent.is_dir():
        raise ValueError(f"figure_path: the folder {path.parent} does not exist (create it first)")
    formats = Figure().canvas.get_supported_filetypes()
    ext = path.suffix.lstrip(".").lower()
    if ext not in formats:
        raise ValueError(
            f"figure_path: {path.name!r} has no image format matplotlib can write "
            f"(use one of: {', '.join(sorted(formats))})"
        )


def probe(
    name_or_path: str | os.PathLike = "minilm",
    *,
    mode: str = "pure",
    tokens: int = 512,
    sequences: int = 8,
    seed: int = 0,
    figure_path: str | os.PathLike | None = None,
) -> ProbeResult:
    r"""Feed :math:`N(0, I_d)` tokens to a local model and report per-layer Gaussianity.

    The command-line ``gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...]
    [--figure PATH]`` calls this function and prints :meth:`ProbeResult.table`.

    Parameters
    ----------
    name_or_path : str or path
        As :func:`~gtcore.models.load_transformer` (``"minilm"``, ``"modernbert"``, ``"deit-tiny"`` or a local
        model directory).
    mode : {"pure", "embedding"}
        See the module docstring.
    tokens, sequences : int
        :math:`T` tokens in each of :math:`S` sequences.
    seed : int
    figure_path : path, optional
        Where to save the figure (any matplotlib format).

    Returns
    -------
    ProbeResult

    Raises
    ------
    ModelNotAvailable
        When the weights are not on this machine (one-line message).
    ValueError
        ``figure_path`` in a folder that does not exist or with a format matplotlib cannot write
        (checked before any computation), or a broken model file
        (:class:`~gtcore.models.loading.ModelFileError`).
    """
    if figure_path is not None:
        _check_figure_path(Path(figure_path))
    lt = load_transformer(name_or_path)
    stats = layer_statistics(lt, sequences=sequences, tokens=tokens, seed=seed, mode=mode)
    result = ProbeResult(stats, lt.source)
    if figure_path is not None:
        fig = result.figure()
        fig.savefig(figure_path)
        import matplotlib.pyplot as plt

        plt.close(fig)
    return result


__all__ = [
    "STATISTICS",
    "LayerStatistics",
    "ProbeResult",
    "between_sequence_ratio",
    "departure_table",
    "layer_statistics",
    "probe",
]
