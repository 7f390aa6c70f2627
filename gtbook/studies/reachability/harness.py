r"""Chapter 3 (rank and reachability): rank invariance along the moment ODE, and steered tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._progress import progress as progress_bar
from gtcore._validation import check_moments, check_positive
from gtcore.controls import Controls, ControlsLike
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.reachability import covariance_rank, singular_values
from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments
from gtcore.stats.sampling import gaussian_tokens


@dataclass
class RankInvariance:
    r"""Singular values of :math:`\Sigma(t)` along the moment ODE (:func:`rank_invariance`).

    Attributes
    ----------
    t : (n_times,) times
    singular_values : (n_times, d) singular values at the tightest tolerance, largest first
    rank0 : numerical rank of :math:`\Sigma_0`
    ranks : (n_times,) numerical rank of each :math:`\Sigma(t)` (tightest tolerance)
    rtols : solver tolerances used
    eta : (len(rtols),) the largest relative null singular value at each tolerance
    status : the integration status at the tightest tolerance
    """

    t: np.ndarray
    singular_values: np.ndarray
    rank0: int
    ranks: np.ndarray
    rtols: np.ndarray
    eta: np.ndarray
    status: str


def rank_invariance(
    mu0: Any,
    Sigma0: Any,
    controls: ControlsLike,
    T: float,
    *,
    n_times: int = 121,
    rtols: Sequence[float] = (1e-8, 1e-10, 1e-12, 2.5e-14),
) -> RankInvariance:
    r"""Singular values of :math:`\Sigma(t)` along the moment ODE, at several solver tolerances.

    Integrates eq. (1.1) with :func:`gtcore.moments.integrate_moments` on ``n_times`` times in
    :math:`[0, T]` once per tolerance in ``rtols`` (``atol = 1e-4 * rtol``), and measures the
    largest relative "null" singular value

    .. math::

        \eta = \max_t\ \sigma_{r+1}(\Sigma(t)) / \sigma_1(\Sigma(t)), \qquad r = \operatorname{rank}\Sigma_0 .

    The exact solution has :math:`\eta = 0` (rank invariance); numerically :math:`\eta` is the
    solver's error, so it falls with the tolerance down to round-off.

    Returns
    -------
    RankInvariance
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0)
    T = check_positive(T, "T")
    r = covariance_rank(Sigma0)
    if r == 0:
        raise ValueError("Sigma0 must not be the zero matrix")
    t = np.linspace(0.0, T, int(n_times))
    etas, traj = [], None
    for rt in rtols:
        rt = check_positive(rt, "rtols")
        traj = integrate_moments(mu0, Sigma0, controls, (0.0, T), t_eval=t, rtol=rt, atol=1e-4 * rt)
        if traj.status != "completed":
            raise ValueError(
                f"the moment ODE did not complete on [0, T] (status {traj.status!r}); "
                f"choose smaller controls or a shorter T"
            )
        sv = singular_values(traj.Sigma)
        etas.append(float(np.max(sv[:, r:] / sv[:, :1])) if r < mu0.shape[0] else 0.0)
    if traj is None:
        raise ValueError("rtols must hold at least one tolerance")
    return RankInvariance(
        t=traj.t,
        singular_values=sv,
        rank0=r,
        ranks=np.array([covariance_rank(S) for S in traj.Sigma]),
        rtols=np.array(list(rtols), float),
        eta=np.array(etas),
        status=traj.status,
    )


class RememberedControls:
    r"""``controls`` evaluated once per time: :math:`t \mapsto` ``controls(t)``, each value kept and returned again.

    Token clouds moved by :func:`gtcore.particles.simulate` over one span with one step count evaluate their
    controls at the same times (the RK4 stage times of the same step schedule); with this wrapper every cloud
    after the first reuses the first's :class:`~gtcore.controls.Controls` objects (and their converted tensors),
    the same numbers as evaluating again (``controls`` must be a deterministic function of ``t``). Keeps
    ``controls``' ``d``, ``breaks`` and ``span``.

    Parameters
    ----------
    controls : callable ``t -> Controls``
        Deterministic controls (a :class:`~gtcore.reachability.SteeringControls`, say).
    """

    def __init__(self, controls: Callable[[float], Controls]) -> None:
        self.controls = controls
        self._values: dict[float, Controls] = {}
        for name in ("d", "breaks", "span"):
            if hasattr(controls, name):
                setattr(self, name, getattr(controls, name))

    def __call__(self, t: float) -> Controls:
        t = float(t)
        value = self._values.get(t)
        if value is None:
            value = self._values[t] = self.controls(t)
        return value


def token_distances(
    controls: ControlsLike,
    mu0: Any,
    Sigma0: Any,
    mu1: Any,
    Sigma1: Any,
    T: float,
    ns: Sequence[int],
    repeats: int,
    steps: int,
    *,
    seed: int = 0,
    progress: bool = True,
    **simulate_kwargs,
) -> np.ndarray:
    r"""Bures–Wasserstein distance from N steered tokens' moments to the target, for each N.

    For each :math:`N` in ``ns`` and each of ``repeats`` seeded samples
    :math:`x_i \sim N(\mu_0, \Sigma_0)`, the tokens are moved by ``controls``
    and

    .. math::

        D_N = W_2\big(N(\hat\mu_N(T), \hat\Sigma_N(T)),\ N(\mu_1, \Sigma_1)\big)

    is recorded (:func:`gtcore.stats.gaussianity.bures_wasserstein`); the tokens are moved by
    :func:`gtcore.particles.simulate`, which steps exactly to the controls' breaks (``steps`` in
    total, shared by the pieces in proportion to their length). Sampling error makes
    :math:`D_N \sim N^{-1/2}`.

    Returns
    -------
    (len(ns), repeats) array
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0, "mu0", "Sigma0")
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1", mu0.shape[0])
    ns = [int(n) for n in ns]
    rng = np.random.default_rng(seed)
    out = np.empty((len(ns), int(repeats)))
    jobs = [(i, j) for i in range(len(ns)) for j in range(int(repeats))]
    for i, j in progress_bar(jobs, "tokens", enabled=progress):
        x0 = gaussian_tokens(ns[i], mu0, Sigma0, seed=rng)
        run = simulate(x0, controls, (0.0, T), steps, record_every=steps, **simulate_kwargs)
        if run.status != "completed":
            out[i, j] = np.inf
            continue
        m, S = empirical_moments(run.final_tokens)
        out[i, j] = bures_wasserstein(m, S, mu1, Sigma1)
    return out


__all__ = ["RankInvariance", "RememberedControls", "rank_invariance", "token_distances"]
