r"""The registry of mutations (``registry.toml``, package data): what each one changes, and applying it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = ["AREAS", "REGISTRY", "Mutation", "RegistryError", "load_registry"]

# the registry shipped with the package (not documented by value: its path is the machine's)
REGISTRY = Path(__file__).with_name("registry.toml")
#: what a mutation can be an error in (see the registry's header)
AREAS = ("paper", "beyond", "statistics")
_FIELDS = {"file", "original", "replacement", "models", "area", "tests", "probe"}


class RegistryError(ValueError):
    """The mutation registry is malformed, or a mutation does not apply to the tree; the message says which."""


@dataclass(frozen=True)
class Mutation:
    """One plausible error: replace ``original`` (occurring exactly once in ``file``) by ``replacement``.

    Attributes
    ----------
    name : the registry key
    file : path relative to the repository root, under ``gtcore/`` (never ``gtbook/``)
    original, replacement : the snippet and what it becomes
    models : the error this stands for, in one sentence
    area : one of ``AREAS``
    tests : the unit-test modules (paths relative to the root) that guard ``file``
    probe : Python that sets ``value`` from the file's code (see ``gtbook.mutations.run.run_probe``)
    """

    name: str
    file: str
    original: str
    replacement: str
    models: str
    area: str
    tests: tuple[str, ...]
    probe: str

    @property
    def module(self) -> str:
        """The dotted module the file holds (``gtcore/attention/dot.py`` -> ``gtcore.attention.dot``)."""
        parts = Path(self.file).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def mutated_text(self, root: Path) -> str:
        """The file's text under ``root`` with the mutation applied.

        Raises
        ------
        RegistryError
            The file is missing, the snippet does not occur exactly once, or the result does not compile.
        """
        path = Path(root) / self.file
        if not path.is_file():
            raise RegistryError(f"mutation {self.name!r}: {self.file} does not exist under {root}")
        text = path.read_text()
        count = text.count(self.original)
        if count != 1:
            raise RegistryError(
                f"mutation {self.name!r}: the snippet {self.original!r} occurs {count} times in "
                f"{self.file} (it must occur exactly once)"
            )
        mutated = text.replace(self.original, self.replacement)
        try:
            compile(mutated, self.file, "exec")
        except SyntaxError as exc:
            raise RegistryError(f"mutation {self.name!r}: the mutated {self.file} does not compile ({exc})") from None
        return mutated

    def apply(self, root: Path) -> None:
        """Write the mutated file into the tree at ``root`` (a temporary copy; see :meth:`mutated_text`)."""
        (Path(root) / self.file).write_text(self.mutated_text(root))

    def check(self, root: Path) -> list[str]:
        """Problems with this mutation against the tree at ``root`` (empty when it applies cleanly)."""
        problems = []
        try:
            self.mutated_text(root)
        except RegistryError as exc:
            problems.append(str(exc))
        for t in self.tests:
            if not (Path(root) / t).is_file():
                problems.append(f"mutation {self.name!r}: its test module {t} does not exist")
        return problems


def _entry(name: str, raw: dict, source: str) -> Mutation:
    missing = sorted(_FIELDS - set(raw))
    extra = sorted(set(raw) - _FIELDS)
    if missing or extra:
        raise RegistryError(
            f"{source}: [{name}] "
            + (f"lacks {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"has unknown fields {', '.join(extra)}" if extra else "")
        )
    for key in _FIELDS - {"tests"}:
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise RegistryError(f"{source}: [{name}] {key} must be a non-empty string")
    if raw["area"] not in AREAS:
        raise RegistryError(f"{source}: [{name}] area must be one of {', '.join(AREAS)}, got {raw['area']!r}")
    file = raw["file"]
    if not file.startswith("gtcore/") or not file.endswith(".py"):
        raise RegistryError(f"{source}: [{name}] file must be a module of the library gtcore/, got {file!r}")
    if raw["original"] == raw["replacement"]:
        raise RegistryError(f"{source}: [{name}] replacement equals original")
    tests = raw["tests"]
    if (
        not isinstance(tests, list)
        or not tests
        or not all(isinstance(t, str) and t.startswith("tests/") for t in tests)
    ):
        raise RegistryError(f"{source}: [{name}] tests must be a non-empty list of tests/*.py paths")
    if "value" not in raw["probe"]:
        raise RegistryError(f"{source}: [{name}] probe must set `value`")
    return Mutation(
        name=name,
        file=file,
        original=raw["original"],
        replacement=raw["replacement"],
        models=raw["models"].strip(),
        area=raw["area"],
        tests=tuple(tests),
        probe=raw["probe"],
    )


def load_registry(path: str | Path | None = None) -> dict[str, Mutation]:
    """The mutations of the registry at ``path`` (default: ``registry.toml`` beside this module), in file order.

    Raises
    ------
    RegistryError
        Not valid TOML, or an entry with a missing, unknown or malformed field (naming it).
    """
    path = REGISTRY if path is None else Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path.name}: not valid TOML ({exc})") from None
    return {name: _entry(name, raw, path.name) for name, raw in data.items()}
