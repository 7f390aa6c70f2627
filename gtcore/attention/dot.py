r"""The paper's attention: the dot product with softmax over the keys."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from gtcore.attention.base import AttentionType


class DotProduct(AttentionType):
    r"""The paper's attention: logits :math:`x_j^\top B_h x_i`, softmax over keys :math:`j`, scale 1.

    Gaussian tilt (completing the square in :math:`e^{y^\top Bx}\,dN(\mu, \Sigma)(y)`):

    .. math::

        \frac{\int y\, e^{y^\top B x}\, dN(\mu,\Sigma)(y)}{\int e^{y^\top B x}\, dN(\mu,\Sigma)(y)}
            = \mu + \Sigma B x .

    Examples
    --------
    >>> from gtcore.attention import DotProduct
    >>> M, c = DotProduct().tilt(np.array([1.0, 0.0]), np.diag([2.0, 1.0]), np.array([[0.0, 1.0], [0.0, 0.0]]))
    >>> M
    array([[0., 2.],
           [0., 0.]])
    >>> c
    array([1., 0.])
    """

    name = "dot"

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

    def logits(self, xq, xk, B_h):
        r""":math:`\ell_{ij} = x_j^\top B_h x_i` for query :math:`i` and key :math:`j`.

        Parameters
        ----------
        xq : (n, d) array or tensor
            The queries.
        xk : (m, d) array or tensor
            The keys.
        B_h : (d, d) array or tensor
            The head's query-key matrix.

        Returns
        -------
        (n, m) array or tensor
            The logits.
        """
        return xq @ B_h.T @ xk.T  # [i, j] = x_j^T B x_i

    def tilt(self, mu, Sigma, B_h):
        r"""The Gaussian tilt :math:`\mu + \Sigma B_h x`: :math:`M = \Sigma B_h`, :math:`c = \mu` (:math:`C = I`).

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
            :math:`\Sigma B_h`.
        c : array or tensor
            ``mu``.
        """
        return Sigma @ B_h, mu

    # vectorised fast paths (one matmul over lanes and heads; NumPy or torch)
    def value_responses(self, Sigma, V, B):
        r""":math:`V_h\Sigma B_h` for every head (and lane), in one batched product.

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
            :math:`V_h\Sigma B_h`.
        """
        return V @ Sigma[..., None, :, :] @ B

    def mean_gain(self, Sigma, V, B):
        r""":math:`\sum_h V_h` (the tilt's offset is :math:`\mu` itself), per lane.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (unused).
        V : (..., H, d, d) array or tensor
            The value matrices.
        B : (..., H, d, d) array or tensor
            The query-key matrices (unused).

        Returns
        -------
        (..., d, d) array or tensor
            :math:`\sum_h V_h`.
        """
        return V.sum(-3)

    def gaussian_parts_function(self, V, B):
        r"""The dot product's ``gaussian_parts`` for fixed heads: :math:`\sum_h V_h` is computed once, and for
        one head the sum over heads is the head itself (:meth:`value_responses`, the same numbers).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        B : (H, d, d) array
            The query-key matrices.

        Returns
        -------
        callable
            ``parts(Sigma) -> (sum_h V_h Sigma B_h, sum_h V_h)``.
        """
        gain = self.mean_gain(None, V, B)  # sum_h V_h: Sigma does not enter
        if V.shape[-3] == 1:

            def parts(Sigma):
                return self.value_responses(Sigma, V, B)[..., 0, :, :], gain
        else:

            def parts(Sigma):
                return self.value_responses(Sigma, V, B).sum(-3), gain

        return parts

    def value_responses_derivative(self, Sigma, H, V, B):
        r""":math:`V_hHB_h`, exact: :math:`V_h\Sigma B_h` is linear in :math:`\Sigma`.

        Parameters
        ----------
        Sigma : (d, d) array
            The covariance (unused).
        H : (d, d) array
            The direction of the derivative.
        V : (H, d, d) array
            The value matrices.
        B : (H, d, d) array
            The query-key matrices.

        Returns
        -------
        (H, d, d) array
            :math:`V_hHB_h`.
        """
        return V @ H @ B  # V_h Sigma B_h is linear in Sigma

    def riccati_quadratic(self, V, B):
        r""":math:`Q = \sum_h v_h(B_h + B_h^\top)` when every :math:`V_h = v_hI` (to :math:`10^{-14}` relative), else
        None.

        Then :math:`\sum_h(V_h\Sigma B_h\Sigma + \Sigma B_h^\top\Sigma V_h^\top) = \Sigma Q\Sigma` and the
        precision :math:`P = \Sigma^{-1}` solves the linear equation :math:`P' = -(PA + A^\top P) - Q`
        (:mod:`gtcore.riccati`).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        B : (H, d, d) array
            The query-key matrices.

        Returns
        -------
        (d, d) ndarray or None
            :math:`Q`, exactly symmetric; None when some :math:`V_h` is not a multiple of :math:`I`.
        """
        v = scalar_values(V)
        if v is None:
            return None
        Q = np.einsum("h,hij->ij", v, B + np.swapaxes(B, 1, 2))
        return 0.5 * (Q + Q.T)

    def drift_bound(self, V, B):
        r"""A bound :math:`L` on the dot-product drift: 0 when the quadratic term vanishes, else None.

        When every head has :math:`V_h = 0` or :math:`B_h = 0` the quadratic term
        :math:`V_h\Sigma B_h\Sigma` vanishes and the covariance equation is linear; otherwise the term is
        quadratic in :math:`\Sigma` and can blow up in finite time.

        Parameters
        ----------
        V, B : (H, d, d) ndarray
            The value matrices and the query-key products of the heads.

        Returns
        -------
        float or None
            0.0, or None.
        """
        if all(not np.any(V[h]) or not np.any(B[h]) for h in range(V.shape[0])):
            return 0.0
        return None

    def kernel(self, x, B):
        r"""Fused ``scaled_dot_product_attention`` (scale 1) over a (1, H, N, d) batch: query
        :math:`XB_h^\top`, key and value :math:`X`. The 4-D layout selects torch's blocked kernels
        (memory :math:`O(Nd)`, no :math:`N \times N` matrix). Returns shape (H, N, d).

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        B : (H, d, d) tensor
            The query-key matrices.

        Returns
        -------
        (H, N, d) tensor
            :math:`\sum_j \operatorname{softmax}_j(x_j^\top B_h x_i)\, x_j` for each head and token.
        """
        import torch
        import torch.nn.functional as F

        H = B.shape[0]
        q = torch.einsum("nk,hjk->hnj", x, B).unsqueeze(0)  # q_i = B_h x_i
        kv = x.unsqueeze(0).unsqueeze(0).expand(1, H, *x.shape)
        return F.scaled_dot_product_attention(q, kv, kv, scale=1.0)[0]

    def mixture_average(self, x, weights, means, covariances, B_h):
        r"""The exact average against a Gaussian mixture :math:`\sum_k w_k N(\mu_k, \Sigma_k)`.

        .. math::

            a(x) = \sum_k \pi_k(x)(\mu_k + \Sigma_k B x), \qquad
            \pi_k(x) \propto w_k e^{\mu_k^\top Bx + \frac12 x^\top B^\top\Sigma_k Bx}.

        Parameters
        ----------
        x : (n, d) array
            The queries.
        weights : (K,) array
            The mixture's weights (zero weights allowed).
        means : (K, d) array
            The components' means.
        covariances : (K, d, d) array
            The components' covariances.
        B_h : (d, d) array
            The head's query-key matrix.

        Returns
        -------
        (n, d) array
            :math:`a(x)` at each query.
        """
        q = x @ B_h.T  # B x
        logits = (
            np.log(np.where(weights > 0, weights, 1.0))[None, :]
            + q @ means.T
            + 0.5 * np.einsum("ni,kij,nj->nk", q, covariances, q)
        )
        logits[:, weights == 0] = -np.inf
        pi = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        tilts = means[None] + np.einsum("kij,nj->nki", covariances, q)
        return np.einsum("nk,nki->ni", pi, tilts)

    def sampling_strength(self, Sigma, B_h):
        r""":math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)`: the softmax weights :math:`e^{y^\top Bx}` have
        finite relative variance averaged over Gaussian queries iff :math:`\kappa < 1/2`.

        Parameters
        ----------
        Sigma : (d, d) array
            The covariance of the tokens.
        B_h : (d, d) array
            The head's query-key matrix.

        Returns
        -------
        float
            :math:`\kappa`, the largest real part of the eigenvalues of :math:`B^\top\Sigma B\Sigma`.
        """
        return float(np.linalg.eigvals(B_h.T @ Sigma @ B_h @ Sigma).real.max())


#: relative tolerance of :func:`scalar_values`
SCALAR_V_ATOL = 1e-14


def scalar_values(V: np.ndarray) -> np.ndarray | None:
    r"""The :math:`v_h` when every value matrix is :math:`V_h = v_hI` (to :math:`10^{-14}` relative), else None.

    Parameters
    ----------
    V : (H, d, d) array
        The value matrices.

    Returns
    -------
    (H,) ndarray or None
        :math:`v_h = \operatorname{tr}V_h/d`, or None when some :math:`V_h` is not a multiple of :math:`I`.
    """
    d = V.shape[-1]
    v = np.trace(V, axis1=1, axis2=2) / d
    scale = max(1.0, float(np.abs(V).max()))
    if np.all(np.abs(V - v[:, None, None] * np.eye(d)) <= SCALAR_V_ATOL * scale):
        return v
    return None
