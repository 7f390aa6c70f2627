r"""Chapter 5's results as objects with their own tables and figures: the registered criterion on every model
(:class:`CriterionRun`), the two criteria across sample sizes (``SizeSweep``), closeness next to clustering
(:class:`ClusteringRun`), and the scope of a claim about a model (:func:`model_scope`).

Everything here reads the results of :func:`~gtbook.studies.pretrained.criterion.study_model` and
:func:`~gtbook.studies.pretrained.clustering.clustering_profile`; nothing is computed twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.pretrained.criterion import (
    FRACTION_HEADER,
    REFERENCE_NU,
    VERDICT_HEADER,
    ModelStudy,
    band_verdict_block,
    effect_verdict_block,
)
from gtbook.studies.pretrained.effects import STATISTICS
from gtbook.studies.pretrained.profile import DepthProfile, EffectProfile, depth_profile, effect_profile

__all__ = ["ClusteringRun", "CriterionRun", "SizeSweep", "clustering_run", "model_scope", "size_sweep"]


def model_scope(model: Any, system: str, family: str) -> dict[str, Any]:
    """The scope of a claim about a loaded Transformer (:mod:`gtbook.scope`): its system (``"model code"`` for
    published weights run by their own code, ``"trained model"`` for weights trained here), its width ``d``,
    its heads, softmax dot-product attention, and the family that names the model (such a claim never covers a
    class of models on its own).

    Parameters
    ----------
    model : gtcore.models.LoadedTransformer
    system : str
    family : str

    Returns
    -------
    dict
    """
    heads = int(getattr(model.model.config, "num_attention_heads", 1))
    return dict(system=system, d=int(model.d), heads=heads, attention="dot", family=family)


# ============================================================================== the registered criterion
@dataclass
class CriterionRun:
    r"""The registered criterion on the chapter's models (and, optionally, on random initialisations).

    Attributes
    ----------
    studies : dict label -> ModelStudy
    initial : dict label -> ModelStudy
        The random initialisations of some models (at one size, the reference's :math:`\nu` only).
    """

    studies: dict
    initial: dict = field(default_factory=dict)

    def verdict_table(self, nus: Sequence[float] = (REFERENCE_NU,)) -> str:
        """Per model, size and reference: the verdict, the early and last ratios and the first block not close
        per mode and statistic (random initialisations at the criterion's reference only)."""
        lines = [VERDICT_HEADER]
        for nu in nus:
            for st in self.studies.values():
                lines += st.verdict_rows(nu)
            if float(nu) == REFERENCE_NU:
                for st in self.initial.values():
                    lines += st.verdict_rows(nu)
        return "\n".join(lines)

    def fraction_table(self) -> str:
        r""":math:`\Delta_s/\Delta_s(\mathrm{ref})` at blocks 1, :math:`\lceil L/2\rceil` and :math:`L`, per model,
        size and mode."""
        lines = [FRACTION_HEADER]
        for st in self.studies.values():
            for S in st.sizes:
                lines += st.fraction_rows(S)
        for st in self.initial.values():
            lines += st.fraction_rows(st.sizes[0])
        return "\n".join(lines)

    def disagreements(self) -> int:
        """How many (model, mode, block, statistic) intervals at the first two sizes do not overlap."""
        return sum(len(d) for st in self.studies.values() if len(st.sizes) > 1 for d in st.disagreements().values())

    def detail_table(self, label: str) -> str:
        r"""One model's :math:`\Delta_s(\ell)` with intervals per layer, every size and mode, and its reference."""
        st = self.studies[label]
        out = []
        for S in st.sizes:
            refs = st.references[REFERENCE_NU, S]
            for res in st.effects[S].values():
                out += [res.table(refs), ""]
            q = int(next(iter(st.effects[S].values())).null_rank[1])
            out.append(f"reference (Student-t, nu = {REFERENCE_NU:g}), S = {S}: {refs[q]}")
            out.append("")
        return "\n".join(out).rstrip()

    def effects_figure(self, label: str):
        """:func:`~gtbook.studies.pretrained.figures.effect_size_figure` of one model, every size and mode."""
        from gtbook.studies.pretrained.figures import effect_size_figure

        st = self.studies[label]
        series = {f"{m}, S={S}": st.effects[S][m] for S in st.sizes for m in st.effects[S]}
        refs = {f"{m}, S={S}": st.references[REFERENCE_NU, S] for S in st.sizes for m in st.effects[S]}
        return effect_size_figure(series, refs)

    def profile(self, nu: float = REFERENCE_NU) -> EffectProfile:
        """The effect-size profile of every model (:func:`~gtbook.studies.pretrained.profile.effect_profile`)."""
        return effect_profile(self.studies, nu)

    def initial_profiles(self) -> dict[str, dict[int, DepthProfile]]:
        """The profiles of the random initialisations, label -> size -> DepthProfile."""
        return {k: {S: depth_profile(st, S) for S in st.sizes} for k, st in self.initial.items()}

    def worst_ratio(self, label: str, sequences: int, mode: str = "pure", initial: bool = False) -> np.ndarray:
        r"""Per layer, :math:`\max_s` of the upper end of :math:`\Delta_s(\ell)` over the reference's lower end
        in one mode (the criterion's ratio: close below 1)."""
        st = (self.initial if initial else self.studies)[label]
        res = st.effects[int(sequences)][mode]
        refs = st.references[REFERENCE_NU, int(sequences)]
        return np.max([res.ratio(refs, s) for s in STATISTICS], axis=0)

    def __repr__(self) -> str:
        return f"CriterionRun({', '.join(map(repr, self.studies.values()))})"


# ====================================================================== the two criteria across sizes
@dataclass
class SizeSweep:
    r"""The first block at which each criterion fails, per mode, against the number of sequences.

    Attributes
    ----------
    model : str
    sizes : list of int
    band_blocks, effect_blocks : dict mode -> list of int
        The first block out of the 99% noise band of exact Gaussianity, and the first block not close by the
        effect-size criterion, per size (:math:`L + 1`: none).
    n_blocks : int
    """

    model: str
    sizes: list
    band_blocks: dict
    effect_blocks: dict
    n_blocks: int

    def figure(self, title: str = ""):
        """:func:`~gtbook.studies.pretrained.figures.criteria_across_sizes_figure` of the sweep, drawn wide and low
        (8 x 3.4 inches) so that it takes little of the page's height."""
        from gtbook.studies.pretrained.figures import criteria_across_sizes_figure

        fig = criteria_across_sizes_figure(
            self.sizes, self.band_blocks, self.effect_blocks, self.n_blocks, title=title or self.model
        )
        fig.set_size_inches(8.0, 3.4)
        return fig

    def table(self) -> str:
        """One line per mode."""
        return "\n".join(
            f"{m:>9}: S = {self.sizes}: first block out of band {self.band_blocks[m]}, first block "
            f"not close {self.effect_blocks[m]} ({self.n_blocks + 1} = none)"
            for m in self.band_blocks
        )


def size_sweep(*studies: ModelStudy) -> SizeSweep:
    """The ``SizeSweep`` of one model over the sizes of every study given (each its own seed).

    Parameters
    ----------
    *studies : ModelStudy
        Studies of the same model, at different sizes.

    Returns
    -------
    SizeSweep
    """
    if not studies:
        raise ValueError("give at least one ModelStudy")
    effects, refs = {}, {}
    for st in studies:
        for S in st.sizes:
            effects[S], refs[S] = st.effects[S], st.references[REFERENCE_NU, S]
    sizes = sorted(effects)
    modes = list(effects[sizes[0]])
    band = {m: [band_verdict_block({m: effects[S][m]}) for S in sizes] for m in modes}
    eff = {m: [effect_verdict_block({m: effects[S][m]}, refs[S]) for S in sizes] for m in modes}
    return SizeSweep(studies[0].model, sizes, band, eff, studies[0].n_blocks)


# ================================================================================ closeness and clustering
@dataclass
class ClusteringRun:
    """Closeness to Gaussian next to pairwise cosine similarities and cluster counts, per model (pure mode).

    Attributes
    ----------
    columns : dict title -> dict
        What :func:`~gtbook.studies.pretrained.figures.closeness_and_clustering_figure` draws.
    profiles : dict label -> (ClusteringProfile, ClusteringProfile or None)
        Each model's profile and its random initialisation's.
    """

    columns: dict
    profiles: dict

    def figure(self):
        """:func:`~gtbook.studies.pretrained.figures.closeness_and_clustering_figure`, its rows 2 inches high."""
        from gtbook.studies.pretrained.figures import closeness_and_clustering_figure

        fig = closeness_and_clustering_figure(self.columns)
        fig.set_size_inches(fig.get_size_inches()[0], 6.0)
        return fig

    def table(self) -> str:
        """Every profile's table (mean cosine similarity, cluster count, update per layer)."""
        return "\n\n".join(p.table() for pair in self.profiles.values() for p in pair if p is not None)

    @property
    def fewest_clusters(self) -> float:
        """The fewest clusters at any layer of any model (not the initialisations)."""
        return float(min(np.min(p[0].clusters) for p in self.profiles.values()))

    def largest_mean_cosine(self, label: str) -> float:
        """The largest mean cosine similarity over one model's layers."""
        return float(np.max(self.profiles[label][0].mean_cosine))


def clustering_run(
    models: Mapping[str, tuple[Any, Any]],
    criterion: CriterionRun,
    titles: Mapping[str, str],
    *,
    sequences: int,
    tokens: int,
    seed: int,
    threshold: float,
) -> ClusteringRun:
    r"""Cluster profiles (:func:`~gtbook.studies.pretrained.clustering.clustering_profile`, pure mode) of each
    model and, when given, its random initialisation, beside the criterion's ratio at the first size.

    Parameters
    ----------
    models : dict label -> (model, initial model or None)
    criterion : CriterionRun
        Its studies' labels are those of ``models``; an initialisation's ratio is drawn when the run holds it.
    titles : dict label -> str
        Column titles.
    sequences, tokens, seed : int
    threshold : float
        The cosine similarity at which two tokens are joined.

    Returns
    -------
    ClusteringRun
    """
    from gtbook.studies.pretrained.clustering import clustering_profile

    columns, profiles = {}, {}
    for label, (model, init) in models.items():
        prof = clustering_profile(
            model, mode="pure", sequences=sequences, tokens=tokens, seed=seed, threshold=threshold
        )
        iprof = (
            clustering_profile(init, mode="pure", sequences=sequences, tokens=tokens, seed=seed, threshold=threshold)
            if init is not None
            else None
        )
        profiles[label] = (prof, iprof)
        S0 = criterion.studies[label].sizes[0]
        columns[titles[label]] = {
            "ratio": criterion.worst_ratio(label, S0),
            "profile": prof,
            "initial_profile": iprof,
            "initial_ratio": (
                criterion.worst_ratio(label, criterion.initial[label].sizes[0], initial=True)
                if label in criterion.initial
                else None
            ),
        }
    return ClusteringRun(columns, profiles)
