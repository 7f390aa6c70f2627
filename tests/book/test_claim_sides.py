"""Every reproduction of the covered chapters passes its traced sides (gtbook.sides), and the studies that compute
both sides trace them apart (gtbook.studies.traced)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from gtbook.claims import evaluate_claim
from gtbook.sides import shared_code, side
from gtbook.studies.traced import Sides, collect, merge, no_prediction, observed, predicted
from gtcore import Controls, gaussian_tokens, integrate_moments
from gtcore.particles import simulate

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: the chapters whose reproductions must pass ``sides=`` (extend as chapters are traced)
CHAPTERS = (
    "01_gaussian_invariance",
    "02_beyond_invariance",
    "03_rank_and_reachability",
    "04_stability_regimes",
    "05_pretrained_moments",
    "06_prescribed_attention",
    "07_attention_families",
    "08_regime_atlas",
    "09_learning_reachability",
)

#: the claim kinds that compare an independent system with a prediction
EMPIRICAL_KINDS = ("reproduces", "not_reproduced")


def claims_without_sides(source: str) -> list[str]:
    """``line: kind`` of every ``claim(...)`` call of kind ``reproduces``/``not_reproduced`` with no ``sides=``, and of
    every call whose ``kind`` is not a literal (its kind cannot be read, so it cannot be cleared)."""
    out = []
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        if node.func.id != "claim":
            continue
        kw = {k.arg: k.value for k in node.keywords}
        kinds = literal_kinds(kw.get("kind"))
        if kinds is None:
            out.append(f"line {node.lineno}: kind is not a literal string")
        elif "sides" not in kw:
            out.extend(f"line {node.lineno}: {k} claim without sides=" for k in kinds if k in EMPIRICAL_KINDS)
    return out


def literal_kinds(node: ast.expr | None) -> list[str] | None:
    """The kinds a ``kind=`` argument can take: a literal string, or a conditional between two literal strings
    (``"reproduces" if k == n else "not_reproduced"``, the recorded outcome of a criterion fixed before the run);
    None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = literal_kinds(node.body), literal_kinds(node.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_reproduction_passes_its_sides(chapter):
    source = (NOTEBOOKS / f"{chapter}.py").read_text()
    assert "claim(" in source
    assert claims_without_sides(source) == []


def test_the_reader_sees_a_missing_side():
    src = (
        'claim("a", 1.0, lt=2, statement="s", kind="reproduces", scope=S)\n'
        'claim("b", 1.0, lt=2, statement="s", kind="reproduces", scope=S, sides=x.sides)\n'
        'claim("c", 1.0, lt=2, statement="s", kind="control", scope=S)\n'
        'claim("d", 1.0, lt=2, statement="s", kind=k, scope=S, sides=x.sides)\n'
        'for r in rs:\n    claim("e", r, gt=0, statement="s", kind="not_reproduced", scope=S)\n'
        'claim("f", 1.0, lt=2, statement="s", kind="reproduces" if ok else "not_reproduced", scope=S)\n'
        'claim("g", 1.0, lt=2, statement="s", kind="reproduces" if ok else "not_reproduced", scope=S, sides=x)\n'
        'claim("h", 1.0, lt=2, statement="s", kind="control" if ok else k, scope=S, sides=x)\n'
    )
    assert claims_without_sides(src) == [
        "line 1: reproduces claim without sides=",
        "line 4: kind is not a literal string",
        "line 6: not_reproduced claim without sides=",
        "line 7: reproduces claim without sides=",
        "line 7: not_reproduced claim without sides=",
        "line 9: kind is not a literal string",
    ]


# ------------------------------------------------------------------------------ gtbook.studies.traced
@pytest.fixture
def layer():
    return Controls(A=[[0.2, 0.6], [-0.6, 0.1]], b=[0.3, 0.0], V=0.5 * np.eye(2), B=[[-0.3, 0.1], [0.0, -0.2]])


def test_marked_blocks_record_into_every_active_collector_and_nothing_outside(layer):
    x0 = gaussian_tokens(64, np.zeros(2), np.eye(2), 0)
    with observed():  # no collector: nothing is traced
        simulate(x0, layer, (0.0, 0.2), 2, device="cpu")
    with collect() as outer:
        with collect() as inner, observed():
            tr = simulate(x0, layer, (0.0, 0.2), 2, device="cpu")
        with predicted():
            integrate_moments(tr.mu[0], tr.Sigma[0], layer, (0.0, 0.2))
        integrate_moments(tr.mu[0], tr.Sigma[0], layer, (0.0, 0.2))  # unmarked: on neither side
    assert "gtcore.particles:simulate" in inner.observed.functions
    assert inner.predicted.functions == set()
    assert outer.observed.functions == inner.observed.functions
    assert "gtcore.moments.ode:integrate_moments" in outer.predicted.functions
    assert not any(f.startswith("gtcore.moments") for f in outer.observed.functions)
    assert shared_code(*outer) == []
    both = merge(inner, outer)
    assert both.predicted.functions == outer.predicted.functions
    assert no_prediction(outer).predicted.functions == set()
    assert inner.with_prediction(outer).predicted is outer.predicted


def test_a_study_traces_its_tokens_and_its_ode_apart(layer):
    from gtbook.studies.invariance.harness import mean_field_study

    st = mean_field_study([0.0, 0.0], np.eye(2), layer, (0, 0.3), [50, 100], 2, 2, progress=False)
    obs, pred = st.sides
    assert any(f.startswith("gtcore.particles:") for f in obs.functions)
    assert any(f.startswith("gtcore.moments.ode:") for f in pred.functions)
    assert shared_code(obs, pred) == []
    rec = evaluate_claim(
        "slope",
        st.slope,
        statement="invariance",
        kind="reproduces",
        lt=10.0,
        scope={"system": "tokens", "d": 2},
        sides=st.sides,
    )
    assert "gtcore.particles:simulate" in rec.sides["observed"]


def test_sides_are_a_tuple_the_claims_accept():
    s = Sides.empty()
    assert isinstance(s, tuple) and len(s) == 2 and s.observed.label == "observed"


# ------------------------------------------------------------------------------ chapter 9's independent statistics
def test_a_floor_built_with_the_trainers_assignment_is_refused_and_the_books_is_not():
    """The network is trained on gtcore.training.optimal_assignment: a noise floor measured with
    gtcore.training.w2_squared runs the same code (refused); chapter 9's floors use the book's statistic."""
    from gtbook.studies.learning import statistics
    from gtcore.training import train_transformer, w2_squared

    mu, S = np.zeros(2), np.eye(2)

    def draw(rng):
        return gaussian_tokens(16, mu, S, seed=rng)

    with side("observed") as obs:
        train_transformer(draw, draw, layers=1, steps=2, seed=0, progress=False)
    rng = np.random.default_rng(1)
    x, y = draw(rng), draw(rng)
    with side("predicted") as gtcore_floor:
        w2_squared(x, y)
    with side("predicted") as book_floor:
        statistics.w2_squared(x, y)
    assert "gtcore._transport:optimal_assignment" in shared_code(obs, gtcore_floor)
    with pytest.raises(ValueError, match="computed by the code path it is compared with"):
        evaluate_claim(
            "floor",
            0.5,
            statement="reachability",
            kind="reproduces",
            lt=1.0,
            scope={"system": "trained model", "d": 2},
            sides=(obs, gtcore_floor),
        )
    assert shared_code(obs, book_floor) == []
    from gtbook.studies.learning.harness import null_losses

    floor = null_losses.__wrapped__(np.zeros(3), np.diag([1.0, 0.5, 0.2]), n_tokens=16, rank=2, repeats=3, seed=2)
    assert "gtcore._transport:best_rank_approximation" in floor.sides.predicted.functions
    assert floor.sides.observed.functions == set()
    assert shared_code(obs, floor.sides.predicted) == []


def test_the_books_w2_is_the_optimal_assignment():
    """Against brute force over every permutation (N = 6), and equal to gtcore's."""
    from itertools import permutations

    from gtbook.studies.learning.statistics import w2_squared
    from gtcore.training import w2_squared as gtcore_w2

    rng = np.random.default_rng(3)
    for _ in range(5):
        x, y = rng.standard_normal((6, 3)), rng.standard_normal((6, 3)) + 0.5
        brute = min(np.mean(np.sum((x - y[list(p)]) ** 2, axis=1)) for p in permutations(range(6)))
        assert w2_squared(x, y) == pytest.approx(brute, rel=1e-12)
        assert w2_squared(x, y) == gtcore_w2(x, y)
    with pytest.raises(ValueError, match="x and y"):
        w2_squared(np.zeros((3, 2)), np.zeros((4, 2)))


def test_the_books_gaussian_w2_against_closed_forms():
    """Commuting covariances: W2^2 = |dm|^2 + sum (sqrt a - sqrt b)^2; a rank-deficient one; gtcore's value."""
    from gtbook.studies.learning.statistics import gaussian_w2
    from gtcore.stats.gaussianity import bures_wasserstein

    rng = np.random.default_rng(4)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    a, b = np.array([1.0, 2.0, 0.5]), np.array([0.3, 2.0, 0.0])
    m1, m2 = rng.standard_normal(3), rng.standard_normal(3)
    exact = np.sqrt(np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2))
    S1, S2 = (Q * a) @ Q.T, (Q * b) @ Q.T
    assert gaussian_w2(m1, S1, m2, S2) == pytest.approx(exact, rel=1e-7)
    G = rng.standard_normal((3, 3))
    S3 = G @ G.T
    assert gaussian_w2(m1, S3, m2, S2) == pytest.approx(bures_wasserstein(m1, S3, m2, S2), rel=1e-7)
    assert gaussian_w2(m1, S3, m1, S3) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="mu1"):
        gaussian_w2(m1, S1, m2[:2], S2)
