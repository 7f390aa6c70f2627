r"""Chapter harnesses: one module per chapter, each returning result dataclasses.

* :mod:`~gtcore.studies.invariance.harness` (chapter 1): the N-token Transformer against the moment ODE;
* :mod:`~gtcore.studies.beyond.harness` (chapter 2): a cloud followed in time, mixtures, ReLU;
* :mod:`~gtcore.studies.reachability.harness` (chapter 3): rank invariance along the ODE, steered tokens;
* :mod:`~gtcore.studies.stability.harness` (chapter 4): the planar rotating family, regime maps.

Chapter 5's harness is :func:`gtcore.studies.pretrained.statistics.layer_statistics`. Figures for each
chapter live in its study package (``figures.py``) and take these dataclasses.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def loglog_slope(x: Any, y: Any, x_max: float | None = None) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x`.

    With ``x_max``, only the points with :math:`0 < x \le x_{\max}` and :math:`y > 0` are fitted
    (a short-time or small-N regime); without it every point must be positive.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D arrays of one length, got shapes {x.shape} and {y.shape}")
    if x_max is not None:
        keep = (x > 0) & (x <= x_max) & (y > 0) & np.isfinite(y)
        if keep.sum() < 2:
            raise ValueError(f"x_max: need at least 2 points with 0 < x <= {x_max} and y > 0")
        x, y = x[keep], y[keep]
    elif x.size < 2 or np.any(x <= 0) or np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("x and y must hold at least 2 points, all positive and finite, for a log-log slope")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


__all__ = ["loglog_slope"]
