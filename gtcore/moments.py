r"""The Gaussian reduction: the moment ODE (the paper's equation (1.1)) and the exact layer map.

For a Gaussian :math:`\rho = N(\mu, \Sigma)` every head's attention average is an affine map of the
query, :math:`M_h x + C_h\mu` (the tilt of :mod:`gtcore.attention`), so the velocity field is affine,
:math:`v(x) = Fx + G\mu + b` with :math:`F = A + \sum_h V_hM_h`, :math:`G = \sum_h V_hC_h`
(:func:`gtcore.attention.gaussian_velocity`), and Gaussians stay Gaussian. Their moments solve

.. math::

    \mu' = (F + G)\mu + b, \qquad \Sigma' = F\Sigma + \Sigma F^\top,

which for the paper's dot-product attention is eq. (1.1) (see DESIGN.md's conventions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from ._linalg import psd_project
from ._validation import as_float_array, check_count, check_moments, check_positive, check_span
from .attention import gaussian_velocity
from .controls import Controls, ControlsLike, as_control_function, control_breaks, evaluate_controls


def moment_rhs(mu: Any, Sigma: Any, controls: Controls) -> tuple[np.ndarray, np.ndarray]:
    r"""Right-hand side of the moment ODE (eq. 1.1), heads summed.

    .. math::

        \mu' = (M + G)\mu + b, \qquad \Sigma' = M\Sigma + \Sigma M^\top,

    with :math:`(M, G)` from :func:`gtcore.attention.gaussian_velocity` (for dot-product attention
    :math:`M = A + \sum_h V_h\Sigma B_h`, :math:`G = \sum_h V_h`).

    Parameters
    ----------
    mu : (d,) array
    Sigma : (d, d) symmetric array
    controls : Controls
        With a feed-forward block, its identity-activation fold
        (:attr:`Controls.affine_A`, :attr:`Controls.affine_b`) is used.

    Returns
    -------
    dmu : (d,) array
    dSigma : (d, d) array, exactly symmetric

    Raises
    ------
    ValueError
        ``mu`` or ``Sigma`` not finite, ``Sigma`` not symmetric positive semidefinite, or dimensions
        that disagree with ``controls``, naming the argument (the moment ODE is defined on covariances
        only: a non-PSD matrix would give a meaningless right-hand side for every attention type).
    """
    mu, Sigma = _checked_moments(mu, Sigma, controls)
    return _moment_rhs(mu, Sigma, controls)


def _checked_moments(mu: Any, Sigma: Any, controls: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, Sigma)`` validated as a Gaussian's moments on the dimension of ``controls``."""
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    if controls.d != mu.shape[0]:
        raise ValueError(f"controls act on dimension d={controls.d}, but mu has d={mu.shape[0]}")
    return mu, Sigma


def _moment_rhs(mu: np.ndarray, Sigma: np.ndarray, controls: Controls) -> tuple[np.ndarray, np.ndarray]:
    """:func:`moment_rhs` without the checks (the integrators' inner loop)."""
    M, G = gaussian_velocity(Sigma, controls)
    dmu = (M + G) @ mu + controls.affine_b
    MS = M @ Sigma
    return dmu, MS + MS.T


def layer_map(mu: Any, Sigma: Any, controls: Controls, h: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact image of :math:`N(\mu, \Sigma)` under one residual layer :math:`x \mapsto x + h\,v(x)`.

    For a Gaussian the velocity is affine, :math:`v(x) = Fx + G\mu + b`
    (:func:`gtcore.attention.gaussian_velocity`), so the push-forward is Gaussian with

    .. math::

        \mu^+ = \mu + h\,\mu'(\mu, \Sigma), \qquad \Sigma^+ = M\Sigma M^\top, \qquad M = I + hF.

    This is one explicit Euler step of the particle Transformer, evaluated exactly.

    Parameters
    ----------
    mu, Sigma : the input Gaussian's moments (validated)
    controls : Controls
    h : float
        Step (layer) size, positive.

    Returns
    -------
    mu_next : (d,) array
    Sigma_next : (d, d) array, exactly symmetric

    Raises
    ------
    OverflowError
        The image is not representable in float64 (one layer cannot stop half-way: use
        :func:`layer_stack`, which stops at ``blowup_norm`` with a status).
    """
    mu, Sigma = _checked_moments(mu, Sigma, controls)
    h = check_positive(h, "h")
    mu_next, Sigma_next = _layer_map(mu, Sigma, controls, h)
    if not (np.isfinite(mu_next).all() and np.isfinite(Sigma_next).all()):
        raise OverflowError(f"layer_map: the image of N(mu, Sigma) overflows float64 (h = {h:.3g}, "
                            f"max |Sigma_ij| = {np.abs(Sigma).max():.3g}); layer_stack stops at blowup_norm "
                            "with a status instead")
    return mu_next, Sigma_next


def _layer_map(mu: np.ndarray, Sigma: np.ndarray, controls: Controls, h: float):
    """One exact layer; overflow gives inf/NaN silently (the callers check)."""
    with np.errstate(over="ignore", invalid="ignore"):
        F, G = gaussian_velocity(Sigma, controls)
        dmu = (F + G) @ mu + controls.affine_b
        M = np.eye(mu.shape[0]) + h * F
        S = M @ Sigma @ M.T
        return mu + h * dmu, 0.5 * (S + S.T)


@dataclass
class LayerTrajectory:
    r"""Moments through a stack of residual layers, with the blow-up contract of :class:`MomentTrajectory`.

    Unpacks and indexes as the pair ``(mu, Sigma)``: ``mus, Sigmas = layer_stack(...)``.

    Attributes
    ----------
    mu : (n, d) array; ``mu[0]`` is the input, ``mu[l]`` the output of layer ``l``
    Sigma : (n, d, d) array, symmetric positive semidefinite
    status : "completed" (``n = L + 1``) or "blowup": at layer ``blowup_layer``
        :math:`\|\Sigma_l\|_F` or :math:`\|\mu_l\|_2` exceeded ``blowup_norm`` (the arrays end
        with that layer) or overflowed float64 (the arrays end with the layer before)
    blowup_layer : the first layer past ``blowup_norm``, or None
    blowup_norm : the threshold
    message : which norm crossed, at which layer
    """

    mu: np.ndarray
    Sigma: np.ndarray
    status: str
    blowup_layer: int | None
    blowup_norm: float
    message: str

    def __iter__(self):
        yield self.mu
        yield self.Sigma

    def __getitem__(self, i):
        """``result[0]`` is ``mu``, ``result[1]`` is ``Sigma``: the tuple ``layer_stack`` used to return."""
        return (self.mu, self.Sigma)[i]

    @property
    def final(self) -> tuple[np.ndarray, np.ndarray]:
        """The last (mu, Sigma) computed."""
        return self.mu[-1], self.Sigma[-1]


def _check_below_blowup(blowup_norm: float, **moments: np.ndarray) -> None:
    """Refuse initial moments already at or beyond ``blowup_norm`` (the start would count as a blow-up)."""
    for name, x in moments.items():
        if np.linalg.norm(x) >= blowup_norm:
            raise ValueError(f"{name} has norm {np.linalg.norm(x):.3g} >= blowup_norm = {blowup_norm:.3g}: "
                             "raise blowup_norm")


def layer_stack(mu: Any, Sigma: Any, controls_per_layer: Sequence[Controls], h: float, *,
                blowup_norm: float = 1e8) -> LayerTrajectory:
    r"""Moments through L residual layers, :math:`(\mu_{l+1}, \Sigma_{l+1}) = \text{layer\_map}(\mu_l, \Sigma_l)`.

    Stops at the first layer whose :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` exceeds
    ``blowup_norm`` (``status="blowup"``), as :func:`integrate_moments` does: no inf, no NaN, no
    warnings.

    Parameters
    ----------
    mu, Sigma : input moments
    controls_per_layer : sequence of L :class:`Controls`
    h : float
        Layer size (an L-layer stack with ``h = T / L`` is explicit Euler on ``[0, T]``).
    blowup_norm : float
        Threshold on :math:`\|\Sigma\|_F` and :math:`\|\mu\|_2` that counts as blow-up.

    Returns
    -------
    LayerTrajectory
        ``mu`` (L + 1, d) and ``Sigma`` (L + 1, d, d) when completed (fewer rows after a blow-up),
        with ``status`` and ``blowup_layer``.
    """
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    h = check_positive(h, "h")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    _check_below_blowup(blowup_norm, Sigma=Sigma, mu=mu)
    layers = list(controls_per_layer)
    if not layers:
        raise ValueError("controls_per_layer must hold at least one layer")
    for k, c in enumerate(layers):
        if not isinstance(c, Controls) or c.d != mu.shape[0]:
            raise ValueError(f"controls_per_layer[{k}] must be a Controls of dimension {mu.shape[0]}")
    mus, Sigmas = [mu], [Sigma]
    status, blowup_layer, message = "completed", None, f"{len(layers)} layers"
    for k, c in enumerate(layers, start=1):
        mu, Sigma = _layer_map(mu, Sigma, c, h)
        if not (np.isfinite(mu).all() and np.isfinite(Sigma).all()):
            status, blowup_layer = "blowup", k
            message = f"layer {k} overflows float64; the arrays end at layer {k - 1}"
            break
        mus.append(mu)
        Sigmas.append(Sigma)
        with np.errstate(over="ignore"):  # a norm past the largest float is inf: crossed
            nS, nm = np.linalg.norm(Sigma), np.linalg.norm(mu)
        if max(nS, nm) > blowup_norm:
            status, blowup_layer = "blowup", k
            which = "||mu||_2" if nm > nS else "||Sigma||_F"
            message = f"{which} crossed blowup_norm = {blowup_norm:.3g} at layer {k}"
            break
    return LayerTrajectory(mu=np.stack(mus), Sigma=psd_project(np.stack(Sigmas)), status=status,
                           blowup_layer=blowup_layer, blowup_norm=blowup_norm, message=message)


@dataclass
class MomentTrajectory:
    r"""The solution of the moment ODE, in the manner of scipy's ``OdeResult``.

    Attributes
    ----------
    t : (n,) array of times
    mu : (n, d) array of means
    Sigma : (n, d, d) array of covariances, each exactly symmetric
    status : "completed"; "blowup" (:math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed
        ``blowup_norm``); "budget" (stopped after ``max_nfev`` right-hand-side evaluations, before
        the end of ``t_span``); or "failed" (the solver gave up)
    crossing_time : the time at which :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed
        ``blowup_norm`` (located by a terminal event), or None. For :math:`\Sigma` it precedes the
        pole :math:`t^*` of the solution (:func:`gtcore.riccati.blowup_time`)
    message : what the solver said, or which norm crossed, or where the budget ran out
    nfev : number of right-hand-side evaluations
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: str
    crossing_time: float | None
    message: str
    nfev: int

    @property
    def final(self) -> tuple[np.ndarray, np.ndarray]:
        """The last (mu, Sigma) computed."""
        return self.mu[-1], self.Sigma[-1]


def _segments(t0: float, t1: float, breaks: Sequence[float]) -> list[tuple[float, float]]:
    inner = sorted(b for b in breaks if t0 < b < t1)
    edges = [t0, *inner, t1]
    return list(zip(edges[:-1], edges[1:]))


#: default cap on right-hand-side evaluations of :func:`integrate_moments` (about 15 s at d = 2)
MAX_NFEV = 1_000_000


def integrate_moments(mu0: Any, Sigma0: Any, controls: ControlsLike, t_span: tuple[float, float],
                      t_eval: Any = None, *, rtol: float = 1e-10, atol: float = 1e-12,
                      blowup_norm: float = 1e8, max_nfev: int = MAX_NFEV) -> MomentTrajectory:
    r"""Integrate the moment ODE (eq. 1.1) from :math:`(\mu_0, \Sigma_0)` over ``t_span``.

    Adaptive Dormand–Prince 8(5,3) (``scipy.integrate.solve_ivp``, ``DOP853``) with tight default
    tolerances. Piecewise controls are integrated piece by piece, so their breaks are honoured
    exactly. Finite-time blow-up is a terminal event: integration stops when
    :math:`\|\Sigma(t)\|_F` or :math:`\|\mu(t)\|_2` (a mean can grow exponentially while
    :math:`\Sigma` stays bounded) crosses ``blowup_norm``; the arrays end at that time, and the
    trajectory carries ``status="blowup"`` and ``crossing_time``. No NaN, no warnings.

    The work is bounded: after ``max_nfev`` evaluations of the right-hand side the integration
    stops at the end of the current step with ``status="budget"`` (a long ``t_span`` on a decaying
    system is stiff for this explicit method: its steps stay near :math:`3/|\lambda|`, so
    ``(0, 1e8)`` at rate 0.1 would take millions of steps). Convergence to a fixed point is not
    guessed: shorten ``t_span`` or raise ``max_nfev``.

    :math:`\Sigma(t) = \Phi(t)\Sigma_0\Phi(t)^\top` is positive semidefinite exactly, so every
    returned :math:`\Sigma` is projected onto the PSD matrices (negative eigenvalues, integration
    error of the size of ``atol``, set to 0): a result is always a valid input.

    Parameters
    ----------
    mu0 : (d,) array
    Sigma0 : (d, d) array, symmetric positive semidefinite (rank-deficient allowed)
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
    t_span : (t0, t1) with t1 > t0
    t_eval : array, optional
        Times at which to report the solution (within ``t_span``, increasing). By default the
        solver's own steps.
    rtol, atol : tolerances passed to the solver, finite and positive (scipy raises an ``rtol``
        below 100 machine epsilons to that value, with a warning)
    blowup_norm : threshold on :math:`\|\Sigma\|_F` and on :math:`\|\mu\|_2` that counts as blow-up
    max_nfev : int
        Budget of right-hand-side evaluations (default :data:`MAX_NFEV`).

    Returns
    -------
    MomentTrajectory

    Raises
    ------
    ValueError
        Invalid initial moments (shape, finiteness, symmetry, positive semidefiniteness),
        controls of the wrong dimension, a bad time span, tolerance or budget; the message names
        the argument.
    """
    mu0, Sigma0 = check_moments(mu0, Sigma0)
    d = mu0.shape[0]
    fn = as_control_function(controls, d, state_name="mu0")
    t0, t1 = check_span(t_span)
    if t_eval is not None:
        t_eval = as_float_array(t_eval, "t_eval")
        if t_eval.ndim != 1 or not np.all(np.isfinite(t_eval)) or np.any(np.diff(t_eval) <= 0) or (
                t_eval.size and (t_eval[0] < t0 or t_eval[-1] > t1)):
            raise ValueError("t_eval must be finite, strictly increasing and lie inside t_span")
    rtol = check_positive(rtol, "rtol")
    atol = check_positive(atol, "atol")
    blowup_norm = check_positive(blowup_norm, "blowup_norm")
    max_nfev = check_count(max_nfev, "max_nfev")
    _check_below_blowup(blowup_norm, Sigma0=Sigma0, mu0=mu0)

    def blowup_event(t, y):
        return max(np.linalg.norm(y[d:]), np.linalg.norm(y[:d])) - blowup_norm

    blowup_event.terminal = True
    blowup_event.direction = 1

    calls = [0]  # right-hand-side evaluations, all segments together
    budget = {"t_stop": np.inf}

    def budget_event(t, y):
        # called once per accepted step at its end: past the budget, a root exactly at this step's end
        if budget["t_stop"] == np.inf and calls[0] >= max_nfev:
            budget["t_stop"] = t
        return budget["t_stop"] - t

    budget_event.terminal = True
    budget_event.direction = -1

    ts, mus, Sigmas = [], [], []
    y = np.concatenate([mu0, Sigma0.ravel()])
    status, crossing_time, message, nfev = "completed", None, "", 0
    segments = _segments(t0, t1, control_breaks(controls))
    for k, (a, b) in enumerate(segments):
        last = k == len(segments) - 1
        if isinstance(fn, Controls):
            def at(t, c=fn):
                return c
        else:
            inside = np.nextafter(b, a)

            def at(t, a=a, inside=inside):
                return evaluate_controls(fn, min(max(t, a), inside), d=d)

        def rhs(t, y, at=at):
            calls[0] += 1
            Sigma = y[d:].reshape(d, d)
            Sigma = 0.5 * (Sigma + Sigma.T)
            dmu, dS = _moment_rhs(y[:d], Sigma, at(t))
            return np.concatenate([dmu, dS.ravel()])

        solve_eval = keep_eval = None
        if t_eval is not None:
            mask = (t_eval >= a) & ((t_eval <= b) if last else (t_eval < b))
            keep_eval = t_eval[mask]
            solve_eval = np.union1d(keep_eval, [b])  # b is always solved for, to go on from it
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow fails the step, no warning
            sol = solve_ivp(rhs, (a, b), y, method="DOP853", t_eval=solve_eval, rtol=rtol, atol=atol,
                            events=[blowup_event, budget_event])
        nfev += sol.nfev
        message = sol.message
        seg_t, seg_y = sol.t, sol.y.T
        if sol.status == 0:
            y = sol.y[:, -1]
        if keep_eval is not None:
            keep = np.isin(seg_t, keep_eval)
            seg_t, seg_y = seg_t[keep], seg_y[keep]
        elif k > 0:
            seg_t, seg_y = seg_t[1:], seg_y[1:]  # the break is already the previous piece's end
        if sol.status == 1:  # a terminal event fired: blow-up, or the budget ran out
            fired = 0 if len(sol.t_events[0]) else 1
            te, ye = sol.t_events[fired][0], sol.y_events[fired][0]
            before = seg_t < te
            seg_t = np.append(seg_t[before], te)
            seg_y = np.vstack([seg_y[before], ye[None]])
            if fired == 0:
                status, crossing_time = "blowup", float(te)
                which = ("||mu||_2" if np.linalg.norm(ye[:d]) >= np.linalg.norm(ye[d:]) else "||Sigma||_F")
                message = f"{which} crossed blowup_norm = {blowup_norm:.3g} at t = {te:.6g}"
            else:
                status = "budget"
                message = (f"stopped after max_nfev = {max_nfev} right-hand-side evaluations at "
                           f"t = {te:.6g} of t1 = {t1:.6g}: raise max_nfev or shorten t_span")
        elif sol.status < 0:
            status = "failed"
        ts.append(seg_t)
        mus.append(seg_y[:, :d])
        Sigmas.append(seg_y[:, d:].reshape(-1, d, d))
        if sol.status != 0:
            break
    t = np.concatenate(ts)
    Sigma = np.concatenate(Sigmas)
    Sigma = psd_project(0.5 * (Sigma + np.swapaxes(Sigma, 1, 2)))
    return MomentTrajectory(t=t, mu=np.concatenate(mus), Sigma=Sigma, status=status,
                            crossing_time=crossing_time, message=message, nfev=nfev)


@dataclass
class LaneMoments:
    r"""Where each of many moment ODEs ended (:func:`integrate_moments_lanes`).

    Attributes
    ----------
    t : (n,) last time of each lane (``t_span[1]`` when completed; for "blowup" the end of the step at
        which :math:`\|\Sigma\|_F` crossed ``blowup_norm``)
    mu : (n, d) means there
    Sigma : (n, d, d) covariances there, exactly symmetric
    status : (n,) "completed", "blowup" or "failed"
    """

    t: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    status: np.ndarray


def integrate_moments_lanes(mu0: Any, Sigma0: Any, controls: Sequence[Controls], t_span: tuple[float, float],
                            *, rtol: float = 1e-10, atol: Any = 1e-12, blowup_norm: Any = 1e8) -> LaneMoments:
    r"""The moment ODE (eq. 1.1) for many constant controls at once, each lane with its own DOP853 steps.

    Lane :math:`k` solves :math:`\mu' = (M_k + G_k)\mu + b_k`, :math:`\Sigma' = M_k\Sigma + \Sigma M_k^\top`
    with the dot-product tilt :math:`M_k = A_k + \sum_h V_{k,h}\Sigma B_{k,h}`, :math:`G_k = \sum_h V_{k,h}`
    (:meth:`gtcore.attention.DotProduct.value_responses`), stepped by :func:`gtcore.lanes.integrate_lanes`:
    the step control of :func:`integrate_moments` (``solve_ivp``'s DOP853) lane by lane, all lanes'
    right-hand sides in one vectorised evaluation. The blow-up event (:math:`\|\Sigma\|_F` crossing
    ``blowup_norm``) is detected at the end of the step (no root location): use it for the outcome, and
    :func:`integrate_moments` for the crossing time.

    Parameters
    ----------
    mu0 : (d,) or (n, d) initial means
    Sigma0 : (d, d) or (n, d, d) initial covariances
    controls : n constant :class:`Controls` of one dimension, dot-product attention
    t_span : (t0, t1)
    rtol : relative tolerance
    atol, blowup_norm : scalars or one per lane

    Returns
    -------
    LaneMoments
    """
    from .attention import DotProduct, attention_of
    from .lanes import integrate_lanes

    ctls = list(controls)
    if not ctls:
        raise ValueError("controls must hold at least one Controls")
    d = ctls[0].d
    for k, c in enumerate(ctls):
        if not isinstance(c, Controls) or c.d != d:
            raise ValueError(f"controls[{k}] must be constant Controls of dimension {d}")
        if not isinstance(attention_of(c), DotProduct):
            raise ValueError(f"controls[{k}]: integrate_moments_lanes needs dot-product attention "
                             f"(got {c.attention!r}); use integrate_moments")
    n = len(ctls)
    mus = np.broadcast_to(as_float_array(mu0, "mu0"), (n, d)).copy()
    Sigmas = np.broadcast_to(as_float_array(Sigma0, "Sigma0"), (n, d, d)).copy()
    for k in range(n):
        check_moments(mus[k], Sigmas[k], "mu0", "Sigma0")
    limit = np.broadcast_to(as_float_array(blowup_norm, "blowup_norm"), (n,))
    if np.any(limit <= 0) or np.any(np.linalg.norm(Sigmas, axis=(1, 2)) >= limit):
        raise ValueError("blowup_norm must be positive and exceed the norm of every Sigma0")
    heads = max(c.heads for c in ctls)
    A = np.stack([c.affine_A for c in ctls])
    b = np.stack([c.affine_b for c in ctls])
    V = np.zeros((n, heads, d, d))
    B = np.zeros((n, heads, d, d))
    for k, c in enumerate(ctls):  # missing heads are zero heads
        V[k, :c.heads], B[k, :c.heads] = c.V, c.B
    att = DotProduct()
    G = np.stack([att.mean_gain(Sigmas[k], V[k], B[k]) for k in range(n)])  # sum_h V_h

    def rhs(t, y, lanes):
        S = y[:, d:].reshape(-1, d, d)
        S = 0.5 * (S + np.swapaxes(S, 1, 2))
        M = A[lanes] + att.value_responses(S[:, None], V[lanes], B[lanes]).sum(axis=1)
        dmu = np.einsum("kij,kj->ki", M + G[lanes], y[:, :d]) + b[lanes]
        MS = M @ S
        return np.concatenate([dmu, (MS + np.swapaxes(MS, 1, 2)).reshape(-1, d * d)], axis=1)

    def crossed(y, lanes):
        return np.linalg.norm(y[:, d:], axis=1) >= limit[lanes]

    sol = integrate_lanes(rhs, t_span, np.concatenate([mus, Sigmas.reshape(n, d * d)], axis=1),
                          rtol=rtol, atol=atol, stop=crossed)
    S = sol.y[:, d:].reshape(n, d, d)
    status = np.where(sol.status == "stopped", "blowup", sol.status)
    return LaneMoments(t=sol.t, mu=sol.y[:, :d], Sigma=0.5 * (S + np.swapaxes(S, 1, 2)), status=status)
