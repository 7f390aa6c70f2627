"""The outcome vocabulary (gtcore.status) and the PSD projection's Cholesky shortcut (gtcore._linalg).

The enums must behave as the strings they replace (chapters and older code compare strings, look them
up in dicts of strings and print them), on every supported Python. The shortcut of ``psd_project`` must
never change a result: it is checked against the eigenvalue rule it replaces, on matrices built to sit
at the edge (tiny, negative round-off, singular, ill-conditioned).
"""

import pickle

import numpy as np
import pytest

from gtcore import Controls, Stability, Status, Verdict, integrate_moments, layer_stack, linear_stability
from gtcore._linalg import _clearly_positive_definite, psd_project


@pytest.mark.parametrize("member", [*Status, *Verdict, *Stability])
def test_a_member_is_its_string(member):
    value = member.value
    assert member == value and value == member and hash(member) == hash(value)
    assert {value: 1}[member] == 1 and str(member) == value
    assert f"{member}" == value and f"{member:>20}" == f"{value:>20}"
    assert type(member)(value) is member and pickle.loads(pickle.dumps(member)) is member
    assert np.array([member], dtype=object) == value


def test_every_integrator_speaks_the_vocabulary():
    I2 = np.eye(2)
    tr = integrate_moments(np.zeros(2), I2, Controls(V=I2, B=I2), (0.0, 1.0))
    assert tr.status is Status.BLOWUP
    assert integrate_moments(np.zeros(2), I2, Controls(A=-I2), (0.0, 1.0)).status is Status.COMPLETED
    assert layer_stack(np.zeros(2), I2, [Controls(A=-0.1 * I2)], 0.1).status is Status.COMPLETED
    from gtcore.moments import integrate_moments_lanes

    lanes = integrate_moments_lanes(np.zeros(2), I2, [Controls(V=I2, B=I2), Controls(A=-I2)], (0.0, 1.0))
    assert list(lanes.status) == [Status.BLOWUP, Status.COMPLETED]
    assert all(type(s) is Status for s in lanes.status)
    from gtcore.stability import equilibrium

    ctl = Controls(A=np.array([[0.5, -0.4], [0.4, 0.5]]), V=-I2, B=I2)
    assert linear_stability(ctl, equilibrium(ctl).Sigma).verdict is Stability.STABLE


def _reference_project(S):
    """psd_project before the shortcut: eigvalsh decides, eigh projects."""
    out = S.copy()
    bad = np.linalg.eigvalsh(S)[..., 0] < 0
    if np.any(bad):
        w, U = np.linalg.eigh(S[bad])
        P = (U * np.clip(w, 0.0, None)[..., None, :]) @ np.swapaxes(U, -1, -2)
        out[bad] = 0.5 * (P + np.swapaxes(P, -1, -2))
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 8, 30])
def test_the_cholesky_shortcut_never_changes_a_projection(d):
    rng = np.random.default_rng(d)
    certified = 0
    for _ in range(300 if d < 8 else 40):
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        spread = 40.0 if rng.random() < 0.5 else 3.0  # wide spectra (fallback) and moderate ones (shortcut)
        signs = rng.choice([1.0, 1.0, -1e-16, 0.0], d) if rng.random() < 0.5 else np.ones(d)  # edges, or PD
        w = np.exp(rng.uniform(-spread, 2, d)) * signs
        S = (Q * w) @ Q.T
        S = 0.5 * (S + S.T)
        stack = S[None]
        certified += _clearly_positive_definite(stack)
        np.testing.assert_array_equal(psd_project(stack), _reference_project(stack))
        if _clearly_positive_definite(stack):
            assert np.linalg.eigvalsh(S)[0] >= 0  # what the eigenvalue rule would have concluded
    assert certified > 0  # the shortcut is exercised, not only the fallback
