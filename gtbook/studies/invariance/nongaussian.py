r"""The softmax layer stack on moment-matched clouds: a power check of the Gaussian layer map.

The finite-N comparisons of :mod:`gtbook.studies.invariance.harness` only mean something if they
*fail* where the law is not Gaussian. :func:`softmax_stack_study` runs the L-layer residual
Transformer with softmax attention over N tokens drawn by
:func:`gtcore.stats.sampling.moment_matched_tokens` (a Gaussian, or a non-Gaussian law with the same
two moments) and compares it with the exact Gaussian layer map (:func:`gtcore.moments.layer_stack`) started
from the sample's own moments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._progress import progress as progress_bar
from gtcore.controls import ControlsLike, as_control_function, evaluate_controls
from gtcore.moments import layer_stack
from gtcore.particles import simulate
from gtcore.stats.inference import loglog_slope
from gtcore.stats.sampling import moment_matched_tokens


@dataclass
class StackStudy:
    r"""Softmax residual stack against the exact Gaussian layer map, over N and seeds.

    Attributes
    ----------
    Ns : (k,) token counts
    errors : (k, seeds) :math:`\|\hat\mu_L - \mu_L\| + \|\hat\Sigma_L - \Sigma_L\|_F` after the last
        layer, :math:`(\mu_L, \Sigma_L)` from :func:`gtcore.moments.layer_stack` started at the sample's moments
    slope : log–log slope of the mean error over seeds against N
    law : the law the tokens were drawn from
    nonaffine : (k, seeds) :func:`nonaffine_residual` of the final tokens on the initial ones (how far
        the stack's map of this sample is from an affine map), or None when not computed
    sides : the library functions that drew and moved the tokens (observed) and that ran the exact layer map
        the errors are measured against (predicted) (:mod:`gtbook.studies.traced`); the non-affine residual is
        measured against no computed prediction (:func:`gtbook.studies.traced.no_prediction`)
    """

    Ns: np.ndarray
    errors: np.ndarray
    slope: float
    law: str
    nonaffine: np.ndarray | None = None
    sides: Sides = field(default_factory=Sides.empty)

    @property
    def mean_error(self) -> np.ndarray:
        return self.errors.mean(axis=1)


def nonaffine_residual(x0: Any, x1: Any) -> float:
    r"""How far the map :math:`x_0 \mapsto x_1` of a token cloud is from affine: the relative residual

    .. math::

        \rho = \frac{\min_{M, c}\, \|X_1 - X_0M^\top - \mathbf 1c^\top\|_F}{\|X_1 - \mathbf 1\bar x_1^\top\|_F},

    the least-squares affine fit of the final tokens on the initial ones (row :math:`i` of
    :math:`X_0, X_1` is token :math:`i`). An affine flow (the Gaussian attention average, or no
    attention) gives :math:`\rho = 0` to round-off; the finite-N softmax over a Gaussian sample gives
    :math:`\rho = O(N^{-1/2})` (its fluctuation around the affine tilt); over a non-Gaussian law the
    population average itself is not affine and :math:`\rho` tends to a positive limit.

    Parameters
    ----------
    x0, x1 : (N, d) arrays
        The same tokens before and after.

    Returns
    -------
    float
    """
    x0, x1 = np.asarray(x0, float), np.asarray(x1, float)
    if x0.ndim != 2 or x0.shape != x1.shape or x0.shape[0] <= x0.shape[1] + 1:
        raise ValueError(f"x0 and x1 must be (N, d) arrays of one shape with N > d + 1, got {x0.shape}, {x1.shape}")
    design = np.hstack([x0 - x0.mean(axis=0), np.ones((x0.shape[0], 1))])
    coef, *_ = np.linalg.lstsq(design, x1, rcond=None)
    return float(np.linalg.norm(x1 - design @ coef) / np.linalg.norm(x1 - x1.mean(axis=0)))


def softmax_stack_study(
    mu0: Any,
    Sigma0: Any,
    controls: ControlsLike,
    T: float,
    n_layers: int,
    Ns: Sequence[int] | np.ndarray,
    seeds: int,
    *,
    law: str = "gaussian",
    seed: int = 0,
    progress: bool = False,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
    **law_kwargs,
) -> StackStudy:
    r"""How far the softmax residual stack is from the Gaussian layer map, as N grows.

    For each N and each of ``seeds`` samples (drawn by :func:`~gtcore.stats.sampling.moment_matched_tokens` from
    ``law``, seeds ``seed, seed + 1, ...``), the tokens go through ``n_layers`` residual layers
    :math:`x \mapsto x + h\,v(x)`, :math:`h = T/L`, with softmax attention over the tokens
    (:func:`gtcore.particles.simulate`, ``method="euler"``). The exact layer map
    (:func:`gtcore.moments.layer_stack`) is started from the sample's own empirical moments, so the
    initial sampling error cancels: what is left is the gap between the softmax over the tokens
    and the Gaussian attention average :math:`\hat\mu + \hat\Sigma B x`. For a Gaussian sample
    that gap is a sampling fluctuation (it shrinks with N); for another law with the same moments
    it tends to a non-zero limit. The softmax kernel runs in ``kernel_dtype``
    (:data:`gtbook.studies.precision.STUDY_KERNEL_DTYPE`: float32, see there).

    Returns
    -------
    StackStudy
    """
    Ns = np.asarray(Ns, dtype=int)
    if Ns.ndim != 1 or Ns.size < 2 or np.any(Ns < 2):
        raise ValueError(f"Ns must hold at least two token counts >= 2, got {Ns!r}")
    if isinstance(n_layers, bool) or int(n_layers) != n_layers or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    if int(seeds) < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds!r}")
    fn = as_control_function(controls)
    h = float(T) / int(n_layers)
    per_layer = [evaluate_controls(fn, k * h) for k in range(int(n_layers))]
    errors = np.empty((Ns.size, int(seeds)))
    nonaffine = np.empty_like(errors)
    jobs = [(i, N, s) for i, N in enumerate(Ns) for s in range(int(seeds))]
    with collect() as sides:
        for i, N, s in progress_bar(jobs, f"softmax stack ({law})", enabled=progress):
            with observed():
                x0 = moment_matched_tokens(law, int(N), mu0, Sigma0, seed + s, **law_kwargs)
                tr = simulate(
                    x0,
                    controls,
                    (0.0, float(T)),
                    int(n_layers),
                    method="euler",
                    record_every=int(n_layers),
                    device="cpu",
                    kernel_dtype=kernel_dtype,
                    keep_tokens=True,
                )
            with predicted():
                mus, Sigmas = layer_stack(tr.mu[0], tr.Sigma[0], per_layer, h)
            errors[i, s] = np.linalg.norm(tr.mu[-1] - mus[-1]) + np.linalg.norm(tr.Sigma[-1] - Sigmas[-1])
            assert tr.tokens is not None  # keep_tokens=True
            nonaffine[i, s] = nonaffine_residual(x0, tr.tokens[-1])
    return StackStudy(
        Ns=Ns, errors=errors, slope=loglog_slope(Ns, errors.mean(axis=1)), law=law, nonaffine=nonaffine, sides=sides
    )


__all__ = ["StackStudy", "nonaffine_residual", "softmax_stack_study"]
