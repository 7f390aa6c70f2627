r"""Chapter 9 (reachability seen from learning): seeded targets, trained runs, noise floors and slacks.

Every trained run and every noise floor here is a pure function of its arguments (seeds included) and
is cached on disk (``gtbook.cache.disk_cache``): a chapter rerun with the same parameters and the same
``gtcore`` sources reads them back instead of training again.

The statistic throughout is the squared 2-Wasserstein distance :math:`\ell = W_2^2(X, Y)` between N output
tokens and N target tokens (:func:`gtbook.studies.learning.statistics.w2_squared`: the trainer's loss, computed
without the trainer's code), on *fresh* pairs: input tokens the network was not trained on, and a target sample
independent of them. Its noise floor is the same
statistic between two independent N-samples: of the target itself for a same-rank target, and of the
nearest rank-:math:`r` Gaussian :math:`N(\mu_1, P\Sigma_1P)` (:func:`gtcore.training.best_rank_approximation`)
for a target behind the rank wall. The slack of a pair is :math:`\ell - F_r(\hat\Sigma_Y)`, which is
:math:`\ge 0` for every cloud carried by an :math:`r`-dimensional affine subspace
(:func:`gtcore.training.empirical_rank_floor`).

Each result carries its traced sides (:mod:`gtbook.studies.traced`), recorded when it was computed (a result read
back from the disk cache carries the record of the run that computed it): a trained run's observed side is the
training and the trained network on its test inputs, its predicted side the exact floors :math:`F_r(\hat\Sigma_Y)`;
a noise floor's predicted side is the whole floor (the reachable law, its samples, the statistic on them).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gtbook.cache import disk_cache
from gtbook.studies.learning.statistics import w2_squared as book_w2_squared
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._validation import check_count, check_moments
from gtcore.reachability import covariance_rank, steer, steer_min_energy
from gtcore.stats.gaussianity import NoiseFloor
from gtcore.stats.inference import loglog_slope
from gtcore.stats.sampling import gaussian_tokens
from gtcore.training import (
    TrainingResult,
    apply_transformer,
    best_rank_approximation,
    empirical_rank_floor,
    gaussian_energy,
    train_transformer,
)


# ------------------------------------------------------------------------------- targets
@dataclass(frozen=True, eq=False)
class Target:
    r"""A Gaussian target :math:`N(\mu, \Sigma)` of rank ``rank`` (``name`` labels it in figures)."""

    name: str
    mu: np.ndarray
    Sigma: np.ndarray
    rank: int

    @property
    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of :math:`\\Sigma`, largest first."""
        return np.linalg.eigvalsh(self.Sigma)[::-1]

    def __repr__(self) -> str:
        lam = ", ".join(f"{x:.2f}" for x in self.eigenvalues)
        return f"Target({self.name!r}, rank {self.rank}, eigenvalues [{lam}])"


def haar_rotation(d: int, rng: np.random.Generator) -> np.ndarray:
    r"""A rotation :math:`Q \in SO(d)` drawn from the Haar measure (QR of a Gaussian matrix, signs fixed)."""
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    Q = Q * np.sign(np.diag(R))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


def random_targets(
    count: int,
    d: int,
    rank: int,
    *,
    seed: int,
    eigenvalue_range: tuple[float, float] = (0.4, 2.5),
    mean_scale: float = 1.0,
    prefix: str = "",
) -> list[Target]:
    r"""A seeded ensemble of Gaussian targets of rank ``rank`` in dimension ``d``.

    .. math::

        \mu \sim N(0, s^2 I_d), \qquad
        \Sigma = Q_{:, 1:r}\operatorname{diag}(\lambda_1, \dots, \lambda_r)Q_{:, 1:r}^\top,

    :math:`Q` Haar on :math:`SO(d)` (general orientations: no eigenvector along a coordinate axis),
    :math:`\log\lambda_k` uniform on :math:`\log` ``eigenvalue_range``, :math:`s` = ``mean_scale``.

    Returns
    -------
    list of Target, named ``f"{prefix}{k}"``
    """
    count = check_count(count, "count")
    d = check_count(d, "d")
    if isinstance(rank, bool) or int(rank) != rank or not 1 <= rank <= d:
        raise ValueError(f"rank must be an integer in [1, {d}], got {rank!r}")
    lo, hi = (float(x) for x in eigenvalue_range)
    if not 0 < lo <= hi:
        raise ValueError(f"eigenvalue_range must satisfy 0 < low <= high, got {eigenvalue_range!r}")
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        Q = haar_rotation(d, rng)[:, : int(rank)]
        lam = np.exp(rng.uniform(np.log(lo), np.log(hi), int(rank)))
        S = (Q * lam) @ Q.T
        out.append(Target(f"{prefix}{k}", float(mean_scale) * rng.standard_normal(d), 0.5 * (S + S.T), int(rank)))
    return out


def standard_start(d: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The initial Gaussian :math:`N(0, \operatorname{diag}(1, \dots, 1, 0, \dots, 0))` of rank ``rank``."""
    return np.zeros(d), np.diag([1.0] * int(rank) + [0.0] * (int(d) - int(rank)))


# ------------------------------------------------------------------------------- pair statistics
@dataclass
class PairLosses:
    r"""The statistic on independent pairs of N-token samples.

    Attributes
    ----------
    losses : (R,) array
        :math:`\ell_k = W_2^2(X_k, Y_k)`.
    floors : (R,) array
        :math:`F_r(\hat\Sigma_{Y_k})`, the exact floor of an :math:`r`-dimensional cloud against
        :math:`Y_k` (:func:`gtcore.training.empirical_rank_floor`).
    n_tokens, rank : int
        N, and the rank :math:`r` of the floors.
    sides : Sides
        The traced sides of the computation (module docstring).
    """

    losses: np.ndarray
    floors: np.ndarray
    n_tokens: int
    rank: int
    sides: Sides = field(default_factory=Sides.empty)

    @property
    def mean(self) -> float:
        """The mean loss over the pairs."""
        return float(np.mean(self.losses))

    @property
    def slack(self) -> np.ndarray:
        r""":math:`\ell_k - F_r(\hat\Sigma_{Y_k})` per pair (:math:`\ge 0` for a rank-:math:`r` cloud)."""
        return self.losses - self.floors

    def noise_floor(self) -> NoiseFloor:
        """The losses as a :class:`gtcore.stats.gaussianity.NoiseFloor` (its ``band`` and ``contains``)."""
        return NoiseFloor(values=self.losses, n=self.n_tokens, d=0)

    def __repr__(self) -> str:
        return (
            f"PairLosses(N={self.n_tokens}, {self.losses.size} pairs, mean {self.mean:.4g}, "
            f"mean slack over F_{self.rank} {float(np.mean(self.slack)):.4g})"
        )


@disk_cache
def null_losses(
    mu1: np.ndarray, Sigma1: np.ndarray, *, n_tokens: int, rank: int, repeats: int, seed: int, scale: float = 1.0
) -> PairLosses:
    r"""The noise floor: :math:`W_2^2(X', Y')` for ``repeats`` independent pairs of N-samples.

    :math:`Y' \sim N(\mu_1, \Sigma_1)` and :math:`X' \sim N(\mu_1, P\Sigma_1P)`, the nearest Gaussian of rank
    ``rank`` (:func:`gtcore.training.best_rank_approximation`; the target itself when ``rank`` is at
    least :math:`\operatorname{rank}\Sigma_1`): what the best reachable distribution gives on N tokens.
    With ``scale`` :math:`= c \ne 1`, :math:`X' \sim N(\mu_1, c\,P\Sigma_1P)` instead (a narrower or wider
    law, for comparison). The statistic is :func:`gtbook.studies.learning.statistics.w2_squared`. Seeded by
    ``seed``; cached. The whole floor is traced as a predicted side.
    """
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1")
    n, repeats = check_count(n_tokens, "n_tokens", 2), check_count(repeats, "repeats", 2)
    rank = int(rank)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    with collect() as sides, predicted():
        near = (mu1, Sigma1) if rank >= covariance_rank(Sigma1) else best_rank_approximation(mu1, Sigma1, rank)
        near = (near[0], float(scale) * near[1])
        rng = np.random.default_rng(seed)
        losses, floors = np.empty(repeats), np.empty(repeats)
        for k in range(repeats):
            x = gaussian_tokens(n, *near, seed=rng)
            y = gaussian_tokens(n, mu1, Sigma1, seed=rng)
            losses[k] = book_w2_squared(x, y)
            floors[k] = empirical_rank_floor(y, rank)
    return PairLosses(losses=losses, floors=floors, n_tokens=n, rank=rank, sides=sides)


# ------------------------------------------------------------------------------- trained runs
@dataclass
class LearningRun:
    r"""One trained Transformer, tested on fresh pairs (``learning_run``).

    Attributes
    ----------
    training : TrainingResult
        The loss curve, the learned controls and their energy.
    test : PairLosses
        The trained network on ``test_repeats`` fresh pairs (input tokens from the start, an independent
        target sample), floors of the start's rank.
    start_rank : int
    gaussian_energy : float
        :func:`gtcore.training.gaussian_energy` from the start: the energy of the affine velocity the
        layers apply to the Gaussian (attention included).
    seconds : float
        Wall time of the training and the test.
    """

    training: TrainingResult
    test: PairLosses
    start_rank: int
    gaussian_energy: float
    seconds: float

    @property
    def test_loss(self) -> float:
        """The mean test loss :math:`\\bar\\ell`."""
        return self.test.mean

    @property
    def sides(self) -> Sides:
        r"""The training and the network on its test inputs (observed), the exact floors :math:`F_r(\hat\Sigma_Y)`
        of the test targets (predicted)."""
        return self.test.sides

    def __repr__(self) -> str:
        t = self.training
        return (
            f"LearningRun(N={t.n_tokens}, L={t.layers}, attention {'on' if t.attention else 'off'}, "
            f"start rank {self.start_rank}, test loss {self.test_loss:.4g}, energy {t.energy:.4g})"
        )


@disk_cache
def learning_run(
    mu0: np.ndarray,
    Sigma0: np.ndarray,
    mu1: np.ndarray,
    Sigma1: np.ndarray,
    *,
    n_tokens: int,
    layers: int,
    T: float,
    attention: bool,
    steps: int,
    lr: float,
    final_lr: float,
    init_scale: float,
    seed: int,
    test_repeats: int,
    test_seed: int,
) -> LearningRun:
    r"""Train the L-layer Transformer from :math:`N(\mu_0, \Sigma_0)` to :math:`N(\mu_1, \Sigma_1)` on N tokens,
    then test it.

    Training: :func:`gtcore.training.train_transformer` with fresh samples of both at every step.
    Test: ``test_repeats`` pairs drawn with ``test_seed`` (input tokens from the start moved by the trained
    network, an independent N-sample of the target), the statistic
    (:func:`gtbook.studies.learning.statistics.w2_squared`) and the floors of :math:`\operatorname{rank}\Sigma_0`.
    Cached. The training and the network on its test inputs are traced as the observed side, the floors as the
    predicted one; the statistic is the comparison.
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0, "mu0", "Sigma0")
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1", mu0.shape[0])
    n = check_count(n_tokens, "n_tokens", 2)
    repeats = check_count(test_repeats, "test_repeats", 2)
    began = time.perf_counter()
    with collect() as sides:
        with observed():
            result = train_transformer(
                functools.partial(gaussian_tokens, n, mu0, Sigma0),
                functools.partial(gaussian_tokens, n, mu1, Sigma1),
                layers=layers,
                T=T,
                attention=attention,
                steps=steps,
                lr=lr,
                final_lr=final_lr,
                init_scale=init_scale,
                seed=seed,
                target_moments=(mu1, Sigma1),
                progress=False,
            )
        r = covariance_rank(Sigma0)
        rng = np.random.default_rng(test_seed)
        losses, floors = np.empty(repeats), np.empty(repeats)
        for k in range(repeats):
            with observed():
                x = apply_transformer(gaussian_tokens(n, mu0, Sigma0, seed=rng), result.controls, result.h)
            y = gaussian_tokens(n, mu1, Sigma1, seed=rng)
            losses[k] = book_w2_squared(x, y)
            with predicted():
                floors[k] = empirical_rank_floor(y, r)
    return LearningRun(
        training=result,
        test=PairLosses(losses, floors, n, r, sides),
        start_rank=r,
        gaussian_energy=gaussian_energy(result.controls, result.h, mu0, Sigma0),
        seconds=time.perf_counter() - began,
    )


@dataclass(frozen=True)
class TrainingSettings:
    """The optimisation's settings shared by every run of the chapter (see ``learning_run``)."""

    layers: int = 8
    T: float = 1.0
    steps: int = 150
    lr: float = 0.05
    final_lr: float = 5e-4
    init_scale: float = 0.1
    test_repeats: int = 32


def run_for(
    target: Target,
    start_rank: int,
    n_tokens: int,
    settings: TrainingSettings,
    *,
    seed: int,
    attention: bool = True,
    layers: int | None = None,
) -> LearningRun:
    """``learning_run`` from :func:`standard_start` of ``start_rank`` to ``target`` (test pairs seeded by
    ``seed + 7919``)."""
    mu0, Sigma0 = standard_start(target.mu.shape[0], start_rank)
    return learning_run(
        mu0,
        Sigma0,
        target.mu,
        target.Sigma,
        n_tokens=int(n_tokens),
        layers=int(settings.layers if layers is None else layers),
        T=settings.T,
        attention=bool(attention),
        steps=settings.steps,
        lr=settings.lr,
        final_lr=settings.final_lr,
        init_scale=settings.init_scale,
        seed=int(seed),
        test_repeats=settings.test_repeats,
        test_seed=int(seed) + 7919,
    )


def output_tokens(run: LearningRun, n_tokens: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, outputs)``: ``n_tokens`` fresh tokens from the run's start (seeded) and the trained network's
    output."""
    t = run.training
    d = t.controls[0].d
    x0 = gaussian_tokens(check_count(n_tokens, "n_tokens", 2), *standard_start(d, run.start_rank), seed=seed)
    return x0, apply_transformer(x0, t.controls, t.h)


# ------------------------------------------------------------------------------- energies
@dataclass
class EnergyComparison:
    r"""Energies :math:`\int_0^T\|A\|_F^2 + \|b\|^2dt` of controls that reach one target.

    Attributes
    ----------
    learned : float
        The trained layers' :math:`h\sum_l\|A_l\|_F^2 + \|b_l\|^2` (attention on).
    learned_gaussian : float
        The energy of the affine velocity those layers apply to the Gaussian (attention folded in).
    learned_no_attention : float
        The trained layers' energy with :math:`V = 0`.
    constructive, min_energy : float
        :func:`gtcore.reachability.steer` and :func:`gtcore.reachability.steer_min_energy` (``pieces`` equal pieces)
        to the reached Gaussian: the target, or its nearest Gaussian of the start's rank behind the wall.
    min_energy_error : float
        The minimum-energy controls' endpoint error.
    """

    learned: float
    learned_gaussian: float
    learned_no_attention: float
    constructive: float
    min_energy: float
    min_energy_error: float


@disk_cache
def steering_energies(
    mu0: np.ndarray, Sigma0: np.ndarray, mu1: np.ndarray, Sigma1: np.ndarray, *, T: float, pieces: int
) -> tuple[float, float, float]:
    r"""``(constructive, minimum, endpoint error)`` energies of chapter 3's controls from
    :math:`(\mu_0, \Sigma_0)` to the target, or to its nearest Gaussian of rank
    :math:`\operatorname{rank}\Sigma_0` when the ranks differ. Cached."""
    r0 = covariance_rank(Sigma0)
    if covariance_rank(Sigma1) != r0:
        mu1, Sigma1 = best_rank_approximation(mu1, Sigma1, r0)
    constructive = steer(mu0, Sigma0, mu1, Sigma1, T)
    best = steer_min_energy(mu0, Sigma0, mu1, Sigma1, T, pieces=pieces)
    return constructive.energy(), best.energy, best.endpoint_error


def energy_comparison(
    target: Target, start_rank: int, run: LearningRun, run_no_attention: LearningRun, *, pieces: int
) -> EnergyComparison:
    """The :class:`EnergyComparison` for one target: trained runs against chapter 3's controls."""
    mu0, Sigma0 = standard_start(target.mu.shape[0], start_rank)
    constructive, minimum, err = steering_energies(
        mu0, Sigma0, target.mu, target.Sigma, T=run.training.T, pieces=int(pieces)
    )
    return EnergyComparison(
        learned=run.training.energy,
        learned_gaussian=run.gaussian_energy,
        learned_no_attention=run_no_attention.training.energy,
        constructive=constructive,
        min_energy=minimum,
        min_energy_error=err,
    )


# ------------------------------------------------------------------------------- slopes
@dataclass
class SlackSlope:
    r"""The log–log slope of the mean slack against N, with its bootstrap standard error.

    Attributes
    ----------
    n_tokens : (m,) array
    mean_slack : (m,) array
        Mean over pairs of :math:`\ell - F_r(\hat\Sigma_Y)` at each N.
    slope : float
        Least-squares slope of :math:`\log` ``mean_slack`` against :math:`\log N`.
    boot : (n_boot,) array
        The slope on pairs resampled with replacement at each N.
    """

    n_tokens: np.ndarray
    mean_slack: np.ndarray
    slope: float
    boot: np.ndarray

    @property
    def se(self) -> float:
        """Bootstrap standard error of the slope."""
        return float(np.std(self.boot, ddof=1))

    def __repr__(self) -> str:
        return f"SlackSlope(slope {self.slope:.3f} +- {self.se:.3f}, N = {self.n_tokens.tolist()})"


def slack_slope(pairs: Sequence[PairLosses], *, n_boot: int = 2000, seed: int = 0) -> SlackSlope:
    r"""Fit :math:`\log \overline{s}(N) = a + k\log N` to the mean slack of each :class:`PairLosses`,
    and bootstrap the slope :math:`k` (pairs resampled with replacement within each N, ``n_boot`` times)."""
    if len(pairs) < 2:
        raise ValueError(f"pairs: need at least 2 token counts for a slope, got {len(pairs)}")
    ns = np.array([p.n_tokens for p in pairs], float)
    slacks = [p.slack for p in pairs]
    means = np.array([s.mean() for s in slacks])
    slope = loglog_slope(ns, means)
    rng = np.random.default_rng(seed)
    boot = np.empty(check_count(n_boot, "n_boot", 2))
    for i in range(boot.size):
        m = np.array([s[rng.integers(0, s.size, s.size)].mean() for s in slacks])
        boot[i] = np.polyfit(np.log(ns), np.log(np.maximum(m, 1e-300)), 1)[0]
    return SlackSlope(n_tokens=ns.astype(int), mean_slack=means, slope=slope, boot=boot)


__all__ = [
    "EnergyComparison",
    "LearningRun",
    "PairLosses",
    "SlackSlope",
    "Target",
    "TrainingSettings",
    "energy_comparison",
    "haar_rotation",
    "learning_run",
    "null_losses",
    "output_tokens",
    "random_targets",
    "run_for",
    "slack_slope",
    "standard_start",
    "steering_energies",
]
