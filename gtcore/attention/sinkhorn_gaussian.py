r"""The Gaussian closed forms of Sinkhorn attention: the conditional gain and the column potential.

**Against a Gaussian** :math:`\rho = N(\mu, \Sigma)` the mean-field problem is entropic optimal
transport from :math:`\rho` to itself with cost :math:`-y^\top Bx`: the coupling
:math:`\pi(dx, dy) = e^{f(x) + g(y) + y^\top Bx}\rho(dx)\rho(dy)` with both marginals
:math:`\rho`, and the attention average at :math:`x` is :math:`\mathbb{E}_\pi[y \mid x]`
(``gaussian_conditional_gain``, valid for every, not necessarily symmetric, :math:`B`). The attention type
(:class:`gtcore.attention.sinkhorn.Sinkhorn`) takes its tilt from here, and the finite-N scaling
(:mod:`gtcore.attention.sinkhorn_scaling`) its starting potential.
"""

from __future__ import annotations

import math

import numpy as np

from gtcore._linalg import RANK_RTOL, psd_sqrt

__all__ = ["gaussian_column_potential", "gaussian_conditional_gain"]


def gaussian_conditional_gain(Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""The gain :math:`M` of Sinkhorn attention against :math:`N(\mu, \Sigma)`:
    :math:`\mathbb{E}_\pi[y\mid x] = \mu + M(x - \mu)`.

    .. math::

        M = 2\,\Sigma^{1/2}\big(I + (I + 4\,\Sigma^{1/2}B\Sigma B^\top\Sigma^{1/2})^{1/2}\big)^{-1}\Sigma^{1/2}B .

    Derivation (entropic parameter 1, any square :math:`B`). Try a Gaussian coupling of
    :math:`(x, y)` with both marginals :math:`N(\mu, \Sigma)` and cross-covariance
    :math:`C = \operatorname{Cov}(x, y)`. Its density is
    :math:`e^{f(x) + g(y) + y^\top Bx}\rho(x)\rho(y)` for some potentials (quadratic, which absorb
    every term in :math:`x` or :math:`y` alone) iff the :math:`xy` block of the joint precision
    is :math:`-B^\top`. By the block inverse that block is
    :math:`-\Sigma^{-1}C(\Sigma - C^\top\Sigma^{-1}C)^{-1}`. Whitening,
    :math:`C = \Sigma^{1/2}K\Sigma^{1/2}`, the condition reads

    .. math::

        K(I - K^\top K)^{-1} = G := \Sigma^{1/2}B^\top\Sigma^{1/2}.

    With the SVD :math:`G = U\,\mathrm{diag}(s)\,W^\top`, :math:`K = U\,\mathrm{diag}(k)\,W^\top`
    solves it iff :math:`k/(1 - k^2) = s`, whose only root in :math:`[0, 1)` (a positive-definite
    joint covariance) is :math:`k = 2s/(1 + \sqrt{1 + 4s^2})`; in matrix form
    :math:`K = 2G(I + (I + 4G^\top G)^{1/2})^{-1}`. The Schrödinger system has one solution
    (the cost is integrable against :math:`\rho\otimes\rho`), so this Gaussian coupling is the
    entropic optimum, and the conditional mean is
    :math:`\mathbb{E}[y\mid x] = \mu + C^\top\Sigma^{-1}(x - \mu)`, with
    :math:`C^\top\Sigma^{-1} = \Sigma^{1/2}K^\top\Sigma^{-1/2} = M` above (no inverse of
    :math:`\Sigma` is left, so the formula also holds for singular :math:`\Sigma`, on its support).
    For the cost :math:`\|x - y\|^2/(2\sigma^2)` (:math:`B = I/\sigma^2`) it is the
    cross-covariance :math:`\tfrac12((4\Sigma^2 + \sigma^4 I)^{1/2} - \sigma^2 I)` of Janati et al.
    (2020) and Mallasto et al. (2021) between two equal Gaussians.

    Properties: :math:`M \approx \Sigma B` for small :math:`\Sigma^{1/2}B\Sigma^{1/2}` (the dot
    product's tilt), and :math:`\|\Sigma^{-1/2}M\Sigma^{1/2}\|_2 = \|K\|_2 < 1` always, so
    :math:`\|C\|_2 \le \|\Sigma\|_2`.

    Parameters
    ----------
    Sigma : (..., d, d) array
        The covariance (positive semi-definite; singular allowed); leading axes broadcast against ``B``'s.
    B : (..., d, d) array
        The query-key matrix (any square matrix).

    Returns
    -------
    (..., d, d) ndarray
        The gain :math:`M` (one per broadcast pair).
    """
    Sh = psd_sqrt(0.5 * (Sigma + np.swapaxes(Sigma, -1, -2)))
    d = Sh.shape[-1]
    # Far out (a float32 covariance near 1e19, as an integrator's trial step may reach) G^T G overflows: R is then
    # non-finite, not "well", and the closed form below takes over from G itself, which is still finite. The overflow
    # is expected there, so it is not reported.
    with np.errstate(over="ignore", invalid="ignore"):
        T = Sh @ B @ Sigma @ np.swapaxes(B, -1, -2) @ Sh
        R = psd_sqrt(np.eye(d) + 2.0 * (T + np.swapaxes(T, -1, -2)))
    well = np.trace(R, axis1=-2, axis2=-1) <= _solve_max(R.dtype)  # False for a non-finite R too
    if np.all(well):
        return 2.0 * Sh @ np.linalg.solve(np.eye(d) + R, Sh @ B)
    return _gain_where_ill_conditioned(Sh, B, R, well)


def _solve_max(dtype: np.dtype) -> float:
    r"""The largest :math:`\operatorname{tr} R` for which :func:`gaussian_conditional_gain` solves with :math:`I + R`:
    :math:`1/\sqrt{\varepsilon}` of the dtype (6.7e7 in float64, 2.9e3 in float32). The condition number of
    :math:`I + R` is at most :math:`1 + \operatorname{tr} R`, and the formed :math:`R` carries an absolute error of
    :math:`\varepsilon\|R\|`, so the identity's part, which sets the gain on the directions where
    :math:`\Sigma^{1/2}B\Sigma^{1/2}` is small, keeps at least half its digits."""
    return 1.0 / math.sqrt(float(np.finfo(dtype).eps))


def _gain_where_ill_conditioned(Sh: np.ndarray, B: np.ndarray, R: np.ndarray, well: np.ndarray) -> np.ndarray:
    r""":func:`gaussian_conditional_gain` where some :math:`I + R` is too ill-conditioned for a solve.

    For a large :math:`\Sigma^{1/2}B\Sigma^{1/2}` (a covariance far out, as a trial step of the integrator may
    reach) the identity in :math:`I + R` is lost to the round-off of :math:`R`, and on a rank-deficient
    :math:`G^\top G` (a singular :math:`\Sigma` or :math:`B`) the formed matrix can be exactly singular. There the
    inverse is taken in closed form from the SVD :math:`G = U\operatorname{diag}(s)W^\top` of
    :math:`G = \Sigma^{1/2}B^\top\Sigma^{1/2}` (:math:`G^\top G = \Sigma^{1/2}B\Sigma B^\top\Sigma^{1/2}`):

    .. math::

        (I + R)^{-1} = W\operatorname{diag}\big(1/(1 + \sqrt{1 + 4s^2})\big)W^\top ,

    whose eigenvalues lie in :math:`(0, 1/2]` whatever the scale (a small :math:`s` is computed to an absolute
    :math:`\varepsilon\|G\|`, and enters squared). The well-conditioned entries of a stack keep the solve, bit for
    bit; a non-finite :math:`G` gives NaN (an integrator's trial step rejects it).
    """
    d = Sh.shape[-1]
    shape = R.shape
    Sh, B = np.broadcast_to(Sh, shape), np.broadcast_to(B, shape)
    X = Sh @ B
    Y = np.full(shape, np.nan, dtype=np.result_type(Sh, B))
    if np.any(well):
        Y[well] = np.linalg.solve(np.eye(d) + R[well], X[well])
    G = Sh @ np.swapaxes(B, -1, -2) @ Sh
    closed = ~well & np.isfinite(G).all(axis=(-2, -1))
    if np.any(closed):
        _, s, Wt = np.linalg.svd(G[closed])
        W = np.swapaxes(Wt, -1, -2)
        Y[closed] = (W / (1.0 + np.hypot(1.0, 2.0 * s))[..., None, :]) @ (Wt @ X[closed])
    return 2.0 * Sh @ Y


def _potential_hessian(Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:math:`P` of :func:`gaussian_column_potential`, on the numerical range of ``Sigma``."""
    S = 0.5 * (Sigma + Sigma.T)
    w, U = np.linalg.eigh(S)
    if w.size == 0 or w[-1] <= 0:
        return np.zeros_like(S)
    keep = w > RANK_RTOL * w[-1]
    Sh = (U[:, keep] * np.sqrt(w[keep])) @ U[:, keep].T
    Sh_inv = (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T  # pseudo-inverse of Sigma^(1/2)
    d = S.shape[0]
    T = Sh @ B @ S @ B.T @ Sh  # G^T G
    R = psd_sqrt(np.eye(d) + 2.0 * (T + T.T))
    KG = 2.0 * np.linalg.solve(np.eye(d) + R, T)
    return Sh_inv @ (0.5 * (KG + KG.T)) @ Sh_inv


def gaussian_column_potential(y: np.ndarray, mu: np.ndarray, Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""The column potential :math:`g(y)` of Sinkhorn attention against :math:`N(\mu, \Sigma)`, up to a constant.

    .. math::

        g(y) = -\tfrac12 (y - \mu)^\top P\,(y - \mu) - y^\top B\mu + \text{const}, \qquad
        P = \Sigma^{-1/2}\,2(I + R)^{-1}G^\top G\,\Sigma^{-1/2},

    with :math:`G = \Sigma^{1/2}B^\top\Sigma^{1/2}` and :math:`R = (I + 4G^\top G)^{1/2}`
    (:math:`\Sigma^{-1/2}` the pseudo-inverse on the numerical range, where tokens lie).

    Derivation, in the notation of ``gaussian_conditional_gain``: the optimal coupling is
    Gaussian with joint precision :math:`\Lambda` whose :math:`xy` block is :math:`-B^\top`, so
    :math:`f(x) + g(y) + y^\top Bx = \log\pi(x, y) - \log\rho(x) - \log\rho(y)` has the
    :math:`yy` part :math:`-\tfrac12(y-\mu)^\top(\Lambda_{yy} - \Sigma^{-1})(y-\mu)` and the cross
    part :math:`(y-\mu)^\top B(x-\mu)`, whose term :math:`-y^\top B\mu` belongs to :math:`g`. By the
    block inverse :math:`\Lambda_{yy} = (\Sigma - C^\top\Sigma^{-1}C)^{-1}
    = \Sigma^{-1/2}(I - K^\top K)^{-1}\Sigma^{-1/2}`, and
    :math:`(I - K^\top K)^{-1} - I = K^\top K(I - K^\top K)^{-1} = K^\top G
    = 2(I + R)^{-1}G^\top G` by the defining relation :math:`K(I - K^\top K)^{-1} = G` and
    :math:`K = 2G(I + R)^{-1}`.

    The finite-N solver starts from it (:func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_potentials` with
    ``init="gaussian"``, moments of the tokens); a discretised Gaussian is scaled to it up to the quadrature error.

    Parameters
    ----------
    y : (n, d) array
        Points to evaluate at.
    mu, Sigma, B : (d,), (d, d), (d, d) arrays
        The Gaussian's mean and covariance, and the query-key matrix.

    Returns
    -------
    (n,) ndarray
        :math:`g(y)` at each point, up to one additive constant.

    Raises
    ------
    ValueError
        Shapes that do not agree.
    """
    y, mu, Sigma, B = (np.asarray(a, dtype=float) for a in (y, mu, Sigma, B))
    d = Sigma.shape[0]
    if Sigma.shape != (d, d) or B.shape != (d, d) or mu.shape != (d,):
        raise ValueError(f"Sigma, B must be (d, d) and mu (d,); got Sigma {Sigma.shape}, B {B.shape}, mu {mu.shape}")
    if y.ndim != 2 or y.shape[1] != d:
        raise ValueError(f"y must be (n, {d}), got {y.shape}")
    yc = y - mu
    return -0.5 * np.einsum("ni,ij,nj->n", yc, _potential_hessian(Sigma, B), yc) - y @ (B @ mu)
