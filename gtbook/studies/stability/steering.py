r"""Mean steering on finite-N tokens over general draws with a feed-forward block, against the Gaussian null.

The statement: in a stabilising regime the bias

.. math::

    b = -\big(A + WU + V + V\Sigma^*B\big)\,\mu_{\text{target}} - Wc

(:func:`gtcore.stability.bias_for_mean_target`; the feed-forward block :math:`W(Ux + c)` with the identity
activation folds into :math:`A + WU` and :math:`b + Wc`) makes :math:`\mu_{\text{target}}` the asymptotic mean.
On the moment ODE the target is the fixed point of the mean equation by construction (the bias is that
equation solved backwards). The **independent side** here is a cloud of :math:`N` tokens moved by
:func:`gtcore.particles.simulate`: every token feels the softmax average over the other tokens and its own
feed-forward :math:`W(Ux_i + c)`; no Gaussian formula, no :func:`~gtcore.stability.mean_matrix` and no fold
enters its motion. If the tilt :math:`\mu + \Sigma Bx`, the equilibrium or the fold were wrong, the cloud's
mean would settle elsewhere.

**The draws** (:func:`steering_draws`): the ``"general"`` stabilising draws of
:mod:`gtbook.studies.stability.ensembles` (:math:`V` negative definite and non-symmetric, :math:`B` with a
positive-definite symmetric part, :math:`A` anti-stable and non-normal, :math:`\Sigma_0` Wishart) with
:math:`V` and :math:`\Sigma_0` rescaled, :math:`V \to 3V`, :math:`\Sigma_0 \to \Sigma_0/3`: the same dynamics
(:math:`\Sigma(t) \to \Sigma(t)/3` solves eq. (1.1) with :math:`3V`, so every outcome is the ensemble's), with a
cloud narrower relative to :math:`B`, so that the sampling strength :math:`\kappa = \lambda_{\max}(B^\top\Sigma^*
B\Sigma^*)` is below :math:`\tfrac12` in most draws (the softmax average of a finite cloud has finite variance
only there: chapter 1); and with the linear part split as :math:`A = A_0 + WU` (:math:`U` of shape
:math:`m \times d`, :math:`W` of shape :math:`d \times m`, :math:`m = 4`, :math:`c \ne 0`), :math:`\mu_0,
\mu_{\text{target}} \sim N(0, I)`. Every
draw is counted: one without a positive-definite equilibrium
(:func:`~gtbook.studies.stability.ensembles.classify_outcome`) is outside the statement's hypothesis, one whose mean
matrix at :math:`\Sigma^*` is not Hurwitz cannot be
steered (a counterexample on the moment ODE); the others are *steered*.

**The statistic** (:func:`hotelling`). For the cloud's mean :math:`\hat\mu` and covariance :math:`\hat\Sigma`
at :math:`T`, :math:`D = N(\hat\mu - \mu_{\text{target}})^\top\hat\Sigma^{-1}(\hat\mu - \mu_{\text{target}})`.
For :math:`N` tokens drawn i.i.d. from a Gaussian with mean :math:`\mu_{\text{target}}` (the null: a cloud that
*is* at the target, with the same :math:`N`), :math:`\tfrac{N - d}{d(N - 1)}D \sim F(d, N - d)` (Hotelling);
:math:`q_{99}` is its 99 % quantile. A cloud that moved under the dynamics also carries the dynamics' own
finite-N error, so the band is a multiple of the null's quantile fixed before the run (the chapter says
which). The **control** is the bias without the attention's tilt term, :math:`-(A + WU + V)\mu_{\text{target}}
- Wc` (what a wrong tilt, or a steering rule that ignores attention, would give): it must fall outside the
same band.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from gtbook.studies.stability.ensembles import ConditionDraw, Outcome, _draw, classify_outcome
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.particles import simulate
from gtcore.stability import bias_for_mean_target, mean_matrix
from gtcore.stats.inference import wilson_interval
from gtcore.stats.sampling import gaussian_tokens

__all__ = [
    "Steerable",
    "SteeringDraw",
    "SteeringStudy",
    "hotelling",
    "null_quantile",
    "steering_draws",
    "steering_study",
]


class Steerable:
    """Why a draw is or is not steered (the counts of :class:`SteeringStudy`)."""

    STEERED = "steered"
    NO_EQUILIBRIUM = "no positive-definite equilibrium"
    NOT_HURWITZ = "mean matrix not Hurwitz"


@dataclass(frozen=True)
class SteeringDraw:
    r"""One draw: controls with the feed-forward block, what it is, and for a steered draw its biases.

    Attributes
    ----------
    index : int
    status : str
        A :class:`Steerable` value.
    outcome : Outcome
        The covariance's outcome on eq. (1.1).
    controls : Controls
        :math:`(A_0, V, B, U, W, c)` and, when steered, the bias :math:`b`.
    wrong_controls : Controls or None
        The same with the control's bias.
    Sigma0, mu0, mu_target : arrays
    Sigma_star : array or None
    rate : float
        Minus the spectral abscissa of the mean matrix at :math:`\Sigma^*` (nan without an equilibrium).
    kappa : float
        The sampling strength at :math:`\Sigma^*` (nan without one).
    T : float
        The tokens' horizon.
    """

    index: int
    status: str
    outcome: Outcome
    controls: Controls
    wrong_controls: Controls | None
    Sigma0: np.ndarray
    mu0: np.ndarray
    mu_target: np.ndarray
    Sigma_star: np.ndarray | None
    rate: float
    kappa: float
    T: float

    def __repr__(self) -> str:
        return f"SteeringDraw(#{self.index}: {self.status}, rate={self.rate:.3g}, kappa={self.kappa:.3g})"


def steering_draws(
    n: int, d: int, *, seed: int, v_scale: float = 3.0, width: int = 4, relax: float = 8.0, t_cap: float = 40.0
) -> list[SteeringDraw]:
    r"""``n`` draws of the module docstring, every one classified and none discarded.

    Parameters
    ----------
    n, d : int
        Draws and dimension.
    seed : int
    v_scale : float
        :math:`V` is the ensemble's times ``v_scale`` (module docstring).
    width : int
        The feed-forward width :math:`m`.
    relax : float
        The tokens run ``relax`` relaxation times of the mean: :math:`T = \text{relax}/\text{mean rate}`,
        capped at ``t_cap`` (the initial offset has shrunk by :math:`e^{-8} \approx 3\cdot10^{-4}`).
    t_cap : float
        The longest horizon.

    Returns
    -------
    list of SteeringDraw
    """
    rng = np.random.default_rng([seed, 7])
    out = []
    for i in range(n):
        A, V, B, S0 = _draw(rng, d, "general", -1.0, 0.3)
        V = v_scale * V
        S0 = S0 / v_scale
        U = rng.standard_normal((width, d)) / np.sqrt(d)
        W = 0.5 * rng.standard_normal((d, width)) / np.sqrt(width)
        c = 0.5 * rng.standard_normal(width)
        mu0, mu_target = rng.standard_normal(d), rng.standard_normal(d)
        base = Controls(A=A - W @ U, V=V, B=B, U=U, W=W, c=c)
        cl = classify_outcome(ConditionDraw(i, "general", "stabilising", base, S0))
        if cl.outcome is not Outcome.EQUILIBRIUM or cl.Sigma_star is None:
            out.append(
                SteeringDraw(
                    i,
                    Steerable.NO_EQUILIBRIUM,
                    cl.outcome,
                    base,
                    None,
                    S0,
                    mu0,
                    mu_target,
                    None,
                    float("nan"),
                    float("nan"),
                    float("nan"),
                )
            )
            continue
        Ss = cl.Sigma_star
        rate = -float(np.linalg.eigvals(mean_matrix(base, Ss)).real.max())
        kappa = float(max_sampling_strength(base, [0.0], [Ss]))
        if rate <= 0:
            out.append(
                SteeringDraw(
                    i, Steerable.NOT_HURWITZ, cl.outcome, base, None, S0, mu0, mu_target, Ss, rate, kappa, float("nan")
                )
            )
            continue
        b = bias_for_mean_target(base, Ss, mu_target)
        b_wrong = -(base.affine_A + V) @ mu_target - W @ c
        T = float(min(t_cap, relax / rate))
        steered = Controls(A=A - W @ U, b=b, V=V, B=B, U=U, W=W, c=c)
        wrong = Controls(A=A - W @ U, b=b_wrong, V=V, B=B, U=U, W=W, c=c)
        out.append(
            SteeringDraw(i, Steerable.STEERED, cl.outcome, steered, wrong, S0, mu0, mu_target, Ss, rate, kappa, T)
        )
    return out


def hotelling(mu_hat: np.ndarray, Sigma_hat: np.ndarray, mu: np.ndarray, N: int) -> float:
    r""":math:`D = N(\hat\mu - \mu)^\top\hat\Sigma^{-1}(\hat\mu - \mu)` (module docstring).

    Parameters
    ----------
    mu_hat, Sigma_hat : arrays
        The cloud's mean and (1/N) covariance.
    mu : array
        The target.
    N : int
        Tokens.

    Returns
    -------
    float
    """
    e = np.asarray(mu_hat, float) - np.asarray(mu, float)
    return float(N * e @ np.linalg.solve(np.asarray(Sigma_hat, float), e))


def null_quantile(N: int, d: int, q: float = 0.99) -> float:
    r"""The ``q`` quantile of :func:`hotelling`'s :math:`D` for :math:`N` i.i.d. Gaussian tokens at the target.

    Hotelling's :math:`T^2 = N(\hat\mu - \mu)^\top S^{-1}(\hat\mu - \mu)` uses the unbiased covariance
    :math:`S = \tfrac{N}{N-1}\hat\Sigma`, so :math:`D = \tfrac{N}{N-1}T^2`, and
    :math:`\tfrac{N-d}{d(N-1)}T^2 \sim F(d, N-d)`: :math:`D_q = \tfrac{Nd}{N-d}F_q(d, N-d)`.

    Parameters
    ----------
    N, d : int
    q : float

    Returns
    -------
    float
    """
    t2 = d * (N - 1) / (N - d) * float(stats.f.ppf(q, d, N - d))
    return N / (N - 1) * t2


@dataclass
class SteeringStudy:
    r"""Mean steering on tokens over the draws of :func:`steering_draws`.

    Attributes
    ----------
    draws : list of SteeringDraw
    N : int
    seeds : int
    D, D_wrong : (steered, seeds) arrays
        The statistic for the steering bias and for the control's.
    q99 : float
        The null's 99 % quantile at this N.
    band : float
        The band's multiple of ``q99`` (fixed by the caller before the run).
    null_D : (null_clouds,) array
        The statistic on clouds drawn i.i.d. from the Gaussian at the target with the same N (the null, simulated).
    sides : Sides
        The traced sides of :attr:`within` (:mod:`gtbook.studies.traced`): the token runs under the steering bias
        (observed); the null's quantile :math:`q_{99}` (predicted: Hotelling's law, computed by the book with SciPy,
        so it runs no library code). The statistic is the comparison.
    """

    draws: list[SteeringDraw]
    N: int
    seeds: int
    D: np.ndarray
    D_wrong: np.ndarray
    q99: float
    band: float
    null_D: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def steered(self) -> list[SteeringDraw]:
        """The steered draws, in order."""
        return [dr for dr in self.draws if dr.status == Steerable.STEERED]

    def count(self, status: str) -> int:
        """Draws with this :class:`Steerable` status."""
        return sum(dr.status == status for dr in self.draws)

    @property
    def within(self) -> np.ndarray:
        """Per steered draw: whether the seed-median of D is inside the band."""
        return np.median(self.D, axis=1) < self.band * self.q99

    @property
    def wrong_within(self) -> np.ndarray:
        """Per steered draw: whether the control's seed-median of D is inside the band."""
        return np.median(self.D_wrong, axis=1) < self.band * self.q99

    def fraction_within(self) -> tuple[float, float, float]:
        """(fraction, Wilson low, Wilson high) of the steered draws inside the band."""
        k, n = int(self.within.sum()), len(self.steered)
        lo, hi = wilson_interval(k, n)
        return k / n, lo, hi

    @property
    def null_exceed(self) -> float:
        """Fraction of the simulated null clouds above ``q99`` (calibration: about 0.01)."""
        return float(np.mean(self.null_D > self.q99))

    def __repr__(self) -> str:
        n = len(self.draws)
        return (
            f"SteeringStudy(draws={n}, steered={len(self.steered)}, N={self.N}, seeds={self.seeds}, "
            f"within band={int(self.within.sum())}, control within band={int(self.wrong_within.sum())})"
        )


def _cloud(dr: SteeringDraw, ctl: Controls, N: int, seed: int, step: float) -> tuple[np.ndarray, np.ndarray]:
    x0 = gaussian_tokens(N, dr.mu0, dr.Sigma_star, seed)
    steps = int(np.ceil(dr.T / step))
    run = simulate(x0, ctl, (0.0, dr.T), steps, record_every=steps, device="cpu")
    return run.mu[-1], run.Sigma[-1]


def steering_study(
    draws: list[SteeringDraw], N: int, *, seeds: int, seed: int, band: float, step: float = 0.1, null_clouds: int = 400
) -> SteeringStudy:
    r"""Move ``seeds`` clouds of ``N`` tokens per steered draw with the steering bias and with the control's.

    Cloud ``s`` of draw ``k`` starts from :math:`N(\mu_0, \Sigma^*)` (the covariance at its equilibrium: only
    the mean has to travel) with seed ``seed + 1000 k + s`` (the
    same tokens for the bias and the control). RK4 with a step of about ``step``.

    Parameters
    ----------
    draws : list of SteeringDraw
    N, seeds, seed : int
    band : float
        The band is ``band * q99``.
    step : float
    null_clouds : int
        Clouds drawn i.i.d. from :math:`N(\mu_{\text{target}}, \Sigma^*)` of the first steered draw (the
        simulated null, a calibration of :func:`null_quantile`).

    Returns
    -------
    SteeringStudy
    """
    steered = [dr for dr in draws if dr.status == Steerable.STEERED]
    D = np.empty((len(steered), seeds))
    Dw = np.empty_like(D)
    with collect() as sides:
        for k, dr in enumerate(steered):
            assert dr.wrong_controls is not None  # a steered draw has both biases
            for s in range(seeds):
                sd = seed + 1000 * dr.index + s
                with observed():
                    cloud = _cloud(dr, dr.controls, N, sd, step)
                D[k, s] = hotelling(*cloud, dr.mu_target, N)
                Dw[k, s] = hotelling(*_cloud(dr, dr.wrong_controls, N, sd, step), dr.mu_target, N)
        d = draws[0].controls.d
        with predicted():
            q99 = null_quantile(N, d)
    null = np.zeros(0)
    if steered and null_clouds:
        dr = steered[0]
        assert dr.Sigma_star is not None
        vals = []
        for j in range(null_clouds):
            x = gaussian_tokens(N, dr.mu_target, dr.Sigma_star, seed + 7_000_000 + j)
            vals.append(hotelling(x.mean(axis=0), np.cov(x.T, bias=True), dr.mu_target, N))
        null = np.array(vals)
    return SteeringStudy(draws, N, seeds, D, Dw, q99, band, null, sides)
