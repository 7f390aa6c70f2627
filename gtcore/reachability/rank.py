r"""The rank of a covariance, the invariant of the dynamics, and the error raised for an unreachable target."""

from __future__ import annotations

from typing import Any

import numpy as np

from gtcore._linalg import RANK_RTOL, numerical_rank
from gtcore._validation import (
    as_float_array,
    check_covariance,
    check_positive,
)

__all__ = ["RankMismatchError", "covariance_rank", "singular_values"]


class RankMismatchError(ValueError):
    """The target's covariance has a different rank from the initial one: it is unreachable.

    Parameters
    ----------
    rank0 : int
        The rank of the initial covariance.
    rank1 : int
        The rank of the target covariance.
    d : int
        The dimension.

    Attributes
    ----------
    rank0, rank1, d : int
        The same, kept for callers that handle the error.

    Examples
    --------
    >>> from gtcore import RankMismatchError, steer
    >>> try:
    ...     steer(np.zeros(2), np.eye(2), np.zeros(2), np.diag([1.0, 0.0]), 1.0)
    ... except RankMismatchError as err:
    ...     print(err.rank0, err.rank1)
    ...
    2 1
    """

    def __init__(self, rank0: int, rank1: int, d: int) -> None:
        self.rank0, self.rank1, self.d = int(rank0), int(rank1), int(d)
        super().__init__(
            f"cannot steer: rank(Sigma0) = {rank0} but rank(Sigma1) = {rank1} (d = {d}). The rank "
            f"of the covariance is invariant under the Gaussian Transformer dynamics "
            f"(Sigma(t) = Phi(t) Sigma0 Phi(t)^T with Phi(t) invertible), so no controls reach a "
            f"target of a different rank."
        )


# ------------------------------------------------------------------------------- rank
def covariance_rank(Sigma: Any, rtol: float = RANK_RTOL) -> int:
    r"""Numerical rank of a covariance: the number of eigenvalues above ``rtol`` times the largest.

    .. math::

        \operatorname{rank}_\varepsilon \Sigma = \#\{k : \lambda_k(\Sigma) > \varepsilon\,
        \lambda_{\max}(\Sigma)\}, \qquad \varepsilon = \texttt{rtol}.

    Parameters
    ----------
    Sigma : (d, d) array
        The covariance, symmetric positive semidefinite.
    rtol : float
        Relative threshold, positive (default ``gtcore._linalg.RANK_RTOL`` = 1e-8).

    Returns
    -------
    int
        Between 0 (the zero matrix) and d.

    Examples
    --------
    >>> from gtcore import covariance_rank
    >>> covariance_rank(np.diag([1.0, 1e-3, 0.0]))
    2
    """
    S = check_covariance(Sigma, "Sigma")
    rtol = check_positive(rtol, "rtol")
    return numerical_rank(S, rtol)


def singular_values(Sigma: Any) -> np.ndarray:
    r"""Singular values of one covariance ``(d, d)`` or of a stack ``(n, d, d)``, largest first.

    Parameters
    ----------
    Sigma : (d, d) or (n, d, d) array
        One matrix or a stack of them.

    Returns
    -------
    (d,) or (n, d) ndarray
        The singular values of each matrix, in decreasing order.

    Raises
    ------
    ValueError
        ``Sigma`` is not square or a stack of square matrices.
    """
    S = as_float_array(Sigma, "Sigma")
    if S.ndim not in (2, 3) or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"Sigma must have shape (d, d) or (n, d, d), got shape {S.shape}")
    return np.linalg.svd(S, compute_uv=False)
