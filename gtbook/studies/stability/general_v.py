r"""Mean steering with a general value matrix: on the moment ODE and on N tokens.

For :math:`V \ne vI` neither the precision equation nor the closed-form equilibrium of
:mod:`gtcore.riccati` applies: the equilibrium :math:`\Sigma^*` of eq. (1.1) comes from Newton's
method (:func:`gtcore.stability.equilibrium`) and the bias that puts the asymptotic mean at a target,

.. math::

    b = -\big(A + V + V\Sigma^*B\big)\,\mu_{\text{target}},

from :func:`gtcore.stability.bias_for_mean_target`. Both are derived from the statement; this module checks
them (a) against a direct integration of eq. (1.1) over a seeded ensemble (a derivation check), and
(b) on N tokens moved by softmax attention with those controls (a reproduction): the cloud's mean
should reach the target up to the finite-N error, :math:`\propto N^{-1/2}`. The control uses the bias
computed from the wrong covariance (the initial one, as if Newton's step were skipped): its mean
settles elsewhere and the error levels off.

**The draws.** :math:`A = a\,(G + (\max|\operatorname{Re}\operatorname{spec} G| + 0.3)I)` (anti-stable;
:math:`a` = ``a_scale``), :math:`V = -(WW^\top/d + 0.5I)` (negative definite, not a multiple of the
identity), :math:`B = HH^\top/d + 0.2I + (S - S^\top)/2` (positive-definite symmetric part,
non-symmetric): opposite definiteness. A draw is kept when Newton's method certifies a
positive-definite equilibrium, the linearisation there is stable, the mean matrix
:math:`A + V + V\Sigma^*B` has spectral abscissa below ``-min_rate``, and the sampling strength at
:math:`\Sigma^*` is below ``kappa_cap`` (the statement's hypotheses; the last two so that the tokens'
horizon fits the budget and their softmax has finite variance); :math:`\mu_{\text{target}} \sim N(0, I)`,
:math:`\mu_0 \sim N(0, I)`, :math:`\Sigma_0 = I`. The ODE check runs from :math:`(\mu_0, \Sigma_0)` to
:math:`T_{\text{ode}} = 30/\min(\text{mean rate}, \text{covariance rate})`; the tokens start from
:math:`N(\mu_0, \Sigma^*)` (only the mean has to travel) and run to :math:`T = 8/\text{mean rate}`, where
the transient is :math:`e^{-8} \approx 3\cdot10^{-4}` of the initial offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate_batch
from gtcore.stability import NoEquilibriumError, bias_for_mean_target, equilibrium, linear_stability, mean_matrix
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error
from gtcore.stats.sampling import gaussian_tokens

__all__ = ["MeanSteeringDraw", "MeanSteeringTokens", "mean_steering_draws", "mean_steering_tokens"]


@dataclass(frozen=True)
class MeanSteeringDraw:
    """One kept draw: controls with the steering bias, the equilibrium, the target, the horizon.

    Attributes
    ----------
    controls : Controls
        :math:`(A, b, V, B)` with the bias of the module docstring.
    wrong_controls : Controls
        The same with the bias computed from :math:`\\Sigma_0` in place of :math:`\\Sigma^*` (the control).
    Sigma_star, mu_target, mu0, Sigma0 : arrays
    rate : float
        Minus the spectral abscissa of the mean matrix.
    T : float
        The horizon :math:`12/\\text{rate}`.
    ode_mean_error, ode_cov_error : float
        :math:`\\|\\mu(T) - \\mu_{\\text{target}}\\|` and :math:`\\|\\Sigma(T) - \\Sigma^*\\|_F/\\|\\Sigma^*\\|_F` of
        eq. (1.1) integrated directly (tolerances 1e-12).
    """

    controls: Controls
    wrong_controls: Controls
    Sigma_star: np.ndarray
    mu_target: np.ndarray
    mu0: np.ndarray
    Sigma0: np.ndarray
    rate: float
    kappa: float
    T: float
    ode_mean_error: float
    ode_cov_error: float
    ode_wrong_mean_error: float


def mean_steering_draws(
    draws: int,
    d: int,
    *,
    seed: int,
    a_scale: float = 0.3,
    min_rate: float = 0.5,
    kappa_cap: float = 0.45,
    max_tries: int = 400,
) -> list[MeanSteeringDraw]:
    r"""``draws`` kept draws of the module docstring, each checked against a direct integration.

    Parameters
    ----------
    draws, d : int
        How many draws to keep, and the dimension (d >= 2).
    seed : int
        Seeds the draws.
    a_scale : float
        The scale :math:`a` of :math:`A`.
    min_rate : float
        The mean matrix's spectral abscissa must be below ``-min_rate``.
    kappa_cap : float
        The sampling strength at :math:`\Sigma^*` must be below this.
    max_tries : int
        Cap on the draws tried.

    Returns
    -------
    list of MeanSteeringDraw
    """
    rng = np.random.default_rng(seed)
    kept: list[MeanSteeringDraw] = []
    for _ in range(max_tries):
        if len(kept) == draws:
            break
        G = rng.standard_normal((d, d)) / np.sqrt(d)
        A = a_scale * (G + (np.abs(np.linalg.eigvals(G).real).max() + 0.3) * np.eye(d))
        W = rng.standard_normal((d, d))
        V = -(W @ W.T / d + 0.5 * np.eye(d))
        H = rng.standard_normal((d, d))
        S = rng.standard_normal((d, d))
        B = H @ H.T / d + 0.2 * np.eye(d) + 0.5 * (S - S.T)
        mu_target, mu0, Sigma0 = rng.standard_normal(d), rng.standard_normal(d), np.eye(d)
        ctl = Controls(A=A, V=V, B=B)
        try:
            eq = equilibrium(ctl)
        except NoEquilibriumError:
            continue
        rate = -float(np.linalg.eigvals(mean_matrix(ctl, eq.Sigma)).real.max())
        lin = linear_stability(ctl, eq.Sigma)
        kappa = max_sampling_strength(ctl, [0.0], [eq.Sigma])
        if lin.verdict != "stable" or rate < min_rate or kappa >= kappa_cap:
            continue
        b = bias_for_mean_target(ctl, eq.Sigma, mu_target)
        b_wrong = bias_for_mean_target(ctl, Sigma0, mu_target, allow_unstable=True)
        steered = Controls(A=A, b=b, V=V, B=B)
        T_ode = 30.0 / min(rate, -float(lin.max_real))
        wrong = Controls(A=A, b=b_wrong, V=V, B=B)
        ode = integrate_moments(mu0, Sigma0, steered, (0.0, T_ode), rtol=1e-12, atol=1e-14)
        ode_wrong = integrate_moments(mu0, Sigma0, wrong, (0.0, T_ode), rtol=1e-12, atol=1e-14)
        kept.append(
            MeanSteeringDraw(
                steered,
                wrong,
                eq.Sigma,
                mu_target,
                mu0,
                Sigma0,
                rate,
                kappa,
                8.0 / rate,
                float(np.linalg.norm(ode.mu[-1] - mu_target)),
                float(np.linalg.norm(ode.Sigma[-1] - eq.Sigma) / np.linalg.norm(eq.Sigma)),
                float(np.linalg.norm(ode_wrong.mu[-1] - mu_target)),
            )
        )
    if len(kept) < draws:
        raise ValueError(f"only {len(kept)} of {draws} draws kept in {max_tries} tries")
    return kept


@dataclass(frozen=True)
class MeanSteeringTokens:
    r"""Relative distance of the token cloud's mean from the target at :math:`T`, over draws, N and seeds.

    Attributes
    ----------
    Ns : (n,) int array
    error : (draws, n, seeds) array
        :math:`\|\hat\mu_N(T) - \mu_{\text{target}}\| / \sqrt{\operatorname{tr}\Sigma^*}`.
    wrong : bool
        True for the control (the bias from :math:`\Sigma_0`).
    slope : float
        Pooled log-log slope of the seed-mean error in N (one intercept per draw).
    """

    Ns: np.ndarray
    error: np.ndarray
    wrong: bool
    slope: float

    def slope_standard_error(self, n_boot: int = 2000, seed: int = 0) -> float:
        """Bootstrap standard error of ``slope`` (seeds resampled within each draw and N)."""
        return pooled_slope_standard_error(self.Ns, self.error, n_boot=n_boot, seed=seed)

    def __repr__(self) -> str:
        return (
            f"MeanSteeringTokens(wrong={self.wrong}, draws={self.error.shape[0]}, Ns={self.Ns.tolist()}, "
            f"seeds={self.error.shape[2]}, slope={self.slope:.3f})"
        )


def mean_steering_tokens(
    draws: Sequence[MeanSteeringDraw],
    Ns: Sequence[int] | np.ndarray,
    *,
    seeds: int,
    step: float = 0.1,
    seed: int = 0,
    wrong: bool = False,
) -> MeanSteeringTokens:
    r"""Move N tokens from :math:`N(\mu_0, \Sigma^*)` with each draw's controls to :math:`T` (RK4, step about ``step``).

    Parameters
    ----------
    draws : sequence of MeanSteeringDraw
    Ns : sequence of int
        Token counts.
    seeds : int
        Clouds per draw and N; cloud ``s`` of draw ``k`` uses ``seed + 1000 (k+1) + s``.
    step : float
        The RK4 step is ``T / ceil(T / step)``.
    seed : int
    wrong : bool
        Use each draw's ``wrong_controls`` (the control).

    Returns
    -------
    MeanSteeringTokens
    """
    Ns = np.asarray(Ns, int)
    out = np.empty((len(draws), len(Ns), seeds))
    for k, dr in enumerate(draws):
        ctl = dr.wrong_controls if wrong else dr.controls
        steps = int(np.ceil(dr.T / step))
        scale = np.sqrt(np.trace(dr.Sigma_star))
        jobs = [(i, s) for i in range(len(Ns)) for s in range(seeds)]  # the draw's clouds advance together
        x0s = [gaussian_tokens(int(Ns[i]), dr.mu0, dr.Sigma_star, seed + 1000 * (k + 1) + s) for i, s in jobs]
        runs = simulate_batch(x0s, ctl, (0.0, dr.T), steps, record_every=steps, device="cpu")
        for (i, s), run in zip(jobs, runs, strict=True):
            out[k, i, s] = np.linalg.norm(run.final_tokens.mean(axis=0) - dr.mu_target) / scale
    return MeanSteeringTokens(Ns, out, bool(wrong), pooled_loglog_slope(Ns, out))
