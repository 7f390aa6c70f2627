r"""The studies of chapter 7, one per section, each returning a result with its table and figure.

* :func:`invariance_study` (section a): one layer for the dot product, L2 and Sinkhorn attention; token
  clouds against each type's moment ODE, the near misses of that ODE and the other types' ODEs, through
  Hotelling's test on the signed deviations of independent clouds (:mod:`gtbook.studies.nulls`); for
  Sinkhorn, the decay in :math:`N` of the clouds' covariance deviation
  (:func:`~gtbook.studies.families.harness.deviation_decay`);
* :func:`asymptotics_study` (section b): the layer that makes the dot product blow up, under each type's
  moment ODE (blow-up time, growth rates, Grönwall bounds) and, for L2 and Sinkhorn, token clouds past the
  dot product's :math:`t^*`;
* :func:`heads_study` (section c): several L2 heads, their summed ODE and growth rate, and opposite heads
  that cancel.

The computations are those of :mod:`gtbook.studies.families.harness` and :mod:`gtbook.studies.nulls`; this
module only fixes the chapter's design (which clouds, which seeds, which predictions) in one place. The
design constants (:data:`NULL_LEVEL`, :data:`GAIN_ERROR`, :data:`EXTRAPOLATION_RATIO`, :data:`RATE_WINDOW`)
were fixed before the chapter ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.families.harness import (
    DeviationDecay,
    FamilyRun,
    deviation_decay,
    growth_bound_excess,
    growth_rate,
    head_cancellation,
    moment_discrepancy,
    near_misses,
    noise_floor,
    predicted_rate,
    run_family,
)
from gtbook.studies.nulls import extrapolated_flow_deviations, flow_deviations
from gtbook.studies.scoping import layer_scope
from gtbook.studies.traced import Sides, collect
from gtcore.controls import Controls
from gtcore.moments import MomentTrajectory, integrate_moments
from gtcore.stats.inference import HotellingTest, hotelling_test

__all__ = [
    "DECAY_SEED",
    "EXTRAPOLATION_RATIO",
    "GAIN_ERROR",
    "NULL_LEVEL",
    "NULL_SEED",
    "RATE_WINDOW",
    "TYPES",
    "AsymptoticsStudy",
    "HeadsStudy",
    "InvarianceStudy",
    "asymptotics_study",
    "families_layer",
    "heads_study",
    "invariance_study",
]

#: the attention types compared
TYPES = ("dot", "l2", "sinkhorn")
#: the quantile of Hotelling's null used as each test's threshold
NULL_LEVEL = 0.99
#: the near miss "attention term x 1.1": every V_h scaled by this gain
GAIN_ERROR = 1.1
#: Sinkhorn's extrapolated test: clouds of N and N / this ratio tokens
EXTRAPOLATION_RATIO = 3
#: the growth rate is the slope of log lambda_max over this last stretch of time
RATE_WINDOW = 1.0
#: the finite-N tests' clouds take their seeds from ``seed + NULL_SEED`` on, the decay in N's from
#: ``seed + DECAY_SEED`` on: seeds no other cloud of the chapter uses
NULL_SEED = 2271
DECAY_SEED = 22271

_J = np.array([[0.0, -1.0], [1.0, 0.0]])
_I2 = np.eye(2)


def _ratios(tests: Mapping[str, HotellingTest]) -> dict[str, float]:
    return {k: round(t.ratio, 3) for k, t in tests.items()}


def _markdown(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def _null_tests(
    controls: Controls,
    mu0: Any,
    Sigma0: Any,
    T: float,
    n_tokens: int,
    seeds: int,
    steps: int,
    predictions: Mapping[str, Controls],
    seed: int,
    *,
    extrapolate: bool,
) -> tuple[dict[str, HotellingTest], float | None]:
    """Hotelling's test of every prediction on ``seeds`` clouds; with ``extrapolate`` the covariance part
    with the 1/N bias extrapolated out, and the plain test's ratio at ``n_tokens`` for the own ODE."""
    if extrapolate:
        dev, plain = extrapolated_flow_deviations(
            controls,
            mu0,
            Sigma0,
            T,
            n_tokens,
            seeds,
            steps,
            predictions=predictions,
            ratio=EXTRAPOLATION_RATIO,
            seed=seed,
        )
        plain_ratio = hotelling_test(plain["own ODE"], NULL_LEVEL).ratio
    else:
        dev = flow_deviations(
            controls, mu0, Sigma0, T, n_tokens, seeds, steps, predictions=predictions, seed=seed, kernel_dtype=None
        )
        plain_ratio = None
    return {k: hotelling_test(v, NULL_LEVEL) for k, v in dev.items()}, plain_ratio


def families_layer(omega_A: float, v: float, omega_V: float, Q: Any, K: Any) -> dict[str, Controls]:
    r"""Section (a)'s layer for each type: :math:`A = \omega_AJ`, :math:`V = vI + \omega_VJ` and the same
    :math:`Q, K` (:math:`B = K^\top Q` for the dot product and Sinkhorn).

    Parameters
    ----------
    omega_A, v, omega_V : float
    Q, K : (2, 2) arrays

    Returns
    -------
    dict type -> Controls
    """
    return {name: Controls(A=omega_A * _J, V=v * _I2 + omega_V * _J, Q=Q, K=K, attention=name) for name in TYPES}


@dataclass
class InvarianceStudy:
    """Section (a): tokens against the moment ODE, per type.

    Attributes
    ----------
    controls : type -> the layer
    runs : type -> :class:`~gtbook.studies.families.harness.FamilyRun` (tokens and ODE side by side)
    D : (3, 3) array
        :func:`~gtbook.studies.families.harness.moment_discrepancy` of each type's tokens (rows) against each
        type's ODE (columns) at the last time.
    floors : the 99th percentile of D for as many i.i.d. Gaussian tokens, per type
    tests : type -> prediction -> HotellingTest (for Sinkhorn: the extrapolated, covariance-only test)
    sinkhorn_plain : the plain test's ratio for Sinkhorn's own ODE at the larger cloud size
    decay : prediction -> DeviationDecay of Sinkhorn's clouds
    sides : "type or "decay" -> the traced sides of that test (:mod:`gtbook.studies.traced`): the tokens (observed),
        every moment ODE the clouds are tested against from their own moments (predicted)
    """

    controls: dict[str, Controls]
    runs: dict[str, FamilyRun]
    D: np.ndarray
    floors: list[float]
    tests: dict[str, dict[str, HotellingTest]]
    sinkhorn_plain: float
    decay: dict[str, DeviationDecay]
    sides: dict[str, Sides] = field(default_factory=dict)

    def table(self) -> str:
        """Markdown: per type, D against its floor, then T^2 over its 99 % quantile for every prediction."""
        preds = list(dict.fromkeys(k for t in self.tests.values() for k in t if not k.endswith(" ODE")))
        head = [
            "tokens",
            "D (own ODE)",
            "floor",
            "T²/q₉₉ own ODE",
            *[f"T²/q₉₉ {p}" for p in preds],
            "T²/q₉₉ other types (smallest)",
        ]
        rows = []
        for i, name in enumerate(TYPES):
            t = self.tests[name]
            others = min(v.ratio for k, v in t.items() if k.endswith(" ODE") and k != "own ODE")
            own = f"{t['own ODE'].ratio:.3g}" + (f" (plain {self.sinkhorn_plain:.3g})" if name == "sinkhorn" else "")
            rows.append(
                [
                    name,
                    f"{self.D[i, i]:.3g}",
                    f"{self.floors[i]:.3g}",
                    own,
                    *[f"{t[p].ratio:.3g}" if p in t else "" for p in preds],
                    f"{others:.3g}",
                ]
            )
        return _markdown(head, rows)

    def scope(self, name: str, system: str = "tokens") -> dict[str, Any]:
        """The claim scope of one type's layer (:func:`gtbook.studies.scoping.layer_scope`)."""
        return layer_scope([self.controls[name]], system=system)

    def clouds_figure(self):
        """Each type's tokens at the last time inside its ODE's ellipses."""
        from gtbook.studies.families.figures import clouds_by_type

        return clouds_by_type(self.runs)

    def __repr__(self) -> str:
        return f"InvarianceStudy({', '.join(f'{k}: {v}' for k, v in self.summary().items())})"

    def summary(self) -> dict[str, dict[str, float]]:
        """Each type's T^2 ratios, rounded."""
        return {name: _ratios(t) for name, t in self.tests.items()}


def invariance_study(
    controls: Mapping[str, Controls],
    mu0: Any,
    Sigma0: Any,
    t_end: float,
    *,
    n_tokens: int,
    steps: int,
    noise_repeats: int,
    null_tokens: int,
    null_seeds: int,
    decay_Ns: Sequence[int],
    seed: int,
) -> InvarianceStudy:
    r"""Section (a) of chapter 7 (module docstring).

    Parameters
    ----------
    controls : type -> layer (:func:`families_layer`)
    mu0, Sigma0 : the input Gaussian
    t_end : float
        The horizon :math:`T`.
    n_tokens, steps : int
        One cloud per type for the figure and D (``seed``), RK4 steps over :math:`[0, T]`.
    noise_repeats : int
        Samples of the fresh-sample floor of D (seeds from 100).
    null_tokens, null_seeds : int
        The tests' clouds: ``null_seeds`` clouds of ``null_tokens`` tokens (seeds ``seed +`` :data:`NULL_SEED`
        ``+ 100 i + s`` for the i-th type).
    decay_Ns : sequence of int
        Sinkhorn's cloud sizes for the decay in N (seeds from ``seed +`` ``DECAY_SEED``).
    seed : int

    Returns
    -------
    InvarianceStudy
    """
    mu0, Sigma0 = np.asarray(mu0, float), np.asarray(Sigma0, float)
    null_seed, decay_seed = seed + NULL_SEED, seed + DECAY_SEED
    runs = {name: run_family(controls[name], mu0, Sigma0, t_end, n_tokens, steps, seed=seed) for name in TYPES}
    D = np.array(
        [
            [
                moment_discrepancy(
                    runs[a].particles.mu[-1], runs[a].particles.Sigma[-1], runs[b].ode.mu[-1], runs[b].ode.Sigma[-1]
                )
                for b in TYPES
            ]
            for a in TYPES
        ]
    )
    floors = [noise_floor(runs[a].ode.mu[-1], runs[a].ode.Sigma[-1], n_tokens, noise_repeats, seed=100) for a in TYPES]
    tests, plain, sides = {}, float("nan"), {}
    for i, name in enumerate(TYPES):
        preds = {
            "own ODE": controls[name],
            **near_misses(controls[name], GAIN_ERROR),
            **{f"{other} ODE": controls[other] for other in TYPES if other != name},
        }
        with collect() as sides[name]:
            tests[name], p = _null_tests(
                controls[name],
                mu0,
                Sigma0,
                t_end,
                null_tokens,
                null_seeds,
                steps,
                preds,
                null_seed + 100 * i,
                extrapolate=name == "sinkhorn",
            )
        plain = plain if p is None else p
    sk = controls["sinkhorn"]
    with collect() as sides["decay"]:
        decay = deviation_decay(
            sk,
            mu0,
            Sigma0,
            t_end,
            decay_Ns,
            null_seeds,
            steps,
            predictions={"own ODE": sk, **near_misses(sk, GAIN_ERROR)},
            seed=decay_seed,
        )
    return InvarianceStudy(dict(controls), runs, D, floors, tests, plain, decay, sides)


@dataclass
class AsymptoticsStudy:
    r"""Section (b): the layer :math:`A = 0`, :math:`V = K = I`, symmetric positive-definite :math:`Q`.

    Attributes
    ----------
    controls : type -> the layer
    t_star : the dot product's closed-form blow-up time
    long : type -> the moment ODE from :math:`\Sigma_0 = I` on :math:`[0, t_{\text{long}}]`
    predicted, fitted : "l2"/"sinkhorn" -> the predicted asymptotic rate, the fitted slope of
        :math:`\log\lambda_{\max}` over the last :data:`RATE_WINDOW`
    bound_excess : "l2"/"sinkhorn" -> the largest excess of :math:`\log\lambda_{\max}` over its Grönwall bound
    runs : "l2"/"sinkhorn" -> tokens and ODE up to ``horizon`` :math:`\times t^*`
    tests : "l2"/"sinkhorn" -> prediction -> HotellingTest (Sinkhorn: extrapolated, covariance only)
    sinkhorn_plain : the plain test's ratio for Sinkhorn's own ODE
    decay : prediction -> DeviationDecay of Sinkhorn's clouds
    sides : "l2"/"sinkhorn" or "decay" -> the traced sides of that test (:mod:`gtbook.studies.traced`): the
        tokens (observed), every moment ODE the clouds are tested against from their own moments (predicted)
    """

    controls: dict[str, Controls]
    t_star: float
    long: dict[str, MomentTrajectory]
    predicted: dict[str, float]
    fitted: dict[str, float]
    bound_excess: dict[str, float]
    runs: dict[str, FamilyRun]
    tests: dict[str, dict[str, HotellingTest]]
    sinkhorn_plain: float
    decay: dict[str, DeviationDecay] = field(default_factory=dict)
    sides: dict[str, Sides] = field(default_factory=dict)

    def table(self) -> str:
        """Markdown: per bounded type, the predicted and fitted rates, the bound's excess and the T^2 ratios."""
        preds = list(dict.fromkeys(k for t in self.tests.values() for k in t))
        head = ["type", "predicted rate", "fitted rate", "Grönwall excess", *[f"T²/q₉₉ {p}" for p in preds]]
        rows = [
            [
                name,
                f"{self.predicted[name]:.4f}",
                f"{self.fitted[name]:.4f}",
                f"{self.bound_excess[name]:.2g}",
                *[f"{self.tests[name][p].ratio:.3g}" if p in self.tests[name] else "" for p in preds],
            ]
            for name in self.predicted
        ]
        return _markdown(head, rows)

    def scope(self, name: str, system: str = "moment ODE") -> dict[str, Any]:
        """The claim scope of one type's layer (:func:`gtbook.studies.scoping.layer_scope`)."""
        return layer_scope([self.controls[name]], system=system)

    def finite(self, name: str) -> bool:
        """Whether the type's moment ODE reached ``t_long`` with a finite covariance throughout."""
        tr = self.long[name]
        return tr.status == "completed" and bool(np.all(np.isfinite(tr.Sigma)))

    def figure(self):
        r""":math:`\log\lambda_{\max}(\Sigma(t))` per type, with the tokens and the predicted slopes."""
        from gtbook.studies.families.figures import growth_curves

        return growth_curves(
            self.long, self.t_star, self.predicted, particles={k: v.particles for k, v in self.runs.items()}
        )

    def __repr__(self) -> str:
        return (
            f"AsymptoticsStudy(t*={self.t_star:.4g}, fitted={ {k: round(v, 4) for k, v in self.fitted.items()} }, "
            f"tests={ {k: _ratios(t) for k, t in self.tests.items()} })"
        )


def asymptotics_study(
    Q: Any,
    *,
    t_long: float,
    horizon: float,
    n_tokens: int,
    steps: int,
    null_tokens: int,
    null_seeds: int,
    decay_Ns: Sequence[int],
    seed: int,
    n_grid: int = 321,
) -> AsymptoticsStudy:
    r"""Section (b) of chapter 7 (module docstring).

    Parameters
    ----------
    Q : (2, 2) symmetric positive-definite array
        The queries (:math:`K = I`, so :math:`B = Q`).
    t_long : float
        The moment ODEs' horizon.
    horizon : float
        The tokens run to ``horizon`` times the dot product's :math:`t^*`.
    n_tokens, steps : int
        One cloud per bounded type for the figure (seed ``seed + 1``) and RK4 steps.
    null_tokens, null_seeds : int
        The tests' clouds (seeds ``seed +`` :data:`NULL_SEED` ``+ 1000 + 100 i + s``).
    decay_Ns : sequence of int
        Sinkhorn's cloud sizes for the decay in N (seeds from ``seed +`` ``DECAY_SEED`` ``+ 10000``).
    seed : int
    n_grid : int
        Points of the ODEs' output grid.

    Returns
    -------
    AsymptoticsStudy
    """
    from gtcore.riccati import blowup_time

    Q = np.asarray(Q, float)
    null_seed, decay_seed = seed + NULL_SEED, seed + DECAY_SEED
    ctl = {name: Controls(V=_I2, Q=Q, K=_I2, attention=name) for name in TYPES}
    t_star = blowup_time(_I2, ctl["dot"]).t_star
    grid = np.linspace(0.0, t_long, n_grid)
    long = {name: integrate_moments(np.zeros(2), _I2, ctl[name], (0.0, t_long), t_eval=grid) for name in TYPES}
    bounded = ("l2", "sinkhorn")
    predicted = {name: predicted_rate(ctl[name]) for name in bounded}
    fitted = {name: growth_rate(long[name], RATE_WINDOW) for name in bounded}
    # Grönwall: ||Sigma(t)||_2 <= ||Sigma_0||_2 exp(rate t), rate 2 ||V|| ||K^-1 Q|| for L2 and 2 (||A|| + ||V||)
    # for Sinkhorn (here V = K = I, A = 0)
    bounds = {"l2": 2 * np.linalg.norm(np.linalg.solve(_I2, Q), 2), "sinkhorn": 2.0}
    excess = {name: growth_bound_excess(long[name], bounds[name]) for name in bounded}
    t_tok = horizon * t_star
    runs = {name: run_family(ctl[name], np.zeros(2), _I2, t_tok, n_tokens, steps, seed=seed + 1) for name in bounded}
    tests, plain, sides = {}, float("nan"), {}
    scaled = f"attention term x {GAIN_ERROR:g}"
    for i, (name, other) in enumerate((("l2", "sinkhorn"), ("sinkhorn", "l2"))):
        preds = {
            "own ODE": ctl[name],
            "attention-free ODE": Controls(A=np.zeros((2, 2))),
            scaled: near_misses(ctl[name], GAIN_ERROR)[scaled],
            f"{other} ODE": ctl[other],
        }
        with collect() as sides[name]:
            tests[name], p = _null_tests(
                ctl[name],
                np.zeros(2),
                _I2,
                t_tok,
                null_tokens,
                null_seeds,
                steps,
                preds,
                null_seed + 1000 + 100 * i,
                extrapolate=name == "sinkhorn",
            )
        plain = plain if p is None else p
    with collect() as sides["decay"]:
        decay = deviation_decay(
            ctl["sinkhorn"],
            np.zeros(2),
            _I2,
            t_tok,
            decay_Ns,
            null_seeds,
            steps,
            predictions={
                "own ODE": ctl["sinkhorn"],
                "attention-free": Controls(A=np.zeros((2, 2))),
                scaled: near_misses(ctl["sinkhorn"], GAIN_ERROR)[scaled],
            },
            seed=decay_seed + 10000,
        )
    return AsymptoticsStudy(ctl, float(t_star), long, predicted, fitted, excess, runs, tests, plain, decay, sides)


@dataclass
class HeadsStudy:
    """Section (c): several L2 heads.

    Attributes
    ----------
    controls : the layer with every head
    one_head : the same layer with its first head only
    tests : prediction -> HotellingTest of the clouds
    growth : the layer with the heads' values I/H and queries shifted by the blow-up queries
    predicted, fitted : its predicted and fitted asymptotic rates
    cancel : type -> (moment ODE, tokens) distance of two opposite heads from no attention
    sides : the traced sides of ``tests`` (:mod:`gtbook.studies.traced`): the tokens (observed), every moment ODE
        the clouds are tested against from their own moments (predicted)
    """

    controls: Controls
    one_head: Controls
    tests: dict[str, HotellingTest]
    growth: Controls
    predicted: float
    fitted: float
    cancel: dict[str, tuple[float, float]]
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def scope(self, which: str = "heads", system: str = "tokens") -> dict[str, Any]:
        """The claim scope of the layer with every head (``"heads"``), of the growth layer (``"growth"``), or
        of the opposite heads of every type (``"cancel"``, a special family)."""
        if which == "cancel":
            c = self.controls
            if c.Q is None or c.K is None:
                raise ValueError("controls: the heads layer has no Q, K")
            pairs = [
                Controls(A=c.A, V=[c.V[0], -c.V[0]], Q=[c.Q[0], c.Q[0]], K=[c.K[0], c.K[0]], attention=name)
                for name in TYPES
            ]
            return layer_scope(pairs, system=system, family="two heads (V, Q, K) and (-V, Q, K)")
        return layer_scope([self.growth if which == "growth" else self.controls], system=system)

    def table(self) -> str:
        """Markdown: the T^2 ratios, the rates, and the cancellation per type."""
        rows = [[f"T²/q₉₉ {k}", f"{t.ratio:.3g}"] for k, t in self.tests.items()]
        rows += [["growth rate: predicted / fitted", f"{self.predicted:.4f} / {self.fitted:.4f}"]]
        rows += [[f"opposite heads, {k}: ODE / tokens", f"{o:.2g} / {p:.2g}"] for k, (o, p) in self.cancel.items()]
        return _markdown([f"{self.controls.heads} L2 heads", "value"], rows)

    def __repr__(self) -> str:
        return f"HeadsStudy(tests={_ratios(self.tests)}, rate {self.fitted:.4f} vs {self.predicted:.4f})"


def heads_study(
    n_heads: int,
    scale: float,
    *,
    omega_A: float,
    Q_blow: Any,
    mu0: Any,
    Sigma0: Any,
    t_end: float,
    t_long: float,
    null_tokens: int,
    null_seeds: int,
    steps: int,
    seed: int,
    n_grid: int = 321,
    cancel_tokens: int = 500,
    cancel_steps: int = 10,
) -> HeadsStudy:
    r"""Section (c) of chapter 7 (module docstring).

    ``n_heads`` L2 heads with :math:`Q_h = s G_h`, :math:`K_h = I + s G'_h`, :math:`V_h = -I/2 + s G''_h`
    (:math:`s` = ``scale``, Gaussian :math:`G` from ``np.random.default_rng(seed)``) and :math:`A = \omega_AJ`.
    The clouds (seeds ``seed +`` :data:`NULL_SEED` ``+ 2000 + s``) are tested against the summed ODE, the first
    head's and the two near misses; the growth layer takes :math:`V_h = I/H` and :math:`Q_h + Q_{\text{blow}}`;
    opposite heads :math:`(V_1, Q_1, K_1)`, :math:`(-V_1, Q_1, K_1)` of every type are compared with no attention.

    Parameters
    ----------
    n_heads : int
    scale : float
    omega_A : float
    Q_blow : (2, 2) array
    mu0, Sigma0 : the input Gaussian
    t_end, t_long : float
        The clouds' horizon, and the growth layer's.
    null_tokens, null_seeds, steps : int
    seed : int
    n_grid, cancel_tokens, cancel_steps : int
        The growth ODE's output grid; the tokens and RK4 steps of the cancellation (seed ``seed + 3``).

    Returns
    -------
    HeadsStudy
    """
    from gtcore.stats.sampling import gaussian_tokens

    mu0, Sigma0 = np.asarray(mu0, float), np.asarray(Sigma0, float)
    rng = np.random.default_rng(seed)
    Qh = scale * rng.standard_normal((n_heads, 2, 2))
    Kh = _I2 + scale * rng.standard_normal((n_heads, 2, 2))
    Vh = -0.5 * _I2 + scale * rng.standard_normal((n_heads, 2, 2))
    A = omega_A * _J
    ctl = Controls(A=A, V=Vh, Q=Qh, K=Kh, attention="l2")
    one = Controls(A=A, V=Vh[:1], Q=Qh[:1], K=Kh[:1], attention="l2")
    with collect() as sides:
        dev = flow_deviations(
            ctl,
            mu0,
            Sigma0,
            t_end,
            null_tokens,
            null_seeds,
            steps,
            predictions={"summed ODE": ctl, "one-head ODE": one, **near_misses(ctl, GAIN_ERROR)},
            seed=seed + NULL_SEED + 2000,
            kernel_dtype=None,
        )
    tests = {k: hotelling_test(v, NULL_LEVEL) for k, v in dev.items()}
    growth = Controls(
        V=np.stack([_I2 / n_heads] * n_heads),
        Q=Qh + np.stack([np.asarray(Q_blow, float)] * n_heads),
        K=Kh,
        attention="l2",
    )
    long = integrate_moments(np.zeros(2), _I2, growth, (0.0, t_long), t_eval=np.linspace(0.0, t_long, n_grid))
    x0 = gaussian_tokens(cancel_tokens, mu0, Sigma0, seed=seed + 3)
    cancel = {
        name: head_cancellation(
            Controls(A=A, V=[Vh[0], -Vh[0]], Q=[Qh[0], Qh[0]], K=[Kh[0], Kh[0]], attention=name),
            Controls(A=A),
            mu0,
            Sigma0,
            x0,
            t_end,
            cancel_steps,
        )
        for name in TYPES
    }
    return HeadsStudy(ctl, one, tests, growth, predicted_rate(growth), growth_rate(long, RATE_WINDOW), cancel, sides)
