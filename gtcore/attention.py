r"""The attention law, in one place: a registry of attention types.

A layer's attention heads move a token :math:`x` by :math:`\sum_h V_h\, a_h[\rho](x)`, where
:math:`a_h[\rho](x)` is the head's attention average of the keys :math:`y \sim \rho` at the query
:math:`x`. An attention type says how that average is formed. Each type provides

* :meth:`AttentionType.tilt`: its average against a Gaussian :math:`N(\mu, \Sigma)`, an affine map
  of the query, :math:`a(x) = Mx + c` (the Gaussian *tilt*). Every type whose logits are at most
  quadratic in the key has such a tilt, with :math:`c = C\mu` linear in the mean;
* :meth:`AttentionType.value_responses` / :meth:`~AttentionType.mean_gain`: the heads' sums
  :math:`V_hM_h` and :math:`\sum_h V_hC_h`, from which the moment ODE (eq. 1.1), the exact layer map
  and the equilibria are built (:func:`gaussian_velocity`);
* :meth:`AttentionType.kernel`: the finite-N average over N tokens in torch, with :math:`O(Nd)`
  memory;
* :meth:`AttentionType.logits`: the definition, used by the naive dense reference
  (:meth:`~AttentionType.naive_kernel`) that the contract test compares against;
* optionally :meth:`AttentionType.mixture_average` (the exact average against a Gaussian
  mixture) and :meth:`AttentionType.sampling_strength` (when the N-token average has finite
  variance).

With the Gaussian tilt the velocity field is affine, :math:`v(x) = Fx + g` with

.. math::

    F = A + \sum_h V_h M_h, \qquad g = b + \sum_h V_h C_h\,\mu,

and the moments obey :math:`\mu' = F\mu + g`, :math:`\Sigma' = F\Sigma + \Sigma F^\top`.

Types are registered by name in :data:`ATTENTION_TYPES` (:func:`register`); a
:class:`~gtcore.Controls` selects one with ``attention=`` (default ``"dot"``). Adding a type is one
class here (or anywhere, registered with :func:`register`): every consumer (moments, layer map,
particles, stability, reachability, mixtures, mean-field diagnostics) goes through this module, and
``tests/test_attention.py`` checks the new type against its definition without being edited.

The paper's type is :class:`DotProduct`: logits :math:`x_j^\top B_h x_i` (query :math:`i`, key
:math:`j`), softmax over :math:`j`, scale 1, whose Gaussian tilt is :math:`\mu + \Sigma B x`.
Beyond the paper: :class:`L2` (logits :math:`-\|Q_hx_i - K_hx_j\|^2`) and :class:`Sinkhorn`
(the kernel :math:`e^{x_j^\top B_h x_i}` scaled to a doubly-stochastic matrix, then
row-normalised). Heads add their velocities; all heads of one :class:`~gtcore.Controls` share
one type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from scipy.special import logsumexp

__all__ = ["ATTENTION_TYPES", "AttentionType", "DotProduct", "L2", "Sinkhorn", "attention_of", "gaussian_velocity",
           "register"]


def _eye_like(S: Any):
    """The identity of ``S``'s size, in ``S``'s array library (NumPy or torch), dtype and device."""
    if isinstance(S, np.ndarray):
        return np.eye(S.shape[-1])
    import torch

    return torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)


class AttentionType(ABC):
    """The interface of an attention type (implement :meth:`tilt`, :meth:`logits` and :meth:`params`).

    ``params`` are the type's per-head parameters besides the value matrices ``V`` (for the dot
    product: the stacked ``B``, shape (H, d, d)); ``params_h`` is one head's slice. The methods
    accept NumPy arrays, and those used by the particle simulator also torch tensors.
    """

    name: str = ""
    #: True when a query's weights are a softmax of logits of that query and one key each (the
    #: average at a query depends on the keys only through those logits); False for types whose
    #: weights couple all tokens (Sinkhorn scaling)
    local: bool = True

    # -- parameters ------------------------------------------------------------------------
    @abstractmethod
    def params(self, controls: Any) -> Any:
        """The heads' parameters (besides ``V``) held by ``controls``, stacked over heads."""

    def head(self, params: Any, h: int) -> Any:
        """Head ``h``'s parameters."""
        return params[h]

    def torch_params(self, controls: Any, dtype: Any, device: Any) -> Any:
        """:meth:`params` as torch tensors (the particle simulator converts them once per controls)."""
        import torch

        return torch.as_tensor(np.array(self.params(controls)), dtype=dtype, device=device)

    # -- the definition --------------------------------------------------------------------
    @abstractmethod
    def logits(self, xq: Any, xk: Any, params_h: Any) -> Any:
        """(n, m) logits of queries ``xq`` (n, d) against keys ``xk`` (m, d); softmax runs over keys."""

    def average(self, xq: Any, xk: Any, params_h: Any, log_weights: Any = None) -> Any:
        r"""One head's average of the keys ``xk`` (m, d) at the queries ``xq`` (n, d), torch.

        The keys carry the weights :math:`e^{\texttt{log\_weights}}` (uniform when omitted): a
        weighted empirical measure (a quadrature rule, or a sample). The default is
        :math:`\operatorname{softmax}_j(\text{logits}_{ij} + \log w_j)\, x_j`; non-local types
        override it.
        """
        import torch

        logits = self.logits(xq, xk, params_h)
        if log_weights is not None:
            logits = logits + log_weights[None, :]
        return torch.softmax(logits, dim=1) @ xk

    # -- Gaussian average ------------------------------------------------------------------
    @abstractmethod
    def tilt(self, mu: Any, Sigma: Any, params_h: Any) -> tuple[Any, Any]:
        r"""The average against :math:`N(\mu, \Sigma)` at the query :math:`x`, as :math:`(M, c)`: :math:`Mx + c`.

        ``c`` must be linear in :math:`\mu` (so that passing the identity for ``mu`` gives the
        matrix :math:`C` with :math:`c = C\mu`).
        """

    def value_responses(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`V_hM_h` for every head, shape (H, d, d): the heads' linear responses to the query."""
        if isinstance(Sigma, np.ndarray):
            stack = np.stack
        else:
            import torch

            stack = torch.stack
        eye = _eye_like(Sigma)
        return stack([V[h] @ self.tilt(eye, Sigma, self.head(params, h))[0] for h in range(V.shape[0])])

    def linear_part(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`\sum_h V_hM_h`: the attention's linear drift on the query for a Gaussian with covariance :math:`\Sigma`."""
        return self.value_responses(Sigma, V, params).sum(0)

    def mean_gain(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`\sum_h V_hC_h`: the attention's offset is this matrix times :math:`\mu`."""
        eye = _eye_like(Sigma)
        return sum(V[h] @ self.tilt(eye, Sigma, self.head(params, h))[1] for h in range(V.shape[0]))

    def value_responses_derivative(self, Sigma: Any, H: Any, V: Any, params: Any) -> Any:
        r"""Per head, :math:`\frac{d}{d\varepsilon} V_hM_h(\Sigma + \varepsilon H)` at 0, shape (H, d, d)
        (used by Newton's method for equilibria; a central difference by default)."""
        eps = 1e-6 * max(1.0, float(np.linalg.norm(Sigma)))
        return (self.value_responses(Sigma + eps * H, V, params)
                - self.value_responses(Sigma - eps * H, V, params)) / (2 * eps)

    # -- finite N ----------------------------------------------------------------------------
    def kernel(self, x: Any, params: Any) -> Any:
        r"""Per head, the average over the N tokens for every query token: (N, d) -> (H, N, d), torch.

        The default is the dense reference (:meth:`naive_kernel`, :math:`O(N^2)` memory); types
        override it with a blocked kernel.
        """
        return self.naive_kernel(x, params)

    def naive_kernel(self, x: Any, params: Any) -> Any:
        """Dense reference: per head ``softmax(logits(x, x)) @ x`` (torch)."""
        import torch

        n_heads = params.shape[0] if hasattr(params, "shape") else len(params)
        return torch.stack([torch.softmax(self.logits(x, x, self.head(params, h)), dim=1) @ x
                            for h in range(n_heads)])

    # -- optional ------------------------------------------------------------------------------
    def mixture_average(self, x: np.ndarray, weights: np.ndarray, means: np.ndarray, covariances: np.ndarray,
                        params_h: Any) -> np.ndarray:
        r"""The exact average against :math:`\sum_k w_k N(\mu_k, \Sigma_k)` at the queries ``x`` (n, d)."""
        raise ValueError(f"attention {self.name!r} has no closed-form mixture average (the dot product has one)")

    def sampling_strength(self, Sigma: np.ndarray, params_h: Any) -> float:
        r"""A number below 1/2 when the N-token average at Gaussian queries has finite variance."""
        raise ValueError(f"attention {self.name!r} has no sampling-strength formula (the dot product has one)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


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

    def kernel(self, x, B):
        r"""Fused ``scaled_dot_product_attention`` (scale 1) over a (1, H, N, d) batch: query
        :math:`XB_h^\top`, key and value :math:`X`. The 4-D layout selects torch's blocked kernels
        (memory :math:`O(Nd)`, no :math:`N \times N` matrix). Returns shape (H, N, d)."""
        import torch
        import torch.nn.functional as F

        H = B.shape[0]
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


def _lib(S: Any):
    """NumPy or torch, whichever holds ``S``."""
    if isinstance(S, np.ndarray):
        return np
    import torch

    return torch


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
    """

    name = "l2"

    def params(self, controls):
        if controls.Q is None:
            raise ValueError("attention 'l2' needs controls with Q and K")
        return np.stack([controls.Q, controls.K], axis=1)

    def logits(self, xq, xk, QK_h):
        Q, K = QK_h[0], QK_h[1]
        qx, ky = xq @ Q.T, xk @ K.T
        return (2.0 * qx @ ky.T - (ky * ky).sum(-1)[None, :]) - (qx * qx).sum(-1)[:, None]

    def tilt(self, mu, Sigma, QK_h):
        lib = _lib(Sigma)
        Q, K = QK_h[0], QK_h[1]
        C = lib.linalg.inv(_eye_like(Sigma) + 2.0 * Sigma @ K.T @ K)
        return 2.0 * C @ Sigma @ K.T @ Q, C @ mu

    def kernel(self, x, QK):
        r"""Per head :math:`\operatorname{softmax}_j(2(Q_hx_i)^\top(K_hx_j) - \|K_hx_j\|^2)\,x_j`, through the
        fused attention kernel with the key term as a bias (:mod:`gtcore._kernels`): memory
        :math:`O(Nd)`. Returns shape (H, N, d)."""
        import torch

        from ._kernels import softmax_average

        out = []
        for h in range(QK.shape[0]):
            ky = x @ QK[h, 1].T
            out.append(softmax_average(2.0 * x @ QK[h, 0].T, ky, -(ky * ky).sum(1), x))
        return torch.stack(out)


class Sinkhorn(AttentionType):
    r"""Sinkhorn attention: the kernel :math:`e^{x_j^\top B_hx_i}` scaled to a doubly-stochastic matrix
    (entropic parameter 1, :mod:`gtcore.sinkhorn`), then each row normalised.

    Parameters as for :class:`DotProduct` (``B``, or ``Q, K`` with :math:`B = K^\top Q`). The
    weights of a query depend on all tokens through the column potential :math:`g`
    (``local = False``): :meth:`logits` returns :math:`x_j^\top B x_i + g_j` with :math:`g` from the
    keys themselves (dense, the reference), :meth:`kernel` runs blocked.

    Gaussian tilt (:func:`gtcore.sinkhorn.gaussian_conditional_gain`, exact for every :math:`B`):

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
        Stopping rule of the finite-N scaling (:func:`gtcore.sinkhorn.sinkhorn_potentials`); ``tol``
        defaults to :func:`gtcore.sinkhorn.default_tol` of the tokens' dtype.
    method, block : str, int
        ``"sdpa"`` (fused kernel) or ``"blocked"`` (``block`` rows at a time) for :meth:`kernel`.
    """

    name = "sinkhorn"
    local = False

    def __init__(self, tol: float | None = None, max_iter: int | None = None, method: str = "sdpa",
                 block: int | None = None) -> None:
        from . import _kernels, sinkhorn

        self.tol = tol  # None: sinkhorn.default_tol of the tokens' dtype
        self.max_iter = sinkhorn.MAX_ITER if max_iter is None else max_iter
        self.method = method
        self.block = _kernels.BLOCK if block is None else block
        sinkhorn._check_stopping(sinkhorn.TOL if tol is None else tol, self.max_iter)
        _kernels._check_method(method)

    def params(self, controls):
        return controls.B

    def _options(self, method=None):
        return dict(tol=self.tol, max_iter=self.max_iter, method=method or self.method, block=self.block)

    def logits(self, xq, xk, B_h):
        from .sinkhorn import sinkhorn_potentials

        res = sinkhorn_potentials(xk, B_h, **self._options("blocked"))
        return xq @ B_h.T @ xk.T + res.g[None, :]

    def average(self, xq, xk, B_h, log_weights=None):
        from .sinkhorn import sinkhorn_average

        return sinkhorn_average(xk, B_h, log_weights, queries=xq, **self._options())[0]

    def tilt(self, mu, Sigma, B_h):
        from .sinkhorn import gaussian_conditional_gain

        if isinstance(Sigma, np.ndarray):
            M = gaussian_conditional_gain(Sigma, np.asarray(B_h))
        else:
            M = torch_from(gaussian_conditional_gain(Sigma.detach().cpu().numpy(),
                                                     B_h.detach().cpu().numpy()), Sigma)
        return M, mu - M @ mu

    def kernel(self, x, B):
        """Per head :func:`gtcore.sinkhorn.sinkhorn_average` (warns when a scaling does not converge): (H, N, d)."""
        import torch

        from .sinkhorn import sinkhorn_average

        return torch.stack([sinkhorn_average(x, B[h], **self._options())[0] for h in range(B.shape[0])])


def torch_from(a: np.ndarray, like: Any):
    """``a`` as a tensor of ``like``'s dtype and device."""
    import torch

    return torch.as_tensor(a, dtype=like.dtype, device=like.device)


#: the one registry of attention types, by name
ATTENTION_TYPES: dict[str, AttentionType] = {}


def register(attention: AttentionType) -> AttentionType:
    """Add an attention type to :data:`ATTENTION_TYPES` under its ``name``; returns it."""
    if not attention.name:
        raise ValueError("an attention type needs a non-empty name")
    ATTENTION_TYPES[attention.name] = attention
    return attention


register(DotProduct())
register(L2())
register(Sinkhorn())


def attention_of(controls: Any) -> AttentionType:
    """The attention type selected by ``controls`` (its ``attention`` name, ``"dot"`` by default)."""
    return ATTENTION_TYPES[getattr(controls, "attention", "dot")]


def gaussian_velocity(Sigma: Any, controls: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The affine velocity against :math:`N(\mu, \Sigma)`, :math:`v(x) = Fx + G\mu + b`: returns :math:`(F, G)`.

    .. math::

        F = A + \sum_h V_h M_h(\Sigma), \qquad G = \sum_h V_h C_h(\Sigma),

    with :math:`(M_h, C_h\mu)` the tilt of :func:`attention_of(controls) <attention_of>`; ``A`` and
    ``b`` are the identity-activation fold (:attr:`Controls.affine_A`, :attr:`Controls.affine_b`).
    """
    att = attention_of(controls)
    p = att.params(controls)
    return controls.affine_A + att.linear_part(Sigma, controls.V, p), att.mean_gain(Sigma, controls.V, p)
