r"""The mean under constant controls at an equilibrium covariance: its limit, and the bias that steers it."""

from __future__ import annotations

from typing import Any

import numpy as np

from gtcore._validation import (
    check_covariance,
    check_vector,
)
from gtcore.attention import attention_of
from gtcore.controls import Controls
from gtcore.riccati import (
    _check_controls,
)

__all__ = ["asymptotic_mean", "bias_for_mean_target", "mean_matrix"]


# ------------------------------------------------------------------------------ the mean
def mean_matrix(controls: Controls, Sigma_star: Any) -> np.ndarray:
    r""":math:`A + \sum_h V_h + \sum_h V_h\Sigma^*B_h`: the mean's linear drift at :math:`\Sigma^*`.

    The mean converges to :func:`asymptotic_mean` iff this matrix is Hurwitz. Since
    :math:`M^* = A + \sum_h V_h\Sigma^*B_h` has purely imaginary spectrum at an equilibrium,
    for :math:`V = vI` its eigenvalues are :math:`v + i\omega`: the rate is :math:`v`.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters.
    Sigma_star : (d, d) array
        The covariance (an equilibrium), symmetric positive semidefinite.

    Returns
    -------
    (d, d) ndarray
        :math:`A + \sum_h V_h C_h(\Sigma^*) + \sum_h V_h M_h(\Sigma^*)` (for the dot product the matrix above).
    """
    controls = _check_controls(controls)
    S = check_covariance(Sigma_star, "Sigma_star", controls.d)
    att = attention_of(controls)
    p = att.params(controls)
    return controls.affine_A + att.mean_gain(S, controls.V, p) + att.linear_part(S, controls.V, p)


def _solvable_mean_matrix(controls: Controls, Sigma_star: Any) -> np.ndarray:
    """:func:`mean_matrix`, refused (``ValueError``) when it is singular to working precision."""
    M = mean_matrix(controls, Sigma_star)
    if np.linalg.cond(M) > 1e12:
        raise ValueError(
            "Sigma_star: A + V + V Sigma* B is singular (condition number > 1e12), the asymptotic mean is not unique"
        )
    return M


def asymptotic_mean(controls: Controls, Sigma_star: Any) -> np.ndarray:
    r"""The mean's fixed point when :math:`\Sigma = \Sigma^*`.

    .. math::

        \mu^* = -\Big(A + \sum_h V_h + \sum_h V_h\Sigma^*B_h\Big)^{-1} b.

    It attracts when :func:`mean_matrix` is Hurwitz.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters.
    Sigma_star : (d, d) array
        The covariance (an equilibrium), symmetric positive semidefinite.

    Returns
    -------
    (d,) ndarray
        :math:`\mu^*`.

    Raises
    ------
    ValueError
        The matrix is singular, or bad input (naming the argument).

    Examples
    --------
    >>> from gtcore import Controls, asymptotic_mean
    >>> ctl = Controls(A=np.eye(1), b=[1.0], V=-np.eye(1), B=np.eye(1))
    >>> asymptotic_mean(ctl, np.eye(1))
    array([1.])
    """
    M = _solvable_mean_matrix(controls, Sigma_star)
    return -np.linalg.solve(M, controls.affine_b)


def bias_for_mean_target(
    controls: Controls, Sigma_star: Any, mu_target: Any, *, allow_unstable: bool = False
) -> np.ndarray:
    r"""The bias :math:`b` that puts the asymptotic mean at ``mu_target``.

    .. math::

        b = -\Big(A + \sum_h V_h + \sum_h V_h\Sigma^*B_h\Big)\,\mu_{\text{target}}

    (minus :math:`Wc` when the controls carry a feed-forward block, so that the total bias is
    right). The covariance equation does not involve :math:`b`, so :math:`\Sigma^*` is unchanged.
    The mean reaches the target only when the matrix is Hurwitz; otherwise the target is a fixed
    point that repels (or is not approached), and the bias is refused unless
    ``allow_unstable=True``.

    Parameters
    ----------
    controls : Controls
        Time-invariant parameters (their own ``b`` is ignored).
    Sigma_star : (d, d) array
        The covariance (an equilibrium), symmetric positive semidefinite.
    mu_target : (d,) array
        The wanted asymptotic mean.
    allow_unstable : bool
        Return the bias even when the mean matrix is not Hurwitz.

    Returns
    -------
    (d,) ndarray
        The bias, to pass as ``Controls(..., b=...)``.

    Raises
    ------
    ValueError
        The matrix is singular (the fixed point is not unique; as :func:`asymptotic_mean`), or not
        Hurwitz and ``allow_unstable`` is False, or bad input (naming the argument).

    Examples
    --------
    >>> from gtcore import Controls, asymptotic_mean, bias_for_mean_target
    >>> ctl = Controls(A=np.eye(1), V=-np.eye(1), B=np.eye(1))
    >>> b = bias_for_mean_target(ctl, np.eye(1), [2.0])
    >>> b, asymptotic_mean(Controls(A=np.eye(1), b=b, V=-np.eye(1), B=np.eye(1)), np.eye(1))
    (array([2.]), array([2.]))
    """
    M = _solvable_mean_matrix(controls, Sigma_star)
    mu = check_vector(mu_target, "mu_target", controls.d)
    if not allow_unstable:
        abscissa = float(np.linalg.eigvals(M).real.max())
        if abscissa >= -1e-12 * max(1.0, float(np.abs(M).max())):
            raise ValueError(
                f"controls: A + V + V Sigma* B is not Hurwitz (largest real part {abscissa:.3g}), so the "
                "mean does not converge to mu_target; pass allow_unstable=True for the bias anyway"
            )
    b = -M @ mu
    W, c = controls.W, controls.c
    if W is not None and c is not None:  # the feed-forward block (U, W, c come together)
        b = b - W @ c
    return b
