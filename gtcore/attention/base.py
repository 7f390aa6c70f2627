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

    Examples
    --------
    >>> from gtcore.attention import ATTENTION_TYPES, AttentionType
    >>> sorted(ATTENTION_TYPES)
    ['dot', 'l2', 'sinkhorn']
    >>> all(isinstance(t, AttentionType) for t in ATTENTION_TYPES.values())
    True
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
        r""":math:`V_hM_h` for every head, shape (..., H, d, d): the heads' linear responses to the query.

        Works over leading lane axes: ``Sigma`` (..., d, d), ``V`` (..., H, d, d) and ``params`` (..., H, ...)
        give (..., H, d, d), lane by lane (the default loops over the lanes and the heads; the registered
        types override it with one vectorised evaluation).

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance (one per lane).
        V : (..., H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`; with a leading lane axis for a batch).

        Returns
        -------
        (..., H, d, d) array or tensor
            :math:`V_hM_h(\Sigma)`, :math:`M_h` from :meth:`tilt`.
        """
        if Sigma.ndim > 2:
            return _per_lane(self.value_responses, Sigma, V, params)
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
        :math:`\Sigma`, over leading lane axes as :meth:`value_responses`.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance.
        V : (..., H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (..., d, d) array or tensor
            :math:`\sum_h V_hM_h(\Sigma)`.
        """
        return self.value_responses(Sigma, V, params).sum(-3)

    def mean_gain(self, Sigma: Any, V: Any, params: Any) -> Any:
        r""":math:`\sum_h V_hC_h`: the attention's offset is this matrix times :math:`\mu` (over leading lane axes
        as :meth:`value_responses`).

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance.
        V : (..., H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (..., d, d) array or tensor
            :math:`G = \sum_h V_hC_h(\Sigma)`, :math:`C_h` from :meth:`tilt`.
        """
        if Sigma.ndim > 2:
            return _per_lane(self.mean_gain, Sigma, V, params)
        eye = _eye_like(Sigma)
        return sum(V[h] @ self.tilt(eye, Sigma, self.head(params, h))[1] for h in range(V.shape[0]))

    def gaussian_parts(self, Sigma: Any, V: Any, params: Any) -> tuple[Any, Any]:
        r"""Both Gaussian parts at once: :math:`(\sum_h V_hM_h, \sum_h V_hC_h)`, over leading lane axes.

        The default calls :meth:`linear_part` and :meth:`mean_gain`; a type whose two parts share work (one
        tilt gives both) overrides it, with the same arithmetic.

        Parameters
        ----------
        Sigma : (..., d, d) array or tensor
            The covariance.
        V : (..., H, d, d) array or tensor
            The value matrices.
        params : array or tensor
            The stacked parameters (:meth:`params`).

        Returns
        -------
        linear, gain : (..., d, d) arrays or tensors
            :meth:`linear_part` and :meth:`mean_gain`.
        """
        return self.linear_part(Sigma, V, params), self.mean_gain(Sigma, V, params)

    def gaussian_parts_function(self, V: Any, params: Any) -> Any:
        r""":meth:`gaussian_parts` with the heads held fixed: a function :math:`\Sigma \mapsto (\sum_h V_hM_h,
        \sum_h V_hC_h)` that the integrators set up once per constant layer and call at every evaluation.

        The default closes over :meth:`gaussian_parts`; a type overrides it to do once what does not depend on
        :math:`\Sigma` (same arithmetic, so the same numbers).

        Parameters
        ----------
        V : (..., H, d, d) array
            The value matrices.
        params : array
            The stacked parameters (:meth:`params`).

        Returns
        -------
        callable
            ``parts(Sigma) -> (linear, gain)``.
        """

        def parts(Sigma: Any) -> tuple[Any, Any]:
            return self.gaussian_parts(Sigma, V, params)

        return parts

    def stack_params(self, params: Any, heads: int) -> np.ndarray:
        r"""The parameters of n layers (:meth:`params` of each) stacked over a leading lane axis, shape
        (n, heads, ...); a layer with fewer heads is padded with zero parameters.

        A padded head carries :math:`V_h = 0` (``gtcore.moments.batched.stack_controls``), so it adds
        nothing as long as its tilt is finite at zero parameters (true of the registered types; a type whose
        tilt is not overrides this).

        Parameters
        ----------
        params : sequence of arrays
            Each layer's stacked parameters, (H_k, ...) with one shape ``...``.
        heads : int
            The number of heads of the stack (at least every ``H_k``).

        Returns
        -------
        (n, heads, ...) ndarray
            The stacked parameters.

        Raises
        ------
        ValueError
            Layers whose head parameters differ in shape (e.g. L2 key widths), naming the shapes.
        """
        arrays = [np.asarray(p, dtype=float) for p in params]
        shapes = sorted({a.shape[1:] for a in arrays})
        if len(shapes) != 1:
            raise ValueError(f"attention {self.name!r}: the layers' head parameters must share one shape, got {shapes}")
        out = np.zeros((len(arrays), int(heads), *shapes[0]))
        for k, a in enumerate(arrays):
            out[k, : a.shape[0]] = a
        return out

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
        return (self.value_responses(Sigma + eps * H, V, params) - self.value_responses(Sigma - eps * H, V, params)) / (
            2 * eps
        )

    def drift_bound(self, V: Any, params: Any) -> float | None:
        r"""A constant :math:`L` bounding the attention drift, or None.

        The bound: :math:`\|\sum_h V_hM_h(\Sigma)\,\Sigma\|_2 \le L\,\|\Sigma\|_2` for every :math:`\Sigma \succeq 0`.

        With such a bound the covariance equation :math:`\Sigma' = F\Sigma + \Sigma F^\top`,
        :math:`F = A + \sum_h V_hM_h(\Sigma)`, is at most linear in :math:`\Sigma`:
        :math:`\tfrac{d}{dt}\|\Sigma\|_2 \le 2(\|A\|_2 + L)\|\Sigma\|_2`, so
        :math:`\|\Sigma(t)\|_2 \le \|\Sigma_0\|_2e^{2(\|A\|_2 + L)t}` (Grönwall) and there is no
        finite-time blow-up: :func:`gtcore.riccati.blowup_time` uses it as its certificate that no pole
        exists.

        Parameters
        ----------
        V : (H, d, d) ndarray
            The value matrices :math:`V_h`.
        params : object
            The type's head parameters (``B`` for the dot product and Sinkhorn, ``(Q, K)`` for L2).

        Returns
        -------
        float or None
            :math:`L`, or None (the default) when no such bound is known for the type.
        """
        return None

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
        return torch.stack([torch.softmax(self.logits(x, x, self.head(params, h)), dim=1) @ x for h in range(n_heads)])

    # -- optional ------------------------------------------------------------------------------
    def mixture_average(
        self, x: np.ndarray, weights: np.ndarray, means: np.ndarray, covariances: np.ndarray, params_h: Any
    ) -> np.ndarray:
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

    def riccati_quadratic(self, V: np.ndarray, params: Any) -> np.ndarray | None:
        r"""The constant :math:`Q` with :math:`\sum_h (V_hM_h(\Sigma)\Sigma + \Sigma M_h(\Sigma)^\top V_h^\top)
        = \Sigma Q\Sigma` for every :math:`\Sigma`, when there is one (the linearisable case of
        :mod:`gtcore.riccati`), else None.

        Optional: the base class returns None (no linearising substitution is known for the type).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        params : array
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (d, d) ndarray or None
            :math:`Q`, exactly symmetric; None when the type or these parameters have none.
        """
        return None

    def asymptotic_linear_part(self, V: np.ndarray, params: Any) -> np.ndarray:
        r"""The limit of :math:`\sum_h V_hM_h(\Sigma)` when :math:`\Sigma^{-1} \to 0` (a covariance growing in
        every direction), from which the asymptotic growth rate of :math:`\Sigma` follows.

        Optional: the base class raises ``ValueError`` (the dot product's :math:`M_h = \Sigma B_h` has no
        limit; L2 with square invertible keys and Sinkhorn with symmetric positive-definite :math:`B_h`
        have one).

        Parameters
        ----------
        V : (H, d, d) array
            The value matrices.
        params : array
            The stacked parameters (:meth:`params`).

        Returns
        -------
        (d, d) ndarray
            :math:`\lim \sum_h V_hM_h(\Sigma)`.

        Raises
        ------
        ValueError
            The type (or these parameters) has no such limit, naming the type.
        """
        raise ValueError(f"attention {self.name!r} has no limit of its tilt as Sigma^-1 -> 0 (no asymptotic rate)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _lib(S: Any):
    """NumPy or torch, whichever holds ``S``."""
    if isinstance(S, np.ndarray):
        return np
    import torch

    return torch


def _per_lane(method: Any, Sigma: Any, V: Any, params: Any) -> Any:
    """``method`` lane by lane over the leading axis of ``Sigma``, ``V`` and ``params``, stacked."""
    stack = np.stack if isinstance(Sigma, np.ndarray) else _lib(Sigma).stack
    return stack([method(Sigma[k], V[k], params[k]) for k in range(Sigma.shape[0])])


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
