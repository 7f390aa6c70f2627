r"""Sinkhorn (doubly-stochastic) attention at finite N: Sinkhorn scaling in torch.

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

**Speed-ups** (none changes the certificate; each changes only how many passes, and what a pass costs).

* *Gaussian start*: the potentials of the Gaussian problem fitted to the tokens' (weighted)
  empirical moments, :func:`~gtcore.attention.sinkhorn.gaussian_column_potential`, evaluated at the tokens. For
  Gaussian tokens they are off only by the sampling fluctuation, :math:`O(N^{-1/2})`.
* *Warm starts* (:func:`warm_starts`, opened by :func:`gtcore.particles.simulate`): a scaling of the same problem
  as the last one, on tokens moved a little, starts from the new Gaussian potential plus the last remainder.
* *Anderson acceleration* (depth ``anderson``, 0 for plain Sinkhorn) of the fixed-point map
  :math:`g \mapsto T_c(T_r(g))`: the next :math:`g` is the combination of the last
  ``anderson + 1`` images that minimises the combined residual (type II, Walker and Ni 2011);
  a step whose residual grows restarts the history (a plain Sinkhorn step from there).
* *The dense engine* (default for float64 tokens up to :data:`DENSE_MAX_N`): the kernel with the starting
  potentials absorbed, :math:`E_{ij} = e^{\ell_{ij} + c_i + g^0_j}`, is formed once (one exponential per entry),
  and the updates become matrix-vector products with :math:`E` and :math:`E^\top` (``_Absorbed``); when
  the scalings drift beyond a tenth of the exponent range they are absorbed again. A log-domain pass costs two
  exponentials per entry.
* *The symmetric iteration*, when :math:`B` is symmetric positive semi-definite (the plan is then symmetric,
  :math:`f = g`): the damped map :math:`g \mapsto (g + T(g))/2` contracts by at least 1/2 per step however
  strong the kernel, where alternating Sinkhorn slows down like :math:`\sigma_2(P)^2 \to 1`
  (``_iterate_symmetric``); one matrix-vector product per step.

**Tokens without mass** (log-weight :math:`-\infty`) are no rows and no columns of the plan
(:math:`f = g = -\infty`): the scaling runs on the others; such a token still attends, as a query.

Query :math:`i` then attends with the row-normalised weights
:math:`P_{ij}/\sum_j P_{ij} = \operatorname{softmax}_j(\ell_{ij} + g_j)`, and a query :math:`x`
outside the sample with :math:`\operatorname{softmax}_j(x_j^\top Bx + g_j)` (the same formula:
:math:`f` cancels). In the log domain both log-sum-exps are blocked (:mod:`gtcore.attention.kernels`): memory
:math:`O(Nd)` with the fused kernel, :math:`O(N\cdot\mathrm{block})` with ``method="blocked"``; the dense engine
holds the :math:`N \times N` kernel (128 MiB at :data:`DENSE_MAX_N`; ``dense=False`` keeps the memory
:math:`O(Nd)`).

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
from gtcore.attention.base import BLOCK, _check_method
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
from gtcore.attention.sinkhorn_warm import _WARM, WarmStarts, warm_starts

__all__ = ["DENSE_MAX_N", "SinkhornResult", "WarmStarts", "sinkhorn_average", "sinkhorn_potentials", "warm_starts"]

#: the largest N scaled on a dense kernel by default (float64: N x N entries, 128 MiB at this N)
DENSE_MAX_N = 4096
#: how many times a dense scaling may absorb its potentials before it continues in the log domain
MAX_ABSORB = 8


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
    """Type-II Anderson mixing of a fixed-point map :math:`g \\mapsto G(g)` with restarts: the next point is
    :math:`G(g_k) - \\Delta G\\,\\gamma` with :math:`\\gamma` the least-squares coefficients of the last ``depth``
    residual differences :math:`\\Delta R` against the current residual (the small normal equations solved in
    NumPy; the differences kept as they come, so a step stacks them once).

    A mix that would move a potential by more than ``limit`` away from the plain image :math:`G(g_k)` is refused:
    the step is the plain Sinkhorn step and the history restarts. That is a stalled secant: when the residuals
    hardly change between iterates (a strong kernel, whose potentials drift by nearly the same amount at every
    pass), the least-squares coefficients grow like the inverse of their difference, and the mix lands
    thousands of units away in the log domain, where the kernel's column sums underflow to zero and the next pass
    gives infinite potentials (then NaN averages). ``limit`` is :func:`_range_limit` of the dtype, the distance the
    dense engine lets its potentials move before it absorbs them: a step within it is still computed exactly."""

    def __init__(self, depth: int, limit: float = math.inf):
        self.depth = depth
        self.limit = limit
        self.reset()

    def reset(self) -> None:
        self.prev: tuple[torch.Tensor, torch.Tensor] | None = None  # the last image and residual
        self.dG: list[torch.Tensor] = []
        self.dR: list[torch.Tensor] = []

    def step(self, g, Gg, grew: bool):
        if self.depth == 0:
            return Gg
        if grew:
            self.reset()
        r = Gg - g
        if self.prev is not None:
            self.dG.append(Gg - self.prev[0])
            self.dR.append(r - self.prev[1])
            del self.dG[: -self.depth], self.dR[: -self.depth]
        self.prev = (Gg, r)
        if not self.dR:
            return Gg
        dR = torch.stack(self.dR, 1)
        A = (dR.T @ dR).cpu().double().numpy()
        A += 1e-12 * np.trace(A) * np.eye(A.shape[0])
        try:
            gamma = np.linalg.solve(A, (dR.T @ r).cpu().double().numpy())
        except np.linalg.LinAlgError:  # A = 0 (no change between iterates): restart, as for a non-finite gamma
            gamma = None
        if gamma is None or not np.all(np.isfinite(gamma)):
            self.reset()
            return Gg
        shift = torch.stack(self.dG, 1) @ torch.as_tensor(gamma, dtype=Gg.dtype, device=Gg.device)
        if not float(shift.abs().max()) <= self.limit:  # a stalled secant (or a non-finite shift): a plain step
            self.reset()
            return Gg
        return Gg - shift


def _check_tensor(t: Any, name: str, shape: tuple, like: torch.Tensor | None) -> None:
    """``t`` a floating tensor of ``shape`` (a name: any size there), of ``like``'s dtype and device."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if t.ndim != len(shape) or any(isinstance(n, int) and m != n for m, n in zip(t.shape, shape, strict=True)):
        want = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {want}, got shape {tuple(t.shape)}")
    if like is not None and (t.dtype != like.dtype or t.device != like.device):
        raise ValueError(
            f"{name} has dtype {t.dtype} on {t.device}, but x has {like.dtype} on {like.device}: "
            "give both in one dtype and on one device"
        )


def _check_inputs(x: Any, B: Any, log_weights: Any, queries: Any = None, init: Any = None) -> None:
    """Every check of the public entry points, before any iteration: shapes, dtypes and devices that agree
    with ``x``, finite tokens and matrix, log-weights in :math:`[-\\infty, \\infty)` with some mass."""
    _check_tensor(x, "x", ("N", "d"), None)
    N, d = x.shape
    if N < 1 or d < 1:
        raise ValueError(f"x must hold at least one token of dimension d >= 1, got shape {tuple(x.shape)}")
    _check_tensor(B, "B", (d, d), x)
    if not _finite(x):
        raise ValueError("x has non-finite entries (NaN or inf)")
    if not _finite(B):
        raise ValueError("B has non-finite entries (NaN or inf)")
    if log_weights is not None:
        _check_tensor(log_weights, "log_weights", (N,), x)
        if bool(torch.isnan(log_weights).any()) or bool((log_weights == math.inf).any()):
            raise ValueError(
                "log_weights has NaN or +inf entries (a token's log-weight is finite, or -inf for no mass)"
            )
        if not bool(torch.isfinite(log_weights).any()):
            raise ValueError("log_weights gives no token any mass (every entry is -inf)")
    if queries is not None:
        _check_tensor(queries, "queries", ("n", d), x)
        if not _finite(queries):
            raise ValueError("queries has non-finite entries (NaN or inf)")
    if isinstance(init, torch.Tensor):
        _check_tensor(init, "init", (N,), x)
        if not _finite(init):
            raise ValueError("init has non-finite entries (NaN or inf)")


def _finite(t: torch.Tensor) -> bool:
    """Every entry finite: one reduction (NaN or inf make the sum non-finite), the entrywise test only when
    the sum itself overflowed."""
    return math.isfinite(float(t.sum())) or bool(torch.isfinite(t).all())


def _iterate_lse(q, x, g, loga, tol, max_iter, method, block, values, mixer):
    """The log-domain iteration (module docstring) from the column potential ``g``: ``(result, average)``."""
    # the last pair's f and T_c(f): set together at the first iteration (max_iter >= 1)
    f: Any = None
    Gf: Any = None
    avg = lse_rows = lse_cols = None
    err = last = math.inf
    for it in range(1, max_iter + 1):
        avg, lse_rows = attend(q, x, g, values, lse_rows, method, block)
        f_new = loga - lse_rows  # T_r(g)
        if f is not None:  # the pair (f, g): rows a e^{f - T_r g}, columns a e^{g - T_c f}
            err = max(_violation(f, f_new), _violation(g, Gf))
            if err <= tol:
                return SinkhornResult(f, g, it, err, True), avg
        f = f_new
        _, lse_cols = attend(x, q, f, None, lse_cols, method, block)  # LSE_i(x_j . q_i + f_i)
        Gf = loga - lse_cols  # T_c(f)
        err = _violation(g, Gf)  # the pair (f, g): rows exact
        if err <= tol:
            return SinkhornResult(f, g, it, err, True), avg
        g_next = mixer.step(g, Gf, err > last)
        last = err
        if it < max_iter:
            g = g_next
    return SinkhornResult(f, g, max_iter, err, False), avg


class _Absorbed:
    r"""The kernel with potentials absorbed, :math:`E_{ij} = e^{\ell_{ij} + c_i + g^0_j}` (dense, N x N), where
    :math:`g^0` is a column potential and :math:`c_i = -\max_j(\ell_{ij} + g^0_j)` (every row's largest entry
    is 1). With :math:`f = c + F`, :math:`g = g^0 + G` the two updates are matrix-vector products,

    .. math::

        T_r: F = \log a - \log(E e^{G}), \qquad T_c: G = \log a - \log(E^\top e^{F}),

    exact rewritings of the log-domain ones (the logits cancel), so the iteration and its certificate are
    the same; only the arithmetic differs (sums of products instead of log-sum-exps, one exponential per
    entry and absorption instead of two per iteration)."""

    def __init__(self, q: torch.Tensor, x: torch.Tensor, g0: torch.Tensor) -> None:
        self.g0 = g0
        E = torch.addmm(g0[None, :], q, x.T)  # l_ij + g0_j
        self.c = -E.amax(1)
        self.E = E.add_(self.c[:, None]).exp_()


def _iterate_dense(q, x, g, loga, tol, max_iter, mixer, limit):
    """The iteration of :func:`_iterate_lse` on an absorbed dense kernel (``_Absorbed``): ``(result, G)``
    with ``G`` the column potential relative to the absorbed one, or ``(None, g)`` when the potentials leave
    the range where the products stay exact (then the caller continues in the log domain from ``g``)."""
    K = _Absorbed(q, x, g)
    G = torch.zeros_like(g)
    F: Any = None
    GF: Any = None
    err = last = math.inf
    absorbed = 0
    for it in range(1, max_iter + 1):
        F_new = loga - torch.log(K.E @ G.exp())  # T_r(g), relative to c
        if not _finite(F_new):
            return None, K.g0
        if F is not None:
            err = max(_violation(F, F_new), _violation(G, GF))
            if err <= tol:
                return SinkhornResult(K.c + F, K.g0 + G, it, err, True), (K.E, G)
        F = F_new
        GF = loga - torch.log(K.E.T @ F.exp())  # T_c(f), relative to g0
        err = _violation(G, GF)
        if err <= tol:
            return SinkhornResult(K.c + F, K.g0 + G, it, err, True), (K.E, G)
        if not math.isfinite(err):
            return None, K.g0
        G_next = mixer.step(G, GF, err > last)
        last = err
        if it < max_iter:
            G = G_next
            if float(G.abs().max()) > limit or float((F - loga).abs().max()) > limit:
                absorbed += 1  # the scalings grew: absorb them into the kernel and go on from there
                if absorbed > MAX_ABSORB:
                    return None, K.g0
                K = _Absorbed(q, x, K.g0 + G)
                G, F, GF, last = torch.zeros_like(G), None, None, math.inf
                mixer.reset()
    return SinkhornResult(K.c + F, K.g0 + G, max_iter, err, False), (K.E, G)


def _iterate_symmetric(q, x, g, loga, tol, max_iter, mixer, limit):
    r"""The scaling when the logits are symmetric with a positive semi-definite Gram matrix (:math:`B`
    symmetric PSD): ``(result, (E, G))`` as :func:`_iterate_dense`, or ``(None, g)``.

    Both marginals are :math:`a`, so the plan is symmetric and :math:`f = g` solves
    :math:`g = T(g)`, :math:`T(g)_i = \log a_i - \operatorname{LSE}_j(\ell_{ij} + g_j)`. The Jacobian of
    :math:`T` is :math:`-\operatorname{diag}(a)^{-1}P`, whose spectrum lies in :math:`[-1, 0]` when the kernel
    :math:`e^{\ell_{ij}}` is positive semi-definite (Schur's product theorem: :math:`\ell` is a Gram matrix),
    so the damped map :math:`g \mapsto (g + T(g))/2` contracts by at least 1/2 per step however strong
    the kernel (alternating Sinkhorn slows down like :math:`\sigma_2(P)^2 \to 1`). One matrix-vector product
    per step on :math:`E_{ij} = e^{\ell_{ij} + h_i + h_j}/Z` (:math:`Z` the total, so the start carries mass
    1); the certificate is that of the pair :math:`(g, g)`, both marginals summed."""
    E, lz, h = _symmetric_kernel(q, x, g)
    G = torch.zeros_like(g)
    err = last = math.inf
    absorbed = 0
    for it in range(1, max_iter + 1):
        TG = loga + lz - torch.log(E @ G.exp())
        err = _violation(G, TG)  # rows of the pair (h + G, h + G)
        if not math.isfinite(err):
            return None, g
        if err <= tol:
            err = max(err, _violation(G, loga + lz - torch.log(E.T @ G.exp())))  # and its columns
            if err <= tol:
                return SinkhornResult(h + G, h + G, it, err, True), (E, G)
        G_next = mixer.step(G, 0.5 * (G + TG), err > last)
        last = err
        if it < max_iter:
            G = G_next
            if float(G.abs().max()) > limit:
                absorbed += 1  # the scalings grew: absorb them into the kernel and go on from there
                if absorbed > MAX_ABSORB:
                    return None, g
                E, lz, h = _symmetric_kernel(q, x, h + G)
                G, last = torch.zeros_like(G), math.inf
                mixer.reset()
    return SinkhornResult(h + G, h + G, max_iter, err, False), (E, G)


def _symmetric_kernel(q: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
    r"""``(E, log Z, h)``: :math:`E_{ij} = e^{\ell_{ij} + g_i + g_j - m}` (:math:`m` the largest exponent),
    :math:`Z = \sum_{ij}E_{ij}` and :math:`h = g - (m + \log Z)/2`, so that
    :math:`e^{\ell_{ij} + h_i + h_j} = E_{ij}/Z` (total mass 1)."""
    S = torch.addmm(g[None, :], q, x.T).add_(g[:, None])  # l_ij + g_i + g_j
    top = float(S.max())
    E = S.sub_(top).exp_()
    lz = math.log(float(E.sum()))
    return E, lz, g - 0.5 * (top + lz)


def _symmetric_psd(B: torch.Tensor) -> bool:
    """Whether ``B`` is exactly symmetric and positive semi-definite (the logits' Gram matrix is then PSD)."""
    return bool(torch.equal(B, B.T)) and float(torch.linalg.eigvalsh(B)[0]) >= 0.0


def _dense_average(E: torch.Tensor, G: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_j \operatorname{softmax}_j(\ell_{ij} + g_j)\,x_j = (E(e^{G}x))_i/(Ee^{G})_i` (any row scaling of
    :math:`E` cancels), column by column."""
    v = G.exp()
    den = E @ v
    return torch.stack([E @ (v * x[:, k]) for k in range(x.shape[1])], 1) / den[:, None]


def _use_dense(dense: bool | None, x: torch.Tensor) -> bool:
    if dense is None:
        return x.dtype == torch.float64 and x.shape[0] <= DENSE_MAX_N
    if not isinstance(dense, bool):
        raise ValueError(f"dense must be True, False or None, got {dense!r}")
    return dense


def _start(x, B, loga, init):
    """The starting column potential: a given one, the Gaussian one or zero."""
    if isinstance(init, torch.Tensor):
        return init.clone()
    return _gaussian_start(x, B, loga) if init == "gaussian" else torch.zeros_like(loga)


def _scale(x, B, log_weights, tol, max_iter, method, block, want_average, init, anderson, dense=None):
    _check_inputs(x, B, log_weights, init=init)
    if tol is None:
        tol = default_tol(x.dtype)
    _check_stopping(tol, max_iter)
    _check_acceleration("gaussian" if isinstance(init, torch.Tensor) else init, anderson)
    _check_method(method)
    use_dense = _use_dense(dense, x)
    N = x.shape[0]
    if log_weights is None:
        loga = torch.full((N,), -math.log(N), dtype=x.dtype, device=x.device)
    else:
        loga = log_weights - torch.logsumexp(log_weights, 0)
    mass = torch.isfinite(loga)
    if not bool(mass.all()):  # tokens without mass: scale on the others, attend to them alone
        return _scale_support(x, B, loga, mass, tol, max_iter, method, block, want_average, init, anderson, use_dense)
    warm = _WARM.get() if log_weights is None and isinstance(init, str) and init == "gaussian" else None
    if warm is None:
        return _solve(
            x, B, loga, _start(x, B, loga, init), tol, max_iter, method, block, want_average, anderson, use_dense
        )
    gauss = _gaussian_start(x, B, loga)
    res, avg = _solve(
        x, B, loga, warm.start(x, B, gauss), tol, max_iter, method, block, want_average, anderson, use_dense
    )
    warm.record(x, B, gauss, res)
    return res, avg


def _solve(x, B, loga, g, tol, max_iter, method, block, want_average, anderson, use_dense):
    """The scaling from the column potential ``g``: the dense engine when asked (the log domain should it
    leave its exact range), else the log domain."""
    q = x @ B.T  # q_i = B x_i, so that l_ij = q_i . x_j
    limit = _range_limit(x.dtype)
    mixer = _Anderson(int(anderson), limit)
    if use_dense:
        engine = _iterate_symmetric if _symmetric_psd(B) else _iterate_dense
        res, state = engine(q, x, g, loga, tol, max_iter, mixer, limit)
        if res is not None:
            E, G = state
            return res, (_dense_average(E, G, x) if want_average else None)
        g, mixer = state, _Anderson(int(anderson), limit)  # left the exact range: the log domain from where it was
    return _iterate_lse(q, x, g, loga, tol, max_iter, method, block, x if want_average else None, mixer)


def _scale_support(x, B, loga, mass, tol, max_iter, method, block, want_average, init, anderson, use_dense):
    """:func:`_scale` on the tokens with mass; the others get :math:`f = g = -\\infty` (no row, no column of the
    plan) and attend, as queries, to the tokens with mass."""
    idx = torch.nonzero(mass)[:, 0]
    sub_init = init[idx] if isinstance(init, torch.Tensor) else init
    res, _ = _scale(x[idx], B, loga[idx], tol, max_iter, method, block, False, sub_init, anderson, use_dense)
    f = torch.full_like(loga, -math.inf).index_copy_(0, idx, res.f)
    g = torch.full_like(loga, -math.inf).index_copy_(0, idx, res.g)
    avg = softmax_average(x @ B.T, x[idx], res.g, x[idx], method, block) if want_average else None
    return SinkhornResult(f, g, res.iterations, res.marginal_error, res.converged), avg


def _range_limit(dtype: torch.dtype) -> float:
    """How far the absorbed potentials may move before they are absorbed again: a tenth of the exponent range
    (70 in float64, 8.7 in float32), so that products of kernel entries and scalings neither overflow nor lose
    any entry that matters to underflow."""
    return 0.1 * math.log(torch.finfo(dtype).max)


def sinkhorn_potentials(
    x: torch.Tensor,
    B: torch.Tensor,
    log_weights: torch.Tensor | None = None,
    *,
    tol: float | None = None,
    max_iter: int = MAX_ITER,
    method: str = "sdpa",
    block: int = BLOCK,
    init: str | torch.Tensor = "gaussian",
    anderson: int = ANDERSON,
    dense: bool | None = None,
) -> SinkhornResult:
    r"""Log-domain Sinkhorn scaling of :math:`e^{x_j^\top Bx_i}` on the tokens ``x`` (N, d) to marginals :math:`a`.

    Parameters
    ----------
    x : (N, d) tensor
        The tokens (floating point, finite, :math:`N \ge 1`).
    B : (d, d) tensor
        The query-key matrix (logits :math:`x_j^\top Bx_i`), in ``x``'s dtype and on its device.
    log_weights : (N,) tensor, optional
        :math:`\log a_j` (normalised to sum 1 here; :math:`-\infty` for a token without mass, which then has
        :math:`f = g = -\infty`); uniform when omitted.
    tol, max_iter : float, int
        Stop when the relative violation of both marginals (over the tokens with mass) is at most ``tol``
        (default :func:`~gtcore.attention.sinkhorn.default_tol` of ``x``'s dtype), or after
        ``max_iter`` row updates.
    method : ``"sdpa"`` or ``"blocked"``
        How the log-sum-exps run (:mod:`gtcore.attention.kernels`).
    block : int
        Rows per block of ``"blocked"``.
    init : ``"gaussian"``, ``"zero"`` or (N,) tensor
        Starting column potential: the Gaussian problem's
        (:func:`~gtcore.attention.sinkhorn.gaussian_column_potential` at the tokens' empirical moments), 0, or
        the given one (a warm start, e.g. the potential of nearby tokens).
    anderson : int
        Depth of the Anderson acceleration; 0 for plain Sinkhorn.
    dense : bool, optional
        Iterate on the dense kernel with the potentials absorbed (module docstring; memory :math:`N^2`
        entries) or in the log domain (memory :math:`O(Nd)`). Default: dense for float64 tokens up to
        :data:`DENSE_MAX_N`.

    Returns
    -------
    SinkhornResult
        The potentials :math:`f, g` of the certified pair, the iterations and the marginal error.

    Raises
    ------
    ValueError
        Tokens, ``B``, ``log_weights`` or ``init`` of another shape, dtype or device than ``x`` implies,
        non-finite tokens or ``B``, log-weights that are NaN, :math:`+\infty` or all :math:`-\infty`; a
        ``tol``, ``max_iter``, ``init`` or ``anderson`` out of range, or an unknown ``method``.
    """
    return _scale(x, B, log_weights, tol, max_iter, method, block, False, init, anderson, dense)[0]


def sinkhorn_average(
    x: torch.Tensor,
    B: torch.Tensor,
    log_weights: torch.Tensor | None = None,
    queries: torch.Tensor | None = None,
    *,
    tol: float | None = None,
    max_iter: int = MAX_ITER,
    method: str = "sdpa",
    block: int = BLOCK,
    warn: bool = True,
    init: str | torch.Tensor = "gaussian",
    anderson: int = ANDERSON,
    dense: bool | None = None,
) -> tuple[torch.Tensor, SinkhornResult]:
    r"""Sinkhorn attention of the tokens ``x`` at ``queries`` (default ``x`` itself): ``(average, result)``.

    .. math::

        a(x_q) = \sum_j \operatorname{softmax}_j(x_j^\top B x_q + g_j)\, x_j,

    with :math:`g` from :func:`sinkhorn_potentials` (same arguments); for the tokens themselves
    the average is that of the returned pair's :math:`g`. A token without mass (log-weight :math:`-\infty`)
    is no key (:math:`g = -\infty`) but still a query. Warns with
    :class:`~gtcore.attention.sinkhorn.SinkhornConvergenceWarning` when the scaling did not converge
    (``warn=True``); the returned :class:`SinkhornResult` carries the status either way.

    Parameters
    ----------
    x : (N, d) tensor
        The tokens, the keys and values (and the queries when ``queries`` is omitted).
    B : (d, d) tensor
        The query-key matrix.
    log_weights : (N,) tensor, optional
        The tokens' log-weights :math:`\log a_j` (:math:`-\infty`: no mass); uniform when omitted.
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
    init : ``"gaussian"``, ``"zero"`` or (N,) tensor
        The starting column potential (:func:`sinkhorn_potentials`).
    anderson : int
        Depth of the Anderson acceleration; 0 for plain Sinkhorn.
    dense : bool, optional
        The dense or the log-domain iteration (:func:`sinkhorn_potentials`).

    Returns
    -------
    average : (N, d) or (n, d) tensor
        The Sinkhorn attention average at each token (or query).
    result : SinkhornResult
        The scaling's potentials and status.

    Raises
    ------
    ValueError
        As :func:`sinkhorn_potentials`, and ``queries`` of another width, dtype or device than ``x``.
    """
    _check_inputs(x, B, log_weights, queries, init)
    if tol is None:
        tol = default_tol(x.dtype)
    res, avg = _scale(x, B, log_weights, tol, max_iter, method, block, queries is None, init, anderson, dense)
    if not res.converged and warn:
        warnings.warn(
            f"Sinkhorn scaling did not converge: marginal error {res.marginal_error:.3e} > tol={tol:g} "
            f"after max_iter={max_iter} iterations",
            SinkhornConvergenceWarning,
            stacklevel=2,
        )
    if queries is not None:
        mass = torch.isfinite(res.g)
        if bool(mass.all()):
            avg = softmax_average(queries @ B.T, x, res.g, x, method, block)
        else:
            avg = softmax_average(queries @ B.T, x[mass], res.g[mass], x[mass], method, block)
    return avg, res
