"""Fuzzing the public entry points with careless argument values (issue 16).

Every call to :class:`~gtcore.Controls`, :func:`~gtcore.integrate_moments` or
:func:`~gtcore.simulate` must end in one of two ways: a ``ValueError``/``TypeError`` whose one-line
message names one of the function's arguments, or a result that is finite and valid (a status the
function documents, symmetric positive-semidefinite covariances, times inside the span). Never a
raw error from numpy, scipy or torch, a NaN, a ``RuntimeWarning`` or ``ComplexWarning``, or a hang.

The work per example is bounded by the arguments themselves (``max_nfev`` and ``steps`` are drawn
small), and a watchdog turns a hang into a failure naming the example instead of a stuck run; no
assertion is made on time. Hypothesis runs derandomised (``tests/conftest.py``), so every run draws
the same examples.
"""

import re
import signal
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gtcore import Controls, MomentTrajectory, ParticleTrajectory, integrate_moments, simulate
from gtcore._validation import check_covariance

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: seconds one example may take before the watchdog calls it a hang (the examples take milliseconds)
WATCHDOG_S = 30

# ------------------------------------------------------------------------------ strategies
# Each example draws valid arguments, varied (edge values included), then replaces none or one of
# them by a careless value: so both the results and every argument's error path are exercised.
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
special = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 1e-300])
scalar = st.one_of(finite, finite, special)
junk = st.one_of(st.none(), st.text(max_size=3), st.just([[1.0, 2.0], [3.0]]), st.just(object()),
                 st.just(True), st.just(1j))
shapes = st.sampled_from([(2, 2), (2,), (3, 3), (0, 0), (0,), (1, 2, 2), (2, 2, 2), (2, 3), (), (1,)])


def arrays(shape=shapes):
    """Real, complex, integer or boolean arrays of an arbitrary shape, or junk."""
    return st.one_of(
        hnp.arrays(np.float64, shape, elements=scalar),
        hnp.arrays(np.complex128, shape, elements=st.complex_numbers(max_magnitude=10, allow_nan=False)),
        hnp.arrays(np.int64, shape, elements=st.integers(-3, 3)),
        hnp.arrays(np.bool_, shape),
        junk,
    )


wild_number = st.one_of(special, st.integers(-2, 0), st.floats(-1e3, 0), junk, st.just("1e-8"))
wild_span = st.one_of(st.tuples(scalar, scalar), arrays(), st.just((1.0, 1.0)), st.just((2.0, 1.0)),
                      st.just((0.0, np.inf)))
wild_count = st.one_of(st.integers(-3, 0), st.just(2.5), st.just(True), st.none(), st.just("3"),
                       st.just(np.nan))


def mats(d, lo=-2.0, hi=2.0, heads=None):
    shape = (d, d) if heads is None else (heads, d, d)
    return hnp.arrays(np.float64, shape, elements=st.floats(lo, hi))


@st.composite
def psd(draw, d):
    """A PSD matrix, maybe rank-deficient or tiny or large."""
    F = draw(hnp.arrays(np.float64, (d, draw(st.integers(1, d))), elements=st.floats(-3, 3)))
    return draw(st.sampled_from([1.0, 1.0, 1e-6, 1e3])) * (F @ F.T)


@st.composite
def valid_controls(draw, d):
    size = draw(st.sampled_from([2.0, 2.0, 50.0]))
    heads = draw(st.sampled_from([None, None, 2]))
    return Controls(A=draw(mats(d, -size, size)), b=draw(hnp.arrays(np.float64, (d,), elements=st.floats(-2, 2))),
                    V=draw(mats(d, -size, size, heads)), B=draw(mats(d, -size, size, heads)))


def maybe(strategy):
    return st.one_of(st.none(), strategy, strategy)


def corrupt(draw, args, wild):
    """Replace none (a third of the time) or one argument of ``args`` by its careless value."""
    bad = draw(st.sampled_from([None, None, None, *wild]))
    if bad is not None:
        args[bad] = draw(wild[bad])
        event(f"corrupted: {bad}")
    return args


# ------------------------------------------------------------------------------- the oracle
@contextmanager
def watchdog(seconds=WATCHDOG_S):
    def hang(signum, frame):
        raise AssertionError(f"no answer within {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def outcome(call, arg_names):
    """Run ``call``: the result, or None after a clear error naming one of ``arg_names``."""
    with watchdog(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        try:
            return call()
        except (ValueError, TypeError) as exc:
            msg = str(exc)
            assert "\n" not in msg, msg
            named = [n for n in arg_names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", msg)]
            assert named, f"{type(exc).__name__} names no argument of {arg_names}: {msg}"
            event(f"refused: {named[0]}")
            return None


def assert_valid_moments(mu, Sigma):
    assert np.isfinite(mu).all() and np.isfinite(Sigma).all()
    for S in Sigma:
        check_covariance(S, "Sigma")  # symmetric, PSD to round-off: a valid input again


# ---------------------------------------------------------------------------------- the tests
CONTROLS_ARGS = ("A", "b", "V", "B", "U", "W", "c", "attention", "d")


@st.composite
def controls_args(draw):
    d = draw(st.integers(1, 3))
    heads = draw(st.sampled_from([None, 1, 2]))
    args = {"A": draw(maybe(mats(d, -1e3, 1e3))), "b": draw(maybe(hnp.arrays(np.float64, (d,), elements=finite))),
            "V": draw(maybe(mats(d, -1e3, 1e3, heads))), "B": draw(maybe(mats(d, -1e3, 1e3, heads))),
            "attention": "dot"}
    if all(args[k] is None for k in "AbVB"):
        args["A"] = np.eye(d)
    wild = {k: arrays() for k in "AbVB"}
    wild["attention"] = st.sampled_from(["nope", None, 3, "DOT"])
    return corrupt(draw, args, wild)


@FUZZ
@given(args=controls_args())
def test_fuzz_controls(args):
    ctl = outcome(lambda: Controls(**args), CONTROLS_ARGS)
    if ctl is not None:
        event("valid")
        assert ctl.d >= 1
        for arr in (ctl.A, ctl.b, ctl.V, ctl.B):
            assert arr.dtype == np.float64 and np.isfinite(arr).all()
        assert ctl.A.shape == (ctl.d, ctl.d) and ctl.V.shape == ctl.B.shape == (ctl.heads, ctl.d, ctl.d)


MOMENTS_ARGS = ("mu0", "Sigma0", "controls", "t_span", "t_eval", "rtol", "atol", "blowup_norm", "max_nfev")


@st.composite
def moments_args(draw):
    d = draw(st.integers(1, 3))
    t0 = draw(st.floats(-10, 10))
    length = draw(st.one_of(st.floats(1e-3, 10), st.floats(1e-3, 10), st.floats(10, 1e3),
                            st.sampled_from([1e8, 1e300])))
    args = {"mu0": draw(hnp.arrays(np.float64, (d,), elements=st.floats(-10, 10))), "Sigma0": draw(psd(d)),
            "controls": draw(valid_controls(d)), "t_span": (t0, t0 + length),
            "rtol": draw(st.floats(1e-13, 1e-3)), "atol": draw(st.floats(1e-15, 1e-3)),
            "blowup_norm": draw(st.sampled_from([1e8, 1e4, 1e12])),
            "max_nfev": draw(st.one_of(st.just(5000), st.just(5000), st.integers(1, 5000)))}
    wild = {"mu0": arrays(), "Sigma0": arrays(), "t_span": wild_span, "rtol": wild_number, "atol": wild_number,
            "blowup_norm": wild_number, "max_nfev": wild_count,
            "controls": st.one_of(valid_controls(d + 1), junk)}
    return corrupt(draw, args, wild)


@FUZZ
@given(args=moments_args())
def test_fuzz_integrate_moments(args):
    tr = outcome(lambda: integrate_moments(args["mu0"], args["Sigma0"], args["controls"], args["t_span"],
                                           rtol=args["rtol"], atol=args["atol"], blowup_norm=args["blowup_norm"],
                                           max_nfev=args["max_nfev"]), MOMENTS_ARGS)
    if tr is not None:
        event(f"status {tr.status}")
        assert isinstance(tr, MomentTrajectory)
        assert tr.status in ("completed", "blowup", "budget", "failed")
        assert_valid_moments(tr.mu, tr.Sigma)
        t0, t1 = (float(x) for x in args["t_span"])
        assert tr.t[0] == t0 and np.all(np.diff(tr.t) > 0) and tr.t[-1] <= t1
        assert (tr.t[-1] == t1) == (tr.status == "completed")
        assert tr.nfev <= args["max_nfev"] + 30  # the budget holds, to one step


SIMULATE_ARGS = ("x0", "controls", "t_span", "steps", "method", "dtype", "device", "average", "blowup_norm",
                 "max_step", "record_every", "t_eval", "ff")


@st.composite
def simulate_args(draw):
    d = draw(st.integers(1, 3))
    n = draw(st.integers(2, 6))
    t0 = draw(st.floats(-1, 1))
    args = {"x0": draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-5, 5))),
            "controls": draw(valid_controls(d)),
            "t_span": (t0, t0 + draw(st.floats(1e-3, 10))), "steps": draw(st.integers(1, 20)),
            "method": draw(st.sampled_from(["rk4", "euler", "midpoint"])),
            "dtype": draw(st.sampled_from([torch.float64, torch.float32, "float64", np.float32])),
            "device": draw(st.sampled_from(["cpu", "auto"])),
            "average": draw(st.sampled_from(["empirical", "gaussian"])),
            "blowup_norm": draw(st.sampled_from([1e8, 1e3, 1e12]))}
    wild = {"x0": st.one_of(arrays(), st.just(np.ones((1, d))), st.just(torch.ones(3, d, dtype=torch.int64))),
            "t_span": wild_span, "steps": wild_count, "method": st.sampled_from(["rk5", None, 4]),
            "dtype": st.sampled_from([torch.int64, torch.bfloat16, torch.float16, "float65", None, 3,
                                      torch.complex64]),
            "device": st.sampled_from(["gpu", 3, None, "cuda:7", "meta"]),
            "average": st.sampled_from(["mean", None]), "blowup_norm": wild_number,
            "controls": st.one_of(valid_controls(d + 1), junk)}
    return corrupt(draw, args, wild)


@FUZZ
@given(args=simulate_args())
def test_fuzz_simulate(args):
    out = outcome(lambda: simulate(args.pop("x0"), args.pop("controls"), args.pop("t_span"), args.pop("steps"),
                                   **args), SIMULATE_ARGS)
    if out is not None:
        event(f"status {out.status}")
        assert isinstance(out, ParticleTrajectory) and out.status in ("completed", "blowup")
        assert_valid_moments(out.mu, out.Sigma)
        assert np.isfinite(out.final_tokens).all()


def test_the_watchdog_reports_a_hang():
    import time

    with pytest.raises(AssertionError, match="hang"), watchdog(0.05):
        time.sleep(1)
