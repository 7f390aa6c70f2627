r"""Constant controls: equilibria, linearised stability, regime classification, the asymptotic mean.

With time-invariant parameters the covariance obeys the matrix Riccati-type equation (eq. 1.1)

.. math::

    \Sigma' = F(\Sigma) := A\Sigma + \Sigma A^\top
        + \sum_h \big(V_h \Sigma B_h \Sigma + \Sigma B_h^\top \Sigma V_h^\top\big),

whose equilibria solve the algebraic Bernoulli equation :math:`F(\Sigma^*) = 0` (no constant term).

**The linearisable case** :math:`V_h = v_hI` (the precision :math:`P = \Sigma^{-1}` solves a linear
Lyapunov equation; closed-form blow-up time :math:`t^*` and critical gain) is
:mod:`gtcore.riccati`. The attention enters through :func:`gtcore.attention.gaussian_velocity`.

Facts used by :func:`classify` (all for :math:`V_h = v_h I`; they are checked numerically in the
tests and in the book's chapter 4):

* the equilibria with :math:`\Sigma^* \succ 0` are :math:`\Sigma^* = (P^*)^{-1}` with
  :math:`P^*A + A^\top P^* = -Q`; the linearisation at :math:`\Sigma^*` has eigenvalues
  :math:`-(\lambda_i + \lambda_j)`, :math:`\lambda_i \in \operatorname{spec}(A)`, so
  :math:`\Sigma^*` attracts iff :math:`A` is anti-stable (:math:`\operatorname{Re}\lambda > 0`);
  with :math:`Q \prec 0` (e.g. :math:`v < 0` and :math:`B + B^\top \succ 0`: opposite
  definiteness) :math:`P^* \succ 0` exists and every trajectory from :math:`\Sigma_0 \succ 0`
  converges to it;
* with :math:`A` Hurwitz, :math:`Y(t) \to Y_\infty` and :math:`\Sigma(t) \to 0` when
  :math:`I - K Y_\infty K \succ 0` (always when :math:`Q \preceq 0`), otherwise :math:`\Sigma`
  blows up in finite time;
* with :math:`Q \succeq 0` (same definiteness) :math:`g` is non-increasing, and with :math:`A`
  anti-stable and :math:`Q \succ 0` blow-up is certain;
* at any equilibrium :math:`M^* = A + \sum_h V_h\Sigma^*B_h` satisfies
  :math:`M^*\Sigma^* + \Sigma^* M^{*\top} = 0`, so :math:`M^*\Sigma^*` is skew and
  :math:`M^*` has purely imaginary spectrum: the mean's rate comes from :math:`\sum_h V_h`.

Modules: :mod:`~gtcore.stability.equilibria` (equilibria and linear stability),
:mod:`~gtcore.stability.regimes` (:func:`classify` and the observed regimes) and
:mod:`~gtcore.stability.mean` (the asymptotic mean and the bias that steers it).

References
----------
Alcalde, Ji, Zuazua (2026), *Reachability and asymptotics of Gaussian Transformer dynamics*,
arXiv:2606.07600, eq. (1.1) and the asymptotic results (stabilising and destabilising regimes).
"""

from __future__ import annotations

from gtcore.stability.equilibria import (
    ROOT_UNCERTAINTY_RATIO,
    Equilibrium,
    LinearStability,
    NoEquilibriumError,
    equilibrium,
    linear_stability,
)
from gtcore.stability.mean import asymptotic_mean, bias_for_mean_target, mean_matrix
from gtcore.stability.regimes import (
    VERDICTS,
    Regime,
    classify,
    observe_regime,
    observe_regimes,
)

__all__ = [
    "ROOT_UNCERTAINTY_RATIO",
    "VERDICTS",
    "Equilibrium",
    "LinearStability",
    "NoEquilibriumError",
    "Regime",
    "asymptotic_mean",
    "bias_for_mean_target",
    "classify",
    "equilibrium",
    "linear_stability",
    "mean_matrix",
    "observe_regime",
    "observe_regimes",
]
