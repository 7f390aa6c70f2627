r"""Chapter 2 over general parameters: a feed-forward block with :math:`U \ne I`, :math:`c \ne 0`, and a
mixture with full covariances, in :math:`d \ge 3`.

**The feed-forward fold.** A layer with the block :math:`W\sigma(Ux + c)` and the identity activation moves a
token with the affine velocity :math:`(A + WU)x + (b + Wc) + V\,\text{attention}`, so its moment ODE is eq. (1.1)
with

.. math::

    A \to A + WU, \qquad b \to b + Wc

(:attr:`gtcore.controls.Controls.affine_A`, :attr:`~gtcore.controls.Controls.affine_b`). The N-token simulator
(:func:`gtcore.particles.simulate`) evaluates :math:`W(Ux_i + c)` token by token and never forms the fold, so it
is an independent answer: ``feedforward_fold_check`` moves R independent clouds through one general layer
(``general_feedforward_layer``: Ginibre :math:`A, V, B, U, W`, non-zero :math:`b, c`) and tests with
Hotelling's :math:`T^2` (:func:`gtcore.stats.inference.hotelling_test`) that their deviations from the moment ODE
started at each cloud's own moments have mean zero; the same clouds against the ODE of the fold without
:math:`Wc`, and with :math:`U` taken as the identity, are the controls.

**The mixture sampler.** :meth:`gtcore.stats.mixtures.GaussianMixture.sample` draws a label
:math:`k \sim w` and then :math:`\mu_k + L_kz`, :math:`L_kL_k^\top = \Sigma_k`. ``mixture_sample_check``
compares, for a mixture with full (rotated) covariances (``general_mixture``), each component's sample
mean and covariance with :math:`(\mu_k, \Sigma_k)`, the label counts with the weights, and the whole sample's
moments with the mixture's closed-form moments, every entry as a z-score: for a Gaussian component of
:math:`n_k` tokens :math:`\operatorname{Var}\bar x_i = \Sigma_{ii}/n_k` and (Isserlis)
:math:`\operatorname{Var}S_{ij} = (\Sigma_{ii}\Sigma_{jj} + \Sigma_{ij}^2)/n_k`; for the whole sample the
variances are the plug-in ones (the sample's own fourth moments).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.nulls import flow_deviations
from gtbook.studies.traced import Sides, collect
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.stats.inference import HotellingTest, hotelling_test
from gtcore.stats.mixtures import GaussianMixture

__all__ = [
    "FoldCheck",
    "GeneralLayer",
    "MixtureSampleCheck",
    "feedforward_fold_check",
    "general_feedforward_layer",
    "general_mixture",
    "mixture_sample_check",
]


@dataclass(frozen=True)
class GeneralLayer:
    r"""A general layer with a feed-forward block, and its Gaussian input.

    Attributes
    ----------
    controls : Controls
        :math:`A, b, V, B` (one head) and the block :math:`U, W, c` (square, width d).
    mu0, Sigma0 : (d,), (d, d)
    kappa_max : float
        The largest sampling strength :math:`\lambda_{\max}(B^\top\Sigma B\Sigma)` along the moment ODE on
        :math:`[0, T]`.
    """

    controls: Controls
    mu0: np.ndarray
    Sigma0: np.ndarray
    kappa_max: float

    def __repr__(self) -> str:
        return f"GeneralLayer(d={self.controls.d}, kappa_max={self.kappa_max:.3f})"


def _kappa_along(ctl: Controls, mu0: np.ndarray, S0: np.ndarray, T: float) -> float:
    """The largest sampling strength along the moment ODE on [0, T] (inf when it does not complete)."""
    ode = integrate_moments(mu0, S0, ctl, (0.0, float(T)), t_eval=np.linspace(0.0, float(T), 41))
    return float(max_sampling_strength(ctl, ode.t, ode.Sigma)) if ode.status == "completed" else float("inf")


def general_feedforward_layer(d: int, *, T: float, seed: int, kappa: float = 0.2) -> GeneralLayer:
    r"""One seeded general layer with a feed-forward block, with sampling strength at most ``kappa`` along
    its path.

    :math:`A, V, B, U, W` have i.i.d. entries :math:`N(0, s^2/d)` with :math:`s = 0.5, 0.8, 0.5, 1, 0.7`
    (so :math:`U` is neither the identity nor symmetric); :math:`b \sim N(0, 0.09I)`, :math:`c \sim N(0, 0.25I)`,
    :math:`\mu_0 \sim N(0, 0.25I)`; :math:`\Sigma_0 = s\,(FF^\top/d + \tfrac14 I)`, :math:`F` Ginibre, with the
    scale :math:`s` set (by bisection on :math:`\log s`) so that the largest
    :math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)` along the moment ODE on :math:`[0, T]` is ``kappa``:
    the finite-variance regime of the N-token softmax, where the clouds' deviations from their own moment ODE
    have mean zero up to :math:`O(1/N)`. A deterministic calibration of the input's scale, no draw is rejected.

    Parameters
    ----------
    d : int
        Dimension (>= 2).
    T : float
        The horizon along which the strength is calibrated.
    seed : int
    kappa : float
        The largest sampling strength along the path, in (0, 1/2).

    Returns
    -------
    GeneralLayer
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2, got {d!r}")
    if not 0.0 < kappa < 0.5:
        raise ValueError(f"kappa must lie in (0, 1/2), got {kappa!r}")
    rng = np.random.default_rng(seed)
    g = lambda s: s * rng.standard_normal((d, d)) / np.sqrt(d)  # noqa: E731
    A, V, B, U, W = g(0.5), g(0.8), g(0.5), g(1.0), g(0.7)
    b, c = 0.3 * rng.standard_normal(d), 0.5 * rng.standard_normal(d)
    mu0 = 0.5 * rng.standard_normal(d)
    F = rng.standard_normal((d, d))
    S1 = F @ F.T / d + 0.25 * np.eye(d)
    S1 = 0.5 * (S1 + S1.T)
    ctl = Controls(A=A, b=b, V=V, B=B, U=U, W=W, c=c)
    lo, hi = -12.0, 4.0  # log s: kappa(s) ~ s^2 for small s
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _kappa_along(ctl, mu0, np.exp(mid) * S1, T) < kappa else (lo, mid)
    S0 = np.exp(lo) * S1
    return GeneralLayer(ctl, mu0, S0, _kappa_along(ctl, mu0, S0, T))


@dataclass(frozen=True)
class FoldCheck:
    r"""Hotelling tests of N-token clouds through a general feed-forward layer against three moment ODEs.

    Attributes
    ----------
    layer : GeneralLayer
    tests : dict name -> HotellingTest
        ``"fold"`` (the layer's own ODE, :math:`A + WU`, :math:`b + Wc`), ``"without W c"`` and
        ``"U taken as I"`` (the ODEs of the two wrong folds).
    n_tokens, clouds, steps : int
    sides : Sides
        The library functions that moved the clouds (observed: the block evaluated token by token) and that
        integrated the three moment ODEs (predicted: the fold) (:func:`gtbook.studies.nulls.flow_deviations`).
    """

    layer: GeneralLayer
    tests: dict[str, HotellingTest]
    n_tokens: int
    clouds: int
    steps: int
    sides: Sides = field(default_factory=Sides.empty)

    def table(self) -> dict[str, dict[str, Any]]:
        """Per prediction: :math:`T^2` over its 99% quantile and the p-value."""
        return {
            k: dict(T2_over_threshold=round(t.ratio, 3), p_value=float(f"{t.p_value:.2g}"))
            for k, t in self.tests.items()
        }

    def __repr__(self) -> str:
        return (
            f"FoldCheck(d={self.layer.controls.d}, N={self.n_tokens}, clouds={self.clouds}, "
            + ", ".join(f"{k}: {t.ratio:.3g}" for k, t in self.tests.items())
            + ")"
        )


def feedforward_fold_check(
    d: int = 3,
    *,
    T: float = 1.0,
    seed: int,
    n_tokens: int = 2000,
    clouds: int = 24,
    steps: int = 10,
    level: float = 0.99,
) -> FoldCheck:
    r"""Move ``clouds`` clouds of ``n_tokens`` tokens through ``general_feedforward_layer`` (identity
    activation, ``steps`` RK4 steps over :math:`[0, T]`) and test their deviations from three moment ODEs
    (module docstring) with :func:`gtcore.stats.inference.hotelling_test` at ``level``.

    The layer is drawn with ``seed``, the clouds with ``seed + 1 + s`` (:func:`gtbook.studies.nulls.flow_deviations`).

    Returns
    -------
    FoldCheck
    """
    layer = general_feedforward_layer(d, T=T, seed=seed)
    c = layer.controls
    assert c.U is not None and c.W is not None and c.c is not None  # general_feedforward_layer gives a block
    predictions = {
        "fold": c,
        "without W c": Controls(A=c.A, b=c.b, V=c.V, B=c.B, U=c.U, W=c.W, c=np.zeros(d)),
        "U taken as I": Controls(A=c.A, b=c.b, V=c.V, B=c.B, U=np.eye(d), W=c.W, c=c.c),
    }
    with collect() as sides:
        dev = flow_deviations(
            c, layer.mu0, layer.Sigma0, T, n_tokens, clouds, steps, predictions=predictions, seed=int(seed) + 1
        )
    return FoldCheck(
        layer, {k: hotelling_test(v, level) for k, v in dev.items()}, int(n_tokens), int(clouds), int(steps), sides
    )


def general_mixture(
    d: int = 3, *, seed: int, weights: Any = (0.5, 0.3, 0.2), eigenvalue_range: tuple[float, float] = (0.2, 2.0)
) -> GaussianMixture:
    r"""A seeded mixture with full covariances: means :math:`N(0, I)`, covariances :math:`R\Lambda R^\top` with
    :math:`R` a Haar rotation and :math:`\log\Lambda` uniform on :math:`\log` ``eigenvalue_range`` (no
    eigenvector along an axis, so every covariance has non-zero off-diagonal entries).

    Parameters
    ----------
    d : int
    seed : int
    weights : (K,) sequence
    eigenvalue_range : (low, high)

    Returns
    -------
    GaussianMixture
    """
    rng = np.random.default_rng(seed)
    w = np.asarray(weights, float)
    covs = []
    for _ in range(w.size):
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(R))
        lo, hi = (float(x) for x in np.log(eigenvalue_range))
        lam = np.exp(rng.uniform(lo, hi, d))
        S = (Q * lam) @ Q.T
        covs.append(0.5 * (S + S.T))
    return GaussianMixture(w, rng.standard_normal((w.size, d)), covs)


@dataclass(frozen=True)
class MixtureSampleCheck:
    r"""A mixture sample's moments against the mixture's, as z-scores (module docstring).

    Attributes
    ----------
    z_components : (K, d + d(d+1)/2) array
        Per component: the mean's entries, then the covariance's upper triangle.
    z_counts : (K,) array
        :math:`(n_k - nw_k)/\sqrt{nw_k(1 - w_k)}`.
    z_mixture : (d + d(d+1)/2,) array
        The whole sample against :meth:`gtcore.stats.mixtures.GaussianMixture.moments` (plug-in variances).
    n : int
    """

    z_components: np.ndarray
    z_counts: np.ndarray
    z_mixture: np.ndarray
    n: int

    @property
    def max_abs_z(self) -> float:
        """The largest :math:`|z|` over every entry."""
        return float(max(np.abs(self.z_components).max(), np.abs(self.z_counts).max(), np.abs(self.z_mixture).max()))

    @property
    def count(self) -> int:
        """How many z-scores enter :attr:`max_abs_z`."""
        return int(self.z_components.size + self.z_counts.size + self.z_mixture.size)

    def __repr__(self) -> str:
        return f"MixtureSampleCheck(n={self.n}, {self.count} z-scores, max |z| = {self.max_abs_z:.2f})"


def _moment_z(x: np.ndarray, mu: np.ndarray, Sigma: np.ndarray, *, plug_in: bool) -> np.ndarray:
    n, d = x.shape
    iu = np.triu_indices(d)
    m = x.mean(axis=0)
    S = np.cov(x, rowvar=False, ddof=1)
    if plug_in:  # the sample's own second and fourth central moments
        y = x - m
        var_m = y.var(axis=0, ddof=1) / n
        prod = y[:, iu[0]] * y[:, iu[1]]
        var_S = prod.var(axis=0, ddof=1) / n
    else:  # a Gaussian sample of (mu, Sigma)
        var_m = np.diag(Sigma) / n
        var_S = (Sigma[iu[0], iu[0]] * Sigma[iu[1], iu[1]] + Sigma[iu] ** 2) / n
    return np.concatenate([(m - mu) / np.sqrt(var_m), (S[iu] - Sigma[iu]) / np.sqrt(var_S)])


def mixture_sample_check(mixture: GaussianMixture, n: int, *, seed: int) -> MixtureSampleCheck:
    r"""Draw ``n`` labelled tokens with :meth:`~gtcore.stats.mixtures.GaussianMixture.sample` (``seed``) and
    compare their moments with the mixture's (module docstring).

    Returns
    -------
    MixtureSampleCheck
    """
    if isinstance(n, bool) or int(n) != n or n < 10:
        raise ValueError(f"n must be an integer >= 10, got {n!r}")
    s = mixture.sample(int(n), seed=seed)
    w = np.asarray(mixture.weights)
    counts = np.bincount(s.labels, minlength=w.size)
    z_counts = (counts - n * w) / np.sqrt(n * w * (1 - w))
    z_comp = np.stack(
        [
            _moment_z(
                s.tokens[s.labels == k], np.asarray(mixture.means[k]), np.asarray(mixture.covariances[k]), plug_in=False
            )
            for k in range(w.size)
        ]
    )
    mu, Sigma = mixture.moments()
    return MixtureSampleCheck(z_comp, z_counts, _moment_z(s.tokens, mu, Sigma, plug_in=True), int(n))
