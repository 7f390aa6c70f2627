r"""Seeded random layers: the peers' experiment and the ensembles over the paper's sign conditions.

Every draw is a :class:`~gtbook.studies.atlas.draws.Draw`: a small, picklable record (ensemble, attention type,
dimension, seed, index) from which :func:`draw_controls` rebuilds the layer and its :math:`\Sigma_0` exactly,
with its own generator: a draw does not depend on which other draws are computed with it, in which chunk or on
which machine.

**The peers' experiment** (``ensemble="peer"``; Castin, Rouzé, Ablin, Peyré, Kim 2025): :math:`Q \in
\mathbb{R}^{\lfloor d/2\rfloor \times d}` with i.i.d. :math:`N(0, 1)` entries, :math:`K = -Q`, their
logits scaled by :math:`1/\sqrt d` (this book's ``Q/sqrt(d)``, ``K``), :math:`A = 0`, zero mean, and
:math:`V = I` (``variant="identity"``) or :math:`V = M^\top M`, :math:`M` i.i.d. :math:`N(0, 1)`
(``variant="wishart"``); softmax (``"dot"``) or L2 attention. :math:`\Sigma_0 = I` (the peers'
initial covariance is not part of the description we have; for :math:`V = I` the rank of the
limit does not depend on it, see :mod:`~gtbook.studies.atlas.peer`).

**The condition ensembles** (``ensemble="conditions"``): :math:`A = G/\sqrt d + sI` (Ginibre
:math:`G`, spectral shift :math:`s \sim U[-1.5, 1.5]`), and per head a value matrix from
``V_KINDS`` (scalar :math:`vI`, :math:`v \sim U[-1.5, 1.5]`; Wishart :math:`\pm WW^\top/(2d)`,
:math:`W \in \mathbb{R}^{d\times 2d}`; GOE :math:`(G + G^\top)/(2\sqrt d)`) and a bilinear part from
``B_KINDS`` (Wishart :math:`\pm`, GOE, and non-symmetric Ginibre :math:`G/\sqrt d`), each kind with
equal probability, signs with equal probability; :math:`\Sigma_0 = WW^\top/(2d)`. Attention
``"dot"`` (one head), ``"multihead"`` (two dot-product heads drawn independently), ``"l2"`` (one
head, :math:`K = I + G/(2\sqrt d)` invertible and :math:`Q = K^{-\top}B/2`, so that the logits'
bilinear part :math:`2K^\top Q` is the drawn :math:`B`), ``"sinkhorn"`` (one head, the drawn
:math:`B`).

**Targeted draws** (``variant="stab"`` or ``"blow"``, dot product, one or two heads): built to satisfy
a condition, so that the claims about the conditions have draws to test: :math:`A = G/\sqrt d + sI`
with :math:`s \sim U[1.1, 2]` (anti-stable in most draws; :func:`conditions` checks), per head
:math:`V_h` scalar (:math:`\pm uI`, :math:`u \sim U[0.3, 1.5]`) or :math:`\pm` Wishart with equal
probability, and :math:`B_h = \mp W W^\top/(2d) + (G - G^\top)/(2\sqrt d)` (a definite symmetric part of
the sign the condition asks for, and a non-symmetric part).
"""

from __future__ import annotations

import math

import numpy as np

from gtbook.studies.atlas.draws import Draw
from gtbook.studies.atlas.maps import map_controls
from gtcore._linalg import psd_sqrt  # noqa: F401  (re-exported for the figures)
from gtcore.controls import Controls
from gtcore.riccati import _definiteness, _spectrum_class

__all__ = [
    "ATTENTIONS",
    "B_KINDS",
    "V_KINDS",
    "Draw",
    "conditions",
    "draw_controls",
    "ensemble_draws",
    "peer_draws",
    "targeted_draws",
]

#: the attention types of the condition ensembles
ATTENTIONS = ("dot", "multihead", "l2", "sinkhorn")
V_KINDS = ("scalar", "wishart", "goe")
B_KINDS = ("wishart", "goe", "ginibre")


def peer_draws(ds, n, *, seed: int = 0) -> list[Draw]:
    """The peers' experiment: every (attention, V, d) with ``n`` draws each, attention "dot" and "l2"."""
    return [
        Draw("peer", att, int(d), i, seed, var)
        for att in ("dot", "l2")
        for var in ("identity", "wishart")
        for d in ds
        for i in range(n)
    ]


def targeted_draws(ds, n, *, seed: int = 0, attentions=("dot", "multihead")) -> list[Draw]:
    """``n`` draws per (attention, d) and per condition ("stab", "blow") built to satisfy it (module docstring)."""
    return [
        Draw("conditions", att, int(d), i, seed, cond)
        for cond in ("stab", "blow")
        for att in attentions
        for d in ds
        for i in range(n)
    ]


def ensemble_draws(ds, n, *, seed: int = 0, attentions=ATTENTIONS) -> list[Draw]:
    """``n`` condition-ensemble draws for every attention type and dimension."""
    return [Draw("conditions", att, int(d), i, seed) for att in attentions for d in ds for i in range(n)]


def _wishart(rng, d, sign=1.0):
    W = rng.standard_normal((d, 2 * d))
    return sign * W @ W.T / (2 * d)


def _value(rng, d, kind):
    if kind == "scalar":
        return rng.uniform(-1.5, 1.5) * np.eye(d)
    if kind == "wishart":
        return _wishart(rng, d, rng.choice([-1.0, 1.0]))
    G = rng.standard_normal((d, d))
    return (G + G.T) / (2 * math.sqrt(d))


def _bilinear(rng, d, kind):
    if kind == "wishart":
        return _wishart(rng, d, rng.choice([-1.0, 1.0]))
    G = rng.standard_normal((d, d))
    if kind == "goe":
        return (G + G.T) / (2 * math.sqrt(d))
    return G / math.sqrt(d)


def draw_controls(draw: Draw) -> tuple[Controls, np.ndarray, dict]:
    """The layer, :math:`\\Sigma_0` and a description (kinds, shift) of ``draw``; deterministic."""
    rng, d = draw.rng(), draw.d
    if draw.ensemble == "peer":
        r = d // 2
        Q = rng.standard_normal((r, d))
        if draw.variant == "identity":
            V = np.eye(d)
        elif draw.variant == "wishart":
            M = rng.standard_normal((d, d))
            V = M.T @ M
        else:
            raise ValueError(f"peer draws need variant 'identity' or 'wishart', got {draw.variant!r}")
        att = draw.attention
        if att not in ("dot", "l2"):
            raise ValueError(f"the peer ensemble has attention 'dot' or 'l2', got {att!r}")
        ctl = Controls(V=V, Q=Q / math.sqrt(d), K=-Q, attention=att)
        return ctl, np.eye(d), {"v_kind": draw.variant, "b_kind": "-QtQ", "shift": 0.0, "rank_Q": r}
    if draw.ensemble == "map":
        return map_controls(draw)
    heads = 2 if draw.attention == "multihead" else 1
    if draw.variant in ("stab", "blow"):
        return _targeted(rng, d, heads, draw.variant)
    A = rng.standard_normal((d, d)) / math.sqrt(d)
    shift = float(rng.uniform(-1.5, 1.5))
    A = A + shift * np.eye(d)
    v_kinds = [V_KINDS[rng.integers(3)] for _ in range(heads)]
    b_kinds = [B_KINDS[rng.integers(3)] for _ in range(heads)]
    Vs = [_value(rng, d, k) for k in v_kinds]
    Bs = [_bilinear(rng, d, k) for k in b_kinds]
    S0 = _wishart(rng, d)
    info = {"v_kind": "+".join(v_kinds), "b_kind": "+".join(b_kinds), "shift": shift}
    if draw.attention == "l2":
        K = np.eye(d) + rng.standard_normal((d, d)) / (2 * math.sqrt(d))
        Q = np.linalg.solve(K.T, Bs[0]) / 2.0
        ctl = Controls(A=A, V=Vs[0], Q=Q, K=K, attention="l2")
    elif draw.attention == "sinkhorn":
        ctl = Controls(A=A, V=Vs[0], B=Bs[0], attention="sinkhorn")
    else:
        ctl = Controls(A=A, V=Vs, B=Bs)
    return ctl, S0, info


def _targeted(rng, d, heads, cond):
    """A layer built to satisfy the stabilising (``"stab"``) or destabilising (``"blow"``) condition."""
    A = rng.standard_normal((d, d)) / math.sqrt(d) + rng.uniform(1.1, 2.0) * np.eye(d)
    shift = float(np.linalg.eigvals(A).real.min())
    v_kinds, Vs, Bs = [], [], []
    for _ in range(heads):
        kind = ("scalar", "wishart")[rng.integers(2)]
        sv = rng.choice([-1.0, 1.0])
        V = sv * rng.uniform(0.3, 1.5) * np.eye(d) if kind == "scalar" else _wishart(rng, d, sv)
        sb = -sv if cond == "stab" else sv
        G = rng.standard_normal((d, d))
        Bs.append(_wishart(rng, d, sb) + (G - G.T) / (2 * math.sqrt(d)))  # definite symmetric part, skew part
        Vs.append(V)
        v_kinds.append(kind)
    S0 = _wishart(rng, d)
    return Controls(A=A, V=Vs, B=Bs), S0, {"v_kind": "+".join(v_kinds), "b_kind": "wishart+skew", "shift": shift}


def _sign(M: np.ndarray) -> int:
    """+1 / -1 for a positive / negative definite symmetric part, 0 otherwise."""
    dfn = _definiteness(M)
    return 1 if dfn == "positive definite" else -1 if dfn == "negative definite" else 0


def conditions(controls: Controls) -> dict:
    r"""The paper's sign conditions on one layer, head by head, and the spectral class of :math:`A`.

    Returns a dict with ``opposite`` (every head's :math:`V_h` and :math:`B_h` have definite
    symmetric parts of opposite signs), ``same`` (every head's have the same sign), ``scalar_V``
    (every :math:`V_h = v_hI`), ``A_class`` ("Hurwitz", "anti-stable" or "mixed"), and ``stab`` /
    ``blow``: the book's reading of the paper's sufficient conditions, opposite (same) definiteness
    with :math:`A` anti-stable. For L2 attention :math:`B_h` is the logits' bilinear part
    :math:`2K_h^\top Q_h`.
    """
    signs = [(_sign(V), _sign(B)) for V, B in zip(controls.V, controls.B, strict=True)]
    opposite = all(v * b == -1 for v, b in signs)
    same = all(v * b == 1 for v, b in signs)
    d = controls.d
    scalar = all(np.allclose(V, V[0, 0] * np.eye(d), rtol=0, atol=1e-14) for V in controls.V)
    cls = _spectrum_class(controls.affine_A)[0]
    return {
        "opposite": opposite,
        "same": same,
        "scalar_V": scalar,
        "A_class": cls,
        "stab": opposite and cls == "anti-stable",
        "blow": same and cls == "anti-stable",
    }
