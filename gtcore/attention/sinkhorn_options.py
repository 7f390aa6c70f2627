r"""The settings of Sinkhorn scaling at finite N, torch-free: defaults, their checks, the convergence warning.

Shared by the attention type (:class:`gtcore.attention.sinkhorn.Sinkhorn`, whose constructor checks them without
importing torch) and the scaling itself (:mod:`gtcore.attention.sinkhorn_scaling`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["ANDERSON", "INITS", "MAX_ITER", "TOL", "SinkhornConvergenceWarning", "default_tol"]

#: default stopping tolerance on the relative marginal violation (float64; see
#: :func:`~gtcore.attention.sinkhorn.default_tol`)
TOL = 1e-9
#: default cap on the number of Sinkhorn row updates
MAX_ITER = 2000
#: default depth of the Anderson acceleration (0: plain Sinkhorn)
ANDERSON = 4
#: starting points of the column potential
INITS = ("gaussian", "zero")


class SinkhornConvergenceWarning(RuntimeWarning):
    """Sinkhorn scaling stopped at ``max_iter`` with a marginal violation above ``tol``."""


def default_tol(dtype: Any) -> float:
    r"""The default ``tol`` for tokens of ``dtype``: :math:`\max(\texttt{TOL}, 128\,\varepsilon)`.

    The marginal violation cannot go below a few units of round-off :math:`\varepsilon` (measured
    8--16 :math:`\varepsilon` in float32), so a float64 tolerance would make every float32 scaling
    run to ``max_iter`` and warn; in float64 this is ``TOL``.

    Parameters
    ----------
    dtype : torch.dtype
        The tokens' dtype.

    Returns
    -------
    float
        The stopping tolerance on the relative marginal violation.
    """
    import torch

    return max(TOL, 128.0 * torch.finfo(dtype).eps)


def _check_stopping(tol: float, max_iter: int) -> None:
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")


def _check_acceleration(init: str, anderson: int) -> None:
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; valid: {', '.join(INITS)}")
    if isinstance(anderson, bool) or not isinstance(anderson, (int, np.integer)) or anderson < 0:
        raise ValueError(f"anderson must be a non-negative integer, got {anderson!r}")
