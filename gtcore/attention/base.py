r"""The interface every attention type implements, and helpers shared by the types."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

#: the finite-N kernels' evaluation methods (:mod:`gtcore.attention.kernels`)
METHODS = ("sdpa", "blocked")
#: default number of query rows per block of the ``"blocked"`` method
BLOCK = 1024


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")


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

    def drift_bound(self, V: Any, params: Any) -> float | None:
        r"""A constant :math:`L` with :math:`\|\sum_h V_hM_h(\Sigma)\,\Sigma\|_2 \le L\,\|\Sigma\|_2` for every :math:`\Sigma \succeq 0`, or None.

        With such a bound the covariance equation :math:`\Sigma' = F\Sigma + \Sigma F^\top`,
        :math:`F = A + \sum_h V_hM_h(\Sigma)`, is at most linear in :math:`\Sigma`:
        :math:`\tfrac{d}{dt}\|\Sigma\|_2 \le 2(\|A\|_2 + L)\|\Sigma\|_2`, so
        :math:`\|\Sigma(t)\|_2 \le \|\Sigma_0\|_2e^{2(\|A\|_2 + L)t}` (Grönwall) and there is no
        finite-time blow-up: :func:`gtcore.riccati.blowup_time` uses it as its certificate that no pole
        exists. None (the default) when no such bound is known for the type.
        """
        return None

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


def _lib(S: Any):
    """NumPy or torch, whichever holds ``S``."""
    if isinstance(S, np.ndarray):
        return np
    import torch

    return torch


def torch_from(a: np.ndarray, like: Any):
    """``a`` as a tensor of ``like``'s dtype and device."""
    import torch

    return torch.as_tensor(a, dtype=like.dtype, device=like.device)
