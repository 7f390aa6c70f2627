r"""The two sides of a study's comparison, traced where the study computes them (:mod:`gtbook.sides`).

A study that computes both sides of a ``reproduces`` claim inside one call (tokens moved by
:func:`gtcore.particles.simulate` and the moment ODE they are compared with, a trained network and the noise
floor of its target) marks each part where it runs::

    with collect() as sides:                      # what every marked part inside records
        for s in range(seeds):
            with observed():
                tr = simulate(x0, controls, t_span, steps)
            with predicted():
                ode = integrate_moments(tr.mu[0], tr.Sigma[0], controls, t_span)
            errors[s] = distance(tr, ode)          # the comparison: traced on neither side
    return Result(..., sides=sides)

and returns the :class:`Sides` in its result; the chapter passes them to
:func:`gtbook.claims.claim` (``sides=result.sides``), which refuses the claim when both sides ran the same
model code (:func:`gtbook.sides.shared_code`).

What goes where. *Observed*: the system the statement is checked on, from its input to its output (the token
flow, the training and the trained network on its test inputs). *Predicted*: what the statement predicts, from
the same input (eq. (1.1), the exact layer maps, a closed form) or, for a claim against a noise floor, the
statistic's law under the prediction (Gaussian samples and the statistic on them: the whole floor). The
statistic applied to the observed output is the comparison, as a norm of the difference is, and is traced on
neither side; what the observed system runs to produce its output (a training loss, say) is traced with it, so
a noise floor that runs the same code is refused.

:func:`observed` and :func:`predicted` record into every :func:`collect` block active in this thread (nested
blocks all receive the functions, so an outer block collects what an inner study records); outside any block
they do nothing and cost nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import NamedTuple

from gtbook.sides import Side, side

__all__ = ["Sides", "collect", "merge", "no_prediction", "observed", "predicted"]


class Sides(NamedTuple):
    """The observed and the predicted side of a comparison (a tuple: ``claim(..., sides=sides)``)."""

    observed: Side
    predicted: Side

    @classmethod
    def empty(cls) -> Sides:
        """Two sides that recorded nothing yet."""
        return cls(Side("observed"), Side("predicted"))

    def with_prediction(self, other: Sides) -> Sides:
        """This observed side with ``other``'s predicted side (an observation against another study's floor)."""
        return Sides(self.observed, other.predicted)

    def __repr__(self) -> str:
        return (
            f"Sides(observed: {len(self.observed.model_functions())} functions, "
            f"predicted: {len(self.predicted.model_functions())} functions)"
        )


def merge(*pairs: Sides) -> Sides:
    """One :class:`Sides` with every function the ``pairs`` recorded on each side."""
    out = Sides.empty()
    for p in pairs:
        out.observed.functions.update(p.observed.functions)
        out.predicted.functions.update(p.predicted.functions)
    return out


def no_prediction(observed_side: Sides | Side) -> Sides:
    r"""An observation against a prediction that runs no library code (a rate such as :math:`N^{-1/2}`, a sign):
    the observed side of ``observed_side`` and an empty predicted side."""
    obs = observed_side.observed if isinstance(observed_side, Sides) else observed_side
    return Sides(obs, Side("predicted"))


_ACTIVE: contextvars.ContextVar[tuple[Sides, ...]] = contextvars.ContextVar("gtbook_traced_sides", default=())


@contextmanager
def collect() -> Iterator[Sides]:
    """Collect what :func:`observed` and :func:`predicted` record inside the block (module docstring)."""
    out = Sides.empty()
    token = _ACTIVE.set((*_ACTIVE.get(), out))
    try:
        yield out
    finally:
        _ACTIVE.reset(token)


@contextmanager
def _record(which: str) -> Iterator[None]:
    active = _ACTIVE.get()
    if not active:
        yield
        return
    with side(which) as s:
        yield
    for pair in active:
        getattr(pair, which).functions.update(s.functions)


def observed() -> AbstractContextManager[None]:
    """Record the ``gtcore`` functions the block runs on the observed side of every active :func:`collect`."""
    return _record("observed")


def predicted() -> AbstractContextManager[None]:
    """Record the ``gtcore`` functions the block runs on the predicted side of every active :func:`collect`."""
    return _record("predicted")
