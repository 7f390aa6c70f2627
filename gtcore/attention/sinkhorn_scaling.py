r"""Sinkhorn (doubly-stochastic) attention at finite N: log-domain Sinkhorn scaling in torch.

**Finite N.** Tokens :math:`x_1, \dots, x_N` with weights :math:`a_j` (uniform :math:`1/N` unless
given), logits :math:`\ell_{ij} = x_j^\top B x_i` (query :math:`i`, key :math:`j`). Sinkhorn
scaling with entropic parameter 1 finds potentials :math:`f, g` such that
:math:`P_{ij} = e^{f_i + g_j + \ell_{ij}}` has row sums :math:`a_i` and column sums :math:`a_j`.
In the log domain the updates alternate

.. math::

    f_i = \log a_i - \operatorname{LSE}_j(\ell_{ij} + g_j), \qquad
    g_j = \log a_j - \operatorname{LSE}_i(\ell_{ij} + f_i),

starting from the Gaussian guess of :math:`g` (below; ``init="zero"``: :math:`g = 0`).

**Stopping rule.** Every pass certifies the marginals of a pair from quantities it has just
computed: after the column update from :math:`f = T_r(g)` (rows exact), the pair :math:`(f, g)`
has column sums :math:`a_j e^{g_j - T_c(f)_j}`; after the next row update the pair
:math:`(f, g^{\text{next}})` has row sums :math:`a_i e^{f_i - T_r(g^{\text{next}})_i}` and column
sums :math:`a_j e^{g^{\text{next}}_j - T_c(f)_j}` (:math:`T_r, T_c` the two updates above). The
iteration stops at the first pair whose relative violation
:math:`\max(\max_i|\sum_jP_{ij}/a_i - 1|, \max_j|\sum_iP_{ij}/a_j - 1|)` is at most ``tol``,
returns that pair and the attention average of the pass that computed it, or stops after
``max_iter`` row updates (then ``converged=False`` and :func:`sinkhorn_average` warns with
:class:`~gtcore.attention.sinkhorn.SinkhornConvergenceWarning`). The answer is checked against ``tol`` the same way
whatever the starting point and acceleration, which change only how many passes it takes.

**Speed-ups** (each pass costs about one dot-product attention kernel).

* *Warm start*: the potentials of the Gaussian problem fitted to the tokens' (weighted)
  empirical moments, :func:`~gtcore.attention.sinkhorn.gaussian_column_potential`, evaluated at the tokens. For Gaussian
  tokens they are off only by the sampling fluctuation, :math:`O(N^{-1/2})`.
* *Anderson acceleration* (depth ``anderson``, 0 for plain Sinkhorn) of the fixed-point map
  :math:`g \mapsto T_c(T_r(g))`: the next :math:`g` is the combination of the last
  ``anderson + 1`` images that minimises the combined residual (type II, Walker and Ni 2011);
  a step whose residual grows restarts the history (a plain Sinkhorn step from there).

Query :math:`i` then attends with the row-normalised weights
:math:`P_{ij}/\sum_j P_{ij} = \operatorname{softmax}_j(\ell_{ij} + g_j)`, and a query :math:`x`
outside the sample with :math:`\operatorname{softmax}_j(x_j^\top Bx + g_j)` (the same formula:
:math:`f` cancels). Both log-sum-exps are blocked (:mod:`gtcore.attention.kernels`): memory :math:`O(Nd)`
with the fused kernel, :math:`O(N\cdot\mathrm{block})` with ``method="blocked"``.

The constants, the stopping checks and the Gaussian closed form live with the attention type in
:mod:`gtcore.attention.sinkhorn` (torch-free).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gtcore._repr import short_repr
from gtcore.attention.base import BLOCK
from gtcore.attention.kernels import attend, softmax_average
from gtcore.attention.sinkhorn_gaussian import _potential_hessian
from gtcore.attention.sinkhorn_options import (
    ANDERSON,
    MAX_ITER,
    SinkhornConvergenceWarning,
    _check_acceleration,
    _check_stopping,
    default_tol,
)

__all__ = ["SinkhornResult", "sinkhorn_average", "sinkhorn_potentials"]

@dataclass(frozen=True)
class SinkhornResult:
    """Potentials of a Sinkhorn scaling and its status.

    Attributes
    ----------
    f, g : (N,) tensors
        Row and column log-potentials (they include :math:`\\log a`).
    iterations : int
        Row updates done (the kernel passes are about twice as many).
    marginal_error : float
        The relative violation of the row and column marginals of the returned pair ``(f, g)``
        (the larger of the two).
    converged : bool
        ``marginal_error <= tol``.
    """

    f: torch.Tensor
    g: torch.Tensor
    iterations: int
    marginal_error: float
    converged: bool

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays

    @property
    def status(self) -> str:
        """``"converged"``, or ``"max_iter"`` when the scaling stopped at ``max_iter`` above ``tol``."""
        return "converged" if self.converged else "max_iter"


def _violation(u: torch.Tensor, v: torch.Tensor) -> float:
    """:math:`\\max_k |e^{u_k - v_k} - 1|`: the relative marginal violation when the sums are
    :math:`a_k e^{u_k - v_k}`."""
    return float(torch.expm1(u - v).abs().max())


def _gaussian_start(x, B, loga):
    """The Gaussian column potential (:func:`~gtcore.attention.sinkhorn.gaussian_column_potential`) at the tokens,
    as a tensor."""
    xd = x.detach()
    w = torch.exp(loga)
    mu = w @ xd
    xc = xd - mu
    S = (xc * w[:, None]).T @ xc
    Bn = B.detach().cpu().double().numpy()
    P = _potential_hessian(S.cpu().double().numpy(), Bn)
    if not np.all(np.isfinite(P)):
        return torch.zeros_like(loga)
    Pt = torch.as_tensor(P, dtype=x.dtype, device=x.device)
    return -0.5 * ((xc @ Pt) * xc).sum(1) - xd @ (B.detach() @ mu)


class _Anderson:
    """Type-II Anderson mixing of a fixed-point map :math:`g \\mapsto G(g)` with restarts."""

    def __init__(self, depth: int):
        self.depth = depth
        self.gs: list[torch.Tensor] = []
        self.rs: list[torch.Tensor] = []

    def step(self, g, Gg, grew: bool):
        if self.depth == 0:
            return Gg
        if grew:
            self.gs, self.rs = [], []
        self.gs.append(Gg)
        self.rs.append(Gg - g)
        self.gs, self.rs = self.gs[-(self.depth + 1):], self.rs[-(self.depth + 1):]
        if len(self.rs) == 1:
            return Gg
        R = torch.stack(self.rs, 1)
        dR = R[:, 1:] - R[:, :-1]
        dG = torch.stack(self.gs, 1)
        dG = dG[:, 1:] - dG[:, :-1]
        A = dR.T @ dR
        A = A + 1e-12 * A.diagonal().sum() * torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
        try:
            gamma = torch.linalg.solve(A, dR.T @ R[:, -1])
        except torch.linalg.LinAlgError:  # A = 0 (no change between iterates): restart, as for a non-finite gamma
            gamma = None
        if gamma is None or not bool(torch.isfinite(gamma).all()):
            self.gs, self.rs = [], []
            return Gg
        return Gg - dG @ gamma


def _scale(x, B, log_weights, tol, max_iter, method, block, want_average, init, anderson):
    if tol is None:
        tol = default_tol(x.dtype)
    _check_stopping(tol, max_iter)
    _check_acceleration(init, anderson)
    N = x.shape[0]
    if log_weights is None:
        loga = torch.full((N,), -math.log(N), dtype=x.dtype, device=x.device)
    else:
        loga = log_weights - torch.logsumexp(log_weights, 0)
    q = x @ B.T                               # q_i = B x_i, so that l_ij = q_i . x_j
    g = _gaussian_start(x, B, loga) if init == "gaussian" else torch.zeros_like(loga)
    mixer = _Anderson(int(anderson))
    values = x if want_average else None
    # the last pair's f and T_c(f): set together at the first iteration (max_iter >= 1)
    f: Any = None
    Gf: Any = None
    lse_rows = lse_cols = None
    err = last = math.inf
    for it in range(1, max_iter + 1):
        avg, lse_rows = attend(q, x, g, values, lse_rows, method, block)
        f_new = loga - lse_rows               # T_r(g)
        if f is not None:                     # the pair (f, g): rows a e^{f - T_r g}, columns a e^{g - T_c f}
            err = max(_violation(f, f_new), _violation(g, Gf))
            if err <= tol:
                return SinkhornResult(f, g, it, err, True), avg
        f = f_new
        _, lse_cols = attend(x, q, f, None, lse_cols, method, block)   # LSE_i(x_j . q_i + f_i)
        Gf = loga - lse_cols                  # T_c(f)
        err = _violation(g, Gf)               # the pair (f, g): rows exact
        if err <= tol:
            return SinkhornResult(f, g, it, err, True), avg
        g_next = mixer.step(g, Gf, err > last)
        last = err
        if it < max_iter:
            g = g_next
    return SinkhornResult(f, g, max_iter, err, False), avg


def sinkhorn_potentials(x: torch.Tensor, B: torch.Tensor, log_weights: torch.Tensor | None = None, *,
                        tol: float | None = None, max_iter: int = MAX_ITER, method: str = "sdpa",
                        block: int = BLOCK, init: str = "gaussian", anderson: int = ANDERSON) -> SinkhornResult:
    r"""Log-domain Sinkhorn scaling of :math:`e^{x_j^\top Bx_i}` on the tokens ``x`` (N, d) to marginals :math:`a`.

    Parameters
    ----------
    x : (N, d) tensor
        The tokens.
    B : (d, d) tensor
        The query-key matrix (logits :math:`x_j^\top Bx_i`).
    log_weights : (N,) tensor, optional
        :math:`\log a_j` (normalised to sum 1 here); uniform when omitted.
    tol, max_iter : float, int
        Stop when the relative violation of both marginals is at most ``tol`` (default
        :func:`~gtcore.attention.sinkhorn.default_tol` of ``x``'s dtype), or after
        ``max_iter`` row updates.
    method : ``"sdpa"`` or ``"blocked"``
        How the log-sum-exps run (:mod:`gtcore.attention.kernels`).
    block : int
        Rows per block of ``"blocked"``.
    init : ``"gaussian"`` or ``"zero"``
        Starting column potential: the Gaussian problem's
        (:func:`~gtcore.attention.sinkhorn.gaussian_column_potential` at the tokens' empirical moments) or 0.
    anderson : int
        Depth of the Anderson acceleration; 0 for plain Sinkhorn.

    Returns
    -------
    SinkhornResult
        The potentials :math:`f, g` of the certified pair, the iterations and the marginal error.

    Raises
    ------
    ValueError
        A ``tol``, ``max_iter``, ``init`` or ``anderson`` out of range, or an unknown ``method``.
    """
    return _scale(x, B, log_weights, tol, max_iter, method, block, False, init, anderson)[0]


def sinkhorn_average(x: torch.Tensor, B: torch.Tensor, log_weights: torch.Tensor | None = None,
                     queries: torch.Tensor | None = None, *, tol: float | None = None, max_iter: int = MAX_ITER,
                     method: str = "sdpa", block: int = BLOCK, warn: bool = True, init: str = "gaussian",
                     anderson: int = ANDERSON) -> tuple[torch.Tensor, SinkhornResult]:
    r"""Sinkhorn attention of the tokens ``x`` at ``queries`` (default ``x`` itself): ``(average, result)``.

    .. math::

        a(x_q) = \sum_j \operatorname{softmax}_j(x_j^\top B x_q + g_j)\, x_j,

    with :math:`g` from :func:`sinkhorn_potentials` (same arguments); for the tokens themselves
    the average comes out of the pass that certified the returned pair. Warns with
    :class:`~gtcore.attention.sinkhorn.SinkhornConvergenceWarning` when the scaling did not converge
    (``warn=True``); the returned :class:`SinkhornResult` carries the status either way.

    Parameters
    ----------
    x : (N, d) tensor
        The tokens, the keys and values (and the queries when ``queries`` is omitted).
    B : (d, d) tensor
        The query-key matrix.
    log_weights : (N,) tensor, optional
        The tokens' log-weights :math:`\log a_j`; uniform when omitted.
    queries : (n, d) tensor, optional
        Where to evaluate the average; the tokens themselves when omitted.
    tol, max_iter : float, int
        The stopping rule of :func:`sinkhorn_potentials`.
    method : ``"sdpa"`` or ``"blocked"``
        How the log-sum-exps run (:mod:`gtcore.attention.kernels`).
    block : int
        Rows per block of ``"blocked"``.
    warn : bool
        Warn when the scaling did not converge.
    init : ``"gaussian"`` or ``"zero"``
        The starting column potential (:func:`sinkhorn_potentials`).
    anderson : int
        Depth of the Anderson acceleration; 0 for plain Sinkhorn.

    Returns
    -------
    average : (N, d) or (n, d) tensor
        The Sinkhorn attention average at each token (or query).
    result : SinkhornResult
        The scaling's potentials and status.
    """
    if tol is None:
        tol = default_tol(x.dtype)
    res, avg = _scale(x, B, log_weights, tol, max_iter, method, block, queries is None, init, anderson)
    if not res.converged and warn:
        warnings.warn(f"Sinkhorn scaling did not converge: marginal error {res.marginal_error:.3e} > tol={tol:g} "
                      f"after max_iter={max_iter} iterations", SinkhornConvergenceWarning, stacklevel=2)
    if queries is not None:
        avg = softmax_average(queries @ B.T, x, res.g, x, method, block)
    return avg, res
