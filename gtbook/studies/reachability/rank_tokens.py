r"""Rank invariance seen on N tokens: how far a rank-r cloud leaves its subspace, against N.

Tokens :math:`x_i = \mu_0 + Fz_i` (:math:`F \in \mathbb{R}^{d\times r}`) span an r-dimensional affine
subspace. One residual layer of the finite-N Transformer moves them by
:math:`x_i \mapsto x_i + h(Ax_i + b + Va_i)`, with :math:`a_i = \sum_j w_{ij}x_j` the softmax average:
a convex combination of the tokens, so :math:`a_i - \bar a` lies in the cloud's direction space
:math:`L = \operatorname{range}F`. Writing the centred tokens as :math:`D = LZ` and the centred
averages as :math:`E = LY` (:math:`Z, Y \in \mathbb{R}^{r\times N}`), the layer maps them to

.. math::

    D^+ = (I + hA)LZ + hVLY = \big[(I + hA)L + hVLK\big]Z + hVL\,(Y - KZ),

for any :math:`r\times r` matrix :math:`K`. If the averages were an affine function of the tokens
(:math:`Y = KZ`, which is what the Gaussian tilt :math:`a(x) = \mu + \Sigma Bx` gives) the cloud would
stay in an r-dimensional subspace, the paper's invariant. At finite N the softmax average over a
Gaussian sample equals the tilt of the sample's own moments up to a fluctuation that is not affine in
the query and is of order :math:`N^{-1/2}` while the importance weights have finite variance
(:math:`\kappa < \tfrac12`, :func:`gtcore.attention.max_sampling_strength`). So the residual
:math:`Y - KZ` (with :math:`K` the least-squares fit) is :math:`O(N^{-1/2})`, and so is the cloud's
**excess spread** outside r dimensions,

.. math::

    \epsilon = \sqrt{\lambda_{r+1}(\hat\Sigma)/\lambda_1(\hat\Sigma)},

after any fixed number of layers (first order in the residual; its square, the excess *variance*,
is :math:`O(N^{-1})`). The prediction is the rate :math:`\epsilon \propto N^{-1/2}`. For a non-Gaussian
law on the same subspace (uniform, moment-matched) the population average itself is not affine in
the query, the residual does not vanish, and :math:`\epsilon` levels off: the control.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.traced import Sides, collect, merge, no_prediction, observed
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.particles import simulate
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error

__all__ = ["RankOnTokens", "excess_spread", "random_rank_draw", "rank_on_tokens"]


def excess_spread(x: Any, r: int) -> float:
    r""":math:`\sqrt{\lambda_{r+1}/\lambda_1}` of the empirical covariance of the tokens ``x`` (N, d).

    Parameters
    ----------
    x : (N, d) array
        The tokens.
    r : int
        The rank of the subspace they started in (``r < d``).

    Returns
    -------
    float
        The relative standard deviation of the cloud outside its ``r`` widest directions.
    """
    x = np.asarray(x, float)
    lam = np.sort(np.linalg.eigvalsh(np.cov(x.T)))[::-1]
    return float(np.sqrt(max(lam[r], 0.0) / lam[0]))


def random_rank_draw(d: int, r: int, rng: np.random.Generator, *, kappa: float = 0.15) -> tuple[Controls, np.ndarray]:
    r"""Constant controls (non-zero :math:`A`, non-scalar :math:`V`, non-symmetric :math:`B`) and a factor :math:`F`.

    :math:`A, V, B` are Ginibre matrices scaled by :math:`0.5/\sqrt d`, :math:`0.8/\sqrt d`,
    :math:`0.5/\sqrt d`, :math:`b \sim N(0, 0.09 I)`, and :math:`F` (d, r) Ginibre rescaled so that the
    sampling strength at :math:`t = 0` is ``kappa`` (the finite-variance regime, where the
    :math:`N^{-1/2}` rate is predicted).

    Parameters
    ----------
    d, r : int
        Dimension and rank (``1 <= r < d``).
    rng : numpy Generator
    kappa : float
        The sampling strength :math:`\lambda_{\max}(B^\top\Sigma_0B\Sigma_0)` of :math:`\Sigma_0 = FF^\top`.

    Returns
    -------
    controls, F
    """
    A = 0.5 * rng.standard_normal((d, d)) / np.sqrt(d)
    V = 0.8 * rng.standard_normal((d, d)) / np.sqrt(d)
    B = 0.5 * rng.standard_normal((d, d)) / np.sqrt(d)
    b = 0.3 * rng.standard_normal(d)
    F = rng.standard_normal((d, r))
    ctl = Controls(A=A, b=b, V=V, B=B)
    k0 = max_sampling_strength(ctl, [0.0], [F @ F.T])
    F = F * (kappa / k0) ** 0.25  # kappa scales like |Sigma|^2 = |F|^4
    return ctl, F


@dataclass(frozen=True)
class RankOnTokens:
    r"""Excess spread of rank-r token clouds after ``layers`` residual layers, over draws, N and seeds.

    Attributes
    ----------
    Ns : (n,) int array
    excess : (draws, n, seeds) array
        :func:`excess_spread` of each final cloud.
    law : str
        ``"gaussian"`` or ``"uniform"`` (moment-matched to the same :math:`(\mu_0, FF^\top)`).
    kappa_max : float
        The largest sampling strength along the moment ODE over all draws.
    slope : float
        The pooled log-log slope of the seed-mean excess in N, one intercept per draw.
    sides : Sides
        The traced sides (:mod:`gtbook.studies.traced`): the clouds drawn and moved by the token layers
        (observed); the prediction is the rate :math:`N^{-1/2}` itself, so its side runs no library code.
    """

    Ns: np.ndarray
    excess: np.ndarray
    law: str
    kappa_max: float
    slope: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def slope_standard_error(self, n_boot: int = 2000, seed: int = 0) -> float:
        """Bootstrap standard error of ``slope`` (seeds resampled within each draw and N)."""
        return pooled_slope_standard_error(self.Ns, self.excess, n_boot=n_boot, seed=seed)

    def __repr__(self) -> str:
        return (
            f"RankOnTokens(law={self.law!r}, draws={self.excess.shape[0]}, Ns={self.Ns.tolist()}, "
            f"seeds={self.excess.shape[2]}, slope={self.slope:.3f}, kappa_max={self.kappa_max:.3f})"
        )


def rank_on_tokens(
    d: int,
    r: int,
    Ns: Sequence[int] | np.ndarray,
    *,
    draws: int,
    seeds: int,
    layers: int,
    T: float = 1.0,
    law: str = "gaussian",
    seed: int = 0,
    kappa: float = 0.15,
    kappa_cap: float = 0.45,
    max_tries: int = 100,
) -> RankOnTokens:
    r"""Run ``layers`` residual layers (explicit Euler, step :math:`T/\text{layers}`) on rank-r clouds.

    Parameters
    ----------
    d, r : int
        Dimension and rank of the initial cloud.
    Ns : sequence of int
        Token counts.
    draws : int
        Controls drawn by :func:`random_rank_draw` (seeded by ``seed``).
    seeds : int
        Clouds per draw and N.
    layers : int
        Residual layers.
    T : float
        Depth :math:`T = h\cdot\text{layers}`.
    law : {"gaussian", "uniform"}
        The cloud's law on the subspace: :math:`z \sim N(0, I_r)`, or i.i.d. uniform coordinates
        on :math:`[-\sqrt3, \sqrt3]` (same two moments).
    seed : int
        Seeds the draws; cloud ``s`` of draw ``k`` at size N uses ``seed + 1000 (k+1) + s``.
    kappa : float
        The initial sampling strength of each draw (:func:`random_rank_draw`).
    kappa_cap : float
        A draw is kept only if the sampling strength stays below this along the moment ODE (the
        rate is predicted in the finite-variance regime :math:`\kappa < \tfrac12`); others are
        redrawn (at most ``max_tries`` draws in all).
    max_tries : int
        Cap on the number of draws tried.

    Returns
    -------
    RankOnTokens
    """
    if law not in ("gaussian", "uniform"):
        raise ValueError(f"law must be 'gaussian' or 'uniform', got {law!r}")
    if not 1 <= r < d:
        raise ValueError(f"need 1 <= r < d, got r={r}, d={d}")
    rng = np.random.default_rng(seed)
    Ns = np.asarray(Ns, int)
    out = np.empty((draws, len(Ns), seeds))
    kappa_max = 0.0
    tries = 0
    traced: list[Sides] = []
    for k in range(draws):
        while True:
            tries += 1
            if tries > max_tries:
                raise ValueError(f"no draw keeps kappa below {kappa_cap} in {max_tries} tries")
            ctl, F = random_rank_draw(d, r, rng, kappa=kappa)
            ode = integrate_moments(np.zeros(d), F @ F.T, ctl, (0.0, T), t_eval=np.linspace(0.0, T, layers + 1))
            k_path = max_sampling_strength(ctl, ode.t, ode.Sigma)
            if k_path < kappa_cap:
                break
        kappa_max = max(kappa_max, k_path)
        for i, N in enumerate(Ns):
            for s in range(seeds):
                g = np.random.default_rng(seed + 1000 * (k + 1) + s)
                z = g.standard_normal((N, r)) if law == "gaussian" else g.uniform(-np.sqrt(3), np.sqrt(3), (N, r))
                with collect() as sides, observed():  # the token layers (the draw's kappa check: on neither side)
                    tr = simulate(
                        z @ F.T,
                        ctl,
                        (0.0, T),
                        layers,
                        method="euler",
                        record_every=layers,
                        keep_tokens=True,
                        device="cpu",
                    )
                traced.append(sides)
                assert tr.tokens is not None  # keep_tokens=True
                out[k, i, s] = excess_spread(tr.tokens[-1], r)
    return RankOnTokens(Ns, out, law, float(kappa_max), pooled_loglog_slope(Ns, out), no_prediction(merge(*traced)))
