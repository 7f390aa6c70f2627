r"""Claims: named numeric checks of the paper's statements that fail the run when they fail.

A chapter calls :func:`claim` with a computed value and a criterion. The claim is shown as a
one-line PASS/FAIL, recorded in the cell's output under the MIME type :data:`CLAIM_MIME` (so
``gtbook`` reads it back from the executed notebook), and raises :class:`ClaimFailed` when the
criterion does not hold, which stops papermill and fails CI.

Every claim names the statement it checks (an id of the statement registry (``gtbook/statements.toml``), see
:mod:`gtbook.statements`) and its kind (:data:`KINDS`):

* ``"reproduces"``: an independent system (finite-N softmax tokens, real Transformer code, a
  stochastic process, a trained model) shows what the statement predicts, and could have come out
  otherwise;
* ``"not_reproduced"``: a test of what the statement predicts, under a criterion fixed before the run,
  that came out against it; the claim records the outcome as observed (so a later run in which the
  statement came out reproduced fails it and is noticed);
* ``"derivation"``: a closed form derived from the statement (by the paper or by this book) agrees
  with a direct integration of eq. (1.1) (or of the moment ODE the statement is about): it checks the
  mathematics, not the model. An integrator compared with the closed form of the same equation is a
  derivation, never a reproduction;
* ``"consistency"``: the code agrees with itself (an identity, a bound that holds by construction,
  two implementations of one formula);
* ``"control"``: a power check: the same statistic detects a departure where one exists;
* ``"instrument"``: a check of the book's own statistics (a noise floor's calibration, a band's
  coverage, a test's size): it counts for no statement and is shown in a table of its own.

Every claim records its **scope** (:mod:`gtbook.scope`): the system that produced its observed side and the
parameters it covers (d, the structure classes of A, B and V, heads, attention types, a special family).
A statement is reproduced only as far as the scopes of its ``reproduces`` claims reach, and a
``reproduces`` or ``not_reproduced`` claim must come from a system independent of eq. (1.1) (finite-N
tokens, Transformer code, a trained model, a stochastic process).

A failed claim stops the chapter, except under ``GTBOOK_CLAIMS_KEEP_GOING=1`` (:data:`KEEP_GOING_ENV`), which
only the mutation check sets (:mod:`gtbook.mutations`): the FAIL is shown and recorded and the chapter
goes on, so that every claim a mutation breaks is seen, not only the first.

Criteria (exactly one family per claim):

* ``lt=x`` / ``gt=x``: :math:`v < x` / :math:`v > x` (both may be given: an open interval);
* ``close_to=x`` with ``rtol`` and/or ``atol``: :math:`|v - x| \le \text{atol} + \text{rtol}\,|x|`;
* a boolean ``value`` alone: it must be ``True``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from gtbook.statements import StatementError, load_statements

#: the MIME type under which a claim is recorded in the cell's output
CLAIM_MIME = "application/vnd.gtbook.claim+json"
#: set (to anything non-empty) by the mutation check's second look: a failed claim does not raise
KEEP_GOING_ENV = "GTBOOK_CLAIMS_KEEP_GOING"
#: the kinds of evidence a claim can be
KINDS = ("reproduces", "not_reproduced", "derivation", "consistency", "control", "instrument")
#: the kinds that need an independent system (:data:`gtbook.scope.INDEPENDENT`)
EMPIRICAL = ("reproduces", "not_reproduced")


class ClaimFailed(AssertionError):
    """A claim of the paper did not hold numerically."""


@dataclass
class Claim:
    """One recorded check."""

    name: str
    statement: str | None
    kind: str
    value: Any
    threshold: str
    passed: bool
    #: the criterion as numbers (``{"gt", "lt"}``, ``{"close_to", "rtol", "atol"}`` or ``{"true": True}``),
    #: recorded so the report can evaluate the claim again (:mod:`gtbook.verify`)
    criterion: dict | None = None
    #: what the claim covers (:meth:`gtbook.scope.Scope.as_dict`); None when the chapter did not say
    scope: dict | None = None
    #: the library functions each side ran (:mod:`gtbook.sides`): ``{"observed": [...], "predicted": [...]}``
    sides: dict | None = None

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        about = self.statement or "the book's statistics"
        return f"{status}  {self.name} [{self.kind}: {about}]: {_fmt(self.value)}  ({self.threshold})"


def _fmt(x: Any) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)):
        return f"{x:.6g}"
    return str(x)


def _to_number(x: Any, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"claim {name!r}: value must be a number or a bool, got {x!r}") from exc
    return v


def check_label(name: str, statement: str | None, kind: str) -> None:
    """Raise ``ValueError`` unless ``kind`` is one of :data:`KINDS` and ``statement`` is registered (an
    ``instrument`` claim names none: it counts for no statement)."""
    if kind not in KINDS:
        raise ValueError(f"claim {name!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "instrument":
        if statement is not None:
            raise ValueError(f"claim {name!r}: an instrument claim counts for no statement; give statement=None")
        return
    if statement is None:
        raise ValueError(f"claim {name!r}: a {kind} claim names the statement it checks")
    try:
        known = load_statements()
    except StatementError as exc:
        raise ValueError(f"claim {name!r}: {exc}") from None
    if statement not in known:
        raise ValueError(f"claim {name!r}: unknown statement {statement!r}; known statements: {', '.join(known)}")


def check_scope(name: str, kind: str, scope: Any) -> dict | None:
    """The claim's scope as a record (:class:`gtbook.scope.Scope`), or ValueError naming the claim: a malformed
    scope, or a ``reproduces``/``not_reproduced`` claim whose system is not independent of eq. (1.1)."""
    from gtbook.scope import System, parse_scope

    if scope is None:
        return {"system": System.INSTRUMENT.value} if kind == "instrument" else None
    try:
        parsed = parse_scope(scope)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"claim {name!r}: {exc}") from None
    if kind in EMPIRICAL and not parsed.independent:
        raise ValueError(
            f"claim {name!r}: a {kind} claim needs a system independent of eq. (1.1) (finite-N "
            f"tokens, Transformer code, a trained model, a stochastic process); its scope says "
            f"{parsed.system.value!r}: it is a derivation or a consistency check"
        )
    if kind == "instrument" and parsed.system is not System.INSTRUMENT:
        raise ValueError(f"claim {name!r}: an instrument claim's system is the book's statistics")
    return parsed.as_dict()


def check_sides(name: str, kind: str, sides: Any) -> dict | None:
    """The record of a claim's two traced sides (:mod:`gtbook.sides`), or ValueError naming the claim when a
    ``reproduces`` or ``not_reproduced`` claim's sides share the code path they compare."""
    if sides is None:
        return None
    from gtbook.sides import Side, shared_code

    if not (isinstance(sides, (tuple, list)) and len(sides) == 2 and all(isinstance(x, Side) for x in sides)):
        raise ValueError(f"claim {name!r}: sides must be (observed, predicted), each from gtbook.sides.side()")
    observed, predicted = sides
    shared = shared_code(observed, predicted)
    if shared and kind in EMPIRICAL:
        raise ValueError(
            f"claim {name!r}: both sides of a {kind} claim run {', '.join(shared)}: the prediction "
            "is computed by the code path it is compared with, so the claim shows nothing"
        )
    return {"observed": sorted(observed.model_functions()), "predicted": sorted(predicted.model_functions())}


def evaluate_claim(
    name: str,
    value: Any,
    *,
    statement: str | None,
    kind: str,
    lt: float | None = None,
    gt: float | None = None,
    close_to: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    scope: Any = None,
    sides: Any = None,
) -> Claim:
    """Evaluate a criterion without displaying or raising (see :func:`claim`)."""
    if not name:
        raise ValueError("claim name must be a non-empty string")
    check_label(name, statement, kind)
    record = check_scope(name, kind, scope)
    traced = check_sides(name, kind, sides)
    label = (statement, kind)
    import numpy as np  # here, so reading claims back (`gtbook claims`) does not import numpy

    if isinstance(value, np.bool_):
        value = bool(value)
    bounds = lt is not None or gt is not None
    if close_to is not None and bounds:
        raise ValueError(f"claim {name!r}: give either lt/gt or close_to, not both")
    if close_to is None and (rtol is not None or atol is not None):
        raise ValueError(f"claim {name!r}: rtol/atol need close_to")
    if isinstance(value, bool) or (close_to is None and not bounds):
        if bounds or close_to is not None:
            raise ValueError(f"claim {name!r}: a boolean value takes no threshold")
        if not isinstance(value, bool):
            raise ValueError(f"claim {name!r}: give a threshold (lt, gt or close_to) or a bool value")
        return Claim(name, *label, value, "must be True", bool(value), {"true": True}, record, traced)
    v = _to_number(value, name)
    if close_to is not None:
        r = 0.0 if rtol is None else float(rtol)
        a = 0.0 if atol is None else float(atol)
        if r == 0 and a == 0:
            raise ValueError(f"claim {name!r}: close_to needs rtol or atol")
        tol = a + r * abs(float(close_to))
        passed = math.isfinite(v) and abs(v - float(close_to)) <= tol
        threshold = f"|value - {_fmt(float(close_to))}| <= {_fmt(tol)}"
        return Claim(
            name, *label, v, threshold, passed, {"close_to": float(close_to), "rtol": r, "atol": a}, record, traced
        )
    parts, passed = [], math.isfinite(v)
    if gt is not None:
        parts.append(f"> {_fmt(float(gt))}")
        passed = passed and v > float(gt)
    if lt is not None:
        parts.append(f"< {_fmt(float(lt))}")
        passed = passed and v < float(lt)
    return Claim(
        name,
        *label,
        v,
        "value " + " and ".join(parts),
        passed,
        {"gt": None if gt is None else float(gt), "lt": None if lt is None else float(lt)},
        record,
        traced,
    )


def claim(
    name: str,
    value: Any,
    *,
    statement: str | None,
    kind: str,
    lt: float | None = None,
    gt: float | None = None,
    close_to: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    scope: Any = None,
    sides: Any = None,
) -> None:
    """Check a paper's statement numerically, show PASS/FAIL, record it, raise on failure.

    Parameters
    ----------
    name : str
        Short identifier, unique within the chapter.
    value : float or bool
        The computed number (or a boolean verdict).
    statement : str or None
        The id of the statement checked, from the statement registry (``gtbook/statements.toml``); None for
        an ``instrument`` claim, which counts for no statement.
    kind : str
        ``"reproduces"``, ``"not_reproduced"``, ``"derivation"``, ``"consistency"``, ``"control"`` or
        ``"instrument"`` (see the module docstring).
    lt, gt, close_to, rtol, atol : float, optional
        The criterion (see the module docstring).
    scope : Scope, mapping or str, optional
        What the claim covers (:class:`gtbook.scope.Scope`, a mapping of its fields, or a system name
        alone such as ``"instrument"``).
    sides : (Side, Side), optional
        The observed and the predicted side, each traced by :func:`gtbook.sides.side`: a ``reproduces`` or
        ``not_reproduced`` claim whose sides run the same library code (beyond shared plumbing) is refused.

    Returns
    -------
    None (so a claim at the end of a cell displays nothing more); use :func:`evaluate_claim` to
    get the :class:`Claim` without displaying or raising.

    Raises
    ------
    ValueError
        For an unknown statement or kind, or a malformed criterion.
    ClaimFailed
        When the criterion does not hold (after the FAIL line has been shown and recorded), unless
        :data:`KEEP_GOING_ENV` is set.
    """
    c = evaluate_claim(
        name,
        value,
        statement=statement,
        kind=kind,
        lt=lt,
        gt=gt,
        close_to=close_to,
        rtol=rtol,
        atol=atol,
        scope=scope,
        sides=sides,
    )
    _note_standalone()
    _show(c)
    if not c.passed and not os.environ.get(KEEP_GOING_ENV):
        raise ClaimFailed(c.line())


_noted = False


def _note_standalone() -> None:
    """Say once per process, when no ``gtbook run`` started this kernel, that no book is being built."""
    global _noted
    from gtbook.root import ROOT_ENV

    if _noted or os.environ.get(ROOT_ENV):
        return
    _noted = True
    print(
        "gtbook: not building a book (this kernel was not started by `gtbook run`): claims are checked "
        "and recorded in this notebook only"
    )


def _show(c: Claim) -> None:
    record = asdict(c)
    if isinstance(record["value"], float) and not math.isfinite(record["value"]):
        record["value"] = str(record["value"])
    for k, x in (record.get("criterion") or {}).items():
        if isinstance(x, float) and not math.isfinite(x):
            record["criterion"][k] = str(x)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: print only
        print(c.line())
        return
    if get_ipython() is None:
        print(c.line())
        return
    mark = "✔" if c.passed else "✘"
    about = f"statement `{c.statement}`" if c.statement else "the book's statistics"
    md = (
        f"{mark} **{'PASS' if c.passed else 'FAIL'}** `{c.name}` ({c.kind}, {about}): "
        f"value {_fmt(c.value)}, {c.threshold}"
    )
    display({"text/plain": c.line(), "text/markdown": md, CLAIM_MIME: json.loads(json.dumps(record))}, raw=True)


def claims_in_notebook(nb: Any) -> list[dict]:
    """Every claim recorded in an executed notebook (an ``nbformat`` node), in order."""
    found = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data", {})
            if CLAIM_MIME in data:
                rec = data[CLAIM_MIME]
                found.append(json.loads(rec) if isinstance(rec, str) else dict(rec))
    return found
