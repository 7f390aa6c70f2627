r"""Chapter 1 (Gaussian invariance): how close N tokens follow the mean-field (Gaussian) moment dynamics.

The N-token Transformer replaces the attention average against the Gaussian (the tilt of
:mod:`gtcore.attention`) by a softmax average over the tokens: a self-normalised importance-sampling
estimate with weights :math:`e^{y^\top B x}`. For a query :math:`x` the weights' relative second
moment against :math:`y \sim N(\mu, \Sigma)` is :math:`e^{x^\top B^\top \Sigma B x}`, and its average over
:math:`x \sim N(\mu, \Sigma)` is finite only if

.. math::

    \kappa = \lambda_{\max}\big(B^\top \Sigma B \Sigma\big) < \tfrac12 .

With :math:`\kappa < \tfrac12` the estimate has finite variance and moment errors decay like
:math:`N^{-1/2}`; above it the variance is infinite (a few tokens far out in the tail dominate their
softmax) and the decay is measurably slower at practical N.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._progress import progress as progress_bar
from gtcore.attention import max_sampling_strength
from gtcore.controls import ControlsLike
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.inference import loglog_slope
from gtcore.stats.sampling import gaussian_tokens


def relative_moment_discrepancy(
    mu: np.ndarray, Sigma: np.ndarray, mu_ref: np.ndarray, Sigma_ref: np.ndarray
) -> np.ndarray:
    r"""Per time (or layer), the larger of the two relative moment errors,

    .. math::

        \max\Big(\frac{\|\mu-\mu_{\rm ref}\|}{\|\mu_{\rm ref}\| + \sqrt{\operatorname{tr}\Sigma_{\rm ref}}},\
        \frac{\|\Sigma-\Sigma_{\rm ref}\|_F}{\|\Sigma_{\rm ref}\|_F}\Big),

    the mean measured on the scale of the distribution (so a zero reference mean is fine).
    """
    dS = np.linalg.norm(Sigma - Sigma_ref, axis=(1, 2)) / np.linalg.norm(Sigma_ref, axis=(1, 2))
    scale = np.linalg.norm(mu_ref, axis=1) + np.sqrt(np.trace(Sigma_ref, axis1=1, axis2=2))
    dm = np.linalg.norm(mu - mu_ref, axis=1) / scale
    return np.maximum(dS, dm)


@dataclass
class MeanFieldStudy:
    """Moment errors of the N-token Transformer against the moment ODE.

    Attributes
    ----------
    Ns : (k,) token counts
    errors : (k, seeds) error at the final time for each N and seed:
        :math:`\\|\\hat\\mu(T) - \\mu(T)\\| + \\|\\hat\\Sigma(T) - \\Sigma(T)\\|_F`, the ODE started from
        each cloud's own moments (``start="sample"``: the dynamic error) or from :math:`(\\mu_0, \\Sigma_0)`
        (``start="population"``: the dynamic error plus the initial sampling error)
    kappa : sampling strength along the ODE trajectory (:func:`gtcore.attention.max_sampling_strength`)
    slope : fitted log–log slope of the mean error against N
    sides : the library functions that moved the tokens (observed) and that integrated the moment ODE the
        errors are measured against (predicted) (:mod:`gtbook.studies.traced`)
    """

    Ns: np.ndarray
    errors: np.ndarray
    kappa: float
    slope: float
    sides: Sides = field(default_factory=Sides.empty)

    @property
    def mean_error(self) -> np.ndarray:
        return self.errors.mean(axis=1)


def mean_field_study(
    mu0: Any,
    Sigma0: Any,
    controls: ControlsLike,
    t_span: tuple[float, float],
    Ns: Sequence[int] | np.ndarray,
    seeds: int,
    steps: int,
    *,
    method: str = "rk4",
    progress: bool = True,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
    start: str = "sample",
    seed: int = 0,
) -> MeanFieldStudy:
    r"""Run the N-token Transformer from seeded Gaussian samples and compare with the moment ODE.

    For each :math:`N` in ``Ns`` and each seed :math:`s < \text{seeds}`, tokens are drawn from
    :math:`N(\mu_0, \Sigma_0)` (seed ``seed + s``), moved with empirical attention by ``steps`` steps of
    ``method``, and the final moments compared with :func:`gtcore.moments.integrate_moments` started from
    the cloud's own empirical moments :math:`(\hat\mu(0), \hat\Sigma(0))` (``start="sample"``, the
    default: the initial sampling error cancels and what is left is the finite-N attention's own,
    *dynamic*, error) or from :math:`(\mu_0, \Sigma_0)` (``start="population"``). The softmax
    kernel runs in ``kernel_dtype`` (:data:`gtbook.studies.precision.STUDY_KERNEL_DTYPE`: float32, see there).
    """
    Ns = np.asarray(Ns, dtype=int)
    if Ns.ndim != 1 or Ns.size < 2 or np.any(Ns < 2):
        raise ValueError(f"Ns must hold at least two token counts >= 2, got {Ns!r}")
    if int(seeds) < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds!r}")
    if start not in ("sample", "population"):
        raise ValueError(f"start must be 'sample' or 'population', got {start!r}")
    errors = np.empty((Ns.size, int(seeds)))
    jobs = [(i, N, s) for i, N in enumerate(Ns) for s in range(int(seeds))]
    with collect() as sides:
        with predicted() if start == "population" else nullcontext():  # the population start's prediction
            ref = integrate_moments(mu0, Sigma0, controls, t_span, t_eval=np.linspace(*t_span, 21))
        if ref.status != "completed":
            raise ValueError(f"the moment ODE does not complete on t_span ({ref.status}): pick weaker controls")
        mu_T, S_T = ref.final
        for i, N, s in progress_bar(jobs, "N-token runs", enabled=progress):
            with observed():
                tr = simulate(
                    gaussian_tokens(int(N), mu0, Sigma0, int(seed) + s),
                    controls,
                    t_span,
                    steps,
                    method=method,
                    record_every=steps,
                    kernel_dtype=kernel_dtype,
                )
            if start == "sample":
                with predicted():
                    own = integrate_moments(tr.mu[0], tr.Sigma[0], controls, t_span)
                if own.status != "completed":
                    raise ValueError(f"the moment ODE from a sample's moments does not complete ({own.status})")
                m_T, s_T = own.final
            else:
                m_T, s_T = mu_T, S_T
            errors[i, s] = np.linalg.norm(tr.mu[-1] - m_T) + np.linalg.norm(tr.Sigma[-1] - s_T)
    kappa = max_sampling_strength(controls, ref.t, ref.Sigma)
    return MeanFieldStudy(Ns=Ns, errors=errors, kappa=kappa, slope=loglog_slope(Ns, errors.mean(axis=1)), sides=sides)


__all__ = ["MeanFieldStudy", "loglog_slope", "mean_field_study", "relative_moment_discrepancy"]
