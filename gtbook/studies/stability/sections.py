r"""Chapter 4's computations, one function per section, each returning a result with its numbers and figure.

The chapter calls these in a few lines; the arithmetic is the chapter's own, moved here unchanged (a claim's
value is the same number, bit for bit). Every function states what it computes; the claims and their
thresholds are in the chapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from gtbook.studies.stability import figures as figs
from gtbook.studies.stability.closed_forms import (
    closed_form_error,
    critical_gain_verdict,
    linearisation_error,
    lyapunov_equilibrium_error,
    regime_agreement,
    riccati_draws,
)
from gtbook.studies.stability.finite_n import PoleStudy, pole_study
from gtbook.studies.stability.harness import RegimeMap, regime_boundary, regime_map, rotating_controls
from gtbook.studies.stability.pole_figures import pole_figure
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore import Controls, Stability, Status, Verdict, gaussian_tokens, integrate_moments
from gtcore.attention import max_sampling_strength
from gtcore.particles import simulate
from gtcore.riccati import blowup_time, closed_form_covariance, gain_threshold
from gtcore.stability import bias_for_mean_target, classify, equilibrium, linear_stability, mean_matrix
from gtcore.stats.inference import loglog_slope

__all__ = [
    "ClosedForms",
    "FiniteN",
    "Planar",
    "Regimes",
    "Scalar",
    "closed_form_checks",
    "finite_n_section",
    "planar_section",
    "regime_section",
    "scalar_section",
]


# ------------------------------------------------------------------------------ (a) d = 1
@dataclass
class Scalar:
    """The scalar Bernoulli equation: explicit solutions against the integrator (``runs`` for the figure)."""

    a: float
    qs: list[float]
    runs: list[dict]
    error: float

    def figure(self) -> plt.Figure:
        """Vector field and solutions (:func:`gtbook.studies.stability.figures.phase_line`)."""
        return figs.phase_line(self.a, self.qs, self.runs)


def scalar_section(a: float, qs: Sequence[float], sigma0: float) -> Scalar:
    r"""For each :math:`q`: :math:`\sigma' = 2a\sigma + q\sigma^2` (``Controls(A=a, V=q/2, B=1)``), the closed form
    against the integrator up to :math:`0.999\,t^*` (or :math:`t = 8`); the largest relative difference."""
    runs = []
    err = 0.0
    for q in qs:
        ctl1 = Controls(A=[[a]], V=[[q / 2]], B=[[1.0]])
        bt1 = blowup_time([[sigma0]], ctl1)
        t_end = 0.999 * bt1.t_star if np.isfinite(bt1.t_star) else 8.0
        t_grid = np.linspace(0, t_end, 200)
        closed = closed_form_covariance([[sigma0]], ctl1, t_grid)[:, 0, 0]
        num = integrate_moments([0.0], [[sigma0]], ctl1, (0, t_end), t_eval=t_grid[::10])
        ref = closed_form_covariance([[sigma0]], ctl1, num.t)[:, 0, 0]
        err = max(err, float(np.max(np.abs(num.Sigma[:, 0, 0] - ref) / ref)))
        runs.append(
            dict(label=rf"$q = {q:g}$", t=t_grid, closed=closed, t_num=num.t, num=num.Sigma[:, 0, 0], t_star=bt1.t_star)
        )
    return Scalar(a, list(qs), runs, err)


# ------------------------------------------------------------------------------ (b) the planar family
@dataclass
class Planar:
    r"""The planar family :math:`A = \pm aI + \omega J`, :math:`V = \mp vI`: the stabilising and destabilising
    runs, the equilibrium and its certificates, the Hurwitz cases, the steered mean (attributes by name)."""

    ctl_stab: Controls
    ctl_blow: Controls
    Sigma0: np.ndarray
    eq: Any
    stab_traj: Any
    pred: Any
    blow_traj: Any
    spec_gap: float
    M_star: np.ndarray
    collapse_ok: bool
    same_unstable: bool
    steer: Any
    ctl_steer: Controls
    mu_target: np.ndarray
    #: the traced side that computed the equilibrium :math:`\Sigma^*` (predicted, :mod:`gtbook.studies.traced`)
    eq_sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def convergence_error(self) -> float:
        """:math:`\\|\\Sigma(t_{\\rm end}) - \\Sigma^*\\|_F/\\|\\Sigma^*\\|_F`."""
        return float(np.linalg.norm(self.stab_traj.Sigma[-1] - self.eq.Sigma) / np.linalg.norm(self.eq.Sigma))

    @property
    def m_star_real(self) -> float:
        """Largest :math:`|\\operatorname{Re}\\lambda(M^*)|/\\|M^*\\|`."""
        return float(np.abs(np.linalg.eigvals(self.M_star).real).max() / np.linalg.norm(self.M_star))

    @property
    def t_star_gap(self) -> float:
        """Relative gap between the closed-form :math:`t^*` and the integrator's event."""
        return abs(self.pred.t_star - self.blow_traj.crossing_time) / self.pred.t_star

    @property
    def mean_error(self) -> float:
        """Distance of the steered mean to the target at the end."""
        return float(np.linalg.norm(self.steer.mu[-1] - self.mu_target))

    @property
    def mean_rate(self) -> float:
        """Spectral abscissa of the mean matrix at :math:`\\Sigma^*`."""
        return float(np.linalg.eigvals(mean_matrix(self.ctl_steer, self.eq.Sigma)).real.max())

    def cone_figure(self) -> plt.Figure:
        """The two covariance trajectories in the PSD cone, with :math:`\\Sigma^*`."""
        return figs.psd_cone(
            [self.stab_traj.Sigma, self.blow_traj.Sigma],
            ["opposite definiteness ($v<0$)", "same definiteness ($v>0$)"],
            equilibria=[self.eq.Sigma],
            z_max=4.0,
        )

    def mean_figure(self) -> plt.Figure:
        """The steered mean's distance and path."""
        return figs.mean_steering(self.steer.t, self.steer.mu, self.mu_target)


def planar_section(
    a: float, v: float, B: Any, omega: float, Sigma0: Any, t_converge: float, mu_target: Sequence[float]
) -> Planar:
    """Everything the chapter computes on the planar family (see :class:`Planar`)."""
    B = np.array(B)
    Sigma0 = np.array(Sigma0)
    mu0 = np.zeros(2)
    ctl_stab = rotating_controls(a, -v, B, omega=omega)
    ctl_blow = rotating_controls(a, v, B, omega=omega)
    with collect() as eq_sides, predicted():
        eq = equilibrium(ctl_stab)
    stab_traj = integrate_moments(mu0, Sigma0, ctl_stab, (0, t_converge), t_eval=np.linspace(0, t_converge, 600))
    pred = blowup_time(Sigma0, ctl_blow)
    blow_traj = integrate_moments(mu0, Sigma0, ctl_blow, (0, 2 * pred.t_star))
    ls = linear_stability(ctl_stab, eq.Sigma)
    lam_A = np.linalg.eigvals(ctl_stab.A)
    expected = np.array([-(lam_A[i] + lam_A[j]) for i in range(2) for j in range(i, 2)])
    spec_gap = max(min(abs(x - y) for y in expected) for x in ls.eigenvalues)
    M_star = ctl_stab.A + ctl_stab.attention_drift(eq.Sigma)
    ctl_hurwitz = rotating_controls(-a, -v, B, omega=omega)
    verdict_h = classify(ctl_hurwitz, Sigma0)
    end_h = integrate_moments(mu0, Sigma0, ctl_hurwitz, (0, t_converge), atol=1e-30).Sigma[-1]
    ctl_hurwitz_same = rotating_controls(-a, v, B, omega=omega)
    ls_same = linear_stability(ctl_hurwitz_same, equilibrium(ctl_hurwitz_same).Sigma)
    collapse_ok = bool(verdict_h.verdict is Verdict.COLLAPSES and np.linalg.norm(end_h) < 1e-8 * np.linalg.norm(Sigma0))
    b_target = bias_for_mean_target(ctl_stab, eq.Sigma, mu_target)
    ctl_steer = rotating_controls(a, -v, B, omega=omega, b=b_target)
    steer = integrate_moments(mu0, Sigma0, ctl_steer, (0, t_converge), t_eval=np.linspace(0, t_converge, 400))
    return Planar(
        ctl_stab,
        ctl_blow,
        Sigma0,
        eq,
        stab_traj,
        pred,
        blow_traj,
        spec_gap,
        M_star,
        collapse_ok,
        bool(ls_same.verdict is Stability.UNSTABLE),
        steer,
        ctl_steer,
        np.array(mu_target),
        eq_sides,
    )


# ------------------------------------------------------------------------------ closed forms, general A and B
@dataclass
class ClosedForms:
    """The closed forms against eq. (1.1) over the ``V = vI`` draws of
    :func:`~gtbook.studies.stability.closed_forms.riccati_draws` (largest errors, agreement fractions)."""

    cf_err: float
    agree: float
    gain_agree: float
    lyap_err: float
    lin_err: float


def closed_form_checks(draws_per_kind: int, seed: int) -> ClosedForms:
    """Each closed form of :mod:`gtbook.studies.stability.closed_forms` over the draws (d = 3)."""
    rdraws = riccati_draws(draws_per_kind, 3, seed=seed)
    cf_err = max(closed_form_error(r) for r in rdraws)
    hurwitz_draws = [r for r in rdraws if r.kind != "stabilising"]
    verdicts = [regime_agreement(r) for r in hurwitz_draws]
    agree = float(np.mean([a is b and a in (Verdict.COLLAPSES, Verdict.BLOWS_UP) for a, b in verdicts]))
    gain_agree = float(
        np.mean(
            [critical_gain_verdict(r) is observed for r, (_, observed) in zip(hurwitz_draws, verdicts, strict=True)]
        )
    )
    stab_draws = [r for r in rdraws if r.kind == "stabilising"]
    lyap_err = max(lyapunov_equilibrium_error(r)[0] for r in stab_draws)
    lin_err = max(linearisation_error(r.controls, equilibrium(r.controls).Sigma) for r in stab_draws)
    return ClosedForms(cf_err, agree, gain_agree, lyap_err, lin_err)


# ------------------------------------------------------------------------------ (c) finite N near the pole
@dataclass
class FiniteN:
    """The pole study and the stabilising particles with their control (attributes by name)."""

    kappa_chapter: float
    kappa_pole: float
    pole_steps: int
    ps: PoleStudy
    slopes: list[float]
    part_stab: Any
    t_ctrl: np.ndarray
    ratio_stab: np.ndarray
    ratio_ctrl: np.ndarray
    ode_stab: Any
    n_star: float
    n0: float
    #: the traced sides of ``ratio_stab`` against :attr:`bound_stab` (:mod:`gtbook.studies.traced`): the
    #: stabilising token run (observed); the equilibrium :math:`\Sigma^*` of eq. (1.1) the bound is built on
    #: (predicted)
    stab_sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def bound_stab(self) -> float:
        """:math:`2\\max(1, \\|\\Sigma^*\\|/\\|\\Sigma_0\\|)`."""
        return 2 * max(1.0, self.n_star)

    def figure(self) -> plt.Figure:
        """The gap against N per fraction of t*, and the stabilising particles with the control."""
        return pole_figure(
            self.ps,
            dict(
                t_ode=self.ode_stab.t,
                n_ode=np.linalg.norm(self.ode_stab.Sigma, axis=(1, 2)) / self.n0,
                t_part=self.part_stab.t,
                n_part=self.ratio_stab,
                t_ctrl=self.t_ctrl,
                n_ctrl=self.ratio_ctrl,
                n_star=self.n_star,
            ),
        )

    def animation(self, planar: Planar, t_stable: float, alt: str) -> Any:
        """The stabilising cloud settling on Sigma* beside the largest pole-study cloud approaching t*."""
        ode_anim = integrate_moments(
            np.zeros(2), planar.Sigma0, planar.ctl_stab, (0, t_stable), t_eval=self.part_stab.t
        )
        kept = self.ps.kept
        if kept is None:
            raise ValueError("the pole study kept no cloud (pass keep= to pole_study)")
        return figs.regimes_animation(
            self.part_stab, ode_anim, kept.run, kept.ode, Sigma_star=planar.eq.Sigma, t_star=kept.t_star, alt=alt
        )


def finite_n_section(
    planar: Planar,
    *,
    sigma_scale: float,
    Ns: Sequence[int],
    seeds: int,
    fractions: Sequence[float],
    h: float,
    n_tokens: int,
    particle_steps: int,
    t_stable: float,
    token_seed: int,
) -> FiniteN:
    """The pole study from ``sigma_scale * Sigma0`` and the stabilising/destabilising particles over
    ``[0, t_stable]`` (the chapter's section (c))."""
    mu0 = np.zeros(2)
    Sigma0 = planar.Sigma0
    kappa_chapter = max_sampling_strength(planar.ctl_blow, [0.0], [Sigma0])
    Sigma0_pole = sigma_scale * Sigma0
    kappa_pole = max_sampling_strength(planar.ctl_blow, [0.0], [Sigma0_pole])
    t_star_pole = blowup_time(Sigma0_pole, planar.ctl_blow).t_star
    pole_steps = int(np.ceil(fractions[-1] * t_star_pole / h))
    ps = pole_study(
        mu0, Sigma0_pole, planar.ctl_blow, Ns, seeds, fractions, pole_steps, keep=(Ns[-1], 0)
    )  # the largest cloud's tokens, for the animation
    slopes = [loglog_slope(ps.Ns, ps.gap_mean()[:, j]) for j in range(len(ps.fractions))]
    x0 = gaussian_tokens(n_tokens, mu0, Sigma0, seed=token_seed)
    n0 = np.linalg.norm(Sigma0)
    with collect() as stab_run, observed():
        part_stab = simulate(x0, planar.ctl_stab, (0, t_stable), particle_steps, method="rk4", keep_tokens=True)
    part_ctrl = simulate(x0, planar.ctl_blow, (0, t_stable), particle_steps, method="rk4")
    ode_stab = integrate_moments(mu0, Sigma0, planar.ctl_stab, (0, t_stable), t_eval=np.linspace(0, t_stable, 200))
    ratio_stab = np.linalg.norm(part_stab.Sigma, axis=(1, 2)) / n0
    ratio_ctrl = np.linalg.norm(part_ctrl.Sigma, axis=(1, 2)) / n0
    n_star = np.linalg.norm(planar.eq.Sigma) / n0
    return FiniteN(
        kappa_chapter,
        kappa_pole,
        pole_steps,
        ps,
        slopes,
        part_stab,
        part_ctrl.t,
        ratio_stab,
        ratio_ctrl,
        ode_stab,
        float(n_star),
        float(n0),
        stab_run.with_prediction(planar.eq_sides),
    )


# ------------------------------------------------------------------------------ (d) the regime map
@dataclass
class Regimes:
    """The regime map and the indefinite example (attributes by name)."""

    rm: RegimeMap
    boundary: Any
    gt_ind: Any
    ind: Any
    bt_ind: Any
    indefinite_v: float

    def figure(self) -> plt.Figure:
        """The observed regimes with the theory's boundary."""
        return figs.regime_map_figure(self.rm, self.boundary)

    @property
    def indefinite_blows_up_below_formula(self) -> bool:
        """Whether the integrator sees a blow-up at a gain below the formula's :math:`v_c`."""
        return bool(self.indefinite_v < self.gt_ind.formula and self.ind.status is Status.BLOWUP)


def regime_section(
    B: Any,
    omega: float,
    Sigma0: Any,
    grid_a: Sequence[float],
    grid_v: Sequence[float],
    grid_n: int,
    t_max: float,
    indefinite: dict,
) -> Regimes:
    """The regime map of the planar family over ``grid_a x grid_v`` and the indefinite-``B`` example."""
    B = np.array(B)
    rm = regime_map(
        lambda a, v: rotating_controls(a, v, B, omega=omega),
        np.linspace(grid_a[0], grid_a[1], grid_n),
        np.linspace(grid_v[0], grid_v[1], grid_n),
        Sigma0,
        t_max,
    )
    boundary = regime_boundary(np.linspace(grid_a[0], -1e-3, 200), B, Sigma0, omega=omega)
    A_ind, B_ind = np.array(indefinite["A"]), np.array(indefinite["B"])
    gt_ind = gain_threshold(A_ind, B_ind, np.eye(2))
    ctl_ind = Controls(A=A_ind, V=indefinite["v"] * np.eye(2), B=B_ind)
    ind = integrate_moments(np.zeros(2), np.eye(2), ctl_ind, (0, t_max))
    bt_ind = blowup_time(np.eye(2), ctl_ind)
    return Regimes(rm, boundary, gt_ind, ind, bt_ind, float(indefinite["v"]))
