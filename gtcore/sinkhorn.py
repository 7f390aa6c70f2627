r"""Sinkhorn (doubly-stochastic) attention: the finite-N solver and the Gaussian closed form.

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
:class:`SinkhornConvergenceWarning`). The answer is checked against ``tol`` the same way whatever
the starting point and acceleration, which change only how many passes it takes.

**Speed-ups** (each pass costs about one dot-product attention kernel).

* *Warm start*: the potentials of the Gaussian problem fitted to the tokens' (weighted)
  empirical moments, :func:`gaussian_column_potential`, evaluated at the tokens. For Gaussian
  tokens they are off only by the sampling fluctuation, :math:`O(N^{-1/2})`.
* *Anderson acceleration* (depth ``anderson``, 0 for plain Sinkhorn) of the fixed-point map
  :math:`g \mapsto T_c(T_r(g))`: the next :math:`g` is the combination of the last
  ``anderson + 1`` images that minimises the combined residual (type II, Walker and Ni 2011);
  a step whose residual grows restarts the history (a plain Sinkhorn step from there).

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
from ._linalg import RANK_RTOL, psd_sqrt

__all__ = ["SinkhornConvergenceWarning", "SinkhornResult", "default_tol", "gaussian_column_potential", "gaussian_conditional_gain",
           "sinkhorn_average", "sinkhorn_potentials"]

#: default stopping tolerance on the relative marginal violation (float64; see :func:`default_tol`)
TOL = 1e-9
#: default cap on the number of Sinkhorn row updates
MAX_ITER = 2000
#: default depth of the Anderson acceleration (0: plain Sinkhorn)
ANDERSON = 4
#: starting points of the column potential
INITS = ("gaussian", "zero")


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


def _check_acceleration(init: str, anderson: int) -> None:
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; valid: {', '.join(INITS)}")
    if isinstance(anderson, bool) or not isinstance(anderson, (int, np.integer)) or anderson < 0:
        raise ValueError(f"anderson must be a non-negative integer, got {anderson!r}")


def _violation(u: torch.Tensor, v: torch.Tensor) -> float:
    """:math:`\\max_k |e^{u_k - v_k} - 1|`: the relative marginal violation when the sums are :math:`a_k e^{u_k - v_k}`."""
    return float(torch.expm1(u - v).abs().max())


def _gaussian_start(x, B, loga):
    """The Gaussian column potential (:func:`gaussian_column_potential`) at the tokens, as a tensor."""
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
        self.depth, self.gs, self.rs = depth, [], []

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
        gamma = torch.linalg.solve(A, dR.T @ R[:, -1])
        if not bool(torch.isfinite(gamma).all()):
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
    f = Gf = lse_rows = lse_cols = None       # the last pair's f and T_c(f)
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
    B : (d, d) tensor
    log_weights : (N,) tensor, optional
        :math:`\log a_j` (normalised to sum 1 here); uniform when omitted.
    tol, max_iter : float, int
        Stop when the relative violation of both marginals is at most ``tol`` (default
        :func:`default_tol` of ``x``'s dtype), or after
        ``max_iter`` row updates.
    method : ``"sdpa"`` or ``"blocked"``
        How the log-sum-exps run (:mod:`gtcore._kernels`).
    block : int
        Rows per block of ``"blocked"``.
    init : ``"gaussian"`` or ``"zero"``
        Starting column potential: the Gaussian problem's (:func:`gaussian_column_potential` at the
        tokens' empirical moments) or 0.
    anderson : int
        Depth of the Anderson acceleration; 0 for plain Sinkhorn.
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
    the average comes out of the pass that certified the returned pair. Warns with :class:`SinkhornConvergenceWarning`
    when the scaling did not converge (``warn=True``); the returned :class:`SinkhornResult`
    carries the status either way.
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


def _potential_hessian(Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:math:`P` of :func:`gaussian_column_potential`, on the numerical range of ``Sigma``."""
    S = 0.5 * (Sigma + Sigma.T)
    w, U = np.linalg.eigh(S)
    if w.size == 0 or w[-1] <= 0:
        return np.zeros_like(S)
    keep = w > RANK_RTOL * w[-1]
    Sh = (U[:, keep] * np.sqrt(w[keep])) @ U[:, keep].T
    Sh_inv = (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T     # pseudo-inverse of Sigma^(1/2)
    d = S.shape[0]
    T = Sh @ B @ S @ B.T @ Sh                                    # G^T G
    R = psd_sqrt(np.eye(d) + 2.0 * (T + T.T))
    KG = 2.0 * np.linalg.solve(np.eye(d) + R, T)
    return Sh_inv @ (0.5 * (KG + KG.T)) @ Sh_inv


def gaussian_column_potential(y: np.ndarray, mu: np.ndarray, Sigma: np.ndarray, B: np.ndarray) -> np.ndarray:
    r"""The column potential :math:`g(y)` of Sinkhorn attention against :math:`N(\mu, \Sigma)`, up to a constant.

    .. math::

        g(y) = -\tfrac12 (y - \mu)^\top P\,(y - \mu) - y^\top B\mu + \text{const}, \qquad
        P = \Sigma^{-1/2}\,2(I + R)^{-1}G^\top G\,\Sigma^{-1/2},

    with :math:`G = \Sigma^{1/2}B^\top\Sigma^{1/2}` and :math:`R = (I + 4G^\top G)^{1/2}`
    (:math:`\Sigma^{-1/2}` the pseudo-inverse on the numerical range, where tokens lie).

    Derivation, in the notation of :func:`gaussian_conditional_gain`: the optimal coupling is
    Gaussian with joint precision :math:`\Lambda` whose :math:`xy` block is :math:`-B^\top`, so
    :math:`f(x) + g(y) + y^\top Bx = \log\pi(x, y) - \log\rho(x) - \log\rho(y)` has the
    :math:`yy` part :math:`-\tfrac12(y-\mu)^\top(\Lambda_{yy} - \Sigma^{-1})(y-\mu)` and the cross
    part :math:`(y-\mu)^\top B(x-\mu)`, whose term :math:`-y^\top B\mu` belongs to :math:`g`. By the
    block inverse :math:`\Lambda_{yy} = (\Sigma - C^\top\Sigma^{-1}C)^{-1}
    = \Sigma^{-1/2}(I - K^\top K)^{-1}\Sigma^{-1/2}`, and
    :math:`(I - K^\top K)^{-1} - I = K^\top K(I - K^\top K)^{-1} = K^\top G
    = 2(I + R)^{-1}G^\top G` by the defining relation :math:`K(I - K^\top K)^{-1} = G` and
    :math:`K = 2G(I + R)^{-1}`.

    The finite-N solver starts from it (:func:`sinkhorn_potentials` with ``init="gaussian"``,
    moments of the tokens); a discretised Gaussian is scaled to it up to the quadrature error.

    Parameters
    ----------
    y : (n, d) array
        Points to evaluate at.
    mu, Sigma, B : (d,), (d, d), (d, d) arrays
    """
    y, mu, Sigma, B = (np.asarray(a, dtype=float) for a in (y, mu, Sigma, B))
    d = Sigma.shape[0]
    if Sigma.shape != (d, d) or B.shape != (d, d) or mu.shape != (d,):
        raise ValueError(f"Sigma, B must be (d, d) and mu (d,); got Sigma {Sigma.shape}, B {B.shape}, mu {mu.shape}")
    if y.ndim != 2 or y.shape[1] != d:
        raise ValueError(f"y must be (n, {d}), got {y.shape}")
    yc = y - mu
    return -0.5 * np.einsum("ni,ij,nj->n", yc, _potential_hessian(Sigma, B), yc) - y @ (B @ mu)
