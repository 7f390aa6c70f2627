r"""The paper's attention: the dot product with softmax over the keys."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from gtcore.attention.base import AttentionType


#: from this many multiply-adds on, torch's batched product (behind ``einsum``) calls BLAS; below, its own
#: loop (ATen's ``bmm`` on CPU). A single head's product is then ``x @ B.T`` bit for bit (checked on every
#: shape of ``tests/test_particles.py``), and the fast paths use it only there
BLAS_MIN = 400


class DotProduct(AttentionType):
    r"""The paper's attention: logits :math:`x_j^\top B_h x_i`, softmax over keys :math:`j`, scale 1.

    Gaussian tilt (completing the square in :math:`e^{y^\top Bx}\,dN(\mu, \Sigma)(y)`):

    .. math::

        \frac{\int y\, e^{y^\top B x}\, dN(\mu,\Sigma)(y)}{\int e^{y^\top B x}\, dN(\mu,\Sigma)(y)}
            = \mu + \Sigma B x .
    """

    name = "dot"

    def params(self, controls):
        return controls.B

    def logits(self, xq, xk, B_h):
        return xq @ B_h.T @ xk.T  # [i, j] = x_j^T B x_i

    def tilt(self, mu, Sigma, B_h):
        return Sigma @ B_h, mu

    # batched fast paths (one matmul over heads; NumPy or torch)
    def value_responses(self, Sigma, V, B):
        return V @ Sigma @ B

    def mean_gain(self, Sigma, V, B):
        return V.sum(0)

    def value_responses_derivative(self, Sigma, H, V, B):
        return V @ H @ B  # V_h Sigma B_h is linear in Sigma

    def drift_bound(self, V, B):
        r""":math:`0` when every head has :math:`V_h = 0` or :math:`B_h = 0` (the quadratic term
        :math:`V_h\Sigma B_h\Sigma` vanishes and the covariance equation is linear), else None: the
        term is quadratic in :math:`\Sigma` and can blow up in finite time."""
        if all(not np.any(V[h]) or not np.any(B[h]) for h in range(V.shape[0])):
            return 0.0
        return None

    def kernel(self, x, B):
        r"""Fused ``scaled_dot_product_attention`` (scale 1) over a (1, H, N, d) batch: query
        :math:`XB_h^\top`, key and value :math:`X`. The 4-D layout selects torch's blocked kernels
        (memory :math:`O(Nd)`, no :math:`N \times N` matrix). Returns shape (H, N, d)."""
        import torch
        import torch.nn.functional as F

        H = B.shape[0]
        if H == 1 and x.shape[0] * x.shape[1] ** 2 >= BLAS_MIN:
            q = (x @ B[0].T)[None, None]  # one head: the einsum's own BLAS product, without its dispatch
        else:
            q = torch.einsum("nk,hjk->hnj", x, B).unsqueeze(0)  # q_i = B_h x_i
        kv = x.unsqueeze(0).unsqueeze(0).expand(1, H, *x.shape)
        return F.scaled_dot_product_attention(q, kv, kv, scale=1.0)[0]

    def mixture_average(self, x, weights, means, covariances, B_h):
        r""":math:`\sum_k \pi_k(x)(\mu_k + \Sigma_k B x)`, :math:`\pi_k(x) \propto w_k e^{\mu_k^\top Bx + \frac12 x^\top B^\top\Sigma_k Bx}`."""
        q = x @ B_h.T                                                   # B x
        logits = (np.log(np.where(weights > 0, weights, 1.0))[None, :]
                  + q @ means.T
                  + 0.5 * np.einsum("ni,kij,nj->nk", q, covariances, q))
        logits[:, weights == 0] = -np.inf
        pi = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        tilts = means[None] + np.einsum("kij,nj->nki", covariances, q)
        return np.einsum("nk,nki->ni", pi, tilts)

    def sampling_strength(self, Sigma, B_h):
        r""":math:`\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)`: the softmax weights :math:`e^{y^\top Bx}` have
        finite relative variance averaged over Gaussian queries iff :math:`\kappa < 1/2`."""
        return float(np.linalg.eigvals(B_h.T @ Sigma @ B_h @ Sigma).real.max())
