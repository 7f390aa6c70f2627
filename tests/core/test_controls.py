import numpy as np
import pytest

from gtcore import Controls, PiecewiseControls
from gtcore.controls import as_control_function


def test_missing_parameters_are_zero_and_d_is_inferred():
    c = Controls(b=[1.0, 2.0, 3.0])
    assert c.d == 3 and c.heads == 1
    assert np.all(c.A == 0) and np.all(c.V == 0) and np.all(c.B == 0)
    assert Controls(V=np.eye(2)).B.shape == (1, 2, 2)


def test_heads_given_as_array_or_sequence_agree():
    rng = np.random.default_rng(0)
    V = rng.standard_normal((2, 3, 3))
    B = rng.standard_normal((2, 3, 3))
    c1 = Controls(V=V, B=B)
    c2 = Controls(V=list(V), B=tuple(B))
    assert c1.heads == c2.heads == 2
    np.testing.assert_array_equal(c1.V, c2.V)
    np.testing.assert_array_equal(c1.B, c2.B)


def test_controls_are_read_only():
    c = Controls(A=np.eye(2))
    with pytest.raises(ValueError):
        c.A[0, 0] = 5.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(A=np.eye(2), b=np.zeros(3)), "b"),
        (dict(A=np.ones((2, 3))), "A"),
        (dict(A=np.eye(2), V=np.eye(3)), "V"),
        (dict(A=np.eye(2), B=np.ones((2, 2, 3))), "B"),
        (dict(A=[[np.nan, 0], [0, 1]]), "A"),
        (dict(b=[1.0, np.inf]), "b"),
        (dict(V=np.ones((2, 2, 2)), B=np.ones((3, 2, 2))), "heads"),
        (dict(A=np.eye(2), V=np.full((2, 2), np.nan)), "V"),
        (dict(A=np.eye(2), U=np.ones((4, 2)), W=np.ones((2, 4))), "c"),
        (dict(A=np.eye(2), U=np.ones((4, 2)), W=np.ones((2, 3)), c=np.ones(4)), "W"),
        (dict(A=np.eye(2), U=np.ones((4, 2)), W=np.ones((2, 4)), c=np.ones(3)), "c"),
    ],
)
def test_bad_controls_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Controls(**kwargs)


def test_nothing_given_is_an_error():
    with pytest.raises(ValueError, match="dimension"):
        Controls()


def test_feedforward_fold():
    rng = np.random.default_rng(1)
    U, W, c = rng.standard_normal((5, 3)), rng.standard_normal((3, 5)), rng.standard_normal(5)
    ctl = Controls(A=np.eye(3), b=np.ones(3), U=U, W=W, c=c)
    np.testing.assert_allclose(ctl.affine_A, np.eye(3) + W @ U)
    np.testing.assert_allclose(ctl.affine_b, np.ones(3) + W @ c)


def test_piecewise_boundaries_and_interior_breaks():
    c1, c2, c3 = (Controls(b=[float(k)]) for k in range(3))
    pw = PiecewiseControls([0.0, 1.0, 2.0, 3.0], [c1, c2, c3])
    assert pw.breaks == (1.0, 2.0)
    assert pw(-1) is c1 and pw(0.5) is c1 and pw(1.0) is c2 and pw(2.5) is c3 and pw(9) is c3
    pw2 = PiecewiseControls([1.0, 2.0], [c1, c2, c3])
    assert pw2(1.5) is c2


@pytest.mark.parametrize(
    "breaks, pieces, name",
    [
        ([0.0, 1.0], "none", "pieces"),
        ([1.0, 0.0, 2.0], "three", "breaks"),
        ([0.0, 1.0, 2.0, 3.0, 4.0], "three", "breaks"),
        ([0.0, np.nan], "one", "breaks"),
    ],
)
def test_bad_piecewise(breaks, pieces, name):
    lookup = {"none": [], "three": [Controls(b=[0.0])] * 3, "one": [Controls(b=[0.0])]}
    with pytest.raises(ValueError, match=name):
        PiecewiseControls(breaks, lookup[pieces])


def test_piecewise_pieces_must_share_dimension():
    with pytest.raises(ValueError, match="pieces"):
        PiecewiseControls([0, 1, 2], [Controls(b=[0.0]), Controls(b=[0.0, 1.0])])


def test_control_function_checks_dimension_and_type():
    with pytest.raises(ValueError, match="dimension"):
        as_control_function(Controls(b=[0.0]), d=2)
    with pytest.raises(ValueError, match="controls"):
        as_control_function(42, d=2)
