r"""The book's statistics against exact values: Mardia's excess, sliced W2, the noise band, the mixture tilt.

The chapters judge Gaussianity with :func:`gtcore.stats.gaussianity.sliced_w2` and
:func:`~gtcore.stats.gaussianity.mardia_kurtosis_excess` against the band of
:meth:`~gtcore.stats.gaussianity.NoiseFloor.band`, and explain mixtures with
:meth:`~gtcore.stats.mixtures.GaussianMixture.attention_average`. Each is checked here against an answer
computed independently of it, on clouds that are *not* Gaussian, *not* isotropic and *not* aligned with
the coordinate axes (an affine image :math:`x = Lz + m` with an ill-conditioned, rotated :math:`L`), so that
a statistic that forgot to whiten, or a wrong normalisation, shows:

* :func:`mardia_student_t`: for the multivariate Student :math:`t_\nu` in any dimension :math:`r`,
  :math:`\mathbb{E}\|y\|^4 = r(r+2)(\nu-2)/(\nu-4)` for the whitened variable, so Mardia's relative excess is
  :math:`2/(\nu - 4)` exactly (finite variance of the estimate needs :math:`\nu > 8`);
* :func:`sliced_w2_mixture`: for the two-component mixture :math:`z = m\varepsilon e_1 + g`,
  :math:`\varepsilon = \pm1`, :math:`g \sim N(0, \operatorname{diag}(1 - m^2, 1, 1))` (moments :math:`(0, I)`),
  every projection :math:`\theta^\top z` is the 1-D mixture :math:`\tfrac12 N(\pm mc, 1 - m^2c^2)`,
  :math:`c = \theta_1`, and in :math:`d = 3` :math:`c` is uniform on :math:`[-1, 1]` for :math:`\theta` uniform on
  the sphere (Archimedes). So the population value of the squared statistic is
  :math:`\int_0^1 w(c)\,dc`, :math:`w(c) = W_2^2(F_c, N(0,1)) = \int (x - \Phi^{-1}(F_c(x)))^2 f_c(x)\,dx`, by
  quadrature, and the :math:`K` random directions add a Monte Carlo error of standard deviation
  :math:`\sqrt{\operatorname{Var}_c w / K}`;
* :func:`band_coverage`: a fresh Gaussian sample's statistic falls in the central ``level`` band with
  probability ``level``;
* :func:`mixture_attention_quadrature`: the attention average :math:`\int y e^{y^\top Bx} d\rho / \int e^{y^\top Bx}
  d\rho` against a Gaussian mixture, by tensor Gauss–Hermite quadrature of each component.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtri, roots_hermitenorm, roots_legendre

from gtcore.stats.gaussianity import mardia_kurtosis_excess, noise_floor, sliced_w2
from gtcore.stats.mixtures import GaussianMixture, per_label_noise_floor

__all__ = [
    "ExactCheck",
    "band_coverage",
    "mardia_student_t",
    "mixture_attention_error",
    "mixture_attention_quadrature",
    "per_label_band_coverage",
    "random_affine",
    "sliced_w2_mixture",
    "sliced_w2_mixture_population",
]


@dataclass(frozen=True)
class ExactCheck:
    """A statistic's measured value, its exact value and the standard error of the difference.

    Attributes
    ----------
    measured, exact, se : float
    z : float
        ``(measured - exact) / se``.
    """

    measured: float
    exact: float
    se: float

    @property
    def z(self) -> float:
        return (self.measured - self.exact) / self.se

    def __repr__(self) -> str:
        return f"ExactCheck(measured={self.measured:.5g}, exact={self.exact:.5g}, z={self.z:.2f})"


def random_affine(d: int, rng: np.random.Generator, condition: float = 30.0) -> np.ndarray:
    r"""A seeded ill-conditioned :math:`L = R_1 \operatorname{diag}(\ell) R_2`, singular values from 1 to
    ``condition`` (log-spaced), :math:`R_1, R_2` Haar rotations."""
    R1, _ = np.linalg.qr(rng.standard_normal((d, d)))
    R2, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return R1 @ np.diag(np.geomspace(condition, 1.0, d)) @ R2


def mardia_student_t(nu: float, n: int, repeats: int, d: int, *, seed: int) -> ExactCheck:
    r"""Mardia's relative excess, averaged over ``repeats`` seeded samples of size ``n`` of an affine image
    of the multivariate :math:`t_\nu`, against :math:`2/(\nu - 4)`; ``se`` from the spread over repeats.

    Parameters
    ----------
    nu : float
        Degrees of freedom (> 8, so that the estimate has a variance).
    n, repeats, d : int
    seed : int

    Returns
    -------
    ExactCheck
    """
    if nu <= 8:
        raise ValueError(f"nu must exceed 8 (the estimate's variance needs 8 moments), got {nu!r}")
    rng = np.random.default_rng(seed)
    L = random_affine(d, rng)
    m = rng.standard_normal(d)
    vals = []
    for _ in range(repeats):
        z = rng.standard_normal((n, d)) / np.sqrt(rng.chisquare(nu, size=(n, 1)) / nu)
        vals.append(mardia_kurtosis_excess(z @ L.T + m))
    v = np.array(vals)
    return ExactCheck(float(v.mean()), 2.0 / (nu - 4.0), float(v.std(ddof=1) / np.sqrt(repeats)))


def _w2sq_mixture_1d(c: float, m: float, grid: int = 8001) -> float:
    r""":math:`W_2^2(\tfrac12 N(\pm mc, 1 - m^2c^2), N(0, 1))` by quadrature on :math:`x \in [-12, 12]`."""
    s = np.sqrt(1.0 - (m * c) ** 2)
    x = np.linspace(-12.0, 12.0, grid)
    a, b = (x - m * c) / s, (x + m * c) / s
    f = 0.5 * (np.exp(-0.5 * a * a) + np.exp(-0.5 * b * b)) / (s * np.sqrt(2 * np.pi))
    # Phi^-1(F(x)) from whichever tail is accurate: log F for x < 0, log(1 - F) for x > 0
    logF = np.logaddexp(log_ndtr(a), log_ndtr(b)) - np.log(2.0)
    logS = np.logaddexp(log_ndtr(-a), log_ndtr(-b)) - np.log(2.0)
    q = np.where(x < 0, ndtri(np.exp(logF)), -ndtri(np.exp(logS)))
    g = (x - q) ** 2 * f
    h = x[1] - x[0]
    return float(h * (g.sum() - 0.5 * (g[0] + g[-1])))


def sliced_w2_mixture_population(m: float, nodes: int = 32) -> tuple[float, float]:
    r"""(:math:`\mathbb{E}_c w(c)`, :math:`\operatorname{Var}_c w(c)`) for :math:`c` uniform on :math:`[-1, 1]`
    (the population squared sliced W2 of the module's mixture in :math:`d = 3`, and the variance of one
    direction's term), by Gauss–Legendre quadrature on :math:`[0, 1]` (:math:`w` is even)."""
    xg, wg = roots_legendre(nodes)
    c = 0.5 * (xg + 1.0)
    w = np.array([_w2sq_mixture_1d(float(ci), m) for ci in c])
    mean = float(0.5 * np.sum(wg * w))
    return mean, float(0.5 * np.sum(wg * w * w) - mean**2)


def sliced_w2_mixture(
    m: float, n: int, n_projections: int, *, seed: int, null_repeats: int = 8
) -> dict[str, ExactCheck]:
    r"""The squared :func:`~gtcore.stats.gaussianity.sliced_w2` of two affine images of the module's mixture
    (``n`` tokens, :math:`d = 3`) against its population value.

    The images are :math:`x = R\operatorname{diag}(\ell)z + c` with a Haar rotation :math:`R`:
    ``"compressed"`` shrinks the mixture's axis (:math:`\ell = (1, 5.5, 30)`), ``"stretched"`` stretches it
    (:math:`\ell = (30, 5.5, 1)`). An affine-invariant statistic gives both the population value; one that
    draws its directions in raw coordinates sees mostly the Gaussian directions of the first (too small) and
    mostly the mixture's axis in the second (too large), whichever the rotation.

    The finite sample adds to each direction's :math:`W_2^2` a small positive bias, estimated by the mean
    squared statistic of ``null_repeats`` Gaussian samples of the same size (and subtracted); ``se`` combines
    the directions' Monte Carlo error :math:`\sqrt{\operatorname{Var}_c w/K}` with the spread of that null.

    Returns
    -------
    dict of ExactCheck
        ``"compressed"`` and ``"stretched"``: ``measured`` is the bias-corrected squared statistic, ``exact``
        the population value.
    """
    rng = np.random.default_rng(seed)
    R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    eps = rng.choice([-1.0, 1.0], size=n)
    z = rng.standard_normal((n, 3)) * np.sqrt([1.0 - m * m, 1.0, 1.0])
    z[:, 0] += m * eps
    shift = rng.standard_normal(3)
    null = noise_floor(
        lambda g: sliced_w2(g, n_projections=n_projections, seed=0) ** 2,
        n,
        3,
        repeats=null_repeats,
        seed=int(rng.integers(2**32)),
    ).values
    mean, var = sliced_w2_mixture_population(m)
    se = float(np.sqrt(var / n_projections + null.var(ddof=1)))
    out = {}
    for name, ell in (("compressed", [1.0, 5.5, 30.0]), ("stretched", [30.0, 5.5, 1.0])):
        x = z @ (R @ np.diag(ell)).T + shift
        value = sliced_w2(x, n_projections=n_projections, seed=int(rng.integers(2**32))) ** 2
        out[name] = ExactCheck(float(value - null.mean()), mean, se)
    return out


def band_coverage(statistic: str, n: int, d: int, level: float, repeats: int, fresh: int, *, seed: int) -> ExactCheck:
    r"""The fraction of ``fresh`` new Gaussian samples whose statistic falls inside the ``level`` band of
    :func:`~gtcore.stats.gaussianity.noise_floor` (``repeats`` samples), against ``level``.

    The band's own coverage is random (an empirical quantile band of ``repeats`` values covers a fresh draw
    with probability of mean ``level`` and variance :math:`\approx \text{level}(1-\text{level})/\text{repeats}`),
    and the fresh fraction adds binomial noise, so ``se`` is
    :math:`\sqrt{\text{level}(1 - \text{level})(1/\text{repeats} + 1/\text{fresh})}`.

    Returns
    -------
    ExactCheck
    """
    from gtcore.stats.gaussianity import _STATISTICS

    floor = noise_floor(statistic, n, d, repeats=repeats, seed=seed)
    lo, hi = floor.band(level)
    rng = np.random.default_rng([seed, 1])
    stat = _STATISTICS[statistic]
    vals = np.array([stat(rng.standard_normal((n, d))) for _ in range(fresh)])
    cover = float(np.mean((vals >= lo) & (vals <= hi)))
    return ExactCheck(cover, level, float(np.sqrt(level * (1 - level) * (1.0 / repeats + 1.0 / fresh))))


def per_label_band_coverage(
    statistic: str, labels: np.ndarray, d: int, level: float, repeats: int, fresh: int, *, seed: int
) -> list[ExactCheck]:
    r""":func:`band_coverage` for each label's band of :func:`gtcore.stats.mixtures.per_label_noise_floor`:
    the fraction of ``fresh`` Gaussian samples *of that label's size* inside it, against ``level``.

    Returns
    -------
    list of ExactCheck
        One per label 0..K-1.
    """
    from gtcore.stats.gaussianity import _STATISTICS

    floors = per_label_noise_floor(statistic, labels, d, repeats=repeats, seed=seed)
    sizes = np.bincount(np.asarray(labels), minlength=len(floors))
    rng = np.random.default_rng([seed, 2])
    stat = _STATISTICS[statistic]
    se = float(np.sqrt(level * (1 - level) * (1.0 / repeats + 1.0 / fresh)))
    out = []
    for floor, n_k in zip(floors, sizes, strict=True):
        lo, hi = floor.band(level)
        vals = np.array([stat(rng.standard_normal((int(n_k), d))) for _ in range(fresh)])
        out.append(ExactCheck(float(np.mean((vals >= lo) & (vals <= hi))), level, se))
    return out


def mixture_attention_quadrature(mixture: GaussianMixture, x: np.ndarray, B: np.ndarray, nodes: int = 24) -> np.ndarray:
    r"""The attention average :math:`\int y e^{y^\top Bx}d\rho(y) / \int e^{y^\top Bx}d\rho(y)` against a
    Gaussian mixture, by tensor Gauss–Hermite quadrature (``nodes`` per axis) of each component
    :math:`y = \mu_k + C_k s`, :math:`C_kC_k^\top = \Sigma_k` (no moment generating function used).

    Parameters
    ----------
    mixture : GaussianMixture
    x : (n, d) array
        The queries.
    B : (d, d) array
        The query-key matrix (logits :math:`y^\top Bx`).
    nodes : int
        Gauss–Hermite nodes per axis (probabilists' weight :math:`e^{-s^2/2}`).

    Returns
    -------
    (n, d) ndarray
    """
    d = mixture.d
    s1, w1 = roots_hermitenorm(nodes)
    w1 = w1 / w1.sum()
    grids = np.meshgrid(*([s1] * d), indexing="ij")
    S = np.stack([g.ravel() for g in grids], axis=1)
    logw = np.sum(np.log(np.stack(np.meshgrid(*([w1] * d), indexing="ij"), 0).reshape(d, -1)), axis=0)
    Y, LW = [], []
    for wk, mk, Sk in zip(mixture.weights, mixture.means, mixture.covariances, strict=True):
        C = np.linalg.cholesky(Sk)
        Y.append(mk + S @ C.T)
        LW.append(np.log(wk) + logw)
    Yall, LWall = np.concatenate(Y), np.concatenate(LW)
    logits = Yall @ (np.asarray(x) @ np.asarray(B).T).T + LWall[:, None]  # (nodes, n): y^T B x + log weight
    logits -= logits.max(axis=0, keepdims=True)
    p = np.exp(logits)
    return (p.T @ Yall) / p.sum(axis=0)[:, None]


def mixture_attention_error(seed: int, *, d: int = 3, components: int = 3, queries: int = 16, nodes: int = 24) -> float:
    r"""Relative error of :meth:`gtcore.stats.mixtures.GaussianMixture.attention_average` against
    :func:`mixture_attention_quadrature` on a seeded general mixture: weights Dirichlet(1),
    means :math:`N(0, I)`, covariances :math:`WW^\top/d + 0.2 I` (:math:`W` i.i.d. :math:`N(0,1)`),
    a non-symmetric :math:`B = 0.5\,G/\sqrt d` and :math:`N(0, I)` queries,
    :math:`\max|a - a_{\rm quad}| / \max|a_{\rm quad}|`."""
    rng = np.random.default_rng(seed)
    covs = [W @ W.T / d + 0.2 * np.eye(d) for W in rng.standard_normal((components, d, d))]
    mix = GaussianMixture(rng.dirichlet(np.ones(components)), rng.standard_normal((components, d)), covs)
    B, x = 0.5 * rng.standard_normal((d, d)) / np.sqrt(d), rng.standard_normal((queries, d))
    ref = mixture_attention_quadrature(mix, x, B, nodes=nodes)
    return float(np.abs(mix.attention_average(x, B) - ref).max() / np.abs(ref).max())
