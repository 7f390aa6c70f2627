r"""Chapter 6's harness: prescribed Transformers run on tokens against the exact Gaussian layer map, blow-up
depth, depth convergence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtbook.studies.traced import Sides, collect, observed, predicted
from gtcore.controls import Controls
from gtcore.models.prescribed import hidden_states, prescribed_transformer
from gtcore.models.prescribed_moments import split_controls
from gtcore.moments import layer_map

__all__ = [
    "BetaDependence",
    "BlowupDepth",
    "DepthConvergence",
    "PrescribedRun",
    "antithetic_gaussian_tokens",
    "beta_dependence",
    "covariance_band",
    "depth_convergence",
    "first_exceedance",
    "layer_map_blowup_depth",
    "prescribed_deviations",
    "run_prescribed",
]


@dataclass(frozen=True)
class BlowupDepth:
    r"""The first layer at which :math:`\|\Sigma_\ell\|_F > \text{factor}\cdot\|\Sigma_0\|_F`.

    Attributes
    ----------
    depth : int or None (the threshold was never crossed within ``max_layers``)
    factor : the threshold factor
    h : the layer size
    norms : :math:`\|\Sigma_\ell\|_F / \|\Sigma_0\|_F` for :math:`\ell = 0..` (up to the crossing)
    """

    depth: int | None
    factor: float
    h: float
    norms: np.ndarray

    @property
    def time(self) -> float:
        """``depth * h`` (``inf`` when not crossed)."""
        return math.inf if self.depth is None else self.depth * self.h


def first_exceedance(norm_ratios: Any, factor: float) -> int | None:
    """The first index whose ratio exceeds ``factor`` (non-finite counts as exceeding), or None."""
    r = np.asarray(norm_ratios, float)
    hit = np.flatnonzero(~np.isfinite(r) | (r > factor))
    return int(hit[0]) if hit.size else None


def layer_map_blowup_depth(
    mu0: Any,
    Sigma0: Any,
    controls: Controls,
    h: float,
    *,
    factor: float = 1e3,
    max_layers: int = 1_000_000,
    feed_forward: bool | None = None,
) -> BlowupDepth:
    r"""Depth at which the exact layer map's covariance first exceeds ``factor`` times its start.

    Iterates :func:`~gtcore.models.prescribed_moments.layer_moments`' map one block at a time and stops at the
    crossing, so the super-exponential growth past the ODE's :math:`t^*` never overflows. As :math:`h \to 0`,
    ``depth * h`` tends to the time at which the moment ODE's :math:`\|\Sigma\|_F` crosses
    ``factor`` :math:`\|\Sigma_0\|_F`, and to :math:`t^*` as ``factor`` grows.
    """
    if not (isinstance(factor, (int, float)) and factor > 1):
        raise ValueError(f"factor must be a number > 1, got {factor!r}")
    if feed_forward is None:
        feed_forward = bool(np.any(controls.A) or np.any(controls.b))
    subs = list(split_controls(controls)) if feed_forward else [controls]
    mu, S = np.asarray(mu0, float), np.asarray(Sigma0, float)
    n0 = float(np.linalg.norm(S))
    norms = [1.0]
    for ell in range(1, int(max_layers) + 1):
        try:
            for c in subs:
                mu, S = layer_map(mu, S, c, h)
        except OverflowError:  # past float64 in one layer: crossed
            norms.append(math.inf)
            return BlowupDepth(ell, float(factor), float(h), np.array(norms))
        norms.append(float(np.linalg.norm(S)) / n0)
        if norms[-1] > factor:
            return BlowupDepth(ell, float(factor), float(h), np.array(norms))
    return BlowupDepth(None, float(factor), float(h), np.array(norms))


# ============================================================================== chapter harness
def antithetic_gaussian_tokens(n: int, Sigma: Any, seed: int = 0) -> np.ndarray:
    r"""``n`` tokens :math:`\pm z_k`, :math:`z_k \sim N(0, \Sigma)` i.i.d., :math:`k = 1..n/2`.

    The cloud is symmetric, and the prescribed layer (no bias, odd attention:
    :math:`\operatorname{attn}(-x)` over a symmetric cloud is :math:`-\operatorname{attn}(x)`)
    keeps it symmetric, so its mean stays exactly 0. With i.i.d. tokens the sample mean
    :math:`\hat\mu_0 \sim N^{-1/2}` is amplified by :math:`e^{vt}` (the mean equation
    :math:`\mu' = V\mu + V\Sigma B\mu`), and a large common mean saturates a finite softmax.
    The covariance estimate has the fluctuation of :math:`n/2` samples.
    """
    from gtcore.stats.sampling import gaussian_tokens

    if n < 2 or n % 2:
        raise ValueError(f"n must be an even integer >= 2, got {n!r}")
    S = np.asarray(Sigma, float)
    z = gaussian_tokens(n // 2, np.zeros(S.shape[0]), S, seed=seed)
    return np.concatenate([z, -z])


def covariance_band(Sigma: Any, n_samples: int, z: float = 3.0) -> float:
    r"""Relative size of ``z`` standard deviations of an empirical covariance of ``n`` Gaussians.

    .. math::

        \frac{z\,\sqrt{\mathbb E\|\hat\Sigma - \Sigma\|_F^2}}{\|\Sigma\|_F}
        = \frac{z}{\|\Sigma\|_F}\sqrt{\frac{\operatorname{tr}(\Sigma^2) + (\operatorname{tr}\Sigma)^2}{n}} .
    """
    S = np.asarray(Sigma, float)
    return float(z * np.sqrt((np.trace(S @ S) + np.trace(S) ** 2) / n_samples) / np.linalg.norm(S))


@dataclass
class PrescribedRun:
    r"""One prescribed Transformer run next to its Gaussian predictions.

    Attributes
    ----------
    family, layer_norm, feed_forward, h : the model
    Sigma_model : (L + 1, d, d) empirical covariance of the hidden states after each layer
    Sigma_map : (L + 1, d, d) the exact layer map (:func:`~gtcore.models.prescribed_moments.layer_moments`) from the
        input's empirical moments; ``inf`` once it overflows
    t_ode, Sigma_ode : the moment ODE (:func:`gtcore.moments.integrate_moments`) at the layer times
        :math:`\ell h` up to its blow-up event
    t_star : the ODE's blow-up time from the input's covariance (:func:`gtcore.riccati.blowup_time`)
    seconds : wall time of the model's forward pass
    tokens : (L + 1, N, d) hidden states, kept with ``run_prescribed(..., keep_tokens=True)``
        (for an animation), else None
    sides : the traced sides of ``Sigma_model`` against ``Sigma_map`` (:mod:`gtbook.studies.traced`): the
        Transformer built and run (observed); the exact layer map from the input's moments (predicted)
    """

    family: str
    layer_norm: bool
    feed_forward: bool
    h: float
    Sigma_model: np.ndarray
    Sigma_map: np.ndarray
    t_ode: np.ndarray
    Sigma_ode: np.ndarray
    t_star: float
    seconds: float
    tokens: np.ndarray | None = None
    sides: Sides = field(default_factory=Sides.empty, compare=False, repr=False)

    @staticmethod
    def _ratio(S: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            n = np.linalg.norm(S, axis=(1, 2))
        return n / n[0]

    @property
    def model_ratio(self) -> np.ndarray:
        r""":math:`\|\hat\Sigma_\ell\|_F / \|\hat\Sigma_0\|_F` of the model."""
        return self._ratio(self.Sigma_model)

    @property
    def map_ratio(self) -> np.ndarray:
        return self._ratio(self.Sigma_map)

    @property
    def ode_ratio(self) -> np.ndarray:
        return self._ratio(self.Sigma_ode)

    def depth(self, factor: float = 1e3) -> tuple[int | None, int | None]:
        """First layer beyond ``factor`` times the initial norm: (model, layer map)."""
        return first_exceedance(self.model_ratio, factor), first_exceedance(self.map_ratio, factor)

    def deviation(self) -> np.ndarray:
        r""":math:`\|\hat\Sigma_\ell - \Sigma^{\text{map}}_\ell\|_F / \|\Sigma^{\text{map}}_\ell\|_F` per layer."""
        with np.errstate(invalid="ignore", over="ignore"):
            return np.linalg.norm(self.Sigma_model - self.Sigma_map, axis=(1, 2)) / np.linalg.norm(
                self.Sigma_map, axis=(1, 2)
            )


def _map_until_overflow(mu0, S0, controls, n_layers, h, feed_forward, cap=1e150):
    subs = list(split_controls(controls)) if feed_forward else [controls]
    mu, S = np.asarray(mu0, float), np.asarray(S0, float)
    out = [S]
    for _ in range(n_layers):
        with np.errstate(over="ignore"):
            big = not np.isfinite(S).all() or np.abs(S).max() > cap
        if big:
            out.append(np.full_like(S, np.inf))
            continue
        try:
            for c in subs:
                mu, S = layer_map(mu, S, c, h)
        except OverflowError:
            S = np.full_like(S, np.inf)
        out.append(S)
    return np.stack(out)


def run_prescribed(
    family: str,
    controls: Controls,
    tokens: Any,
    n_layers: int,
    h: float,
    *,
    layer_norm: bool = False,
    feed_forward: bool | None = None,
    keep_tokens: bool = False,
) -> PrescribedRun:
    """Build the prescribed Transformer, run ``tokens`` through it, and compute the predictions.

    ``keep_tokens=True`` also returns the hidden states after every layer (``PrescribedRun.tokens``).
    """
    import time

    from gtcore.moments import integrate_moments
    from gtcore.riccati import blowup_time
    from gtcore.stats.gaussianity import empirical_moments

    if feed_forward is None:
        feed_forward = bool(np.any(controls.A) or np.any(controls.b))
    with collect() as sides:
        with observed():  # the Transformer, built from the controls and run on the tokens
            model = prescribed_transformer(
                family, controls, n_layers, h=h, layer_norm=layer_norm, feed_forward=feed_forward
            )
            t0 = time.perf_counter()
            hs = hidden_states(model, tokens)
            seconds = time.perf_counter() - t0
        Sm = np.stack([empirical_moments(x)[1] for x in hs])
        mu0, S0 = empirical_moments(np.asarray(tokens, float))
        with predicted():  # the exact layer map from the input's moments
            Smap = _map_until_overflow(mu0, S0, controls, n_layers, h, feed_forward)
    grid = h * np.arange(n_layers + 1)
    ode = integrate_moments(mu0, S0, controls, (0.0, grid[-1]), t_eval=grid)
    t_star = float(blowup_time(S0, controls).t_star)
    return PrescribedRun(
        family,
        bool(layer_norm),
        bool(feed_forward),
        float(h),
        Sm,
        Smap,
        np.asarray(ode.t),
        np.asarray(ode.Sigma),
        t_star,
        seconds,
        tokens=np.asarray(hs) if keep_tokens else None,
        sides=sides,
    )


@dataclass
class DepthConvergence:
    r"""The layer map's blow-up time ``depth * h`` against :math:`t^*` as :math:`h \to 0`.

    Attributes
    ----------
    hs : layer sizes; depths : blow-up depths (threshold ``factor``); t_star : the ODE's
    errors : :math:`|\text{depth}\cdot h - t^*|`; order : least-squares slope of
    :math:`\log(\text{error})` against :math:`\log h`
    """

    hs: np.ndarray
    depths: np.ndarray
    t_star: float
    factor: float
    errors: np.ndarray
    order: float


def depth_convergence(
    mu0: Any, Sigma0: Any, controls: Controls, hs: Sequence[float] | np.ndarray, *, factor: float = 1e8
) -> DepthConvergence:
    r"""Blow-up depth of the exact layer map for each ``h`` (:func:`layer_map_blowup_depth`)
    and its convergence to the ODE's :math:`t^*`; ``factor`` large so that the ODE's own crossing
    time is :math:`t^*` to :math:`O(1/\text{factor})`."""
    from gtcore.riccati import blowup_time

    t_star = float(blowup_time(Sigma0, controls).t_star)
    hs = np.asarray(hs, float)
    found: list[float] = []
    for h in hs:
        bd = layer_map_blowup_depth(
            mu0, Sigma0, controls, float(h), factor=factor, max_layers=int(10 * t_star / h) + 10
        )
        found.append(np.nan if bd.depth is None else bd.depth)
    depths = np.array(found, float)
    errors = np.abs(depths * hs - t_star)
    order = float(np.polyfit(np.log(hs), np.log(errors), 1)[0])
    return DepthConvergence(hs, depths, t_star, float(factor), errors, order)


def prescribed_deviations(
    family: str,
    controls: Controls,
    Sigma0: Any,
    n_tokens: int,
    seeds: int,
    n_layers: int,
    h: float,
    layer: int,
    *,
    predictions: dict,
    seed: int = 0,
    feed_forward: bool | None = None,
) -> dict:
    r"""Signed covariance deviations of R independent clouds through a prescribed Transformer, at one layer.

    Cloud ``s < seeds``: :func:`antithetic_gaussian_tokens` (``n_tokens``, :math:`\Sigma_0`, seed
    ``seed + s``) through the model of ``family`` built from ``controls`` (``n_layers`` blocks of size
    ``h``, no LayerNorm); for each named prediction (controls whose exact layer map is the prediction)
    the map starts from the cloud's own covariance (and mean 0, which the antithetic cloud keeps exactly),
    and :func:`gtbook.studies.nulls.signed_deviation` (covariance part only) of the model's
    :math:`\hat\Sigma_{\text{layer}}` from the map's is recorded. With
    :func:`gtcore.stats.inference.hotelling_test` this tests the model against a prediction with the
    spread the clouds themselves show (the actual null of a prediction started at the cloud's moments).

    Parameters
    ----------
    family : str
        ``"bert"``, ``"vit"`` or ``"modernbert"``.
    controls : Controls
        The model's layer.
    Sigma0 : (d, d) array
    n_tokens, seeds, n_layers : int
    h : float
    layer : int
        The layer compared (``0 < layer <= n_layers``).
    predictions : dict name -> Controls
    seed : int
    feed_forward : bool, optional
        As :func:`run_prescribed`.

    Returns
    -------
    dict name -> (seeds, d(d+1)/2) array
    """
    from gtbook.studies.nulls import signed_deviation
    from gtcore.stats.gaussianity import empirical_moments

    if not 0 < int(layer) <= int(n_layers):
        raise ValueError(f"layer must lie in 1..n_layers={n_layers}, got {layer!r}")
    if isinstance(seeds, bool) or int(seeds) != seeds or seeds < 2:
        raise ValueError(f"seeds must be an integer >= 2, got {seeds!r}")
    if feed_forward is None:
        feed_forward = bool(np.any(controls.A) or np.any(controls.b))
    with observed():
        model = prescribed_transformer(family, controls, n_layers, h=h, feed_forward=feed_forward)
    d = controls.d
    out: dict = {name: [] for name in predictions}
    for s in range(int(seeds)):
        x0 = antithetic_gaussian_tokens(n_tokens, Sigma0, seed=int(seed) + s)
        with observed():
            hs = hidden_states(model, x0)
        S_model = empirical_moments(hs[int(layer)])[1]
        S0 = empirical_moments(x0)[1]
        for name, pred in predictions.items():
            with predicted():
                S_pred = _map_until_overflow(np.zeros(d), S0, pred, int(layer), h, feed_forward)[int(layer)]
            out[name].append(signed_deviation(np.zeros(d), S_model, np.zeros(d), S_pred, mean=False))
    return {name: np.array(v) for name, v in out.items()}


@dataclass(frozen=True)
class BetaDependence:
    r"""How the agreement of a prescribed model with the layer map depends on the logit scale :math:`\beta`.

    Attributes
    ----------
    betas : (k,) array
    deviation : (k,) array
        :math:`\|\hat\Sigma_\ell - \Sigma^{\text{map}}_\ell\|_F / \|\Sigma^{\text{map}}_\ell\|_F` at the last
        layer where the map is within ``close_cut`` of its start.
    depth_gap : (k,) array
        ``|model depth - layer-map depth|`` at ``factor`` (``inf`` when the model never crosses).
    """

    betas: np.ndarray
    deviation: np.ndarray
    depth_gap: np.ndarray

    def __repr__(self) -> str:
        return f"BetaDependence(betas={self.betas.tolist()}, deviation={np.round(self.deviation, 4).tolist()})"


def beta_dependence(
    family: str,
    B0: Any,
    vb: float,
    betas: Sequence[float],
    tokens: Any,
    n_layers: int,
    h: float,
    *,
    close_cut: float = 10.0,
    factor: float = 1e3,
) -> BetaDependence:
    r"""The destabilising model :math:`V = (vb/\beta) I`, :math:`B = \beta B_0` for each :math:`\beta`.

    Every :math:`\beta` has the same product :math:`vB`.

    With :math:`V = vI` the Gaussian predictions depend on :math:`V, B` only through :math:`vB`, so every
    :math:`\beta` has the same layer map; a finite softmax over N tokens must resolve the tilt
    :math:`\Sigma^{1/2}B\Sigma^{1/2}`, which grows with :math:`\beta`.

    Returns
    -------
    BetaDependence
    """
    B0 = np.asarray(B0, float)
    d = B0.shape[0]
    devs, gaps = [], []
    for beta in betas:
        ctl = Controls(V=(vb / beta) * np.eye(d), B=beta * B0)
        run = run_prescribed(family, ctl, tokens, n_layers, h)
        close = np.flatnonzero(run.map_ratio <= close_cut)
        devs.append(float(run.deviation()[close[-1]]))
        md, mapd = run.depth(factor)
        gaps.append(math.inf if md is None or mapd is None else float(abs(md - mapd)))
    return BetaDependence(np.asarray(betas, float), np.array(devs), np.array(gaps))
