r"""The Riccati connection reproduced by a stochastic process: a Kalman–Bucy filter's estimation error.

With :math:`V = vI` the covariance equation (eq. 1.1) reads

.. math::

    \Sigma' = A\Sigma + \Sigma A^\top - \Sigma\,C^\top R^{-1} C\,\Sigma, \qquad
    C^\top R^{-1} C = -v(B + B^\top),

the error-covariance equation of the Kalman–Bucy filter for the state :math:`dX = AX\,dt` (no process
noise) observed through :math:`dY = CX\,dt + R^{1/2}dW`, when :math:`v(B + B^\top) \preceq 0`. This
module runs that filter and measures its error instead of solving any equation. Take :math:`R = I` and
:math:`C = (-v(B + B^\top))^{1/2}` (symmetric root). Each of ``paths`` independent paths draws
:math:`X_0 \sim N(0, \Sigma_0)`, starts the estimate at :math:`\hat x_0 = 0`, and steps by
Euler–Maruyama with step :math:`\delta = T/\text{steps}`

.. math::

    X_{k+1} = X_k + \delta A X_k, \qquad \Delta Y_k = \delta C X_k + \sqrt\delta\, \xi_k, \qquad
    \hat x_{k+1} = \hat x_k + \delta A\hat x_k + K_k(\Delta Y_k - \delta C\hat x_k),

with :math:`\xi_k \sim N(0, I)` and the filter's own gain :math:`K_k = P(t_k)\, C^\top`, where :math:`P(t)`
solves the filter's Riccati equation :math:`P' = AP + PA^\top - PC^\top CP`, :math:`P(0) = \Sigma_0`, integrated
here by SciPy (:func:`filter_riccati`: no code of ``gtcore``). With this gain the error
:math:`e = X - \hat x` has zero mean and the covariance :math:`\Pi(t)` of the Lyapunov equation
:math:`\Pi' = (A - KC)\Pi + \Pi(A - KC)^\top + KK^\top`, :math:`\Pi(0) = \Sigma_0`, which :math:`\Pi = P`
solves: the filter measures :math:`P`. The statement predicts :math:`P = \Sigma`, the covariance of eq. (1.1)
under :math:`(A, V = vI, B)` as :func:`gtcore.moments.integrate_moments` integrates it. So if eq. (1.1) (or
gtcore's integration of it) were not the filter's Riccati equation, the measured error covariance would depart
from :math:`\Sigma(t)`. The two sides are traced apart (:mod:`gtbook.studies.traced`): the filter, its
Riccati equation and its paths (observed); eq. (1.1) (predicted).

**The statistic.** At each recorded time the empirical covariance
:math:`S = \frac1M\sum_m e_me_m^\top` of the :math:`M` errors (known mean 0) is compared with
:math:`\Sigma(t)` by the likelihood-ratio statistic

.. math::

    \Lambda = M\big(\operatorname{tr}(\Sigma^{-1}S) - \log\det(\Sigma^{-1}S) - d\big),

which for :math:`M` i.i.d. :math:`N(0, \Sigma)` vectors is asymptotically :math:`\chi^2` with
:math:`d(d+1)/2` degrees of freedom (:func:`covariance_lrt`; its exact null is calibrated by
:func:`lrt_null_quantile`). Euler–Maruyama adds a bias of order :math:`\delta` to :math:`\Pi`; with
:math:`\delta = 10^{-3}` its contribution to :math:`\Lambda` is about :math:`M d\,\delta^2 \ll 1`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._linalg import psd_sqrt
from gtcore._validation import check_covariance, check_matrix, check_positive
from gtcore.controls import Controls
from gtcore.moments import integrate_moments

__all__ = [
    "FilterEnsemble",
    "FilterRun",
    "covariance_lrt",
    "filter_ensemble",
    "filter_riccati",
    "kalman_bucy_error",
    "lrt_null_quantile",
    "observation_matrix",
    "random_filter_controls",
]


def observation_matrix(v: float, B: Any) -> np.ndarray:
    r"""The observation matrix :math:`C = (-v(B + B^\top))^{1/2}` (with :math:`R = I`).

    Parameters
    ----------
    v : float
        The value gain, :math:`V = vI`.
    B : (d, d) array
        The attention matrix (not necessarily symmetric).

    Returns
    -------
    (d, d) array
        The symmetric PSD root of :math:`-v(B + B^\top)`.

    Raises
    ------
    ValueError
        When :math:`-v(B + B^\top)` is not positive semi-definite (then the equation is no filter's:
        the "measurement" would carry negative information).
    """
    B = check_matrix(B, "B")
    Q = -float(v) * (B + B.T)
    lam = np.linalg.eigvalsh(Q)
    if lam.min() < -1e-12 * max(1.0, abs(lam).max()):
        raise ValueError(
            f"B: -v(B + B^T) must be positive semi-definite for a filter, its smallest eigenvalue is {lam.min():.3g}"
        )
    return psd_sqrt(0.5 * (Q + Q.T))


def covariance_lrt(S: Any, Sigma: Any, n: int) -> float:
    r"""The likelihood-ratio statistic :math:`n(\operatorname{tr}(\Sigma^{-1}S) - \log\det(\Sigma^{-1}S) - d)`.

    Parameters
    ----------
    S : (d, d) array
        The empirical covariance of ``n`` vectors about the known mean 0.
    Sigma : (d, d) array
        The covariance under the null hypothesis (positive definite).
    n : int
        The number of vectors.

    Returns
    -------
    float
        :math:`\Lambda`, asymptotically :math:`\chi^2_{d(d+1)/2}` under the null.
    """
    S = np.asarray(S, float)
    Sigma = np.asarray(Sigma, float)
    W = np.linalg.solve(Sigma, S)
    sign, logdet = np.linalg.slogdet(W)
    if sign <= 0:
        return float("inf")
    return float(n * (np.trace(W) - logdet - S.shape[0]))


def lrt_null_quantile(d: int, n: int, level: float, *, repeats: int = 2000, seed: int = 0) -> float:
    r"""The ``level`` quantile of :func:`covariance_lrt` for ``n`` i.i.d. :math:`N(0, I_d)` vectors.

    The statistic is invariant under :math:`x \mapsto Lx`, so this null holds for every :math:`\Sigma`.

    Parameters
    ----------
    d, n : int
        Dimension and number of vectors.
    level : float
        The quantile, in (0, 1).
    repeats : int
        Monte Carlo draws of the statistic.
    seed : int
        Seed of the draws.

    Returns
    -------
    float
        The empirical quantile of :math:`\Lambda` over ``repeats`` draws.
    """
    rng = np.random.default_rng(seed)
    stats = np.empty(repeats)
    eye = np.eye(d)
    for r in range(repeats):
        z = rng.standard_normal((n, d))
        stats[r] = covariance_lrt(z.T @ z / n, eye, n)
    return float(np.quantile(stats, level))


@dataclass(frozen=True)
class FilterRun:
    """The measured estimation error of a Kalman–Bucy filter against the predicted covariance.

    Attributes
    ----------
    t : (n,) array
        The recorded times.
    error_cov : (n, d, d) array
        Empirical covariance of :math:`X - \\hat x` over the paths, about 0.
    predicted : (n, d, d) array
        :math:`\\Sigma(t)` of eq. (1.1) (the covariance the statement predicts for the error).
    lrt : (n,) array
        :func:`covariance_lrt` of ``error_cov`` against ``predicted`` at each time (time 0 excluded: 0.0).
    paths, steps : int
        Number of paths and of Euler–Maruyama steps.
    gain_scale : float
        The factor applied to the observation information in the filter's model (1 for the
        identification of the module docstring).
    """

    t: np.ndarray
    error_cov: np.ndarray
    predicted: np.ndarray
    lrt: np.ndarray
    paths: int
    steps: int
    gain_scale: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def relative_gap(self) -> np.ndarray:
        r""":math:`\|S(t) - \Sigma(t)\|_F / \|\Sigma(t)\|_F` at each recorded time."""
        return np.linalg.norm(self.error_cov - self.predicted, axis=(1, 2)) / np.linalg.norm(
            self.predicted, axis=(1, 2)
        )

    def __repr__(self) -> str:
        return (
            f"FilterRun(d={self.predicted.shape[-1]}, times={len(self.t)}, paths={self.paths}, steps={self.steps}, "
            f"max lrt={self.lrt.max():.3g}, max relative gap={self.relative_gap().max():.3g})"
        )


def filter_riccati(A: Any, C: Any, Sigma0: Any, grid: Any) -> np.ndarray:
    r"""The filter's Riccati equation, integrated here: :math:`P' = AP + PA^\top - PC^\top CP`,
    :math:`P(0) = \Sigma_0`, by SciPy's ``DOP853`` (rtol :math:`10^{-11}`, atol :math:`10^{-13}`) on the
    entries of :math:`P`, written out in this function and independent of :mod:`gtcore.moments`.

    Parameters
    ----------
    A, C : (d, d) arrays
        The state and observation matrices (noise covariances :math:`R = I`, no process noise).
    Sigma0 : (d, d) array
        The initial error covariance.
    grid : (n,) array
        Increasing times, from 0.

    Returns
    -------
    (n, d, d) ndarray
        :math:`P` at ``grid`` (symmetrised).
    """
    from scipy.integrate import solve_ivp

    A, C, P0 = (np.asarray(x, dtype=float) for x in (A, C, Sigma0))
    d = A.shape[0]
    CtC = C.T @ C

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        P = y.reshape(d, d)
        return (A @ P + P @ A.T - P @ CtC @ P).ravel()

    grid = np.asarray(grid, dtype=float)
    sol = solve_ivp(rhs, (grid[0], grid[-1]), P0.ravel(), method="DOP853", t_eval=grid, rtol=1e-11, atol=1e-13)
    if not sol.success or sol.y.shape[1] != grid.size:
        raise ValueError(f"the filter's Riccati equation stopped at t = {sol.t[-1]:.4g}: {sol.message}")
    P = sol.y.T.reshape(-1, d, d)
    return 0.5 * (P + np.swapaxes(P, -1, -2))


def kalman_bucy_error(
    A: Any,
    v: float,
    B: Any,
    Sigma0: Any,
    T: float,
    *,
    paths: int = 4000,
    steps: int = 1000,
    records: int = 5,
    seed: int = 0,
    gain_scale: float = 1.0,
) -> FilterRun:
    r"""Run the Kalman–Bucy filter of the module docstring and measure its error covariance.

    Parameters
    ----------
    A : (d, d) array
        The state matrix (the controls' :math:`A`).
    v : float
        The value gain, :math:`V = vI`.
    B : (d, d) array
        The attention matrix; :math:`-v(B + B^\top)` must be positive semi-definite.
    Sigma0 : (d, d) array
        Initial covariance (positive definite).
    T : float
        Final time (before any blow-up of eq. (1.1); with :math:`v(B+B^\top) \preceq 0` there is none).
    paths : int
        Independent filter paths :math:`M`.
    steps : int
        Euler–Maruyama steps over :math:`[0, T]`.
    records : int
        Number of equally spaced times after 0 at which the error is measured.
    seed : int
        Seed of the initial states and the observation noise.
    gain_scale : float
        The observation is :math:`\sqrt{s}\,C` for :math:`s` = ``gain_scale`` (data and filter alike),
        i.e. the information :math:`s\,C^\top C`: 1 is the identification of the module docstring;
        another value is a deliberate misidentification (a wrong factor), the chapter's control:
        the error covariance then solves the Riccati equation with information :math:`sC^\top C`,
        not eq. (1.1).

    Returns
    -------
    FilterRun
    """
    A = check_matrix(A, "A")
    d = A.shape[0]
    Sigma0 = check_covariance(Sigma0, "Sigma0", d)
    check_positive(T, "T")
    for name, val in (("paths", paths), ("steps", steps), ("records", records)):
        if isinstance(val, bool) or int(val) != val or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if steps % records:
        raise ValueError(f"steps ({steps}) must be a multiple of records ({records})")
    C = np.sqrt(float(gain_scale)) * observation_matrix(v, B)
    ctl = Controls(A=A, V=float(v) * np.eye(d), B=B)
    dt = T / steps
    grid = np.linspace(0.0, T, steps + 1)
    with collect() as sides:
        with predicted():
            ode = integrate_moments(np.zeros(d), Sigma0, ctl, (0.0, T), t_eval=grid, rtol=1e-11, atol=1e-13)
        if len(ode.t) != steps + 1:
            raise ValueError(f"eq. (1.1) stopped at t = {ode.t[-1]:.4g} ({ode.status}): choose T before the blow-up")
        with observed():
            P = filter_riccati(A, C, Sigma0, grid)  # the filter's own gain, not eq. (1.1)
            rng = np.random.default_rng(seed)
            X = rng.standard_normal((paths, d)) @ psd_sqrt(Sigma0)
            xhat = np.zeros((paths, d))
            every = steps // records
            t_rec, covs, preds = [0.0], [X.T @ X / paths], [ode.Sigma[0]]
            for k in range(steps):
                K = P[k] @ C.T
                dY = dt * X @ C.T + np.sqrt(dt) * rng.standard_normal((paths, d))
                innovation = dY - dt * xhat @ C.T
                X = X + dt * X @ A.T
                xhat = xhat + dt * xhat @ A.T + innovation @ K.T
                if (k + 1) % every == 0:
                    e = X - xhat
                    t_rec.append(grid[k + 1])
                    covs.append(e.T @ e / paths)
                    preds.append(ode.Sigma[k + 1])
    covs_a, preds_a = np.array(covs), np.array(preds)
    lrt = np.array([0.0] + [covariance_lrt(S, P, paths) for S, P in zip(covs_a[1:], preds_a[1:], strict=True)])
    return FilterRun(np.array(t_rec), covs_a, preds_a, lrt, int(paths), int(steps), float(gain_scale), sides)


@dataclass(frozen=True)
class FilterEnsemble:
    """Filters over a seeded ensemble of controls satisfying :math:`v(B + B^\\top) \\preceq 0`.

    Attributes
    ----------
    runs : list of FilterRun
        The identification (``gain_scale = 1``), one per draw.
    controls : list of (A, v, B, Sigma0)
        The draws.
    controls_runs : list of FilterRun
        The same draws and paths with the misidentified information (``control_scale``).
    threshold : float
        The :math:`\\chi^2_{d(d+1)/2}` quantile at :math:`1 - \\alpha/(\\text{draws}\\cdot\\text{records})`
        (Bonferroni over every draw and recorded time), fixed before any run.
    control_scale : float
    sides : Sides
        The traced sides of ``max_lrt`` (:mod:`gtbook.studies.traced`): the filters with their own Riccati
        gain and paths (observed); eq. (1.1) (predicted).
    """

    runs: list
    controls: list
    control_runs: list
    threshold: float
    control_scale: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def max_lrt(self) -> float:
        """The largest statistic over every draw and time (the reproduction: below ``threshold``)."""
        return float(max(r.lrt.max() for r in self.runs))

    @property
    def min_control_lrt(self) -> float:
        """Over draws, the smallest of each control run's largest statistic (the control: above)."""
        return float(min(r.lrt.max() for r in self.control_runs))

    def __repr__(self) -> str:
        return (
            f"FilterEnsemble(draws={len(self.runs)}, max lrt={self.max_lrt:.3g}, threshold={self.threshold:.3g}, "
            f"min control lrt={self.min_control_lrt:.3g})"
        )


def random_filter_controls(d: int, rng: np.random.Generator) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    r"""One draw :math:`(A, v, B, \Sigma_0)` with non-symmetric :math:`B` and :math:`v(B + B^\top) \preceq 0`.

    :math:`A = G/\sqrt d` (Ginibre), :math:`v = \pm u` with :math:`u` uniform on [0.5, 1.5],
    :math:`B = -\operatorname{sign}(v)\,HH^\top/d + (S - S^\top)/2` (:math:`H, S` Ginibre: a definite
    symmetric part of the sign the filter needs, plus a skew part), :math:`\Sigma_0 = I + WW^\top/d`.

    Parameters
    ----------
    d : int
        Dimension.
    rng : numpy Generator

    Returns
    -------
    A, v, B, Sigma0
    """
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    v = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5))
    H = rng.standard_normal((d, d))
    S = rng.standard_normal((d, d))
    B = -np.sign(v) * H @ H.T / d + 0.5 * (S - S.T)
    W = rng.standard_normal((d, d))
    return A, v, B, np.eye(d) + W @ W.T / d


def filter_ensemble(
    draws: int,
    d: int,
    T: float,
    *,
    paths: int,
    steps: int,
    records: int,
    seed: int,
    alpha: float = 0.01,
    control_scale: float = 0.5,
    progress: bool = False,
) -> FilterEnsemble:
    r"""Run :func:`kalman_bucy_error` over ``draws`` controls from :func:`random_filter_controls`.

    Parameters
    ----------
    draws, d : int
        Ensemble size and dimension.
    T : float
        Horizon.
    paths, steps, records : int
        As :func:`kalman_bucy_error`.
    seed : int
        Seeds the draws (draw ``i`` uses filter seed ``seed + 1 + i``).
    alpha : float
        Family-wise level of the threshold.
    control_scale : float
        The misidentified information factor of the control runs (0.5: a factor 2 lost).
    progress : bool
        Show a progress bar over the draws.

    Returns
    -------
    FilterEnsemble
    """
    from scipy.stats import chi2

    from gtcore._progress import progress as progress_bar

    rng = np.random.default_rng(seed)
    threshold = float(chi2.ppf(1 - alpha / (draws * records), d * (d + 1) // 2))
    runs, control_runs, ctls = [], [], []
    with collect() as sides:  # the identification runs' sides (the control runs record their own)
        for i in progress_bar(range(draws), desc="filters", enabled=progress):
            A, v, B, S0 = random_filter_controls(d, rng)
            ctls.append((A, v, B, S0))
            kw = dict(paths=paths, steps=steps, records=records, seed=seed + 1 + i)
            runs.append(kalman_bucy_error(A, v, B, S0, T, **kw))
    for (A, v, B, S0), i in zip(ctls, range(draws), strict=True):
        kw = dict(paths=paths, steps=steps, records=records, seed=seed + 1 + i)
        control_runs.append(kalman_bucy_error(A, v, B, S0, T, gain_scale=control_scale, **kw))
    return FilterEnsemble(runs, ctls, control_runs, threshold, float(control_scale), sides)
