r"""Shared linear algebra: PSD roots and factors, whitening, numerical rank, empirical moments.

One implementation of each, used by every module (NumPy; the torch variants import torch lazily).

Numerical range and rank. A covariance :math:`\Sigma = U\Lambda U^\top` (symmetric PSD, so its
eigenvalues are its singular values) has numerical rank

.. math::

    r = \#\{k : \lambda_k > \varepsilon\,\lambda_{\max}\}, \qquad \varepsilon = 10^{-8}
    \ (:data:`RANK_RTOL`),

one threshold for every covariance the library meets: whitening a token cloud, the rank of a
cloud or of a layer's hidden states, and whether a steering target is rank-deficient. The value
sits above the round-off of every computation that produces a :math:`\Sigma` here, with a margin:

* the moment ODE (:func:`gtcore.integrate_moments`, ``rtol = 1e-10``, ``atol = 1e-12``): the rank
  is invariant in exact arithmetic, but a Runge-Kutta step is not a congruence, so eigenvalues that
  are exactly 0 come out at the size of the error control: :math:`10^{-12}` to
  :math:`2\cdot10^{-11}\,\lambda_{\max}` over random rank-1 runs in :math:`d = 3` (too close to the
  former 1e-10; a target produced by the integrator must count as rank-deficient, and 1e-8 leaves
  a margin of several hundred). No relative threshold helps once :math:`\lambda_{\max}` itself
  falls to ``atol`` (a collapsing :math:`\Sigma`);
* sample covariances (1/N, float64) of float64 or float32 tokens: a cloud confined to a subspace
  has null eigenvalues of order :math:`(u\,\|x\|)^2` (:math:`u` the tokens' unit round-off,
  :math:`\lesssim 10^{-13}` relative for float32) plus the symmetric eigensolver's
  :math:`d\,u_{64}\lambda_{\max} \approx 10^{-13}` at :math:`d = 384`.

A genuine direction whose variance is below :math:`10^{-8}` of the largest (a spread below
:math:`10^{-4}` of the largest) is treated as degenerate; no cloud or covariance of the book comes
near that condition number, and every chapter's claims are unchanged from the former split
thresholds (1e-10 for clouds, 1e-8 for steering targets). :mod:`gtcore.models.prescribed` has its own
``RANK_RTOL`` (1e-12) on the *singular values of the prescribed matrices* :math:`B_h, V_h`: it decides
whether a matrix factors exactly through a head, a different question (exactness of a given
matrix's factorisation, not the rank of a computed covariance).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gtcore._validation import show

#: relative eigenvalue threshold of the numerical range/rank of every covariance (see the module notes)
RANK_RTOL = 1e-8


# ------------------------------------------------------------------ roots and factors
def psd_power(S: np.ndarray, p: float) -> np.ndarray:
    r""":math:`S^p = U\Lambda^pU^\top` for symmetric :math:`S` (eigenvalues clipped at 0 when :math:`p > 0`), over
    leading axes."""
    w, U = np.linalg.eigh(S)
    if p > 0:
        w = np.clip(w, 0.0, None)
    return (U * (w**p)[..., None, :]) @ np.swapaxes(U, -1, -2)


def psd_project(S: np.ndarray) -> np.ndarray:
    r"""The nearest PSD matrix (Frobenius) to each symmetric ``S[..., :, :]``: negative eigenvalues set to 0.

    For covariances that are PSD in exact arithmetic (a flow's :math:`M\Sigma_0M^\top`) and whose
    computed value has eigenvalues below 0 by round-off or integration error. Matrices with
    :math:`\lambda_{\min} \ge 0` are returned unchanged (bit for bit).
    """
    S = np.asarray(S, dtype=np.float64)
    if S.size == 0:
        return S
    if S.ndim == 2:
        return psd_project(S[None])[0]
    if _clearly_positive_definite(S):
        return S  # what the eigenvalue test below would conclude, at a third of its cost or less
    lmin = np.linalg.eigvalsh(S)[..., 0]
    bad = lmin < 0
    if not np.any(bad):
        return S
    out = S.copy()
    w, U = np.linalg.eigh(S[bad])
    P = (U * np.clip(w, 0.0, None)[..., None, :]) @ np.swapaxes(U, -1, -2)
    out[bad] = 0.5 * (P + np.swapaxes(P, -1, -2))
    return out


def _clearly_positive_definite(S: np.ndarray) -> bool:
    r"""True when every ``S[k]`` has :math:`\lambda_{\min} > 8(d+1)^2\varepsilon\|S_k\|_F`, certified by Cholesky.

    A Cholesky factorisation that completes on :math:`S - \tau I` in floating point is exact for
    :math:`S - \tau I + E` with :math:`\|E\|_2 \le (d+1)d\,\varepsilon\|S\|_2` (to first order), so
    :math:`\lambda_{\min}(S) \ge \tau - \|E\|_2`; ``eigvalsh`` returns eigenvalues within
    :math:`O(d\,\varepsilon\|S\|_2)` of the exact ones. With :math:`\tau = 8(d+1)^2\varepsilon\|S\|_F` both
    errors are covered, so a True here means ``eigvalsh`` would find :math:`\lambda_{\min} \ge 0` too:
    :func:`psd_project` returns such matrices unchanged either way. False (some factorisation failed)
    decides nothing.
    """
    d = S.shape[-1]
    tau = 8.0 * (d + 1) ** 2 * np.finfo(float).eps * np.linalg.norm(S, axis=(-2, -1))
    if not np.all(np.isfinite(tau)) or np.any(tau <= 0):
        return False
    shifted = S.copy()
    diag = np.arange(d)
    shifted[..., diag, diag] -= tau[..., None]  # S - tau I
    try:
        np.linalg.cholesky(shifted)
    except np.linalg.LinAlgError:
        return False
    return True


def psd_sqrt(S: np.ndarray) -> np.ndarray:
    r"""The symmetric PSD square root :math:`S^{1/2}` (negative round-off eigenvalues clipped to 0)."""
    return psd_power(S, 0.5)


def psd_factor(Sigma: np.ndarray) -> np.ndarray:
    r"""A factor :math:`L` with :math:`LL^\top = \Sigma`, through the eigendecomposition.

    Works for rank-deficient :math:`\Sigma`, where a Cholesky factorisation would fail:
    eigenvalues within round-off of zero (:math:`\le 10\,d\,\varepsilon\,\lambda_{\max}`) are set
    to 0, so samples lie exactly in :math:`\operatorname{range}\Sigma` rather than
    :math:`\sqrt{\varepsilon}` away from it.
    """
    w, U = np.linalg.eigh(Sigma)
    if w.size:
        w = np.where(w <= 10 * w.size * np.finfo(float).eps * max(w[-1], 0.0), 0.0, w)
    return U * np.sqrt(w)


# ------------------------------------------------------------------------ rank, whitening
def symmetric_basis(d: int) -> list[np.ndarray]:
    r"""An orthonormal basis of the symmetric :math:`d \times d` matrices (Frobenius inner product):
    :math:`E_{ii} = e_i e_i^\top` and :math:`E_{ij} = (e_i e_j^\top + e_j e_i^\top)/\sqrt 2`, :math:`i < j`,
    in row order (:math:`d(d+1)/2` matrices)."""
    basis = []
    for i in range(d):
        for j in range(i, d):
            E = np.zeros((d, d))
            if i == j:
                E[i, i] = 1.0
            else:
                E[i, j] = E[j, i] = 1.0 / np.sqrt(2.0)
            basis.append(E)
    return basis


def numerical_rank(Sigma: Any, rtol: float = RANK_RTOL) -> int:
    r"""The number of eigenvalues :math:`\lambda_k > \text{rtol}\cdot\lambda_{\max}` (0 for :math:`\Sigma = 0`)."""
    w = np.linalg.eigvalsh(np.asarray(Sigma, dtype=np.float64))
    if w.size == 0 or w[-1] <= 0:
        return 0
    return int(np.sum(w > rtol * w[-1]))


def empirical_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean and :math:`1/N` covariance of validated (N, d) float samples, or of a stack (T, N, d)
    of clouds (then (T, d) and (T, d, d)); exactly symmetric."""
    if x.ndim == 3:
        mu = x.mean(axis=1)
        xc = x - mu[:, None]
        Sigma = np.einsum("tni,tnj->tij", xc, xc) / x.shape[1]
        return mu, 0.5 * (Sigma + Sigma.transpose(0, 2, 1))
    mu = x.mean(axis=0)
    xc = x - mu
    Sigma = xc.T @ xc / x.shape[0]
    return mu, 0.5 * (Sigma + Sigma.T)


def whiten(x: np.ndarray, name: str = "x") -> np.ndarray:
    r"""Whitened coordinates on the numerical range, :math:`y = \Lambda_r^{-1/2}U_r^\top(x - \hat\mu)`, shape (N, r)."""
    mu, Sigma = empirical_moments(x)
    w, U = np.linalg.eigh(Sigma)
    if w[-1] <= 0:
        raise ValueError(f"{name} has zero covariance (all tokens equal): nothing to whiten")
    keep = w > RANK_RTOL * w[-1]
    return ((x - mu) @ U[:, keep]) / np.sqrt(w[keep])


# ----------------------------------------------------------------------------- torch
def empirical_moments_torch(x):
    r"""Mean and (1/N) covariance of a torch cloud,
    :math:`\hat\Sigma = \frac1N\sum_i (x_i-\hat\mu)(x_i-\hat\mu)^\top`."""
    mu = x.mean(dim=0)
    xc = x - mu
    S = xc.T @ xc / x.shape[0]
    return mu, 0.5 * (S + S.T)


def resolve_device(device: Any = "auto", name: str = "device"):
    """A ``torch.device`` that exists here; ``"auto"``: CUDA when present, else CPU.

    Raises ``ValueError`` naming ``name`` for an unknown device or one this machine lacks (e.g.
    ``"cuda"`` without CUDA).
    """
    import torch

    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"{name} must be 'auto', 'cpu', 'cuda' (or 'cuda:N') or a torch.device, got {show(device)}"
        ) from None
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{name} must be 'auto', 'cpu' or 'cuda' (a device holding data), got {show(device)}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={show(device)}: CUDA is not available on this machine; use device='cpu' or 'auto'")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{name}={show(device)} is not usable here: {first}") from None
    return dev


#: the floating dtypes the particle simulator computes in (float16/bfloat16 are too coarse for
#: moments and blow-up tests: their 8 or 11 mantissa bits give covariances to 1e-2 or 1e-3)
TORCH_DTYPES = ("float32", "float64")


def resolve_dtype(dtype: Any, name: str = "dtype"):
    """``torch.float32`` or ``torch.float64`` from a torch dtype, a NumPy dtype or their names."""
    import torch

    if isinstance(dtype, torch.dtype):
        label = str(dtype).removeprefix("torch.")
    else:
        try:
            label = (
                np.dtype(dtype).name if dtype is not None and not isinstance(dtype, (bool, int, float)) else repr(dtype)
            )
        except TypeError:
            label = repr(dtype)
    if label not in TORCH_DTYPES:
        raise ValueError(f"{name} must be torch.float32 or torch.float64 (or 'float32', 'float64'), got {show(dtype)}")
    return getattr(torch, label)
