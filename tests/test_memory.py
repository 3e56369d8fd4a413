"""The memory plan (``rankjax/_core/memory.py``): sizes in the compute dtype, vmapped work
counted, refusals before any work with the figure and the alternative."""
import jax
import numpy as np
import pytest

import rankjax as rj
from rankjax._core import memory as _memory


def test_compute_dtype_is_the_dtype_jax_computes_in():
    assert _memory.compute_dtype(np.zeros(2, np.float64)) == np.float64          # x64 on here
    assert _memory.compute_dtype(np.zeros(2, np.float32), np.int32) == np.float32
    assert _memory.compute_dtype(np.float16) == np.float32
    jax.config.update("jax_enable_x64", False)
    try:
        assert _memory.compute_dtype(np.zeros(2, np.float64)) == np.float32     # as on a GPU
    finally:
        jax.config.update("jax_enable_x64", True)


def test_kernel_plan_counts_float32_at_four_bytes(monkeypatch):
    """An exact-kernel fit planned in the dtype it runs in: 6,000 rows, 7 matrices, float32
    (1.0 GB) fits in 1.5 GB free; the same in float64 (2.0 GB) is refused."""
    monkeypatch.setattr(_memory, "available_memory", lambda: 1.5e9)
    _memory.kernel_plan(6000, _memory.compute_dtype(np.float32), 7, "fit")
    with pytest.raises(MemoryError, match="Nyström"):
        _memory.kernel_plan(6000, _memory.compute_dtype(np.float64), 7, "fit")


def test_primal_gram_plan_uses_the_free_memory_where_the_work_runs(monkeypatch):
    monkeypatch.setattr(_memory, "available_memory", lambda: 10_000)
    X = np.ones((3, 40))
    with pytest.raises(ValueError, match=r"40 features.*rj.CG\(\)"):
        rj.fit(rj.Problem(X, np.arange(3.0), rj.query_graph(np.zeros(3, int))), rj.Primal(), lam=1.0).value
