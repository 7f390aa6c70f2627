r"""The scope of a claim read off the layers it ran on: the structure class of each parameter, the
dimensions, heads and attention types (:class:`gtbook.scope.Scope`).

A claim's scope is the narrowest description that is true of every layer it covers. Rather than typing the
classes by hand, a chapter passes the layers (``gtcore.Controls``) and :func:`layer_scope` reads them:

* :math:`A`: **zero** (:math:`A = 0`), **scalar** (:math:`A = aI`), **normal** (:math:`AA^\top = A^\top A`, e.g.
  skew or symmetric), else **general**;
* :math:`B_h` and :math:`V_h`: **zero**, **scalar** (:math:`cI`), **symmetric**, else **general** (for L2
  attention :math:`B_h` is the logits' bilinear part :math:`2K_h^\top Q_h`, as ``gtcore.Controls`` keeps it);

each up to a relative tolerance (``tol``, default :math:`10^{-12}` of the matrix's norm), and over several heads
and layers the widest class met. The dimensions are the set of the layers' :math:`d`, the heads the largest
count, the attention types the set of the layers' types.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gtcore.controls import Controls

__all__ = ["CLASSES", "layer_scope", "matrix_class"]

#: each parameter's structure classes, narrowest first: those of :data:`gtbook.scope.CLASSES` (the studies sit
#: below the book's machinery and do not import it; ``tests/studies/test_scoping.py`` checks that the two agree)
CLASSES: dict[str, tuple[str, ...]] = {
    "A": ("zero", "scalar", "normal", "general"),
    "B": ("zero", "scalar", "symmetric", "general"),
    "V": ("zero", "scalar", "symmetric", "general"),
}


def matrix_class(M: Any, param: str, tol: float = 1e-12) -> str:
    r"""The narrowest structure class of one square matrix (module docstring).

    Parameters
    ----------
    M : (d, d) array
    param : str
        ``"A"`` (classes zero, scalar, normal, general) or ``"B"``/``"V"`` (zero, scalar, symmetric, general).
    tol : float
        Relative tolerance: a defect below ``tol`` times :math:`\max(1, \|M\|_F)` counts as zero.

    Returns
    -------
    str
        One of :data:`CLASSES` ``[param]``.
    """
    if param not in CLASSES:
        raise ValueError(f"param must be one of {', '.join(CLASSES)}, got {param!r}")
    M = np.asarray(M, float)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be a square matrix, got shape {M.shape}")
    eps = tol * max(1.0, float(np.linalg.norm(M)))
    if np.linalg.norm(M) <= eps:
        return "zero"
    c = np.trace(M) / M.shape[0]
    if np.linalg.norm(M - c * np.eye(M.shape[0])) <= eps:
        return "scalar"
    if param == "A":
        return "normal" if np.linalg.norm(M @ M.T - M.T @ M) <= eps * max(1.0, float(np.linalg.norm(M))) else "general"
    return "symmetric" if np.linalg.norm(M - M.T) <= eps else "general"


def _widest(param: str, classes: Iterable[str]) -> str:
    order = CLASSES[param]
    return order[max(order.index(c) for c in classes)]


def layer_scope(
    layers: Iterable[Controls],
    *,
    system: str,
    attention: Iterable[str] | None = None,
    family: str = "",
    tol: float = 1e-12,
) -> dict[str, Any]:
    r"""The scope (a mapping for ``gtbook.claim``'s ``scope=``) that covers every layer of ``layers``.

    Parameters
    ----------
    layers : iterable of Controls
        The layers the claim ran on (at least one).
    system : str
        What produced the claim's observed side (``"tokens"``, ``"moment ODE"``, ...: :class:`gtbook.scope.System`).
    attention : iterable of str, optional
        The attention types to record; by default the layers' own (``gtcore.Controls.attention``).
    family : str
        A special family the claim is restricted to ("" when none).
    tol : float
        Passed to :func:`matrix_class`.

    Returns
    -------
    dict
        ``system``, ``d`` (tuple), ``A``, ``B``, ``V`` (the widest class met), ``heads`` (the most heads),
        ``attention`` (tuple, sorted) and ``family`` when given.
    """
    layers = list(layers)
    if not layers:
        raise ValueError("layers must hold at least one Controls")
    if any(not isinstance(c, Controls) for c in layers):
        raise ValueError("layers must be Controls")
    out: dict[str, Any] = {
        "system": system,
        "d": tuple(sorted({c.d for c in layers})),
        "A": _widest("A", (matrix_class(c.affine_A, "A", tol) for c in layers)),
        "B": _widest("B", (matrix_class(B, "B", tol) for c in layers for B in c.B)),
        "V": _widest("V", (matrix_class(V, "V", tol) for c in layers for V in c.V)),
        "heads": max(c.heads for c in layers),
        "attention": tuple(sorted(set(attention) if attention is not None else {c.attention for c in layers})),
    }
    if family:
        out["family"] = family
    return out
