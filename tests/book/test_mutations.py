"""The mutation check (gtbook.mutations): the registry applies, probes see a change, the results
round-trip into the page and the report, and three registered mutations are caught by the quick book."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from conftest import ROOT
from gtbook.mutations import RESULTS, load_registry, load_results, save_check
from gtbook.mutations.page import mutations_markdown
from gtbook.mutations.registry import Mutation, RegistryError
from gtbook.mutations.results import Catch, MutationResult, Outcome, Probe, UnitTests, summary_sentence
from gtbook.mutations.run import affected_chapters, mutations_named, probe_changed, run_check, run_probe
from gtbook.report import report_markdown


def test_registry_has_twenty_mutations_that_apply_once_and_compile():
    registry = load_registry()
    assert len(registry) >= 20
    for m in registry.values():
        assert m.check(ROOT) == [], m.name
        assert m.file.startswith("gtcore/") and not m.file.startswith("gtbook/")
    files = {m.file for m in registry.values()}
    # the equations and statistics the check must cover
    for f in (
        "attention/dot.py",
        "attention/l2.py",
        "attention/sinkhorn.py",
        "moments/ode.py",
        "moments/layers.py",
        "particles.py",
        "riccati.py",
        "stability/equilibria.py",
        "reachability/steering.py",
        "stats/mixtures.py",
        "relu.py",
        "stats/gaussianity.py",
        "models/prescribed.py",
    ):
        assert f"gtcore/{f}" in files, f
    assert {m.area for m in registry.values()} == {"paper", "beyond", "statistics"}


def test_every_mutation_lies_in_code_some_chapter_imports():
    for m in load_registry().values():
        assert affected_chapters(ROOT, m.module), f"{m.name}: no chapter imports {m.module}"


def _mutation(**kw):
    base = dict(
        name="m",
        file="gtcore/moments/ode.py",
        original="return dmu, MS + MS.T",
        replacement="return dmu, MS.T + MS",
        models="x",
        area="paper",
        tests=("tests/core/test_moments.py",),
        probe="value = 1.0",
    )
    return Mutation(**{**base, **kw})


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(original="Sigma"), r"occurs \d\d+ times"),
        (dict(original="this text is nowhere"), "occurs 0 times"),
        (dict(replacement="return dmu, MS +"), "does not compile"),
        (dict(tests=("tests/test_nothing_here.py",)), "does not exist"),
    ],
)
def test_a_mutation_that_does_not_apply_cleanly_is_named(kw, match):
    problems = _mutation(**kw).check(ROOT)
    assert problems and any(re.search(match, p) for p in problems)


@pytest.mark.parametrize(
    "text, match",
    [
        ('[a]\nfile = "gtcore/x.py"\n', "lacks"),
        (
            '[a]\nfile="gtbook/cli.py"\noriginal="a"\nreplacement="b"\nmodels="m"\narea="paper"\n'
            'tests=["tests/test_x.py"]\nprobe="value = 1"\n',
            "a module of the library gtcore",
        ),
        (
            '[a]\nfile="gtcore/riccati.py"\noriginal="a"\nreplacement="b"\nmodels="m"\narea="elsewhere"\n'
            'tests=["tests/test_x.py"]\nprobe="value = 1"\n',
            "area",
        ),
        (
            '[a]\nfile="gtcore/riccati.py"\noriginal="a"\nreplacement="a"\nmodels="m"\narea="paper"\n'
            'tests=["tests/test_x.py"]\nprobe="value = 1"\n',
            "equals",
        ),
        ("[a\n", "not valid TOML"),
    ],
)
def test_a_malformed_registry_is_refused(tmp_path, text, match):
    path = tmp_path / "registry.toml"
    path.write_text(text)
    with pytest.raises(RegistryError, match=match):
        load_registry(path)


def test_the_probe_sees_a_real_change_and_not_an_equivalent_one(tmp_path):
    """An equivalent rewrite (MS.T + MS) leaves the probe unchanged; a dropped term changes it."""
    from gtbook.mutations.run import copy_tree

    registry = load_registry()
    real = registry["covariance_drift_without_Sigma_At"]
    pristine = copy_tree(ROOT, tmp_path / "pristine")
    before = run_probe(pristine, real.probe)
    assert "numbers" in before and len(before["numbers"]) == 9
    for m, changed in ((real, True), (_mutation(probe=real.probe), False)):
        tree = copy_tree(pristine, tmp_path / f"t{changed}")
        m.apply(tree)
        assert probe_changed(before, run_probe(tree, m.probe)) is changed


def test_a_mutated_trees_jobs_carry_the_key_its_workers_check(tmp_path):
    """The jobs run in a mutated tree are keyed with that tree's library, the one its workers import
    (PYTHONPATH): keyed with this process's (unmutated) library, a worker refused to publish a chapter that
    passed every claim ('changed while it ran (library)'), and a surviving mutation was recorded as an
    exception."""
    import subprocess
    import sys

    from gtbook import provenance
    from gtbook.mutations.run import copy_tree, planned_in_tree
    from gtbook.mutations.trees import _env

    m = load_registry()["trace_certificate_rate_doubled"]
    chapter = "04_stability_regimes"
    tree = copy_tree(ROOT, tmp_path / "tree")
    m.apply(tree)
    job = planned_in_tree(tree, "quick", [chapter])[chapter]
    code = "import sys; from gtbook import provenance; print(provenance.library_hash(open(sys.argv[1]).read()))"
    worker = subprocess.run(
        [sys.executable, "-c", code, str(job.chapter.path)],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert job.components["library"] == worker
    assert provenance.library_hash(job.source) != worker  # this process's library: the mutation is not in it


def test_probe_comparison():
    assert not probe_changed({"numbers": [1.0, 2.0]}, {"numbers": [1.0, 2.0 + 1e-13]})
    assert probe_changed({"numbers": [1.0, 2.0]}, {"numbers": [1.0, 2.001]})
    assert probe_changed({"numbers": [1.0]}, {"error": "ValueError: x"})
    assert probe_changed({"numbers": [float("nan")]}, {"numbers": [1.0]})
    assert not probe_changed({"text": "a"}, {"text": "a"})
    # a replacement naming what its function does not define is a broken entry, not a change
    assert not probe_changed({"numbers": [1.0]}, {"error": "NameError: name 'controls' is not defined"})


def _result(name, outcome, claim=None, caught=True, first=True):
    catch = (
        None
        if outcome is Outcome.SURVIVED
        else Catch(
            "04_stability_regimes", outcome, claim=claim, error=None if claim else "ValueError: boom", first=first
        )
    )
    return MutationResult(
        name=name,
        file="gtcore/riccati.py",
        models="A plausible error.",
        area="paper",
        outcome=outcome,
        caught_by=catch,
        catches=[catch] if catch else [],
        chapters=["04_stability_regimes"],
        unit_tests=UnitTests(["tests/core/test_stability.py"], caught),
        probe=Probe({"numbers": [1.0]}, {"numbers": [2.0]}, True),
        date="2026-06-07T00:00:00Z",
    )


def test_results_round_trip_into_the_page_and_the_report(tmp_path):
    names = list(load_registry())
    results = [
        _result(names[0], Outcome.DERIVATION, "predicted vs detected blow-up time"),
        _result(names[1], Outcome.CONSISTENCY, "equilibrium residual (relative)", caught=False),
        _result(names[2], Outcome.EXCEPTION),
        _result(names[3], Outcome.SURVIVED),
        _result(names[4], Outcome.DERIVATION, "trajectory converges to Sigma*", first=False),
    ]
    path = tmp_path / RESULTS
    save_check(path, {"date": "2026-06-07T00:00:00Z", "profile": "quick", "jobs": 2, "wall_s": 60.0}, results[:2])
    save_check(path, {"date": "2026-06-08T00:00:00Z", "profile": "quick", "jobs": 2, "wall_s": 60.0}, results[2:])
    run, back = load_results(path)  # the second run adds to the first: the registry's order is kept
    assert [r.name for r in back] == names[:5] and run["date"].startswith("2026-06-08")
    assert [r.as_dict() for r in back] == [r.as_dict() for r in results]
    page = mutations_markdown(path)
    assert "# What the claims can catch" in page and "**5 mutations**: 0 caught by a *reproduces* claim, 2 by a" in page
    assert "`trajectory converges to Sigma*` (after an earlier claim of the chapter failed) | derivation |" in page
    assert (
        f"| `{names[0]}` | `gtcore/riccati.py` | A plausible error. | 04_stability_regimes: "
        "`predicted vs detected blow-up time` | derivation | yes |" in page
    )
    assert f"| `{names[3]}` |" in page and "**survived**" in page and "| **no** |" in page
    assert "## Not caught by a reproduction or a derivation" in page and "Registered but not in the last run" in page
    sentence = summary_sentence(path)
    assert (
        "of 5 plausible errors" in sentence
        and "0 fail a *reproduces* claim, 2 a *derivation* claim, "
        "1 only a consistency check or a control, 1 only an exception"
        in sentence
    )
    assert "the unit tests catch 4 of the 5" in sentence
    executed = tmp_path / "executed"  # the report reads book/mutations.json beside executed/
    executed.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["gtbook"] = {"profile": "quick", "parameters": {"seed": 0}, "runtime_s": 1.0}
    nbformat.write(nb, executed / "01_a.ipynb")
    assert sentence in report_markdown(executed)


def test_an_unreadable_results_file_is_named(tmp_path):
    path = tmp_path / "mutations.json"
    path.write_text(json.dumps({"format": 99, "results": []}))
    with pytest.raises(ValueError, match=r"mutations\.json"):
        load_results(path)
    assert "unreadable" in summary_sentence(path)


#: three fast, representative mutations and the chapter that must catch each with a strong claim: the
#: finite-N kernel (a reproduction by tokens), the blow-up time (a derivation against the integrator),
#: the book's ReLU rate (a derivation)
CI_MUTATIONS = {
    "dot_kernel_default_scale": "01_gaussian_invariance",
    "blowup_kernel_transposed": "04_stability_regimes",
    "relu_rate_wrong_side_of_kink": "02_beyond_invariance",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CI_MUTATIONS))
def test_the_quick_book_catches_representative_mutations(name):
    """Each runs its one chapter under the mutation (no baseline, no unit tests: about a minute each)."""
    _run, (r,) = run_check(
        ROOT, [name], chapters=[CI_MUTATIONS[name]], unit_tests=False, baseline=False, log=lambda msg: None
    )
    assert r.probe.changed
    assert r.outcome in (Outcome.REPRODUCES, Outcome.DERIVATION), (r.outcome, r.caught_by)
    assert r.caught_by.chapter == CI_MUTATIONS[name] and r.caught_by.claim


# ------------------------------------------------------------------ faults: the results file, an interrupted run
def _fake_result(m, commit="", profile="quick"):
    return MutationResult(
        name=m.name,
        file=m.file,
        models=m.models,
        area=m.area,
        outcome=Outcome.SURVIVED,
        caught_by=None,
        date="2026-06-07T00:00:00Z",
        commit=commit,
        profile=profile,
    )


def test_a_results_file_of_another_format_is_refused_before_the_first_mutation(tmp_path, monkeypatch, capsys):
    """Before, every mutation ran first (hours) and then ``save_check`` died with a raw ValueError."""
    from gtbook import cli
    from gtbook.mutations import run as mrun

    def ran(*args, **kwargs):
        raise AssertionError("a mutation or the baseline ran before the results file was checked")

    monkeypatch.setattr(mrun, "run_baseline", ran)
    monkeypatch.setattr(mrun, "run_mutation", ran)
    old = tmp_path / "mutations.json"
    old.write_text(json.dumps({"format": 0, "results": []}))
    name = next(iter(load_registry()))
    code = cli.main(["mutations", "--only", name, "--output", str(old), "--root", str(ROOT)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"gtbook: error: {old}: not a mutation results file of format")
    assert json.loads(old.read_text())["format"] == 0  # untouched


def test_a_results_folder_that_cannot_be_written_is_refused_before_the_first_mutation(tmp_path, monkeypatch):
    from gtbook.chapters import BookError
    from gtbook.mutations import run as mrun

    monkeypatch.setattr(mrun, "run_mutation", lambda *a, **k: pytest.fail("a mutation ran"))
    blocked = tmp_path / "file"
    blocked.write_text("a file where the results folder should be")
    name = next(iter(load_registry()))
    with pytest.raises(BookError, match="could not save into it"):
        run_check(
            ROOT, [name], baseline=False, unit_tests=False, results=blocked / "mutations.json", log=lambda msg: None
        )


def test_results_are_saved_as_each_mutation_finishes_and_a_stopped_run_resumes(tmp_path, monkeypatch):
    from gtbook.mutations import run as mrun

    names = list(load_registry())[:3]
    calls = []

    def first_then_stop(m, *args, commit="", profile="quick", **kwargs):
        calls.append(m.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C during the second mutation
        return _fake_result(m, commit, profile)

    monkeypatch.setattr(mrun, "run_mutation", first_then_stop)
    path = tmp_path / "book" / "mutations.json"
    with pytest.raises(KeyboardInterrupt):
        run_check(ROOT, names, baseline=False, unit_tests=False, results=path, log=lambda msg: None)
    run, saved = load_results(path)
    assert run["partial"] is True and run["done"] == names[:1] and [r.name for r in saved] == names[:1]

    calls.clear()
    monkeypatch.setattr(
        mrun,
        "run_mutation",
        lambda m, *a, commit="", profile="quick", **k: calls.append(m.name) or _fake_result(m, commit, profile),
    )
    logged = []
    run, results = run_check(ROOT, names, baseline=False, unit_tests=False, results=path, log=logged.append)
    assert calls == names[1:]  # the first is not measured again
    assert any(line.startswith("resuming: 1 of 3 mutations") for line in logged)
    assert [r.name for r in results] == names and "partial" not in run
    run_back, back = load_results(path)
    assert "partial" not in run_back and [r.name for r in back] == names

    calls.clear()  # a finished run is not resumed: the same call measures all again
    run_check(ROOT, names, baseline=False, unit_tests=False, results=path, log=lambda msg: None)
    assert calls == names


def test_a_stopped_run_of_other_settings_is_not_resumed(tmp_path, monkeypatch):
    from gtbook.mutations import run as mrun

    names = list(load_registry())[:2]
    path = tmp_path / "mutations.json"
    save_check(
        path,
        {"partial": True, "done": names[:1], "profile": "full"},
        [_fake_result(m) for m in mutations_named(names[:1])],
    )
    calls = []
    monkeypatch.setattr(
        mrun,
        "run_mutation",
        lambda m, *a, commit="", profile="quick", **k: calls.append(m.name) or _fake_result(m, commit, profile),
    )
    run_check(ROOT, names, baseline=False, unit_tests=False, results=path, log=lambda msg: None)
    assert calls == names
