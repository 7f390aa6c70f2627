"""Fuzzing the public entry points with careless argument values (issues 16 and 24).

Every call to :class:`~gtcore.Controls`, :func:`~gtcore.integrate_moments`, :func:`~gtcore.simulate` or
the prescribed builders (:mod:`gtcore.models.prescribed`) must end in one of two ways: a
``ValueError``/``TypeError`` whose one-line message names one of the function's arguments, or a result
that is finite and valid (a status the function documents, symmetric positive-semidefinite covariances,
times inside the span). Never a
raw error from numpy, scipy or torch, a NaN, a ``RuntimeWarning`` or ``ComplexWarning``, or a hang.

The work per example is bounded by the arguments themselves (``max_nfev`` and ``steps`` are drawn
small), and a watchdog turns a hang into a failure naming the example instead of a stuck run; no
assertion is made on time. Hypothesis runs derandomised (``tests/conftest.py``), so every run draws
the same examples.

The generators cover the three attention types (dot product, L2 with query and key maps, Sinkhorn),
piecewise controls with breaks inside the span, ``t_eval`` (valid and careless), and token arrays as
they come: C- and Fortran-ordered, negative-stride views, torch tensors of every floating dtype, strided
or requiring grad.
"""

import re
import signal
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gtcore import (
    Controls,
    MomentTrajectory,
    ParticleTrajectory,
    PiecewiseControls,
    Status,
    integrate_moments,
    simulate,
)
from gtcore._validation import check_covariance
from gtcore.attention.sinkhorn import SinkhornConvergenceWarning

#: no shrink phase: a failure is reported as generated (its arguments printed, with a reproduce_failure blob), so a
#: failing CI run stays bounded; shrinking one of these (each example an integration) took Hypothesis its full five
#: minutes in CI. The examples generated are the same (derandomized), all 200 of them. To shrink a failure
#: locally, run with ``phases=tuple(Phase)``.
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
#: seconds one example may take before the watchdog calls it a hang (the examples take milliseconds)
WATCHDOG_S = 30

# ------------------------------------------------------------------------------ strategies
# Each example draws valid arguments, varied (edge values included), then replaces none or one of
# them by a careless value: so both the results and every argument's error path are exercised.
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
special = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 1e-300])
scalar = st.one_of(finite, finite, special)
junk = st.one_of(
    st.none(), st.text(max_size=3), st.just([[1.0, 2.0], [3.0]]), st.just(object()), st.just(True), st.just(1j)
)
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
wild_span = st.one_of(
    st.tuples(scalar, scalar), arrays(), st.just((1.0, 1.0)), st.just((2.0, 1.0)), st.just((0.0, np.inf))
)
wild_count = st.one_of(st.integers(-3, 0), st.just(2.5), st.just(True), st.none(), st.just("3"), st.just(np.nan))


def mats(d, lo=-2.0, hi=2.0, heads=None):
    shape = (d, d) if heads is None else (heads, d, d)
    return hnp.arrays(np.float64, shape, elements=st.floats(lo, hi))


@st.composite
def psd(draw, d):
    """A PSD matrix, maybe rank-deficient or tiny or large."""
    F = draw(hnp.arrays(np.float64, (d, draw(st.integers(1, d))), elements=st.floats(-3, 3)))
    return draw(st.sampled_from([1.0, 1.0, 1e-6, 1e3])) * (F @ F.T)


@st.composite
def valid_controls(draw, d, attentions=("dot", "dot", "dot", "l2", "sinkhorn")):
    """Valid constant controls of one of the attention types: B, or query and key maps (Q, K)."""
    size = draw(st.sampled_from([2.0, 2.0, 50.0]))
    heads = draw(st.sampled_from([None, None, 2]))
    attention = draw(st.sampled_from(attentions))
    common = dict(
        A=draw(mats(d, -size, size)),
        b=draw(hnp.arrays(np.float64, (d,), elements=st.floats(-2, 2))),
        V=draw(mats(d, -size, size, heads)),
        attention=attention,
    )
    if attention == "l2" or (draw(st.booleans()) and attention == "sinkhorn"):
        k = draw(st.sampled_from([d, d, 1, d + 1]))
        shape = (k, d) if heads is None else (heads, k, d)
        qk = hnp.arrays(np.float64, shape, elements=st.floats(-size / 2, size / 2))
        event(f"attention {attention} (Q, K)")
        return Controls(Q=draw(qk), K=draw(qk), **common)
    event(f"attention {attention}")
    return Controls(B=draw(mats(d, -size, size, heads)), **common)


@st.composite
def controls_on(draw, d, t0, t1):
    """Constant controls, or piecewise controls of two or three pieces with breaks inside (t0, t1)."""
    if draw(st.booleans()):
        return draw(valid_controls(d))
    n = draw(st.integers(2, 3))
    fractions = sorted(set(draw(st.lists(st.floats(0.05, 0.95), min_size=n - 1, max_size=n - 1))))
    breaks = [t0 + f * (t1 - t0) for f in fractions]
    if len(breaks) < 1 or np.any(np.diff(breaks) <= 0):
        return draw(valid_controls(d))
    event("piecewise controls")
    return PiecewiseControls(breaks, [draw(valid_controls(d)) for _ in range(len(breaks) + 1)])


def _uses(controls, attentions):
    """Whether ``controls`` (constant or piecewise) use one of ``attentions``."""
    pieces = getattr(controls, "pieces", [controls])
    return any(getattr(p, "attention", None) in attentions for p in pieces)


@st.composite
def t_evals(draw, t0, t1):
    """Valid evaluation times inside [t0, t1] (the ends included sometimes)."""
    inner = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6, unique=True))
    t = sorted({t0 + f * (t1 - t0) for f in inner} | set(draw(st.sampled_from([(), (t0,), (t1,), (t0, t1)]))))
    return np.array([x for x in t if t0 <= x <= t1])


wild_t_eval = st.one_of(
    arrays(), st.just([2.0, 1.0]), st.just([np.nan]), st.just([[0.5]]), st.just([1e300]), st.just([0.5, 0.5])
)


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
        # documented: Sinkhorn scaling that has not converged after max_iter warns (and returns its iterate)
        warnings.filterwarnings("ignore", category=SinkhornConvergenceWarning)
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
    args = {
        "A": draw(maybe(mats(d, -1e3, 1e3))),
        "b": draw(maybe(hnp.arrays(np.float64, (d,), elements=finite))),
        "V": draw(maybe(mats(d, -1e3, 1e3, heads))),
        "B": draw(maybe(mats(d, -1e3, 1e3, heads))),
        "attention": "dot",
    }
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
    length = draw(
        st.one_of(st.floats(1e-3, 10), st.floats(1e-3, 10), st.floats(10, 1e3), st.sampled_from([1e8, 1e300]))
    )
    args = {
        "mu0": draw(hnp.arrays(np.float64, (d,), elements=st.floats(-10, 10))),
        "Sigma0": draw(psd(d)),
        "controls": draw(controls_on(d, t0, t0 + length)),
        "t_span": (t0, t0 + length),
        "t_eval": draw(maybe(t_evals(t0, t0 + length))),
        "rtol": draw(st.floats(1e-13, 1e-3)),
        "atol": draw(st.floats(1e-15, 1e-3)),
        "blowup_norm": draw(st.sampled_from([1e8, 1e4, 1e12])),
        "max_nfev": draw(st.one_of(st.just(5000), st.just(5000), st.integers(1, 5000))),
    }
    if _uses(args["controls"], ("l2", "sinkhorn")):  # their tilts cost 10-100x the dot product's: bound the work
        args["max_nfev"] = min(args["max_nfev"], 400)
    wild = {
        "mu0": arrays(),
        "Sigma0": arrays(),
        "t_span": wild_span,
        "rtol": wild_number,
        "atol": wild_number,
        "blowup_norm": wild_number,
        "max_nfev": wild_count,
        "t_eval": wild_t_eval,
        "controls": st.one_of(valid_controls(d + 1), junk),
    }
    return corrupt(draw, args, wild)


@FUZZ
@given(args=moments_args())
def test_fuzz_integrate_moments(args):
    tr = outcome(
        lambda: integrate_moments(
            args["mu0"],
            args["Sigma0"],
            args["controls"],
            args["t_span"],
            t_eval=args["t_eval"],
            rtol=args["rtol"],
            atol=args["atol"],
            blowup_norm=args["blowup_norm"],
            max_nfev=args["max_nfev"],
        ),
        MOMENTS_ARGS,
    )
    if tr is not None:
        event(f"status {tr.status}")
        assert isinstance(tr, MomentTrajectory)
        assert isinstance(tr.status, Status) and tr.status in (
            Status.COMPLETED,
            Status.BLOWUP,
            Status.BUDGET,
            Status.FAILED,
        )
        assert_valid_moments(tr.mu, tr.Sigma)
        t0, t1 = (float(x) for x in args["t_span"])
        assert len(tr.t) == len(tr.mu) == len(tr.Sigma) and np.all(np.diff(tr.t) > 0)
        if args["t_eval"] is None:
            assert tr.t[0] == t0 and tr.t[-1] <= t1
            assert (tr.t[-1] == t1) == (tr.status is Status.COMPLETED)
        else:  # exactly the requested times, then the event's time when one stopped it
            te = np.asarray(args["t_eval"], float)
            n = len(tr.t) - (tr.status in (Status.BLOWUP, Status.BUDGET))
            np.testing.assert_array_equal(tr.t[:n], te[:n])
            assert (n == len(te)) or tr.status is not Status.COMPLETED
        assert tr.nfev <= args["max_nfev"] + 30  # the budget holds, to one step


SIMULATE_ARGS = (
    "x0",
    "controls",
    "t_span",
    "steps",
    "method",
    "dtype",
    "device",
    "average",
    "blowup_norm",
    "max_step",
    "max_steps",
    "record_every",
    "t_eval",
    "ff",
    "kernel_dtype",
    "keep_tokens",
)


@st.composite
def token_arrays(draw, n, d):
    """Valid (n, d) tokens as they come: C or Fortran order, a negative-stride view, or a torch tensor of any
    floating dtype, strided (a transposed view) or requiring grad."""
    x = draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-5, 5)))
    kind = draw(st.sampled_from(["C", "F", "negative stride", "tensor", "tensor strided", "tensor grad"]))
    event(f"tokens: {kind}")
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "negative stride":
        return np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1]
    dtype = draw(st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16]))
    t = torch.as_tensor(x, dtype=dtype)
    if kind == "tensor strided":
        return t.T.contiguous().T
    if kind == "tensor grad":
        return t.requires_grad_(True)
    return t


@st.composite
def simulate_args(draw):
    d = draw(st.integers(1, 3))
    n = draw(st.integers(2, 6))
    t0 = draw(st.floats(-1, 1))
    t1 = t0 + draw(st.floats(1e-3, 10))
    args = {
        "x0": draw(token_arrays(n, d)),
        "controls": draw(controls_on(d, t0, t1)),
        "t_span": (t0, t1),
        "steps": draw(st.integers(1, 20)),
        "t_eval": draw(st.one_of(st.none(), st.none(), t_evals(t0, t1))),
        "kernel_dtype": draw(st.sampled_from([None, None, torch.float32, "float64"])),
        "keep_tokens": draw(st.booleans()),
        "method": draw(st.sampled_from(["rk4", "euler", "midpoint"])),
        "dtype": draw(st.sampled_from([torch.float64, torch.float32, "float64", np.float32])),
        "device": draw(st.sampled_from(["cpu", "auto"])),
        "average": draw(st.sampled_from(["empirical", "gaussian"])),
        "blowup_norm": draw(st.sampled_from([1e8, 1e3, 1e12])),
    }
    wild = {
        "x0": st.one_of(arrays(), st.just(np.ones((1, d))), st.just(torch.ones(3, d, dtype=torch.int64))),
        "t_span": wild_span,
        "steps": wild_count,
        "method": st.sampled_from(["rk5", None, 4]),
        "dtype": st.sampled_from([torch.int64, torch.bfloat16, torch.float16, "float65", None, 3, torch.complex64]),
        "device": st.sampled_from(["gpu", 3, None, "cuda:7", "meta"]),
        "average": st.sampled_from(["mean", None]),
        "blowup_norm": wild_number,
        "controls": st.one_of(valid_controls(d + 1), junk),
        "t_eval": wild_t_eval,
        "kernel_dtype": st.sampled_from([torch.float16, torch.bfloat16, "float16", torch.int32, 3]),
        "max_step": st.sampled_from([1e-300, 5e-324, 0.0, -1.0, np.nan]),
        "max_steps": wild_count,
    }
    if _uses(args["controls"], ("sinkhorn",)):  # a scaling per evaluation: few steps
        args["steps"] = min(args["steps"], 3)
    args = corrupt(draw, args, wild)
    if "max_step" in args and args.get("steps") is not None and draw(st.booleans()):
        args["steps"] = None  # max_step alone
    return args


@FUZZ
@given(args=simulate_args())
def test_fuzz_simulate(args):
    x0, t_eval = args["x0"], args.get("t_eval")
    before = x0.detach().clone() if isinstance(x0, torch.Tensor) else x0.copy() if isinstance(x0, np.ndarray) else None
    out = outcome(
        lambda: simulate(args.pop("x0"), args.pop("controls"), args.pop("t_span"), args.pop("steps"), **args),
        SIMULATE_ARGS,
    )
    if isinstance(x0, torch.Tensor):  # the input is never modified, and no gradient is taken through it
        assert torch.equal(x0.detach(), before) and x0.grad is None
    elif isinstance(x0, np.ndarray):
        np.testing.assert_array_equal(x0, before)
    if out is not None:
        event(f"status {out.status}")
        assert isinstance(out, ParticleTrajectory) and out.status in (Status.COMPLETED, Status.BLOWUP)
        assert_valid_moments(out.mu, out.Sigma)
        assert np.isfinite(out.final_tokens).all() and out.final_tokens.shape == tuple(x0.shape)
        if out.tokens is not None:
            assert out.tokens.shape == (len(out.t), *x0.shape) and np.isfinite(out.tokens).all()
        if isinstance(t_eval, np.ndarray) and out.status is Status.COMPLETED:  # recorded exactly there
            np.testing.assert_array_equal(out.t[1:], t_eval[t_eval > out.t[0]])


PRESCRIBED_ARGS = (
    "family",
    "controls",
    "n_layers",
    "h",
    "layer_norm",
    "feed_forward",
    "dtype",
    "tokens",
    "attention",
    "mu0",
    "Sigma0",
)
PRESCRIBED = settings(FUZZ, max_examples=25)  # each example builds a transformers model


@st.composite
def prescribed_args(draw):
    from gtcore.models.prescribed import FAMILIES

    d = draw(st.sampled_from([2, 2, 4]))
    family = draw(st.sampled_from(FAMILIES))
    heads = draw(st.sampled_from([None, None, 2]))
    attention = draw(st.sampled_from(["dot", "dot", "dot", "l2", "sinkhorn"]))
    mat = lambda: draw(mats(d, -1.0, 1.0, heads))  # noqa: E731
    kw = dict(Q=mat(), K=mat()) if attention == "l2" else dict(B=mat())
    feed_forward = draw(st.booleans())
    ctl = Controls(A=draw(mats(d, -1.0, 1.0)) if feed_forward else None, V=mat(), attention=attention, **kw)
    args = {
        "family": family,
        "controls": ctl,
        "n_layers": draw(st.integers(1, 2)),
        "h": draw(st.sampled_from([0.1, 0.5, 1, np.float64(0.2)])),
        "layer_norm": draw(st.booleans()),
        "feed_forward": feed_forward,
        "tokens": draw(token_arrays(draw(st.integers(1, 5)), d)),
    }
    wild = {
        "family": st.sampled_from(["gpt", None, 3, "BERT "]),
        "n_layers": wild_count,
        "h": st.sampled_from([True, 0.0, -1.0, np.nan, np.inf, "0.1", None]),
        "layer_norm": st.sampled_from(["no", 1, None, np.float64(1.0)]),
        "feed_forward": st.sampled_from(["yes", 0, None]),
        "controls": st.one_of(junk, valid_controls(d + 1)),
        "tokens": st.one_of(arrays(), st.just(np.full((3, d), np.nan)), st.just(np.ones((3, d + 1)))),
    }
    return corrupt(draw, args, wild)


@PRESCRIBED
@given(args=prescribed_args())
def test_fuzz_prescribed_builders(args):
    from gtcore.models.prescribed import hidden_states, prescribed_transformer
    from gtcore.models.prescribed_moments import layer_moments, split_schedule

    keys = ("n_layers", "h", "layer_norm", "feed_forward")
    model = outcome(
        lambda: prescribed_transformer(args["family"], args["controls"], **{k: args[k] for k in keys}), PRESCRIBED_ARGS
    )
    if model is not None:
        hs = outcome(lambda: hidden_states(model, args["tokens"]), PRESCRIBED_ARGS)
        if hs is not None:
            event("hidden states")
            tokens = args["tokens"]
            tokens = tokens.detach().double().numpy() if isinstance(tokens, torch.Tensor) else np.asarray(tokens)
            assert hs.shape == (args["n_layers"] + 1, *tokens.shape) and np.isfinite(hs).all()
            np.testing.assert_array_equal(hs[0], tokens)
    ctl = args["controls"]
    sched = outcome(lambda: split_schedule(ctl, args["n_layers"], args["h"]), PRESCRIBED_ARGS)
    if sched is not None:  # the split keeps the attention type
        assert all(p.attention == ctl.attention for p in sched.pieces[::2])
    d = getattr(ctl, "d", 2)
    moments = outcome(
        lambda: layer_moments(
            np.zeros(d), np.eye(d), ctl, args["n_layers"], args["h"], feed_forward=args["feed_forward"]
        ),
        PRESCRIBED_ARGS,
    )
    if moments is not None:
        assert_valid_moments(*moments)


def test_the_watchdog_reports_a_hang():
    import time

    with pytest.raises(AssertionError, match="hang"), watchdog(0.05):
        time.sleep(1)
