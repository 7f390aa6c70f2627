r"""Chapter 4 (stability regimes): the planar rotating family and theory-against-observation maps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from gtcore._progress import progress as progress_bar
from gtcore._validation import check_matrix, check_positive, check_vector
from gtcore.controls import Controls
from gtcore.riccati import _check_gain_domain, critical_gain
from gtcore.stability import classify, observe_regimes

__all__ = ["RegimeBoundary", "RegimeMap", "regime_boundary", "regime_map", "rotating_controls"]


@dataclass
class RegimeMap:
    """Theory against observation on a 2-D parameter grid.

    Attributes
    ----------
    xs, ys : the grid axes; ``theory[i, j]`` and ``observed[i, j]`` belong to ``(xs[j], ys[i])``
    theory, observed : (len(ys), len(xs)) arrays of verdict strings
    agreement : fraction of grid points where they agree
    disagreements : list of (x, y, theory, observed)
    """

    xs: np.ndarray
    ys: np.ndarray
    theory: np.ndarray
    observed: np.ndarray
    agreement: float
    disagreements: list = field(default_factory=list)


def regime_map(
    make_controls: Callable[[float, float], Controls],
    xs: Sequence[float] | np.ndarray,
    ys: Sequence[float] | np.ndarray,
    Sigma0: Any,
    t_max: float,
    *,
    progress: bool = True,
) -> RegimeMap:
    r"""Classify every :math:`(x, y)` of a grid by :func:`~gtcore.stability.classify` (theory) and
    :func:`~gtcore.stability.observe_regime` (integration to ``t_max``), and compare.

    The observations are made by :func:`gtcore.stability.observe_regimes`: the same integrations and
    verdicts as :func:`~gtcore.stability.observe_regime`, all grid points stepped side by side.

    Parameters
    ----------
    make_controls : callable ``(x, y) -> Controls``
    xs, ys : 1-D sequences of grid values
    Sigma0 : initial covariance
    t_max : integration horizon of the observation
    progress : show a tqdm progress bar

    Returns
    -------
    RegimeMap
    """
    xs = check_vector(xs, "xs")
    ys = check_vector(ys, "ys")
    t_max = check_positive(t_max, "t_max")
    if not callable(make_controls):
        raise ValueError("make_controls must be a callable (x, y) -> Controls")
    theory = np.empty((ys.size, xs.size), dtype=object)
    cells = [(i, j) for i in range(ys.size) for j in range(xs.size)]
    controls = [make_controls(float(xs[j]), float(ys[i])) for i, j in cells]
    # thousands of 2x2 and 4x4 solves and exponentials: BLAS threads only add wake-up latency
    # (10-100x slower per call on a loaded 2-core machine)
    with threadpool_limits(limits=1, user_api="blas"):
        for (i, j), c in zip(progress_bar(cells, "regime map", enabled=progress), controls, strict=True):
            theory[i, j] = classify(c, Sigma0, t_max=t_max).verdict
        # the observation: every point's moment ODE integrated side by side, each with its own steps
        observed = np.array(observe_regimes(controls, Sigma0, t_max), dtype=object).reshape(theory.shape)
    agree = theory == observed
    dis = [(float(xs[j]), float(ys[i]), theory[i, j], observed[i, j]) for i, j in zip(*np.nonzero(~agree), strict=True)]
    return RegimeMap(xs=xs, ys=ys, theory=theory, observed=observed, agreement=float(agree.mean()), disagreements=dis)


# ------------------------------------------------------------------- the planar family
_J = np.array([[0.0, -1.0], [1.0, 0.0]])


def rotating_controls(a: float, v: float, B: Any, *, omega: float = 0.0, b: Any = None) -> Controls:
    r"""The planar family :math:`A = aI + \omega J` (:math:`J` the rotation generator), :math:`V = vI`.

    :math:`\operatorname{spec}(A) = a \pm i\omega`: Hurwitz for :math:`a < 0`, anti-stable for
    :math:`a > 0`. With :math:`B + B^\top \succ 0`, :math:`v < 0` is opposite definiteness and
    :math:`v > 0` the same.
    """
    B = check_matrix(B, "B", 2)
    return Controls(A=float(a) * np.eye(2) + float(omega) * _J, V=float(v) * np.eye(2), B=B, b=b)


@dataclass
class RegimeBoundary:
    """The theory's collapse/blow-up curve :math:`v = v_c(a)` for Hurwitz :math:`A` (:func:`regime_boundary`).

    Attributes
    ----------
    a_curve : the negative ``a`` values
    v_curve : :math:`v_c` there (:func:`gtcore.riccati.critical_gain`)
    """

    a_curve: np.ndarray
    v_curve: np.ndarray


def regime_boundary(a_values: Any, B: Any, Sigma0: Any, *, omega: float = 0.0) -> RegimeBoundary:
    r"""The theory's boundary of the planar family in the :math:`(a, v)` plane (:math:`B + B^\top \succeq 0`).

    For :math:`a < 0` it is the curve :math:`v = v_c(a)` of :func:`~gtcore.riccati.critical_gain` (collapse below,
    blow-up above), exact only when :math:`B + B^\top \succeq 0` (see :func:`~gtcore.riccati.critical_gain`:
    with an indefinite :math:`B + B^\top` a transient can blow up below :math:`v_c`), so any
    other ``B`` is refused. When moreover :math:`B + B^\top \succ 0`, the rest of the boundary is
    :math:`v = 0` for :math:`a > 0` (converges below, blows up above) and :math:`a = 0` for
    :math:`v < 0` (collapse left, convergence right); only the curve is returned.

    Returns
    -------
    RegimeBoundary

    Raises
    ------
    ValueError
        ``B + B^T`` is not positive semidefinite (outside the domain of :math:`v_c`), or bad input.
    """
    a_values = check_vector(a_values, "a_values")
    B = check_matrix(B, "B", 2)
    _check_gain_domain(B)
    a_neg = a_values[a_values < 0]
    v_c = np.array([critical_gain(a * np.eye(2) + omega * _J, B, Sigma0) for a in a_neg])
    return RegimeBoundary(a_curve=a_neg, v_curve=v_c)
