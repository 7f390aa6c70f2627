r"""Sinkhorn attention (beyond the paper): the attention type.

Its Gaussian closed forms are in :mod:`gtcore.attention.sinkhorn_gaussian` (:func:`gaussian_conditional_gain`,
:func:`gaussian_column_potential`, re-exported here), the settings of the finite-N scaling in
:mod:`gtcore.attention.sinkhorn_options`, and the scaling itself in :mod:`gtcore.attention.sinkhorn_scaling`
(torch, imported when a kernel runs).
"""

from __future__ import annotations

import numpy as np

from gtcore.attention.base import BLOCK, AttentionType, _check_method, _lib, torch_from
from gtcore.attention.sinkhorn_gaussian import gaussian_column_potential, gaussian_conditional_gain
from gtcore.attention.sinkhorn_options import MAX_ITER, TOL, SinkhornConvergenceWarning, _check_stopping, default_tol

__all__ = [
    "Sinkhorn",
    "SinkhornConvergenceWarning",
    "default_tol",
    "gaussian_column_potential",
    "gaussian_conditional_gain",
]


class Sinkhorn(AttentionType):
    r"""Sinkhorn attention: the kernel :math:`e^{x_j^\top B_hx_i}` scaled to a doubly-stochastic matrix
    (entropic parameter 1, :mod:`gtcore.attention.sinkhorn_scaling`), then each row normalised.

    Parameters as for :class:`DotProduct` (``B``, or ``Q, K`` with :math:`B = K^\top Q`). The
    weights of a query depend on all tokens through the column potential :math:`g`
    (``local = False``): :meth:`logits` returns :math:`x_j^\top B x_i + g_j` with :math:`g` from the
    keys themselves (dense, the reference), :meth:`kernel` runs blocked.

    Gaussian tilt (``gtcore.attention.sinkhorn_gaussian.gaussian_conditional_gain``, exact for every :math:`B`):

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

    Examples
    --------
    >>> from gtcore.attention import Sinkhorn
    >>> M, c = Sinkhorn().tilt(np.zeros(2), np.eye(2), np.eye(2))
    >>> float(round(M[0, 0], 6)), float(round((np.sqrt(5) - 1) / 2, 6))  # the golden ratio's inverse
    (0.618034, 0.618034)
    """

    name = "sinkhorn"
    local = False

    def __init__(
        self, tol: float | None = None, max_iter: int | None = None, method: str = "sdpa", block: int | None = None
    ) -> None:
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
            M = torch_from(gaussian_conditional_gain(Sigma.detach().cpu().numpy(), B_h.detach().cpu().numpy()), Sigma)
        return M, mu - M @ mu

    def _gains(self, Sigma, B):
        r""":math:`M_h` of every head (and lane) at once: :func:`gaussian_conditional_gain` on the broadcast stack."""
        if isinstance(Sigma, np.ndarray):
            return gaussian_conditional_gain(Sigma[..., None, :, :], np.asarray(B))
        return torch_from(
            gaussian_conditional_gain(Sigma.detach().cpu().numpy()[..., None, :, :], B.detach().cpu().numpy()), Sigma
        )

    def value_responses(self, Sigma, V, B):
        r""":math:`V_hM_h` for every head (and lane), :math:`M_h` the Gaussian gain of :meth:`tilt`.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        B : (..., H, d, d) array or tensor
            The query-key matrices.

        Returns
        -------
        (..., H, d, d) array or tensor
            :math:`V_hM_h(\Sigma)`.
        """
        return V @ self._gains(Sigma, B)

    def mean_gain(self, Sigma, V, B):
        r""":math:`\sum_h V_h(I - M_h)`: the tilt's offset :math:`\mu - M_h\mu`, per lane.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        B : (..., H, d, d) array or tensor
            The query-key matrices.

        Returns
        -------
        (..., d, d) array or tensor
            :math:`\sum_h V_h(I - M_h(\Sigma))`.
        """
        eye = _lib(Sigma).eye(Sigma.shape[-1], dtype=Sigma.dtype)
        return (V @ (eye - self._gains(Sigma, B))).sum(-3)

    def gaussian_parts(self, Sigma, V, B):
        r"""``linear_part`` and :meth:`mean_gain` from one evaluation of the gains.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        B : (..., H, d, d) array or tensor
            The query-key matrices.

        Returns
        -------
        linear, gain : (..., d, d) arrays or tensors
            :math:`\sum_h V_hM_h` and :math:`\sum_h V_h(I - M_h)`.
        """
        M = self._gains(Sigma, B)
        eye = _lib(Sigma).eye(Sigma.shape[-1], dtype=Sigma.dtype)
        return (V @ M).sum(-3), (V @ (eye - M)).sum(-3)

    def asymptotic_linear_part(self, V, B):
        r""":math:`\sum_h V_h`, the limit of :math:`\sum_h V_hM_h` as :math:`\Sigma^{-1} \to 0` when every
        :math:`B_h` is symmetric positive definite (the whitened coupling :math:`K \to I`, so
        :math:`M_h\Sigma \to \Sigma`).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        B : (H, d, d) array
            The query-key matrices.

        Returns
        -------
        (d, d) ndarray
            :math:`\sum_h V_h`.

        Raises
        ------
        ValueError
            Some :math:`B_h` is not symmetric positive definite.
        """
        for Bh in B:
            if not np.allclose(Bh, Bh.T) or np.linalg.eigvalsh(0.5 * (Bh + Bh.T))[0] <= 0:
                raise ValueError(
                    "attention 'sinkhorn': the limit as Sigma^-1 -> 0 needs symmetric positive-definite B_h"
                )
        return V.sum(0)

    def drift_bound(self, V, B):
        r"""A bound :math:`L = \sum_h \|V_h\|_2` on the Sinkhorn drift.

        :math:`M_h\Sigma` is the coupling's transposed cross-covariance, whose 2-norm is at most
        :math:`\|\Sigma\|_2` (``gaussian_conditional_gain``, Properties).

        Parameters
        ----------
        V, B : (H, d, d) ndarray
            The value matrices and the query-key products of the heads.

        Returns
        -------
        float
            :math:`L`.
        """
        return float(sum(np.linalg.norm(V[h], 2) for h in range(V.shape[0])))

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
