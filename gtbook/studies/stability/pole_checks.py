r"""The library's blow-up times against the independent decimal Taylor integrator (:mod:`.taylor`).

Two checks of :func:`gtcore.riccati.blowup_time`, each a derivation (a method for :math:`t^*` against an
integration of eq. (1.1)):

* **General V, where V matters** (:func:`general_v_poles`): :math:`d = 3`, :math:`A = 0.3G` (Ginibre),
  :math:`V = WW^\top/d + 0.5I + (R - R^\top)/2` (positive-definite symmetric part, non-symmetric, not a multiple
  of :math:`I`), :math:`B = HH^\top/d + 0.2I + (S - S^\top)/2`, :math:`\Sigma_0 = ZZ^\top/d + 0.2I` (not
  isotropic). :math:`V` and :math:`B` do not commute. ``blowup_time`` takes its numerical route (DOP853 to
  :math:`\|\Sigma\|_F = 10^8`, the pole correction, a certificate). The **control** replaces :math:`V` by its
  scalar part :math:`(\operatorname{tr}V/d)I` and uses the :math:`V = vI` closed form: its :math:`t^*` must be
  far from the Taylor pole, which shows that :math:`V`'s structure moves the pole in these draws.
* **d = 1** (:func:`scalar_poles`): :math:`\sigma' = 2a\sigma + q\sigma^2`, :math:`q = 2v\beta`, whose
  closed form :math:`t^* = \log(1 + 2a/(q\sigma_0))/(2a)` (``inf`` when :math:`q \le 0` or
  :math:`1 + 2a/(q\sigma_0) \le 0`) is what ``blowup_time`` returns in :math:`d = 1`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtbook.studies.stability.taylor import pole_time_hp
from gtcore.controls import Controls
from gtcore.riccati import blowup_time
from gtcore.status import Verdict

__all__ = ["PoleComparison", "general_v_poles", "scalar_poles"]


@dataclass
class PoleComparison:
    r"""``blowup_time`` against the Taylor pole over draws.

    Attributes
    ----------
    library, taylor : (draws,) arrays
        The two :math:`t^*` (``inf``: no pole).
    certified : (draws,) bool array
        Whether ``blowup_time`` proved its answer (verdict ``BLOWS_UP`` or a closed form).
    control : (draws,) array
        The control's :math:`t^*` (general V only; empty in d = 1).
    """

    library: np.ndarray
    taylor: np.ndarray
    certified: np.ndarray
    control: np.ndarray

    @property
    def error(self) -> float:
        r"""Largest relative gap :math:`|t^*_{\rm lib} - t^*_{\rm Taylor}|/t^*_{\rm Taylor}` over draws with a pole;
        ``inf`` when one side finds a pole and the other does not."""
        both_inf = np.isinf(self.library) & np.isinf(self.taylor)
        if np.any(np.isinf(self.library) != np.isinf(self.taylor)):
            return float("inf")
        fin = ~both_inf
        return float(np.max(np.abs(self.library[fin] - self.taylor[fin]) / self.taylor[fin])) if fin.any() else 0.0

    @property
    def control_gap(self) -> float:
        """Smallest relative gap of the control's t* to the Taylor pole (general V)."""
        return float(np.min(np.abs(self.control - self.taylor) / self.taylor))

    def __repr__(self) -> str:
        return (
            f"PoleComparison(draws={self.library.size}, certified={int(self.certified.sum())}, "
            f"poles={int(np.isfinite(self.taylor).sum())}, error={self.error:.2e})"
        )


def general_v_poles(draws: int, *, seed: int, d: int = 3) -> PoleComparison:
    r"""``draws`` general-V draws of the module docstring: library, Taylor and the scalar-V control.

    Parameters
    ----------
    draws : int
    seed : int
    d : int
        Dimension.

    Returns
    -------
    PoleComparison
    """
    rng = np.random.default_rng(seed)
    lib, hp, cert, ctrl = [], [], [], []
    for _ in range(draws):
        G, W, H, S, R, Z = (rng.standard_normal((d, d)) for _ in range(6))
        A = 0.3 * G / np.sqrt(d)
        V = W @ W.T / d + 0.5 * np.eye(d) + 0.5 * (R - R.T)
        B = H @ H.T / d + 0.2 * np.eye(d) + 0.5 * (S - S.T)
        S0 = Z @ Z.T / d + 0.2 * np.eye(d)
        bt = blowup_time(S0, Controls(A=A, V=V, B=B))
        lib.append(bt.t_star)
        cert.append(bt.verdict is Verdict.BLOWS_UP and bt.proved)
        hp.append(pole_time_hp(S0, A, V, B).t_star)
        ctrl.append(blowup_time(S0, Controls(A=A, V=np.trace(V) / d * np.eye(d), B=B)).t_star)
    return PoleComparison(np.array(lib), np.array(hp), np.array(cert), np.array(ctrl))


def scalar_poles(draws: int, *, seed: int) -> PoleComparison:
    r"""``draws`` scalar equations: :math:`a \sim U[-1, 1]`, :math:`|v|, |\beta| \sim U[0.3, 1.5]` with random signs,
    :math:`\sigma_0 \sim U[0.2, 2]`; ``blowup_time`` in :math:`d = 1` against the Taylor pole.

    Parameters
    ----------
    draws : int
    seed : int

    Returns
    -------
    PoleComparison
    """
    rng = np.random.default_rng(seed)
    lib, hp, cert = [], [], []
    for _ in range(draws):
        a = rng.uniform(-1.0, 1.0)
        v, beta = rng.uniform(0.3, 1.5, size=2) * rng.choice([-1.0, 1.0], size=2)
        s0 = rng.uniform(0.2, 2.0)
        bt = blowup_time([[s0]], Controls(A=[[a]], V=[[v]], B=[[beta]]))
        lib.append(bt.t_star)
        cert.append(bool(bt.proved))
        hp.append(pole_time_hp([[s0]], [[a]], [[v]], [[beta]], t_max=60.0).t_star)
    return PoleComparison(np.array(lib), np.array(hp), np.array(cert), np.zeros(0))
