r"""The effect-size profile of chapter 5: how far from Gaussian each block's token cloud is, as a fraction of
the Student-:math:`t` reference's departure, with intervals; its reading in plain words; and how far each
block moves its tokens.

The registered criterion (:mod:`~gtbook.studies.pretrained.criterion`) turns a model's effect sizes into one
verdict per sample size. This module reads the same numbers as a profile over depth.

* The **fraction of the reference** of statistic :math:`s` at layer :math:`\ell`, in one input mode,

  .. math::

      f_s(\ell) = \frac{\Delta_s(\ell)}{\Delta_s(\mathrm{ref})}, \qquad
      f_s(\ell) \in \Big[\frac{\Delta_s^{\rm lo}(\ell)}{\Delta_s^{\rm hi}(\mathrm{ref})},\;
      \frac{\Delta_s^{\rm hi}(\ell)}{\Delta_s^{\rm lo}(\mathrm{ref})}\Big],

  the interval holding every ratio of a point of :math:`\Delta_s(\ell)`'s 95% interval to a point of the
  reference's. Its upper end is the criterion's ratio: the layer is close for :math:`s` iff it is below 1.
* The **largest fraction** :math:`F(\ell) = \max_{s, m} f_{s,m}(\ell)` over the statistics and the input
  modes, with the interval :math:`[\max_{s,m} f^{\rm lo}, \max_{s,m} f^{\rm hi}]` (the maximum of quantities
  each inside its interval lies inside these bounds). Block :math:`\ell` is close by the criterion, in both
  modes, iff :math:`F^{\rm hi}(\ell) < 1`.
* **Readings** (:class:`Reading`) of the statement's two parts at one sample size, with
  :math:`h = \lceil L/2\rceil` (rules fixed before the run that reports them):

  - *close through the early and intermediate blocks*: consistent with the statement iff
    :math:`\max_{1\le\ell\le h} F^{\rm hi}(\ell) < 1` (the criterion's early test); against it iff some block
    :math:`\ell \le h` has :math:`F^{\rm lo}(\ell) \ge 1` (resolved at least as far from Gaussian as the
    reference); inconclusive otherwise (an interval that straddles 1);
  - *the departure grows with depth*: consistent iff :math:`F^{\rm lo}(L) > F^{\rm hi}(h)` (the last block
    resolved further from Gaussian than block :math:`h`); against iff :math:`F^{\rm hi}(L) < F^{\rm lo}(h)`
    (resolved nearer); inconclusive otherwise.
* The **update** of block :math:`\ell`: :math:`\|x^{(\ell)}_i - x^{(\ell-1)}_i\| / \|x^{(\ell-1)}_i\|`, averaged
  over the tokens (:func:`update_norms`). A network whose blocks all move their tokens by a few per cent acts
  almost linearly on them, keeps Gaussian tokens close to Gaussian whatever the statement says, and so cannot
  test it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gtbook.studies.pretrained.criterion import REFERENCE_NU
from gtbook.studies.pretrained.effects import STATISTICS

if TYPE_CHECKING:
    from gtbook.studies.pretrained.criterion import ModelStudy

__all__ = [
    "DepthProfile",
    "EffectProfile",
    "Reading",
    "UpdateNorms",
    "depth_profile",
    "effect_profile",
    "update_norms",
    "update_table",
]


class Reading(enum.Enum):
    """What one part of the statement's test says at one sample size."""

    CONSISTENT = "consistent with the statement"
    INCONCLUSIVE = "inconclusive"
    AGAINST = "against the statement"

    def __str__(self) -> str:
        return self.value


@dataclass
class DepthProfile:
    r"""One model at one sample size: the fraction of the reference per mode, statistic and layer.

    Attributes
    ----------
    model : str
    sequences : int
        :math:`S`.
    modes : tuple of str
    layers : (L+1,) int array
        :math:`0..L`.
    point, low, high : (modes, statistics, L+1) arrays
        :math:`f_{s,m}(\ell)` and its interval (module docstring), statistics in the order of
        :data:`~gtbook.studies.pretrained.effects.STATISTICS`.
    nu : float
        The reference's degrees of freedom.
    """

    model: str
    sequences: int
    modes: tuple
    layers: np.ndarray
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray
    nu: float = REFERENCE_NU

    @property
    def n_blocks(self) -> int:
        """:math:`L`."""
        return int(self.layers[-1])

    @property
    def half(self) -> int:
        r""":math:`h = \lceil L/2 \rceil`, the last early-or-intermediate block."""
        return math.ceil(self.n_blocks / 2)

    def largest(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r""":math:`F(\ell)` and its interval per layer: the maxima over modes and statistics of the point
        estimates, the lower ends and the upper ends."""
        return (self.point.max(axis=(0, 1)), self.low.max(axis=(0, 1)), self.high.max(axis=(0, 1)))

    @property
    def early_high(self) -> float:
        r""":math:`\max_{1\le\ell\le h} F^{\rm hi}(\ell)` (the criterion's early ratio: close iff below 1)."""
        return float(self.largest()[2][1 : self.half + 1].max())

    @property
    def early_low(self) -> float:
        r""":math:`\max_{1\le\ell\le h} F^{\rm lo}(\ell)` (against the statement iff at least 1)."""
        return float(self.largest()[1][1 : self.half + 1].max())

    @property
    def growth(self) -> float:
        r""":math:`F^{\rm lo}(L) / F^{\rm hi}(h)`: above 1 iff the last block is resolved further from Gaussian
        than block :math:`h` (``inf`` when :math:`F^{\rm hi}(h) = 0`)."""
        _, lo, hi = self.largest()
        return float(lo[-1] / hi[self.half]) if hi[self.half] > 0 else math.inf

    def close_reading(self) -> Reading:
        """The reading of "close through the early and intermediate blocks" (module docstring)."""
        if self.early_high < 1:
            return Reading.CONSISTENT
        if self.early_low >= 1:
            return Reading.AGAINST
        return Reading.INCONCLUSIVE

    def growth_reading(self) -> Reading:
        """The reading of "the departure grows with depth" (module docstring)."""
        _, lo, hi = self.largest()
        if lo[-1] > hi[self.half]:
            return Reading.CONSISTENT
        if hi[-1] < lo[self.half]:
            return Reading.AGAINST
        return Reading.INCONCLUSIVE

    def point_range(self, layer: int) -> tuple[float, float]:
        r"""The smallest and largest point estimate :math:`f_{s,m}(\ell)` over modes and statistics."""
        col = self.point[:, :, int(layer)]
        return float(col.min()), float(col.max())

    def __repr__(self) -> str:
        return (
            f"DepthProfile({self.model!r}, S={self.sequences}, L={self.n_blocks}: close through 1-{self.half} "
            f"{self.close_reading()}; growth {self.growth_reading()})"
        )


def depth_profile(study: ModelStudy, sequences: int, nu: float = REFERENCE_NU) -> DepthProfile:
    r"""The fractions of the reference of one model at one sample size (module docstring).

    Parameters
    ----------
    study : ModelStudy
        :func:`~gtbook.studies.pretrained.criterion.study_model` of the model.
    sequences : int
        :math:`S`, one of ``study.sizes``.
    nu : float
        The reference's degrees of freedom (one the study ran).

    Returns
    -------
    DepthProfile
    """
    S = int(sequences)
    if S not in study.effects:
        raise ValueError(f"sequences must be one of the study's sizes {list(study.effects)}, got {sequences!r}")
    if (float(nu), S) not in study.references:
        raise ValueError(f"nu must be one of the study's references, got {nu!r}")
    refs = study.references[float(nu), S]
    modes = tuple(study.effects[S])
    shape = (len(modes), len(STATISTICS), study.n_blocks + 1)
    point, low, high = np.empty(shape), np.empty(shape), np.empty(shape)
    for i, m in enumerate(modes):
        res = study.effects[S][m]
        for j, s in enumerate(STATISTICS):
            ref = [refs[int(q)] for q in res.null_rank]
            r_val = np.array([e.value[s] for e in ref])
            r_lo = np.array([e.low[s] for e in ref])
            r_hi = np.array([e.high[s] for e in ref])
            v = np.array([e.value[s] for e in res.effects])
            lo = np.array([e.low[s] for e in res.effects])
            hi = np.array([e.high[s] for e in res.effects])
            point[i, j] = _divide(v, r_val)
            low[i, j] = _divide(lo, r_hi)
            high[i, j] = _divide(hi, r_lo)
    return DepthProfile(
        study.model, S, modes, np.asarray(study.effects[S][modes[0]].layers), point, low, high, float(nu)
    )


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, ``inf`` where ``den`` is 0 (0 where both are)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)
    return np.where((den <= 0) & (num <= 0), 0.0, out)


def _sizes_text(groups: Mapping[Reading, list[int]]) -> str:
    parts = []
    for reading, sizes in groups.items():
        if sizes:
            parts.append(f"{reading} at " + " and ".join(f"S = {s}" for s in sizes))
    return "; ".join(parts)


@dataclass
class EffectProfile:
    r"""The effect-size profiles of the chapter's models: model label -> sample size -> :class:`DepthProfile`.

    Attributes
    ----------
    profiles : dict str -> dict int -> DepthProfile
    """

    profiles: dict

    def reading(self, label: str) -> str:
        """The two parts of the statement on one model, in plain words, per sample size."""
        by_size = self.profiles[label]
        half = next(iter(by_size.values())).half
        close: dict[Reading, list[int]] = {r: [] for r in Reading}
        grows: dict[Reading, list[int]] = {r: [] for r in Reading}
        for S, p in by_size.items():
            close[p.close_reading()].append(S)
            grows[p.growth_reading()].append(S)
        return (
            f"close through blocks 1-{half}: {_sizes_text(close)}; the departure grows with depth: {_sizes_text(grows)}"
        )

    def table(self) -> str:
        r"""One block per model and row per layer: :math:`F(\ell)` with its interval at each size, and the
        smallest-to-largest point estimate over statistics and modes."""
        lines = [
            "The largest fraction of the Student-t reference's departure over statistics and modes, "
            "F(l) [interval] (close iff the upper end < 1), and the range of the point estimates"
        ]
        for label, by_size in self.profiles.items():
            sizes = list(by_size)
            first = by_size[sizes[0]]
            lines.append("")
            lines.append(f"{label}: {self.reading(label)}")
            lines.append(f"{'block':>5} " + " ".join(f"{f'S = {S}: F [interval]; range':>38}" for S in sizes))
            for layer in first.layers:
                cells = []
                for S in sizes:
                    p = by_size[S]
                    F, lo, hi = (a[int(layer)] for a in p.largest())
                    a, b = p.point_range(int(layer))
                    cells.append(f"{F:6.2f} [{lo:5.2f}, {hi:6.2f}]; {a:5.2f}-{b:5.2f}")
                mark = " <- h" if int(layer) == first.half else ""
                lines.append(f"{int(layer):>5} " + " ".join(f"{c:>38}" for c in cells) + mark)
        return "\n".join(lines)

    def summary(self) -> str:
        r"""Per model: its reading in plain words, and :math:`F` with its interval at blocks 1, :math:`h` and
        :math:`L` at each size (the rows of :meth:`table` that carry the statement)."""
        lines = [
            "F(l), the largest fraction of the Student-t reference's departure [interval]; close iff the upper end < 1"
        ]
        for label, by_size in self.profiles.items():
            lines.append(f"{label}: {self.reading(label)}")
            for S, p in by_size.items():
                F, lo, hi = p.largest()
                cells = [f"block {b}: {F[b]:.2f} [{lo[b]:.2f}, {hi[b]:.2f}]" for b in (1, p.half, p.n_blocks)]
                lines.append(f"  S = {S:>2}: " + "; ".join(cells))
        return "\n".join(lines)

    def figure(
        self, initial: Mapping[str, Mapping[int, DepthProfile]] | None = None, notes: Mapping[str, str] | None = None
    ):
        r""":math:`F(\ell)` with its interval against the block, one panel per model, one series per sample size
        (and, dashed, a random initialisation's, when given); the early and intermediate blocks shaded, the
        reference at 1.

        Parameters
        ----------
        initial : dict label -> dict S -> DepthProfile, optional
            The random initialisations of some of the models.
        notes : dict label -> str, optional
            A second title line of a model's panel (e.g. how far its blocks move the tokens).

        Returns
        -------
        matplotlib Figure
        """
        from gtbook.studies.pretrained.figures import PALETTE
        from gtbook.studies.style import COLORS, figure

        n = len(self.profiles)
        if not n:
            raise ValueError("profiles must hold at least one model")
        fig, axes = figure(n, 1, width=3.9, height=3.3)
        axes = np.atleast_1d(axes)
        floor, cap = 1e-3, 1e4
        finite = [
            float(x)
            for by_size in self.profiles.values()
            for p in by_size.values()
            for x in p.largest()[2][1:]
            if np.isfinite(x)
        ]
        top = min(max(2.0, 2.0 * max(finite, default=1.0)), cap)
        for ax, (label, by_size) in zip(axes, self.profiles.items(), strict=True):
            first = next(iter(by_size.values()))
            ax.axvspan(
                0.5, first.half + 0.5, color=COLORS["floor"], alpha=0.12, lw=0, label="early and intermediate blocks"
            )
            ax.axhline(1.0, color=COLORS["theory"], lw=1.2, label=r"the Student-$t$ reference ($\nu$ = 20)")
            for k, (S, p) in enumerate(by_size.items()):
                F, lo, hi = p.largest()
                x = p.layers[1:] + (k - (len(by_size) - 1) / 2) * 0.15
                F, lo, hi = (np.clip(np.nan_to_num(a[1:], posinf=cap), floor, cap) for a in (F, lo, hi))
                err = [np.maximum(F - lo, 0), np.maximum(hi - F, 0)]  # 0 where a clipped end meets F
                ax.errorbar(
                    x,
                    F,
                    yerr=err,
                    color=PALETTE[k % len(PALETTE)],
                    marker="o",
                    ms=3.5,
                    lw=1.3,
                    capsize=2,
                    label=f"S = {S} sequences",
                )
            for S, p in (initial or {}).get(label, {}).items():
                F = np.clip(np.nan_to_num(p.largest()[0][1:], posinf=cap), floor, cap)
                ax.plot(
                    p.layers[1:], F, color=COLORS["floor"], ls="--", marker=".", label=f"random initialisation, S = {S}"
                )
            ax.set_yscale("log")
            ax.set_ylim(floor * 0.8, top)
            ax.set_xlabel(r"block $\ell$")
            ax.set_title(label + (f"\n{notes[label]}" if notes and label in notes else ""), fontsize=9)
        axes[0].set_ylabel(r"$F(\ell)$: departure / reference's")
        axes[0].legend(fontsize=7, loc="upper left")
        return fig

    def __repr__(self) -> str:
        return "EffectProfile(" + "; ".join(f"{k}: {self.reading(k)}" for k in self.profiles) + ")"


def effect_profile(
    studies: Mapping[str, ModelStudy], nu: float = REFERENCE_NU, sizes: Sequence[int] | None = None
) -> EffectProfile:
    """The :class:`EffectProfile` of each study at each of its sizes (or at ``sizes``).

    Parameters
    ----------
    studies : dict label -> ModelStudy
    nu : float
        The reference's degrees of freedom.
    sizes : sequence of int, optional
        The sample sizes (default: every size of each study).

    Returns
    -------
    EffectProfile
    """
    return EffectProfile(
        {label: {int(S): depth_profile(st, S, nu) for S in (sizes or st.sizes)} for label, st in studies.items()}
    )


# ================================================================================ how far tokens move
@dataclass
class UpdateNorms:
    r"""How far each block moves its tokens: :math:`\|x^{(\ell)}_i - x^{(\ell-1)}_i\| / \|x^{(\ell-1)}_i\|`.

    Attributes
    ----------
    model, mode : str
    sequences, tokens : int
    layers : (L+1,) int array
    mean : (L+1,) array
        Averaged over every token of every sequence (NaN at layer 0).
    low, high : (L+1,) arrays
        The smallest and largest per-sequence average (NaN at layer 0).
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    layers: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def largest(self) -> float:
        """The largest per-block mean update."""
        return float(np.nanmax(self.mean))

    @property
    def smallest(self) -> float:
        """The smallest per-block mean update."""
        return float(np.nanmin(self.mean))

    def __repr__(self) -> str:
        return (
            f"UpdateNorms({self.model!r}, {self.mode}: {100 * self.smallest:.3g}-{100 * self.largest:.3g} % per block)"
        )


def update_norms(model: Any, *, mode: str = "pure", sequences: int = 4, tokens: int = 512, seed: int) -> UpdateNorms:
    r"""Feed :math:`S` sequences of :math:`T` Gaussian tokens :math:`N(0, I_d)` (stream ``tokens`` of ``seed``,
    as :func:`~gtbook.studies.pretrained.criterion.layer_effects` draws them) and measure each block's update

    .. math::

        u(\ell) = \frac{1}{ST}\sum_{s,t} \frac{\|x^{(\ell)}_{s,t} - x^{(\ell-1)}_{s,t}\|}{\|x^{(\ell-1)}_{s,t}\|},
        \qquad \ell = 1..L.

    Parameters
    ----------
    model : gtcore.models.LoadedTransformer
    mode : {"pure", "embedding"}
    sequences, tokens : int
        :math:`S \ge 1`, :math:`T \ge 1`.
    seed : int

    Returns
    -------
    UpdateNorms
    """
    from gtbook.studies.pretrained.effects import _TOKENS, stream
    from gtcore.models import LoadedTransformer, iter_layers
    from gtcore.stats.sampling import gaussian_tokens

    if not isinstance(model, LoadedTransformer):
        raise ValueError("model must be a LoadedTransformer (gtcore.models.load_transformer)")
    for name, v in (("sequences", sequences), ("tokens", tokens)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    S, T, d = int(sequences), int(tokens), model.d
    x = gaussian_tokens(S * T, np.zeros(d), np.eye(d), seed=np.random.default_rng(stream(seed, _TOKENS)))
    layers, per_seq = [], []
    prev = None
    for layer, h in iter_layers(model, x.reshape(S, T, d), mode):
        arr = h.double().cpu().numpy()
        if prev is None:
            per_seq.append(np.full(S, math.nan))
        else:
            rel = np.linalg.norm(arr - prev, axis=-1) / np.linalg.norm(prev, axis=-1)  # (S, T)
            per_seq.append(rel.mean(axis=1))
        prev = arr
        layers.append(int(layer))
    ps = np.array(per_seq)  # (L+1, S)
    return UpdateNorms(model.name, mode, S, T, np.array(layers), ps.mean(axis=1), ps.min(axis=1), ps.max(axis=1))


def update_table(norms: Mapping[str, UpdateNorms]) -> str:
    """One row per block, one column per model: the mean update in per cent (with its per-sequence range)."""
    if not norms:
        raise ValueError("norms must hold at least one UpdateNorms")
    depth = max(len(n.layers) for n in norms.values())
    lines = [
        "Mean relative update of each block, |x_out - x_in| / |x_in|, in per cent [range over sequences]",
        f"{'block':>5} " + " ".join(f"{label[:26]:>26}" for label in norms),
    ]
    for layer in range(1, depth):
        cells = []
        for n in norms.values():
            cells.append(
                f"{100 * n.mean[layer]:7.3g} [{100 * n.low[layer]:5.3g}, {100 * n.high[layer]:5.3g}]"
                if layer < len(n.layers)
                else ""
            )
        lines.append(f"{layer:>5} " + " ".join(f"{c:>26}" for c in cells))
    return "\n".join(lines)
