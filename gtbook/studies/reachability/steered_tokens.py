r"""Reachability seen on N tokens: constructive controls with attention on, applied to real token clouds.

For each draw of a seeded ensemble, a rank-r Gaussian :math:`N(\mu_0, \Sigma_0)` and a random target
:math:`N(\mu_1, \Sigma_1)` of the same rank, with a fixed attention head :math:`(V, B)` (non-scalar
:math:`V`, non-symmetric :math:`B`), :func:`gtcore.reachability.steer` builds controls that reach the
target exactly on the moment ODE (compensating the head along the reference Gaussian trajectory). The
same controls then move N tokens with softmax attention over the tokens. The tokens see the head
through the finite-N average, which is the Gaussian tilt of the moment ODE up to a fluctuation of
order :math:`N^{-1/2}` (finite-variance regime), so the endpoint misses the target by

.. math::

    D_N = W_2\big(N(\hat\mu_N(T), \hat\Sigma_N(T)),\ N(\mu_1, \Sigma_1)\big) / \sqrt{\operatorname{tr}\Sigma_1}
    \;\propto\; N^{-1/2}.

Most of :math:`D_N` is the sampling error of the initial cloud carried along by the open-loop
controls. The **dynamic error** removes it: :math:`E_N`, the same distance from the cloud's endpoint
to the moment ODE under the same controls started from the cloud's own initial moments
:math:`(\hat\mu_0, \hat\Sigma_0)` (the affine part of the dynamics then cancels exactly), is the
finite-N attention's own error, predicted :math:`\propto N^{-1/2}` as well. What the check adds is
that the attention, felt by the tokens through their own softmax, is what the controls compensated:
were the moment ODE's attention term wrong, the controls would compensate the wrong drift and
:math:`D_N` would level off at that error. The control shows exactly that: the same controls, with
the tokens' head using :math:`B^\top` in place of :math:`B` (a transposition error, invisible for
symmetric :math:`B`), give an :math:`E_N` that levels off. (A non-Gaussian cloud with the same two
moments is no control here: at this head strength its different average moves the endpoint by less
than the sampling error at the N used.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gtbook.studies.reachability.harness import RememberedControls
from gtbook.studies.traced import Sides, collect, no_prediction, observed, predicted
from gtcore.attention import max_sampling_strength
from gtcore.controls import Controls, as_control_function
from gtcore.moments import integrate_moments
from gtcore.particles import simulate_batch
from gtcore.reachability import steer
from gtcore.stats.gaussianity import bures_wasserstein, empirical_moments
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error

__all__ = ["SteeredTokens", "random_steering_draw", "steered_tokens", "steered_tokens_and_control"]


def random_steering_draw(d: int, r: int, rng: np.random.Generator, *, head_scale: float = 0.5):
    r"""One draw: :math:`(\mu_0, F_0, \mu_1, F_1, V, B)` with rank-r factors and a general head.

    :math:`\mu_0 = 0`, :math:`\mu_1 \sim N(0, I)`, :math:`\Sigma_k = F_kF_k^\top` with :math:`F_k` (d, r)
    Ginibre scaled by :math:`1/\sqrt r`; :math:`V, B` Ginibre scaled by ``head_scale``:math:`/\sqrt d`
    (non-scalar, non-symmetric almost surely).

    Parameters
    ----------
    d, r : int
        Dimension and rank.
    rng : numpy Generator
    head_scale : float
        Scale of the head's entries.

    Returns
    -------
    mu0, F0, mu1, F1, V, B
    """
    F0 = rng.standard_normal((d, r)) / np.sqrt(r)
    F1 = rng.standard_normal((d, r)) / np.sqrt(r)
    mu1 = rng.standard_normal(d)
    V = head_scale * rng.standard_normal((d, d)) / np.sqrt(d)
    B = head_scale * rng.standard_normal((d, d)) / np.sqrt(d)
    return np.zeros(d), F0, mu1, F1, V, B


class _TransposedHead:
    r"""The controls ``ctl`` with every head's :math:`B_h` replaced by :math:`B_h^\top` (the control's error)."""

    def __init__(self, ctl) -> None:
        self.ctl, self.d, self.breaks = as_control_function(ctl), ctl.d, getattr(ctl, "breaks", ())

    def __call__(self, t: float) -> Controls:
        c = self.ctl(t)
        return Controls(A=c.A, b=c.b, V=c.V, B=np.swapaxes(c.B, -1, -2))


@dataclass(frozen=True)
class SteeredTokens:
    r"""Relative endpoint distances :math:`D_N` of steered token clouds over draws, N and seeds.

    Attributes
    ----------
    Ns : (n,) int array
    distance : (draws, n, seeds) array
        :math:`D_N`, to the target.
    dynamic : (draws, n, seeds) array
        :math:`E_N`, to the moment ODE of the controls from the cloud's own initial moments.
    law : str
        ``"gaussian"`` or ``"uniform"``.
    transposed : bool
        True for the control: the tokens' head uses :math:`B^\top`.
    ode_error : float
        The largest endpoint error of the controls on the moment ODE itself over the draws (exact
        steering: round-off and solver tolerance).
    kappa_max : float
        The largest sampling strength along the reference trajectories.
    slope : float
        Pooled log-log slope of the seed-mean :math:`D_N` in N (one intercept per draw).
    dynamic_slope : float
        The same for :math:`E_N`.
    traced : Sides
        The traced sides of :math:`E_N` (:mod:`gtbook.studies.traced`): the steering controls and the token runs
        (observed); eq. (1.1) under the same controls from each cloud's own moments (predicted).
    """

    Ns: np.ndarray
    distance: np.ndarray
    dynamic: np.ndarray
    law: str
    transposed: bool
    ode_error: float
    kappa_max: float
    slope: float
    dynamic_slope: float
    traced: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    def sides(self, which: str = "distance") -> Sides:
        """The traced sides of ``slope`` (``"distance"``: :math:`D_N` against the target at the rate
        :math:`N^{-1/2}`, a prediction that runs no library code) or ``dynamic_slope`` (``"dynamic"``: :math:`E_N`
        against eq. (1.1))."""
        if which not in ("distance", "dynamic"):
            raise ValueError(f"which must be 'distance' or 'dynamic', got {which!r}")
        return no_prediction(self.traced) if which == "distance" else self.traced

    def slope_standard_error(self, which: str = "distance", n_boot: int = 2000, seed: int = 0) -> float:
        """Bootstrap standard error of ``slope`` (``which="distance"``) or ``dynamic_slope``
        (``"dynamic"``): seeds resampled within each draw and N."""
        values = {"distance": self.distance, "dynamic": self.dynamic}[which]
        return pooled_slope_standard_error(self.Ns, values, n_boot=n_boot, seed=seed)

    def __repr__(self) -> str:
        return (
            f"SteeredTokens(law={self.law!r}, transposed={self.transposed}, draws={self.distance.shape[0]}, "
            f"Ns={self.Ns.tolist()}, slope={self.slope:.3f}, dynamic_slope={self.dynamic_slope:.3f}, "
            f"ode_error={self.ode_error:.2g}, kappa_max={self.kappa_max:.3f})"
        )


def steered_tokens(
    d: int,
    r: int,
    Ns: Sequence[int] | np.ndarray,
    *,
    draws: int,
    seeds: int,
    steps: int,
    T: float = 1.0,
    law: str = "gaussian",
    transposed: bool = False,
    seed: int = 0,
    head_scale: float = 0.5,
    kappa_cap: float = 0.45,
    max_tries: int = 100,
) -> SteeredTokens:
    r"""Steer rank-r token clouds to random same-rank targets with a head on (module docstring).

    Parameters
    ----------
    d, r : int
        Dimension and rank (``1 <= r <= d``).
    Ns : sequence of int
        Token counts.
    draws, seeds : int
        Draws of :func:`random_steering_draw` (seeded by ``seed``) and clouds per draw and N.
    steps : int
        RK4 steps of :func:`gtcore.particles.simulate` over :math:`[0, T]` (shared by the pieces).
    T : float
        Steering time.
    law : {"gaussian", "uniform"}
        The cloud's law in the range of :math:`\Sigma_0`: :math:`x = \mu_0 + F_0z`, :math:`z \sim N(0, I_r)`
        or i.i.d. uniform on :math:`[-\sqrt3, \sqrt3]`.
    transposed : bool
        Move the tokens with the head :math:`(V, B^\top)` while the controls compensate :math:`(V, B)`.
    seed : int
        Seeds the draws; cloud ``s`` of draw ``k`` uses ``seed + 1000 (k+1) + s``.
    head_scale : float
        As :func:`random_steering_draw`.
    kappa_cap : float
        A draw is kept only if the sampling strength along the reference trajectory stays below this.
    max_tries : int
        Cap on the number of draws tried.

    Returns
    -------
    SteeredTokens
    """
    counts = {bool(transposed): int(seeds)}
    return _steered(
        d,
        r,
        Ns,
        counts,
        steps=steps,
        T=T,
        law=law,
        seed=seed,
        draws=draws,
        head_scale=head_scale,
        kappa_cap=kappa_cap,
        max_tries=max_tries,
    )[bool(transposed)]


def steered_tokens_and_control(
    d: int,
    r: int,
    Ns: Sequence[int] | np.ndarray,
    *,
    draws: int,
    seeds: int,
    control_seeds: int,
    steps: int,
    T: float = 1.0,
    law: str = "gaussian",
    seed: int = 0,
    head_scale: float = 0.5,
    kappa_cap: float = 0.45,
    max_tries: int = 100,
) -> tuple[SteeredTokens, SteeredTokens]:
    r"""``steered_tokens(..., seeds=seeds)`` and its control ``steered_tokens(..., seeds=control_seeds,
    transposed=True)`` with the same draws, computed together: the same numbers as the two calls.

    The two share everything but the tokens' head: the draws (their steering controls and the reference check
    along eq. (1.1)), the clouds (cloud ``s`` of draw ``k`` has seed ``seed + 1000 (k+1) + s`` in both) and so
    eq. (1.1) from each cloud's own moments under the controls, which the dynamic error :math:`E_N` compares
    with. Each of those is computed once here; the token runs of both, each N in one
    :func:`gtcore.particles.simulate_batch`.

    Parameters
    ----------
    d, r, Ns, draws, steps, T, law, seed, head_scale, kappa_cap, max_tries
        As :func:`steered_tokens`.
    seeds, control_seeds : int
        Clouds per draw and N with the head :math:`(V, B)`, and with :math:`(V, B^\top)` (the control).

    Returns
    -------
    (SteeredTokens, SteeredTokens)
        The clouds with the compensated head, and the control (``transposed=True``).
    """
    out = _steered(
        d,
        r,
        Ns,
        {False: int(seeds), True: int(control_seeds)},
        steps=steps,
        T=T,
        law=law,
        seed=seed,
        draws=draws,
        head_scale=head_scale,
        kappa_cap=kappa_cap,
        max_tries=max_tries,
    )
    return out[False], out[True]


def _steered(
    d: int,
    r: int,
    Ns: Sequence[int] | np.ndarray,
    counts: dict[bool, int],
    *,
    draws: int,
    steps: int,
    T: float,
    law: str,
    seed: int,
    head_scale: float,
    kappa_cap: float,
    max_tries: int,
) -> dict[bool, SteeredTokens]:
    """:func:`steered_tokens` for each head in ``counts`` (False: :math:`B`, True: :math:`B^\top`), with
    ``counts[head]`` clouds per draw and N; the draws, the clouds and eq. (1.1) from their moments shared."""
    if law not in ("gaussian", "uniform"):
        raise ValueError(f"law must be 'gaussian' or 'uniform', got {law!r}")
    rng = np.random.default_rng(seed)
    Ns = np.asarray(Ns, int)
    out = {head: np.empty((draws, len(Ns), n)) for head, n in counts.items()}
    dyn = {head: np.empty_like(v) for head, v in out.items()}
    ode_error, kappa_max, tries = 0.0, 0.0, 0
    kept = []
    with collect() as traced:  # the draws' check along eq. (1.1) (kappa, exactness) runs on neither side
        for _ in range(draws):
            while True:
                tries += 1
                if tries > max_tries:
                    raise ValueError(f"no draw keeps kappa below {kappa_cap} in {max_tries} tries")
                mu0, F0, mu1, F1, V, B = random_steering_draw(d, r, rng, head_scale=head_scale)
                S0, S1 = F0 @ F0.T, F1 @ F1.T
                with observed():  # the paper's controls: the head compensated along the reference
                    ctl = steer(mu0, S0, mu1, S1, T, heads=(V, B))
                ref = integrate_moments(mu0, S0, ctl, (0.0, T), t_eval=np.linspace(0.0, T, 41), rtol=1e-11, atol=1e-13)
                k_path = max_sampling_strength(ctl, ref.t, ref.Sigma)
                if ref.status == "completed" and k_path < kappa_cap:
                    break
            kappa_max = max(kappa_max, k_path)
            scale = np.sqrt(np.trace(S1))
            ode_error = max(ode_error, bures_wasserstein(ref.mu[-1], ref.Sigma[-1], mu1, S1) / scale)
            # the clouds of a draw step at the same times: its controls evaluated once per time, for both heads
            moving = RememberedControls(ctl)
            kept.append(
                (mu0, F0, mu1, S1, ctl, {False: moving, True: RememberedControls(_TransposedHead(moving))}, scale)
            )
        for i, N in enumerate(Ns):  # the clouds of one N, every draw, seed and head, advance together
            x0s = {}
            for k in range(draws):
                for s in range(max(counts.values())):
                    mu0, F0 = kept[k][0], kept[k][1]
                    g = np.random.default_rng(seed + 1000 * (k + 1) + s)
                    z = g.standard_normal((N, r)) if law == "gaussian" else g.uniform(-np.sqrt(3), np.sqrt(3), (N, r))
                    x0s[k, s] = mu0 + z @ F0.T
            jobs = [(head, k, s) for head, n in counts.items() for k in range(draws) for s in range(n)]
            with observed():
                runs = simulate_batch(
                    [x0s[k, s] for _, k, s in jobs],
                    [kept[k][5][head] for head, k, _ in jobs],
                    (0.0, T),
                    steps,
                    record_every=steps,
                    device="cpu",
                )
            own: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # eq. (1.1) from cloud (k, s), once
            for (head, k, s), run in zip(jobs, runs, strict=True):
                _, _, mu1, S1, ctl, _, scale = kept[k]
                m, S = empirical_moments(run.final_tokens)
                out[head][k, i, s] = bures_wasserstein(m, S, mu1, S1) / scale
                if (k, s) not in own:
                    own0 = empirical_moments(x0s[k, s])
                    with predicted():  # eq. (1.1) under the same controls, from the cloud's own moments
                        sol = integrate_moments(*own0, ctl, (0.0, T), rtol=1e-10, atol=1e-12)
                    own[k, s] = (sol.mu[-1], sol.Sigma[-1])
                dyn[head][k, i, s] = bures_wasserstein(m, S, *own[k, s]) / scale
    return {
        head: SteeredTokens(
            Ns,
            out[head],
            dyn[head],
            law,
            head,
            float(ode_error),
            float(kappa_max),
            pooled_loglog_slope(Ns, out[head]),
            pooled_loglog_slope(Ns, dyn[head]),
            traced,
        )
        for head in counts
    }
