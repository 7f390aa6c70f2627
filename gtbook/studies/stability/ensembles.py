r"""The sign conditions over unselected ensembles: every draw counted, classified by integrating eq. (1.1).

The paper's conditions for constant parameters read, for one head,

* **stabilising**: :math:`V` negative definite (:math:`V + V^\top \prec 0`), :math:`B + B^\top \succ 0` and
  :math:`A` anti-stable: predicted, convergence to a positive-definite equilibrium;
* **destabilising**: :math:`V + V^\top \succ 0`, :math:`B + B^\top \succ 0` and :math:`A` anti-stable:
  predicted, finite-time blow-up.

For :math:`V = vI` both are theorems (the precision :math:`P = \Sigma^{-1}` solves a linear equation). For
a general :math:`V` they are the literal reading of the abstract. This module draws from the class a
condition names (:func:`condition_draws`), keeps **every** draw, and classifies each by integrating the
covariance equation (:func:`classify_outcome`):

* **positive-definite equilibrium**: :math:`\Sigma(T)` is within :math:`10^{-3}` (relative) of a
  positive-definite equilibrium that Newton's method reaches from :math:`\Sigma(T)` and that is linearly
  stable;
* **lower-rank limit**: :math:`\lambda_{\min}(\Sigma(T)) < 10^{-8}\lambda_{\max}(\Sigma(T))` with
  :math:`\Sigma(T)` bounded;
* **blow-up**: :math:`\|\Sigma\|_F` crosses :math:`10^8\max(1, \|\Sigma_0\|_F)` before :math:`T`;
* **undecided at the horizon**: none of these.

A draw with a decided outcome other than the predicted one is a counterexample; an undecided draw is
counted as such, neither for nor against. Each is confirmed by an integration
that shares no code with :func:`gtcore.moments.integrate_moments` (:func:`confirm_outcome`): a lower-rank
limit by scipy's LSODA (Adams/BDF, not the library's DOP853) on the factor form :math:`\Sigma = XX^\top`,
:math:`X' = (A + \sum_h V_hXX^\top B_h)X`, with :math:`\ell = \log\det\Sigma` integrated alongside,
:math:`\ell' = 2\operatorname{tr}(A + \sum_h V_h\Sigma B_h)` (exact: it does not lose the small eigenvalue to
round-off); a blow-up by the decimal Taylor integrator of :mod:`gtbook.studies.stability.taylor`, which must
find a pole.

**The draws** (``d = 3`` in the chapter). :math:`A = a(G + (\max|\operatorname{Re}\operatorname{spec}G| +
0.3)I)` (:math:`G` Ginibre with entries :math:`N(0, 1/d)`, :math:`a = 0.3`: anti-stable and non-normal),
:math:`B = HH^\top/d + 0.2I + (S - S^\top)/2` (positive-definite symmetric part, non-symmetric),
:math:`\Sigma_0 = ZZ^\top/d + 0.2I`, and :math:`V = \pm(WW^\top/d + 0.5I) + \text{extra}` by kind:

* ``"scalar"``: :math:`V = \pm\bar v I`, :math:`\bar v = \operatorname{tr}(WW^\top/d + 0.5I)/d` (the theorem);
* ``"symmetric"``: no extra (symmetric, not a multiple of :math:`I`);
* ``"general"``: extra :math:`(R - R^\top)/2` (non-symmetric; its symmetric part keeps the sign);
* ``"commuting"``: :math:`V` and :math:`B` symmetric and commuting (the eigenvalues of the symmetric kind's
  :math:`V` and of :math:`HH^\top/d + 0.2I`, in one random orthonormal basis): a candidate extra hypothesis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from gtbook.studies.stability.taylor import pole_time_hp
from gtcore.controls import Controls
from gtcore.moments import integrate_moments
from gtcore.stability import NoEquilibriumError, equilibrium, linear_stability
from gtcore.stats.inference import wilson_interval
from gtcore.status import Stability, Status, Vocabulary

__all__ = [
    "CHAPTER_ENSEMBLES",
    "KINDS",
    "PREDICTED",
    "Classified",
    "ConditionDraw",
    "Confirmation",
    "Ensemble",
    "Outcome",
    "chapter_ensembles",
    "classify_outcome",
    "condition_draws",
    "confirm_outcome",
    "counterexample_lines",
    "markdown_table",
    "run_ensemble",
]

#: the kinds of value matrix (module docstring)
KINDS = ("scalar", "symmetric", "general", "commuting")
#: the horizon of the classification
HORIZON = 400.0
#: lower-rank threshold on lambda_min / lambda_max at the horizon
RANK_RATIO = 1e-8
#: closeness of Sigma(T) to Newton's equilibrium (relative Frobenius)
EQ_CLOSENESS = 1e-3


class Outcome(Vocabulary):
    """What the integrated covariance does (module docstring)."""

    EQUILIBRIUM = "positive-definite equilibrium"
    LOWER_RANK = "lower-rank limit"
    BLOWUP = "blow-up"
    UNDECIDED = "undecided at the horizon"


#: the outcome each condition predicts
PREDICTED = {"stabilising": Outcome.EQUILIBRIUM, "destabilising": Outcome.BLOWUP}


@dataclass(frozen=True)
class ConditionDraw:
    """One draw from the class a condition names: its index, kind, condition, controls and initial covariance."""

    index: int
    kind: str
    condition: str
    controls: Controls
    Sigma0: np.ndarray

    def __repr__(self) -> str:
        return f"ConditionDraw({self.condition}, {self.kind}, #{self.index})"


def _draw(rng: np.random.Generator, d: int, kind: str, sign: float, a_scale: float) -> tuple[np.ndarray, ...]:
    G = rng.standard_normal((d, d)) / np.sqrt(d)
    A = a_scale * (G + (np.abs(np.linalg.eigvals(G).real).max() + 0.3) * np.eye(d))
    W, H, S, R, Z = (rng.standard_normal((d, d)) for _ in range(5))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Vs = W @ W.T / d + 0.5 * np.eye(d)
    Bs = H @ H.T / d + 0.2 * np.eye(d)
    B = Bs + 0.5 * (S - S.T)
    if kind == "scalar":
        V = np.trace(Vs) / d * np.eye(d)
    elif kind == "symmetric":
        V = Vs
    elif kind == "general":
        V = Vs + 0.5 * (R - R.T)
    elif kind == "commuting":
        V = (Q * np.linalg.eigvalsh(Vs)) @ Q.T
        B = (Q * np.linalg.eigvalsh(Bs)) @ Q.T
    else:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return A, sign * V, B, Z @ Z.T / d + 0.2 * np.eye(d)


def condition_draws(
    n: int, d: int, kind: str, *, seed: int, condition: str = "stabilising", a_scale: float = 0.3
) -> list[ConditionDraw]:
    r"""``n`` draws of one kind from the class ``condition`` names (module docstring), none discarded.

    Parameters
    ----------
    n, d : int
        How many draws, and the dimension.
    kind : str
        One of :data:`KINDS`.
    seed : int
        Seeds the draws (each kind and condition draws its own stream from the same seed).
    condition : "stabilising" or "destabilising"
        The sign of :math:`V`: negative definite, or positive definite.
    a_scale : float
        The scale :math:`a` of :math:`A`.

    Returns
    -------
    list of ConditionDraw
    """
    if condition not in PREDICTED:
        raise ValueError(f"condition must be 'stabilising' or 'destabilising', got {condition!r}")
    sign = -1.0 if condition == "stabilising" else 1.0
    rng = np.random.default_rng([seed, KINDS.index(kind) if kind in KINDS else 99, int(sign > 0)])
    out = []
    for i in range(n):
        A, V, B, S0 = _draw(rng, d, kind, sign, a_scale)
        out.append(ConditionDraw(i, kind, condition, Controls(A=A, V=V, B=B), S0))
    return out


@dataclass(frozen=True)
class Classified:
    """A draw's outcome with what decided it."""

    draw: ConditionDraw
    outcome: Outcome
    #: lambda_min / lambda_max of Sigma(T) (nan after a blow-up)
    ratio: float
    #: the crossing time for a blow-up, else nan
    t_blowup: float
    #: the equilibrium for EQUILIBRIUM, else None
    Sigma_star: np.ndarray | None = None
    #: the recorded trajectory (times, lambda_min/lambda_max, ||Sigma||_F)
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ratios: np.ndarray = field(default_factory=lambda: np.zeros(0))
    norms: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def counterexample(self) -> bool:
        """Whether the outcome is decided and not the one the draw's condition predicts."""
        return self.outcome not in (PREDICTED[self.draw.condition], Outcome.UNDECIDED)

    def __repr__(self) -> str:
        return f"Classified({self.draw.kind} #{self.draw.index}: {self.outcome.value})"


def classify_outcome(draw: ConditionDraw, *, horizon: float = HORIZON, records: int = 81) -> Classified:
    r"""Integrate eq. (1.1)'s covariance from :math:`\Sigma_0` to ``horizon`` and classify (module docstring).

    Parameters
    ----------
    draw : ConditionDraw
    horizon : float
        The time :math:`T`.
    records : int
        Recorded times (for the figure).

    Returns
    -------
    Classified
    """
    ctl, S0 = draw.controls, draw.Sigma0
    d = ctl.d
    grid = np.linspace(0.0, horizon, records)
    tr = integrate_moments(
        np.zeros(d),
        S0,
        ctl,
        (0.0, horizon),
        t_eval=grid,
        rtol=1e-10,
        atol=1e-14,
        blowup_norm=1e8 * max(1.0, float(np.linalg.norm(S0))),
    )
    lam = np.linalg.eigvalsh(tr.Sigma)
    ratios = lam[:, 0] / lam[:, -1]
    norms = np.linalg.norm(tr.Sigma, axis=(1, 2))
    keep = dict(t=np.asarray(tr.t), ratios=ratios, norms=norms)
    if tr.status is Status.BLOWUP:
        t_b = float("nan") if tr.crossing_time is None else float(tr.crossing_time)
        return Classified(draw, Outcome.BLOWUP, float("nan"), t_b, **keep)
    end = tr.Sigma[-1]
    ratio = float(ratios[-1])
    if tr.status is not Status.COMPLETED:
        return Classified(draw, Outcome.UNDECIDED, ratio, float("nan"), **keep)
    if ratio < RANK_RATIO and lam[-1, -1] < 1e4 * max(1.0, float(np.linalg.norm(S0))):
        return Classified(draw, Outcome.LOWER_RANK, ratio, float("nan"), **keep)
    if ratio > 0:
        try:
            eq = equilibrium(ctl, Sigma_guess=end)
        except NoEquilibriumError:
            eq = None
        if (
            eq is not None
            and np.linalg.norm(end - eq.Sigma) < EQ_CLOSENESS * np.linalg.norm(eq.Sigma)
            and linear_stability(ctl, eq.Sigma).verdict is Stability.STABLE
        ):
            return Classified(draw, Outcome.EQUILIBRIUM, ratio, float("nan"), eq.Sigma, **keep)
    return Classified(draw, Outcome.UNDECIDED, ratio, float("nan"), **keep)


@dataclass(frozen=True)
class Confirmation:
    r"""An independent integration of a counterexample.

    Attributes
    ----------
    confirmed : bool
        Whether it shows the same outcome.
    method : str
        "LSODA, factor form" or "decimal Taylor".
    t : (n,) array
        Recorded times (LSODA; empty for Taylor).
    log_det_drop : (n,) array
        :math:`\log\det\Sigma(t) - \log\det\Sigma_0` along ``t`` (LSODA).
    ratios : (n,) array
        :math:`\lambda_{\min}/\lambda_{\max}` along ``t`` from :math:`\ell` (LSODA; see :func:`confirm_outcome`).
    ratio : float
        Its value at the horizon (nan for Taylor).
    t_pole : float
        The pole the Taylor integrator finds (inf when none; nan for LSODA).
    """

    confirmed: bool
    method: str
    t: np.ndarray
    log_det_drop: np.ndarray
    ratios: np.ndarray
    ratio: float
    t_pole: float


def _factor_rhs(ctl: Controls):
    A = ctl.affine_A
    Vs, Bs = list(ctl.V), list(ctl.B)
    d = ctl.d

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        X = y[:-1].reshape(d, d)
        Sig = X @ X.T
        M = A + sum(V @ Sig @ B for V, B in zip(Vs, Bs, strict=True))
        return np.concatenate([(M @ X).ravel(), [2.0 * np.trace(M)]])

    return rhs


def confirm_outcome(c: Classified, *, horizon: float = HORIZON) -> Confirmation:
    r"""Confirm a counterexample's outcome by an integration independent of the library's (module docstring).

    An equilibrium (a counterexample to the destabilising condition) is confirmed when the same LSODA
    integration ends within :math:`10^{-3}` of it. A lower-rank limit is confirmed when
    :math:`\lambda_{\min}/\lambda_{\max} < 10^{-8}` at :math:`T` with :math:`\lambda_{\max}` bounded, where the
    smallest eigenvalue is never read off the integrated matrix (where round-off would hide it):
    :math:`\lambda_{\min} = e^{\ell}/\prod_{i \ge 2}\lambda_i` with :math:`\ell = \log\det\Sigma` integrated and
    the larger eigenvalues :math:`\lambda_2 \le \dots` from :math:`XX^\top` (accurate while
    :math:`\lambda_2 > 10^{-6}\lambda_{\max}`; below that the bound
    :math:`\lambda_{\min}/\lambda_{\max} \le (e^\ell/\lambda_{\max}^d)^{1/(d-1)}` is used). A blow-up is confirmed
    when the Taylor integrator finds a pole within :math:`10^{-4}` (relative) of the library's crossing time. An
    undecided draw is refused (``ValueError``).

    Parameters
    ----------
    c : Classified
    horizon : float
        The time :math:`T` (the classification's).

    Returns
    -------
    Confirmation
    """
    ctl, S0 = c.draw.controls, c.draw.Sigma0
    d = ctl.d
    empty = np.zeros(0)
    if c.outcome is Outcome.BLOWUP:
        pole = pole_time_hp(S0, ctl.affine_A, ctl.V, ctl.B, t_max=2.0 * horizon)
        ok = bool(np.isfinite(pole.t_star) and abs(pole.t_star - c.t_blowup) < 1e-4 * pole.t_star)
        return Confirmation(ok, "decimal Taylor", empty, empty, empty, float("nan"), pole.t_star)
    if c.outcome is Outcome.UNDECIDED:
        raise ValueError("confirm_outcome confirms a decided outcome, got an undecided draw")
    X0 = np.linalg.cholesky(S0)
    grid = np.linspace(0.0, horizon, 81)
    sol = solve_ivp(
        _factor_rhs(ctl),
        (0.0, horizon),
        np.concatenate([X0.ravel(), [0.0]]),
        method="LSODA",
        t_eval=grid,
        rtol=1e-10,
        atol=1e-12,
    )
    Xs = sol.y[:-1].T.reshape(-1, d, d)
    lam = np.array([np.linalg.eigvalsh(X @ X.T) for X in Xs])
    drop = sol.y[-1]
    log_det = float(np.linalg.slogdet(S0)[1]) + drop
    exact = log_det - np.sum(np.log(np.clip(lam[:, 1:], 1e-300, None)), axis=1) - np.log(lam[:, -1])
    bound = (log_det - d * np.log(lam[:, -1])) / (d - 1)
    ratios = np.exp(np.where(lam[:, 1] > 1e-6 * lam[:, -1], exact, bound))
    if c.outcome is Outcome.EQUILIBRIUM:  # (a counterexample to the destabilising condition)
        assert c.Sigma_star is not None  # an EQUILIBRIUM outcome carries its equilibrium
        end = Xs[-1] @ Xs[-1].T
        ok = bool(sol.success and np.linalg.norm(end - c.Sigma_star) < EQ_CLOSENESS * np.linalg.norm(c.Sigma_star))
    else:
        ok = bool(
            sol.success
            and sol.t[-1] >= horizon
            and ratios[-1] < RANK_RATIO
            and lam[-1, -1] < 1e4 * max(1.0, float(np.linalg.norm(S0)))
        )
    return Confirmation(ok, "LSODA, factor form", np.asarray(sol.t), drop, ratios, float(ratios[-1]), float("nan"))


@dataclass
class Ensemble:
    r"""One ensemble's outcomes: counts, fractions with Wilson 95 % intervals, counterexamples confirmed.

    Attributes
    ----------
    kind, condition : str
    classified : list of Classified
        Every draw, in order.
    confirmations : dict
        Draw index to :class:`Confirmation`, for every counterexample.
    """

    kind: str
    condition: str
    classified: list[Classified]
    confirmations: dict[int, Confirmation] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Draws."""
        return len(self.classified)

    def count(self, outcome: Outcome) -> int:
        """Draws with this outcome."""
        return sum(c.outcome is outcome for c in self.classified)

    def fraction(self, outcome: Outcome) -> tuple[float, float, float]:
        """(fraction, Wilson low, Wilson high) of this outcome."""
        k = self.count(outcome)
        lo, hi = wilson_interval(k, self.n)
        return k / self.n, lo, hi

    @property
    def predicted(self) -> Outcome:
        """The outcome the condition predicts."""
        return PREDICTED[self.condition]

    @property
    def counterexamples(self) -> list[Classified]:
        """The draws with a decided outcome other than the predicted one."""
        return [c for c in self.classified if c.counterexample]

    @property
    def confirmed(self) -> int:
        """Counterexamples confirmed by the independent integration."""
        return sum(self.confirmations[c.draw.index].confirmed for c in self.counterexamples)

    def row(self) -> str:
        """One Markdown table row: condition, kind, n, then each outcome as count and percentage [interval]."""
        cells = []
        for o in Outcome:
            f, lo, hi = self.fraction(o)
            cells.append(f"{self.count(o)} ({100 * f:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}])")
        return f"| {self.condition} | {self.kind} | {self.n} | " + " | ".join(cells) + " |"

    def __repr__(self) -> str:
        counts = ", ".join(f"{o.value}: {self.count(o)}" for o in Outcome if self.count(o))
        return f"Ensemble({self.condition}, {self.kind}, n={self.n}; {counts})"


def run_ensemble(
    n: int, d: int, kind: str, *, seed: int, condition: str = "stabilising", horizon: float = HORIZON
) -> Ensemble:
    r"""Draw, classify every draw, and confirm every counterexample independently.

    Parameters
    ----------
    n, d : int
        Draws and dimension.
    kind : str
        One of :data:`KINDS`.
    seed : int
    condition : "stabilising" or "destabilising"
    horizon : float
        The classification's :math:`T`.

    Returns
    -------
    Ensemble
    """
    classified = [
        classify_outcome(dr, horizon=horizon) for dr in condition_draws(n, d, kind, seed=seed, condition=condition)
    ]
    ens = Ensemble(kind, condition, classified)
    for c in ens.counterexamples:
        ens.confirmations[c.draw.index] = confirm_outcome(c, horizon=horizon)
    return ens


def markdown_table(ensembles: Sequence[Ensemble]) -> str:
    """The ensembles' outcome counts as a Markdown table (Wilson 95 % intervals in brackets)."""
    head = "| condition | V | draws | " + " | ".join(o.value for o in Outcome) + " |"
    rule = "|" + "---|" * (3 + len(Outcome))
    return "\n".join([head, rule, *(e.row() for e in ensembles)])


#: the chapter's ensembles: (condition, kind)
CHAPTER_ENSEMBLES = (
    ("stabilising", "scalar"),
    ("stabilising", "symmetric"),
    ("stabilising", "general"),
    ("stabilising", "commuting"),
    ("destabilising", "scalar"),
    ("destabilising", "symmetric"),
    ("destabilising", "general"),
)


def chapter_ensembles(n: int, *, seed: int, d: int = 3) -> dict[tuple[str, str], Ensemble]:
    r"""Every ensemble of :data:`CHAPTER_ENSEMBLES`, ``n`` draws each (:func:`run_ensemble`).

    Parameters
    ----------
    n : int
        Draws per ensemble.
    seed : int
    d : int

    Returns
    -------
    dict
        ``(condition, kind)`` to :class:`Ensemble`, in the order of :data:`CHAPTER_ENSEMBLES`.
    """
    return {(c, k): run_ensemble(n, d, k, seed=seed, condition=c) for c, k in CHAPTER_ENSEMBLES}


def counterexample_lines(ensembles: Sequence[Ensemble]) -> list[str]:
    """One line per counterexample and per undecided draw: what the library's integration and the independent
    one saw."""
    lines = []
    for e in ensembles:
        for c in e.classified:
            head = f"{e.condition}, V {e.kind}, draw {c.draw.index}: {c.outcome.value}"
            if c.outcome is Outcome.UNDECIDED:
                lines.append(f"{head} (lambda_min/lambda_max = {c.ratio:.2e} at t = {c.t[-1]:g})")
            elif c.counterexample:
                cf = e.confirmations[c.draw.index]
                seen = (
                    f"Taylor pole at t = {cf.t_pole:.6g}, DOP853 crossing at {c.t_blowup:.6g}"
                    if c.outcome is Outcome.BLOWUP
                    else f"lambda_min/lambda_max = {c.ratio:.1e} (DOP853), {cf.ratio:.1e} (LSODA, from log det)"
                )
                lines.append(f"{head}: {seen}: {'confirmed' if cf.confirmed else 'NOT confirmed'}")
    return lines
