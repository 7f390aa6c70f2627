r"""Prescribed regimes with general parameters, on the three encoders, with a non-Gaussian control (chapter 6).

Each draw of a seeded ensemble is one layer :math:`(A, V, B)` of a regime's class in :math:`d = 3`, drawn so
that the class condition holds by construction (no draw is ever dropped):

* **destabilising** (same definiteness): :math:`V = \beta^{-1}V_0`, :math:`B = \beta B_0` with
  :math:`V_0 = v(G_V + c_VI)`, :math:`B_0 = G_B + c_BI` (:math:`G` Ginibre over :math:`\sqrt d`, the shifts
  making the symmetric parts' smallest eigenvalue ``margin``), so :math:`V` is non-symmetric with a
  positive-definite symmetric part and :math:`B` likewise; :math:`A = aG_A` general;
* **stabilising** (opposite definiteness): :math:`V_0 \to -V_0`, and :math:`A = aG_A + sI` anti-stable, the
  shift making :math:`\min\operatorname{Re}\operatorname{spec}A` = ``a_min``.

With :math:`\mu = 0` the Gaussian predictions depend on :math:`V, B` only through :math:`V\Sigma B`, the same
for every :math:`\beta`; the finite softmax sees :math:`\beta`: its sampling strength along the layer map is
:math:`\kappa_\ell = \lambda_{\max}(B^\top\Sigma_\ell B\Sigma_\ell) \propto \beta^2`.

Draw ``k`` runs on encoder ``families[k % 3]`` (``gtcore.models.prescribed.prescribed_transformer``, no
LayerNorm, the feed-forward sub-layer realising :math:`h(Ax)`), fed ``clouds`` antithetic Gaussian clouds
and as many antithetic **uniform** clouds with the same two moments (coordinates uniform on
:math:`[-\sqrt3, \sqrt3]`, then :math:`\Sigma_0^{1/2}`), all as one batch. Each cloud's prediction is the exact
layer map (:func:`gtcore.models.prescribed_moments.layer_moments`' split map) from its own covariance, and the
signed deviations of its covariance from it are tested layer by layer with Hotelling's test
(:func:`gtcore.stats.inference.hotelling_test`):

at every layer where the layer map keeps :math:`\kappa_\ell < 1/2` (the finite-variance regime) and has not
crossed its blow-up depth, at the level :math:`1 - 0.01/m` for the :math:`m` layers compared (Bonferroni); the
ratio :math:`T^2/q_{0.99}` is reported at every layer. Destabilising draws also compare the blow-up depth, the
first layer with :math:`\|\Sigma_\ell\|_F > 10^3\|\Sigma_0\|_F`, model and map, cloud by cloud.

**Layer size.** Destabilising: :math:`Lh = 1.5\,t^*`. Stabilising: the mean is 0 only up to round-off, and the
layer's mean recursion :math:`\mu \mapsto (I + hV(I + \Sigma B))\mu` amplifies it unless :math:`h\|V\|` is of
order one (an explicit Euler step of a stiff, stable mode); so :math:`h = \min(h_s, 1/\|V\|_2)` and
:math:`\lceil t_s/h\rceil` layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gtbook.studies.atlas.tables import wilson_interval
from gtbook.studies.nulls import signed_deviation
from gtbook.studies.prescribed.harness import _map_until_overflow, antithetic_gaussian_tokens, first_exceedance
from gtbook.studies.tables import Table
from gtbook.studies.traced import Sides, collect, merge, observed, predicted
from gtcore.controls import Controls
from gtcore.models.prescribed import FAMILIES, hidden_states, prescribed_transformer
from gtcore.riccati import blowup_time
from gtcore.stats.gaussianity import empirical_moments
from gtcore.stats.inference import hotelling_test

__all__ = ["GeneralRegimes", "RegimeDraw", "antithetic_uniform_tokens", "general_layer", "general_regimes"]


def _shift_to(G: np.ndarray, margin: float) -> np.ndarray:
    """``G + cI`` with the symmetric part's smallest eigenvalue equal to ``margin``."""
    return G + (margin - np.linalg.eigvalsh(0.5 * (G + G.T))[0]) * np.eye(G.shape[0])


def general_layer(
    regime: str,
    d: int,
    rng: np.random.Generator,
    *,
    beta: float,
    v: float = 0.25,
    margin: float = 0.5,
    a: float = 0.2,
    a_min: float = 1.0,
) -> Controls:
    r"""One layer of the regime's class (module docstring).

    Parameters
    ----------
    regime : {"destabilising", "stabilising"}
    d : int
    rng : numpy Generator
    beta : float
        The logit scale.
    v, margin : float
        The scale of :math:`V_0` and the smallest eigenvalue of the symmetric parts of :math:`G + cI`.
    a, a_min : float
        The scale of :math:`A`'s Ginibre part, and (stabilising) :math:`\min\operatorname{Re}\operatorname{spec}A`.

    Returns
    -------
    Controls
        ``A, V, B`` (b = 0).
    """
    if regime not in ("destabilising", "stabilising"):
        raise ValueError(f"regime must be 'destabilising' or 'stabilising', got {regime!r}")
    ginibre = [rng.standard_normal((d, d)) / np.sqrt(d) for _ in range(3)]
    V0 = v * _shift_to(ginibre[0], margin)
    B0 = _shift_to(ginibre[1], margin)
    A = a * ginibre[2]
    if regime == "stabilising":
        V0 = -V0
        A = A + (a_min - np.linalg.eigvals(A).real.min()) * np.eye(d)
    return Controls(A=A, V=V0 / beta, B=beta * B0)


def antithetic_uniform_tokens(n: int, Sigma: np.ndarray, seed: int = 0) -> np.ndarray:
    r"""``n`` tokens :math:`\pm\Sigma^{1/2}u_k`, :math:`u_k` uniform on :math:`[-\sqrt3, \sqrt3]^d` (mean 0,
    covariance :math:`\Sigma`, not Gaussian).

    Parameters
    ----------
    n : int
        Even.
    Sigma : (d, d) array
    seed : int

    Returns
    -------
    (n, d) array
    """
    if n < 2 or n % 2:
        raise ValueError(f"n must be an even integer >= 2, got {n!r}")
    w, U = np.linalg.eigh(np.asarray(Sigma, float))
    root = (U * np.sqrt(np.maximum(w, 0.0))) @ U.T
    u = np.random.default_rng(seed).uniform(-np.sqrt(3.0), np.sqrt(3.0), (n // 2, root.shape[0])) @ root
    return np.concatenate([u, -u])


@dataclass
class RegimeDraw:
    r"""One draw run on one encoder.

    Attributes
    ----------
    regime, family : str
    controls : Controls
    h : float
    gauss, uniform : (L,) arrays
        :math:`T^2/q` per layer :math:`\ell = 1..L` of the Gaussian and the uniform clouds (level 0.99;
        ``nan`` once the map overflows).
    compared : int
        The layers compared (:math:`\ell = 1..` ``compared``: before :math:`\kappa_\ell` reaches 1/2 and before the
        map's blow-up depth).
    level : float
        The level at the compared layers.
    gauss_ratio, uniform_ratio : float
        :math:`\max T^2/q_{\text{level}}` over the compared layers.
    depth_gap : float
        Destabilising: the largest ``|model depth - map depth|`` over the Gaussian clouds (``inf`` when one
        never crosses within L); stabilising: nan.
    crossings_match : bool
        Destabilising: every Gaussian cloud's model crosses :math:`10^3` within the L layers exactly when its
        layer map does (the blow-up regime); stabilising: neither crosses.
    map_norm, model_norm : (L + 1,) arrays
        :math:`\|\Sigma_\ell\|_F/\|\Sigma_0\|_F` of the first Gaussian cloud's map and model.
    kappa : (L + 1,) array
        :math:`\kappa_\ell` along the map from :math:`\Sigma_0`.
    seconds : float
        The encoder's forward pass.
    sides : Sides
        The traced sides (:mod:`gtbook.studies.traced`): the encoder built and run on the clouds (observed); the
        exact layer maps from each cloud's own covariance (predicted). The statistics are the comparison.
    """

    regime: str
    family: str
    controls: Controls
    h: float
    gauss: np.ndarray
    uniform: np.ndarray
    compared: int
    level: float
    gauss_ratio: float
    uniform_ratio: float
    depth_gap: float
    crossings_match: bool
    map_norm: np.ndarray
    model_norm: np.ndarray
    kappa: np.ndarray
    seconds: float
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @property
    def follows(self) -> bool:
        """The Gaussian clouds are consistent with the layer map at every compared layer."""
        return bool(self.gauss_ratio < 1.0)

    @property
    def depth_ok(self) -> bool:
        """The model's regime is the layer map's: it crosses :math:`10^3` within L layers exactly when the map does."""
        return bool(self.crossings_match)

    @property
    def control_rejected(self) -> bool:
        """The uniform clouds are rejected at the compared layers."""
        return bool(self.uniform_ratio > 1.0)


def _kappa(B: np.ndarray, S: np.ndarray) -> float:
    r""":math:`\lambda_{\max}(B^\top\Sigma B\Sigma)`, ``inf`` past float64."""
    P = B.T @ S @ B @ S
    return float(np.max(np.linalg.eigvals(P).real)) if np.isfinite(P).all() else float("inf")


def _ratios(hs: np.ndarray, x0: np.ndarray, ctl: Controls, h: float, layers: Sequence[int], level: float):
    """Hotelling ratios per layer for a batch of clouds (hidden states ``hs`` (L+1, R, N, d))."""
    d, L = ctl.d, hs.shape[0] - 1
    starts = [empirical_moments(x)[1] for x in x0]
    with predicted():  # the exact layer maps from each cloud's own covariance
        maps = [_map_until_overflow(np.zeros(d), S0, ctl, L, h, True) for S0 in starts]
    out = []
    for ell in layers:
        if not all(np.isfinite(m[ell]).all() for m in maps):
            out.append(np.nan)
            continue
        with np.errstate(over="ignore"):  # a map past float range near the pole: its norm is inf, as below
            dev = [
                signed_deviation(np.zeros(d), empirical_moments(hs[ell, s])[1], np.zeros(d), maps[s][ell], mean=False)
                for s in range(len(x0))
            ]
        try:
            out.append(hotelling_test(np.array(dev), level).ratio)
        except ValueError:  # a singular spread (deviations dominated by one direction): no test at this layer
            out.append(np.nan)
    return np.array(out), maps


def run_draw(
    regime: str,
    family: str,
    ctl: Controls,
    *,
    n_tokens: int,
    clouds: int,
    n_layers: int,
    h: float,
    seed: int,
    factor: float = 1e3,
) -> RegimeDraw:
    r"""Run one draw on one encoder (module docstring); cloud ``s`` uses seed ``seed + s`` for both laws."""
    import time

    d = ctl.d
    S0 = np.eye(d)
    xg = np.stack([antithetic_gaussian_tokens(n_tokens, S0, seed=seed + s) for s in range(clouds)])
    xu = np.stack([antithetic_uniform_tokens(n_tokens, S0, seed=seed + s) for s in range(clouds)])
    with collect() as sides:
        with observed():  # the encoder, built from the layer and run on both laws' clouds at once
            model = prescribed_transformer(family, ctl, n_layers, h=h, feed_forward=True)
            t0 = time.perf_counter()
            hs = hidden_states(model, np.concatenate([xg, xu]))
            seconds = time.perf_counter() - t0
        gauss, maps = _ratios(hs[:, :clouds], xg, ctl, h, range(1, n_layers + 1), 0.99)
    hg, hu = hs[:, :clouds], hs[:, clouds:]
    every = range(1, n_layers + 1)
    uniform, _ = _ratios(hu, xu, ctl, h, every, 0.99)
    pop = _map_until_overflow(np.zeros(d), S0, ctl, n_layers, h, True)
    with np.errstate(over="ignore", invalid="ignore"):
        kappa = np.array([_kappa(ctl.B[0], S) for S in pop])
        map_norm = np.linalg.norm(maps[0], axis=(1, 2)) / np.linalg.norm(maps[0][0])
    model_norm = np.linalg.norm([empirical_moments(x)[1] for x in hg[:, 0]], axis=(1, 2))
    model_norm = model_norm / model_norm[0]
    depth_map = first_exceedance(map_norm, factor)
    stop = min(
        depth_map if depth_map is not None else n_layers + 1,
        int(np.argmax(kappa >= 0.5)) if np.any(kappa >= 0.5) else n_layers + 1,
    )
    layers = list(range(1, stop))  # every layer before kappa reaches 1/2 and before the map's blow-up depth
    level = 1.0 - 0.01 / len(layers)
    gaps, match = [], True
    for s in range(clouds):
        with np.errstate(over="ignore", invalid="ignore"):
            mn = np.linalg.norm([empirical_moments(x)[1] for x in hg[:, s]], axis=(1, 2))
            pn = np.linalg.norm(maps[s], axis=(1, 2))
        dm, dp = first_exceedance(mn / mn[0], factor), first_exceedance(pn / pn[0], factor)
        match = match and (dm is None) == (dp is None)
        gaps.append(np.inf if dm is None or dp is None else abs(dm - dp))
    depth_gap = float(max(gaps)) if regime == "destabilising" else float("nan")
    # a layer without a test counts against the Gaussian clouds and does not count as the control's rejection
    g_ratio = float(np.max(np.nan_to_num(_ratios(hg, xg, ctl, h, layers, level)[0], nan=np.inf)))
    u_ratio = float(np.max(np.nan_to_num(_ratios(hu, xu, ctl, h, layers, level)[0], nan=-np.inf)))
    return RegimeDraw(
        regime,
        family,
        ctl,
        float(h),
        gauss,
        uniform,
        len(layers),
        float(level),
        g_ratio,
        u_ratio,
        depth_gap,
        bool(match),
        map_norm,
        model_norm,
        kappa,
        float(seconds),
        sides,
    )


@dataclass
class GeneralRegimes:
    """The draws of both regimes (``general_regimes``)."""

    draws: list[RegimeDraw] = field(default_factory=list)

    def of(self, regime: str, family: str | None = None) -> list[RegimeDraw]:
        """The draws of one regime (on one encoder, when given)."""
        return [r for r in self.draws if r.regime == regime and (family is None or r.family == family)]

    def sides(self, regime: str, family: str | None = None) -> Sides:
        """The traced sides of the regime's draws (on one encoder, when given), merged."""
        return merge(*(r.sides for r in self.of(regime, family)))

    def fraction(self, regime: str, what: str = "follows") -> tuple[int, int, tuple[float, float]]:
        """``(k, n, Wilson 95 % interval)`` of the regime's draws that ``"follows"``, ``"depth_ok"`` or
        ``"control_rejected"``."""
        flags = [getattr(r, what) for r in self.of(regime)]
        k, n = int(sum(flags)), len(flags)
        return k, n, wilson_interval(k, n)

    def table(self) -> Table:
        """One row per draw."""
        return Table(
            [
                dict(
                    regime=r.regime,
                    family=r.family,
                    h=round(r.h, 4),
                    layers_compared=r.compared,
                    gauss=round(r.gauss_ratio, 2),
                    uniform=round(r.uniform_ratio, 1),
                    depth_gap=r.depth_gap,
                    follows=r.follows,
                    depth_ok=r.depth_ok,
                    control=r.control_rejected,
                )
                for r in self.draws
            ]
        )

    def figure(self):
        """Per-layer Hotelling ratios and norms (:func:`gtbook.studies.prescribed.figures.general_figure`)."""
        from gtbook.studies.prescribed.figures import general_figure

        return general_figure(self)

    @property
    def seconds(self) -> float:
        """Total time of the encoders' forward passes."""
        return float(sum(r.seconds for r in self.draws))

    def __repr__(self) -> str:
        parts = [
            f"{g}: {self.fraction(g)[0]}/{self.fraction(g)[1]} follow, "
            f"{self.fraction(g, 'control_rejected')[0]} uniform rejected"
            for g in ("destabilising", "stabilising")
        ]
        return "GeneralRegimes(" + "; ".join(parts) + ")"


def general_regimes(
    draws: int,
    *,
    beta: float,
    n_tokens: int,
    clouds: int,
    n_layers: int,
    depth_over_tstar: float,
    stable_h: float,
    stable_t: float,
    seed: int,
    families: Sequence[str] = FAMILIES,
    d: int = 3,
) -> GeneralRegimes:
    r"""``draws`` layers of each regime (``general_layer``), draw ``k`` on ``families[k % len(families)]``.

    Destabilising draw: ``n_layers`` layers of size :math:`h = \text{depth\_over\_tstar}\cdot t^*/L` (:math:`t^*`
    the moment ODE's blow-up time from :math:`\Sigma_0 = I`, :func:`gtcore.riccati.blowup_time`; a draw without
    a finite :math:`t^*` uses :math:`h = 1/L`). Stabilising draw: :math:`h = \min(\text{stable\_h}, 1/\|V\|_2)`,
    :math:`\lceil \text{stable\_t}/h\rceil` layers. Clouds of draw ``k``: seeds ``seed + 100 k + s``
    (destabilising) and ``seed + 100 k + 50 + s`` (stabilising).

    Parameters
    ----------
    draws : int
        Per regime.
    beta : float
        The logit scale (fixed before the run).
    n_tokens, clouds, n_layers : int
    depth_over_tstar, stable_h, stable_t : float
    seed : int
        Seeds the layers (``seed``) and the clouds.
    families : sequence of str
    d : int

    Returns
    -------
    GeneralRegimes
    """
    rng = np.random.default_rng(seed)
    out = GeneralRegimes()
    for k in range(draws):
        for regime in ("destabilising", "stabilising"):
            ctl = general_layer(regime, d, rng, beta=beta)
            family = families[k % len(families)]
            if regime == "destabilising":
                t_star = float(blowup_time(np.eye(d), ctl).t_star)
                h = depth_over_tstar * t_star / n_layers if np.isfinite(t_star) else 1.0 / n_layers
                L = n_layers
            else:
                h = min(stable_h, 1.0 / float(np.linalg.norm(ctl.V[0], 2)))
                L = int(np.ceil(stable_t / h))
            out.draws.append(
                run_draw(
                    regime,
                    family,
                    ctl,
                    n_tokens=n_tokens,
                    clouds=clouds,
                    n_layers=L,
                    h=h,
                    seed=seed + 100 * k + (0 if regime == "destabilising" else 50),
                )
            )
    return out
