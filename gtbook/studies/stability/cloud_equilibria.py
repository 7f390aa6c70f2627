r"""The stabilising theorem (:math:`V = vI`) on finite-N tokens in :math:`d = 3`, with general :math:`A` and :math:`B`.

For :math:`V = vI`, :math:`v < 0`, :math:`B + B^\top \succ 0` and :math:`A` anti-stable, eq. (1.1) converges to
:math:`\Sigma^* = (P^*)^{-1}`, :math:`P^*A + A^\top P^* = -v(B + B^\top)`. The independent side is a cloud of
:math:`N` tokens (:func:`gtcore.particles.simulate`, softmax attention over the cloud, RK4) started from
:math:`N(0, \Sigma_0)`: its covariance at :math:`T` must be near :math:`\Sigma^*`. The statistic is
:math:`\delta = \|\hat\Sigma_N(T) - \Sigma^*\|_F/\|\Sigma^*\|_F`; the **control** runs the same tokens with
:math:`V \to -V` (the same definiteness: eq. (1.1) blows up), where :math:`\delta` must be large.

The draws are the ``"scalar"`` stabilising draws of :mod:`gtbook.studies.stability.ensembles` with
:math:`V \to 3V`, :math:`\Sigma_0 \to \Sigma_0/3` (the same dynamics up to :math:`\Sigma \to \Sigma/3`, a cloud
narrower relative to :math:`B`: sampling strength :math:`\kappa(\Sigma^*) < \tfrac12` in most draws, the
domain where a finite cloud's softmax average has finite variance, chapter 1). Every draw is run and
counted; :math:`\kappa(\Sigma^*)` is reported beside :math:`\delta`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gtbook.studies.stability.ensembles import condition_draws
from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls
from gtcore.particles import simulate
from gtcore.stability import equilibrium
from gtcore.stats.sampling import gaussian_tokens

__all__ = ["CloudEquilibria", "cloud_equilibria"]


@dataclass
class CloudEquilibria:
    r"""Token clouds of the :math:`V = vI` stabilising draws and of their :math:`V \to -V` controls.

    Attributes
    ----------
    delta, delta_control : (draws,) arrays
        :math:`\|\hat\Sigma_N(T) - \Sigma^*\|_F/\|\Sigma^*\|_F` for the draw and for its control (``inf`` when
        the control's cloud passed the blow-up norm of :func:`~gtcore.particles.simulate`).
    kappa : (draws,) array
        :math:`\kappa(\Sigma^*)`.
    N : int
    T : float
    sides : Sides
        The traced sides of ``delta`` (:mod:`gtbook.studies.traced`): the token runs (observed); the
        equilibrium :math:`\Sigma^*` of eq. (1.1) (predicted).
    """

    delta: np.ndarray
    delta_control: np.ndarray
    kappa: np.ndarray
    N: int
    T: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def __repr__(self) -> str:
        return (
            f"CloudEquilibria(draws={self.delta.size}, N={self.N}, T={self.T:g}, "
            f"max delta={self.delta.max():.3g}, min control delta={self.delta_control.min():.3g})"
        )


def _delta(x0: np.ndarray, ctl: Controls, S_star: np.ndarray, T: float, step: float) -> float:
    steps = int(np.ceil(T / step))
    run = simulate(x0, ctl, (0.0, T), steps, record_every=steps, device="cpu")
    return float(np.linalg.norm(run.Sigma[-1] - S_star) / np.linalg.norm(S_star))


def cloud_equilibria(
    draws: int, N: int, *, seed: int, T: float = 40.0, step: float = 0.1, v_scale: float = 3.0
) -> CloudEquilibria:
    r"""Run ``N`` tokens for each of the first ``draws`` :math:`V = vI` stabilising draws (module docstring).

    Parameters
    ----------
    draws, N : int
    seed : int
        Seeds the draws (as :func:`~gtbook.studies.stability.ensembles.condition_draws`) and, plus the draw's
        index, its tokens.
    T : float
        The horizon.
    step : float
        RK4 step (about).
    v_scale : float
        :math:`V \to` ``v_scale`` :math:`V`, :math:`\Sigma_0 \to \Sigma_0/` ``v_scale``.

    Returns
    -------
    CloudEquilibria
    """
    delta, ctrl, kappa = [], [], []
    with collect() as sides:
        for dr in condition_draws(draws, 3, "scalar", seed=seed):
            A, V, B = dr.controls.A, v_scale * dr.controls.V[0], dr.controls.B[0]
            ctl = Controls(A=A, V=V, B=B)
            with predicted():
                S_star = equilibrium(ctl).Sigma
            x0 = gaussian_tokens(N, np.zeros(3), dr.Sigma0 / v_scale, seed + 1000 * (dr.index + 1))
            with observed():
                steps = int(np.ceil(T / step))
                run = simulate(x0, ctl, (0.0, T), steps, record_every=steps, device="cpu")
            delta.append(float(np.linalg.norm(run.Sigma[-1] - S_star) / np.linalg.norm(S_star)))
            d_ctrl = _delta(x0, Controls(A=A, V=-V, B=B), S_star, T, step)
            ctrl.append(d_ctrl if np.isfinite(d_ctrl) else np.inf)
            kappa.append(float(max_sampling_strength(ctl, [0.0], [S_star])))
    return CloudEquilibria(np.array(delta), np.array(ctrl), np.array(kappa), N, T, sides)
