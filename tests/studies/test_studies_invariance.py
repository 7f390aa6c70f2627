import numpy as np
import pytest

from gtbook.studies.invariance.harness import mean_field_study, relative_moment_discrepancy
from gtcore import Controls
from gtcore.attention import max_sampling_strength
from gtcore.stats.inference import loglog_slope


def test_attention_strength_closed_form():
    """B = -bI, Sigma = s I: B^T Sigma B Sigma = b^2 s^2 I."""
    ctl = Controls(V=np.eye(2), B=-0.5 * np.eye(2))
    Sigmas = np.stack([np.eye(2), 2 * np.eye(2)])
    assert max_sampling_strength(ctl, [0.0, 1.0], Sigmas) == pytest.approx(0.25 * 4)


def test_loglog_slope_exact_and_window():
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    assert loglog_slope(x, 2 * x**-0.5) == pytest.approx(-0.5, abs=1e-12)
    y = np.where(x <= 10, x**1.0, x**3.0)
    assert loglog_slope(x, y, x_max=10) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="positive"):
        loglog_slope(x, -x)
    with pytest.raises(ValueError, match="x_max"):
        loglog_slope(x, x, x_max=0.5)


def test_relative_moment_discrepancy():
    mu = np.array([[3.0, 0.0]])
    S = np.eye(2)[None]  # sqrt(tr S) = sqrt(2)
    d = relative_moment_discrepancy(mu + np.array([[0.1, 0.0]]), S, mu, S)
    np.testing.assert_allclose(d, [0.1 / (3 + np.sqrt(2))])
    zero = relative_moment_discrepancy(np.zeros((1, 2)), 1.5 * S, np.zeros((1, 2)), S)
    np.testing.assert_allclose(zero, [0.5])


def test_mean_field_study_shapes_and_decay():
    ctl = Controls(A=[[0.0, 0.3], [-0.3, 0.0]], V=0.5 * np.eye(2), B=-0.3 * np.eye(2))
    st = mean_field_study([0.0, 0.0], np.eye(2), ctl, (0, 0.5), [200, 3200], 4, 2, progress=False)
    assert st.errors.shape == (2, 4) and st.kappa < 0.5
    assert st.mean_error[1] < st.mean_error[0]
    with pytest.raises(ValueError, match="Ns"):
        mean_field_study([0.0, 0.0], np.eye(2), ctl, (0, 0.5), [200], 4, 2)


def test_error_figure_labels_the_n_values_and_no_minor_ticks():
    """Chapter 1's error-against-N figure: the x ticks are the N values used, and no minor labels collide."""
    from types import SimpleNamespace

    import matplotlib

    matplotlib.use("Agg")
    from gtbook.studies.invariance.figures import error_against_n

    Ns = [250, 500, 1000, 2000, 4000]
    errors = np.outer(np.array(Ns, float) ** -0.5, np.ones(3))
    studies = {
        "weak": SimpleNamespace(Ns=Ns, errors=errors, kappa=0.2, slope=-0.5),
        "strong": SimpleNamespace(Ns=Ns, errors=2 * errors, kappa=0.9, slope=-0.3),
    }
    fig = error_against_n(studies)
    fig.canvas.draw()
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert shown == [str(n) for n in Ns]
    assert not [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert not [t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text()]


def test_mean_field_study_from_the_sample_removes_the_initial_sampling_error():
    # without attention the flow is affine: from each cloud's own moments the ODE is exact (RK4 error only),
    # from the population moments the error is the initial sampling error, ~ N^-1/2
    ctl = Controls(A=[[0.1, 0.4], [-0.4, 0.0]], b=[0.2, 0.0])
    own = mean_field_study([0.0, 0.0], np.eye(2), ctl, (0, 0.5), [200, 800], 3, 20, progress=False)
    pop = mean_field_study([0.0, 0.0], np.eye(2), ctl, (0, 0.5), [200, 800], 3, 20, progress=False, start="population")
    assert own.errors.max() < 1e-8 and pop.errors.min() > 1e-3
    assert pop.slope == pytest.approx(-0.5, abs=0.35)
    with pytest.raises(ValueError, match="start"):
        mean_field_study([0.0, 0.0], np.eye(2), ctl, (0, 0.5), [200, 800], 3, 2, start="both")
