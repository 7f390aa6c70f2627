"""Argument validation shared by every public entry point.

Validate once at the boundary, name the argument in the message, and trust validated
data inside (the python-control ``_check_shape`` pattern).
"""

from __future__ import annotations

from typing import Any

import numpy as np

SYMMETRY_RTOL = 1e-12
PSD_RTOL = 1e-10


def show(x: Any, limit: int = 80) -> str:
    """``repr(x)`` on one line, shortened: for error messages."""
    text = " ".join(repr(x).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_float_array(x: Any, name: str) -> np.ndarray:
    """Convert ``x`` to a float64 array, or raise ``ValueError`` naming ``name``.

    Complex input is refused (its imaginary part would be dropped silently); torch tensors of any
    real dtype (bfloat16 and float16 included) are converted through float64.
    """
    if hasattr(x, "detach"):  # torch tensor
        if x.is_complex():
            raise ValueError(f"{name} must be real, got a complex tensor ({x.dtype})")
        import torch

        x = x.detach().cpu().to(torch.float64).numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(f"{name} must be a real array, got {type(x).__name__}") from exc
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real, got a complex array")
    try:
        return arr.astype(np.float64, copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be a real array, got {type(x).__name__}") from exc


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` if ``arr`` holds NaN or inf."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite entries (NaN or inf)")


def check_vector(x: Any, name: str, d: int | None = None) -> np.ndarray:
    """A finite 1-D float array, of length ``d`` when given."""
    arr = as_float_array(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a vector of shape (d,), got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d},), got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def check_tokens(x: Any, name: str = "x", d: int | None = None, min_n: int = 1) -> np.ndarray:
    """A finite (N, d) float64 token array with N >= ``min_n`` (and ``d`` columns when given)."""
    arr = as_float_array(x, name)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (N, d), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must have d={d} columns, got shape {arr.shape}")
    if arr.shape[0] < min_n:
        raise ValueError(f"{name} must hold at least N={min_n} tokens, got N={arr.shape[0]}")
    check_finite(arr, name)
    return arr


def check_matrix(x: Any, name: str, d: int | None = None) -> np.ndarray:
    """A finite square float matrix, of size ``d`` when given."""
    arr = as_float_array(x, name)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square matrix of shape (d, d), got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d}, {d}), got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def _frobenius(arr: np.ndarray) -> float:
    """The Frobenius norm without overflow in the squares (entries up to the largest float)."""
    m = float(np.abs(arr).max()) if arr.size else 0.0
    if m == 0.0 or not np.isfinite(m):
        return m
    return m * float(np.linalg.norm(arr / m))


def check_covariance(x: Any, name: str, d: int | None = None) -> np.ndarray:
    r"""A covariance matrix: square, finite, symmetric and positive semidefinite.

    Symmetric means :math:`\|\Sigma - \Sigma^\top\| \le 10^{-12}\,\|\Sigma\|`; positive semidefinite
    means :math:`\lambda_{\min}(\Sigma) \ge -10^{-10}\,\|\Sigma\|`. Rank-deficient matrices are valid.
    The returned matrix is exactly symmetric.
    """
    arr = check_matrix(x, name, d)
    scale = _frobenius(arr)
    if _frobenius(arr - arr.T) > SYMMETRY_RTOL * max(scale, np.finfo(float).tiny):
        raise ValueError(f"{name} must be symmetric (to 1e-12 relative)")
    arr = 0.5 * (arr + arr.T)
    if arr.size and np.linalg.eigvalsh(arr)[0] < -PSD_RTOL * scale:
        raise ValueError(
            f"{name} must be positive semidefinite: smallest eigenvalue "
            f"{np.linalg.eigvalsh(arr)[0]:.3e} < -1e-10 * ||{name}||"
        )
    return arr


def check_moments(
    mu: Any, Sigma: Any, mu_name: str = "mu0", Sigma_name: str = "Sigma0", d: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a Gaussian's mean and covariance together (matching dimension ``d``)."""
    mu_arr = check_vector(mu, mu_name, d)
    Sigma_arr = check_covariance(Sigma, Sigma_name, mu_arr.shape[0])
    return mu_arr, Sigma_arr


def check_positive(x: float, name: str) -> float:
    """A finite, strictly positive scalar (not a bool)."""
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive number, got {show(x)}")
    try:
        val = float(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a positive number, got {show(x)}") from exc
    if not np.isfinite(val) or val <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {show(x)}")
    return val


def check_nonnegative(x: Any, name: str) -> float:
    """A finite scalar >= 0 (not a bool)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a finite number >= 0, got {show(x)}")
    if not (np.isfinite(x) and x >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {show(x)}")
    return float(x)


def check_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (a Python or NumPy integer, not a bool, not a float)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {show(value)}")
    return int(value)


def check_integer(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]``: a Python or NumPy integer, or a float with an integer value (not a
    bool, not NaN or inf, not a string)."""
    bounds = (
        (f" >= {minimum}" if maximum is None else f" in [{minimum}, {maximum}]")
        if minimum is not None
        else (f" <= {maximum}" if maximum is not None else "")
    )
    ok = (
        not isinstance(value, (bool, np.bool_))
        and isinstance(value, (int, np.integer, float, np.floating))
        and bool(np.isfinite(value))
        and int(value) == value
    )
    if not ok or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{bounds}, got {show(value)}")
    return int(value)


def check_span(t_span: Any, name: str = "t_span") -> tuple[float, float]:
    """An integration interval ``(t0, t1)`` with finite ``t1 > t0``."""
    span = as_float_array(t_span, name)
    if span.shape != (2,) or not np.all(np.isfinite(span)) or span[1] <= span[0]:
        raise ValueError(f"{name} must be (t0, t1) with finite t1 > t0, got {show(t_span)}")
    return float(span[0]), float(span[1])


def check_seed(seed: Any, name: str = "seed") -> int | list[int]:
    """A seed for ``numpy.random.default_rng``: a non-negative integer, or a non-empty sequence of them.

    Raises ``ValueError`` naming ``name`` (numpy's own message, "expected non-negative integer", does not).
    """
    if isinstance(seed, (bool, np.bool_)):
        raise ValueError(f"{name} must be a non-negative integer, got {show(seed)}")
    if isinstance(seed, (int, np.integer)):
        if seed < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {show(seed)}")
        return int(seed)
    if isinstance(seed, (list, tuple, np.ndarray)):
        arr = np.asarray(seed)
        if (
            arr.ndim != 1
            or arr.size == 0
            or arr.dtype.kind not in "iu"
            or any(isinstance(s, (bool, np.bool_)) for s in arr.tolist())
            or np.any(arr < 0)
        ):
            raise ValueError(f"{name} must be a non-negative integer or a sequence of them, got {show(seed)}")
        return [int(s) for s in arr]
    raise ValueError(f"{name} must be a non-negative integer, got {show(seed)}")


def as_generator(seed: Any, name: str = "seed") -> np.random.Generator:
    """``seed`` as a numpy Generator: a Generator itself, None (fresh entropy), a SeedSequence or BitGenerator,
    or what :func:`check_seed` accepts; else ``ValueError`` naming ``name``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(seed)
    return np.random.default_rng(check_seed(seed, name))
