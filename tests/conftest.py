"""Shared fixtures: seeded random problems, and the quick book built once in a temporary tree."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# The test modules live in tests/core, tests/book and tests/studies; their shared helpers (minibook, browser,
# public_api) live here, beside this conftest, and are imported by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Property tests draw the same examples on every run: CI is reproducible, like the chapters.
settings.register_profile("gtbook", derandomize=True, database=None, deadline=None)
settings.load_profile("gtbook")


@pytest.fixture
def rng():
    return np.random.default_rng(20260529)


def random_spd(rng, d, cond=10.0):
    """A symmetric positive-definite matrix with eigenvalues in [1, cond]."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return Q @ np.diag(np.linspace(1.0, cond, d)) @ Q.T


def particle_moment_errors(ctl, mu0, Sigma0, Ns, seeds=6, t1=1.0, steps=4):
    """Mean over ``seeds`` of the end-time moment error (|mu_N - mu| + |Sigma_N - Sigma|) of N RK4 tokens
    against the moment ODE, for each N in ``Ns`` (the N^(-1/2) ladder of the particle tests)."""
    from gtcore import gaussian_tokens, integrate_moments
    from gtcore.particles import simulate

    ref = integrate_moments(mu0, Sigma0, ctl, (0, t1))
    errs = []
    for N in Ns:
        e = []
        for seed in range(seeds):
            tr = simulate(gaussian_tokens(N, mu0, Sigma0, seed), ctl, (0, t1), steps, record_every=steps, device="cpu")
            e.append(np.linalg.norm(tr.mu[-1] - ref.mu[-1]) + np.linalg.norm(tr.Sigma[-1] - ref.Sigma[-1]))
        errs.append(np.mean(e))
    return errs


def random_psd(rng, d, r, scale=1.0):
    """A PSD matrix of rank r."""
    F = rng.standard_normal((d, r)) * scale
    S = F @ F.T
    return 0.5 * (S + S.T)


ROOT = Path(__file__).resolve().parents[1]


def snapshot(folder: Path):
    """Names and modification times of everything under ``folder`` (None when absent)."""
    if not folder.exists():
        return None
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


# The quick book is the suite's longest job (~10-15 min on 2 cores, most of it chapter 5 on one core).
# It starts in the background as soon as the collected tests are known to need it, and the tests that
# use it run last: the unit tests run meanwhile, on the core the book leaves idle.
_BOOK: dict = {}


def _start_quick_book() -> None:
    """Copy the tree's book sources to a temporary folder and start ``gtbook all --profile quick -j 2``
    there (stdout and stderr to ``build.log`` beside the tree); ``before`` snapshots the user's
    ``executed/`` and ``_build/``, which must not change."""
    before = {name: snapshot(ROOT / name) for name in ("executed", "_build")}
    tree = Path(tempfile.mkdtemp(prefix="gtbook-quick-book-")) / "gtbook"
    tree.mkdir()
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tree / name)
    for name in ("book", "notebooks", "_static"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "GTBOOK_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    log = open(tree.parent / "build.log", "w+")  # noqa: SIM115 - closed when the build is collected
    from gtbook.processes import die_with_parent

    # in pytest's process group (Ctrl-C reaches it), and stopped by the kernel if pytest dies (Linux)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gtbook", "all", "--profile", "quick", "-j", "2"],
        cwd=tree,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=die_with_parent,
    )
    _BOOK.update(tree=tree, before=before, proc=proc, log=log)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(session, config, items):
    book = [item for item in items if "built_book" in getattr(item, "fixturenames", ())]
    if not book or config.option.collectonly:
        return
    ids = {id(item) for item in book}
    items[:] = [item for item in items if id(item) not in ids] + book  # the book's tests last, in their order
    _start_quick_book()


def pytest_sessionfinish(session, exitstatus):
    """Stop a build still running (a run stopped early by ``-x``) and remove a built tree whose tests passed."""
    if not _BOOK:
        return
    proc = _BOOK["proc"]
    if proc.poll() is None:
        proc.terminate()  # gtbook stops its chapter workers and kernels on SIGTERM
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _BOOK["log"].close()
    if exitstatus == 0:
        shutil.rmtree(_BOOK["tree"].parent, ignore_errors=True)


@pytest.fixture(scope="session")
def built_book():
    """The real chapters, quick profile, built in a temporary copy of the tree: ``(tree, before)``,
    ``before`` being snapshots of the user's ``executed/`` and ``_build/``, which must not change."""
    if not _BOOK:
        _start_quick_book()
    rc = _BOOK["proc"].wait()
    log = _BOOK["log"]
    log.seek(0)
    out = log.read()
    if rc != 0:
        raise AssertionError(f"building the quick book failed (exit {rc}):\n{out[-6000:]}")
    return _BOOK["tree"], _BOOK["before"]


def gauss_hermite_rule(mu, Sigma, n=40):
    """Tensor Gauss-Hermite rule for N(mu, Sigma): nodes (n^d, d) and weights (n^d,) with
    sum_k w_k f(x_k) ~ E f(X); exact for polynomials of degree < 2n in each coordinate."""
    z, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    d = len(mu)
    Z = np.stack(np.meshgrid(*[z] * d, indexing="ij"), -1).reshape(-1, d)
    W = np.prod(np.stack(np.meshgrid(*[w] * d, indexing="ij"), -1).reshape(-1, d), axis=1)
    return np.asarray(mu) + Z @ np.linalg.cholesky(Sigma).T, W


def softmax_average_by_quadrature(queries, mu, Sigma, B, n=40):
    """For each query x: E[X e^{X^T B x}] / E[e^{X^T B x}], X ~ N(mu, Sigma), the softmax attention
    average over infinitely many keys, by Gauss-Hermite quadrature over the keys (no tilt formula)."""
    keys, w = gauss_hermite_rule(mu, Sigma, n)
    logits = (np.asarray(queries) @ np.asarray(B).T) @ keys.T  # [i, j] = key_j^T B query_i
    logits -= logits.max(axis=1, keepdims=True)
    p = w * np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    return p @ keys
