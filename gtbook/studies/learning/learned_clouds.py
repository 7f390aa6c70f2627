r"""Chapter 9: what a trained network does to token clouds it was not trained on.

* how far a network's outputs leave the start's subspace (:func:`off_subspace_ratio`), and how that thickness
  falls with the number of tokens (:func:`thickness_against_n`);
* the softmax's sampling strength (:func:`max_sampling_strength`) and how many tokens a query attends to
  (:func:`attended_tokens`);
* the finite-N network against its own mean-field limit on Gaussians (:func:`mean_field_departure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.learning.harness import LearningRun, Target, standard_start
from gtbook.studies.learning.statistics import gaussian_w2
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore._validation import check_count, check_moments
from gtcore.reachability import covariance_rank
from gtcore.stats.gaussianity import NoiseFloor
from gtcore.stats.inference import loglog_slope
from gtcore.stats.sampling import gaussian_tokens
from gtcore.training import (
    apply_transformer,
    empirical_rank_floor,
    w2_squared,
)


# ------------------------------------------------------------------------------- leaving the subspace
def off_subspace_ratio(x: Any, r: int) -> float:
    r""":math:`\sigma_{r+1}/\sigma_1`, the singular values of the centred cloud: how far ``x`` is from lying in an
    :math:`r`-dimensional affine subspace, relative to its width (0 exactly in one)."""
    x = np.asarray(x, float)
    sv = np.linalg.svd(x - x.mean(axis=0), compute_uv=False)
    return float(sv[int(r)] / sv[0])


@dataclass
class Thickness:
    r"""How far a trained network's output leaves the start's :math:`r`-dimensional subspace, against N.

    Attributes
    ----------
    n_tokens : (m,) array
    ratios : (m, clouds) array
        :func:`off_subspace_ratio` of the output for fresh input clouds of each N.
    losses, floors : (m, clouds) arrays, or None
        With a target: :math:`W_2^2` of each output cloud to a fresh target sample of its size, and
        :math:`F_r(\hat\Sigma_Y)` of that sample.
    slope : float
        Log–log slope of the mean ratio against N.
    kappa : float
        The largest sampling strength :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)` of the trained
        layers along the exact layer maps (finite-variance softmax weights, and the :math:`N^{-1/2}` rate,
        need :math:`\kappa < 1/2`; :meth:`gtcore.attention.DotProduct.sampling_strength`).
    """

    n_tokens: np.ndarray
    ratios: np.ndarray
    slope: float
    kappa: float
    losses: np.ndarray | None = None
    floors: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"Thickness(slope {self.slope:.3f}, kappa {self.kappa:.3f}, N = {self.n_tokens.tolist()})"


def thickness_against_n(
    run: LearningRun, ns: Sequence[int], *, clouds: int, seed: int, target: Target | None = None
) -> Thickness:
    r"""The trained network of ``run`` on ``clouds`` fresh input clouds of each N in ``ns``: the off-subspace
    ratio :math:`\sigma_{r+1}/\sigma_1` of its output (:math:`r` the start's rank), its mean's log–log slope in
    N, the largest :math:`\kappa` of its layers and, with a ``target``, the loss of each cloud against a fresh
    target sample of its size and that sample's floor :math:`F_r(\hat\Sigma_Y)`."""
    t = run.training
    mu0, Sigma0 = standard_start(t.controls[0].d, run.start_rank)
    rng = np.random.default_rng(seed)
    ns = [check_count(n, "ns", 2) for n in ns]
    clouds = check_count(clouds, "clouds")
    ratios = np.empty((len(ns), clouds))
    losses = None if target is None else np.empty((len(ns), clouds))
    floors = None if target is None else np.empty((len(ns), clouds))
    for i, n in enumerate(ns):
        for k in range(clouds):
            out = apply_transformer(gaussian_tokens(n, mu0, Sigma0, seed=rng), t.controls, t.h)
            ratios[i, k] = off_subspace_ratio(out, run.start_rank)
            if target is not None and losses is not None and floors is not None:  # all three or none
                y = gaussian_tokens(n, target.mu, target.Sigma, seed=rng)
                losses[i, k] = w2_squared(out, y)
                floors[i, k] = empirical_rank_floor(y, run.start_rank)
    return Thickness(
        n_tokens=np.array(ns),
        ratios=ratios,
        slope=loglog_slope(ns, ratios.mean(axis=1)),
        kappa=max_sampling_strength(run),
        losses=losses,
        floors=floors,
    )


def max_sampling_strength(run: LearningRun) -> float:
    r"""The largest :math:`\kappa = \lambda_{\max}(B^\top\Sigma_lB\Sigma_l)` of the trained layers along the exact
    layer maps from the start (:meth:`gtcore.attention.DotProduct.sampling_strength`; 0 without attention). The N-token
    softmax average is a self-normalised importance-sampling estimate of its Gaussian tilt, with
    finite-variance weights only while :math:`\kappa < 1/2` (chapter 1); ``inf`` if the Gaussian blows up."""
    from gtcore.attention import DotProduct
    from gtcore.moments import layer_stack

    t = run.training
    if not t.attention:
        return 0.0
    mu0, Sigma0 = standard_start(t.controls[0].d, run.start_rank)
    traj = layer_stack(mu0, Sigma0, list(t.controls), t.h)
    if traj.status != "completed":
        return float("inf")
    dot = DotProduct()
    return float(
        max(dot.sampling_strength(S, B) for c, S in zip(t.controls, traj.Sigma[:-1], strict=True) for B in c.B)
    )


def attended_tokens(run: LearningRun, *, seed: int) -> np.ndarray:
    r"""Per layer, the median over query tokens of :math:`1/\sum_j P_{ij}^2`, the effective number of tokens a
    query attends to (:math:`N` for uniform weights, 1 for a hard maximum), on one fresh input cloud of the
    run's N (heads summed over: the smallest head per layer). ``inf`` per layer without attention."""
    import torch

    t = run.training
    x = gaussian_tokens(t.n_tokens, *standard_start(t.controls[0].d, run.start_rank), seed=seed)
    out = []
    for c in t.controls:
        if not np.any(c.V):
            out.append(np.inf)
        else:
            xt = torch.as_tensor(x)
            ess = [
                float(
                    torch.median(
                        1.0 / (torch.softmax((xt @ torch.as_tensor(np.array(B)).T) @ xt.T, dim=1) ** 2).sum(dim=1)
                    )
                )
                for B in c.B
            ]
            out.append(min(ess))
        x = apply_transformer(x, (c,), t.h)
    return np.array(out)


@dataclass
class MeanFieldDeparture:
    r"""How far a trained network's N tokens are from its own Gaussian (mean-field) dynamics.

    The exact layer maps of the learned controls (:func:`gtcore.moments.layer_stack`) move the start
    :math:`N(\mu_0, \Sigma_0)` to :math:`N(\mu_L, \Sigma_L)`: what the layers do to the Gaussian, the mean-field
    limit of the N-token network.

    Attributes
    ----------
    departure : float
        Mean over fresh input clouds of :math:`W_2(N(\hat\mu, \hat\Sigma), N(\mu_L, \Sigma_L))`, the output
        cloud's moments against that endpoint (``inf`` when the Gaussian dynamics blow up).
    floor : NoiseFloor
        The same distance for N i.i.d. tokens of :math:`N(\mu_L, \Sigma_L)`: the part that is sampling.
    endpoint_w2sq : float
        :math:`W_2^2(N(\mu_L, \Sigma_L), N(\mu_1, \Sigma_1))`, the Gaussian prediction of the loss.
    endpoint_rank : int
        The numerical rank of :math:`\Sigma_L`.
    kappa : float
        :func:`max_sampling_strength`.
    sides : Sides
        The network on the fresh input clouds (observed); the exact layer maps and the floor's samples of their
        endpoint (predicted). Both distances are :func:`gtbook.studies.learning.statistics.gaussian_w2`, the
        comparison, traced on neither side.
    """

    departure: float
    floor: NoiseFloor
    endpoint_w2sq: float
    endpoint_rank: int
    kappa: float
    sides: Sides = field(default_factory=Sides.empty)

    @property
    def departed(self) -> bool:
        """Whether the output moments are beyond the 99% quantile of the sampling floor (always, when the
        Gaussian dynamics of the learned controls blow up and the tokens do not)."""
        return bool(np.isinf(self.departure) or self.departure > self.floor.band(0.98)[1])

    def __repr__(self) -> str:
        return (
            f"MeanFieldDeparture(departure {self.departure:.3g}, floor q99 {self.floor.band(0.98)[1]:.3g}, "
            f"endpoint W2^2 {self.endpoint_w2sq:.3g}, rank {self.endpoint_rank}, kappa {self.kappa:.3g})"
        )


def mean_field_departure(
    run: LearningRun, mu1: Any, Sigma1: Any, *, clouds: int, repeats: int, seed: int
) -> MeanFieldDeparture:
    """:class:`MeanFieldDeparture` of ``run`` (``clouds`` fresh input clouds, a floor of ``repeats`` samples)."""
    from gtcore.moments import layer_stack
    from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments

    t = run.training
    mu1, Sigma1 = check_moments(mu1, Sigma1, "mu1", "Sigma1")
    mu0, Sigma0 = standard_start(t.controls[0].d, run.start_rank)
    n = t.n_tokens
    rng = np.random.default_rng(seed)
    floor_values = np.full(check_count(repeats, "repeats", 2), np.inf)
    with collect() as sides:
        with predicted():
            traj = layer_stack(mu0, Sigma0, list(t.controls), t.h)
        if traj.status != "completed":
            return MeanFieldDeparture(
                float("inf"),
                NoiseFloor(floor_values, n, 0),
                float("inf"),
                int(covariance_rank(traj.Sigma[-1])),
                float("inf"),
                sides,
            )
        mL, SL = traj.final
        dist = []
        for _ in range(check_count(clouds, "clouds")):
            with observed():
                out = apply_transformer(gaussian_tokens(n, mu0, Sigma0, seed=rng), t.controls, t.h)
            dist.append(gaussian_w2(*empirical_moments(out), mL, SL))
        for k in range(floor_values.size):
            with predicted():  # the floor, its statistic included
                floor_values[k] = gaussian_w2(*empirical_moments(gaussian_tokens(n, mL, SL, seed=rng)), mL, SL)
    return MeanFieldDeparture(
        departure=float(np.mean(dist)),
        floor=NoiseFloor(floor_values, n, 0),
        endpoint_w2sq=bures_wasserstein(mL, SL, mu1, Sigma1) ** 2,
        endpoint_rank=int(covariance_rank(SL)),
        kappa=max_sampling_strength(run),
        sides=sides,
    )


__all__ = [
    "MeanFieldDeparture",
    "Thickness",
    "attended_tokens",
    "max_sampling_strength",
    "mean_field_departure",
    "off_subspace_ratio",
    "thickness_against_n",
]
