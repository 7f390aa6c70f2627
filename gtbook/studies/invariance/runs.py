r"""Chapter 1's computations, one function per section, each returning a result with its figure and numbers.

* ``finite_n_rates``: the N-token moment error against N for a weak and a strong head (section b);
* ``layer_map_check``: twelve residual layers on the tokens against the exact layer map (section c);
* ``stack_rates``: the softmax stack against the exact layer map as N grows, Gaussian and uniform tokens;
* ``gaussianity_study``: the cloud's sliced :math:`W_2` and Mardia kurtosis over time against the noise
  band, with moment-matched non-Gaussian clouds and a ReLU flow (section d);
* ``ensemble_study``: the reduction and the invariance over two seeded ensembles of general layers in
  :math:`d = 3` (section e), with ``gtbook.studies.invariance.census.draw_census`` of the draws.

Sizes a reader would not change are keyword defaults here (the chapter's parameters cell holds the rest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.invariance import figures as figs
from gtbook.studies.invariance.census import DrawCensus, draw_census
from gtbook.studies.invariance.ensemble import (
    EnsembleStack,
    GeneralDraw,
    gaussianity_ensemble,
    general_draws,
    relu_variant,
    stack_ensemble,
)
from gtbook.studies.invariance.harness import MeanFieldStudy, mean_field_study, relative_moment_discrepancy
from gtbook.studies.invariance.nongaussian import StackStudy, softmax_stack_study
from gtbook.studies.traced import Sides, collect, merge, no_prediction, observed, predicted
from gtcore import Controls, integrate_moments, layer_stack
from gtcore.attention import max_sampling_strength
from gtcore.particles import simulate
from gtcore.stats.gaussianity import NoiseFloor, mardia_kurtosis, noise_floor, sliced_w2
from gtcore.stats.inference import mean_of_k_quantile, slope_difference_standard_error, slope_standard_error
from gtcore.stats.sampling import moment_matched_tokens

__all__ = [
    "EnsembleStudy",
    "FiniteNRates",
    "GaussianityStudy",
    "LayerMapCheck",
    "StackRates",
    "ensemble_study",
    "excursion",
    "finite_n_rates",
    "gaussianity_study",
    "layer_map_check",
    "stack_rates",
]


def excursion(values: Any, band: tuple[float, float]) -> float:
    """Largest distance outside ``band`` (negative: inside by that much at every point)."""
    lo, hi = band
    v = np.atleast_1d(np.asarray(values, float))
    return float(max(v.max() - hi, lo - v.min()))


@dataclass
class FiniteNRates:
    r"""The moment error of the N-token Transformer against N, weak and strong attention (``finite_n_rates``).

    Attributes
    ----------
    weak, strong : MeanFieldStudy
    se_weak, se_strong : float
        Bootstrap standard errors of the two slopes.
    se_diff : float
        Bootstrap standard error of their difference (the same resampled seeds for both).
    """

    weak: MeanFieldStudy
    strong: MeanFieldStudy
    se_weak: float
    se_strong: float
    se_diff: float

    @property
    def sides(self) -> Sides:
        """Both heads' traced sides together (the tokens; the moment ODE they are measured against)."""
        return merge(self.weak.sides, self.strong.sides)

    def figure(self) -> Any:
        """:func:`gtbook.studies.invariance.figures.error_against_n`."""
        return figs.error_against_n({"weak attention": self.weak, "strong attention": self.strong})


def finite_n_rates(
    mu0: Any,
    Sigma0: Any,
    weak: Controls,
    strong: Controls,
    T: float,
    Ns: Sequence[int],
    seeds: int,
    steps: int,
    *,
    seed: int,
    n_boot: int = 2000,
) -> FiniteNRates:
    r""":func:`gtbook.studies.invariance.harness.mean_field_study` for both heads (samples ``0 .. seeds - 1``), the
    slopes' bootstrap standard errors (seeds ``seed``, ``seed + 1``) and that of their difference (``seed + 2``).

    Returns
    -------
    FiniteNRates
    """
    w = mean_field_study(mu0, Sigma0, weak, (0, T), Ns, seeds, steps)
    s = mean_field_study(mu0, Sigma0, strong, (0, T), Ns, seeds, steps)
    return FiniteNRates(
        w,
        s,
        slope_standard_error(Ns, w.errors, n_boot=n_boot, seed=seed),
        slope_standard_error(Ns, s.errors, n_boot=n_boot, seed=seed + 1),
        slope_difference_standard_error(Ns, w.errors, s.errors, n_boot=n_boot, seed=seed + 2),
    )


@dataclass
class LayerMapCheck:
    r"""Twelve residual layers on the tokens against :func:`gtcore.moments.layer_stack`, per layer.

    Attributes
    ----------
    gaussian : (L,) array
        :func:`gtbook.studies.invariance.harness.relative_moment_discrepancy` with the Gaussian attention average on
        the tokens (the same affine algebra: round-off).
    softmax : (L,) array
        The same with softmax attention over the tokens (the sampling error at this N).
    """

    gaussian: np.ndarray
    softmax: np.ndarray

    def figure(self) -> Any:
        """:func:`gtbook.studies.invariance.figures.layer_errors`."""
        return figs.layer_errors(
            {"Gaussian attention on the tokens": self.gaussian, "softmax attention over the tokens": self.softmax}
        )


def layer_map_check(x0: Any, controls: Controls, T: float, n_layers: int) -> LayerMapCheck:
    r"""Move ``x0`` through ``n_layers`` Euler layers of step :math:`T/L`, with the Gaussian attention average
    and with softmax attention, and compare both with the exact layer map from the cloud's moments.

    Returns
    -------
    LayerMapCheck
    """
    h = T / n_layers
    exact = simulate(x0, controls, (0, T), n_layers, method="euler", average="gaussian")
    soft = simulate(x0, controls, (0, T), n_layers, method="euler")
    mus, Sigmas = layer_stack(exact.mu[0], exact.Sigma[0], [controls] * n_layers, h)
    return LayerMapCheck(
        relative_moment_discrepancy(exact.mu, exact.Sigma, mus, Sigmas)[1:],
        relative_moment_discrepancy(soft.mu, soft.Sigma, mus, Sigmas)[1:],
    )


@dataclass
class StackRates:
    r"""The softmax stack against the exact layer map as N grows (``stack_rates``).

    Attributes
    ----------
    gaussian, uniform : StackStudy
        Gaussian tokens, and tokens uniform on a box with the same two moments (the control).
    se : float
        Bootstrap standard error of the Gaussian slope.
    """

    gaussian: StackStudy
    uniform: StackStudy
    se: float

    @property
    def band(self) -> tuple[float, float]:
        r"""The claim's band :math:`-\tfrac12 \pm 3\,\mathrm{SE}`."""
        return -0.5 - 3 * self.se, -0.5 + 3 * self.se

    def figure(self) -> Any:
        """:func:`gtbook.studies.invariance.figures.stack_error_against_n`."""
        return figs.stack_error_against_n(
            {"Gaussian tokens": self.gaussian, "uniform tokens, same moments (control)": self.uniform}
        )

    def table(self) -> dict[str, Any]:
        """The slopes and the band."""
        return dict(
            gaussian_slope=round(self.gaussian.slope, 3),
            bootstrap_se=round(self.se, 3),
            band=tuple(round(x, 3) for x in self.band),
            uniform_slope=round(self.uniform.slope, 3),
        )


def stack_rates(
    mu0: Any,
    Sigma0: Any,
    controls: Controls,
    T: float,
    n_layers: int,
    Ns: Sequence[int],
    seeds: int,
    *,
    seed: int,
    control_seeds: int = 8,
    n_boot: int = 2000,
) -> StackRates:
    r""":func:`gtbook.studies.invariance.nongaussian.softmax_stack_study` on Gaussian tokens (samples ``seed + 100``
    onwards) and on the moment-matched uniform law (``control_seeds`` samples per N, ``seed + 200`` onwards); the
    Gaussian slope's bootstrap standard error (seed ``seed``).

    Returns
    -------
    StackRates
    """
    g = softmax_stack_study(mu0, Sigma0, controls, T, n_layers, Ns, seeds, law="gaussian", seed=seed + 100)
    u = softmax_stack_study(mu0, Sigma0, controls, T, n_layers, Ns, control_seeds, law="uniform", seed=seed + 200)
    return StackRates(g, u, slope_standard_error(g.Ns, g.errors, n_boot=n_boot, seed=seed))


@dataclass
class GaussianityStudy:
    r"""The cloud's Gaussianity over time against the noise band (``gaussianity_study``).

    Attributes
    ----------
    t : (k,) array
        The recorded times.
    flows : dict label -> dict statistic -> (k,) array
        ``"B_mid (κ = ...)"`` and ``"B_strong (κ = ...)"``.
    floors : dict statistic -> NoiseFloor
    level : float
    controls : dict law -> dict statistic -> float
        Moment-matched non-Gaussian clouds (uniform, Student-t, a two-component mixture).
    relu_w2 : float
        The sliced :math:`W_2` at T of the first flow plus a ReLU block.
    sides : dict label -> Sides
        Per flow of ``flows``: the library functions that moved its tokens (observed) and that made the sliced
        :math:`W_2` noise floor of Gaussian samples it is compared with (predicted); the statistic on the cloud
        is the comparison (:mod:`gtbook.studies.traced`).
    """

    t: np.ndarray
    flows: dict[str, dict[str, np.ndarray]]
    floors: dict[str, NoiseFloor]
    level: float
    controls: dict[str, dict[str, float]]
    relu_w2: float
    sides: dict[str, Sides] = field(default_factory=dict)

    @property
    def bands(self) -> dict[str, tuple[float, float]]:
        """Each statistic's band at ``level``."""
        return {k: f.band(self.level) for k, f in self.floors.items()}

    def figure(self) -> Any:
        """:func:`gtbook.studies.invariance.figures.statistics_with_controls`."""
        return figs.statistics_with_controls(list(self.t), self.flows, self.bands, self.controls, self.level)

    def table(self) -> dict[str, Any]:
        """Per statistic: its band, the first flow's largest value and the second flow's value at T; the ReLU flow."""
        first, second = self.flows.values()
        return {
            name: dict(
                band=tuple(round(x, 4) for x in band),
                B_mid_max=round(float(first[name].max()), 4),
                B_strong_at_T=round(float(second[name][-1]), 4),
            )
            for name, band in self.bands.items()
        } | {"B_mid + ReLU block: sliced W2 at T": round(self.relu_w2, 4)}


def gaussianity_study(
    x0: Any,
    mu0: Any,
    Sigma0: Any,
    heads: Mapping[str, Controls],
    T: float,
    steps: int,
    *,
    noise_repeats: int,
    seed: int,
    record_times: int = 11,
    level: float = 0.99,
    student_dof: float = 5.0,
    mixture_separation: float = 0.9,
    relu_gain: float = 0.5,
) -> GaussianityStudy:
    r"""Move ``x0`` through each layer of ``heads`` (``steps`` RK4 steps, ``record_times`` recorded times) and
    track its sliced :math:`W_2` (projections seeded ``seed``) and Mardia kurtosis; their noise floors at the
    cloud's size (``noise_repeats`` Gaussian samples, seed ``seed + 1``); three moment-matched non-Gaussian clouds
    (seeds ``seed + 3, + 4, + 5``); and the first layer plus a ReLU block of gain ``relu_gain`` through
    :math:`\mu_0`.

    Returns
    -------
    GaussianityStudy
    """
    n, d = np.asarray(x0).shape
    every = steps // (record_times - 1)
    flows: dict[str, dict[str, np.ndarray]] = {}
    observed_by: dict[str, Sides] = {}
    t = np.empty(0)
    for label, ctl in heads.items():
        with collect() as flow_sides, observed():
            tracked = simulate(x0, ctl, (0, T), steps, keep_tokens=True, record_every=every)
        assert tracked.tokens is not None  # keep_tokens=True
        ode = integrate_moments(mu0, Sigma0, ctl, (0, T), t_eval=tracked.t)
        kappa = max_sampling_strength(ctl, ode.t, ode.Sigma)
        key = f"{label} (κ = {kappa:.2f})"
        flows[key] = {
            "sliced W2": np.array([sliced_w2(x, seed=seed) for x in tracked.tokens]),
            "Mardia kurtosis": np.array([mardia_kurtosis(x) for x in tracked.tokens]),
        }
        observed_by[key] = flow_sides
        t = tracked.t
    with collect() as floor_sides, predicted():
        w2_floor = noise_floor(lambda z: sliced_w2(z, seed=seed), n, d, repeats=noise_repeats, seed=seed + 1)
    floors = {
        "sliced W2": w2_floor,
        "Mardia kurtosis": noise_floor(mardia_kurtosis, n, d, repeats=noise_repeats, seed=seed + 1),
    }
    clouds = {
        "uniform": moment_matched_tokens("uniform", n, mu0, Sigma0, seed + 3),
        f"Student-t ({student_dof:g} dof)": moment_matched_tokens(
            "student_t", n, mu0, Sigma0, seed + 4, dof=student_dof
        ),
        "two-component mixture": moment_matched_tokens(
            "mixture", n, mu0, Sigma0, seed + 5, separation=mixture_separation
        ),
    }
    controls = {
        law: {"sliced W2": sliced_w2(x, seed=seed), "Mardia kurtosis": mardia_kurtosis(x)} for law, x in clouds.items()
    }
    first = next(iter(heads.values()))
    relu = simulate(
        x0, relu_variant(first, mu0, relu_gain), (0, T), steps, ff="relu", keep_tokens=True, record_every=steps
    )
    assert relu.tokens is not None  # keep_tokens=True
    return GaussianityStudy(
        t,
        flows,
        floors,
        float(level),
        controls,
        sliced_w2(relu.tokens[-1], seed=seed),
        {k: v.with_prediction(floor_sides) for k, v in observed_by.items()},
    )


@dataclass
class EnsembleStudy:
    r"""The reduction and the invariance over two ensembles of general layers (``ensemble_study``).

    Attributes
    ----------
    draws, weak_draws : list of GeneralDraw
        The first ensemble (the reduction) and the second, with weaker attention (the invariance).
    census, weak_census : DrawCensus
        Every draw the generator made for each ensemble, kept or not, and why.
    gauss, uniform : EnsembleStack
        The first ensemble's stacks, Gaussian and uniform tokens.
    weak_gauss, weak_uniform : EnsembleStack
        The second ensemble's.
    se, weak_se, affine_se : float
        Bootstrap standard errors: the first ensemble's moment-error slope, the second's non-affine slope, the
        first's non-affine slope (a finding).
    flow, relu : (draws,) arrays
        Each draw's sliced :math:`W_2` at T after the flow, and with a ReLU block (a finding).
    null : (R,) array
        The sliced :math:`W_2` of R Gaussian samples of the same size.
    null_quantile : float
        The ``level`` quantile of the null's mean over ``draws`` values.
    sides, weak_sides : Sides
        The traced sides of the two ensembles' Gaussian stacks
        (:class:`~gtbook.studies.invariance.nongaussian.StackStudy`, draw by draw): the tokens drawn and moved
        (observed), the exact layer maps (predicted).
    """

    draws: list[GeneralDraw]
    weak_draws: list[GeneralDraw]
    census: DrawCensus
    weak_census: DrawCensus
    gauss: EnsembleStack
    uniform: EnsembleStack
    weak_gauss: EnsembleStack
    weak_uniform: EnsembleStack
    se: float
    weak_se: float
    affine_se: float
    flow: np.ndarray
    relu: np.ndarray
    null: np.ndarray
    null_quantile: float
    sides: Sides = field(default_factory=Sides.empty)
    weak_sides: Sides = field(default_factory=Sides.empty)

    @property
    def nonaffine_sides(self) -> Sides:
        r"""The second ensemble's observed side against a prediction that runs no library code: the non-affine
        residual is measured against the best affine fit, and its rate :math:`N^{-1/2}` is the prediction."""
        return no_prediction(self.weak_sides)

    def figure(self) -> Any:
        """:func:`gtbook.studies.invariance.figures.ensemble_figure`."""
        return figs.ensemble_figure(
            self.gauss,
            self.uniform,
            self.weak_gauss,
            self.weak_uniform,
            self.flow,
            self.relu,
            self.null,
            self.null_quantile,
        )

    def summary(self) -> dict[str, float]:
        """The numbers the chapter's prose quotes, by their glue names."""
        return dict(
            ens_slope=self.gauss.slope,
            ens_se=self.se,
            ens_uniform_slope=self.uniform.slope,
            ens_kappa_max=max(dr.kappa_max for dr in self.draws),
            aff_slope=self.weak_gauss.nonaffine_slope,
            aff_se=self.weak_se,
            aff_uniform_slope=self.weak_uniform.nonaffine_slope,
            aff_kappa_max=max(dr.kappa_max for dr in self.weak_draws),
            ens_affine_slope=self.gauss.nonaffine_slope,
            ens_affine_se=self.affine_se,
            ens_flow_mean=float(self.flow.mean()),
            ens_relu_mean=float(self.relu.mean()),
            ens_worst_draw=float(self.flow.max()),
            ens_null_mean=float(self.null.mean()),
            ens_null_sd=float(self.null.std(ddof=1)),
            ens_q=self.null_quantile,
        )


def ensemble_study(
    n_draws: int,
    d: int,
    T: float,
    n_layers: int,
    Ns: Sequence[int],
    seeds: int,
    n_tokens: int,
    *,
    seeds_of: Mapping[str, int],
    kappa: float = 0.25,
    kappa_cap: float = 0.45,
    weak_kappa: float = 0.1,
    weak_cap: float = 0.2,
    control_seeds: int = 2,
    steps: int = 10,
    null_repeats: int = 400,
    relu_gain: float = 0.5,
    level: float = 0.99,
    n_boot: int = 2000,
) -> EnsembleStudy:
    r"""The chapter's ensembles (:mod:`gtbook.studies.invariance.ensemble`): ``n_draws`` general layers in dimension
    ``d`` at :math:`\kappa_0` = ``kappa`` (kept while :math:`\kappa <` ``kappa_cap`` along the moment ODE) and a
    second ensemble at ``weak_kappa`` / ``weak_cap``; the softmax stack of ``n_layers`` layers on each, Gaussian
    (``seeds`` samples per N) and uniform (``control_seeds``); the sliced :math:`W_2` of each first-ensemble draw's
    cloud of ``n_tokens`` after ``steps`` RK4 steps, with and without a ReLU block, and its null.

    ``seeds_of`` names the seeds: ``ens_draw``, ``ens_stack``, ``ens_flow``, ``ens_null``, ``ens_boot``,
    ``aff_draw``, ``aff_stack``, ``aff_boot``.

    Returns
    -------
    EnsembleStudy
    """
    s = seeds_of
    ens = general_draws(n_draws, d, T=T, seed=s["ens_draw"], kappa=kappa)
    with collect() as ens_sides:  # stack_ensemble marks each cloud (observed) and its layer map (predicted)
        gauss = stack_ensemble(ens, T, n_layers, Ns, seeds, seed=s["ens_stack"])
    uniform = stack_ensemble(ens, T, n_layers, Ns, control_seeds, law="uniform", seed=s["ens_stack"])
    aff = general_draws(n_draws, d, T=T, seed=s["aff_draw"], kappa=weak_kappa, kappa_cap=weak_cap)
    with collect() as aff_sides:
        aff_gauss = stack_ensemble(aff, T, n_layers, Ns, seeds, seed=s["aff_stack"])
    aff_uniform = stack_ensemble(aff, T, n_layers, Ns, control_seeds, law="uniform", seed=s["aff_stack"])
    flow = gaussianity_ensemble(ens, T, steps, n_tokens, seed=s["ens_flow"])
    relu = gaussianity_ensemble(ens, T, steps, n_tokens, relu=True, gain=relu_gain, seed=s["ens_flow"])
    null = noise_floor("sliced_w2", n_tokens, d, repeats=null_repeats, seed=s["ens_null"]).values
    return EnsembleStudy(
        ens,
        aff,
        draw_census(ens, n_draws, d, T=T, seed=s["ens_draw"], kappa=kappa, kappa_cap=kappa_cap),
        draw_census(aff, n_draws, d, T=T, seed=s["aff_draw"], kappa=weak_kappa, kappa_cap=weak_cap),
        gauss,
        uniform,
        aff_gauss,
        aff_uniform,
        gauss.slope_standard_error(n_boot=n_boot, seed=s["ens_boot"]),
        aff_gauss.slope_standard_error("nonaffine", n_boot=n_boot, seed=s["aff_boot"]),
        gauss.slope_standard_error("nonaffine", n_boot=n_boot, seed=s["ens_boot"] + 1),
        flow,
        relu,
        null,
        mean_of_k_quantile(null, n_draws, level, seed=s["ens_null"]),
        ens_sides,
        aff_sides,
    )
