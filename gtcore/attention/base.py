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
        """The heads' parameters (besides ``V``) held by ``controls``, stacked over heads.

        Parameters
        ----------
        controls : Controls
            One layer's parameters.

        Returns
        -------
        array
            The stacked per-head parameters, indexed by head first (for the dot product ``controls.B``,
            shape (H, d, d)).
        """

    def head(self, params: Any, h: int) -> Any:
        """Head ``h``'s parameters.

        Parameters
        ----------
        params : array
            The stacked parameters (:meth:`params`).
        h : int
            The head.

        Returns
        -------
        array
            ``params[h]``.
        """
        return params[h]

    def torch_params(self, controls: Any, dtype: Any, device: Any) -> Any:
        """:meth:`params` as torch tensors (the particle simulator converts them once per controls).

        Parameters
        ----------
        controls : Controls
            One layer's parameters.
        dtype : torch.dtype
            The tensor's dtype.
        device : torch.device or str
            The tensor's device.

        Returns
        -------
        torch.Tensor
            :meth:`params` of ``controls`` as one tensor.
        """
        import torch

        return torch.as_tensor(np.array(self.params(controls)), dtype=dtype, device=device)

    # -- the definition --------------------------------------------------------------------
    @abstractmethod
    def logits(self, xq: Any, xk: Any, params_h: Any) -> Any:
        r"""(n, m) logits of queries ``xq`` (n, d) against keys ``xk`` (m, d); softmax runs over keys.

        The definition of the type: the weight of key :math:`j` at query :math:`i` is
        :math:`\operatorname{softmax}_j(\ell_{ij})` (for the dot product :math:`\ell_{ij} = x_j^\top B x_i`).

        Parameters
        ----------
        xq : (n, d) array or tensor
            The queries.
        xk : (m, d) array or tensor
            The keys.
        params_h : array or tensor
            One head's parameters (:meth:`head`).

        Returns
        -------
        (n, m) array or tensor
            :math:`\ell_{ij}`, in the library of the inputs.
        """

    def average(self, xq: Any, xk: Any, params_h: Any, log_weights: Any = None) -> Any:
        r"""One head's average of the keys ``xk`` (m, d) at the queries ``xq`` (n, d), torch.

        The keys carry the weights :math:`e^{\texttt{log\_weights}}` (uniform when omitted): a
        weighted empirical measure (a quadrature rule, or a sample). The default is

        .. math::

            a(x_i) = \sum_j \operatorname{softmax}_j(\ell_{ij} + \log w_j)\, x_j ;

        non-local types override it.

        Parameters
        ----------
        xq : (n, d) tensor
            The queries.
        xk : (m, d) tensor
            The keys.
        params_h : tensor
            One head's parameters (:meth:`head`).
        log_weights : (m,) tensor, optional
            The keys' log-weights :math:`\log w_j`; uniform when omitted.

        Returns
        -------
        (n, d) tensor
            The average at each query.
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

        .. math::

            a(x) = \frac{\int y\, w(x, y)\, dN(\mu, \Sigma)(y)}{\int w(x, y)\, dN(\mu, \Sigma)(y)} = Mx + c,

        :math:`w(x, y)` the type's weight of key :math:`y` at query :math:`x`. ``c`` must be linear in
        :math:`\mu` (so that passing the identity for ``mu`` gives the matrix :math:`C` with
        :math:`c = C\mu`).

        Parameters
        ----------
        mu : (d,) array, or (d, d) for the matrix :math:`C`
            The mean (the identity gives :math:`C`).
        Sigma : (d, d) array or tensor
            The covariance.
        params_h : array or tensor
            One head's parameters (:meth:`head`).

        Returns
        -------
        M : (d, d) array or tensor
            The linear response to the query.
        c : (d,) or (d, d) array or tensor
            The offset, :math:`C\mu`.
        """

    def value_responses(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`V_hM_h` for every head, shape (H, d, d): the heads' linear responses to the query.

        Parameters
        ----------
        Sigma : (d, d) array or tensor
            The covariance.
        V : (H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (H, d, d) array or tensor
            :math:`V_hM_h(\Sigma)`, :math:`M_h` from :meth:`tilt`.
        """
        stack: Any
        if isinstance(Sigma, np.ndarray):
            stack = np.stack
        else:
            import torch

            stack = torch.stack
        eye = _eye_like(Sigma)
        return stack([V[h] @ self.tilt(eye, Sigma, self.head(params, h))[0] for h in range(V.shape[0])])

    def linear_part(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`\sum_h V_hM_h`: the attention's linear drift on the query for a Gaussian with covariance
        :math:`\Sigma`.

        Parameters
        ----------
        Sigma : (d, d) array or tensor
            The covariance.
        V : (H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (d, d) array or tensor
            :math:`\sum_h V_hM_h(\Sigma)`.
        """
        return self.value_responses(Sigma, V, params).sum(0)

    def mean_gain(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`\sum_h V_hC_h`: the attention's offset is this matrix times :math:`\mu`.

        Parameters
        ----------
        Sigma : (d, d) array or tensor
            The covariance.
        V : (H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (d, d) array or tensor
            :math:`G = \sum_h V_hC_h(\Sigma)`, :math:`C_h` from :meth:`tilt`.
        """
        eye = _eye_like(Sigma)
        return sum(V[h] @ self.tilt(eye, Sigma, self.head(params, h))[1] for h in range(V.shape[0]))

    def value_responses_derivative(self, Sigma: Any, H: Any, V: Any, params: Any) -> Any:
        r"""Per head, :math:`\frac{d}{d\varepsilon} V_hM_h(\Sigma + \varepsilon H)` at 0, shape (H, d, d)
        (used by Newton's method for equilibria; a central difference by default).

        Parameters
        ----------
        Sigma : (d, d) array
            The covariance.
        H : (d, d) array
            The direction of the derivative.
        V : (H, d, d) array
            The value matrices.
        params : array
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (H, d, d) array
            The directional derivative of :meth:`value_responses`.
        """
        eps = 1e-6 * max(1.0, float(np.linalg.norm(Sigma)))
        return (self.value_responses(Sigma + eps * H, V, params)
                - self.value_responses(Sigma - eps * H, V, params)) / (2 * eps)

    # -- finite N ----------------------------------------------------------------------------
    def kernel(self, x: Any, params: Any) -> Any:
        r"""Per head, the average over the N tokens for every query token: (N, d) -> (H, N, d), torch.

        The default is the dense reference (:meth:`naive_kernel`, :math:`O(N^2)` memory); types
        override it with a blocked kernel.

        Parameters
        ----------
        x : (N, d) tensor
            The tokens, queries and keys at once.
        params : tensor
            The stacked parameters (:meth:`torch_params`).

        Returns
        -------
        (H, N, d) tensor
            Each head's average :math:`a_h(x_i)` over the N tokens.
        """
        return self.naive_kernel(x, params)

    def naive_kernel(self, x: Any, params: Any) -> Any:
        r"""Dense reference: per head ``softmax(logits(x, x)) @ x`` (torch).

        .. math::

            a_h(x_i) = \sum_j \operatorname{softmax}_j(\ell^h_{ij})\, x_j,

        with the :math:`N \times N` matrix of :meth:`logits` held in memory.

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        params : tensor or sequence
            The stacked parameters.

        Returns
        -------
        (H, N, d) tensor
            Each head's average at each token.
        """
        import torch

        n_heads = params.shape[0] if hasattr(params, "shape") else len(params)
        return torch.stack([torch.softmax(self.logits(x, x, self.head(params, h)), dim=1) @ x
                            for h in range(n_heads)])

    # -- optional ------------------------------------------------------------------------------
    def mixture_average(self, x: np.ndarray, weights: np.ndarray, means: np.ndarray, covariances: np.ndarray,
                        params_h: Any) -> np.ndarray:
        r"""The exact average against :math:`\sum_k w_k N(\mu_k, \Sigma_k)` at the queries ``x`` (n, d).

        Optional: the base class raises ``ValueError`` (only the dot product has a closed form).

        Parameters
        ----------
        x : (n, d) array
            The queries.
        weights : (K,) array
            The mixture's weights :math:`w_k`.
        means : (K, d) array
            The components' means :math:`\mu_k`.
        covariances : (K, d, d) array
            The components' covariances :math:`\Sigma_k`.
        params_h : array
            One head's parameters.

        Returns
        -------
        (n, d) array
            The attention average at each query.
        """
        raise ValueError(f"attention {self.name!r} has no closed-form mixture average (the dot product has one)")

    def sampling_strength(self, Sigma: np.ndarray, params_h: Any) -> float:
        r"""A number below 1/2 when the N-token average at Gaussian queries has finite variance.

        Optional: the base class raises ``ValueError`` (only the dot product has a formula).

        Parameters
        ----------
        Sigma : (d, d) array
            The covariance of the tokens.
        params_h : array
            One head's parameters.

        Returns
        -------
        float
            :math:`\kappa_h(\Sigma)`.
        """
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
    """``a`` as a tensor of ``like``'s dtype and device.

    Parameters
    ----------
    a : array
        The array to convert.
    like : torch.Tensor
        The tensor whose dtype and device to use.

    Returns
    -------
    torch.Tensor
        ``a`` on ``like``'s device, in its dtype.
    """
    import torch

    return torch.as_tensor(a, dtype=like.dtype, device=like.device)
