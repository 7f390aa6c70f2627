r"""A finite token cloud approaching a covariance blow-up of the moment ODE.

For constant controls in a destabilising regime the moment ODE (eq. 1.1) blows up at
:math:`t^*`. The N-token Transformer (:func:`gtcore.particles.simulate`, softmax attention)
cannot: every token's velocity is :math:`Ax_i + b + \sum_h V_h \bar x_i^{(h)}` with
:math:`\bar x_i^{(h)}` a convex combination of the tokens, so the radius
:math:`R(t) = \max_i |x_i(t)|` obeys :math:`R' \le L R + |b|`,
:math:`L = \|A\|_2 + \sum_h \|V_h\|_2`, and

.. math::

    \|\hat\Sigma(t)\|_F \le \operatorname{tr}\hat\Sigma(t) \le R(t)^2
    \le \Big(e^{Lt}\big(R(0) + |b|/L\big) - |b|/L\Big)^2 \qquad (L > 0),

finite at every time. What the cloud does instead is measured here: the ratio of its covariance
norm to the moment ODE's at fixed fractions of the way to :math:`t^*`, over several token counts
:math:`N` and seeds. The softmax average of a query is a self-normalised importance-sampling
estimate of the Gaussian tilt :math:`\mu + \Sigma B x`; its weights have finite variance only
while :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma) < \tfrac12`
(:func:`gtcore.attention.max_sampling_strength`), and :math:`\kappa \to \infty` at a blow-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._progress import progress as progress_bar
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.poles import particle_radius_bound
from gtcore.stats.gaussianity import empirical_moments
from gtcore.stats.sampling import gaussian_tokens


@dataclass
class PoleCloud:
    r"""One cloud of :func:`pole_study` with its tokens kept (``keep=``), and its reference ODE.

    Attributes
    ----------
    run : :class:`gtcore.particles.ParticleTrajectory`
        The tokens (``tokens`` at every step) over :math:`[0, f\,t^*]`, softmax attention.
    ode : :class:`gtcore.moments.MomentTrajectory`
        The moment ODE from the cloud's own initial moments, at the times ``run.t``.
    t_star : float
        The blow-up time of that ODE (:func:`gtcore.riccati.blowup_time`).
    """

    run: Any
    ode: Any
    t_star: float

    @property
    def ratio(self) -> np.ndarray:
        r""":math:`\|\hat\Sigma_N(t)\|_F / \|\Sigma(t)\|_F` at every recorded time."""
        return np.linalg.norm(self.run.Sigma, axis=(1, 2)) / np.linalg.norm(self.ode.Sigma, axis=(1, 2))


@dataclass
class PoleStudy:
    r"""Finite-N token clouds against the moment ODE on the way to its blow-up.

    Attributes
    ----------
    Ns : (k,) token counts
    fractions : (m,) the target fractions :math:`f` of :math:`t^*`
    t_star : blow-up time of the moment ODE from the population :math:`\Sigma_0`
    t_star_seed : (k, seeds) blow-up time from each sample's own initial moments
    times : (k, seeds, m) the recorded times (the integrator's grid point nearest
        :math:`f\,t^*_{\rm seed}`)
    ratio : (k, seeds, m) :math:`\|\hat\Sigma_N(t)\|_F / \|\Sigma(t)\|_F`, the ODE started
        from the same sample's empirical moments
    kappa : (m,) :math:`\lambda_{\max}(B^\top\Sigma B\Sigma)` on the population ODE at
        :math:`f\,t^*`
    ode_norm : (m,) :math:`\|\Sigma(ft^*)\|_F / \|\Sigma_0\|_F` on the population ODE
    trace_bound_ok : bool, every recorded :math:`\operatorname{tr}\hat\Sigma` is below
        :func:`gtcore.poles.particle_radius_bound` squared
    kept : PoleCloud or None
        The cloud asked for with ``keep=(N, seed)``: its tokens at every step and its reference
        ODE at the same times (for an animation)
    """

    Ns: np.ndarray
    fractions: np.ndarray
    t_star: float
    t_star_seed: np.ndarray
    times: np.ndarray
    ratio: np.ndarray
    kappa: np.ndarray
    ode_norm: np.ndarray
    trace_bound_ok: bool
    kept: PoleCloud | None = None
    #: the traced sides of ``ratio`` (:mod:`gtbook.studies.traced`): the token runs (observed); each cloud's
    #: blow-up time and eq. (1.1) from its own moments (predicted)
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def gap(self) -> np.ndarray:
        r""":math:`|1 - \text{ratio}|`, shape (k, seeds, m)."""
        return np.abs(1.0 - self.ratio)

    def gap_mean(self) -> np.ndarray:
        """(k, m) seed mean of :attr:`gap`."""
        return self.gap.mean(axis=1)

    def gap_se(self) -> np.ndarray:
        """(k, m) standard error of the seed mean of :attr:`gap` (ddof 1)."""
        s = self.gap.shape[1]
        return self.gap.std(axis=1, ddof=1) / np.sqrt(s) if s > 1 else np.zeros(self.gap.shape[::2])

    def table(self) -> str:
        """One row per N: the seed mean and standard error of the ratio at each fraction."""
        head = f"{'N':>7} " + " ".join(f"{'t=' + format(f, '.2f') + ' t*':>17}" for f in self.fractions)
        lines = [head]
        s = self.ratio.shape[1]
        for i, N in enumerate(self.Ns):
            m = self.ratio[i].mean(axis=0)
            se = self.ratio[i].std(axis=0, ddof=1) / np.sqrt(s) if s > 1 else np.zeros_like(m)
            lines.append(f"{N:>7d} " + " ".join(f"{a:9.4f} +- {b:5.4f}" for a, b in zip(m, se, strict=True)))
        lines.append(f"{'ODE':>7} " + " ".join(f"{'|S|/|S0| = ' + format(x, '.3g'):>17}" for x in self.ode_norm))
        lines.append(f"{'kappa':>7} " + " ".join(f"{x:17.3g}" for x in self.kappa))
        return "\n".join(lines)


def pole_study(
    mu0: Any,
    Sigma0: Any,
    controls: Controls,
    Ns: Sequence[int] | np.ndarray,
    seeds: int,
    fractions: Sequence[float],
    steps: int,
    *,
    method: str = "rk4",
    device: str = "auto",
    progress: bool = False,
    keep: tuple[int, int] | None = None,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
) -> PoleStudy:
    r"""Token clouds of several sizes against the moment ODE at fixed fractions of :math:`t^*`.

    For each :math:`N` and seed :math:`s`, :math:`N` tokens are drawn from
    :math:`N(\mu_0, \Sigma_0)` (:func:`gtcore.stats.sampling.gaussian_tokens`, seed ``s``), their own
    empirical moments :math:`(\hat\mu_0, \hat\Sigma_0)` give the reference ODE and its blow-up
    time :math:`t^*_s` (:func:`gtcore.riccati.blowup_time`), and the cloud is moved with
    softmax attention by ``steps`` steps of ``method`` over :math:`[0, f_{\max} t^*_s]`. At the
    grid time :math:`t` nearest each :math:`f t^*_s` the ratio
    :math:`\|\hat\Sigma_N(t)\|_F / \|\Sigma(t; \hat\mu_0, \hat\Sigma_0)\|_F` is recorded. Starting
    the ODE from the sample's own moments removes the sampling error of the initial cloud, so
    the ratio measures what the finite-N attention adds.

    Parameters
    ----------
    mu0, Sigma0 : initial moments of the population
    controls : time-invariant Controls whose moment ODE blows up from ``Sigma0``
    Ns : token counts (at least one)
    seeds : number of seeds per N
    fractions : increasing fractions of :math:`t^*` in (0, 1)
    steps : fixed steps over :math:`[0, f_{\max} t^*_s]`
    method, device, kernel_dtype : as :func:`gtcore.particles.simulate` (the softmax kernel in
        :data:`gtbook.studies.precision.STUDY_KERNEL_DTYPE`, float32, by default: see there)
    keep : (N, seed), optional
        Keep that cloud's tokens at every step, with its reference ODE at the same times
        (``PoleStudy.kept``); ``N`` one of ``Ns``, ``seed`` in ``range(seeds)``. The run is the
        one the study makes anyway: keeping it costs only the ODE at every step.

    Returns
    -------
    PoleStudy
    """
    from gtcore.riccati import blowup_time

    Ns = np.asarray(Ns, dtype=int)
    fr = np.asarray(fractions, dtype=float)
    if Ns.ndim != 1 or Ns.size < 1 or np.any(Ns < 2):
        raise ValueError(f"Ns must hold token counts >= 2, got {Ns!r}")
    if fr.ndim != 1 or fr.size < 1 or np.any(fr <= 0) or np.any(fr >= 1) or np.any(np.diff(fr) <= 0):
        raise ValueError(f"fractions must increase inside (0, 1), got {fractions!r}")
    if int(seeds) < 1 or int(steps) < 1:
        raise ValueError("seeds and steps must be >= 1")
    if keep is not None and (len(keep) != 2 or int(keep[0]) not in Ns.tolist() or not 0 <= int(keep[1]) < int(seeds)):
        raise ValueError(f"keep must be (N, seed) with N in Ns and 0 <= seed < seeds, got {keep!r}")
    t_star = float(blowup_time(Sigma0, controls).t_star)
    if not np.isfinite(t_star):
        raise ValueError("controls: the moment ODE does not blow up from Sigma0")
    pop = integrate_moments(mu0, Sigma0, controls, (0.0, fr[-1] * t_star), t_eval=fr * t_star)
    kappa = np.array([max_sampling_strength(controls, [t], [S]) for t, S in zip(pop.t, pop.Sigma, strict=True)])
    ode_norm = np.linalg.norm(pop.Sigma, axis=(1, 2)) / np.linalg.norm(np.asarray(Sigma0, float))

    k, S, m = Ns.size, int(seeds), fr.size
    ratio, times, ts_seed = np.empty((k, S, m)), np.empty((k, S, m)), np.empty((k, S))
    bound_ok = True
    kept = None
    jobs = [(i, int(N), s) for i, N in enumerate(Ns) for s in range(S)]
    with collect() as sides:  # the radius bound and the kept cloud's ODE: on neither side
        for i, N, s in progress_bar(jobs, "token clouds", enabled=progress):
            x0 = gaussian_tokens(N, mu0, Sigma0, seed=s)
            m0, S0 = empirical_moments(x0)
            with predicted():  # eq. (1.1)'s blow-up time from the cloud's own moments sets the horizon
                ts = float(blowup_time(S0, controls).t_star)
            ts_seed[i, s] = ts
            keep_this = keep is not None and (N, s) == (int(keep[0]), int(keep[1]))
            with observed():
                tr = simulate(
                    x0,
                    controls,
                    (0.0, fr[-1] * ts),
                    int(steps),
                    method=method,
                    device=device,
                    keep_tokens=keep_this,
                    kernel_dtype=kernel_dtype,
                )
            if tr.status != "completed":
                raise RuntimeError(
                    f"N={N}, seed {s}: the token cloud reached blowup_norm "
                    "(it cannot blow up in finite time; lower the fractions)"
                )
            idx = np.rint(fr / fr[-1] * int(steps)).astype(int)
            t_pick = tr.t[idx]
            with predicted():
                ref = integrate_moments(m0, S0, controls, (0.0, t_pick[-1]), t_eval=t_pick)
            ratio[i, s] = np.linalg.norm(tr.Sigma[idx], axis=(1, 2)) / np.linalg.norm(ref.Sigma, axis=(1, 2))
            times[i, s] = t_pick
            R0 = float(np.max(np.linalg.norm(x0, axis=1)))
            bound = particle_radius_bound(controls, R0, tr.t) ** 2
            bound_ok &= bool(np.all(np.trace(tr.Sigma, axis1=1, axis2=2) <= bound))
            if keep_this:
                kept = PoleCloud(
                    run=tr, ode=integrate_moments(m0, S0, controls, (0.0, float(tr.t[-1])), t_eval=tr.t), t_star=ts
                )
    return PoleStudy(
        Ns=Ns,
        fractions=fr,
        t_star=t_star,
        t_star_seed=ts_seed,
        times=times,
        ratio=ratio,
        kappa=kappa,
        ode_norm=ode_norm,
        trace_bound_ok=bound_ok,
        kept=kept,
        sides=sides,
    )


__all__ = ["PoleCloud", "PoleStudy", "pole_study"]
