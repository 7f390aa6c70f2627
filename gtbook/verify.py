r"""What an executed notebook holds against what its run recorded: claims re-evaluated, outputs digested.

An executed notebook is a file anyone can edit. Two checks keep an edit from passing for a result:

* **Re-evaluation.** Every claim is evaluated again from the value and the criterion it recorded
  (:func:`recheck`), never taken from its recorded ``passed``: a value edited to 123 under
  ``value < 0.5`` reads as a failure. The criterion is the structured one a claim records
  (``criterion``: ``{"gt", "lt"}``, ``{"close_to", "rtol", "atol"}`` or ``{"true"}``); a record from
  an older ``gtbook`` has only its text (``"value > 0.1 and < 0.5"``, ``"|value - 1| <= 0.01"``,
  ``"must be True"``), which is parsed. A criterion whose text no longer matches its numbers counts as
  edited.
* **Digest.** ``gtbook run`` records a SHA-256 of the notebook's code-cell outputs (where the claims
  live) and their number of claims in the notebook's metadata (``gtbook.digest``); :func:`digest_problem`
  says when the outputs no longer match it (edited, or stripped), and ``gtbook status`` calls that
  chapter stale (``edited``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

__all__ = [
    "bounds",
    "criterion_of",
    "criterion_text",
    "digest_problem",
    "notebook_digest",
    "outputs_digest",
    "parse_threshold",
    "recheck",
]


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def criterion_text(criterion: dict[str, Any]) -> str:
    """The text a claim shows for ``criterion`` (the ``threshold`` field of its record)."""
    if criterion.get("true"):
        return "must be True"
    if criterion.get("close_to") is not None:
        return f"|value - {_fmt(float(criterion['close_to']))}| <= {_fmt(_tolerance(criterion))}"
    parts = []
    if criterion.get("gt") is not None:
        parts.append(f"> {_fmt(float(criterion['gt']))}")
    if criterion.get("lt") is not None:
        parts.append(f"< {_fmt(float(criterion['lt']))}")
    return "value " + " and ".join(parts)


_NUM = r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)"
_CLOSE = re.compile(rf"^\|value - ({_NUM})\| <= ({_NUM})$")
_BOUND = re.compile(rf"^(?:value )?([<>]) ({_NUM})(?: and ([<>]) ({_NUM}))?$")


def parse_threshold(text: Any) -> dict[str, Any] | None:
    """The criterion a claim's threshold text states, or None when it is not one ``claim`` writes."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text == "must be True":
        return {"true": True}
    m = _CLOSE.match(text)
    if m:
        return {"close_to": float(m.group(1)), "atol": float(m.group(2)), "rtol": 0.0}
    m = _BOUND.match(text)
    if m:
        out: dict[str, Any] = {"gt": None, "lt": None}
        for op, num in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            if op is not None:
                key = "gt" if op == ">" else "lt"
                if out[key] is not None:
                    return None
                out[key] = float(num)
        return out
    return None


def _number(x: Any) -> float | None:
    """A recorded value as a float (``"nan"``/``"inf"`` strings included), or None when it is not one."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _tolerance(criterion: dict[str, Any]) -> float:
    atol = float(criterion.get("atol") or 0.0)
    rtol = float(criterion.get("rtol") or 0.0)
    return atol + rtol * abs(float(criterion["close_to"]))


def criterion_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The criterion of a claim record: its structured one, else the one its text states; None if neither.

    A structured criterion whose text no longer matches the record's ``threshold`` is not trusted (None).
    """
    crit = record.get("criterion")
    if isinstance(crit, dict):
        try:
            numbers = [crit.get(k) for k in ("gt", "lt", "close_to", "rtol", "atol")]
            if any(n is not None and _number(n) is None for n in numbers):
                return None
            if record.get("threshold") is not None and criterion_text(crit) != record.get("threshold"):
                return None
        except (TypeError, ValueError):
            return None
        return crit
    return parse_threshold(record.get("threshold"))


def recheck(record: dict[str, Any]) -> bool | None:
    """Whether a claim record's value meets its criterion, evaluated now; None when it cannot be told."""
    crit = criterion_of(record)
    if crit is None:
        return None
    value = record.get("value")
    if crit.get("true"):
        return value is True
    v = _number(value)
    if v is None or not math.isfinite(v):
        return False
    if crit.get("close_to") is not None:
        return abs(v - float(crit["close_to"])) <= _tolerance(crit)
    if crit.get("gt") is None and crit.get("lt") is None:
        return None
    ok = True
    if crit.get("gt") is not None:
        ok = ok and v > float(crit["gt"])
    if crit.get("lt") is not None:
        ok = ok and v < float(crit["lt"])
    return ok


def bounds(record: dict[str, Any]) -> tuple[float | None, float | None]:
    """The numeric ``(lower, upper)`` bounds a claim's criterion puts on its value (None: unbounded).

    ``gt``/``lt`` give open bounds; ``close_to`` gives the closed interval ``close_to ± tolerance``.
    """
    crit = criterion_of(record) or {}
    if crit.get("close_to") is not None:
        c, tol = float(crit["close_to"]), _tolerance(crit)
        return c - tol, c + tol
    lower = crit.get("gt")
    upper = crit.get("lt")
    return (None if lower is None else float(lower)), (None if upper is None else float(upper))


# ------------------------------------------------------------------------------ digest
def _joined(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return value


def _output_record(out: dict[str, Any]) -> dict[str, Any]:
    """An output's content, independent of how nbformat splits its strings on disk."""
    rec: dict[str, Any] = {"output_type": out.get("output_type")}
    for key in ("name", "ename", "evalue"):
        if key in out:
            rec[key] = out[key]
    if "text" in out:
        rec["text"] = _joined(out["text"])
    if "traceback" in out:
        rec["traceback"] = list(out["traceback"])
    if "data" in out:
        rec["data"] = {mime: (v if mime.endswith("json") else _joined(v)) for mime, v in dict(out["data"]).items()}
    return rec


def outputs_digest(nb: dict[str, Any]) -> str:
    """SHA-256 of every code cell's outputs, in order (a raw JSON notebook or an ``nbformat`` node)."""
    h = hashlib.sha256()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        outs = [_output_record(o) for o in cell.get("outputs", [])]
        h.update(json.dumps(outs, sort_keys=True, separators=(",", ":"), default=str).encode() + b"\n")
    return h.hexdigest()


def notebook_digest(nb: dict[str, Any], n_claims: int) -> dict[str, Any]:
    """What ``gtbook run`` records in ``metadata.gtbook.digest``: the outputs' digest and the claims' count."""
    return {"outputs": outputs_digest(nb), "claims": int(n_claims)}


def digest_problem(nb: dict[str, Any], meta: dict[str, Any] | None = None) -> str | None:
    """Why an executed notebook's outputs no longer match what its run recorded, or None when they do.

    A notebook that records no digest (written by an older ``gtbook``, or by hand) is a problem too.
    """
    if meta is None:
        meta = (nb.get("metadata") or {}).get("gtbook") or {}
    recorded = meta.get("digest") if isinstance(meta, dict) else None
    if not isinstance(recorded, dict) or "outputs" not in recorded:
        return "it records no digest of its outputs (not written by this gtbook run)"
    if outputs_digest(nb) != recorded.get("outputs"):
        from gtbook.claims import claims_in_notebook

        found = len(claims_in_notebook(nb))
        n = recorded.get("claims")
        counted = f"; its run recorded {n} claims, it holds {found}" if n != found else ""
        return f"its outputs were changed after its run{counted}"
    return None
