r"""Short-time departure of a ReLU feed-forward flow from the Gaussian (identity-activation) flow.

With the feed-forward block :math:`W\sigma(Ux + c)`, the ReLU velocity differs from the
identity-activation (affine) one only where a pre-activation is negative:

.. math::

    v_{\rm relu}(x) - v_{\rm id}(x) = W\big(\mathrm{relu}(z) - z\big) = W\,\mathrm{relu}(-z),
    \qquad z = Ux + c .

Both flows start from the same tokens, and the attention term is the same function of the same cloud
at :math:`t = 0`, so to first order in :math:`t` the moments of the two clouds differ by

.. math::

    \delta\mu(t) = t\,W a + O(t^2), \qquad
    \delta\Sigma(t) = t\,(C + C^\top) + O(t^2), \qquad
    a = \mathbb{E}\,\mathrm{relu}(-z), \quad C = \operatorname{Cov}\big(W\mathrm{relu}(-z), x\big).

For :math:`x \sim N(\mu, \Sigma)` each :math:`z_k \sim N(m_k, s_k^2)`, :math:`m = U\mu + c`,
:math:`s_k^2 = (U\Sigma U^\top)_{kk}`, and the Gaussian integrals are closed forms:

.. math::

    a_k = s_k\,\varphi(m_k/s_k) - m_k\,\Phi(-m_k/s_k), \qquad
    C = -W P U \Sigma, \quad P = \operatorname{diag}\Phi(-m_k/s_k),

the second by Stein's lemma, :math:`\operatorname{Cov}(x, g(z_k)) = \Sigma u_k\,\mathbb{E}g'(z_k)` with
:math:`g' = -\mathbf 1\{z < 0\}`. The Bures–Wasserstein distance is, to first order,
:math:`W_2 = t\sqrt{\|\delta\mu'\|^2 + \operatorname{tr}(X\Sigma X)} + O(t^2)` with
:math:`\Sigma X + X\Sigma = \delta\Sigma'` (the optimal map is :math:`I + tX`), so the relative departure

.. math::

    D(t) = \frac{W_2\big(N(\mu_{\rm relu}(t), \Sigma_{\rm relu}(t)),\ N(\mu_{\rm id}(t), \Sigma_{\rm id}(t))\big)}
                {\sqrt{\operatorname{tr}\Sigma_{\rm id}(t)}}
         = r\,t + O(t^2), \qquad
    r = \frac{\sqrt{\|Wa\|^2 + \operatorname{tr}(X\Sigma X)}}{\sqrt{\operatorname{tr}\Sigma}} .

Everything is set by the Gaussian mass on the inactive side of each kink, :math:`\Phi(-m_k/s_k)`, and its
first moment there. :func:`relu_departure_rate` is the closed form; :func:`relu_departure_rate_tokens` the
same first-order coefficient for an empirical cloud (sample averages instead of the Gaussian integrals),
whose spread over Gaussian samples of size N is the noise band of the rate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov
from scipy.stats import norm

from gtcore._validation import as_generator, check_integer, check_moments, check_tokens
from gtcore.controls import Controls
from gtcore.stats.gaussianity import bures_wasserstein


def _feedforward(controls: Controls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(controls, Controls) or not controls.has_feedforward:
        raise ValueError("controls must be a Controls with a feed-forward block (U, W, c)")
    return np.asarray(controls.U, float), np.asarray(controls.W, float), np.asarray(controls.c, float)


def first_order_w2(dmu: Any, dSigma: Any, Sigma: Any) -> float:
    r""":math:`\sqrt{\|\delta\mu\|^2 + \operatorname{tr}(X\Sigma X)}`, :math:`\Sigma X + X\Sigma = \delta\Sigma`:
    the derivative at :math:`t = 0` of :math:`W_2(N(\mu + t\delta\mu, \Sigma + t\delta\Sigma), N(\mu, \Sigma))`
    for a positive-definite :math:`\Sigma`.

    Parameters
    ----------
    dmu : (d,) array
        :math:`\delta\mu`, the mean's rate of change.
    dSigma : (d, d) array
        :math:`\delta\Sigma`, the covariance's rate of change (its symmetric part is used).
    Sigma : (d, d) array
        :math:`\Sigma`, positive definite.

    Returns
    -------
    float
        The first-order Bures–Wasserstein rate.
    """
    S = np.asarray(Sigma, float)
    dS = np.asarray(dSigma, float)
    if np.linalg.eigvalsh(S)[0] <= 0:
        raise ValueError("Sigma must be positive definite for the first-order Bures-Wasserstein distance")
    X = solve_continuous_lyapunov(S, 0.5 * (dS + dS.T))
    X = 0.5 * (X + X.T)
    return float(np.sqrt(np.dot(dmu, dmu) + np.trace(X @ S @ X)))


def relu_departure_rate(mu: Any, Sigma: Any, controls: Controls) -> float:
    r"""The closed-form rate :math:`r` of the module docstring for :math:`x \sim N(\mu, \Sigma)`.

    Parameters
    ----------
    mu, Sigma : (d,), (d, d) moments of the Gaussian input (Sigma positive definite)
    controls : Controls with a feed-forward block ``U, W, c``

    Returns
    -------
    float
        :math:`r` with :math:`D(t) = r\,t + O(t^2)`.
    """
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    U, W, c = _feedforward(controls)
    m = U @ mu + c
    s = np.sqrt(np.einsum("ki,ij,kj->k", U, Sigma, U))
    if np.any(s <= 0):
        raise ValueError("every pre-activation must have positive variance under N(mu, Sigma)")
    a = s * norm.pdf(m / s) - m * norm.cdf(-m / s)
    P = np.diag(norm.cdf(-m / s))
    C = -W @ P @ U @ Sigma
    return first_order_w2(W @ a, C + C.T, Sigma) / float(np.sqrt(np.trace(Sigma)))


def relu_departure_rate_tokens(x: Any, controls: Controls) -> float:
    r"""The same first-order rate for an empirical cloud: :math:`a` and :math:`C` are sample averages
    (:math:`1/N` normalisation) over the tokens, :math:`\Sigma` their covariance.

    Parameters
    ----------
    x : (N, d) array
        The tokens.
    controls : Controls
        A layer with a feed-forward block ``U, W, c``.

    Returns
    -------
    float
        The cloud's :math:`r`.
    """
    x = check_tokens(x, "x", min_n=2)
    U, W, c = _feedforward(controls)
    dv = np.maximum(-(x @ U.T + c), 0.0) @ W.T
    xm = x.mean(axis=0)
    Sigma = (x - xm).T @ (x - xm) / x.shape[0]
    C = (dv - dv.mean(axis=0)).T @ (x - xm) / x.shape[0]
    return first_order_w2(dv.mean(axis=0), C + C.T, Sigma) / float(np.sqrt(np.trace(Sigma)))


def relu_departure_rate_spread(
    controls: Any,
    n: int,
    repeats: int,
    *,
    mu: Any = None,
    Sigma: Any = None,
    seed: int | np.random.Generator | None = 0,
    chunk: int = 64,
) -> np.ndarray:
    r""":func:`relu_departure_rate_tokens` on ``repeats`` Gaussian samples of size ``n``, for each layer.

    Vectorised over the samples (``chunk`` at a time); every layer of ``controls`` (one
    :class:`~gtcore.controls.Controls` or a sequence) is evaluated on the same samples, drawn from
    :math:`N(\mu, \Sigma)` (default :math:`N(0, I)`). Its quantiles are the sampling band of the
    measured rate of a finite Gaussian cloud.

    Parameters
    ----------
    controls : Controls or sequence of Controls
        Layers with a feed-forward block ``U, W, c``.
    n : int
        Tokens per sample, at least 2.
    repeats : int
        Samples drawn.
    mu, Sigma : (d,), (d, d) arrays, optional
        The Gaussian the samples come from (default :math:`N(0, I)`).
    seed : int or numpy.random.Generator, optional
        Seeds the samples.
    chunk : int
        Samples evaluated at once.

    Returns
    -------
    (len(controls), repeats) array (a 1-D array for a single Controls)
    """
    single = isinstance(controls, Controls)
    layers = [controls] if single else list(controls)
    parts = [_feedforward(c) for c in layers]
    d = parts[0][0].shape[1]
    mu = np.zeros(d) if mu is None else mu
    Sigma = np.eye(d) if Sigma is None else Sigma
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma")
    for name, val, low in (("n", n, 2), ("repeats", repeats, 1), ("chunk", chunk, 1)):
        check_integer(val, name, low)
    rng = as_generator(seed)
    L = np.linalg.cholesky(Sigma)
    out = np.empty((len(layers), int(repeats)))
    done = 0
    while done < repeats:
        m = min(int(chunk), int(repeats) - done)
        x = mu + rng.standard_normal((m, int(n), d)) @ L.T
        xm = x.mean(axis=1, keepdims=True)
        xc = x - xm
        S = np.einsum("rni,rnj->rij", xc, xc) / n
        for i, (U, W, c) in enumerate(parts):
            dv = np.maximum(-(x @ U.T + c), 0.0) @ W.T
            dmu = dv.mean(axis=1)
            C = np.einsum("rni,rnj->rij", dv - dmu[:, None], xc) / n
            for r in range(m):
                out[i, done + r] = first_order_w2(dmu[r], C[r] + C[r].T, S[r]) / np.sqrt(np.trace(S[r]))
        done += m
    return out[0] if single else out


def moment_departure(mu_a: Any, Sigma_a: Any, mu_b: Any, Sigma_b: Any) -> np.ndarray:
    r"""Per time, :math:`W_2(N(\mu_a, \Sigma_a), N(\mu_b, \Sigma_b)) / \sqrt{\operatorname{tr}\Sigma_b}`:
    the relative departure :math:`D(t)` of cloud ``a`` (ReLU) from cloud ``b`` (identity activation).

    Parameters
    ----------
    mu_a, Sigma_a : (T, d), (T, d, d) arrays
        The moments of cloud ``a`` at T times.
    mu_b, Sigma_b : (T, d), (T, d, d) arrays
        The moments of cloud ``b`` at the same times.

    Returns
    -------
    (T,) array
        :math:`D(t)` at each time.
    """
    mu_a, Sigma_a, mu_b, Sigma_b = (np.asarray(z, float) for z in (mu_a, Sigma_a, mu_b, Sigma_b))
    if not (mu_a.shape == mu_b.shape and Sigma_a.shape == Sigma_b.shape and mu_a.ndim == 2):
        raise ValueError("mu_a, mu_b must be (T, d) and Sigma_a, Sigma_b (T, d, d) of matching shapes")
    return np.array(
        [
            bures_wasserstein(ma, Sa, mb, Sb) / np.sqrt(np.trace(Sb))
            for ma, Sa, mb, Sb in zip(mu_a, Sigma_a, mu_b, Sigma_b, strict=True)
        ]
    )


__all__ = [
    "first_order_w2",
    "moment_departure",
    "relu_departure_rate",
    "relu_departure_rate_spread",
    "relu_departure_rate_tokens",
]
