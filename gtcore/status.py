r"""The one vocabulary of outcomes: integrator statuses and classifier verdicts, as enums.

Every integrator of the core reports a :class:`Status` (:func:`gtcore.moments.integrate_moments`,
:func:`gtcore.moments.integrate_moments_lanes`, :func:`gtcore.moments.lanes.integrate_lanes`,
:func:`gtcore.moments.layer_stack`, :func:`gtcore.particles.simulate`); every classifier a :class:`Verdict`
(:func:`gtcore.stability.classify`, :func:`gtcore.stability.observe_regime`, :func:`gtcore.riccati.blowup_time`) or,
for the linearisation at an equilibrium, a :class:`Stability` (:func:`gtcore.stability.linear_stability`).

The members are strings (``class Status(str, Enum)``, which Python 3.10 supports, rather than the
string enum of Python 3.11): ``Status.BLOWUP == "blowup"`` is true, a member hashes as its value (so it finds the
same key in a dict of strings), and ``str()`` and f-strings give the value on every Python version.
Compare with the members (``traj.status is Status.BLOWUP`` or ``== Status.BLOWUP``); the string
comparisons written before the enums existed keep working.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Stability", "Status", "Verdict", "Vocabulary"]


class Vocabulary(str, Enum):
    """A string-valued enum whose ``str()`` and ``format()`` are its value on every Python version."""

    __hash__ = str.__hash__  # a member finds its value's key in a dict of strings

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Status(Vocabulary):
    r"""How an integration ended.

    ``COMPLETED``: the end of the time span (or of the layers) was reached. ``BLOWUP``:
    :math:`\|\Sigma\|_F` or :math:`\|\mu\|_2` crossed ``blowup_norm`` (or overflowed); the arrays end
    there. ``BUDGET``: the evaluation budget (``max_nfev``) ran out first. ``FAILED``: the solver gave
    up (step too small). ``STOPPED``: the stop condition of :func:`gtcore.moments.lanes.integrate_lanes`
    fired (the moment lanes report it as ``BLOWUP``, the condition they use).

    Examples
    --------
    >>> from gtcore import Status
    >>> Status.BLOWUP == 'blowup', [s.value for s in Status]
    (True, ['completed', 'blowup', 'budget', 'failed', 'stopped'])
    """

    COMPLETED = "completed"
    BLOWUP = "blowup"
    BUDGET = "budget"
    FAILED = "failed"
    STOPPED = "stopped"


class Verdict(Vocabulary):
    r"""The long-time fate of the covariance :math:`\Sigma(t)` of the moment ODE.

    ``CONVERGES`` to a positive-definite :math:`\Sigma^*`; ``COLLAPSES`` to 0; ``BLOWS_UP``: a pole at a
    finite :math:`t^*`, certified (:func:`gtcore.riccati.blowup_time` says how); ``GROWS_EXPONENTIALLY``:
    unbounded, with a proof that there is no pole (:math:`\|\Sigma(t)\|` is bounded by an exponential);
    ``NO_BLOWUP``: no pole, proved (used by :func:`gtcore.riccati.blowup_time`, which does not decide between
    convergence, collapse and growth); ``UNDETERMINED``: none of these is established.

    Examples
    --------
    >>> from gtcore import Verdict
    >>> [v.value for v in Verdict]
    ['converges', 'collapses to 0', 'blows up', 'grows exponentially', 'no blow-up', 'undetermined']
    """

    CONVERGES = "converges"
    COLLAPSES = "collapses to 0"
    BLOWS_UP = "blows up"
    GROWS_EXPONENTIALLY = "grows exponentially"
    NO_BLOWUP = "no blow-up"
    UNDETERMINED = "undetermined"


class Stability(Vocabulary):
    """The linearisation at an equilibrium: largest real part below, above or at 0 (to round-off).

    Examples
    --------
    >>> from gtcore import Stability
    >>> [s.value for s in Stability]
    ['stable', 'unstable', 'marginal']
    """

    STABLE = "stable"
    UNSTABLE = "unstable"
    MARGINAL = "marginal"
