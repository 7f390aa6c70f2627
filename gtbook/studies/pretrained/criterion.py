r"""The criterion of chapter 5: how close to Gaussian, measured as an effect size against a reference.

The paper's empirical statement (arXiv:2606.07600, abstract): "practical Transformers with Gaussian
inputs remain close to moment-matched Gaussian distributions through early and intermediate layers".
*Close* is a matter of degree, so the criterion (registered in issue 23 before any run) measures how far
from Gaussian each layer's token cloud is, and compares that with a fixed, moderate departure.

For each layer :math:`\ell`, input mode and statistic :math:`s` of
:data:`~gtbook.studies.pretrained.effects.STATISTICS`, computed **within sequences** (each of the
:math:`S` sequences of :math:`T` tokens centred on its own mean, the sampling unit being the sequence;
:func:`~gtbook.studies.pretrained.effects.cloud_statistics`):

* the **debiased effect size** :math:`\Delta_s(\ell)`: the statistic minus its mean under true Gaussian
  samples of the same shape :math:`(S, T)` and rank :math:`r`
  (:func:`~gtbook.studies.pretrained.effects.null_moments`); for the sliced :math:`W_2`,
  :math:`\Delta = \sqrt{\max(0,\, SW_2^2 - \mathbb{E}[SW_{2,\mathrm{null}}^2])}`; with a 95% confidence
  interval from a bootstrap over sequences (:func:`~gtbook.studies.pretrained.effects.effect_sizes`);
* the **reference** :math:`\Delta_s(\mathrm{ref})`: the same effect size, with its own interval, for
  i.i.d. moment-matched multivariate Student-:math:`t` tokens with :math:`\nu = 20` of the same shape
  and rank (:func:`~gtbook.studies.pretrained.effects.reference_effect_sizes`);
* **close at layer** :math:`\ell` iff the upper end of :math:`\Delta_s(\ell)`'s interval is below the
  lower end of :math:`\Delta_s(\mathrm{ref})`'s, for every :math:`s`;
* the statement **holds for a model** iff it is close at every block output
  :math:`\ell = 1, \dots, \lceil L/2 \rceil` in both modes and the last block is not close
  (``model_verdict``, a :class:`Verdict`); the first block not close is reported per statistic
  and mode.

Readings this module had to make, fixed before any model was run
----------------------------------------------------------------
* **Effect sizes, intervals and ranks**: see :mod:`gtbook.studies.pretrained.effects`.
* **"The last block is not close"** is required in each mode (the same quantifier as for the early
  blocks).
* **"The effect sizes agree within their intervals across the two sizes"**: for every model, mode, block
  :math:`\ell = 1..L` and statistic, the two 95% intervals (:math:`S = 8` and :math:`S = 32`, independent
  seeds) overlap (:func:`interval_disagreements`).

The old criterion of the chapter (inside the 99% noise band of the statistic) is kept for comparison
(:meth:`LayerEffects.band_first_departure`): it tests exact Gaussianity, so its verdict moves with the
sample size.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.pretrained.effects import (
    _TOKENS,
    STATISTICS,
    EffectSizes,
    Settings,
    _cloud,
    _effects,
    null_moments,
    reference_effect_sizes,
    stream,
)
from gtbook.studies.traced import Sides, collect, merge, observed
from gtcore._progress import progress as progress_bar

#: the reference law's degrees of freedom (the registered criterion) and the sensitivity values
REFERENCE_NU = 20.0
SENSITIVITY_NU = (10.0, 50.0)


class Verdict(enum.Enum):
    """The criterion's verdict on one model at one sample size."""

    HOLDS = "holds"
    NOT_CLOSE_EARLY = "not close through the early and intermediate blocks"
    CLOSE_AT_LAST = "still close at the last block"

    def __str__(self) -> str:
        return self.value


# =========================================================================== a model, layer by layer
def _rank_groups(ranks: Sequence[int]) -> list[int]:
    """Each rank's representative: ranks within 1% of one met earlier share it."""
    reps: list[int] = []
    out = []
    for r in ranks:
        near = [q for q in reps if abs(q - r) <= 0.01 * max(q, r)]
        q = near[0] if near else int(r)
        if not near:
            reps.append(q)
        out.append(q)
    return out


@dataclass
class LayerEffects:
    r"""The effect sizes of a model's token cloud at every layer, one input mode, one sample size.

    Attributes
    ----------
    model, mode : str
    sequences, tokens, seed : int
    layers : (L+1,) int array
        :math:`0..L` (0: what block 1 sees).
    rank : (L+1,) int array
        Numerical rank of each layer's centred covariance.
    null_rank : (L+1,) int array
        The rank the null and the reference are drawn in (``_rank_groups``).
    effects : list of EffectSizes, one per layer
    nulls : dict rank -> NullMoments
    sides : Sides
        The traced sides (:mod:`gtbook.studies.traced`): the model's forward pass on the Gaussian tokens
        (observed); the nulls, Gaussian samples and the statistics on them (predicted). The statistics of the
        model's layers are the comparison.
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    seed: int
    layers: np.ndarray
    rank: np.ndarray
    null_rank: np.ndarray
    effects: list
    nulls: dict = field(repr=False)
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def n_blocks(self) -> int:
        return int(self.layers[-1])

    def array(self, what: str, statistic: str) -> np.ndarray:
        """``what`` (``"value"``, ``"low"``, ``"high"``, ``"raw"``, ``"theta"``, ``"se"``) per layer."""
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}")
        return np.array([getattr(e, what)[statistic] for e in self.effects])

    def band_inside(self, statistic: str, level: float = 0.99) -> np.ndarray:
        """The old criterion, per layer: the statistic inside the ``level`` noise band of its null."""
        raw = self.array("raw", statistic)
        bands = [self.nulls[int(q)].band(statistic, level) for q in self.null_rank]
        return np.array([lo <= v <= hi for v, (lo, hi) in zip(raw, bands, strict=True)])

    def band_first_departure(self, statistic: str, level: float = 0.99) -> int | None:
        """The first block :math:`\\ell \\ge 1` out of the old noise band (``None``: never)."""
        inside = self.band_inside(statistic, level)
        out = [int(layer) for layer, ok in zip(self.layers, inside, strict=True) if layer >= 1 and not ok]
        return out[0] if out else None

    def ratio(self, references: Mapping[int, EffectSizes], statistic: str, what: str = "high") -> np.ndarray:
        r"""Per layer: the ``what`` end (or ``"value"``) of :math:`\Delta_s(\ell)` over the lower end
        (or, for ``"value"``, the point estimate) of :math:`\Delta_s(\mathrm{ref})`; ``inf`` when that is 0.
        Close for :math:`s` iff ``ratio(refs, s) < 1``."""
        num = self.array(what, statistic)
        den = np.array(
            [getattr(references[int(q)], "value" if what == "value" else "low")[statistic] for q in self.null_rank]
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)

    def close(self, references: Mapping[int, EffectSizes]) -> np.ndarray:
        """Per layer: close for every statistic (upper end below the reference's lower end)."""
        return np.all([self.ratio(references, s) < 1 for s in STATISTICS], axis=0)

    def first_not_close(self, references: Mapping[int, EffectSizes], statistic: str) -> int | None:
        """The first block :math:`\\ell \\ge 1` not close for ``statistic`` alone (``None``: none)."""
        bad = [
            int(layer)
            for layer, r in zip(self.layers, self.ratio(references, statistic), strict=True)
            if layer >= 1 and not r < 1
        ]
        return bad[0] if bad else None

    def table(self, references: Mapping[int, EffectSizes] | None = None) -> str:
        """One row per layer: each :math:`\\Delta_s` with its interval (and, given references, ``*``
        where not close for that statistic)."""
        head = (
            f"{self.model}, mode={self.mode}: S={self.sequences} x T={self.tokens}, within sequences; "
            f"Delta [95% interval]" + ("; * = not close to the reference" if references else "")
        )
        lines = [head, f"{'layer':>5} {'rank':>5} " + " ".join(f"{STATISTICS[s]:>34}" for s in STATISTICS)]
        ratios = {s: self.ratio(references, s) for s in STATISTICS} if references else None
        for i, layer in enumerate(self.layers):
            e = self.effects[i]
            cells = []
            for s in STATISTICS:
                mark = (" " if ratios[s][i] < 1 else "*") if ratios else " "
                cells.append(f"{e.value[s]:11.3g}{mark}[{e.low[s]:9.3g}, {e.high[s]:9.3g}]")
            lines.append(f"{layer:>5d} {self.rank[i]:>5d} " + " ".join(f"{c:>34}" for c in cells))
        return "\n".join(lines)


def layer_effects(
    model: Any,
    *,
    mode: str = "pure",
    sequences: int = 8,
    tokens: int = 512,
    seed: int,
    settings: Settings = Settings(),
    progress: bool = False,
) -> LayerEffects:
    r"""Feed :math:`S` sequences of :math:`T` Gaussian tokens :math:`N(0, I_d)` to a model and measure the
    effect sizes at every layer (:func:`~gtbook.studies.pretrained.effects.effect_sizes`, within sequences).

    The tokens come from stream ``tokens`` of ``seed``; the directions, the bootstrap resamples and the
    null samples from the other streams of the same seed (common to all layers and to both modes).

    Parameters
    ----------
    model : gtcore.models.LoadedTransformer
    mode : {"pure", "embedding"}
    sequences, tokens : int
        :math:`S \ge 2` and :math:`T \ge 2`.
    seed : int
    settings : Settings
    progress : bool

    Returns
    -------
    LayerEffects
    """
    from gtcore.models import LoadedTransformer, iter_layers
    from gtcore.stats.sampling import gaussian_tokens

    if not isinstance(model, LoadedTransformer):
        raise ValueError("model must be a LoadedTransformer (gtcore.models.load_transformer)")
    for name, v in (("sequences", sequences), ("tokens", tokens)):
        if isinstance(v, bool) or int(v) != v or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    S, T, d = int(sequences), int(tokens), model.d
    x = gaussian_tokens(S * T, np.zeros(d), np.eye(d), seed=np.random.default_rng(stream(seed, _TOKENS)))
    layers, ranks, reps, effects, nulls = [], [], [], [], {}
    seen: list[int] = []
    blocks = iter(
        progress_bar(
            iter_layers(model, x.reshape(S, T, d), mode),
            f"{model.name} {mode}",
            enabled=progress,
            total=model.n_layers + 1,
        )
    )
    forward = Sides.empty()
    while True:
        with collect() as step, observed():  # the forward pass runs as the layers are drawn
            item = next(blocks, None)
        forward = merge(forward, step)
        if item is None:
            break
        layer, h = item
        cl = _cloud(h.double().cpu().numpy(), settings.n_projections, seed)
        q = _rank_groups([*seen, cl.rank])[-1]
        seen.append(cl.rank)
        if q not in nulls:
            nulls[q] = null_moments(S, T, q, seed=seed, settings=settings)
        effects.append(_effects(cl, nulls[q], seed, settings))
        layers.append(layer)
        ranks.append(cl.rank)
        reps.append(q)
    return LayerEffects(
        model.name,
        mode,
        S,
        T,
        int(seed),
        np.array(layers),
        np.array(ranks),
        np.array(reps),
        effects,
        nulls,
        merge(forward, *(n.sides for n in nulls.values())),
    )


def references_for(
    results: Iterable[LayerEffects], nu: float = REFERENCE_NU, *, settings: Settings = Settings(), control: bool = False
) -> dict[int, EffectSizes]:
    """The reference effect sizes at every null rank the results use (same shape and seed as each)."""
    refs: dict[int, EffectSizes] = {}
    for res in results:
        for q in sorted(set(int(q) for q in res.null_rank)):
            refs[q] = reference_effect_sizes(
                float(nu), res.sequences, res.tokens, q, seed=res.seed, settings=settings, control=control
            )
    return refs


# ================================================================================== the verdicts
@dataclass
class ModelVerdict:
    r"""The criterion's verdict on one model at one sample size, both modes.

    Attributes
    ----------
    model : str
    sequences, tokens, n_blocks, half : int
        :math:`S`, :math:`T`, :math:`L`, :math:`\lceil L/2\rceil`.
    nu : float
        The reference's degrees of freedom.
    verdict : Verdict
    first_not_close : dict (mode, statistic) -> int or None
    early_ratio : float
        :math:`\max` over modes, blocks :math:`1..\lceil L/2\rceil` and statistics of the upper end of
        :math:`\Delta_s(\ell)` over the lower end of :math:`\Delta_s(\mathrm{ref})`: below 1 iff close there.
    last_ratio : float
        :math:`\min` over modes of :math:`\max_s` of the same ratio at the last block: at least 1 iff the
        last block is not close in every mode.
    """

    model: str
    sequences: int
    tokens: int
    n_blocks: int
    half: int
    nu: float
    verdict: Verdict
    first_not_close: dict
    early_ratio: float
    last_ratio: float

    def __repr__(self) -> str:
        return (
            f"ModelVerdict({self.model!r}, S={self.sequences}, nu={self.nu:g}: {self.verdict}; "
            f"early ratio {self.early_ratio:.3g}, last ratio {self.last_ratio:.3g})"
        )


def model_verdict(
    results: Mapping[str, LayerEffects], references: Mapping[int, EffectSizes], nu: float = REFERENCE_NU
) -> ModelVerdict:
    r"""The verdict of the criterion from the effect sizes of both modes (see the module docstring).

    Parameters
    ----------
    results : dict mode -> LayerEffects
        One model at one sample size, every registered mode.
    references : dict rank -> EffectSizes
        ``references_for`` those results.
    nu : float
        The references' degrees of freedom (recorded).

    Returns
    -------
    ModelVerdict
    """
    res = list(results.values())
    if not res:
        raise ValueError("results must hold at least one mode")
    L = res[0].n_blocks
    if any(r.n_blocks != L or r.sequences != res[0].sequences for r in res):
        raise ValueError("results must come from one model at one sample size")
    half = math.ceil(L / 2)
    early, last, first = [], [], {}
    for mode, r in results.items():
        ratios = np.array([r.ratio(references, s) for s in STATISTICS])  # (3, L+1)
        worst = ratios.max(axis=0)
        early.append(float(worst[1 : half + 1].max()))
        last.append(float(worst[-1]))
        for s in STATISTICS:
            first[mode, s] = r.first_not_close(references, s)
    early_ratio, last_ratio = max(early), min(last)
    if not early_ratio < 1:
        verdict = Verdict.NOT_CLOSE_EARLY
    elif last_ratio >= 1:
        verdict = Verdict.HOLDS
    else:
        verdict = Verdict.CLOSE_AT_LAST
    return ModelVerdict(
        res[0].model, res[0].sequences, res[0].tokens, L, half, float(nu), verdict, first, early_ratio, last_ratio
    )


def interval_disagreements(a: LayerEffects, b: LayerEffects) -> list[tuple[int, str]]:
    r"""The (block, statistic) pairs, :math:`\ell = 1..L`, whose intervals in ``a`` and ``b`` (one model and
    mode at two sample sizes) do not overlap."""
    if a.n_blocks != b.n_blocks or a.mode != b.mode:
        raise ValueError("a and b must be one model and mode (same depth and mode)")
    out = []
    for s in STATISTICS:
        alo, ahi, blo, bhi = a.array("low", s), a.array("high", s), b.array("low", s), b.array("high", s)
        out += [
            (int(layer), s) for i, layer in enumerate(a.layers) if layer >= 1 and (ahi[i] < blo[i] or bhi[i] < alo[i])
        ]
    return sorted(out)


def band_verdict_block(results: Mapping[str, LayerEffects], level: float = 0.99) -> int:
    r"""The old criterion's first block out of band, over statistics and modes (:math:`L + 1`: none)."""
    firsts = [r.band_first_departure(s, level) for r in results.values() for s in STATISTICS]
    L = next(iter(results.values())).n_blocks
    return min(L + 1 if f is None else f for f in firsts)


def effect_verdict_block(results: Mapping[str, LayerEffects], references: Mapping[int, EffectSizes]) -> int:
    r"""The effect-size criterion's first block not close, over statistics and modes (:math:`L + 1`: none)."""
    firsts = [r.first_not_close(references, s) for r in results.values() for s in STATISTICS]
    L = next(iter(results.values())).n_blocks
    return min(L + 1 if f is None else f for f in firsts)


# ====================================================================== one model, every size and mode
@dataclass
class ModelStudy:
    r"""The criterion run on one model: every sample size and mode, the references, verdicts and controls.

    Attributes
    ----------
    model : str
    tokens : int
    sizes, seeds : list of int
        The numbers of sequences :math:`S` and the seed of each.
    effects : dict S -> dict mode -> LayerEffects
    references : dict (nu, S) -> dict rank -> EffectSizes
    verdicts : dict (nu, S) -> ModelVerdict
    controls : dict S -> dict rank -> EffectSizes
        An independent draw of the reference law (:math:`\nu = 20`) at each size: the power control.
    """

    model: str
    tokens: int
    sizes: list
    seeds: list
    effects: dict
    references: dict
    verdicts: dict
    controls: dict

    @property
    def n_blocks(self) -> int:
        return next(iter(self.effects[self.sizes[0]].values())).n_blocks

    def sides(self, *sizes: int) -> Sides:
        """The traced sides of the verdicts at ``sizes`` (all when none is given) with the criterion's reference
        (:mod:`gtbook.studies.traced`): the forward passes (observed); the nulls and the reference law's effect
        sizes (predicted)."""
        chosen = [int(S) for S in sizes] or list(self.sizes)
        return merge(
            *(e.sides for S in chosen for e in self.effects[S].values()),
            *(r.sides for S in chosen for r in self.references[REFERENCE_NU, S].values()),
        )

    def verdict(self, sequences: int, nu: float = REFERENCE_NU) -> ModelVerdict:
        return self.verdicts[float(nu), int(sequences)]

    def fractions(self, sequences: int, mode: str, layers: Sequence[int]) -> dict:
        r""":math:`\Delta_s(\ell)/\Delta_s(\mathrm{ref})` (point estimates) at ``layers``: dict statistic -> list."""
        res = self.effects[int(sequences)][mode]
        refs = self.references[REFERENCE_NU, int(sequences)]
        return {s: [float(res.ratio(refs, s, "value")[int(layer)]) for layer in layers] for s in STATISTICS}

    def disagreements(self) -> dict:
        """Per mode: the (block, statistic) pairs whose intervals at the first two sizes do not overlap."""
        a, b = self.sizes[:2]
        return {m: interval_disagreements(self.effects[a][m], self.effects[b][m]) for m in self.effects[a]}

    def control_ratio(self, sequences: int) -> float:
        r""":math:`\max_s` upper end of the control's :math:`\Delta_s` over the lower end of the reference's
        (at least 1: the criterion does not call the reference law close to itself)."""
        refs, ctrl = self.references[REFERENCE_NU, int(sequences)], self.controls[int(sequences)]
        return max(
            ctrl[q].high[s] / refs[q].low[s] if refs[q].low[s] > 0 else math.inf for q in ctrl for s in STATISTICS
        )

    def reference_low(self, sequences: int) -> float:
        """The smallest lower end of the reference's effect sizes (positive: its departure is resolved)."""
        refs = self.references[REFERENCE_NU, int(sequences)]
        return min(refs[q].low[s] for q in refs for s in STATISTICS)

    def gaussian_ratio(self, sequences: int) -> float:
        r"""Pure mode, layer 0 (exactly the Gaussian input): :math:`\max_s` of the upper end of its
        :math:`\Delta_s` over the reference's lower end (below 1: the criterion calls a Gaussian close)."""
        res = self.effects[int(sequences)]["pure"]
        refs = self.references[REFERENCE_NU, int(sequences)]
        return max(float(res.ratio(refs, s)[0]) for s in STATISTICS)

    def verdict_rows(self, nu: float = REFERENCE_NU) -> list[str]:
        """One row per size: the verdict, the two ratios and the first block not close per mode and statistic."""
        rows = []
        for S in self.sizes:
            v = self.verdict(S, nu)
            first = " ".join(
                f"{'-' if v.first_not_close[m, s] is None else v.first_not_close[m, s]:>3}"
                for m in self.effects[S]
                for s in STATISTICS
            )
            rows.append(
                f"{self.model[:44]:<44} {S:>3} {nu:>4g} {v.verdict!s:<52} {v.early_ratio:7.3g} "
                f"{v.last_ratio:7.3g}   {first}"
            )
        return rows

    def fraction_rows(self, sequences: int) -> list[str]:
        r"""Per mode: :math:`\Delta_s/\Delta_s(\mathrm{ref})` at blocks 1, :math:`\lceil L/2\rceil` and :math:`L`."""
        L = self.n_blocks
        blocks = [1, math.ceil(L / 2), L]
        rows = []
        for m in self.effects[int(sequences)]:
            fr = self.fractions(sequences, m, blocks)
            cells = "  ".join(" ".join(f"{f:6.2f}" for f in fr[s]) for s in STATISTICS)
            rows.append(f"{self.model[:44]:<44} {sequences:>3} {m:<9} blocks {blocks}: {cells}")
        return rows

    def __repr__(self) -> str:
        cells = "; ".join(f"S={S}: {self.verdict(S).verdict}" for S in self.sizes)
        return f"ModelStudy({self.model!r}, L={self.n_blocks}, T={self.tokens}: {cells})"


def study_model(
    model: Any,
    *,
    sizes: Sequence[int],
    seeds: Sequence[int],
    tokens: int = 512,
    settings: Settings = Settings(),
    modes: Sequence[str] = ("pure", "embedding"),
    nus: Sequence[float] = (REFERENCE_NU, *SENSITIVITY_NU),
    controls: bool = True,
    progress: bool = False,
) -> ModelStudy:
    r"""Run the criterion on one model at every size :math:`S` of ``sizes`` (with its seed), in every mode.

    For each size: ``layer_effects`` per mode, the references of every :math:`\nu` of ``nus`` at the
    ranks used (``references_for``), the verdicts (``model_verdict``) and, with ``controls``, an
    independent draw of the :math:`\nu = 20` reference law.

    Parameters
    ----------
    model : gtcore.models.LoadedTransformer
    sizes, seeds : sequences of int, one seed per size
    tokens : int
    settings : Settings
    modes : the input modes
    nus : the reference degrees of freedom (the first must be the criterion's 20)
    controls : bool
    progress : bool

    Returns
    -------
    ModelStudy
    """
    sizes, seeds = [int(s) for s in sizes], [int(s) for s in seeds]
    if len(sizes) != len(seeds) or not sizes:
        raise ValueError(f"sizes and seeds must have one seed per size, got {sizes} and {seeds}")
    if float(nus[0]) != REFERENCE_NU:
        raise ValueError(f"nus must start with the criterion's reference nu = {REFERENCE_NU:g}, got {nus!r}")
    effects, refs, verdicts, ctrls = {}, {}, {}, {}
    for S, seed in zip(sizes, seeds, strict=True):
        effects[S] = {
            m: layer_effects(model, mode=m, sequences=S, tokens=tokens, seed=seed, settings=settings, progress=progress)
            for m in modes
        }
        for nu in nus:
            refs[float(nu), S] = references_for(effects[S].values(), nu, settings=settings)
            verdicts[float(nu), S] = model_verdict(effects[S], refs[float(nu), S], nu)
        if controls:
            ctrls[S] = references_for(effects[S].values(), REFERENCE_NU, settings=settings, control=True)
    return ModelStudy(model.name, int(tokens), sizes, seeds, effects, refs, verdicts, ctrls)


VERDICT_HEADER = (
    f"{'model':<44} {'S':>3} {'nu':>4} {'verdict':<52} {'early':>7} {'last':>7}   "
    "first block not close: pure (SW2 Mardia coord), embedding (SW2 Mardia coord)"
)
FRACTION_HEADER = (
    f"{'model':<44} {'S':>3} {'mode':<9} Delta / Delta_ref at blocks 1, ceil(L/2), L: "
    "sliced W2 | Mardia | coordinate kurtosis"
)


__all__ = [
    "FRACTION_HEADER",
    "REFERENCE_NU",
    "SENSITIVITY_NU",
    "VERDICT_HEADER",
    "LayerEffects",
    "ModelStudy",
    "ModelVerdict",
    "Verdict",
    "band_verdict_block",
    "effect_verdict_block",
    "interval_disagreements",
    "layer_effects",
    "model_verdict",
    "references_for",
    "study_model",
]
