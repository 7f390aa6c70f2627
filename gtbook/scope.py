r"""Scope: the system and the parameters a claim covers, and the scope a statement is stated for.

A claim shows what it shows only as far as its scope reaches. The scope of a claim says

* **system**: what produced the observed side (:class:`System`): the moment ODE eq. (1.1), a closed form,
  finite-N tokens, real Transformer code, a trained model, a stochastic process, or the book's own
  instruments. Only the independent systems (tokens, model code, trained models, stochastic processes) can
  *reproduce* a statement: a ``reproduces`` claim on the moment ODE is refused;
* **d**: the dimensions it ran at;
* **A, B, V**: the structure class of each parameter, ordered from the narrowest to the most general
  (:data:`CLASSES`): ``A`` zero ⊂ scalar ⊂ normal ⊂ general; ``B`` and ``V`` zero ⊂ scalar ⊂ symmetric ⊂
  general (scalar: a multiple of the identity);
* **heads** and **attention**: how many heads, which attention types;
* **family**: a special family inside those classes that the claim is restricted to (e.g. "A skew,
  B = I, Σ0 = sI"). A claim with a family covers only that family, never a class on its own.

A statement's stated scope (the registry's ``[id.stated]`` table, :class:`StatedScope`) is where the
paper states it: general parameters unless it says otherwise. A statement is reproduced as far as the
scopes of its passing ``reproduces`` claims reach: when one of them covers the stated scope on every
axis (:func:`covers`), it is "reproduced"; otherwise the widest scopes reached are named
(:func:`describe`: "V = vI, d ≤ 3").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gtcore.status import Vocabulary

__all__ = [
    "CLASSES",
    "INDEPENDENT",
    "Scope",
    "StatedScope",
    "System",
    "covers",
    "describe",
    "parse_scope",
    "stated_from_toml",
    "widest",
]


class System(Vocabulary):
    """What produced a claim's observed side."""

    MOMENT_ODE = "moment ODE"
    CLOSED_FORM = "closed form"
    TOKENS = "finite-N tokens"
    MODEL_CODE = "Transformer code"
    TRAINED_MODEL = "trained model"
    STOCHASTIC = "stochastic process"
    INSTRUMENT = "the book's statistics"


#: the systems independent of eq. (1.1): only they can reproduce a statement
INDEPENDENT = frozenset({System.TOKENS, System.MODEL_CODE, System.TRAINED_MODEL, System.STOCHASTIC})

#: each parameter's structure classes, narrowest first
CLASSES: dict[str, tuple[str, ...]] = {
    "A": ("zero", "scalar", "normal", "general"),
    "B": ("zero", "scalar", "symmetric", "general"),
    "V": ("zero", "scalar", "symmetric", "general"),
}
#: how a class reads in a verdict, per parameter
_WORDS = {
    ("A", "zero"): "A = 0",
    ("A", "scalar"): "A = aI",
    ("A", "normal"): "normal A",
    ("A", "general"): "general A",
    ("B", "zero"): "B = 0",
    ("B", "scalar"): "B = bI",
    ("B", "symmetric"): "symmetric B",
    ("B", "general"): "general B",
    ("V", "zero"): "V = 0",
    ("V", "scalar"): "V = vI",
    ("V", "symmetric"): "symmetric V",
    ("V", "general"): "general V",
}
#: the least dimension at which a claim counts for "any d" (in d <= 2 many structures degenerate)
GENERAL_D = 3


def _rank(param: str, cls: str) -> int:
    try:
        return CLASSES[param].index(cls)
    except ValueError:
        raise ValueError(f"scope: {param} must be one of {', '.join(CLASSES[param])}, got {cls!r}") from None


@dataclass(frozen=True)
class Scope:
    """What one claim covers (see the module docstring).

    Attributes
    ----------
    system : System
    d : tuple of int
        The dimensions it ran at (empty: not about a dimension, e.g. a statistic's calibration).
    A, B, V : str
        Structure classes, from :data:`CLASSES`.
    heads : int
        The most heads covered.
    attention : tuple of str
        The attention types covered.
    family : str
        A special family the claim is restricted to ("" when none).
    """

    system: System
    d: tuple[int, ...] = ()
    A: str = "general"
    B: str = "general"
    V: str = "general"
    heads: int = 1
    attention: tuple[str, ...] = ("dot",)
    family: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "system", System(self.system))
        for p in CLASSES:
            _rank(p, getattr(self, p))
        d = (self.d,) if isinstance(self.d, int) else tuple(self.d)
        if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in d):
            raise ValueError(f"scope: d must be positive integers, got {self.d!r}")
        object.__setattr__(self, "d", tuple(sorted(set(d))))
        att = (self.attention,) if isinstance(self.attention, str) else tuple(self.attention)
        object.__setattr__(self, "attention", att)
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads < 1:
            raise ValueError(f"scope: heads must be a positive integer, got {self.heads!r}")

    @property
    def independent(self) -> bool:
        """Whether the system is independent of eq. (1.1) (:data:`INDEPENDENT`)."""
        return self.system in INDEPENDENT

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record (what a claim stores)."""
        out = asdict(self)
        out["system"] = self.system.value
        out["d"], out["attention"] = list(self.d), list(self.attention)
        return out

    def text(self) -> str:
        """One line: the system, then every axis (``"finite-N tokens; d = 3; general A, B, V; dot"``)."""
        return "; ".join(
            p
            for p in (
                self.system.value,
                _d_text(self.d),
                _classes_text(self),
                _heads_text(self),
                "/".join(self.attention),
                self.family,
            )
            if p
        )


@dataclass(frozen=True)
class StatedScope:
    """Where a statement is stated: the classes it claims, at any d unless ``d`` names dimensions."""

    d: tuple[int, ...] = ()
    A: str = "general"
    B: str = "general"
    V: str = "general"
    heads: int = 1
    attention: tuple[str, ...] = ("dot",)
    hypothesis: str = ""

    def __post_init__(self) -> None:
        for p in CLASSES:
            _rank(p, getattr(self, p))
        object.__setattr__(self, "d", tuple(sorted({self.d} if isinstance(self.d, int) else set(self.d))))
        att = (self.attention,) if isinstance(self.attention, str) else tuple(self.attention)
        object.__setattr__(self, "attention", att)

    def text(self) -> str:
        """One line (``"any d; general A, B, V; dot"`` and the hypothesis)."""
        d = _d_text(self.d) if self.d else "any d"
        return "; ".join(
            p for p in (d, _classes_text(self), _heads_text(self), "/".join(self.attention), self.hypothesis) if p
        )


def _d_text(d: tuple[int, ...]) -> str:
    if not d:
        return ""
    if len(d) == 1:
        return f"d = {d[0]}"
    if list(d) == list(range(d[0], d[-1] + 1)):
        return f"d = {d[0]}–{d[-1]}"
    return "d ∈ {" + ", ".join(map(str, d)) + "}"


def _classes_text(s: Scope | StatedScope) -> str:
    if all(getattr(s, p) == "general" for p in CLASSES):
        return "general A, B, V"
    return ", ".join(_WORDS[(p, getattr(s, p))] for p in CLASSES)


def _heads_text(s: Scope | StatedScope) -> str:
    return f"≤ {s.heads} heads" if s.heads > 1 else ""


def parse_scope(value: Scope | Mapping[str, Any] | str) -> Scope:
    """A :class:`Scope` from a Scope, a mapping of its fields, or a system name alone (``"instrument"``)."""
    if isinstance(value, Scope):
        return value
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_").replace(" ", "_")
        aliases = {
            "instrument": System.INSTRUMENT,
            "moment_ode": System.MOMENT_ODE,
            "ode": System.MOMENT_ODE,
            "closed_form": System.CLOSED_FORM,
            "tokens": System.TOKENS,
            "model_code": System.MODEL_CODE,
            "trained_model": System.TRAINED_MODEL,
            "stochastic": System.STOCHASTIC,
        }
        if key not in aliases:
            raise ValueError(
                f"scope: unknown system {value!r}; one of {', '.join(sorted(aliases))}, or a "
                "mapping of the Scope fields"
            )
        return Scope(system=aliases[key])
    if isinstance(value, Mapping):
        fields = dict(value)
        name = fields.get("system")
        if isinstance(name, str) and name not in {s.value for s in System}:
            fields["system"] = parse_scope(name).system
        unknown = set(fields) - set(Scope.__dataclass_fields__)
        if unknown:
            raise ValueError(f"scope: unknown field(s) {', '.join(sorted(unknown))}")
        if "system" not in fields:
            raise ValueError("scope: a mapping must name its system")
        return Scope(**fields)
    raise ValueError(f"scope must be a Scope, a mapping or a system name, got {type(value).__name__}")


def covers(scope: Scope, stated: StatedScope) -> bool:
    """Whether ``scope`` reaches the whole of ``stated``: every class at least as general, every stated
    dimension (or, for "any d", some d >= 3), enough heads, every stated attention type, no special family."""
    if scope.family:
        return False
    if any(_rank(p, getattr(scope, p)) < _rank(p, getattr(stated, p)) for p in CLASSES):
        return False
    if stated.d:
        if not set(stated.d) <= set(scope.d):
            return False
    elif not scope.d or max(scope.d) < GENERAL_D:
        return False
    return scope.heads >= stated.heads and set(stated.attention) <= set(scope.attention)


def _at_least(a: Scope, b: Scope) -> bool:
    """``a`` reaches at least as far as ``b`` on every axis (and is the same family, or none)."""
    return (
        all(_rank(p, getattr(a, p)) >= _rank(p, getattr(b, p)) for p in CLASSES)
        and (max(a.d, default=0) >= max(b.d, default=0))
        and a.heads >= b.heads
        and set(b.attention) <= set(a.attention)
        and (not a.family or a.family == b.family)
    )


def widest(scopes: Iterable[Scope]) -> list[Scope]:
    """The scopes no other one reaches past (the Pareto front), in their first order, duplicates dropped."""
    items = list(dict.fromkeys(scopes))
    return [s for s in items if not any(o != s and _at_least(o, s) and not _at_least(s, o) for o in items)]


def describe(scope: Scope, stated: StatedScope) -> str:
    """Where ``scope`` falls short of ``stated``, in a few words (``"V = vI, d ≤ 3"``), with the system and family it
    was shown on in parentheses (``"A = 0, V = vI (Transformer code)"``); "" when it covers it."""
    if covers(scope, stated):
        return ""
    parts = [
        _WORDS[(p, getattr(scope, p))] for p in CLASSES if _rank(p, getattr(scope, p)) < _rank(p, getattr(stated, p))
    ]
    if stated.d:
        missing = sorted(set(stated.d) - set(scope.d))
        if missing:
            parts.append(_d_text(scope.d) or "no d")
    elif not scope.d or max(scope.d) < GENERAL_D:
        parts.append(f"d ≤ {max(scope.d)}" if scope.d else "no d")
    if scope.heads < stated.heads:
        parts.append(f"{scope.heads} head" + ("s" if scope.heads > 1 else ""))
    if not set(stated.attention) <= set(scope.attention):
        parts.append("/".join(scope.attention) + " attention")
    # where the evidence comes from, in parentheses after the classes: "A = 0, V = vI (bert code, Transformer code)"
    where = [scope.family] if scope.family else []
    if scope.system is not System.TOKENS and scope.independent:
        where.append(scope.system.value)
    if not parts and where:  # the family alone falls short: it leads, the system in parentheses
        parts, where = where[:1], where[1:]
    text = ", ".join(parts)
    return f"{text} ({', '.join(where)})" if where else text


def stated_from_toml(entry: Mapping[str, Any] | None, where: str) -> StatedScope:
    """A :class:`StatedScope` from a registry entry's ``stated`` table (the paper's general case when absent)."""
    if entry is None:
        return StatedScope()
    unknown = set(entry) - set(StatedScope.__dataclass_fields__)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} in its stated scope")
    return StatedScope(**dict(entry))
