r"""The wider regime map: chapter 4's plane with :math:`V` not proportional to :math:`I` and a skew part in :math:`B`.

Chapter 4 maps the plane :math:`A = aI + \omega J`, :math:`V = vI`, :math:`B = B_0`
(:math:`J` the rotation generator). With :math:`V = vI` only :math:`B + B^\top` enters the covariance
equation (:math:`V\Sigma B\Sigma + \Sigma B^\top\Sigma V^\top = v\Sigma(B + B^\top)\Sigma`), so
that map cannot see a skew part of :math:`B`, nor any :math:`V` that is not a multiple of
:math:`I`. The map here adds two parameters:

.. math::

    V = v\,(I + \varepsilon E), \quad E = \operatorname{diag}(1, -1), \qquad B = B_0 + \beta J,

(:math:`V` indefinite for :math:`\varepsilon > 1`), with :math:`\Sigma_0` and :math:`B_0` of chapter 4.
At :math:`\varepsilon = 0` the map must not depend on :math:`\beta`: a check the chapter makes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtbook.studies.atlas.draws import Draw
from gtcore.controls import Controls

__all__ = ["MAP_B0", "MAP_SIGMA0", "AtlasMap", "assemble_map", "map_controls", "map_draws"]

MAP_B0 = np.array([[1.0, 0.4], [-0.2, 0.6]])
MAP_SIGMA0 = np.array([[1.0, 0.3], [0.3, 0.5]])
_J = np.array([[0.0, -1.0], [1.0, 0.0]])
_E = np.diag([1.0, -1.0])


def map_draws(a_values, v_values, eps_values, beta_values, *, omega: float = 0.7):
    """One draw per grid point, in the order (eps, beta, v, a) (the last index fastest)."""
    out: list[Draw] = []
    for e in eps_values:
        for b in beta_values:
            for v in v_values:
                for a in a_values:
                    out.append(
                        Draw("map", "dot", 2, len(out), 0, (float(e), float(b), float(a), float(v), float(omega)))
                    )
    return out


def map_controls(draw) -> tuple[Controls, np.ndarray, dict]:
    """The layer of one map point (``draw.variant = (eps, beta, a, v, omega)``)."""
    eps, beta, a, v, omega = draw.variant
    ctl = Controls(A=a * np.eye(2) + omega * _J, V=v * (np.eye(2) + eps * _E), B=MAP_B0 + beta * _J)
    return ctl, MAP_SIGMA0.copy(), {"v_kind": f"v(I + {eps:g} E)", "b_kind": f"B0 + {beta:g} J", "shift": a}


@dataclass
class AtlasMap:
    """Regime maps over (a, v), one per (eps, beta).

    Attributes
    ----------
    a, v, eps, beta : the grid axes
    outcome : (len(eps), len(beta), len(v), len(a)) outcome strings
    rank : same shape, the limit's rank (-1: none)
    t_pole : same shape, the pole time of escaping points (NaN elsewhere)
    """

    a: np.ndarray
    v: np.ndarray
    eps: np.ndarray
    beta: np.ndarray
    outcome: np.ndarray
    rank: np.ndarray
    t_pole: np.ndarray

    def __repr__(self) -> str:
        return (
            f"AtlasMap({self.a.size} x {self.v.size} points, eps {list(np.round(self.eps, 3))}, "
            f"beta {list(np.round(self.beta, 3))})"
        )


def assemble_map(result, a_values, v_values, eps_values, beta_values) -> AtlasMap:
    """The :class:`AtlasMap` of a sweep over :func:`map_draws` (same axes, same order)."""
    shape = (len(eps_values), len(beta_values), len(v_values), len(a_values))
    n = int(np.prod(shape))
    if result.table.num_rows != n:
        raise ValueError(f"result: the sweep has {result.table.num_rows} rows, the grid {n} points")
    return AtlasMap(
        a=np.asarray(a_values, float),
        v=np.asarray(v_values, float),
        eps=np.asarray(eps_values, float),
        beta=np.asarray(beta_values, float),
        outcome=result.column("outcome").reshape(shape),
        rank=result.column("rank").reshape(shape),
        t_pole=result.column("t_pole").reshape(shape),
    )
