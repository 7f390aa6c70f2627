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

from ._validation import as_float_array, check_moments, check_positive, check_span
from .attention import gaussian_velocity
from .controls import Controls, ControlsLike, as_control_function, control_breaks, evaluate_controls


def moment_rhs(mu: np.ndarray, Sigma: np.ndarray, controls: Controls) -> tuple[np.ndarray, np.ndarray]:
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
    """
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
    """
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    h = check_positive(h, "h")
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    if controls.d != mu.shape[0]:
        raise ValueError(f"controls act on dimension d={controls.d}, but mu has d={mu.shape[0]}")
    return _layer_map(mu, Sigma, controls, h)


def _layer_map(mu: np.ndarray, Sigma: np.ndarray, controls: Controls, h: float):
    F, G = gaussian_velocity(Sigma, controls)
    dmu = (F + G) @ mu + controls.affine_b
    M = np.eye(mu.shape[0]) + h * F
    S = M @ Sigma @ M.T
    return mu + h * dmu, 0.5 * (S + S.T)


def layer_stack(mu: Any, Sigma: Any, controls_per_layer: Sequence[Controls],
                h: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Moments through L residual layers, :math:`(\mu_{l+1}, \Sigma_{l+1}) = \text{layer\_map}(\mu_l, \Sigma_l)`.

    Parameters
    ----------
    mu, Sigma : input moments
    controls_per_layer : sequence of L :class:`Controls`
    h : float
        Layer size (an L-layer stack with ``h = T / L`` is explicit Euler on ``[0, T]``).

    Returns
    -------
    mus : (L + 1, d) array
        ``mus[0]`` is the input, ``mus[l]`` the output of layer ``l``.
    Sigmas : (L + 1, d, d) array
    """
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    h = check_positive(h, "h")
    layers = list(controls_per_layer)
    if not layers:
        raise ValueError("controls_per_layer must hold at least one layer")
    mus, Sigmas = [mu], [Sigma]
    for k, c in enumerate(layers):
        if not isinstance(c, Controls) or c.d != mu.shape[0]:
            raise ValueError(f"controls_per_layer[{k}] must be a Controls of dimension {mu.shape[0]}")
        mu, Sigma = _layer_map(mu, Sigma, c, h)
        mus.append(mu)
        Sigmas.append(Sigma)
    return np.stack(mus), np.stack(Sigmas)


@dataclass
class MomentTrajectory:
    r"""The solution of the moment ODE, in the manner of scipy's ``OdeResult``.

    Attributes
    ----------
    t : (n,) array of times
    mu : (n, d) array of means
    Sigma : (n, d, d) array of covariances, each exactly symmetric
    status : "completed", "blowup" (the norm of Sigma crossed ``blowup_norm``) or "failed"
    crossing_time : the time at which :math:`\|\Sigma\|_F` crossed ``blowup_norm`` (located by a
        terminal event), or None. It precedes the pole :math:`t^*` of the solution
        (:func:`gtcore.riccati.blowup_time`)
    message : what the solver said
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


def integrate_moments(mu0: Any, Sigma0: Any, controls: ControlsLike, t_span: tuple[float, float],
                      t_eval: Any = None, *, rtol: float = 1e-10, atol: float = 1e-12,
                      blowup_norm: float = 1e8) -> MomentTrajectory:
    r"""Integrate the moment ODE (eq. 1.1) from :math:`(\mu_0, \Sigma_0)` over ``t_span``.

    Adaptive Dormand–Prince 8(5,3) (``scipy.integrate.solve_ivp``, ``DOP853``) with tight default
    tolerances. Piecewise controls are integrated piece by piece, so their breaks are honoured
    exactly. Finite-time blow-up is a terminal event: integration stops when
    :math:`\|\Sigma(t)\|_F` crosses ``blowup_norm``; the arrays end at that time, and the
    trajectory carries ``status="blowup"`` and ``crossing_time``. No NaN, no warnings.

    Parameters
    ----------
    mu0 : (d,) array
    Sigma0 : (d, d) array, symmetric positive semidefinite (rank-deficient allowed)
    controls : Controls, PiecewiseControls or callable ``t -> Controls``
    t_span : (t0, t1) with t1 > t0
    t_eval : array, optional
        Times at which to report the solution (within ``t_span``, increasing). By default the
        solver's own steps.
    rtol, atol : tolerances passed to the solver
    blowup_norm : threshold on the Frobenius norm of Sigma that counts as blow-up

    Returns
    -------
    MomentTrajectory

    Raises
    ------
    ValueError
        Invalid initial moments (shape, finiteness, symmetry, positive semidefiniteness),
        controls of the wrong dimension, or a bad time span; the message names the argument.
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
    check_positive(blowup_norm, "blowup_norm")
    if np.linalg.norm(Sigma0) >= blowup_norm:
        raise ValueError(f"Sigma0 has norm {np.linalg.norm(Sigma0):.3g} >= blowup_norm = {blowup_norm:.3g}: "
                         "raise blowup_norm")

    def blowup_event(t, y):
        return np.linalg.norm(y[d:]) - blowup_norm

    blowup_event.terminal = True
    blowup_event.direction = 1

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
            Sigma = y[d:].reshape(d, d)
            Sigma = 0.5 * (Sigma + Sigma.T)
            dmu, dS = moment_rhs(y[:d], Sigma, at(t))
            return np.concatenate([dmu, dS.ravel()])

        solve_eval = keep_eval = None
        if t_eval is not None:
            mask = (t_eval >= a) & ((t_eval <= b) if last else (t_eval < b))
            keep_eval = t_eval[mask]
            solve_eval = np.union1d(keep_eval, [b])  # b is always solved for, to go on from it
        sol = solve_ivp(rhs, (a, b), y, method="DOP853", t_eval=solve_eval, rtol=rtol, atol=atol,
                        events=blowup_event)
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
        if sol.status == 1:  # the blow-up event fired
            te, ye = sol.t_events[0][0], sol.y_events[0][0]
            before = seg_t < te
            seg_t = np.append(seg_t[before], te)
            seg_y = np.vstack([seg_y[before], ye[None]])
            status, crossing_time = "blowup", float(te)
        elif sol.status < 0:
            status = "failed"
        ts.append(seg_t)
        mus.append(seg_y[:, :d])
        Sigmas.append(seg_y[:, d:].reshape(-1, d, d))
        if sol.status != 0:
            break
    t = np.concatenate(ts)
    Sigma = np.concatenate(Sigmas)
    Sigma = 0.5 * (Sigma + np.swapaxes(Sigma, 1, 2))
    return MomentTrajectory(t=t, mu=np.concatenate(mus), Sigma=Sigma, status=status,
                            crossing_time=crossing_time, message=message, nfev=nfev)
