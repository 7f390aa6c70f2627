r"""Chapter 2's computations, one function per section, each returning a result with its table and figures.

* :class:`ReluLayer`: the chapter's layer, one head with :math:`V = -vI`, :math:`B = \beta I` and the block
  :math:`W\sigma(x + c)`, :math:`c = c_0\mathbf 1`, bias :math:`b = -Wc + b_{\rm drift}` (so that with the identity
  activation the layer is :math:`x \mapsto Wx + b_{\rm drift} + \text{attention}` whatever :math:`c_0`);
* ``relu_sweep``: the identity-activation run and one ReLU run per kink offset, tracked in time
  (:func:`gtbook.studies.beyond.harness.track_gaussianity`), with the noise floors of their statistics;
* ``prediction_null``: Hotelling's test of independent clouds against their own moment ODE
  (:func:`gtbook.studies.nulls.flow_deviations`), with the near misses;
* ``departure_rates``: the ReLU runs' short-time departure rate against its closed form
  (:func:`gtcore.relu.relu_departure_rate`) and the spread of the sample rate;
* ``mixture_study``: a two-component mixture with the input's moments, and a single Gaussian split by the
  same labels, through the identity-activation layer;
* ``statistic_checks``: the book's statistics against exact values (:mod:`gtbook.studies.beyond.exact_statistics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from gtbook.studies.beyond import figures as figs
from gtbook.studies.beyond.exact_statistics import (
    ExactCheck,
    band_coverage,
    mardia_student_t,
    mixture_attention_error,
    per_label_band_coverage,
    sliced_w2_mixture,
)
from gtbook.studies.beyond.harness import GaussianityPath, noise_floors, time_within, track_gaussianity
from gtbook.studies.nulls import flow_deviations
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore import Controls, integrate_moments
from gtcore.particles import simulate
from gtcore.relu import moment_departure, relu_departure_rate, relu_departure_rate_spread
from gtcore.stats.gaussianity import NoiseFloor
from gtcore.stats.inference import HotellingTest, hotelling_test
from gtcore.stats.mixtures import GaussianMixture, LabelledTokens
from gtcore.stats.sampling import moment_matched_tokens

__all__ = [
    "DepartureRates",
    "MixtureStudy",
    "PredictionNull",
    "ReluLayer",
    "ReluSweep",
    "StatisticChecks",
    "departure_rates",
    "mixture_study",
    "prediction_null",
    "relu_sweep",
    "statistic_checks",
]

#: the Gaussianity statistics the chapter tracks
STATS = ("sliced_w2", "mardia_kurtosis_excess")


@dataclass(frozen=True)
class ReluLayer:
    r"""The chapter's layer family (module docstring), :math:`d = 2`, input :math:`N(0, I)`.

    Attributes
    ----------
    v, beta : float
        :math:`V = -vI`, :math:`B = \beta I`.
    W : (2, 2) array
        :math:`W_{\rm ff}`.
    drift : (2,) array
        :math:`b_{\rm drift}`.
    """

    v: float
    beta: float
    W: Any
    drift: Any

    @property
    def d(self) -> int:
        """The dimension (the rows of ``W``)."""
        return int(np.asarray(self.W).shape[0])

    def __call__(self, c0: float) -> Controls:
        """The layer with the kink :math:`c_0` standard deviations from the mean in each coordinate."""
        d, W = self.d, np.asarray(self.W, float)
        c = c0 * np.ones(d)
        return Controls(
            b=-W @ c + np.asarray(self.drift, float),
            V=-self.v * np.eye(d),
            B=self.beta * np.eye(d),
            U=np.eye(d),
            W=W,
            c=c,
        )

    def prediction(self, times: Sequence[float]) -> dict[str, dict[str, Any]]:
        """The Gaussian prediction (moment ODE of the identity-activation layer from :math:`N(0, I)`) at ``times``
        (the first one 0)."""
        d = self.d
        p = integrate_moments(np.zeros(d), np.eye(d), self(0.0), (0, max(times)), t_eval=list(times))
        return {
            f"t={t:g}": dict(mu=m.round(3).tolist(), Sigma=S.round(3).tolist())
            for t, m, S in zip(p.t, p.mu, p.Sigma, strict=True)
        }


@dataclass
class ReluSweep:
    r"""The identity-activation run and the ReLU runs, over log-spaced times (``relu_sweep``).

    Attributes
    ----------
    runs : dict label -> GaussianityPath
        ``"identity"`` and ``"ReLU, c0=..."``.
    floors : dict statistic -> NoiseFloor
    level : float
        The band's level.
    tolerance : float
        A reference level of the prediction error (shown, not claimed).
    floor_sides : Sides
        The library functions that made the noise floors (their predicted side: Gaussian samples and the statistics
        on them).
    """

    runs: dict[str, GaussianityPath]
    floors: dict[str, NoiseFloor]
    level: float
    tolerance: float
    floor_sides: Sides = field(default_factory=Sides.empty)

    def sides(self, label: str) -> Sides:
        """The run ``label`` (its tokens: observed) against the noise floors (predicted)."""
        return self.runs[label].sides.with_prediction(self.floor_sides)

    @property
    def band_top(self) -> float:
        """The top of the sliced :math:`W_2` band."""
        return float(self.floors["sliced_w2"].band(self.level)[1])

    def table(self) -> dict[str, dict[str, float]]:
        """Per run: both statistics at T, the last time in the band and within the tolerance, the prediction
        error at T."""
        hi = self.band_top
        return {
            k: dict(
                sliced_w2_at_T=round(float(r.statistics["sliced_w2"][-1]), 4),
                kurtosis_excess_at_T=round(float(r.statistics["mardia_kurtosis_excess"][-1]), 4),
                last_time_in_band=round(time_within(r.t, r.statistics["sliced_w2"], hi), 4),
                last_time_within_tolerance=round(time_within(r.t, r.prediction_error, self.tolerance), 4),
                prediction_error_at_T=round(float(r.prediction_error[-1]), 4),
            )
            for k, r in self.runs.items()
        }

    def gaussianity_figure(self) -> Any:
        """:func:`gtbook.studies.beyond.figures.relu_gaussianity`."""
        return figs.relu_gaussianity(self.runs, self.floors, level=self.level)

    def prediction_figure(self) -> Any:
        """:func:`gtbook.studies.beyond.figures.prediction_error`."""
        return figs.prediction_error(self.runs, self.tolerance, tol_label="reference level")


def relu_sweep(
    layer: ReluLayer,
    x0: Any,
    offsets: Sequence[float],
    times: Sequence[float],
    *,
    max_step: float,
    noise_repeats: int,
    seed: int,
    level: float = 0.99,
    tolerance: float = 0.05,
) -> ReluSweep:
    r"""Move ``x0`` through the identity-activation layer and through the ReLU layer of each offset, tracking both
    statistics at ``times``; the noise floors at the cloud's size from ``noise_repeats`` Gaussian samples
    (seed ``seed``).

    Returns
    -------
    ReluSweep
    """
    runs = {"identity": track_gaussianity(x0, layer(0.0), times, ff="identity", max_step=max_step)}
    for c0 in offsets:
        runs[f"ReLU, c0={c0:g}"] = track_gaussianity(x0, layer(c0), times, ff="relu", max_step=max_step)
    with collect() as floor_sides, predicted():
        floors = noise_floors(STATS, np.asarray(x0).shape[0], layer.d, repeats=noise_repeats, seed=seed)
    return ReluSweep(runs, floors, float(level), float(tolerance), floor_sides)


@dataclass
class PredictionNull:
    r"""Hotelling's test of R clouds' deviations from a moment ODE started at their own moments
    (``prediction_null``).

    Attributes
    ----------
    tests : dict name -> HotellingTest
        ``"identity ODE"`` (the reproduction), ``"ODE with g V"`` (a gain error in the prediction) and
        ``"ReLU c0=..."`` (ReLU clouds against the identity-activation ODE).
    gain_error : float
    sides : dict name -> Sides
        Per test: the library functions that moved its clouds (observed) and that integrated the moment ODEs they
        are measured against (predicted).
    """

    tests: dict[str, HotellingTest]
    gain_error: float
    sides: dict[str, Sides] = field(default_factory=dict)

    @property
    def gain_key(self) -> str:
        """The name of the gain-error test."""
        return f"ODE with {self.gain_error:g} V"

    def table(self) -> dict[str, dict[str, Any]]:
        """Per test: :math:`T^2` over its quantile, the p-value, the mean deviation and its standard error."""
        return {
            k: dict(
                T2_over_threshold=round(t.ratio, 3),
                p_value=float(f"{t.p_value:.2g}"),
                mean_deviation=t.mean.round(5).tolist(),
                standard_error=t.standard_error.round(5).tolist(),
            )
            for k, t in self.tests.items()
        }


def prediction_null(
    layer: ReluLayer,
    offsets: Sequence[float],
    T: float,
    *,
    n_tokens: int,
    clouds: int,
    steps: int,
    gain_error: float,
    seed: int,
    level: float = 0.99,
) -> PredictionNull:
    r"""``clouds`` clouds of ``n_tokens`` tokens from :math:`N(0, I)` (seeds ``seed + s``) through the
    identity-activation layer, against its moment ODE and the ODE with :math:`V \to` ``gain_error`` :math:`V`;
    and the same clouds through each ReLU layer against the identity-activation ODE
    (:func:`gtbook.studies.nulls.flow_deviations`, ``steps`` RK4 steps over :math:`[0, T]`); Hotelling's test of
    each at ``level``.

    Returns
    -------
    PredictionNull
    """
    d = layer.d
    ident = layer(0.0)
    assert ident.U is not None  # the chapter's layer has a block
    wrong_gain = Controls(b=ident.b, V=gain_error * ident.V[0], B=ident.B[0], U=ident.U, W=ident.W, c=ident.c)
    with collect() as ident_sides:
        dev = flow_deviations(
            ident,
            np.zeros(d),
            np.eye(d),
            T,
            n_tokens,
            clouds,
            steps,
            predictions={"identity ODE": ident, f"ODE with {gain_error:g} V": wrong_gain},
            seed=seed,
        )
    sides = dict.fromkeys(dev, ident_sides)
    for c0 in offsets:
        with collect() as sides[f"ReLU c0={c0:g}"]:
            dev[f"ReLU c0={c0:g}"] = flow_deviations(
                layer(c0),
                np.zeros(d),
                np.eye(d),
                T,
                n_tokens,
                clouds,
                steps,
                predictions={"identity ODE": layer(c0)},
                ff="relu",
                seed=seed,
            )["identity ODE"]
    return PredictionNull({k: hotelling_test(v, level) for k, v in dev.items()}, float(gain_error), sides)


@dataclass
class DepartureRates:
    r"""The ReLU runs' short-time departure rate against the closed form (``departure_rates``).

    Attributes
    ----------
    rates : dict c0 -> dict
        ``closed`` (:func:`gtcore.relu.relu_departure_rate`), ``D`` (the departure over time), ``measured``
        (:math:`D(t_1)/t_1`) and ``band`` (the ``level`` band of the sample rate over the closed form).
    t : (T,) array
        The recorded times.
    sample_rates : list of (R,) arrays
        The sample rate of R Gaussian clouds of the run's size, per offset.
    uniform_ratio : float
        The uniform control's rate over the Gaussian closed form at ``uniform_c0``.
    uniform_c0 : float
    z_by_c0 : dict c0 -> float
        Mean sample rate minus the closed form, in standard errors of the mean, where a cloud has on average at
        least ``min_beyond`` tokens beyond the kink.
    min_beyond : int
    """

    rates: dict[float, dict[str, Any]]
    t: np.ndarray
    sample_rates: list[np.ndarray]
    uniform_ratio: float
    uniform_c0: float
    z_by_c0: dict[float, float]
    min_beyond: int

    @property
    def closed_z(self) -> float:
        """The largest :math:`|z|` of ``z_by_c0``."""
        return max(abs(z) for z in self.z_by_c0.values())

    @property
    def uniform_excursion(self) -> float:
        """How far the uniform control's ratio lies outside the band at ``uniform_c0`` (positive: outside)."""
        lo, hi = self.rates[self.uniform_c0]["band"]
        return float(max(self.uniform_ratio - hi, lo - self.uniform_ratio))

    def table(self) -> dict[str, Any]:
        """Per offset: closed form, measured rate, their ratio and the band; the uniform control; :math:`z`."""
        out: dict[str, Any] = {
            f"c0={c0:g}": dict(
                closed_form=round(r["closed"], 5),
                measured=round(r["measured"], 5),
                ratio=round(float(r["measured"] / r["closed"]), 3),
                band=tuple(round(x, 3) for x in r["band"]),
            )
            for c0, r in self.rates.items()
        }
        out[f"uniform, c0={self.uniform_c0:g}: ratio"] = round(self.uniform_ratio, 3)
        out["z of the mean sample rate"] = {f"c0={c0:g}": round(z, 2) for c0, z in self.z_by_c0.items()}
        return out

    def figure(self) -> Any:
        """:func:`gtbook.studies.beyond.figures.relu_departure_rates`."""
        return figs.relu_departure_rates(self.t, self.rates)


def departure_rates(
    layer: ReluLayer,
    sweep: ReluSweep,
    offsets: Sequence[float],
    *,
    repeats: int,
    seed: int,
    max_step: float,
    level: float = 0.99,
    uniform_c0: float = 2.0,
    min_beyond: int = 50,
) -> DepartureRates:
    r"""The measured short-time rate :math:`D(t_1)/t_1` of each ReLU run of ``sweep`` against the closed form, the
    sample rate's spread over ``repeats`` Gaussian clouds of the run's size (seed ``seed``), the uniform control
    (tokens uniform on a box with moments :math:`(0, I)`, seed ``seed + 1``, at ``uniform_c0``, RK4 steps of at
    most ``max_step`` to the first recorded time) and the mean
    sample rate against the closed form where :math:`N\Phi(-c_0) \ge` ``min_beyond``.

    Returns
    -------
    DepartureRates
    """
    d = layer.d
    ident = sweep.runs["identity"]
    n = ident.final_tokens.shape[0]
    samples = relu_departure_rate_spread([layer(c0) for c0 in offsets], n, repeats, seed=seed)
    rates: dict[float, dict[str, Any]] = {}
    for c0, spread in zip(offsets, samples, strict=True):
        closed = relu_departure_rate(np.zeros(d), np.eye(d), layer(c0))
        path = sweep.runs[f"ReLU, c0={c0:g}"]
        D = moment_departure(path.mu, path.Sigma, ident.mu, ident.Sigma)
        rates[c0] = dict(
            closed=closed,
            D=D,
            measured=float(D[1] / path.t[1]),
            band=NoiseFloor(values=spread / closed, n=n, d=d).band(level),
        )
    x_uniform = moment_matched_tokens("uniform", n, np.zeros(d), np.eye(d), seed + 1)
    t1 = [float(ident.t[1])]
    u_relu = simulate(x_uniform, layer(uniform_c0), (0.0, t1[-1]), t_eval=t1, max_step=max_step, ff="relu")
    u_id = simulate(x_uniform, layer(uniform_c0), (0.0, t1[-1]), t_eval=t1, max_step=max_step, ff="identity")
    uniform_ratio = float(
        moment_departure(u_relu.mu, u_relu.Sigma, u_id.mu, u_id.Sigma)[1] / t1[0] / rates[uniform_c0]["closed"]
    )
    z_by_c0 = {
        c0: float((s.mean() - rates[c0]["closed"]) / (s.std(ddof=1) / np.sqrt(s.size)))
        for c0, s in zip(offsets, samples, strict=True)
        if n * norm.cdf(-c0) >= min_beyond
    }
    return DepartureRates(rates, ident.t, list(samples), uniform_ratio, float(uniform_c0), z_by_c0, int(min_beyond))


@dataclass
class MixtureStudy:
    r"""A two-component mixture and a single Gaussian split by the same labels, through one layer
    (``mixture_study``).

    Attributes
    ----------
    mixture : GaussianMixture
    sample : LabelledTokens
        The mixture's tokens and labels.
    run, control : GaussianityPath
        Per-label statistics of the mixture and of the control.
    floors : dict statistic -> list of NoiseFloor
        One per label, at the label's size.
    level : float
    sides : Sides
        The library functions that drew the mixture's tokens and moved them (observed) and that made the per-label
        noise floors (predicted: Gaussian samples of each label's size and the statistics on them).
    """

    mixture: GaussianMixture
    sample: LabelledTokens
    run: GaussianityPath
    control: GaussianityPath
    floors: dict[str, list[NoiseFloor]]
    level: float
    sides: Sides = field(default_factory=Sides.empty)

    @property
    def tops(self) -> np.ndarray:
        """The top of each label's sliced :math:`W_2` band."""
        return np.array([f.band(self.level)[1] for f in self.floors["sliced_w2"]])

    @property
    def min_ratio_at_T(self) -> float:
        """The smallest ratio, over components, of the mixture's sliced :math:`W_2` at T to its band's top."""
        return float((self.run.statistics["sliced_w2"][-1] / self.tops).min())

    @property
    def control_max_ratio(self) -> float:
        """The largest ratio, over times and labels, of the control's sliced :math:`W_2` to its band's top."""
        return float((self.control.statistics["sliced_w2"] / self.tops).max())

    def figure(self) -> Any:
        """:func:`gtbook.studies.beyond.figures.mixture_gaussianity`."""
        return figs.mixture_gaussianity(self.run, self.control, self.floors, self.sample.labels, level=self.level)

    def attention_figure(self, B: Any) -> Any:
        """:func:`gtbook.studies.beyond.figures.mixture_attention` against query-key matrix ``B``."""
        return figs.mixture_attention(self.mixture, B)


def mixture_study(
    layer: Controls,
    x0: Any,
    times: Sequence[float],
    *,
    separation: float,
    weights: Sequence[float],
    max_step: float,
    noise_repeats: int,
    seed: int,
    level: float = 0.99,
) -> MixtureStudy:
    r"""The mixture :math:`\sum_k w_k N((\pm m, 0), \operatorname{diag}(1 - m^2, 1))` (moments :math:`(0, I)`),
    sampled with ``seed``, and the Gaussian tokens ``x0`` split by its labels, through ``layer`` (identity
    activation) at ``times``; each label's noise floor at its size (seed ``seed + 1``).

    Returns
    -------
    MixtureStudy
    """
    m = float(separation)
    x0 = np.asarray(x0, float)
    mixture = GaussianMixture(list(weights), [[-m, 0.0], [m, 0.0]], [np.diag([1 - m**2, 1.0])] * 2)
    with collect() as run_sides:
        with observed():
            sample = mixture.sample(x0.shape[0], seed=seed)
        run = track_gaussianity(sample.tokens, layer, times, labels=sample.labels, max_step=max_step)
    control = track_gaussianity(x0, layer, times, labels=sample.labels, max_step=max_step)
    with collect() as floor_sides, predicted():
        floors = noise_floors(
            STATS, x0.shape[0], x0.shape[1], labels=sample.labels, repeats=noise_repeats, seed=seed + 1
        )
    return MixtureStudy(mixture, sample, run, control, floors, float(level), run_sides.with_prediction(floor_sides))


@dataclass
class StatisticChecks:
    r"""The book's statistics against exact values (``statistic_checks``).

    Attributes
    ----------
    mardia : ExactCheck
        Mardia's excess of an affine Student :math:`t_\nu` against :math:`2/(\nu - 4)`.
    sliced : dict name -> ExactCheck
        Squared sliced :math:`W_2` of two affine images of a two-Gaussian mixture against its quadrature value.
    coverage : ExactCheck
        The 99% band's coverage of fresh Gaussian samples.
    labels : list of ExactCheck
        Each mixture component's band's coverage of fresh samples of its size.
    quadrature_error : float
        The mixture attention average against Gauss–Hermite quadrature (relative).
    sizes : dict
        The sizes used.
    """

    mardia: ExactCheck
    sliced: dict[str, ExactCheck]
    coverage: ExactCheck
    labels: list[ExactCheck]
    quadrature_error: float
    sizes: dict[str, Any] = field(default_factory=dict)

    @property
    def sliced_worst(self) -> ExactCheck:
        """The affine image further from the exact value."""
        return max(self.sliced.values(), key=lambda e: abs(e.z))


def statistic_checks(
    labels: Any,
    *,
    separation: float,
    seed: int,
    level: float = 0.99,
    label_d: int = 2,
    t_nu: float = 12,
    t_tokens: int = 20000,
    t_repeats: int = 20,
    sw_tokens: int = 20000,
    sw_projections: int = 512,
    cover_tokens: int = 50,
    cover_repeats: int = 10000,
    cover_fresh: int = 10000,
    label_repeats: int = 1000,
    label_fresh: int = 1000,
    quad_nodes: int = 32,
) -> StatisticChecks:
    r"""Each statistic against an answer computed without it (:mod:`gtbook.studies.beyond.exact_statistics`):
    Mardia's excess of an affine Student :math:`t_\nu` in :math:`d = 3` (seed ``seed``), the sliced :math:`W_2` of
    a mixture of separation ``separation`` (``seed + 1``), the band's coverage in :math:`d = 3` (``seed + 2``),
    the mixture attention average against quadrature (``seed + 3``), and each label's band (``labels``, in
    dimension ``label_d``; ``seed + 4``).

    Returns
    -------
    StatisticChecks
    """
    sizes = dict(
        t_nu=t_nu,
        t_tokens=t_tokens,
        t_repeats=t_repeats,
        sw_tokens=sw_tokens,
        sw_projections=sw_projections,
        cover_tokens=cover_tokens,
        cover_repeats=cover_repeats,
        cover_fresh=cover_fresh,
        label_repeats=label_repeats,
        label_fresh=label_fresh,
        quad_nodes=quad_nodes,
    )
    return StatisticChecks(
        mardia=mardia_student_t(t_nu, t_tokens, t_repeats, 3, seed=seed),
        sliced=sliced_w2_mixture(separation, sw_tokens, sw_projections, seed=seed + 1),
        coverage=band_coverage(
            "mardia_kurtosis_excess", cover_tokens, 3, level, cover_repeats, cover_fresh, seed=seed + 2
        ),
        labels=per_label_band_coverage(
            "mardia_kurtosis_excess", labels, label_d, level, label_repeats, label_fresh, seed=seed + 4
        ),
        quadrature_error=mixture_attention_error(seed + 3, nodes=quad_nodes),
        sizes=sizes,
    )
