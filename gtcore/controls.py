r"""One layer's parameters (the controls) and time-varying controls.

A layer moves a token :math:`x \in \mathbb{R}^d` with the velocity

.. math::

    v[\rho](x) = A x + b + W\,\sigma(U x + c)
        + \sum_{h=1}^{H} V_h \frac{\int y\, e^{y^\top B_h x}\, d\rho(y)}{\int e^{y^\top B_h x}\, d\rho(y)},

self-attention (heads :math:`(V_h, B_h)`) plus a feed-forward layer. The paper's case is
:math:`H = 1` and an affine feed-forward :math:`Ax + b`. The optional block
:math:`W\sigma(Ux + c)` (width ``m``) carries a feed-forward with an activation
:math:`\sigma` chosen by the particle simulator (``ff="identity"`` or ``ff="relu"``).
With the identity activation it is affine and folds into :math:`A, b`
(:attr:`Controls.affine_A`, :attr:`Controls.affine_b`); the moment ODE always uses that fold,
so for ReLU it is the ODE of the identity-activation layer (not a linearisation of the ReLU).

Conventions (fixed here, used everywhere): attention logits are :math:`x_j^\top B x_i` for query
token :math:`i` and key token :math:`j`; softmax over :math:`j`; scale 1.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from gtcore._validation import as_float_array, check_finite
from gtcore.attention import ATTENTION_TYPES, attention_of


def _stacked_heads(x: Any, name: str) -> np.ndarray:
    """A per-head array (a list of equal-shape heads, or one array), a 2-D array as one head."""
    if isinstance(x, (list, tuple)) and len(x) and hasattr(x[0], "shape"):
        shapes = {tuple(np.shape(h)) for h in x}
        if len(shapes) != 1:
            raise ValueError(f"{name}: every head must have the same shape, got {sorted(shapes)}")
    arr = as_float_array(x, name)
    return arr[None] if arr.ndim == 2 else arr


def _heads(x: Any, name: str, d: int | None) -> np.ndarray | None:
    """Attention matrices as an array of shape (H, d, d), or None when absent."""
    if x is None:
        return None
    arr = _stacked_heads(x, name)
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{name} must have shape (d, d) or (H, d, d), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must act on dimension d={d}, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one head")
    check_finite(arr, name)
    return arr


def _infer_dimension(**arrays: Any) -> int:
    for name, x in arrays.items():
        if x is None:
            continue
        arr = as_float_array(x, name)
        if name == "b" and arr.ndim == 1:
            return arr.shape[0]
        if name in ("A", "V", "B", "Q", "K") and arr.ndim >= 2:
            return arr.shape[-1]
        if name == "W" and arr.ndim == 2:
            return arr.shape[0]
        if name == "U" and arr.ndim == 2:
            return arr.shape[1]
    raise ValueError("cannot infer the dimension d: give at least one of A, b, V, B (or U, W)")


def _maps(x: Any, name: str, d: int) -> np.ndarray | None:
    """Per-head query or key maps as an array of shape (H, k, d), or None when absent."""
    if x is None:
        return None
    arr = _stacked_heads(x, name)
    if arr.ndim != 3 or arr.shape[2] != d or arr.shape[1] == 0:
        raise ValueError(f"{name} must have shape (k, {d}) or (H, k, {d}) with k >= 1, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one head")
    check_finite(arr, name)
    return arr


def _query_key(Q: Any, K: Any, B: Any, attention: str, d: int):
    """Validate ``Q, K`` against ``B`` and ``attention``: returns ``(Q, K, B)``, ``B`` from ``Q, K`` when they
    are given."""
    Q_arr, K_arr = _maps(Q, "Q", d), _maps(K, "K", d)
    if (Q_arr is None) != (K_arr is None):
        missing = "K" if K_arr is None else "Q"
        raise ValueError(f"Q and K go together: {missing} is missing")
    if Q_arr is None or K_arr is None:  # both or neither (checked above)
        if attention == "l2":
            raise ValueError("attention='l2' needs Q and K (its logits -||Q x_i - K x_j||^2 are not a function of B)")
        return None, None, B
    if Q_arr.shape != K_arr.shape:
        raise ValueError(f"Q and K must have the same shape (H, k, d), got Q {Q_arr.shape} and K {K_arr.shape}")
    if B is not None:
        raise ValueError("give B or Q and K, not both (B is K^T Q)")
    KtQ = np.swapaxes(K_arr, 1, 2) @ Q_arr
    return Q_arr, K_arr, 2.0 * KtQ if attention == "l2" else KtQ


@dataclass(frozen=True, eq=False)
class Controls:
    r"""The parameters of one layer, validated once.

    Parameters
    ----------
    A : (d, d) array, optional
        Linear part of the affine feed-forward. Zero when omitted.
    b : (d,) array, optional
        Bias of the feed-forward. Zero when omitted.
    V : (d, d) or (H, d, d) array, or a sequence of H (d, d) arrays, optional
        Value matrices, one per head. Zero (attention off) when omitted.
    B : same shapes as ``V``, optional
        Query-key matrices :math:`B_h` (logits :math:`x_j^\top B_h x_i`). Zero when omitted.
        For ``attention="l2"`` it is not an argument: it holds the logits' bilinear part
        :math:`2K_h^\top Q_h` (for reading only; the law is set by ``Q``, ``K``).
    Q, K : (k, d) or (H, k, d) arrays, or sequences of H (k, d) arrays, optional
        Per-head query and key maps. For ``"dot"`` and ``"sinkhorn"`` they stand for
        :math:`B_h = K_h^\top Q_h` (give ``B`` or ``Q, K``, not both); ``"l2"`` needs them
        (logits :math:`-\|Q_hx_i - K_hx_j\|^2`). Kept as ``Q``, ``K`` (None when absent).
    U, W, c : arrays of shapes (m, d), (d, m), (m,), optional
        Optional feed-forward block :math:`W\sigma(Ux + c)`; all three or none.
    attention : str
        The attention type, a name in :data:`gtcore.attention.ATTENTION_TYPES` (default ``"dot"``,
        the paper's logits :math:`x_j^\top B_h x_i`; also ``"l2"`` and ``"sinkhorn"``). One type
        for all heads: mixing types per head is not supported (heads of different types are
        not one ``Controls``).

    Raises
    ------
    ValueError
        Wrong shape, non-finite entries, head counts of ``V`` and ``B`` (or ``Q``, ``K``) that
        differ, an unknown ``attention``, ``B`` together with ``Q, K``, or ``"l2"`` without
        ``Q`` and ``K``; the message names the argument.

    Notes
    -----
    Missing parameters are zero and :math:`d` is inferred from those given. When only one of
    ``V``, ``B`` is given the other is zero with the same number of heads.

    Examples
    --------
    >>> from gtcore import Controls
    >>> ctl = Controls(A=-np.eye(2), V=0.5 * np.eye(2), B=np.eye(2))
    >>> ctl
    Controls(d=2, heads=1)
    >>> ctl.attention_drift(np.eye(2))
    array([[0.5, 0. ],
           [0. , 0.5]])
    """

    A: np.ndarray
    b: np.ndarray
    V: np.ndarray
    B: np.ndarray
    U: np.ndarray | None = None
    W: np.ndarray | None = None
    c: np.ndarray | None = None
    attention: str = "dot"
    Q: np.ndarray | None = None
    K: np.ndarray | None = None
    d: int = field(init=False)

    def __init__(
        self,
        A: Any = None,
        b: Any = None,
        V: Any = None,
        B: Any = None,
        *,
        U: Any = None,
        W: Any = None,
        c: Any = None,
        attention: str = "dot",
        Q: Any = None,
        K: Any = None,
    ) -> None:
        if not isinstance(attention, str):
            raise ValueError(
                f"attention must be one name (mixing types per head is not supported), got {type(attention).__name__}"
            )
        if attention not in ATTENTION_TYPES:
            raise ValueError(f"unknown attention {attention!r}; valid: {', '.join(sorted(ATTENTION_TYPES))}")
        object.__setattr__(self, "attention", attention)
        d = _infer_dimension(A=A, b=b, V=V, B=B, W=W, U=U, Q=Q, K=K)
        if d < 1:
            raise ValueError(f"the dimension d must be at least 1, got d = {d} from the shapes given")
        Q_arr, K_arr, B = _query_key(Q, K, B, attention, d)
        if A is None:
            A_arr = np.zeros((d, d))
        else:
            A_arr = as_float_array(A, "A")
            if A_arr.shape != (d, d):
                raise ValueError(f"A must have shape ({d}, {d}), got shape {A_arr.shape}")
            check_finite(A_arr, "A")
        if b is None:
            b_arr = np.zeros(d)
        else:
            b_arr = as_float_array(b, "b")
            if b_arr.shape != (d,):
                raise ValueError(f"b must have shape ({d},), got shape {b_arr.shape}")
            check_finite(b_arr, "b")
        V_arr = _heads(V, "V", d)
        B_arr = _heads(B, "B", d)
        if V_arr is None:
            V_arr = np.zeros((1, d, d)) if B_arr is None else np.zeros_like(B_arr)
        if B_arr is None:
            B_arr = np.zeros_like(V_arr)
        if V_arr.shape[0] != B_arr.shape[0]:
            raise ValueError(
                f"V and B must have the same number of heads, got V with {V_arr.shape[0]} and B with {B_arr.shape[0]}"
            )
        ff = {"U": U, "W": W, "c": c}
        given = [k for k, v in ff.items() if v is not None]
        if given and len(given) != 3:
            missing = sorted(set(ff) - set(given))
            raise ValueError(f"the feed-forward block needs U, W and c together; missing {missing}")
        U_arr: np.ndarray | None = None
        W_arr: np.ndarray | None = None
        c_arr: np.ndarray | None = None
        if given:
            U_arr = as_float_array(U, "U")
            W_arr = as_float_array(W, "W")
            c_arr = as_float_array(c, "c")
            if U_arr.ndim != 2 or U_arr.shape[1] != d:
                raise ValueError(f"U must have shape (m, {d}), got shape {U_arr.shape}")
            m = U_arr.shape[0]
            if W_arr.shape != (d, m):
                raise ValueError(f"W must have shape ({d}, {m}), got shape {W_arr.shape}")
            if c_arr.shape != (m,):
                raise ValueError(f"c must have shape ({m},), got shape {c_arr.shape}")
            for name, arr in (("U", U_arr), ("W", W_arr), ("c", c_arr)):
                check_finite(arr, name)
        if Q_arr is not None and Q_arr.shape[0] != V_arr.shape[0]:
            raise ValueError(
                f"V and Q, K must have the same number of heads, got V with {V_arr.shape[0]} "
                f"and Q with {Q_arr.shape[0]}"
            )
        for name, value in (
            ("A", A_arr),
            ("b", b_arr),
            ("V", V_arr),
            ("B", B_arr),
            ("U", U_arr),
            ("W", W_arr),
            ("c", c_arr),
            ("Q", Q_arr),
            ("K", K_arr),
        ):
            if value is not None:
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "d", d)

    @property
    def heads(self) -> int:
        """Number of attention heads H."""
        return self.V.shape[0]

    @property
    def has_feedforward(self) -> bool:
        """Whether the block :math:`W\\sigma(Ux + c)` is present."""
        return self.U is not None

    @property
    def affine_A(self) -> np.ndarray:
        """:math:`A + WU`: the linear part of the feed-forward with identity activation."""
        return self.A if self.U is None or self.W is None else self.A + self.W @ self.U

    @property
    def affine_b(self) -> np.ndarray:
        """:math:`b + Wc`: the bias of the feed-forward with identity activation."""
        return self.b if self.U is None or self.W is None or self.c is None else self.b + self.W @ self.c

    def attention_drift(self, Sigma: np.ndarray) -> np.ndarray:
        r""":math:`\sum_h V_h M_h(\Sigma)`, the attention's linear response to a Gaussian (:mod:`gtcore.attention`).

        .. math::

            \sum_{h=1}^H V_h M_h(\Sigma), \qquad M_h(\Sigma) = \Sigma B_h \text{ for dot-product attention},

        where :math:`M_h x + C_h\mu` is head :math:`h`'s attention average against :math:`N(\mu, \Sigma)`
        (:meth:`gtcore.attention.AttentionType.tilt`).

        Parameters
        ----------
        Sigma : (d, d) array
            The covariance of the Gaussian the tokens follow.

        Returns
        -------
        (d, d) ndarray
            The sum over heads of :math:`V_h M_h(\Sigma)`.
        """
        att = attention_of(self)
        return att.linear_part(Sigma, self.V, att.params(self))

    def __call__(self, t: float) -> Controls:
        """Constant controls: the same layer at every time.

        Parameters
        ----------
        t : float
            A time (ignored).

        Returns
        -------
        Controls
            ``self``.
        """
        return self

    def __repr__(self) -> str:
        ff = f", ff width={self.U.shape[0]}" if self.U is not None else ""
        att = f", attention={self.attention!r}" if self.attention != "dot" else ""
        return f"Controls(d={self.d}, heads={self.heads}{ff}{att})"


#: what a function of the core accepts as controls: constant :class:`Controls`, :class:`PiecewiseControls`,
#: or any function of time returning :class:`Controls`
ControlsLike = Union[Controls, "PiecewiseControls", Callable[[float], Controls]]


class PiecewiseControls:
    r"""Controls constant between breaks.

    Parameters
    ----------
    breaks : sequence of floats, strictly increasing
        Either the K+1 boundaries :math:`t_0 < \dots < t_K` of K pieces (piece k holds on
        :math:`[t_k, t_{k+1})`; before :math:`t_0` the first piece, after :math:`t_K` the last),
        or the K-1 interior breaks of K pieces covering the whole real line.
    pieces : sequence of K :class:`Controls` of one dimension
        The layer on each piece.

    Attributes
    ----------
    breaks : tuple of float
        The K-1 interior breaks.
    pieces : tuple of Controls
        The K pieces.
    span : (float, float) or None
        :math:`(t_0, t_K)` when the K+1 boundaries were given, else None.
    d : int
        The dimension of the tokens.

    Raises
    ------
    ValueError
        No pieces, a piece that is not a :class:`Controls`, pieces of different dimensions, breaks
        that are not finite and strictly increasing, or a number of breaks that is neither K+1 nor K-1.

    Notes
    -----
    At a break the piece on the right applies. :func:`gtcore.moments.integrate_moments` integrates
    piece by piece, so breaks are honoured exactly.

    Examples
    --------
    >>> from gtcore import Controls, PiecewiseControls
    >>> pc = PiecewiseControls([0.0, 1.0, 2.0], [Controls(A=-np.eye(2)), Controls(A=np.eye(2))])
    >>> float(pc(0.5).A[0, 0]), float(pc(1.0).A[0, 0])  # the piece on the right holds at a break
    (-1.0, 1.0)
    """

    def __init__(self, breaks: Sequence[float] | np.ndarray, pieces: Sequence[Controls]) -> None:
        pieces = list(pieces)
        if not pieces:
            raise ValueError("pieces must hold at least one Controls")
        for k, p in enumerate(pieces):
            if not isinstance(p, Controls):
                raise ValueError(f"pieces[{k}] must be a Controls, got {type(p).__name__}")
        dims = {p.d for p in pieces}
        if len(dims) != 1:
            raise ValueError(f"pieces must share one dimension d, got {sorted(dims)}")
        br = as_float_array(breaks, "breaks")
        if br.ndim != 1:
            raise ValueError(f"breaks must be a 1-D sequence, got shape {br.shape}")
        check_finite(br, "breaks")
        if np.any(np.diff(br) <= 0):
            raise ValueError("breaks must be strictly increasing")
        K = len(pieces)
        if br.size == K + 1:
            interior = br[1:-1]
            self.span: tuple[float, float] | None = (float(br[0]), float(br[-1]))
        elif br.size == K - 1:
            interior = br
            self.span = None
        else:
            raise ValueError(
                f"breaks must hold len(pieces)+1 boundaries or len(pieces)-1 interior breaks: "
                f"got {br.size} breaks for {K} pieces"
            )
        self.breaks = tuple(float(t) for t in interior)
        self.pieces = tuple(pieces)
        self.d = pieces[0].d

    def __call__(self, t: float) -> Controls:
        r"""The piece that holds at time ``t`` (the piece on the right at a break).

        Parameters
        ----------
        t : float
            The time.

        Returns
        -------
        Controls
            Piece :math:`k` with :math:`t_k \le t < t_{k+1}` (the first piece before the first break,
            the last after the last).
        """
        return self.pieces[bisect.bisect_right(self.breaks, float(t))]

    def __repr__(self) -> str:
        return f"PiecewiseControls(d={self.d}, pieces={len(self.pieces)}, breaks={self.breaks})"


def control_breaks(controls: ControlsLike) -> tuple[float, ...]:
    """The times at which ``controls`` may jump: a ``breaks`` attribute, or none.

    Parameters
    ----------
    controls : ControlsLike
        Constant, piecewise or callable controls.

    Returns
    -------
    tuple of float
        The ``breaks`` of ``controls`` (a :class:`PiecewiseControls` or any object with that
        attribute); empty for constant :class:`Controls` and plain functions.
    """
    if isinstance(controls, Controls):
        return ()
    return tuple(float(t) for t in getattr(controls, "breaks", ()))


def as_control_function(
    controls: ControlsLike, d: int | None = None, name: str = "controls", state_name: str = "the state"
) -> Callable[[float], Controls]:
    """Return ``t -> Controls`` for constant, piecewise or callable controls, checking ``d``.

    Parameters
    ----------
    controls : ControlsLike
        Constant :class:`Controls`, :class:`PiecewiseControls` or any callable ``t -> Controls``.
    d : int, optional
        The dimension the controls must act on (checked when ``controls`` says its ``d``).
    name : str
        The argument's name, for the error message.
    state_name : str
        What has dimension ``d``, for the error message.

    Returns
    -------
    callable
        ``t -> Controls`` (constant :class:`Controls` are returned as they are: they are callable).

    Raises
    ------
    ValueError
        ``controls`` is not callable, or acts on a dimension other than ``d``.
    """
    if isinstance(controls, Controls):
        if d is not None and controls.d != d:
            raise ValueError(f"{name} act on dimension d={controls.d}, but {state_name} has d={d}")
        return controls
    if not callable(controls):
        raise ValueError(
            f"{name} must be a Controls, a PiecewiseControls or a callable t -> Controls, got {type(controls).__name__}"
        )
    cd = getattr(controls, "d", None)
    if d is not None and cd is not None and cd != d:
        raise ValueError(f"{name} act on dimension d={cd}, but {state_name} has d={d}")
    return controls


def evaluate_controls(
    fn: Callable[[float], Controls], t: float, name: str = "controls", d: int | None = None
) -> Controls:
    """Call a control function and check that it returned a :class:`Controls` (of dimension ``d``).

    Parameters
    ----------
    fn : callable
        ``t -> Controls``.
    t : float
        The time at which to evaluate it.
    name : str
        The function's name, for the error message.
    d : int, optional
        The dimension the returned controls must have.

    Returns
    -------
    Controls
        ``fn(t)``.

    Raises
    ------
    ValueError
        ``fn(t)`` is not a :class:`Controls`, or has a dimension other than ``d``.
    """
    c = fn(t)
    if not isinstance(c, Controls):
        raise ValueError(f"{name}({t}) must return a Controls, got {type(c).__name__}")
    if d is not None and c.d != d:
        raise ValueError(f"{name}({t}) returned Controls of dimension d={c.d}, expected d={d}")
    return c
