"""Host-side validation at the public boundary.

Value checks run on concrete (non-traced) inputs only; when a value is a tracer (the caller
jitted or vmapped a public function) they are skipped and only static checks (ranks, shapes,
dtypes) are made; what must hold inside compiled code is :mod:`~rankjax._core.traced`'s.
Finiteness: :mod:`~rankjax._core.finite`; query ids: :mod:`~rankjax._core.queries`. Errors
name the offending argument.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from .finite import (X64_HINT, finite_top, fits_compute_dtype, known_finite, mark_finite, max_abs,
                     max_abs_host, value_range)
from .host import device_array, is_concrete, reduce_concrete, reduction
from .memory import check_memory, compute_dtype
from .sparse import is_scipy_sparse, is_sparse, sparse_values


def _asymmetry_host(K, rows: int = 1024):
    r""":math:`(\max |K - K^T|, \max |K|)` a block of rows at a time (no ``m x m`` temporary)."""
    diff = np.zeros((), K.dtype)
    for s in range(0, K.shape[0], rows):
        diff = np.maximum(diff, np.max(np.abs(K[s:s + rows] - K[:, s:s + rows].T)))
    return diff, max_abs_host(K)


_asymmetry = reduction(lambda xp, K: (xp.max(xp.abs(K - K.T)), xp.max(xp.abs(K))),
                       _asymmetry_host)


def scipy_to_bcoo(x, name: str = "X"):
    """A scipy.sparse matrix as a BCOO (int32 indices; integer data as the default float)."""
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {x.shape}")
    if max(x.shape) >= 1 << 31:
        raise ValueError(f"{name} of shape {x.shape} has indices beyond int32")
    c = x.tocoo()
    data = c.data if c.dtype.kind == "f" else c.data.astype(compute_dtype())
    idx = np.stack([c.row, c.col], axis=1).astype(np.int32)
    return sparse.BCOO((device_array(data), device_array(idx)), shape=c.shape)


def as_float_array(x, name: str, finite: bool = False):
    """Converts ``x`` to a floating jax array (integers are promoted to the default
    float, float16/bfloat16 to float32; complex, bool and text are rejected).

    With ``finite`` NaN/inf is an error: host data is checked on the host before
    the transfer, a jax array by one device reduction. An array already checked here is
    returned as it is (:func:`known_finite`)."""
    if known_finite(x):
        return x
    if is_scipy_sparse(x):                    # scipy.sparse: converted once, to BCOO
        x = scipy_to_bcoo(x, name)
    if is_sparse(x):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
        top = finite_top(x, name) if finite else None
        x = x.astype(jnp.float32) if jnp.finfo(x.dtype).bits < 32 else x
        if top is not None:
            mark_finite(x, top)
        return x
    if x is None:
        raise TypeError(f"{name} must be an array, got None")
    if not isinstance(x, jax.Array):
        try:
            x = np.asarray(x)
        except ValueError as e:                  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular numeric array ({e})") from None
    dtype = x.dtype
    if np.issubdtype(dtype, np.complexfloating) or dtype == np.bool_ or dtype.kind in "OUSV":
        raise TypeError(f"{name} must be a real numeric array, got dtype {dtype}")
    top = finite_top(x, name) if finite else None
    if np.issubdtype(dtype, np.integer):
        x = device_array(x, compute_dtype())
    elif jnp.finfo(dtype).bits < 32:        # float16 / bfloat16: no LAPACK, computed in float32
        x = device_array(x, jnp.float32)
    else:
        x = device_array(x)
    if top is not None:
        mark_finite(x, top)
    return x


def require_concrete(x, name: str, where: str):
    """A TypeError, not JAX's TracerArrayConversionError, when a host-side routine
    (``where``) is given a traced ``x`` (called under the caller's ``jit``/``vmap``)."""
    if not is_concrete(x):
        raise TypeError(f"{where}: {name} must be concrete: it runs on the host, outside "
                        "jit/vmap; call it before the jitted function and pass its result in")
    return x


def host_labels(y, name: str = "y") -> np.ndarray:
    """Labels for a host-side routine (pair lists, levels): a concrete, finite,
    non-empty 1-D real array, returned as numpy float64."""
    if not is_concrete(y):
        raise TypeError(f"{name} must be concrete: this runs on the host, outside jit")
    a = np.asarray(y)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf values")
    return a


def check_matrix(X, name: str = "X", missing: bool = False):
    """``X`` a finite 2-D dense array or BCOO matrix of at least one row (``missing``: NaN and
    inf allowed, for a feature map)."""
    if missing and is_concrete(X):
        fits_compute_dtype(X, name)
    X = as_float_array(X, name, finite=not missing)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D [m, n], got shape {tuple(X.shape)}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(X.shape)})")
    return X


def check_targets(y, m: int, name: str = "y"):
    """``y`` must be finite with shape ``[m]`` or ``[m, k]``."""
    y = as_float_array(y, name, finite=True)
    if y.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape [m] or [m, k], got {tuple(y.shape)}")
    if y.shape[0] != m:
        raise ValueError(f"{name} has {y.shape[0]} rows but {m} were expected")
    if y.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    return y


def check_positive(lam, *, allow_zero: bool = False, name: str = "lam", scalar: bool = False):
    """A positive parameter (λ, γ, C, tol, a learning rate ... named by ``name``) must be a
    finite scalar (or array of them) > 0 (>= 0 if ``allow_zero``);
    with ``scalar`` an array of several values is a ``TypeError`` (vmap instead)."""
    if lam is None:
        raise TypeError(f"{name} is required")
    if scalar and np.ndim(lam) != 0:
        raise TypeError(f"{name} must be a scalar, got shape {np.shape(lam)} "
                        "(rj.path for a grid, or jax.vmap over it)")
    if is_concrete(lam):
        arr = np.asarray(lam)
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be a real number, got {arr.dtype}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite, got {lam}")
        if allow_zero and np.any(arr < 0):
            raise ValueError(f"{name} must be >= 0, got {lam}")
        if not allow_zero and np.any(arr <= 0):
            raise ValueError(f"{name} must be > 0, got {lam}")
        if arr.dtype.kind == "f" or isinstance(lam, float):
            _lam_fits(arr, name)
    return lam


def _lam_fits(arr, name):
    """A λ the compute dtype cannot hold (it would become 0 or inf there) is refused."""
    dt = jax.dtypes.canonicalize_dtype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        cast = arr.astype(dt)
    if np.any((cast == 0) & (arr != 0)) or np.any(np.isinf(cast)):
        raise ValueError(f"{name}={arr.tolist()} cannot be represented in the {dt} compute dtype "
                         f"(it would become {'0' if np.any(cast == 0) else 'inf'}; its range is "
                         f"{np.finfo(dt).tiny:.3g} to {np.finfo(dt).max:.3g}): use a λ in range "
                         f"or compute in float64 ({X64_HINT})")


def check_gram(X, name: str = "X"):
    """The primal forms build ``n x n`` matrices (Gram, eigenvectors): refuse clearly
    when they cannot fit, and say what to use instead."""
    m, n = X.shape
    if is_concrete(X) and m and n:
        data = sparse_values(X)
        if getattr(data, "size", 1):
            top, big = max_abs(data), float(jnp.finfo(X.dtype).max)
            if top * top * m > big / 4:          # an entry of X^T L X could overflow
                raise ValueError(f"{name}: X^T L X would overflow {jnp.dtype(X.dtype).name} "
                                 f"(|{name}| up to {top:.3g} over {m} rows): rescale the features "
                                 f"(e.g. StandardScaler) or compute in float64 ({X64_HINT})")
    check_memory(3 * n * n * compute_dtype(X).itemsize,
                 f"{name} has {n} features: the primal form (n x n matrices)",
                 "use rj.Dual() (an m x m system: fewer rows than features), rj.CG() (sparse, "
                 "matrix-free), or rj.Auto() / rankjax.estimators.RankRLS, which pick the form "
                 "by shape")
    return X


def check_flag(value, name: str) -> bool:
    """A switch: ``True`` or ``False`` (numpy bools too). Anything else, the string
    ``"no"`` or the number 2 say, is a TypeError rather than a silent truth value."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def is_int(v) -> bool:
    """A Python or numpy integer that is not a bool (``True`` is an int to Python)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_seed(seed) -> int:
    """A random seed: a Python/numpy integer (a TypeError for a float, bool, array or tracer)."""
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return int(seed)


def check_count(n, name: str, minimum: int = 1) -> int:
    """An iteration cap or size: a Python/numpy integer ``>= minimum`` (not a bool)."""
    if not is_int(n):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    return int(n)


def check_indices(v, name: str, upper: int, ndim: int = 1):
    """Row indices: an integer array of ``ndim`` dimensions, non-empty, every entry in
    ``[0, upper)`` (checked when concrete: JAX gathers clamp out-of-range indices
    silently). Returns an int32 device array."""
    dtype = v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"{name} must hold integer row indices, got dtype {dtype}")
    if np.ndim(v) != ndim or np.size(v) == 0:
        raise ValueError(f"{name} must be a non-empty {ndim}-D integer array, got shape {np.shape(v)}")
    if is_concrete(v):
        lo, hi = value_range(v)
        if lo < 0 or hi >= upper:
            raise ValueError(f"{name} holds row indices outside [0, {upper}): min {lo}, max {hi}")
    return device_array(v, jnp.int32)


def check_symmetric(K, name: str = "K"):
    r"""A dense kernel matrix must be square and symmetric up to rounding
    (:math:`max|K - K^T| \le \sqrt{eps} max|K|`; one device reduction, skipped on tracers).
    Positive semi-definiteness is not checked (it costs a decomposition)."""
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square [m, m], got {tuple(K.shape)}")
    if is_concrete(K):
        diff, size = (float(v) for v in reduce_concrete(_asymmetry, K))
        if diff > np.sqrt(np.finfo(K.dtype).eps) * size:
            raise ValueError(f"{name} is not symmetric (max |K - K^T| = {diff:.3g}): "
                             "pass a kernel matrix K(X, X)")
    return K


def check_lams(lams):
    """A non-empty 1-D grid of finite λ > 0 (``lams``); traced values pass (under ``jit`` an
    invalid λ gives NaN and the ``invalid_input`` code)."""
    if not isinstance(lams, jax.Array) and np.asarray(lams).dtype.kind in "fiu":
        check_positive(np.asarray(lams, dtype=float), name="lams")
    lams = as_float_array(lams, "lams")           # (checked before the cast, and after)
    if lams.ndim != 1 or lams.shape[0] == 0:
        raise ValueError(f"lams must be a non-empty 1-D grid, got shape {tuple(lams.shape)}")
    check_positive(lams, name="lams")
    return lams
