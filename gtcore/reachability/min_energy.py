r"""Minimum-energy piecewise-constant steering controls (beyond the paper)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtcore._linalg import RANK_RTOL
from gtcore._repr import short_repr
from gtcore._validation import check_integer, check_positive
from gtcore.controls import (
    Controls,
    PiecewiseControls,
)
from gtcore.reachability.steering import (
    SteeringControls,
    _check_targets,
    _eig_desc,
    endpoint_error,
    steer,
)

__all__ = ["MinEnergyResult", "steer_min_energy", "steer_min_energy_starts"]


# ---------------------------------------------------------------- minimum-energy controls
@dataclass
class MinEnergyResult:
    r"""Minimum-energy piecewise-constant steering, beside the constructive controls.

    Attributes
    ----------
    controls : PiecewiseControls
        K equal pieces on :math:`[0, T]`.
    energy : float
        :math:`\int_0^T \|A\|_F^2 + \|b\|^2 dt` of ``controls``.
    endpoint_error : float
        :func:`endpoint_error` of ``controls`` (through :func:`gtcore.moments.integrate_moments`).
    constructive : SteeringControls
        :func:`steer`'s solution, the starting point.
    constructive_energy, constructive_endpoint_error : float
        The same two numbers for ``constructive``.
    success : bool
        Whether the optimiser reported convergence.
    nit : int
        Optimiser iterations.
    message : str
        The optimiser's message.

    Examples
    --------
    >>> from gtcore import steer_min_energy
    >>> res = steer_min_energy(np.zeros(1), np.eye(1), np.zeros(1), 4.0 * np.eye(1), 1.0, pieces=2)
    >>> bool(res.energy <= res.constructive_energy + 1e-9)
    True
    """

    controls: PiecewiseControls
    energy: float
    endpoint_error: float
    constructive: SteeringControls
    constructive_energy: float
    constructive_endpoint_error: float
    success: bool
    nit: int
    message: str

    __repr__ = short_repr  # shapes, status and key numbers, never the arrays


def _endpoint_constraints(mu0, Sigma0, mu1, Sigma1, r, K, tau):
    """A torch function theta -> constraint residual, full rank on the rank-r manifold."""
    import torch

    d = mu0.shape[0]
    w1, U1 = _eig_desc(Sigma1)
    R1 = torch.as_tensor(U1[:, :r].copy())
    N1 = torch.as_tensor(U1[:, r:].copy())
    D1 = torch.as_tensor(np.diag(w1[:r]).copy())
    iu = torch.triu_indices(r, r)
    m0, S0, m1 = (torch.as_tensor(x) for x in (mu0, Sigma0, mu1))

    def unpack(theta):
        A = theta[: K * d * d].reshape(K, d, d)
        b = theta[K * d * d :].reshape(K, d)
        return A, b

    def endpoint(theta):
        A, b = unpack(theta)
        G = torch.zeros(K, d + 1, d + 1, dtype=theta.dtype)
        G[:, :d, :d] = A * tau
        G[:, :d, d] = b * tau
        E = torch.linalg.matrix_exp(G)
        mu, S = m0, S0
        for k in range(K):
            F, g = E[k, :d, :d], E[k, :d, d]
            mu = F @ mu + g
            S = F @ S @ F.T
        return mu, S

    def residual(theta):
        mu, S = endpoint(theta)
        parts = [mu - m1]
        if r:
            parts.append((R1.T @ S @ R1 - D1)[iu[0], iu[1]])
        if 0 < r < d:
            parts.append((N1.T @ S @ R1).reshape(-1))
        return torch.cat(parts)

    return residual


def steer_min_energy(
    mu0: Any,
    Sigma0: Any,
    mu1: Any,
    Sigma1: Any,
    T: float,
    pieces: int = 8,
    *,
    maxiter: int = 300,
    feasibility_tol: float = 1e-12,
    rtol: float = RANK_RTOL,
    start: Any = None,
) -> MinEnergyResult:
    r"""Piecewise-constant controls of least energy that steer :math:`(\mu_0, \Sigma_0)` to the target.

    Beyond the paper. Over K equal pieces of length :math:`\tau = T/K` with constant
    :math:`(A_k, b_k)` (attention off), solve

    .. math::

        \min_{A_k, b_k}\ \tau\sum_{k=1}^{K}\big(\|A_k\|_F^2 + \|b_k\|^2\big)
        \quad\text{s.t.}\quad \mu(T) = \mu_1,\ \Sigma(T) = \Sigma_1,

    where :math:`(\mu(T), \Sigma(T))` is the exact flow of eq. (1.1), piece by piece
    :math:`\mu \mapsto e^{A_k\tau}\mu + \int_0^\tau e^{A_k s}ds\,b_k`,
    :math:`\Sigma \mapsto e^{A_k\tau}\Sigma e^{A_k^\top\tau}` (one augmented matrix exponential,
    differentiated by torch autograd). The covariance constraint is imposed in coordinates of the
    rank-:math:`r` manifold at :math:`\Sigma_1 = U_1D_1U_1^\top` (range :math:`U_1`, null
    :math:`N_1`): :math:`U_1^\top\Sigma U_1 = D_1` and :math:`N_1^\top\Sigma U_1 = 0`, which on that
    manifold is equivalent to :math:`\Sigma = \Sigma_1` and keeps the constraint Jacobian of full
    rank. SLSQP (scipy) from :func:`steer`'s solution sampled on the pieces, then Gauss–Newton
    steps onto the constraint; the endpoint is re-checked with :func:`gtcore.moments.integrate_moments`.

    Parameters
    ----------
    mu0, Sigma0, mu1, Sigma1, T : arrays and float
        The initial and target moments and the steering time, as in :func:`steer`.
    pieces : int
        K, number of equal pieces (an even K contains :func:`steer`'s two stages exactly).
    maxiter : int
        SLSQP iteration limit.
    feasibility_tol : float
        Target norm of the constraint residual for the final Gauss–Newton steps.
    rtol : float
        Rank threshold, as in :func:`steer`.
    start : (K d^2 + K d,) array, optional
        Starting point of SLSQP: the K matrices :math:`A_k` (row-major) then the K vectors
        :math:`b_k`. Default: :func:`steer`'s solution sampled at the pieces' midpoints.

    Returns
    -------
    MinEnergyResult
        The optimised controls, their energy and endpoint error, beside :func:`steer`'s.

    Raises
    ------
    RankMismatchError, ValueError
        As :func:`steer`; ``pieces`` not a positive integer.

    Examples
    --------
    >>> from gtcore import steer_min_energy
    >>> res = steer_min_energy(np.zeros(1), np.eye(1), np.zeros(1), 4.0 * np.eye(1), 1.0, pieces=2)
    >>> bool(res.endpoint_error < 1e-8), bool(res.energy <= res.constructive_energy + 1e-9)
    (True, True)
    """
    import torch
    from scipy.optimize import minimize

    mu0, Sigma0, mu1, Sigma1, T, r = _check_targets(mu0, Sigma0, mu1, Sigma1, T, rtol)
    pieces = check_integer(pieces, "pieces", 1)
    maxiter = check_integer(maxiter, "maxiter", 1)
    feasibility_tol = check_positive(feasibility_tol, "feasibility_tol")
    K, d = int(pieces), mu0.shape[0]
    tau = T / K
    constructive = steer(mu0, Sigma0, mu1, Sigma1, T, rtol=rtol)
    mids = (np.arange(K) + 0.5) * tau
    theta0 = np.concatenate(
        [np.stack([constructive(t).A for t in mids]).ravel(), np.stack([constructive(t).b for t in mids]).ravel()]
    )
    if start is not None:
        theta0 = np.asarray(start, float)
        if theta0.shape != (K * d * d + K * d,) or not np.all(np.isfinite(theta0)):
            raise ValueError(f"start must be a finite vector of length {K * d * d + K * d}, got shape {theta0.shape}")
    residual = _endpoint_constraints(mu0, Sigma0, mu1, Sigma1, r, K, tau)

    def cfun(x):
        with torch.no_grad():
            return residual(torch.as_tensor(x)).numpy()

    def cjac(x):
        return torch.autograd.functional.jacobian(residual, torch.as_tensor(x)).numpy()

    def energy(x):
        return float(tau * np.dot(x, x)), 2.0 * tau * x

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threading only adds overhead
    try:
        sol = minimize(
            energy,
            theta0,
            jac=True,
            method="SLSQP",
            constraints=[{"type": "eq", "fun": cfun, "jac": cjac}],
            options={"maxiter": int(maxiter), "ftol": 1e-13},
        )
        x = sol.x
        for _ in range(20):  # Gauss-Newton (least-norm) steps onto the constraint manifold
            c = cfun(x)
            if np.linalg.norm(c) <= feasibility_tol:
                break
            x = x - np.linalg.lstsq(cjac(x), c, rcond=None)[0]
    finally:
        torch.set_num_threads(threads)
    A = x[: K * d * d].reshape(K, d, d)
    b = x[K * d * d :].reshape(K, d)
    ctl = PiecewiseControls(np.linspace(0.0, T, K + 1), [Controls(A=A[k], b=b[k]) for k in range(K)])
    return MinEnergyResult(
        controls=ctl,
        energy=float(tau * np.dot(x, x)),
        endpoint_error=endpoint_error(ctl, mu0, Sigma0, mu1, Sigma1, T),
        constructive=constructive,
        constructive_energy=constructive.energy(),
        constructive_endpoint_error=endpoint_error(constructive, mu0, Sigma0, mu1, Sigma1, T),
        success=bool(sol.success),
        nit=int(sol.nit),
        message=str(sol.message),
    )


def steer_min_energy_starts(
    mu0: Any,
    Sigma0: Any,
    mu1: Any,
    Sigma1: Any,
    T: float,
    pieces: int = 8,
    *,
    starts: int = 4,
    scale: float = 0.5,
    seed: int = 0,
    **kwargs,
) -> list[MinEnergyResult]:
    r""":func:`steer_min_energy` from ``starts`` seeded random starting points.

    Start ``k`` draws every entry of every :math:`A_k` and :math:`b_k` i.i.d. from
    :math:`N(0, \text{scale}^2)` (``numpy.random.default_rng(seed + k)``): points that know nothing of
    :func:`steer`'s solution and in general do not steer to the target. A minimum that several such
    starts reach, and that the start from the constructive solution reaches too, is not an artefact of
    where the optimiser began. Other keywords go to :func:`steer_min_energy`.

    Parameters
    ----------
    mu0, Sigma0, mu1, Sigma1, T : arrays and float
        The initial and target moments and the steering time, as in :func:`steer`.
    pieces : int
        K, the number of equal pieces.
    starts : int
        The number of random starting points.
    scale : float
        The standard deviation of their entries.
    seed : int
        Start ``k`` uses ``numpy.random.default_rng(seed + k)``.
    **kwargs
        Passed to :func:`steer_min_energy` (``maxiter``, ``feasibility_tol``, ``rtol``).

    Returns
    -------
    list of MinEnergyResult
        One per start.

    Raises
    ------
    ValueError
        ``starts`` not a positive integer or ``scale`` not positive; as :func:`steer_min_energy`.
    """
    starts = check_integer(starts, "starts", 1)
    scale = check_positive(scale, "scale")
    pieces = check_integer(pieces, "pieces", 1)
    seed = check_integer(seed, "seed", 0)
    d = np.asarray(mu0, float).shape[0]
    K = int(pieces)
    out = []
    for k in range(int(starts)):
        theta0 = float(scale) * np.random.default_rng(seed + k).standard_normal(K * d * d + K * d)
        out.append(steer_min_energy(mu0, Sigma0, mu1, Sigma1, T, pieces, start=theta0, **kwargs))
    return out
