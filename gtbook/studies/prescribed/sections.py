r"""Chapter 6's sections as study functions: the bridge to the particle model, the :math:`V = vI` example layer by
layer with its finite-N nulls, and the layer map's depth as :math:`h \to 0`; each returns a result dataclass
with its figure methods. The computations are those of :mod:`~gtbook.studies.prescribed.harness`, called with
the chapter's parameters in the same order and with the same seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.prescribed import figures as figs
from gtbook.studies.prescribed.harness import (
    BetaDependence,
    DepthConvergence,
    PrescribedRun,
    antithetic_gaussian_tokens,
    beta_dependence,
    covariance_band,
    depth_convergence,
    prescribed_deviations,
    run_prescribed,
)
from gtbook.studies.traced import Sides, collect
from gtcore.controls import Controls
from gtcore.models.prescribed import hidden_states, prescribed_transformer
from gtcore.models.prescribed_moments import layer_moments
from gtcore.particles import simulate
from gtcore.riccati import blowup_time
from gtcore.stability import equilibrium
from gtcore.stats.gaussianity import empirical_moments
from gtcore.stats.inference import HotellingTest, hotelling_test

__all__ = [
    "BetaStudy",
    "DepthStudy",
    "Example",
    "ExampleNulls",
    "beta_study",
    "bridge_errors",
    "depth_study",
    "example_nulls",
    "vi_example",
]


@dataclass
class Example:
    r"""The :math:`V = vI` example: the configurations, the BERT runs, the LayerNorm runs of every family.

    Attributes
    ----------
    destab, unscaled, stab, stab_no_A : Controls
        :math:`V = (v/\beta)I, B = \beta B_0`; the same :math:`vB` at the unscaled :math:`\beta`;
        :math:`V = -(v/\beta)I` with :math:`A = aI + \omega J`; the same without :math:`A`.
    Sigma0, S_hat : (d, d) arrays
        The population covariance (I) and the cloud's.
    h, t_star0 : float
        Layer size and the ODE's blow-up time from :math:`\Sigma_0`.
    runs : dict
        ``"destab"``, ``"unscaled"``, ``"stab"``, ``"no_A"`` (the first family) and ``"ln"`` (every family), lists
        of :class:`~gtbook.studies.prescribed.harness.PrescribedRun`.
    Sigma_star_h, Sigma_star_ode : (d, d) arrays
        The layer map's fixed point (iterated over 40 time units) and the ODE's equilibrium.
    families : list of str
    n_tokens, L_stab, h_stable : the cloud size, the stabilising depth and layer size
    x0 : (n_tokens, d) array
        The antithetic cloud every run starts from.
    B0, vb, n_layers : the example's query-key shape, its product vB and its depth
    """

    destab: Controls
    unscaled: Controls
    stab: Controls
    stab_no_A: Controls
    Sigma0: np.ndarray
    S_hat: np.ndarray
    h: float
    t_star0: float
    runs: dict
    Sigma_star_h: np.ndarray
    Sigma_star_ode: np.ndarray
    families: list
    n_tokens: int
    L_stab: int
    h_stable: float
    x0: np.ndarray
    B0: np.ndarray
    vb: float
    n_layers: int

    def run(self, name: str, k: int = 0) -> PrescribedRun:
        """The ``k``-th run of ``name``."""
        return self.runs[name][k]

    def depths(self, factor: float) -> dict:
        """First layers beyond ``factor`` times the initial norm: model, layer map, unscaled model, LayerNorm models."""
        r = self.run("destab")
        m, p = r.depth(factor)
        return {
            "model": m,
            "map": p,
            "t_star/h": r.t_star / self.h,
            "unscaled": self.run("unscaled").depth(factor)[0],
            "layer_norm": {f: rl.depth(factor)[0] for f, rl in zip(self.families, self.runs["ln"], strict=True)},
        }

    def band(self, S: np.ndarray, z: float) -> float:
        """:func:`~gtbook.studies.prescribed.harness.covariance_band` of N/2 samples."""
        return covariance_band(S, self.n_tokens // 2, z=z)

    def figure(self, factor: float):
        """:func:`~gtbook.studies.prescribed.figures.regimes_figure` of the first family."""
        return figs.regimes_figure(
            self.runs["destab"],
            self.runs["stab"],
            layer_norm=self.runs["ln"][:1],
            unscaled=self.runs["unscaled"],
            no_affine=self.runs["no_A"],
            factor=factor,
            Sigma_star_norm=np.linalg.norm(self.Sigma_star_h) / np.linalg.norm(self.S_hat),
        )

    def animation(self, **kwargs):
        """:func:`~gtbook.studies.prescribed.figures.layers_animation` of the first family's runs."""
        d, s = self.run("destab"), self.run("stab")
        if d.tokens is None or s.tokens is None:
            raise ValueError("the example's runs kept no hidden states (run_prescribed(..., keep_tokens=True))")
        return figs.layers_animation(d.tokens, d, s.tokens, s, **kwargs)


def vi_example(
    *,
    families: Sequence[str],
    B0: Any,
    vb: float,
    beta: float,
    beta_unscaled: float,
    n_layers: int,
    depth_over_tstar: float,
    a_stable: float,
    omega: float,
    h_stable: float,
    t_stable: float,
    n_tokens: int,
    seed: int,
) -> Example:
    r"""Build the :math:`V = vI` configurations and run them (the first family; LayerNorm on every family) on one
    antithetic cloud of ``n_tokens`` (seed ``seed``); :math:`h = \text{depth\_over\_tstar}\cdot t^*/L`."""
    B0 = np.asarray(B0, float)
    d = B0.shape[0]
    Sigma0 = np.eye(d)
    J = np.zeros((d, d))
    J[0, 1], J[1, 0] = -omega, omega
    destab = Controls(V=(vb / beta) * np.eye(d), B=beta * B0)
    unscaled = Controls(V=(vb / beta_unscaled) * np.eye(d), B=beta_unscaled * B0)
    stab = Controls(A=a_stable * np.eye(d) + J, V=-(vb / beta) * np.eye(d), B=beta * B0)
    stab_no_A = Controls(V=stab.V, B=stab.B)
    t_star0 = blowup_time(Sigma0, destab).t_star
    h = depth_over_tstar * t_star0 / n_layers
    x0 = antithetic_gaussian_tokens(n_tokens, Sigma0, seed=seed)
    S_hat = empirical_moments(x0)[1]
    # the covariance map does not involve the mean: start it from the model's exact mean 0
    Sigma_star_h = layer_moments(np.zeros(d), S_hat, stab, int(40 / h_stable), h_stable)[1][-1]
    L_stab = round(t_stable / h_stable)
    first = families[0]
    runs = {
        "destab": [run_prescribed(first, destab, x0, n_layers, h, keep_tokens=True)],
        "ln": [run_prescribed(fam, destab, x0, n_layers, h, layer_norm=True) for fam in families],
        "unscaled": [run_prescribed(first, unscaled, x0, n_layers, h)],
        "stab": [run_prescribed(first, stab, x0, L_stab, h_stable, keep_tokens=True)],
        "no_A": [run_prescribed(first, stab_no_A, x0, L_stab, h_stable, feed_forward=False)],
    }
    return Example(
        destab,
        unscaled,
        stab,
        stab_no_A,
        Sigma0,
        S_hat,
        float(h),
        float(t_star0),
        runs,
        Sigma_star_h,
        equilibrium(stab).Sigma,
        list(families),
        int(n_tokens),
        int(L_stab),
        float(h_stable),
        x0,
        B0,
        float(vb),
        int(n_layers),
    )


def bridge_errors(ex: Example, *, tokens: int, layers: int, seed: int) -> dict:
    r"""Max :math:`|\text{hidden states} - \text{Euler particles}|` per family: ``tokens`` antithetic tokens (seed
    ``seed + 1``) through ``layers`` blocks of the destabilising example, against
    :func:`gtcore.particles.simulate` with ``method="euler"`` and the same steps."""
    xb = antithetic_gaussian_tokens(tokens, ex.Sigma0, seed=seed + 1)
    ref = simulate(xb, ex.destab, (0.0, layers * ex.h), layers, method="euler", keep_tokens=True, device="cpu")
    return {
        fam: float(np.abs(hidden_states(prescribed_transformer(fam, ex.destab, layers, h=ex.h), xb) - ref.tokens).max())
        for fam in ex.families
    }


@dataclass
class ExampleNulls:
    """Hotelling tests of the example's clouds against the layer map and a near miss (gain error)."""

    close_layer: int
    destab: dict[str, HotellingTest]
    stab: dict[str, HotellingTest]
    deviations: dict
    map_to_star: float
    #: the traced sides of ``destab`` and ``stab`` (:mod:`gtbook.studies.traced`): the Transformer on each cloud
    #: (observed); the layer maps from each cloud's own covariance, the near miss's included (predicted)
    destab_sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)
    stab_sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)


def example_nulls(
    ex: Example, *, close_cut: float, null_seeds: int, null_level: float, gain_error: float, null_seed: int
) -> ExampleNulls:
    r"""The example's finite-N nulls (:func:`~gtbook.studies.prescribed.harness.prescribed_deviations`): destabilising
    at the last layer with the map within ``close_cut`` of its start (seeds from ``null_seed``), stabilising at its last
    layer (seeds from ``null_seed + 1000``), each against the layer map and against the map with
    :math:`V \to` ``gain_error`` :math:`V`."""
    first = ex.families[0]
    r = ex.run("destab")
    close_layer = int(np.flatnonzero(r.map_ratio <= close_cut)[-1])
    L = r.Sigma_model.shape[0] - 1
    wrong = Controls(V=gain_error * ex.destab.V[0], B=ex.destab.B[0])
    with collect() as destab_sides:
        dev = prescribed_deviations(
            first,
            ex.destab,
            ex.Sigma0,
            ex.n_tokens,
            null_seeds,
            L,
            ex.h,
            close_layer,
            predictions={"layer map": ex.destab, "gain error": wrong},
            seed=null_seed,
        )
    wrong_s = Controls(A=ex.stab.A, V=gain_error * ex.stab.V[0], B=ex.stab.B[0])
    with collect() as stab_sides:
        dev_s = prescribed_deviations(
            first,
            ex.stab,
            ex.Sigma0,
            ex.n_tokens,
            null_seeds,
            ex.L_stab,
            ex.h_stable,
            ex.L_stab,
            predictions={"layer map": ex.stab, "gain error": wrong_s},
            seed=null_seed + 1000,
        )
    rs = ex.run("stab")
    map_to_star = float(np.linalg.norm(rs.Sigma_map[-1] - ex.Sigma_star_h) / np.linalg.norm(ex.Sigma_star_h))
    return ExampleNulls(
        close_layer,
        {k: hotelling_test(v, null_level) for k, v in dev.items()},
        {k: hotelling_test(v, null_level) for k, v in dev_s.items()},
        dev,
        map_to_star,
        destab_sides,
        stab_sides,
    )


@dataclass
class DepthStudy:
    """The layer map's blow-up depth as h -> 0."""

    result: DepthConvergence

    def figure(self):
        """:func:`~gtbook.studies.prescribed.figures.depth_convergence_figure`."""
        return figs.depth_convergence_figure(self.result)


def depth_study(ex: Example, *, layers: Sequence[int], factor: float, depth_over_tstar: float) -> DepthStudy:
    r""":func:`~gtbook.studies.prescribed.harness.depth_convergence` of the destabilising example for
    :math:`h = \text{depth\_over\_tstar}\cdot t^*/L`, L in ``layers``."""
    hs = depth_over_tstar * ex.t_star0 / np.array(layers, float)
    return DepthStudy(depth_convergence(np.zeros(ex.destab.d), ex.Sigma0, ex.destab, hs, factor=factor))


@dataclass
class BetaStudy:
    """The example's agreement with the layer map against the logit scale (same vB)."""

    result: BetaDependence

    def figure(self, beta: float, nulls: ExampleNulls):
        r""":func:`~gtbook.studies.prescribed.figures.beta_figure`, with the chapter's :math:`\beta` and one cloud's
        finite-N deviation (the root-mean-square norm of the destabilising null's deviations)."""
        one_cloud = float(np.sqrt(np.mean(np.sum(nulls.deviations["layer map"] ** 2, axis=1))))
        return figs.beta_figure(self.result, beta, null_scale=one_cloud)


def beta_study(ex: Example, betas: Sequence[float], *, close_cut: float, factor: float) -> BetaStudy:
    """:func:`~gtbook.studies.prescribed.harness.beta_dependence` of the first family on the example's cloud."""
    return BetaStudy(
        beta_dependence(
            ex.families[0], ex.B0, ex.vb, betas, ex.x0, ex.n_layers, ex.h, close_cut=close_cut, factor=factor
        )
    )
