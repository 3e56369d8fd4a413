"""Memory planned before work: an entry point estimates its peak from the shapes and
refuses up front (:class:`MemoryPlanError`) with the figure and the scalable
alternative, instead of dying of memory after minutes of work.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp


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
    what to use instead."""
    avail = available_memory()
    if need > 0.9 * avail:
        raise MemoryPlanError(f"{what} needs about {need / 2**30:.1f} GiB but "
                              f"{avail / 2**30:.1f} GiB is available; {alternatives}")


def kernel_plan(m: int, dtype, count: int, what: str) -> None:
    """:func:`check_memory` for ``count`` ``m x m`` matrices of ``dtype`` held at once by an
    exact kernel computation, naming the scalable alternatives."""
    size = jnp.dtype(dtype).itemsize
    check_memory(count * m * m * size,
                 f"{what} on {m} rows ({count} {m} x {m} {jnp.dtype(dtype).name} matrices at once)",
                 "use a Nyström basis (estimators: basis=2000; rankrls_nystrom_path, "
                 "holdout_nystrom) or preconditioned CG (rankrls_falkon), which hold m x b, "
                 "not m x m")
