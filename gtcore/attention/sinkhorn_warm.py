r"""Warm starts of Sinkhorn scaling for loops that move tokens a little between calls (torch-free at import).

``warm_starts`` opens a scope (a context variable: per thread, per task) in which
:func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_potentials` and
:func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_average` start each uniform-weight scaling from the last one
of the same problem (:class:`WarmStarts`); :func:`gtcore.particles.simulate` opens one per run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["WarmStarts", "warm_starts"]


class WarmStarts:
    r"""Each scaling started from the last one's potential on the same problem, moved with the tokens
    (active inside ``warm_starts``; :func:`gtcore.particles.simulate` opens one per run).

    Between two calls of an integrator the tokens move by :math:`O(h)`. Write the last scaling's column
    potential as the Gaussian one of its cloud plus a remainder, :math:`g = g_{\mathcal N} + r`
    (:math:`g_{\mathcal N}`: :func:`~gtcore.attention.sinkhorn.gaussian_column_potential` at the cloud's
    empirical moments); the remainder (the sampling fluctuation, :math:`O(N^{-1/2})`) belongs to the tokens
    and changes by :math:`O(h)` with them, so the next scaling of the same problem (the same :math:`B`, the
    same number of tokens, uniform weights, dtype and device) starts from the new cloud's Gaussian potential
    plus the old remainder, token by token. The answer is certified to the same ``tol`` as from any start
    (:func:`~gtcore.attention.sinkhorn_scaling.sinkhorn_potentials`); only the number of iterations changes.
    A scaling with ``init`` other than ``"gaussian"`` or with weights is not touched.

    Attributes
    ----------
    iterations : list of int
        The row updates of every scaling started here, in order.
    """

    def __init__(self) -> None:
        self._last: dict[tuple, torch.Tensor] = {}
        self.iterations: list[int] = []

    @staticmethod
    def _key(x: torch.Tensor, B: torch.Tensor) -> tuple:
        return (x.shape, x.dtype, str(x.device), B.detach().cpu().double().numpy().tobytes())

    def start(self, x: torch.Tensor, B: torch.Tensor, gauss: torch.Tensor) -> torch.Tensor:
        """The start of a scaling: ``gauss`` plus the remainder of the last scaling of the same problem.

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        B : (d, d) tensor
            The query-key matrix.
        gauss : (N,) tensor
            The Gaussian column potential of ``x``.

        Returns
        -------
        (N,) tensor
            The starting column potential.
        """
        last = self._last.get(self._key(x, B))
        return gauss if last is None else gauss + last

    def record(self, x: torch.Tensor, B: torch.Tensor, gauss: torch.Tensor, res: Any) -> None:
        """Keep the remainder :math:`g - g_{\\mathcal N}` of a finished scaling, and its row updates.

        Parameters
        ----------
        x : (N, d) tensor
            The tokens.
        B : (d, d) tensor
            The query-key matrix.
        gauss : (N,) tensor
            The Gaussian column potential of ``x``.
        res : SinkhornResult
            The scaling (:class:`~gtcore.attention.sinkhorn_scaling.SinkhornResult`).
        """
        self._last[self._key(x, B)] = res.g - gauss
        self.iterations.append(res.iterations)


_WARM: ContextVar[WarmStarts | None] = ContextVar("gtcore_sinkhorn_warm_starts", default=None)


@contextmanager
def warm_starts() -> Iterator[WarmStarts]:
    r"""Within the block, every Sinkhorn scaling with uniform weights and the Gaussian start starts from the last
    scaling of the same problem (:class:`WarmStarts`): for a loop that moves tokens a little between calls.

    Yields
    ------
    WarmStarts
        The record of the block's scalings (its ``iterations``).
    """
    token = _WARM.set(WarmStarts())
    try:
        yield _WARM.get()  # type: ignore[misc]  # set just above
    finally:
        _WARM.reset(token)
