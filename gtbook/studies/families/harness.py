r"""Harness of chapter 7: attention families (dot product, L2, Sinkhorn, several heads).

* :func:`run_family`: N tokens and the moment ODE of one attention type, side by side;
* :func:`moment_discrepancy` and :func:`noise_floor`: the statistic that compares them, and its
  sampling noise for N i.i.d. Gaussian tokens;
* :func:`growth_rate` and :func:`growth_bound_excess`: the asymptotic slope of
  :math:`\log\lambda_{\max}(\Sigma(t))` and the largest excess over a Grönwall bound;
* :func:`predicted_rate`: the asymptotic growth rate derived from each type's moment ODE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtbook.studies.nulls import flow_deviations
from gtbook.studies.traced import observed, predicted
from gtcore.attention import attention_of
from gtcore.controls import Controls, ControlsLike
from gtcore.moments import MomentTrajectory, integrate_moments, moment_rhs
from gtcore.particles import ParticleTrajectory, simulate
from gtcore.stats.inference import pooled_loglog_slope, pooled_slope_standard_error
from gtcore.stats.sampling import gaussian_tokens

__all__ = [
    "DeviationDecay",
    "FamilyRun",
    "deviation_decay",
    "growth_bound_excess",
    "growth_rate",
    "head_cancellation",
    "moment_discrepancy",
    "near_misses",
    "noise_floor",
    "predicted_rate",
    "run_family",
]


def moment_discrepancy(mu_hat: np.ndarray, Sigma_hat: np.ndarray, mu: np.ndarray, Sigma: np.ndarray) -> float:
    r""":math:`\|\hat\mu - \mu\|_2/\|\Sigma\|_2^{1/2} + \|\hat\Sigma - \Sigma\|_F/\|\Sigma\|_F`: scale-free moment
    error."""
    return float(
        np.linalg.norm(mu_hat - mu) / np.sqrt(np.linalg.norm(Sigma, 2))
        + np.linalg.norm(Sigma_hat - Sigma) / np.linalg.norm(Sigma)
    )


def noise_floor(
    mu: np.ndarray, Sigma: np.ndarray, n_tokens: int, repeats: int, seed: int = 0, quantile: float = 0.99
) -> float:
    """The ``quantile`` of :func:`moment_discrepancy` between N i.i.d. tokens of N(mu, Sigma) and (mu, Sigma)."""
    vals = []
    for r in range(repeats):
        x = gaussian_tokens(n_tokens, mu, Sigma, seed=seed + r)
        m = x.mean(0)
        vals.append(moment_discrepancy(m, (x - m).T @ (x - m) / n_tokens, mu, Sigma))
    return float(np.quantile(vals, quantile))


@dataclass
class FamilyRun:
    """One attention type's tokens and moment ODE on the same controls and horizon.

    Attributes
    ----------
    controls : the layer
    ode : the moment ODE's trajectory at the particles' times
    particles : the N-token trajectory (tokens kept at the recorded times)
    discrepancy : :func:`moment_discrepancy` of the tokens against the ODE at the last time
    """

    controls: Controls
    ode: MomentTrajectory
    particles: ParticleTrajectory
    discrepancy: float


def run_family(
    controls: Controls,
    mu0: np.ndarray,
    Sigma0: np.ndarray,
    t_end: float,
    n_tokens: int,
    steps: int,
    seed: int = 0,
    record: int = 4,
) -> FamilyRun:
    """Simulate ``n_tokens`` tokens (RK4, ``steps`` steps) and integrate the moment ODE over ``[0, t_end]``
    from their own moments (inside a :func:`gtbook.studies.traced.collect` block: the tokens traced as the observed
    side, the ODE as the predicted one)."""
    x0 = gaussian_tokens(n_tokens, mu0, Sigma0, seed=seed)
    t_eval = np.linspace(0.0, t_end, record + 1)
    with observed():
        tr = simulate(x0, controls, (0.0, t_end), steps, t_eval=t_eval, keep_tokens=True, device="cpu")
    with predicted():
        ode = integrate_moments(tr.mu[0], tr.Sigma[0], controls, (0.0, t_end), t_eval=tr.t)
    disc = moment_discrepancy(tr.mu[-1], tr.Sigma[-1], ode.mu[-1], ode.Sigma[-1])
    return FamilyRun(controls, ode, tr, disc)


def growth_rate(traj: MomentTrajectory, window: float) -> float:
    r"""Least-squares slope of :math:`\log\lambda_{\max}(\Sigma(t))` over the last ``window`` of time."""
    keep = traj.t >= traj.t[-1] - window
    lam = np.linalg.eigvalsh(traj.Sigma[keep])[:, -1]
    return float(np.polyfit(traj.t[keep], np.log(lam), 1)[0])


def growth_bound_excess(traj: MomentTrajectory, rate: float) -> float:
    r""":math:`\max_t\,[\log\|\Sigma(t)\|_2 - \log\|\Sigma(0)\|_2 - \text{rate}\cdot t]` (:math:`\le 0` when the
    bound holds)."""
    lam = np.linalg.eigvalsh(traj.Sigma)[:, -1]
    return float(np.max(np.log(lam) - np.log(lam[0]) - rate * (traj.t - traj.t[0])))


def predicted_rate(controls: Controls) -> float:
    r"""The asymptotic growth rate of :math:`\lambda_{\max}(\Sigma)` derived from the moment ODE, when
    :math:`\Sigma^{-1} \to 0`: :math:`2\max\operatorname{Re}\lambda(F)`, :math:`F = A + \lim\sum_h V_hM_h(\Sigma)`.

    The limit is the attention type's :meth:`~gtcore.attention.AttentionType.asymptotic_linear_part`
    (an optional method):

    * ``"l2"``, every :math:`K_h` square and invertible: :math:`M_h \to K_h^{-1}Q_h`;
    * ``"sinkhorn"``, every :math:`B_h` symmetric positive definite: the whitened coupling
      :math:`K \to I`, so :math:`M_h\Sigma \to \Sigma` and :math:`F = A + \sum_h V_h`;
    * a type without one (the dot product, whose :math:`M_h = \Sigma B_h` grows with :math:`\Sigma`) raises.

    The rate is conditional: it assumes that :math:`\Sigma(t)` grows in every direction
    (:math:`\Sigma^{-1} \to 0`), which depends on :math:`\Sigma_0` (a small :math:`\Sigma_0` can
    collapse instead) and which :math:`F` itself rules out when an eigenvalue has real part
    :math:`\le 0` (then :math:`\Sigma` stays bounded along that eigenvector, :math:`M_h` does not
    reach its limit, and the rate differs: e.g. L2 with :math:`V = K = I`,
    :math:`Q = \begin{pmatrix}1 & 3\\ 0 & -1\end{pmatrix}` grows at 2.27, not 2). That case
    raises; compare the prediction with the integrated ODE before using it.

    Raises ``ValueError`` outside these cases.
    """
    att = attention_of(controls)
    F = controls.affine_A + att.asymptotic_linear_part(controls.V, att.params(controls))
    if np.linalg.eigvals(F).real.min() <= 0:
        raise ValueError(
            f"predicted_rate for {controls.attention!r} needs every eigenvalue of A + lim sum_h V_h "
            "M_h to have positive real part (otherwise Sigma does not grow in every direction)"
        )
    return float(2.0 * np.linalg.eigvals(F).real.max())


def head_cancellation(
    with_heads: Controls, bare: Controls, mu0: np.ndarray, Sigma0: np.ndarray, x0: np.ndarray, t_end: float, steps: int
) -> tuple[float, float]:
    r"""How far two heads of opposite values :math:`(V, Q, K)`, :math:`(-V, Q, K)` are from no attention.

    Returns ``(ode, tokens)``: the largest entry of the moment right-hand side's difference
    :math:`|(\mu', \Sigma')_{\text{heads}} - (\mu', \Sigma')_{\text{bare}}|` at :math:`(\mu_0, \Sigma_0)`,
    and of the final tokens' difference after ``steps`` RK4 steps over :math:`[0, t_{\text{end}}]` from
    ``x0``. Both vanish (up to round-off) when the heads' velocities cancel exactly.
    """
    r1, r0 = moment_rhs(mu0, Sigma0, with_heads), moment_rhs(mu0, Sigma0, bare)
    ode = max(np.abs(r1[0] - r0[0]).max(), np.abs(r1[1] - r0[1]).max())
    p1 = simulate(x0, with_heads, (0.0, t_end), steps, device="cpu").final_tokens
    p0 = simulate(x0, bare, (0.0, t_end), steps, device="cpu").final_tokens
    return float(ode), float(np.abs(p1 - p0).max())


def near_misses(controls: Controls, gain: float = 1.1) -> dict[str, Controls]:
    r"""Two plausible errors in a layer's moment ODE, as controls whose ODE carries them.

    * ``"attention term x gain"``: every :math:`V_h \to \text{gain}\cdot V_h`, so the attention drift
      :math:`\sum_h V_h M_h(\Sigma)` is ``gain`` times too large (for the covariance equation of every type,
      a gain error of :math:`M_h`);
    * ``"queries and keys swapped"``: :math:`Q_h \leftrightarrow K_h` (for the dot product and Sinkhorn,
      :math:`B_h^\top` in place of :math:`B_h = K_h^\top Q_h`; for L2 the logits
      :math:`-\|K_hx_i - Q_hx_j\|^2`), or :math:`B_h \to B_h^\top` when the layer is given by :math:`B`.

    Parameters
    ----------
    controls : Controls
        A layer without a feed-forward block.
    gain : float

    Returns
    -------
    dict name -> Controls
    """
    c = controls
    if c.has_feedforward:
        raise ValueError("controls: near_misses needs a layer without a feed-forward block")
    scaled = (
        Controls(A=c.A, b=c.b, V=gain * c.V, Q=c.Q, K=c.K, attention=c.attention)
        if c.Q is not None
        else Controls(A=c.A, b=c.b, V=gain * c.V, B=c.B, attention=c.attention)
    )
    swapped = (
        Controls(A=c.A, b=c.b, V=c.V, Q=c.K, K=c.Q, attention=c.attention)
        if c.Q is not None
        else Controls(A=c.A, b=c.b, V=c.V, B=np.swapaxes(c.B, 1, 2), attention=c.attention)
    )
    return {f"attention term x {gain:g}": scaled, "queries and keys swapped": swapped}


@dataclass(frozen=True)
class DeviationDecay:
    r"""How the clouds' deviation from a prediction shrinks with N.

    Attributes
    ----------
    Ns : (n,) int array
    norms : (1, n, seeds) array
        :math:`\|\delta_s\|` of each cloud's signed covariance deviation
        (:func:`gtbook.studies.nulls.signed_deviation`, covariance part).
    slope : float
        Log–log slope of the mean over clouds in N (:func:`gtcore.stats.inference.pooled_loglog_slope`).
    se : float
        Its bootstrap standard error (clouds resampled within each N).
    """

    Ns: np.ndarray
    norms: np.ndarray
    slope: float
    se: float

    def __repr__(self) -> str:
        return f"DeviationDecay(Ns={self.Ns.tolist()}, slope={self.slope:.3f}, se={self.se:.3f})"


def deviation_decay(
    controls: ControlsLike,
    mu0: np.ndarray,
    Sigma0: np.ndarray,
    T: float,
    Ns,
    seeds: int,
    steps: int,
    *,
    predictions: dict,
    seed: int = 0,
    n_boot: int = 2000,
    boot_seed: int = 0,
) -> dict:
    r"""For each prediction, the decay in N of the clouds' covariance deviation from it.

    For each N of ``Ns``, :func:`gtbook.studies.nulls.flow_deviations` (covariance part, float64 kernel,
    seeds ``seed + 1000 i + s`` for the i-th N) gives each cloud's deviation from each prediction
    started at its own moments. A prediction that is the large-N limit of the clouds gives a deviation
    that vanishes as N grows (whatever its rate: fluctuation and bias of the finite-N attention); a wrong
    prediction gives one that levels off at its error.

    Parameters
    ----------
    controls : the layer that moves the tokens
    mu0, Sigma0 : the input Gaussian
    T : float
        Horizon.
    Ns : sequence of int
        Cloud sizes (at least two).
    seeds, steps : int
        Clouds per size, RK4 steps over :math:`[0, T]`.
    predictions : mapping name -> controls
        Each one's moment ODE is a prediction.
    seed, n_boot, boot_seed : int
        Seed of the first cloud; bootstrap resamples and their seed.

    Returns
    -------
    dict name -> DeviationDecay
    """
    Ns = np.asarray(Ns, int)
    per_n = [
        flow_deviations(
            controls,
            mu0,
            Sigma0,
            T,
            int(N),
            seeds,
            steps,
            predictions=predictions,
            seed=int(seed) + 1000 * i,
            mean=False,
            kernel_dtype=None,
        )
        for i, N in enumerate(Ns)
    ]
    out = {}
    for name in predictions:
        norms = np.stack([np.linalg.norm(d[name], axis=1) for d in per_n])[None]
        out[name] = DeviationDecay(
            Ns,
            norms,
            pooled_loglog_slope(Ns, norms),
            pooled_slope_standard_error(Ns, norms, n_boot=n_boot, seed=boot_seed),
        )
    return out
