r"""The peers' rank experiment, rerun two ways: their projected-Euler scheme, and the limit decided exactly.

Castin, Rouzé, Ablin, Peyré and Kim (2025, "A unified perspective on the dynamics of deep
Transformers") integrate the covariance equation of random layers (:mod:`gtbook.studies.atlas.ensembles`, ``"peer"``)
by **projected explicit Euler**: a fixed step :math:`h`, after every step the eigenvalues of
:math:`\Sigma` clipped at 0, stop when the change :math:`\|\Sigma_{k+1} - \Sigma_k\|_F` falls below a
tolerance or after a cap on the iterations, then count the rank of the last :math:`\Sigma` as the
number of eigenvalues above 0.1. :func:`projected_euler_lanes` is that scheme (the book's
reimplementation, as in ``benchmarks/peer_castin.py``, batched over draws), with the published
ranges of its settings in :data:`PEER_SETTINGS`.

**Why it can miscount.** For :math:`V = I` and softmax attention, :math:`B = K^\top Q/\sqrt d =
-Q^\top Q/\sqrt d =: -W`, so :math:`\Sigma' = -2\Sigma W\Sigma` and the precision :math:`P = \Sigma^{-1}`
solves :math:`P' = 2W`:

.. math::

    \Sigma(t) = (P_0 + 2tW)^{-1} \;\longrightarrow\; \Sigma_\infty = N(N^\top P_0N)^{-1}N^\top,

with :math:`N` an orthonormal basis of :math:`\ker Q`: the limit has rank exactly
:math:`d - \operatorname{rank}Q = \lceil d/2\rceil` (for :math:`Q` of full row rank), and the other
eigenvalues decay like :math:`1/(2t\,\sigma^2)` for the singular values :math:`\sigma` of
:math:`Q/d^{1/4}`. A stopping tolerance on the change stops the scheme at :math:`t \sim
\sqrt{hc/\text{tol}}`, where an eigenvalue with a small :math:`\sigma` is still above 0.1.

**The exact rank** (:func:`exact_ranks`): for :math:`V = I` with softmax, the closed form above
(:math:`\operatorname{rank}Q` certified by its smallest singular value); otherwise the doubling test
of :func:`~gtbook.studies.atlas.outcomes.classify_lanes` with a long horizon (:data:`EXACT_HORIZON`), on
the layer with :math:`V` divided by its slowest rate (:func:`time_scale`: with :math:`A = 0` this only
changes the clock, not the limit):
an eigenvalue that decays like :math:`c/t` halves from :math:`T` to :math:`2T`
(:math:`\alpha = -1`), one that tends to a positive limit does not (:math:`\alpha \to 0`), with the
margins stated there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gtbook.studies.atlas.outcomes import Outcome, classify_lanes
from gtcore.controls import Controls
from gtcore.moments.batched import LaneStack, stack_controls

__all__ = [
    "EXACT_HORIZON",
    "PEER_SETTINGS",
    "ExactRanks",
    "PeerRun",
    "PeerSetting",
    "closed_form_rank",
    "exact_ranks",
    "projected_euler_lanes",
    "time_scale",
]

#: the horizon T of the doubling test for the peers' ensembles (decays like 1/t need t >> their offset)
EXACT_HORIZON = 1e4


@dataclass(frozen=True)
class PeerSetting:
    """One setting of the projected-Euler scheme: step, stopping tolerance, iteration cap, rank threshold."""

    name: str
    h: float
    tol: float
    max_iter: int
    rank_tol: float = 0.1


#: the two ends of the published ranges (step 0.02-0.15, tolerance 5e-5-1e-4, 5e4-9e4 iterations)
PEER_SETTINGS = (PeerSetting("fine", 0.02, 5e-5, 90_000), PeerSetting("coarse", 0.15, 1e-4, 50_000))


@dataclass
class PeerRun:
    """The projected-Euler scheme on a batch of draws.

    Attributes
    ----------
    rank : (n,) eigenvalues of the last :math:`\\Sigma` above ``rank_tol``
    status : (n,) "converged" (change below ``tol``), "max_iter" (stopped by the cap) or "exploded"
        (:math:`\\operatorname{tr}\\Sigma` above ``explode``, or not finite)
    iterations : (n,) Euler steps taken
    Sigma : (n, d, d) the last covariance
    eigenvalues : (n, d) its eigenvalues, increasing
    """

    rank: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    Sigma: np.ndarray
    eigenvalues: np.ndarray

    def __repr__(self) -> str:
        st = {s: int(np.sum(self.status == s)) for s in ("converged", "max_iter", "exploded")}
        return f"PeerRun(n={self.rank.size}, {st})"


def projected_euler_lanes(
    controls: Sequence[Controls] | LaneStack, Sigma0, setting: PeerSetting, *, explode: float = 1e6
) -> PeerRun:
    r"""The peers' scheme, every draw side by side: :math:`\Sigma_{k+1} = \Pi_+(\Sigma_k + h\,\Sigma'(\Sigma_k))`.

    :math:`\Pi_+` clips the eigenvalues at 0. A draw stops when
    :math:`\|\Sigma_{k+1} - \Sigma_k\|_F <` ``setting.tol`` ("converged"), after ``setting.max_iter``
    steps ("max_iter"), or when :math:`\operatorname{tr}\Sigma >` ``explode`` or is not finite
    ("exploded"); its rank is the number of eigenvalues above ``setting.rank_tol``.

    Parameters
    ----------
    controls : constant layers of one dimension and attention type, or their stack
    Sigma0 : (d, d) or (n, d, d)
    setting : PeerSetting
    explode : trace at which a draw counts as exploded

    Returns
    -------
    PeerRun
    """
    stack = controls if isinstance(controls, LaneStack) else stack_controls(controls)
    n, d = stack.n, stack.d
    if not (setting.h > 0 and setting.tol > 0 and setting.max_iter >= 1):
        raise ValueError(f"setting needs h > 0, tol > 0 and max_iter >= 1, got {setting!r}")
    S = np.broadcast_to(np.asarray(Sigma0, float), (n, d, d)).copy()
    status = np.full(n, "max_iter", dtype=object)
    iterations = np.zeros(n, dtype=int)
    active = np.arange(n)
    for _ in range(setting.max_iter):
        if active.size == 0:
            break
        Sa = S[active]
        with np.errstate(over="ignore", invalid="ignore"):
            step = Sa + setting.h * stack.covariance_rhs(Sa, active)
            step = 0.5 * (step + np.swapaxes(step, 1, 2))
            finite = np.all(np.isfinite(step), axis=(1, 2))
            w, U = np.linalg.eigh(np.where(finite[:, None, None], step, 0.0))
            new = (U * np.clip(w, 0.0, None)[:, None, :]) @ np.swapaxes(U, 1, 2)
            change = np.linalg.norm(new - Sa, axis=(1, 2))
        iterations[active] += 1
        S[active] = np.where(finite[:, None, None], new, Sa)
        exploded = ~finite | (np.trace(new, axis1=1, axis2=2) > explode)
        converged = ~exploded & (change < setting.tol)
        status[active[exploded]] = "exploded"
        status[active[converged]] = "converged"
        active = active[~(exploded | converged)]
    lam = np.linalg.eigvalsh(S)
    return PeerRun(
        rank=np.sum(lam > setting.rank_tol, axis=1),
        status=status.astype(str),
        iterations=iterations,
        Sigma=S,
        eigenvalues=lam,
    )


def closed_form_rank(controls: Controls) -> int:
    r"""The rank of :math:`\lim\Sigma(t)` for :math:`V = I`, softmax, :math:`A = 0`, :math:`B = -W`,
    :math:`W \succeq 0`: :math:`d - \operatorname{rank}W`.

    :math:`\Sigma(t) = (P_0 + 2tW)^{-1}` (module docstring) for every :math:`\Sigma_0 \succ 0`.
    :math:`\operatorname{rank}W` is certified by its eigenvalues: the count above
    :math:`10^3\,d\,\epsilon_{\text{mach}}\lambda_{\max}(W)`, refused (``ValueError``) when some eigenvalue
    lies within a factor :math:`10^3` of that floor.

    Raises
    ------
    ValueError
        The controls are outside the closed form's domain, or the rank of :math:`W` is not certified.
    """
    d = controls.d
    if (
        controls.attention != "dot"
        or controls.heads != 1
        or np.any(controls.affine_A != 0)
        or not np.array_equal(controls.V[0], np.eye(d))
    ):
        raise ValueError("controls: the closed form needs one dot-product head with V = I and A = 0")
    B = controls.B[0]
    W = -0.5 * (B + B.T)
    if not np.allclose(B, B.T, rtol=0, atol=1e-14 * max(1.0, np.abs(B).max())):
        raise ValueError("controls: the closed form needs a symmetric B")
    w = np.linalg.eigvalsh(W)
    floor = 1e3 * d * np.finfo(float).eps * max(w[-1], 0.0)
    if w[0] < -floor:
        raise ValueError("controls: the closed form needs B = -W with W positive semidefinite")
    if np.any((w > floor) & (w < 1e3 * floor)):
        raise ValueError("controls: the rank of W is not certified (an eigenvalue near the round-off floor)")
    return int(d - np.sum(w > floor))


@dataclass
class ExactRanks:
    """The rank of each draw's limit and how it was decided.

    Attributes
    ----------
    rank : (n,) the rank (-1 where undecided)
    method : (n,) "closed form" or "doubling test"
    doubling_rank : (n,) the doubling test's rank for every draw (also where the closed form decides)
    outcome : (n,) the doubling test's :class:`~gtbook.studies.atlas.outcomes.Outcome`
    alpha : (n, d) the doubling exponents
    """

    rank: np.ndarray
    method: np.ndarray
    doubling_rank: np.ndarray
    outcome: np.ndarray
    alpha: np.ndarray


def time_scale(controls: Controls) -> float:
    r"""The slowest rate the layer can give a decaying direction: :math:`\lambda_{\min}(V_s)\,\lambda^+_{\min}(W)`.

    :math:`V_s` is the symmetric part of :math:`V`, :math:`W = -(B + B^\top)/2` (for L2, :math:`B` is the
    logits' bilinear part), :math:`\lambda^+_{\min}` the smallest eigenvalue above round-off. With
    :math:`A = 0` the covariance equation is homogeneous of degree one in :math:`V`: replacing :math:`V`
    by :math:`cV` runs the same trajectory :math:`c` times faster, :math:`\Sigma_c(t) = \Sigma(ct)`, with
    the same limit. :func:`exact_ranks` divides :math:`V` by this scale so that every draw's slow
    directions decay on the same clock before the doubling test looks at them.
    """
    Vs = 0.5 * (controls.V[0] + controls.V[0].T)
    B = controls.B[0]
    w = np.linalg.eigvalsh(-0.5 * (B + B.T))
    pos = w[w > 1e3 * controls.d * np.finfo(float).eps * max(w[-1], 1e-300)]
    lv = float(np.linalg.eigvalsh(Vs)[0])
    if lv <= 0 or pos.size == 0:
        raise ValueError("controls: the time scale needs V with a positive definite symmetric part and B != 0")
    return lv * float(pos[0])


def exact_ranks(controls: Sequence[Controls], Sigma0, *, horizon: float = EXACT_HORIZON) -> ExactRanks:
    """The rank of the limit of every draw: closed form where it applies, the doubling test otherwise (module
    docstring).

    The doubling test runs on the time-rescaled layers (:func:`time_scale`; the layers must have
    :math:`A = 0` and one head).
    """
    ctls = list(controls)
    rescaled = []
    for k, c in enumerate(ctls):
        if c.heads != 1 or np.any(c.affine_A != 0):
            raise ValueError(f"controls[{k}]: exact_ranks needs one head and A = 0 (time rescaling)")
        s = time_scale(c)
        rescaled.append(
            Controls(V=c.V[0] / s, Q=c.Q, K=c.K, attention=c.attention)
            if c.Q is not None
            else Controls(V=c.V[0] / s, B=c.B[0], attention=c.attention)
        )
    verdicts = classify_lanes(rescaled, Sigma0, horizon=horizon)
    limit = np.isin(verdicts.outcome, [Outcome.EQUILIBRIUM.value, Outcome.LOWER_RANK.value, Outcome.COLLAPSE.value])
    doubling = np.where(limit, verdicts.rank, -1)
    rank, method = doubling.copy(), np.full(len(ctls), "doubling test", dtype=object)
    for i, c in enumerate(ctls):
        try:
            rank[i] = closed_form_rank(c)
            method[i] = "closed form"
        except ValueError:
            pass
    return ExactRanks(
        rank=rank, method=method.astype(str), doubling_rank=doubling, outcome=verdicts.outcome, alpha=verdicts.alpha
    )
