r"""L2 attention: logits :math:`-\|Q_hx_i - K_hx_j\|^2`, softmax over the keys (beyond the paper)."""

from __future__ import annotations

import numpy as np

from gtcore.attention.base import AttentionType, _eye_like, _lib


class L2(AttentionType):
    r"""L2 attention: logits :math:`-\|Q_hx_i - K_hx_j\|^2` (query :math:`i`, key :math:`j`), softmax over :math:`j`.

    Per head the parameters are :math:`(Q_h, K_h)`, stacked as ``params[h] = [Q_h, K_h]``, shape
    (H, 2, k, d). Expanding, :math:`-\|Qx - Ky\|^2 = 2y^\top K^\top Qx - y^\top K^\top Ky -
    \|Qx\|^2`; the last term does not depend on the key and cancels in the softmax.

    Gaussian tilt. Against :math:`N(\mu, \Sigma)` the tilted key density is proportional to

    .. math::

        \exp\Big(-\tfrac12 (y-\mu)^\top\Sigma^{-1}(y-\mu) + 2y^\top K^\top Qx - y^\top K^\top K y\Big),

    a Gaussian with precision :math:`P = \Sigma^{-1} + 2K^\top K` and mean
    :math:`P^{-1}(\Sigma^{-1}\mu + 2K^\top Qx)`. With
    :math:`P^{-1} = \Sigma(I + 2K^\top K\Sigma)^{-1} = (I + 2\Sigma K^\top K)^{-1}\Sigma`,

    .. math::

        a(x) = Mx + C\mu, \qquad M = 2(I + 2\Sigma K^\top K)^{-1}\Sigma K^\top Q, \qquad
        C = (I + 2\Sigma K^\top K)^{-1},

    free of :math:`\Sigma^{-1}` (so valid for singular :math:`\Sigma`, by continuity). For small
    :math:`K^\top K\Sigma` it is the dot product's tilt with :math:`B = 2K^\top Q`. Moment ODE:
    :math:`\mu' = (A + \sum_hV_h(M_h + C_h))\mu + b`,
    :math:`\Sigma' = F\Sigma + \Sigma F^\top`, :math:`F = A + \sum_h V_hM_h`; the residual layer
    map is exact (the velocity is affine). When :math:`K` is square and invertible,
    :math:`M = (I - (I + 2\Sigma K^\top K)^{-1})K^{-1}Q` with
    :math:`(I + 2\Sigma K^\top K)^{-1} = K^{-1}(I + 2K\Sigma K^\top)^{-1}K`, so
    :math:`\|M\|_2 \le (1 + \operatorname{cond}(K))\|K^{-1}Q\|_2` for every :math:`\Sigma \succeq 0`
    and the covariance grows at most exponentially; :math:`M \to K^{-1}Q` as
    :math:`\Sigma^{-1} \to 0`.

    Examples
    --------
    >>> from gtcore.attention import L2
    >>> QK = np.stack([np.eye(2), np.eye(2)])  # Q = K = I
    >>> M, c = L2().tilt(np.ones(2), np.eye(2), QK)
    >>> np.round(M, 6)
    array([[0.666667, 0.      ],
           [0.      , 0.666667]])
    >>> np.round(c, 6)
    array([0.333333, 0.333333])
    """

    name = "l2"

    def params(self, controls):
        """The stacked query and key maps, ``params[h] = [Q_h, K_h]``.

        Parameters
        ----------
        controls : Controls
            One layer's parameters, with ``Q`` and ``K``.

        Returns
        -------
        (H, 2, k, d) array
            :math:`(Q_h, K_h)` for each head.

        Raises
        ------
        ValueError
            ``controls`` has no ``Q`` and ``K``.
        """
        if controls.Q is None:
            raise ValueError("attention 'l2' needs controls with Q and K")
        return np.stack([controls.Q, controls.K], axis=1)

    def logits(self, xq, xk, QK_h):
        r""":math:`\ell_{ij} = -\|Q_hx_i - K_hx_j\|^2` for query :math:`i` and key :math:`j`.

        Parameters
        ----------
        xq : (n, d) array or tensor
            The queries.
        xk : (m, d) array or tensor
            The keys.
        QK_h : (2, k, d) array or tensor
            The head's :math:`(Q_h, K_h)`.

        Returns
        -------
        (n, m) array or tensor
            The logits.
        """
        Q, K = QK_h[0], QK_h[1]
        qx, ky = xq @ Q.T, xk @ K.T
        return (2.0 * qx @ ky.T - (ky * ky).sum(-1)[None, :]) - (qx * qx).sum(-1)[:, None]

    def tilt(self, mu, Sigma, QK_h):
        r"""The Gaussian tilt :math:`Mx + C\mu` (see the class).

        .. math::

            M = 2(I + 2\Sigma K^\top K)^{-1}\Sigma K^\top Q, \qquad C = (I + 2\Sigma K^\top K)^{-1}.

        Parameters
        ----------
        mu : (d,) or (d, d) array or tensor
            The mean (the identity gives :math:`C`).
        Sigma : (d, d) array or tensor
            The covariance.
        QK_h : (2, k, d) array or tensor
            The head's :math:`(Q_h, K_h)`.

        Returns
        -------
        M : (d, d) array or tensor
            The linear response to the query.
        c : array or tensor
            :math:`C\mu`.
        """
        M, C = self._gains(Sigma, QK_h[None])  # one head through the vectorised gains, where they are written
        return M[0], C[0] @ mu

    def _gains(self, Sigma, QK):
        r""":math:`(M_h, C_h)` of every head (and lane) at once (:meth:`tilt` is one head of it): the one place the
        L2 gains are written."""
        lib = _lib(Sigma)
        S = Sigma[..., None, :, :]
        Q, K = QK[..., 0, :, :], QK[..., 1, :, :]
        Kt = K.swapaxes(-1, -2)
        C = lib.linalg.inv(_eye_like(Sigma) + 2.0 * S @ Kt @ K)
        return 2.0 * C @ S @ Kt @ Q, C

    def value_responses(self, Sigma, V, QK):
        r""":math:`V_hM_h` for every head (and lane), :math:`M_h = 2(I + 2\Sigma K_h^\top K_h)^{-1}\Sigma K_h^\top Q_h`.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        QK : (..., H, 2, k, d) array or tensor
            The heads' :math:`(Q_h, K_h)`.

        Returns
        -------
        (..., H, d, d) array or tensor
            :math:`V_hM_h(\Sigma)`.
        """
        return V @ self._gains(Sigma, QK)[0]

    def mean_gain(self, Sigma, V, QK):
        r""":math:`\sum_h V_hC_h`, :math:`C_h = (I + 2\Sigma K_h^\top K_h)^{-1}`, per lane.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        QK : (..., H, 2, k, d) array or tensor
            The heads' :math:`(Q_h, K_h)`.

        Returns
        -------
        (..., d, d) array or tensor
            :math:`\sum_h V_hC_h(\Sigma)`.
        """
        return (V @ self._gains(Sigma, QK)[1]).sum(-3)

    def gaussian_parts(self, Sigma, V, QK):
        r"""``linear_part`` and :meth:`mean_gain` from one evaluation of the gains.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        QK : (..., H, 2, k, d) array or tensor
            The heads' :math:`(Q_h, K_h)`.

        Returns
        -------
        linear, gain : (..., d, d) arrays or tensors
            :math:`\sum_h V_hM_h` and :math:`\sum_h V_hC_h`.
        """
        M, C = self._gains(Sigma, QK)
        return (V @ M).sum(-3), (V @ C).sum(-3)

    def asymptotic_linear_part(self, V, QK):
        r""":math:`\sum_h V_hK_h^{-1}Q_h`, the limit of :math:`\sum_h V_hM_h` as :math:`\Sigma^{-1} \to 0`, for
        square invertible :math:`K_h` (class docstring).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        QK : (H, 2, k, d) array
            The heads' :math:`(Q_h, K_h)`.

        Returns
        -------
        (d, d) ndarray
            :math:`\sum_h V_hK_h^{-1}Q_h`.

        Raises
        ------
        ValueError
            Some :math:`K_h` is not square and invertible.
        """
        Q, K = QK[:, 0], QK[:, 1]
        if Q.shape[1] != V.shape[-1] or min(abs(np.linalg.det(k)) for k in K) == 0:
            raise ValueError("attention 'l2': the limit as Sigma^-1 -> 0 needs square invertible K_h")
        return sum(Vh @ np.linalg.solve(k, q) for Vh, q, k in zip(V, Q, K, strict=True))

    def drift_bound(self, V, QK):
        r"""A bound :math:`L` on the L2 drift when every key matrix has full column rank, else None.

        The bound is :math:`L = \sum_h \|V_h\|_2\,\|K_h^\top Q_h\|_2/\sigma_{\min}(K_h)^2`.

        For :math:`\Sigma \succ 0`, :math:`(I + 2\Sigma K^\top K)^{-1}\Sigma = (\Sigma^{-1} + 2K^\top K)^{-1}
        \preceq (2K^\top K)^{-1}`, so :math:`M = 2(\Sigma^{-1} + 2K^\top K)^{-1}K^\top Q` has
        :math:`\|M\|_2 \le \|K^\top Q\|_2/\sigma_{\min}(K)^2` (by continuity also for singular
        :math:`\Sigma`), and :math:`\|V_hM_h\Sigma\|_2 \le \|V_h\|_2\|M_h\|_2\|\Sigma\|_2`. A rank-deficient
        :math:`K_h` leaves :math:`M_h` unbounded along its kernel: no bound is claimed then.

        Parameters
        ----------
        V : (H, d, d) ndarray
            The value matrices.
        QK : (H, 2) sequence of (k, d) arrays
            Each head's query and key matrices ``(Q_h, K_h)``.

        Returns
        -------
        float or None
            :math:`L`, or None.
        """
        total = 0.0
        for h in range(V.shape[0]):
            Q, K = np.asarray(QK[h, 0]), np.asarray(QK[h, 1])
            s = np.linalg.svd(K, compute_uv=False)
            if K.shape[0] < K.shape[1] or s[-1] <= 1e-12 * max(s[0], np.finfo(float).tiny):
                return None
            total += np.linalg.norm(V[h], 2) * np.linalg.norm(K.T @ Q, 2) / s[-1] ** 2
        return float(total)

    def kernel(self, x, QK):
        r"""Per head :math:`\operatorname{softmax}_j(2(Q_hx_i)^\top(K_hx_j) - \|K_hx_j\|^2)\,x_j`, through the
        fused attention kernel with the key term as a bias (:mod:`gtcore.attention.kernels`): memory
        :math:`O(Nd)`. Returns shape (H, N, d).

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        QK : (H, 2, k, d) tensor
            The heads' :math:`(Q_h, K_h)`.

        Returns
        -------
        (H, N, d) tensor
            Each head's average at each token.
        """
        import torch

        from gtcore.attention.kernels import softmax_average

        out = []
        for h in range(QK.shape[0]):
            ky = x @ QK[h, 1].T
            out.append(softmax_average(2.0 * x @ QK[h, 0].T, ky, -(ky * ky).sum(1), x))
        return torch.stack(out)
