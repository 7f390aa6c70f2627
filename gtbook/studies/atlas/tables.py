r"""The chapter's tables: regime fractions with binomial confidence intervals
(:func:`gtcore.stats.inference.wilson_interval`), the peer comparison, counterexamples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gtbook.studies.atlas.outcomes import OUTCOMES
from gtcore.stats.inference import wilson_interval

__all__ = ["Fractions", "PeerRow", "counterexamples", "regime_fractions"]


@dataclass
class Fractions:
    """Per attention type and dimension, the fraction of draws in each outcome, with Wilson 95 % intervals.

    Attributes
    ----------
    attentions, ds, outcomes : the table's axes
    count : (len(attentions), len(ds), len(outcomes)) draws in each outcome
    n : (len(attentions), len(ds)) draws
    low, high : the intervals, same shape as ``count``
    """

    attentions: list[str]
    ds: list[int]
    outcomes: list[str]
    count: np.ndarray
    n: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def fraction(self) -> np.ndarray:
        return self.count / self.n[..., None]

    def markdown(self) -> str:
        """One row per (attention, d): the percentage of each outcome and its interval."""
        head = "| attention | d | n | " + " | ".join(self.outcomes) + " |"
        rows = [head, "|" + "---|" * (3 + len(self.outcomes))]
        for i, att in enumerate(self.attentions):
            for j, d in enumerate(self.ds):
                cells = [
                    f"{100 * self.fraction[i, j, k]:.0f} [{100 * self.low[i, j, k]:.0f}, "
                    f"{100 * self.high[i, j, k]:.0f}]"
                    for k in range(len(self.outcomes))
                ]
                rows.append(f"| {att} | {d} | {self.n[i, j]} | " + " | ".join(cells) + " |")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return (
            f"Fractions({len(self.attentions)} attention types x {len(self.ds)} dimensions, {int(self.n.sum())} draws)"
        )


def regime_fractions(result, attentions: Sequence[str], ds: Sequence[int]) -> Fractions:
    """The outcome fractions of a condition-ensemble sweep (:func:`~gtbook.studies.atlas.sweep.run_sweep`)."""
    att = result.column("attention")
    dd = result.column("d")
    out = result.column("outcome")
    names = [o.value for o in OUTCOMES]
    count = np.zeros((len(attentions), len(ds), len(names)), dtype=int)
    for i, a in enumerate(attentions):
        for j, d in enumerate(ds):
            sel = (att == a) & (dd == d)
            for k, o in enumerate(names):
                count[i, j, k] = int(np.sum(out[sel] == o))
    n = count.sum(axis=2)
    if np.any(n == 0):
        raise ValueError("result: some (attention, d) has no draws")
    low = np.zeros(count.shape)
    high = np.zeros(count.shape)
    for idx in np.ndindex(count.shape):
        low[idx], high[idx] = wilson_interval(int(count[idx]), int(n[idx[:2]]))
    return Fractions(list(attentions), [int(d) for d in ds], names, count, n, low, high)


def counterexamples(
    result, condition: str, predicted: str, *, attentions: Sequence[str] | None = None, scalar: bool | None = None
) -> tuple[int, list[dict]]:
    """Draws that satisfy ``condition`` (a boolean column: "stab", "blow") but whose outcome is not ``predicted``.

    ``scalar`` restricts to draws with every :math:`V_h = v_hI` (True), to the others (False), or not at all.
    Returns the number of draws satisfying the condition and the list of counterexamples (their rows).
    """
    cols = result.table.to_pydict()
    rows = [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]
    keep = [
        r
        for r in rows
        if r[condition]
        and (attentions is None or r["attention"] in attentions)
        and (scalar is None or r["scalar_V"] == scalar)
    ]
    return len(keep), [r for r in keep if r["outcome"] != predicted]


@dataclass
class PeerRow:
    """One (attention, V, d) of the peer comparison."""

    attention: str
    variant: str
    d: int
    exact: np.ndarray
    undecided: int
    closed_form: int
    schemes: dict

    def markdown_cells(self) -> list[str]:
        def hist(h):
            return " ".join(f"{r}:{c}" for r, c in enumerate(h) if c)

        cells = [
            self.attention,
            "I" if self.variant == "identity" else "MᵀM",
            str(self.d),
            hist(self.exact) + (f" (undecided {self.undecided})" if self.undecided else ""),
        ]
        for s in self.schemes.values():
            cells += [hist(s["hist"]), f"{s['miscount']}", f"{s['unconverged']}"]
        return cells
