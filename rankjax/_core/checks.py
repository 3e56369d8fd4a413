"""Host-side validation at the public boundary, and query-id remapping.

Everything here runs on concrete (non-traced) values only; when a value is a
tracer (the caller jitted or vmapped a public function) the value checks are
skipped and only static checks (ranks, shapes, dtypes) are made. Errors name the
offending argument.
"""
from __future__ import annotations

import collections
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from .host import device_array, reduce_concrete, reduction
from .memory import check_memory, compute_dtype
from .segments import bucket
from .sparse import is_scipy_sparse, is_sparse, sparse_values
from .types import saveable


def is_concrete(x) -> bool:
    """True when ``x`` holds values on the host side (not a jax tracer)."""
    if is_sparse(x):
        return is_concrete(sparse_values(x))
    return not isinstance(x, jax.core.Tracer)


def _max_abs_host(a):
    return np.maximum(-float(a.min()), float(a.max()))      # floats: no unsigned wrap-around


_max_abs = reduction(lambda xp, x: xp.max(xp.abs(x)), _max_abs_host)
_min_max = reduction(lambda xp, x: (xp.min(x), xp.max(x)))


def _asymmetry_host(K, rows: int = 1024):
    r""":math:`(\max |K - K^T|, \max |K|)` a block of rows at a time (no ``m x m`` temporary)."""
    diff = np.zeros((), K.dtype)
    for s in range(0, K.shape[0], rows):
        diff = np.maximum(diff, np.max(np.abs(K[s:s + rows] - K[:, s:s + rows].T)))
    return diff, _max_abs_host(K)


_asymmetry = reduction(lambda xp, K: (xp.max(xp.abs(K - K.T)), xp.max(xp.abs(K))),
                       _asymmetry_host)


def max_abs(x) -> float:
    """``max |x|`` of a concrete array (NaN when it holds a NaN, 0 when empty): one device
    reduction for a jax array (remembered for an array checked finite here, which is
    immutable), two host passes for numpy input (no temporary copy)."""
    x = sparse_values(x)
    entry = _FINITE.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    if getattr(x, "size", 1) == 0:
        return 0.0
    return float(reduce_concrete(_max_abs, x if isinstance(x, jax.Array) else np.asarray(x)))


def all_finite(x) -> bool:
    """True when every value is finite: numpy input is checked on the host, a jax
    array by one device reduction (no copy of the data to the host)."""
    return bool(np.isfinite(max_abs(x)))


def value_range(x):
    """``(min, max)`` of a non-empty concrete array (:func:`reduce_concrete`)."""
    lo, hi = reduce_concrete(_min_max, x if isinstance(x, jax.Array) else np.asarray(x))
    return lo.item(), hi.item()


VALIDATIONS = collections.Counter()
"""How many host validations ran, by argument name: a finiteness check of an array (one
device reduction or host pass) and a remap of query ids each count one. An array this
library produced and already checked is not checked again (:func:`known_finite`), and a
:class:`Segments` is not remapped again; ``tests/test_validation_count.py`` holds the
estimators to one validation per input."""


_FINITE = {}         # id -> (weakref, max |x|) of a jax array (immutable) checked finite


def known_finite(x) -> bool:
    """Whether ``x`` is a concrete JAX array (or BCOO) this process already found finite:
    JAX arrays are immutable, so the check need not run again."""
    entry = _FINITE.get(id(x))
    return entry is not None and entry[0]() is x


def _mark_finite(x, top: float) -> None:
    """Remembers ``x`` (its values: ``max |x| = top``) as checked finite."""
    if (isinstance(x, jax.Array) or is_sparse(x)) and is_concrete(x) and not is_scipy_sparse(x):
        for a in {id(v): v for v in (sparse_values(x), x)}.values():
            _FINITE[id(a)] = (weakref.ref(a, lambda _, key=id(a): _FINITE.pop(key, None)), top)


def _finite(x, name: str):
    """Refuses NaN/inf in a concrete ``x`` (counted in :data:`VALIDATIONS`); returns
    ``max |x|`` (``None`` when traced)."""
    if not is_concrete(x):
        return None
    VALIDATIONS[name] += 1
    top = max_abs(x)
    if not np.isfinite(top):
        raise ValueError(f"{name} contains NaN or inf values{first_nonfinite(x)}")
    _fits_compute_dtype(x, name)
    return top


def first_nonfinite(x) -> str:
    """`` (row i, column j: nan)``: the first NaN or inf of a concrete ``x``, for an error
    message (a pass over the data on the failing path only)."""
    v = np.asarray(jax.device_get(sparse_values(x)))
    bad = np.argwhere(~np.isfinite(v))
    at = tuple(int(i) for i in bad[0]) if bad.size else ()
    where = f"row {at[0]}, column {at[1]}" if v.ndim == 2 and sparse_values(x) is x else f"entry {at}"
    return f" ({where}: {v[at]})" if at else ""


_X64_HINT = "jax.config.update('jax_enable_x64', True)"


def _fits_compute_dtype(x, name: str) -> None:
    """Host floats are cast to the compute dtype (float32 unless x64 is on): finite
    float64 values beyond float32's range would become inf there, so they are refused
    here, before the cast, with the figure."""
    data = sparse_values(x)
    if isinstance(data, jax.Array) or not is_concrete(data):
        return                                   # already in its compute dtype
    a = np.asarray(data)
    if a.dtype.kind != "f" or a.size == 0:
        return
    target = jax.dtypes.canonicalize_dtype(a.dtype)
    if np.finfo(target).max >= np.finfo(a.dtype).max:
        return
    finite = np.abs(a[np.isfinite(a)])                  # NaN and inf: a feature map's
    top = float(finite.max(initial=0.0))
    if top > float(np.finfo(target).max):
        raise ValueError(f"{name} has values up to {top:.3g}, beyond the range of the {target} "
                         f"compute dtype (max {np.finfo(target).max:.3g}): they would become inf; "
                         f"rescale {name}, or compute in float64 ({_X64_HINT})")


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
        top = _finite(x, name) if finite else None
        x = x.astype(jnp.float32) if jnp.finfo(x.dtype).bits < 32 else x
        if top is not None:
            _mark_finite(x, top)
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
    top = _finite(x, name) if finite else None
    if np.issubdtype(dtype, np.integer):
        x = device_array(x, compute_dtype())
    elif jnp.finfo(dtype).bits < 32:        # float16 / bfloat16: no LAPACK, computed in float32
        x = device_array(x, jnp.float32)
    else:
        x = device_array(x)
    if top is not None:
        _mark_finite(x, top)
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
        _fits_compute_dtype(X, name)
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
                         f"or compute in float64 ({_X64_HINT})")


def indices_ok(v, upper: int):
    """Traced validity of row indices (all in ``[0, upper)``), for :func:`nan_unless`."""
    return jnp.all((v >= 0) & (v < upper))


def lam_ok(lam, allow_zero: bool = False):
    """Traced validity of λ (or a grid ``[L]``): finite and ``> 0`` (``>= 0``)."""
    lam = jnp.asarray(lam)
    return jnp.isfinite(lam) & ((lam >= 0) if allow_zero else (lam > 0))


def nan_unless(ok, tree):
    """The under-``jit`` contract for values that cannot raise there: every floating
    leaf of ``tree`` is NaN where ``ok`` is False. ``ok`` is ``[]`` or ``[L]`` (the
    λ axis, first in every leaf); integer leaves are left alone."""
    def one(a):
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            return a
        return jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, jnp.nan)
    return jax.tree.map(one, tree)


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
                                 f"(e.g. StandardScaler) or compute in float64 ({_X64_HINT})")
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


@saveable
class Segments(NamedTuple):
    """Query ids remapped to dense segment ids.

    Attributes:
      seg: ``[m]`` int32 segment id of every row, in ``0 .. num_queries - 1``.
      num_queries: number of distinct query ids (a static Python int).
      qids: ``[num_queries]`` the original query id of each segment (sorted).
    """

    seg: np.ndarray
    num_queries: int
    qids: np.ndarray


def segment_ids(qid, name: str = "qid") -> Segments:
    """Remaps arbitrary query ids (unsorted allowed) to segment ids ``0, 1, ..., Q-1``.

    Runs on the host (numpy), outside ``jit``. Segment ``c`` is the ``c``-th
    smallest query id. Integers, strings and other hashable objects (e.g. a pandas
    categorical) are accepted; floats are not (a fractional id is ambiguous).

    Args:
      qid: ``[m]`` query id of every row.

    Returns:
      :class:`~rankjax.Segments` ``(seg, num_queries, qids)``.

    Raises:
      TypeError: ``qid`` holds floats, booleans or other values that are not ids.
      ValueError: ``qid`` is not 1-D or is empty.

    Example:
      >>> s = segment_ids([7, 3, 7, 9])
      >>> s.seg.tolist(), s.num_queries, s.qids.tolist()
      ([1, 0, 1, 2], 3, [3, 7, 9])

    A :class:`~rankjax.Segments` is already remapped and is returned as it is, so a caller that
    remapped once can pass it wherever query ids are taken.
    """
    if isinstance(qid, Segments):
        return qid
    VALIDATIONS[name] += 1
    if not is_concrete(qid):
        raise TypeError(f"{name} must be concrete (remap query ids outside jit)")
    q = np.asarray(qid)
    if q.dtype.kind not in "iuUSO":
        raise TypeError(f"{name} must be an integer (or string / categorical) array, got dtype "
                        f"{q.dtype}; cast it with .astype(int) if its values are whole numbers")
    if q.ndim != 1:
        raise ValueError(f"{name} must be 1-D [m], got shape {q.shape}")
    if q.size == 0:
        raise ValueError(f"{name} is empty")
    if q.dtype.kind == "O" and any(isinstance(v, (float, np.floating)) for v in set(q.tolist())):
        raise TypeError(f"{name} holds floating-point ids; cast them to int or str")
    try:
        qids, seg = np.unique(q, return_inverse=True)
    except TypeError:                           # object ids of mixed, unorderable types
        qids, seg = np.unique(np.array([repr(v) for v in q.tolist()]), return_inverse=True)
    return Segments(seg.astype(np.int32).reshape(-1), int(qids.size), qids)


def resolve_segments(qid, num_queries, m: int, name: str = "qid"):
    """Segment ids for metric-style functions.

    With ``num_queries=None`` the ids are remapped on the host (any integers);
    otherwise ``qid`` must already be segment ids in ``0 .. num_queries - 1``
    (checked when concrete) and may be traced. The returned number of segments
    is padded to a power of two (empty segments are inert), so the compiled
    metric does not depend on the exact number of queries.
    """
    if qid is None:
        # the barrier keeps XLA from constant-folding segment sums over a constant id array
        return jax.lax.optimization_barrier(jnp.zeros((m,), jnp.int32)), 1, 1
    if num_queries is None or isinstance(qid, Segments):
        s = segment_ids(qid, name)
        if s.seg.shape[0] != m:
            raise ValueError(f"{name} has {s.seg.shape[0]} rows but {m} were expected")
        return device_array(s.seg), bucket(s.num_queries), s.num_queries
    if not is_int(num_queries) or num_queries < 1:
        raise TypeError("num_queries must be a positive Python int (static)")
    dtype = qid.dtype if hasattr(qid, "dtype") else np.asarray(qid).dtype
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {dtype}")
    if np.ndim(qid) != 1 or np.shape(qid)[0] != m:
        raise ValueError(f"{name} must have shape [{m}], got {np.shape(qid)}")
    if is_concrete(qid) and np.size(qid):
        lo, hi = value_range(qid)
        if lo < 0 or hi >= num_queries:
            raise ValueError(f"{name} must hold segment ids in [0, {num_queries}) when "
                             "num_queries is given; pass num_queries=None to remap raw ids")
        return device_array(qid, jnp.int32), bucket(num_queries), int(num_queries)
    # traced ids cannot raise: one id outside [0, num_queries) empties every query, so
    # the result is NaN (no valid query) instead of silently dropping rows
    seg = jnp.asarray(qid, jnp.int32)
    seg = jnp.where(jnp.any((seg < 0) | (seg >= num_queries)), bucket(num_queries), seg)
    return seg, bucket(num_queries), int(num_queries)



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
