"""gtbook.studies.scoping: the structure classes of a claim's layers, against matrices built to be in them."""

from __future__ import annotations

import numpy as np
import pytest

from gtbook.scope import CLASSES, parse_scope
from gtbook.studies.scoping import CLASSES as STUDY_CLASSES
from gtbook.studies.scoping import layer_scope, matrix_class
from gtcore import Controls

J = np.array([[0.0, -1.0], [1.0, 0.0]])
RNG = np.random.default_rng(7)
G3 = RNG.standard_normal((3, 3))


@pytest.mark.parametrize(
    ("M", "param", "expected"),
    [
        (np.zeros((3, 3)), "A", "zero"),
        (2.5 * np.eye(3), "A", "scalar"),
        (0.3 * J, "A", "normal"),  # skew: normal, not symmetric
        (G3 + G3.T, "A", "normal"),  # symmetric: normal
        (np.eye(2) + J, "A", "normal"),  # aI + skew commutes with its transpose
        (np.array([[1.0, 1.0], [0.0, 1.0]]), "A", "general"),  # a Jordan block
        (G3, "A", "general"),
        (np.zeros((2, 2)), "V", "zero"),
        (-0.8 * np.eye(2), "V", "scalar"),
        (G3 + G3.T, "V", "symmetric"),
        (-0.8 * np.eye(2) + 0.3 * J, "V", "general"),  # vI + skew: not symmetric
        (G3, "B", "general"),
    ],
)
def test_matrix_class_against_the_definitions(M, param, expected):
    assert matrix_class(M, param) == expected


def test_the_classes_are_the_books():
    assert STUDY_CLASSES == CLASSES


def test_matrix_class_tolerance_is_relative():
    S = 1e6 * (G3 + G3.T)
    assert matrix_class(S + 1e-9 * (G3 - G3.T), "V") == "symmetric"  # round-off of a large matrix
    assert matrix_class(np.eye(3) + 1e-6 * G3, "V") == "general"


def test_matrix_class_refuses_bad_input():
    with pytest.raises(ValueError, match="param"):
        matrix_class(np.eye(2), "C")
    with pytest.raises(ValueError, match="square"):
        matrix_class(np.ones((2, 3)), "A")


def test_layer_scope_reads_the_widest_class_over_heads_and_layers():
    skew_layer = Controls(A=0.3 * J, V=-0.8 * np.eye(2), B=np.eye(2))
    assert layer_scope([skew_layer], system="tokens") == {
        "system": "tokens",
        "d": (2,),
        "A": "normal",
        "B": "scalar",
        "V": "scalar",
        "heads": 1,
        "attention": ("dot",),
    }
    # a second head with a non-symmetric V widens V; a second layer in d = 3 widens d and A
    two_heads = Controls(V=[np.eye(2), np.eye(2) + J], B=[np.eye(2), np.eye(2)])
    general_A = Controls(A=G3, V=np.eye(3), B=G3 + G3.T, attention="sinkhorn")
    s = layer_scope([skew_layer, two_heads, general_A], system="moment ODE")
    assert s["d"] == (2, 3) and s["A"] == "general" and s["B"] == "symmetric" and s["V"] == "general"
    assert s["heads"] == 2 and s["attention"] == ("dot", "sinkhorn")
    parse_scope(s)  # a valid claim scope


def test_layer_scope_for_l2_reads_the_logits_bilinear_part():
    # Q symmetric, K = I: the bilinear part 2 K^T Q is symmetric; a general K makes it general
    Q = np.array([[1.0, 0.3], [0.3, 0.6]])

    def b_class(K):
        return layer_scope([Controls(V=np.eye(2), Q=Q, K=K, attention="l2")], system="moment ODE")["B"]

    assert b_class(np.eye(2)) == "symmetric"
    assert b_class(np.array([[2.0, 0.4], [0.2, 1.6]])) == "general"


def test_layer_scope_family_and_bad_input():
    s = layer_scope([Controls(V=np.eye(2), B=np.eye(2))], system="tokens", family="opposite heads")
    assert s["family"] == "opposite heads"
    with pytest.raises(ValueError, match="at least one"):
        layer_scope([], system="tokens")
    with pytest.raises(ValueError, match="Controls"):
        layer_scope([np.eye(2)], system="tokens")
