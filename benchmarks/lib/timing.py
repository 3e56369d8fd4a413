"""Shared timing for the benchmarks: compile time apart, median of >= 3 warm runs,
``block_until_ready``; results printed as JSON lines; the λ lanes a grid resolved."""
import json
import statistics
import time

import jax
import numpy as np


def device_name():
    d = jax.devices()[0]
    return f"{d.platform}:{getattr(d, 'device_kind', '')}".rstrip(":")


def time_jitted(fn, *args, repeats=3):
    """(compile_s, median_run_s, output) of ``jax.jit(fn)(*args)``: a warm-up run
    and the median of ``repeats`` runs; ``repeats=1`` (long runs): one run, no warm-up."""
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    if repeats > 1:
        out = jax.block_until_ready(compiled(*args))      # warm-up
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs), out


def device_peak_mb():
    """Peak device memory of this process where the backend reports it (GPU/TPU:
    ``memory_stats()["peak_bytes_in_use"]``), else None (the CPU reports none: see the
    lines' peak RSS)."""
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else round(peak / 2**20, 1)


EMITTED = []
"""Every line :func:`emit` printed in this process (for a benchmark's ``--save``)."""


def emit(**fields):
    """Prints one JSON line; the device, and its peak memory where the backend reports it."""
    fields.setdefault("device", device_name())
    peak = device_peak_mb()
    if peak is not None:
        fields.setdefault("device_peak_mb", peak)
    # seconds to the microsecond; accuracy figures keep every digit (1e-12 is not 0)
    line = {k: (round(v, 6) if isinstance(v, float) and k.endswith("_s") else v)
            for k, v in fields.items()}
    EMITTED.append(line)
    print(json.dumps(line), flush=True)


def median_s(fn, repeats=5):
    """Median seconds of ``repeats`` warm calls of ``fn()`` (after one warm-up)."""
    jax.block_until_ready(fn())
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def lambda_lanes(out, lams):
    """The λ lanes of a grid output ``[L, ...]``: the mask ``[L]`` of resolved lanes and the
    report fields ``unresolved_lambdas`` and ``smallest_resolved_lambda``. A lane whose λ is
    below the dtype's floor (``rankjax.solvers.floors.RESOLVE_RTOL``) is all NaN by design."""
    lams = np.asarray(lams)
    ok = ~np.isnan(np.asarray(out, np.float64).reshape(lams.size, -1)).all(axis=1)
    return ok, dict(unresolved_lambdas=int((~ok).sum()),
                    smallest_resolved_lambda=float(lams[ok].min()) if ok.any() else None)
