r"""Sinkhorn attention (beyond the paper): the attention type and its Gaussian closed form.

The finite-N scaling is :mod:`gtcore.attention.sinkhorn_scaling` (torch, imported when a kernel runs).

**Against a Gaussian** :math:`\rho = N(\mu, \Sigma)` the mean-field problem is entropic optimal
transport from :math:`\rho` to itself with cost :math:`-y^\top Bx`: the coupling
:math:`\pi(dx, dy) = e^{f(x) + g(y) + y^\top Bx}\rho(dx)\rho(dy)` with both marginals
:math:`\rho`, and the attention average at :math:`x` is :math:`\mathbb{E}_\pi[y \mid x]`. See
:func:`gaussian_conditional_gain` for the closed form, valid for every (not necessarily
symmetric) :math:`B`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gtcore._linalg import RANK_RTOL, psd_sqrt
from gtcore.attention.base import BLOCK, AttentionType, _check_method, torch_from

__all__ = ["Sinkhorn", "SinkhornConvergenceWarning", "default_tol", "gaussian_column_potential",
           "gaussian_conditional_gain"]

#: default stopping tolerance on the relative marginal violation (float64; see :func:`default_tol`)
TOL = 1e-9
#: default cap on the number of Sinkhorn row updates
MAX_ITER = 2000
#: default depth of the Anderson acceleration (0: plain Sinkhorn)
ANDERSON = 4
#: starting points of the column potential
INITS = ("gaussian", "zero")


class SinkhornConvergenceWarning(RuntimeWarning):
    """Sinkhorn scaling stopped at ``max_iter`` with a marginal violation above ``tol``."""


def default_tol(dtype: Any) -> float:
    r"""The default ``tol`` for tokens of ``dtype``: :math:`\max(\texttt{TOL}, 128\,\varepsilon)`.

    The marginal violation cannot go below a few units of round-off :math:`\varepsilon` (measured
    8--16 :math:`\varepsilon` in float32), so a float64 tolerance would make every float32 scaling
    run to ``max_iter`` and warn; in float64 this is ``TOL``.

    Parameters
    ----------
    dtype : torch.dtype
        The tokens' dtype.

    Returns
    -------
    float
        The stopping tolerance on the relative marginal violation.
    """
    import torch

    return max(TOL, 128.0 * torch.finfo(dtype).eps)


def _check_stopping(tol: float, max_iter: int) -> None:
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")


def _check_acceleration(init: str, anderson: int) -> None:
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; valid: {', '.join(INITS)}")
    if isinstance(anderson, bool) or not isinstance(anderson, (int, np.integer)) or anderson < 0:
        raise ValueError(f"anderson must be a non-negative integer, got {anderson!r}")



class Sinkhorn(AttentionType):
    r"""Sinkhorn attention: the kernel :math:`e^{x_j^\top B_hx_i}` scaled to a doubly-stochastic matrix
    (entropic parameter 1, :mod:`gtcore.attention.sinkhorn_scaling`), then each row normalised.

    Parameters as for :class:`DotProduct` (``B``, or ``Q, K`` with :math:`B = K^\top Q`). The
    weights of a query depend on all tokens through the column potential :math:`g`
    (``local = False``): :meth:`logits` returns :math:`x_j^\top B x_i + g_j` with :math:`g` from the
    keys themselves (dense, the reference), :meth:`kernel` runs blocked.

    Gaussian tilt (:func:`gtcore.attention.sinkhorn.gaussian_conditional_gain`, exact for every :math:`B`):

    .. math::

        a(x) = \mu + M(x - \mu), \qquad
        M = 2\Sigma^{1/2}\big(I + (I + 4\Sigma^{1/2}B\Sigma B^\top\Sigma^{1/2})^{1/2}\big)^{-1}\Sigma^{1/2}B,

    so :math:`C = I - M`. Since the coupling has both marginals :math:`\rho`, the attention
    preserves the mean: :math:`\mu' = (A + \sum_hV_h)\mu + b` whatever :math:`\Sigma`. And
    :math:`M\Sigma = C_\pi^\top` is the transposed cross-covariance of the coupling, with
    :math:`\|M\Sigma\|_2 \le \|\Sigma\|_2`: the covariance equation is at most linear in
    :math:`\Sigma`, so it grows at most exponentially,
    :math:`\|\Sigma(t)\|_2 \le \|\Sigma_0\|_2 e^{2(\|A\|_2 + \sum_h\|V_h\|_2)t}`.

    Parameters
    ----------
    tol, max_iter : float, int
        Stopping rule of the finite-N scaling (:func:`gtcore.attention.sinkhorn_scaling.sinkhorn_potentials`); ``tol``
        defaults to :func:`gtcore.attention.sinkhorn.default_tol` of the tokens' dtype.
    method, block : str, int
        ``"sdpa"`` (fused kernel) or ``"blocked"`` (``block`` rows at a time) for :meth:`kernel`.
    """

    name = "sinkhorn"
    local = False

    def __init__(self, tol: float | None = None, max_iter: int | None = None, method: str = "sdpa",
                 block: int | None = None) -> None:
        self.tol = tol  # None: default_tol of the tokens' dtype
        self.max_iter = MAX_ITER if max_iter is None else max_iter
        self.method = method
        self.block = BLOCK if block is None else block
        _check_stopping(TOL if tol is None else tol, self.max_iter)
        _check_method(method)

    def params(self, controls):
        """The stacked query-key matrices.

        Parameters
        ----------
        controls : Controls
            One layer's parameters.

        Returns
        -------
        (H, d, d) array
            ``controls.B``.
        """
        return controls.B

    def _options(self, method=None):
        return dict(tol=self.tol, max_iter=self.max_iter, method=method or self.method, block=self.block)

    def logits(self, xq, xk, B_h):
        r""":math:`x_j^\top B_h x_i + g_j`, the column potential :math:`g` scaled on the keys (dense reference).

        Parameters
        ----------
        xq : (n, d) tensor
            The queries.
        xk : (m, d) tensor
            The keys (the tokens the scaling runs on).
        B_h : (d, d) tensor
            The head's query-key matrix.

        Returns
        -------
        (n, m) tensor
            The logits whose row softmax is the Sinkhorn attention's weights.
        """
        from gtcore.attention.sinkhorn_scaling import sinkhorn_potentials

        res = sinkhorn_potentials(xk, B_h, **self._options("blocked"))
        return xq @ B_h.T @ xk.T + res.g[None, :]

    def average(self, xq, xk, B_h, log_weights=None):
        """One head's Sinkhorn average of the weighted keys at the queries
        (:func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_average`).

        Parameters
        ----------
        xq : (n, d) tensor
            The queries.
        xk : (m, d) tensor
            The keys, the support of the measure the scaling runs on.
        B_h : (d, d) tensor
            The head's query-key matrix.
        log_weights : (m,) tensor, optional
            The keys' log-weights; uniform when omitted.

        Returns
        -------
        (n, d) tensor
            The average at each query.
        """
        from gtcore.attention.sinkhorn_scaling import sinkhorn_average

        return sinkhorn_average(xk, B_h, log_weights, queries=xq, **self._options())[0]

    def tilt(self, mu, Sigma, B_h):
        r"""The Gaussian tilt :math:`\mu + M(x - \mu)` (:func:`~gtcore.attention.sinkhorn.gaussian_conditional_gain`):
        :math:`C = I - M`.

        Parameters
        ----------
        mu : (d,) or (d, d) array or tensor
            The mean (the identity gives :math:`C`).
        Sigma : (d, d) array or tensor
            The covariance.
        B_h : (d, d) array or tensor
            The head's query-key matrix.

        Returns
        -------
        M : (d, d) array or tensor
            The gain.
        c : array or tensor
            :math:`\mu - M\mu`.
        """
        if isinstance(Sigma, np.ndarray):
            M = gaussian_conditional_gain(Sigma, np.asarray(B_h))
        else:
            M = torch_from(gaussian_conditional_gain(Sigma.detach().cpu().numpy(),
                                                     B_h.detach().cpu().numpy()), Sigma)
        return M, mu - M @ mu

    def kernel(self, x, B):
        """Per head :func:`gtcore.attention.sinkhorn_scaling.sinkhorn_average` (warns when a scaling does not
        converge): (H, N, d).

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        B : (H, d, d) tensor
            The query-key matrices.

        Returns
        -------
        (H, N, d) tensor
            Each head's Sinkhorn average at each token.
        """
        import torch

        from gtcore.attention.sinkhorn_scaling import sinkhorn_average

        return torch.stack([sinkhorn_average(x, B[h], **self._options())[0] for h in range(B.shape[0])])


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
    Sigma : (d, d) array
        The covariance (positive semi-definite; singular allowed).
    B : (d, d) array
        The query-key matrix (any square matrix).

    Returns
    -------
    (d, d) ndarray
        The gain :math:`M`.
    """
    Sh = psd_sqrt(0.5 * (Sigma + Sigma.T))
    d = Sh.shape[0]
    T = Sh @ B @ Sigma @ B.T @ Sh
    R = psd_sqrt(np.eye(d) + 2.0 * (T + T.T))
    return 2.0 * Sh @ np.linalg.solve(np.eye(d) + R, Sh @ B)


def _potential_hessian(Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:math:`P` of :func:`gaussian_column_potential`, on the numerical range of ``Sigma``."""
    S = 0.5 * (Sigma + Sigma.T)
    w, U = np.linalg.eigh(S)
    if w.size == 0 or w[-1] <= 0:
        return np.zeros_like(S)
    keep = w > RANK_RTOL * w[-1]
    Sh = (U[:, keep] * np.sqrt(w[keep])) @ U[:, keep].T
    Sh_inv = (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T     # pseudo-inverse of Sigma^(1/2)
    d = S.shape[0]
    T = Sh @ B @ S @ B.T @ Sh                                    # G^T G
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

    Derivation, in the notation of :func:`gaussian_conditional_gain`: the optimal coupling is
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
