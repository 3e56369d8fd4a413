"""Memory planned before work: an entry point estimates its peak from the shapes and
refuses up front (:class:`MemoryPlanError`) with the figure and the scalable
alternative, instead of dying of memory after minutes of work.

One plan for every entry point: sizes in the dtype the work runs in (:func:`compute_dtype`:
float32 unless x64 is on, whatever the input's numpy dtype), work done at once under
``vmap`` counted as many times as it is batched (:func:`batch_that_fits`), against the
memory that is free where the work runs (:func:`available_memory`: the host's, and on an
accelerator the device's).
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np


def memory_limit() -> int:
    """Bytes one allocation may take: half the available memory (4 GiB if unknown)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 4 << 30


class MemoryPlanError(MemoryError, ValueError):
    """An entry point refused work that would need more memory than there is (raised
    before anything is allocated; also a ``ValueError`` for callers that catch those)."""


def available_memory() -> int:
    """Bytes free for new work: the host's ``MemAvailable`` (page cache counts as free),
    and on an accelerator also the default device's free memory, whichever is less."""
    host = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
    except OSError:
        pass
    if host is None:
        host = 2 * memory_limit()
    try:
        dev = jax.devices()[0]
        if dev.platform != "cpu":
            stats = dev.memory_stats() or {}
            if "bytes_limit" in stats:
                host = min(host, stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    except Exception:                       # pragma: no cover - no device statistics
        pass
    return int(host)


def check_memory(need: float, what: str, alternatives: str) -> None:
    """Refuses up front (:class:`MemoryPlanError`) when ``need`` bytes, planned from the
    shapes, exceed 90 % of :func:`available_memory`: the message names the figure and
    what to use instead. A symbolic shape (``jax.export``'s batch) plans nothing: its
    size is the caller's."""
    if not isinstance(need, (int, float, np.integer, np.floating)):
        return
    avail = available_memory()
    if need > 0.9 * avail:
        raise MemoryPlanError(f"{what} needs about {need / 2**30:.3g} GiB but "
                              f"{avail / 2**30:.3g} GiB is available; {alternatives}")


def compute_dtype(*inputs):
    """The floating dtype work on ``inputs`` (arrays or dtypes) runs in: their promoted
    dtype as JAX computes it (a float64 numpy array is float32 work unless x64 is on), at
    least float32; with no inputs JAX's default float (float64 with x64 on, else float32).
    The library's one spelling of "the dtype to compute in".

    Example:
      >>> import numpy as np
      >>> compute_dtype(np.float16).name
      'float32'
    """
    if not inputs:
        return jnp.dtype(jnp.result_type(float))
    dts = [jnp.dtype(x) if isinstance(x, (type, np.dtype, str)) else jnp.dtype(getattr(x, "dtype", float))
           for x in inputs]
    dt = jnp.result_type(*[jax.dtypes.canonicalize_dtype(d) for d in dts], jnp.float32)
    return jnp.dtype(dt)


def kernel_plan(m: int, dtype, count: int, what: str) -> None:
    """:func:`check_memory` for ``count`` ``m x m`` matrices of ``dtype`` held at once by an
    exact kernel computation, naming the scalable alternatives."""
    size = jnp.dtype(dtype).itemsize
    check_memory(count * m * m * size,
                 f"{what} on {m} rows ({count} {m} x {m} {jnp.dtype(dtype).name} matrices at once)",
                 "use a Nyström basis (rj.Nystrom(kernel, basis); estimators: basis=2000) "
                 "or FALKON (rj.Falkon(kernel, basis), row blocks), which hold m x b, not m x m")
