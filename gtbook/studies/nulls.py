r"""Signed deviations of finite token clouds from Gaussian predictions, for the chapters' finite-N claims.

When the Gaussian prediction (the moment ODE or the exact layer map) is started from each cloud's empirical
moments, the initial sampling error cancels and what is left, the *dynamic error*, is the finite-N attention's
own fluctuation: far smaller than the sampling noise of a fresh sample, so a band built from fresh samples is
much too wide (a 10 % error in the prediction would pass it). Its actual null is that the signed deviations of
R independent clouds,

.. math::

    \delta_s = \Big(\frac{\hat\mu_s - \mu_s}{\|\Sigma_s\|_2^{1/2}},\
        \frac{\operatorname{vech}(\hat\Sigma_s - \Sigma_s)}{\|\Sigma_s\|_F}\Big), \qquad s = 1..R,

have mean zero (up to the :math:`O(1/N)` bias of a self-normalised softmax average), while a wrong
prediction gives them a common non-zero mean. This module computes the deviations (:func:`signed_deviation`,
:func:`flow_deviations`, :func:`extrapolated_flow_deviations`); the tests on them are the core's
(:func:`gtcore.stats.inference.hotelling_test`, whose ratio :math:`T^2/T^2_{0.99}` the claims use: below 1
for a prediction the clouds are consistent with, above 1 for a near-miss prediction they reject;
:func:`gtcore.stats.inference.extrapolated_deviations` for the :math:`O(1/N)` bias).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gtbook.studies.precision import STUDY_KERNEL_DTYPE
from gtbook.studies.traced import observed, predicted
from gtcore.controls import ControlsLike
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.inference import extrapolated_deviations
from gtcore.stats.sampling import gaussian_tokens

__all__ = ["extrapolated_flow_deviations", "flow_deviations", "signed_deviation"]


def signed_deviation(mu_hat: Any, Sigma_hat: Any, mu: Any, Sigma: Any, *, mean: bool = True) -> np.ndarray:
    r"""The signed, scale-free deviation of a cloud's moments from a prediction (module docstring).

    Parameters
    ----------
    mu_hat, Sigma_hat : (d,), (d, d)
        The cloud's empirical moments.
    mu, Sigma : (d,), (d, d)
        The prediction.
    mean : bool
        Include the mean's part (drop it when the mean is exact by construction, e.g. a symmetric cloud).

    Returns
    -------
    (d + d(d+1)/2,) array, or (d(d+1)/2,) without the mean
        :math:`(\hat\mu - \mu)/\|\Sigma\|_2^{1/2}` then the upper triangle (row by row) of
        :math:`(\hat\Sigma - \Sigma)/\|\Sigma\|_F`.
    """
    mu_hat, mu = np.asarray(mu_hat, float), np.asarray(mu, float)
    Sigma_hat, Sigma = np.asarray(Sigma_hat, float), np.asarray(Sigma, float)
    d = Sigma.shape[0]
    if Sigma.shape != (d, d) or Sigma_hat.shape != (d, d) or mu.shape != (d,) or mu_hat.shape != (d,):
        raise ValueError(
            f"moments must have shapes (d,), (d, d): got mu_hat {mu_hat.shape}, Sigma_hat "
            f"{Sigma_hat.shape}, mu {mu.shape}, Sigma {Sigma.shape}"
        )
    iu = np.triu_indices(d)
    cov = ((Sigma_hat - Sigma) / np.linalg.norm(Sigma))[iu]
    if not mean:
        return cov
    return np.concatenate([(mu_hat - mu) / np.sqrt(np.linalg.norm(Sigma, 2)), cov])


def flow_deviations(
    controls: ControlsLike,
    mu0: Any,
    Sigma0: Any,
    T: float,
    n_tokens: int,
    seeds: int,
    steps: int,
    *,
    predictions: Mapping[str, ControlsLike],
    ff: str = "identity",
    seed: int = 0,
    method: str = "rk4",
    mean: bool = True,
    kernel_dtype: Any = STUDY_KERNEL_DTYPE,
) -> dict[str, np.ndarray]:
    r"""Signed deviations of R finite clouds from moment-ODE predictions started at their own moments.

    Cloud ``s < seeds``: ``n_tokens`` tokens from :math:`N(\mu_0, \Sigma_0)` (seed ``seed + s``) moved by
    ``controls`` over :math:`[0, T]` (``steps`` steps of ``method``, activation ``ff``,
    :func:`gtcore.particles.simulate`). For each named prediction (controls whose moment ODE,
    :func:`gtcore.moments.integrate_moments`, is the prediction; for a ReLU layer that is the ODE of its
    identity-activation fold) the ODE starts from the cloud's empirical moments at :math:`t = 0`, and
    :func:`signed_deviation` of the cloud's final moments from the ODE's is recorded. Inside a
    :func:`gtbook.studies.traced.collect` block the token runs are traced as the observed side and the moment
    ODEs as the predicted one.

    Parameters
    ----------
    controls : the layer that moves the tokens
    mu0, Sigma0 : the input Gaussian
    T : horizon
    n_tokens, seeds, steps : int
    predictions : mapping name -> controls
    ff, method, kernel_dtype : passed to :func:`gtcore.particles.simulate`
    seed : int
    mean : bool
        Include the mean's part of the deviation.

    Returns
    -------
    dict name -> (seeds, p) array, ready for :func:`gtcore.stats.inference.hotelling_test`
    """
    if isinstance(seeds, bool) or int(seeds) != seeds or seeds < 2:
        raise ValueError(f"seeds must be an integer >= 2, got {seeds!r}")
    if not predictions:
        raise ValueError("predictions must name at least one prediction")
    out: dict[str, list] = {name: [] for name in predictions}
    for s in range(int(seeds)):
        with observed():
            x0 = gaussian_tokens(int(n_tokens), mu0, Sigma0, int(seed) + s)
            tr = simulate(
                x0,
                controls,
                (0.0, float(T)),
                int(steps),
                method=method,
                ff=ff,
                record_every=int(steps),
                device="cpu",
                kernel_dtype=kernel_dtype,
            )
        if tr.status != "completed":
            raise ValueError(f"the token run of seed {int(seed) + s} did not complete ({tr.status})")
        for name, pred in predictions.items():
            with predicted():
                ode = integrate_moments(tr.mu[0], tr.Sigma[0], pred, (0.0, float(T)))
            if ode.status != "completed":
                raise ValueError(f"prediction {name!r}: the moment ODE did not complete ({ode.status})")
            out[name].append(signed_deviation(tr.mu[-1], tr.Sigma[-1], *ode.final, mean=mean))
    return {name: np.array(v) for name, v in out.items()}


def extrapolated_flow_deviations(
    controls: ControlsLike,
    mu0: Any,
    Sigma0: Any,
    T: float,
    n_tokens: int,
    seeds: int,
    steps: int,
    *,
    predictions: Mapping[str, ControlsLike],
    ratio: int = 3,
    seed: int = 0,
    small_seed_offset: int = 50,
    kernel_dtype: Any = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    r"""Covariance deviations of clouds of :math:`N_2` and :math:`N_1 = \lfloor N_2/\text{ratio}\rfloor` tokens,
    Richardson-extrapolated to remove an :math:`O(1/N)` bias.

    :func:`flow_deviations` (covariance part only) for ``seeds`` clouds of ``n_tokens`` tokens (seeds
    ``seed + s``) and ``seeds`` clouds of ``n_tokens // ratio`` tokens (seeds ``seed + small_seed_offset + s``),
    paired by index and combined by :func:`gtcore.stats.inference.extrapolated_deviations`.

    Parameters
    ----------
    controls, mu0, Sigma0, T, steps, predictions, kernel_dtype : as in :func:`flow_deviations`
    n_tokens : int
        :math:`N_2`, the larger clouds' size.
    seeds : int
        Clouds of each size (at most ``small_seed_offset``, so the two sets of seeds do not overlap).
    ratio : int
        :math:`N_2 / N_1` (at least 2).
    seed, small_seed_offset : int

    Returns
    -------
    (extrapolated, large) : two dicts name -> (seeds, p) array
        The extrapolated deviations, and the plain ones of the :math:`N_2`-token clouds.
    """
    if isinstance(ratio, bool) or int(ratio) != ratio or ratio < 2:
        raise ValueError(f"ratio must be an integer >= 2, got {ratio!r}")
    if int(seeds) > int(small_seed_offset):
        raise ValueError(
            f"seeds ({seeds!r}) must not exceed small_seed_offset ({small_seed_offset!r}): "
            "the two sets of clouds would share seeds"
        )
    n_large, n_small = int(n_tokens), int(n_tokens) // int(ratio)
    large = flow_deviations(
        controls,
        mu0,
        Sigma0,
        T,
        n_large,
        seeds,
        steps,
        predictions=predictions,
        seed=seed,
        mean=False,
        kernel_dtype=kernel_dtype,
    )
    small = flow_deviations(
        controls,
        mu0,
        Sigma0,
        T,
        n_small,
        seeds,
        steps,
        predictions=predictions,
        seed=int(seed) + int(small_seed_offset),
        mean=False,
        kernel_dtype=kernel_dtype,
    )
    return {k: extrapolated_deviations(small[k], large[k], n_small, n_large) for k in predictions}, large
