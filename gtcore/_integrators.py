r"""The fixed-step explicit integrators of :func:`gtcore.particles.simulate` (one registry, by name).

Each method advances a state :math:`x` (a tensor or array) by one step :math:`h` of :math:`\dot x = f(t, x)`;
explicit Euler with ``steps = L`` *is* an L-layer residual Transformer :math:`x \mapsto x + h\,v(x)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

State = Any
VelocityFn = Callable[[float, State], State]


class FixedStepMethod:
    """A fixed-step explicit integrator: one ``step`` from ``(t, x)`` to ``t + h``."""

    order: int = 0

    def step(self, f: VelocityFn, t: float, x: State, h: float) -> State:  # pragma: no cover
        """One step of the method.

        Parameters
        ----------
        f : callable ``f(t, x) -> velocity``
            The velocity field.
        t : float
            The time at the start of the step.
        x : (N, d) tensor
            The state at ``t``.
        h : float
            The step size.

        Returns
        -------
        (N, d) tensor
            The state at ``t + h``.
        """
        raise AttributeError("subclasses define step")


class Euler(FixedStepMethod):
    r"""Explicit Euler, :math:`x_{k+1} = x_k + h f(t_k, x_k)`: one residual layer per step."""

    order = 1

    def step(self, f, t, x, h):
        return x + h * f(t, x)


class Midpoint(FixedStepMethod):
    r"""Explicit midpoint, :math:`x_{k+1} = x_k + h f(t_k + h/2, x_k + \tfrac h2 f(t_k, x_k))`."""

    order = 2

    def step(self, f, t, x, h):
        return x + h * f(t + h / 2, x + h / 2 * f(t, x))


class RK4(FixedStepMethod):
    """The classical fourth-order Runge–Kutta method."""

    order = 4

    def step(self, f, t, x, h):
        k1 = f(t, x)
        k2 = f(t + h / 2, x + h / 2 * k1)
        k3 = f(t + h / 2, x + h / 2 * k2)
        k4 = f(t + h, x + h * k3)
        return x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


#: the one registry of integrators, by name
SOLVERS: dict[str, type[FixedStepMethod]] = {"euler": Euler, "midpoint": Midpoint, "rk4": RK4}
