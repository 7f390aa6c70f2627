"""Every public function, class and method of the core and of :mod:`gtcore.models` is documented.

Like python-control's ``control/tests/docstrings_test.py``: the test walks the public API
(:mod:`public_api`: every name in ``__all__`` of the core's modules and of ``gtcore.models``; in a
module without ``__all__``, every public function and class it defines; the public methods of the
public classes) and parses each docstring with ``numpydoc.docscrape``. It fails when

* a docstring is missing, has no summary line, or has a section numpydoc does not know;
* a parameter of the signature is missing from the Parameters section (for a dataclass, from its
  Parameters or Attributes section), or the Parameters section names one the signature lacks;
* a function or method that returns something (its return annotation is not ``None``) has no
  Returns (or Yields) section.

The rendered reference (``book/api/``) is checked by ``test_book.py`` on the quick book's build.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest
from numpydoc.docscrape import NumpyDocString

from public_api import api_objects, is_ours

ROOT = Path(__file__).resolve().parents[2]
API = api_objects()


def parse(doc: str) -> NumpyDocString:
    """The numpydoc parse of ``doc``; a warning of numpydoc (an unknown section, ...) is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return NumpyDocString(doc)


def documented_names(items) -> set[str]:
    """The names of a Parameters-like section (``x, y : float`` names two; stars dropped)."""
    return {part.strip().lstrip("*") for item in items for part in item.name.split(",") if part.strip()}


def signature_parameters(obj: Any) -> list[str]:
    """The parameters of ``obj`` a caller passes (no ``self``/``cls``)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    names = [p.name for p in sig.parameters.values()]
    return names[1:] if names and names[0] in ("self", "cls") else names


def init_of(cls: type, ours=is_ours) -> Any | None:
    """The ``__init__`` a caller of ``cls`` meets, when gtcore wrote it (by hand or as a dataclass):
    not one inherited from ``object``, an exception or ``torch.nn.Module``."""
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            init = vars(klass)["__init__"]
            return init if ours(init) else None
    return None


def returns_something(obj: Any) -> bool:
    """Whether the return annotation says the function returns a value (unannotated: it does)."""
    ann = inspect.signature(obj).return_annotation
    if ann is inspect.Signature.empty:
        return True
    return ann not in (None, "None", "NoReturn", type(None))


def docstring_problems(qualname: str, obj: Any, ours=is_ours) -> list[str]:
    """What the docstring of ``obj`` lacks (an empty list when it is complete); ``ours`` says which
    ``__init__`` of a class to hold to its docstring."""
    doc = inspect.getdoc(obj)
    if not doc or not doc.strip():
        return [f"{qualname}: no docstring"]
    try:
        parsed = parse(doc)
    except Exception as exc:  # noqa: BLE001 - numpydoc's warnings and parse errors alike
        return [f"{qualname}: the docstring does not parse as numpydoc: {exc}"]
    problems = []
    if not parsed["Summary"]:
        problems.append(f"{qualname}: no summary line")
    if isinstance(obj, property):
        return problems  # documented like an attribute: a summary is enough
    documented = documented_names(parsed["Parameters"]) | documented_names(parsed["Other Parameters"])
    where = "Parameters"
    if inspect.isclass(obj):
        init = init_of(obj, ours)
        params = signature_parameters(init) if init is not None else []
        if dataclasses.is_dataclass(obj):  # fields are attributes: either section may document them
            documented |= documented_names(parsed["Attributes"])
            where = "Parameters or Attributes"
    else:
        params = signature_parameters(obj)
        if returns_something(obj) and not (parsed["Returns"] or parsed["Yields"]):
            problems.append(f"{qualname}: no Returns section")
    missing = [p for p in params if p not in documented]
    if missing:
        problems.append(f"{qualname}: parameter(s) {', '.join(missing)} missing from the {where} section")
    stale = sorted(documented_names(parsed["Parameters"]) - set(params))
    if stale and (params or not inspect.isclass(obj)):
        problems.append(f"{qualname}: the Parameters section names {', '.join(stale)}, not in the signature")
    return problems


def test_the_walk_finds_the_public_api():
    """The walk is not vacuous: it reaches the names the chapters call, methods and models included."""
    for name in (
        "gtcore.riccati.blowup_time",
        "gtcore.moments.integrate_moments",
        "gtcore.particles.simulate",
        "gtcore.controls.Controls",
        "gtcore.controls.Controls.attention_drift",
        "gtcore.controls.PiecewiseControls.__call__",
        "gtcore.attention.AttentionType.tilt",
        "gtcore.attention.DotProduct.tilt",
        "gtcore.stats.gaussianity.NoiseFloor.band",
        "gtcore.models.load_transformer",
        "gtcore.models.prescribed_moments.layer_moments",
    ):
        assert name in API, name
    assert not any(q.startswith(("gtbook.studies", "gtbook", "gtcore._")) for q in API)
    assert len(API) > 150


@pytest.mark.parametrize("qualname", sorted(API))
def test_docstring_documents_every_parameter(qualname):
    problems = docstring_problems(qualname, API[qualname])
    assert not problems, "\n".join(problems)


def _documented(params: str, returns: bool = True):
    """A function of ``(mu, Sigma, controls)`` whose docstring documents ``params`` (names, comma-separated)."""

    def f(mu, Sigma, controls):
        pass

    lines = ["Sum.", "", "Parameters", "----------"]
    for name in params.split(", "):
        lines += [f"{name} : array", "    A parameter."]
    if returns:
        lines += ["", "Returns", "-------", "float", "    The sum."]
    f.__doc__ = "\n".join(lines)
    return f


def test_the_check_fails_on_a_missing_parameter_return_or_section():
    """The check itself, on mutated copies of a complete docstring."""
    assert docstring_problems("f", _documented("mu, Sigma, controls")) == []
    assert docstring_problems("f", _documented("mu, Sigma")) == [
        "f: parameter(s) controls missing from the Parameters section"
    ]
    assert docstring_problems("f", _documented("mu, Sigma, controls, rtol")) == [
        "f: the Parameters section names rtol, not in the signature"
    ]
    assert docstring_problems("f", _documented("mu, Sigma, controls", returns=False)) == ["f: no Returns section"]
    f = _documented("mu, Sigma, controls")
    f.__doc__ = f.__doc__.replace("Returns\n-------", "Result\n------")
    assert "does not parse as numpydoc" in docstring_problems("f", f)[0]

    @dataclasses.dataclass
    class Result:
        """A result.

        Attributes
        ----------
        t : float
            A time.
        """

        t: float
        status: str

    assert docstring_problems("Result", Result, ours=lambda init: True) == [
        "Result: parameter(s) status missing from the Parameters or Attributes section"
    ]


def _sources():
    return sorted((ROOT / "gtcore").rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docstrings_keep_their_backslashes(path):
    r"""TeX in a docstring needs a raw string: in a plain one ``\f``, ``\b``, ``\t``... are control
    characters (``\frac`` loses its ``\f``) and ``\|`` is an invalid escape."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        tree = compile(path.read_text(), str(path), "exec", ast.PyCF_ONLY_AST)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False) or ""
            bad = sorted({repr(c) for c in doc if c in "\a\b\t\v\f\r"})
            assert not bad, f"{getattr(node, 'name', 'module')}: control characters {bad} in the docstring"
