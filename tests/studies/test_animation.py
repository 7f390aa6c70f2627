"""The animation helper: frames, tokens, size budget, validation, offline HTML."""

import base64
import io
from typing import ClassVar

import numpy as np
import pytest
from PIL import Image

from gtbook.studies.animation import (
    AnimationBudgetError,
    CloudAnimation,
    CloudPanel,
    animate_clouds,
    frame_uris,
)


def _cloud(T=12, N=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    scale = np.linspace(1.0, 3.0, T)
    X = rng.standard_normal((T, N, d)) * scale[:, None, None]
    mu = np.zeros((T, d))
    Sigma = np.stack([s**2 * np.eye(d) for s in scale])
    return X, np.linspace(0.0, 1.0, T), mu, Sigma


def _pixels(uri):
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_frame_count_tokens_and_metadata():
    X, t, mu, S = _cloud(T=25, N=700)
    anim = animate_clouds(
        CloudPanel(X, t, mu, S, target=(np.zeros(3), np.eye(3))),
        caption="a cloud",
        max_frames=10,
        max_tokens=200,
        dpi=50,
    )
    assert isinstance(anim, CloudAnimation)
    assert anim.n_frames == 10 and len(frame_uris(anim.data)) == 10 and anim.n_tokens == [200]
    html, meta = anim._repr_html_()
    assert html == anim.data and meta["gtbook"] == {
        "kind": "animation",
        "caption": "a cloud",
        "frames": 10,
        "bytes": anim.nbytes,
    }
    assert anim.nbytes == len(anim.data.encode())


def test_frames_differ_and_first_last_are_kept():
    X, t, mu, S = _cloud(T=8)
    uris = frame_uris(animate_clouds(CloudPanel(X, t, mu, S, limits="fixed"), max_frames=8, dpi=50).data)
    first, last = _pixels(uris[0]), _pixels(uris[-1])
    assert first.shape == last.shape
    assert np.mean(np.any(first != last, axis=2)) > 0.01  # the cloud moved: many pixels changed
    assert len(set(uris)) == len(uris)


def test_html_is_offline_with_a_player():
    X, t, _, _ = _cloud(T=4, N=50)
    html = animate_clouds(CloudPanel(X, t), dpi=40).data
    assert "http://" not in html and "https://" not in html and "fa fa-" not in html
    assert "play_animation" in html and 'type="range"' in html


def test_alt_text_on_the_player_image():
    import re
    from html.parser import HTMLParser

    X, t, _, _ = _cloud(T=3, N=20)
    alt = 'Tokens "drift" & spread <fast>'
    anim = animate_clouds(CloudPanel(X, t), alt=alt, dpi=30)

    class Find(HTMLParser):
        found: ClassVar[dict[str, dict]] = {}

        def handle_starttag(self, tag, attrs):
            if tag in ("img", "div") and dict(attrs).get("alt" if tag == "img" else "aria-label"):
                self.found[tag] = dict(attrs)

    finder = Find()
    finder.feed(anim.data)
    assert finder.found["img"]["alt"] == alt and finder.found["div"]["aria-label"] == alt  # parsed back, unescaped
    assert re.search(r'<img id="_anim_img\w+" alt="', anim.data)
    assert anim._repr_html_()[1]["gtbook"]["alt"] == alt
    assert "alt" not in animate_clouds(CloudPanel(X, t), dpi=30)._repr_html_()[1]["gtbook"]


def test_panels_of_different_lengths_play_in_step():
    X, t, mu, S = _cloud(T=30)
    anim = animate_clouds(
        [
            CloudPanel(X, t, mu, S, limits="follow", annotations=[str(i) for i in range(30)]),
            CloudPanel(X[:5], t[:5], title="short", annotations=lambda j: f"j={j}"),
        ],
        max_frames=12,
        dpi=40,
    )
    assert anim.n_frames == 12


def test_size_budget_subsamples_or_raises():
    X, t, mu, S = _cloud(T=40, N=400)
    big = animate_clouds(CloudPanel(X, t, mu, S), max_frames=40, dpi=60)
    budget = big.nbytes // 3
    small = animate_clouds(CloudPanel(X, t, mu, S), max_frames=40, dpi=60, budget_bytes=budget)
    assert small.nbytes <= budget and 2 <= small.n_frames < 40
    with pytest.raises(AnimationBudgetError, match=r"over budget_bytes.*frames would fit"):
        animate_clouds(CloudPanel(X, t, mu, S), max_frames=40, dpi=60, budget_bytes=budget, over_budget="raise")
    with pytest.raises(AnimationBudgetError, match="lower max_frames or dpi"):
        animate_clouds(CloudPanel(X, t, mu, S), max_frames=40, dpi=60, budget_bytes=10_000)


def test_ellipse_skipped_after_blowup():
    X, t, mu, S = _cloud(T=6)
    S[4:] = np.inf
    assert animate_clouds(CloudPanel(X, t, mu, S), dpi=40).n_frames == 6


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(frames=np.zeros((5, 10))), r"frames must have shape \(T, N, k\)"),
        (dict(frames=np.zeros((5, 10, 1))), r"frames must have shape"),
        (dict(times=np.arange(4.0)), r"times must have shape \(5,\)"),
        (dict(times=np.array([0, 1, 1, 2, 3.0])), "times must be finite and strictly increasing"),
        (dict(mu=np.zeros((5, 2))), "mu and Sigma go together"),
        (dict(mu=np.zeros((4, 2)), Sigma=np.zeros((4, 2, 2))), r"mu must have shape \(5, d\)"),
        (dict(mu=np.zeros((5, 2)), Sigma=np.zeros((5, 3, 3))), r"Sigma must have shape \(5, 2, 2\)"),
        (dict(target=np.zeros(3)), "target must be a"),
        (dict(target=(np.zeros(2), np.eye(3))), r"target as \(mu, Sigma\)"),
        (dict(annotations=["a"] * 4), "annotations must have 5 entries"),
        (dict(limits="auto"), "limits must be"),
    ],
)
def test_validation_names_the_argument(change, match):
    base = dict(frames=np.zeros((5, 10, 2)), times=np.arange(5.0))
    with pytest.raises(ValueError, match=match):
        animate_clouds(CloudPanel(**{**base, **change}))
    with pytest.raises(ValueError, match=r"panels\[1\]\." + match.split(" ")[0]):
        animate_clouds([CloudPanel(**base), CloudPanel(**{**base, **change})])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_frames=1), "max_frames must be an integer >= 2"),
        (dict(max_tokens=0), "max_tokens must be"),
        (dict(dpi=5), "dpi must be"),
        (dict(budget_bytes=10), "budget_bytes must be"),
        (dict(over_budget="warn"), "over_budget must be"),
        (dict(dims=(0, 0)), "dims must be two distinct"),
        (dict(dims=(0, 3)), r"dims \(0, 3\) out of range"),
    ],
)
def test_option_errors_name_the_option(kwargs, match):
    with pytest.raises(ValueError, match=match):
        animate_clouds(CloudPanel(np.zeros((3, 4, 2)), np.arange(3.0)), **kwargs)


def test_panels_must_be_cloud_panels():
    with pytest.raises(ValueError, match="panels must be a CloudPanel"):
        animate_clouds([])


# ----------------------------------------------------------------- the chapters' animations
from gtbook.studies.animation import moments_at  # noqa: E402
from gtcore import Controls, gaussian_tokens, integrate_moments  # noqa: E402
from gtcore.particles import simulate  # noqa: E402

SMALL = dict(max_frames=5, max_tokens=50, dpi=30)


def _run(controls, T=0.5, steps=10, n=60, keep=True):
    mu0, S0 = np.zeros(2), np.array([[1.0, 0.3], [0.3, 0.5]])
    run = simulate(gaussian_tokens(n, mu0, S0, seed=1), controls, (0, T), steps, keep_tokens=keep, device="cpu")
    return run, integrate_moments(mu0, S0, controls, (0, T), t_eval=run.t)


def test_moments_at_matches_times_and_marks_missing():
    run, ode = _run(Controls(A=0.1 * np.eye(2)))
    mu, S = moments_at(ode, run.t)
    np.testing.assert_array_equal(mu, ode.mu)
    np.testing.assert_array_equal(S, ode.Sigma)
    _, S = moments_at(ode, np.append(run.t, 0.7))
    assert np.all(np.isinf(S[-1])) and np.all(np.isfinite(S[:-1]))
    with pytest.raises(ValueError, match=r"ode\.t matches none"):
        moments_at(ode, [5.0, 6.0], name="ode")


def test_chapter_animations_build_from_results():
    from gtbook.studies.invariance import figures as invariance
    from gtbook.studies.reachability import figures as reachability
    from gtbook.studies.stability import figures as stability

    ctl = Controls(A=[[0.0, -1.0], [1.0, 0.0]], V=0.5 * np.eye(2), B=-0.3 * np.eye(2))
    run, ode = _run(ctl)
    assert invariance.ode_animation(run, ode, **SMALL).n_frames == 5
    target = (np.ones(2), np.eye(2))
    assert reachability.steering_animation(run, ode, target, **SMALL).n_frames == 5
    blow_ctl = Controls(V=np.eye(2), B=np.eye(2))
    blow, blow_ode = _run(blow_ctl, T=0.3)
    anim = stability.regimes_animation(run, ode, blow, blow_ode, Sigma_star=np.eye(2), t_star=0.31, **SMALL)
    assert anim.n_frames == 5 and "Sigma^*" in anim.caption
    bare, _ = _run(ctl, keep=False)
    with pytest.raises(ValueError, match="cloud has no tokens"):
        invariance.ode_animation(bare, ode)
    with pytest.raises(ValueError, match="blow has no tokens"):
        stability.regimes_animation(run, ode, bare, ode, Sigma_star=np.eye(2), t_star=1.0)


def test_prescribed_layers_animation():
    from gtbook.studies.prescribed.figures import layers_animation
    from gtbook.studies.prescribed.harness import PrescribedRun

    rng = np.random.default_rng(0)

    def fake(L, grow):
        S = np.stack([np.eye(3) * grow**ell for ell in range(L + 1)])
        X = rng.standard_normal((L + 1, 80, 3)) * np.sqrt(grow ** np.arange(L + 1))[:, None, None]
        return X, PrescribedRun("bert", False, False, 0.1, S, S, np.arange(L + 1) * 0.1, S, 1.0, 0.0)

    (Xd, rd), (Xs, rs) = fake(8, 2.0), fake(12, 1.0)
    anim = layers_animation(Xd, rd, Xs, rs, **SMALL)
    assert anim.n_frames == 5 and anim.caption.startswith("bert")
    with pytest.raises(ValueError, match="9 hidden states but the run has 13"):
        layers_animation(Xd, rd, Xd, rs)


def test_player_templates_are_matplotlibs():
    """The copied player templates equal matplotlib's private ones (while matplotlib still has them)."""
    from gtbook.studies import _jshtml

    theirs = pytest.importorskip("matplotlib._animation_data")
    for name in ("JS_INCLUDE", "STYLE_INCLUDE", "DISPLAY_TEMPLATE"):
        assert getattr(_jshtml, name) == getattr(theirs, name), name
