r"""Sinkhorn (doubly-stochastic) attention: the finite-N solver and the Gaussian closed form.

**Finite N.** Tokens :math:`x_1, \dots, x_N` with weights :math:`a_j` (uniform :math:`1/N` unless
given), logits :math:`\ell_{ij} = x_j^\top B x_i` (query :math:`i`, key :math:`j`). Sinkhorn
scaling with entropic parameter 1 finds potentials :math:`f, g` such that
:math:`P_{ij} = e^{f_i + g_j + \ell_{ij}}` has row sums :math:`a_i` and column sums :math:`a_j`.
In the log domain the updates alternate

.. math::

    f_i = \log a_i - \operatorname{LSE}_j(\ell_{ij} + g_j), \qquad
    g_j = \log a_j - \operatorname{LSE}_i(\ell_{ij} + f_i),

starting from :math:`g = 0`. Each row update reads off, for free, the row-marginal violation of
the previous pair (whose columns are exact),
:math:`\max_i |\sum_j P_{ij}/a_i - 1| = \max_i |e^{f_i^{\text{old}} - f_i^{\text{new}}} - 1|`;
the iteration stops when it is at most ``tol`` (keeping the new :math:`f`) or after ``max_iter``
row updates (then ``converged=False`` and :func:`sinkhorn_average` warns with
:class:`SinkhornConvergenceWarning`).
Query :math:`i` then attends with the row-normalised weights
:math:`P_{ij}/\sum_j P_{ij} = \operatorname{softmax}_j(\ell_{ij} + g_j)`, and a query :math:`x`
outside the sample with :math:`\operatorname{softmax}_j(x_j^\top Bx + g_j)` (the same formula:
:math:`f` cancels). Both log-sum-exps are blocked (:mod:`gtcore._kernels`): memory :math:`O(Nd)`
with the fused kernel, :math:`O(N\cdot\mathrm{block})` with ``method="blocked"``.

**Against a Gaussian** :math:`\rho = N(\mu, \Sigma)` the mean-field problem is entropic optimal
transport from :math:`\rho` to itself with cost :math:`-y^\top Bx`: the coupling
:math:`\pi(dx, dy) = e^{f(x) + g(y) + y^\top Bx}\rho(dx)\rho(dy)` with both marginals
:math:`\rho`, and the attention average at :math:`x` is :math:`\mathbb{E}_\pi[y \mid x]`. See
:func:`gaussian_conditional_gain` for the closed form, valid for every (not necessarily
symmetric) :math:`B`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
import numpy as np
import torch

from ._kernels import BLOCK, attend, softmax_average
from ._linalg import psd_sqrt

__all__ = ["SinkhornConvergenceWarning", "SinkhornResult", "default_tol", "gaussian_conditional_gain",
           "sinkhorn_average", "sinkhorn_potentials"]

#: default stopping tolerance on the relative marginal violation (float64; see :func:`default_tol`)
TOL = 1e-9
#: default cap on the number of Sinkhorn row updates
MAX_ITER = 2000


class SinkhornConvergenceWarning(RuntimeWarning):
    """Sinkhorn scaling stopped at ``max_iter`` with a marginal violation above ``tol``."""


@dataclass(frozen=True)
class SinkhornResult:
    """Potentials of a Sinkhorn scaling and its status.

    Attributes
    ----------
    f, g : (N,) tensors
        Row and column log-potentials (they include :math:`\\log a`).
    iterations : int
        Row updates done.
    marginal_error : float
        The relative row-marginal violation of the last pair before its row update (its
        columns were exact).
    converged : bool
        ``marginal_error <= tol``.
    """

    f: torch.Tensor
    g: torch.Tensor
    iterations: int
    marginal_error: float
    converged: bool

    @property
    def status(self) -> str:
        return "converged" if self.converged else "max_iter"


def default_tol(dtype: torch.dtype) -> float:
    r"""The default ``tol`` for tokens of ``dtype``: :math:`\max(\texttt{TOL}, 128\,\varepsilon)`.

    The marginal violation cannot go below a few units of round-off :math:`\varepsilon` (measured
    8--16 :math:`\varepsilon` in float32), so a float64 tolerance would make every float32 scaling
    run to ``max_iter`` and warn; in float64 this is ``TOL``.
    """
    return max(TOL, 128.0 * torch.finfo(dtype).eps)


def _check_stopping(tol: float, max_iter: int) -> None:
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")


def _scale(x, B, log_weights, tol, max_iter, method, block, want_average):
    if tol is None:
        tol = default_tol(x.dtype)
    _check_stopping(tol, max_iter)
    N = x.shape[0]
    if log_weights is None:
        loga = torch.full((N,), -math.log(N), dtype=x.dtype, device=x.device)
    else:
        loga = log_weights - torch.logsumexp(log_weights, 0)
    q = x @ B.T                               # q_i = B x_i, so that l_ij = q_i . x_j
    g = torch.zeros_like(loga)
    f = lse_rows = lse_cols = None
    err = math.inf
    for it in range(1, max_iter + 1):
        avg, lse_rows = attend(q, x, g, x if want_average else None, lse_rows, method, block)
        f_new = loga - lse_rows
        if f is not None:
            # rows of P(f, g) sum to a_i exp(f_i - f_new_i); its columns are exact
            err = float(torch.expm1(f - f_new).abs().max())
            if err <= tol:
                return SinkhornResult(f_new, g, it, err, True), avg
        f = f_new
        _, lse_cols = attend(x, q, f, None, lse_cols, method, block)  # LSE_i(x_j . q_i + f_i)
        g = loga - lse_cols
    avg, _ = attend(q, x, g, x if want_average else None, lse_rows, method, block)
    return SinkhornResult(f, g, max_iter, err, False), avg


def sinkhorn_potentials(x: torch.Tensor, B: torch.Tensor, log_weights: torch.Tensor | None = None, *,
                        tol: float | None = None, max_iter: int = MAX_ITER, method: str = "sdpa",
                        block: int = BLOCK) -> SinkhornResult:
    r"""Log-domain Sinkhorn scaling of :math:`e^{x_j^\top Bx_i}` on the tokens ``x`` (N, d) to marginals :math:`a`.

    Parameters
    ----------
    x : (N, d) tensor
    B : (d, d) tensor
    log_weights : (N,) tensor, optional
        :math:`\log a_j` (normalised to sum 1 here); uniform when omitted.
    tol, max_iter : float, int
        Stop when the relative marginal violation is at most ``tol`` (default
        :func:`default_tol` of ``x``'s dtype), or after ``max_iter`` iterations.
    method : ``"sdpa"`` or ``"blocked"``
        How the log-sum-exps run (:mod:`gtcore._kernels`).
    block : int
        Rows per block of ``"blocked"``.
    """
    return _scale(x, B, log_weights, tol, max_iter, method, block, False)[0]


def sinkhorn_average(x: torch.Tensor, B: torch.Tensor, log_weights: torch.Tensor | None = None,
                     queries: torch.Tensor | None = None, *, tol: float | None = None, max_iter: int = MAX_ITER,
                     method: str = "sdpa", block: int = BLOCK, warn: bool = True
                     ) -> tuple[torch.Tensor, SinkhornResult]:
    r"""Sinkhorn attention of the tokens ``x`` at ``queries`` (default ``x`` itself): ``(average, result)``.

    .. math::

        a(x_q) = \sum_j \operatorname{softmax}_j(x_j^\top B x_q + g_j)\, x_j,

    with :math:`g` from :func:`sinkhorn_potentials` (same arguments); for the tokens themselves
    the average comes out of the last row update. Warns with :class:`SinkhornConvergenceWarning`
    when the scaling did not converge (``warn=True``); the returned :class:`SinkhornResult`
    carries the status either way.
    """
    if tol is None:
        tol = default_tol(x.dtype)
    res, avg = _scale(x, B, log_weights, tol, max_iter, method, block, queries is None)
    if not res.converged and warn:
        warnings.warn(f"Sinkhorn scaling did not converge: marginal error {res.marginal_error:.3e} > tol={tol:g} "
                      f"after max_iter={max_iter} iterations", SinkhornConvergenceWarning, stacklevel=2)
    if queries is not None:
        avg = softmax_average(queries @ B.T, x, res.g, x, method, block)
    return avg, res


def gaussian_conditional_gain(Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""The gain :math:`M` of Sinkhorn attention against :math:`N(\mu, \Sigma)`: :math:`\mathbb{E}_\pi[y\mid x] = \mu + M(x - \mu)`.

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
    """
    Sh = psd_sqrt(0.5 * (Sigma + Sigma.T))
    d = Sh.shape[0]
    T = Sh @ B @ Sigma @ B.T @ Sh
    R = psd_sqrt(np.eye(d) + 2.0 * (T + T.T))
    return 2.0 * Sh @ np.linalg.solve(np.eye(d) + R, Sh @ B)
