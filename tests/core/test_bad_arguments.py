"""Bad scalar arguments of the public API: a ``ValueError`` whose message names the argument.

Each row was found by calling the function with the argument replaced by a bad value (a negative seed,
NaN, inf, a string, a list): before, the call failed inside numpy or torch with a message that names no
argument ("expected non-negative integer", "cannot convert float NaN to integer"), divided by zero,
returned NaN tokens, hung, or accepted the value silently (a negative tolerance, a NaN radius).
"""

from __future__ import annotations

import math
import signal

import numpy as np
import pytest

from gtcore import Controls
from gtcore.moments import integrate_moments_lanes
from gtcore.poles import particle_radius_bound
from gtcore.reachability import steer_min_energy, steer_min_energy_starts
from gtcore.relu import relu_departure_rate_spread
from gtcore.riccati import gain_threshold
from gtcore.stability import observe_regime
from gtcore.stats.gaussianity import noise_floor, sliced_w2, sliced_w2_of_whitened
from gtcore.stats.mixtures import per_label_noise_floor
from gtcore.stats.sampling import gaussian_tokens, moment_matched_tokens

I2 = np.eye(2)
MU = np.zeros(2)
CTL = Controls(A=-0.5 * I2, V=0.1 * I2, B=I2)
FF = Controls(A=-0.5 * I2, U=I2, W=0.5 * I2, c=np.zeros(2))
X = np.random.default_rng(0).standard_normal((20, 2))
LABELS = np.array([0] * 10 + [1] * 10)
HURWITZ = np.array([[-1.0, 0.2], [0.0, -0.8]])


def _stat(x):
    return float(np.mean(x))


def _train(**kw):
    from gtcore.training import train_transformer

    return train_transformer(X, X + 1.0, layers=2, steps=2, progress=False, **kw)


def _piecewise(T):
    from gtcore.training import piecewise

    return piecewise((CTL,), T)


def _rank_floor(r):
    from gtcore.training import rank_floor

    return rank_floor(I2, r)


#: (call, the argument its message must name)
CASES = {
    "gaussian_tokens seed=-1": (lambda: gaussian_tokens(5, MU, I2, seed=-1), "seed"),
    "gaussian_tokens seed=2.5": (lambda: gaussian_tokens(5, MU, I2, seed=2.5), "seed"),
    "moment_matched_tokens seed=-1": (lambda: moment_matched_tokens("uniform", 5, MU, I2, seed=-1), "seed"),
    "moment_matched_tokens n=inf": (lambda: moment_matched_tokens("uniform", math.inf, MU, I2), "n"),
    "moment_matched_tokens dof=inf (NaN tokens)": (
        lambda: moment_matched_tokens("student_t", 5, MU, I2, dof=math.inf),
        "dof",
    ),
    "moment_matched_tokens weight='abc'": (lambda: moment_matched_tokens("mixture", 5, MU, I2, weight="abc"), "weight"),
    "train_transformer seed=-1": (lambda: _train(seed=-1), "seed"),
    "train_transformer init_scale=inf": (lambda: _train(init_scale=math.inf), "init_scale"),
    "train_transformer init_scale='0.1'": (lambda: _train(init_scale="0.1"), "init_scale"),
    "train_transformer target_moments=3": (lambda: _train(target_moments=3), "target_moments"),
    "gain_threshold n_grid=0": (lambda: gain_threshold(HURWITZ, I2, I2, n_grid=0), "n_grid"),
    "gain_threshold n_grid=2.5": (lambda: gain_threshold(HURWITZ, I2, I2, n_grid=2.5), "n_grid"),
    "gain_threshold t_max=-1": (lambda: gain_threshold(HURWITZ, I2, I2, t_max=-1.0), "t_max"),
    "noise_floor seed=-1": (lambda: noise_floor(_stat, 50, 2, repeats=3, seed=-1), "seed"),
    "noise_floor repeats=nan": (lambda: noise_floor(_stat, 50, 2, repeats=math.nan), "repeats"),
    "noise_floor d=None": (lambda: noise_floor(_stat, 50, None, repeats=3), "d"),
    "sliced_w2 n_projections=inf": (lambda: sliced_w2(X, n_projections=math.inf), "n_projections"),
    "sliced_w2 seed='abc'": (lambda: sliced_w2(X, seed="abc"), "seed"),
    "sliced_w2_of_whitened n_projections=0": (lambda: sliced_w2_of_whitened(X, n_projections=0), "n_projections"),
    "per_label_noise_floor seed=None": (lambda: per_label_noise_floor(_stat, LABELS, 2, repeats=3, seed=None), "seed"),
    "per_label_noise_floor repeats='abc'": (lambda: per_label_noise_floor(_stat, LABELS, 2, repeats="abc"), "repeats"),
    "relu_departure_rate_spread seed=-1": (lambda: relu_departure_rate_spread(FF, 50, 3, seed=-1), "seed"),
    "relu_departure_rate_spread chunk=inf": (lambda: relu_departure_rate_spread(FF, 50, 3, chunk=math.inf), "chunk"),
    "steer_min_energy pieces=nan": (lambda: steer_min_energy(MU, I2, MU + 1, 2 * I2, 1.0, math.nan), "pieces"),
    "steer_min_energy maxiter=-1": (lambda: steer_min_energy(MU, I2, MU + 1, 2 * I2, 1.0, 2, maxiter=-1), "maxiter"),
    "steer_min_energy feasibility_tol=nan": (
        lambda: steer_min_energy(MU, I2, MU + 1, 2 * I2, 1.0, 2, feasibility_tol=math.nan),
        "feasibility_tol",
    ),
    "steer_min_energy_starts seed=-1": (
        lambda: steer_min_energy_starts(MU, I2, MU + 1, 2 * I2, 1.0, 2, seed=-1),
        "seed",
    ),
    "steer_min_energy_starts scale='abc'": (
        lambda: steer_min_energy_starts(MU, I2, MU + 1, 2 * I2, 1.0, 2, scale="abc"),
        "scale",
    ),
    "observe_regime settle_tol=-1": (lambda: observe_regime(CTL, I2, 10.0, settle_tol=-1.0), "settle_tol"),
    "observe_regime collapse_tol=nan": (lambda: observe_regime(CTL, I2, 10.0, collapse_tol=math.nan), "collapse_tol"),
    "particle_radius_bound R0=nan": (lambda: particle_radius_bound(CTL, math.nan, 1.0), "R0"),
    "particle_radius_bound t=-1": (lambda: particle_radius_bound(CTL, 1.0, -1.0), "t"),
    "integrate_moments_lanes blowup_norm=nan": (
        lambda: integrate_moments_lanes(np.zeros((1, 2)), I2[None], [CTL], (0.0, 1.0), blowup_norm=math.nan),
        "blowup_norm",
    ),
    "integrate_moments_lanes rtol='abc'": (
        lambda: integrate_moments_lanes(np.zeros((1, 2)), I2[None], [CTL], (0.0, 1.0), rtol="abc"),
        "rtol",
    ),
    "integrate_moments_lanes atol=[1, 2]": (
        lambda: integrate_moments_lanes(np.zeros((1, 2)), I2[None], [CTL], (0.0, 1.0), atol=[1e-12, 1e-12]),
        "atol",
    ),
    "piecewise T=0": (lambda: _piecewise(0.0), "T"),
    "rank_floor r=inf": (lambda: _rank_floor(math.inf), "r"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_argument_is_refused_by_name(case):
    call, name = CASES[case]
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert message.split()[0] == name, message  # "<name> must be ..."
    assert "\n" not in message


def test_atol_zero_is_refused_rather_than_hanging():
    """With ``atol = 0`` a component that is exactly 0 (a zero mean, an off-diagonal) has no error scale: the
    step was rejected forever. The alarm turns a hang into a failure."""

    def hang(*_):
        raise TimeoutError("integrate_moments_lanes(atol=0) still running after 20 s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(20)
    try:
        with pytest.raises(ValueError, match=r"^atol must be finite and positive"):
            integrate_moments_lanes(np.ones((1, 2)), I2[None], [CTL], (0.0, 1.0), atol=0.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_valid_seeds_and_integral_floats_still_work():
    """The checks refuse only what was wrong: the same tokens for 3 and 3.0 as before, a Generator passed
    through, a seed sequence accepted as numpy accepts it."""
    a = gaussian_tokens(4, MU, I2, seed=3)
    np.testing.assert_array_equal(a, MU + np.random.default_rng(3).standard_normal((4, 2)))
    rng = np.random.default_rng(7)
    np.testing.assert_array_equal(
        gaussian_tokens(4, MU, I2, seed=rng), np.random.default_rng(7).standard_normal((4, 2))
    )
    np.testing.assert_array_equal(
        gaussian_tokens(4, MU, I2, seed=[1, 2]), np.random.default_rng([1, 2]).standard_normal((4, 2))
    )
    assert _train(seed=3.0).seed == 3
