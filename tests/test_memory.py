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


def test_batch_that_fits_counts_every_vmapped_item(monkeypatch):
    monkeypatch.setattr(_memory, "available_memory", lambda: 1000)
    assert _memory.batch_that_fits(100, 20, "w", "a") == 9          # 90 % of 1000 / 100
    assert _memory.batch_that_fits(100, 3, "w", "a") == 3
    with pytest.raises(_memory.MemoryPlanError, match="needs about .* GiB.*use less"):
        _memory.batch_that_fits(2000, 3, "the work", "use less")


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
    with pytest.raises(ValueError, match="40 features.*rankrls_cg"):
        rj.fit(rj.Problem(X, np.arange(3.0), rj.query_graph(np.zeros(3, int))), rj.Primal(), lam=1.0).value


def test_sharded_kernel_grid_runs_as_many_gammas_at_once_as_fit(monkeypatch):
    d = rj.make_ranking_data(8, num_features=3, seed=0)
    v = rj.make_ranking_data(4, num_features=3, seed=1)
    g = rj.query_graph(d.qid)
    args = dict(lams=[0.1, 1.0], gammas=[0.1, 1.0, 10.0], valid=(v.X, v.y, v.qid))
    whole = rj.scale.sharded_kernel_grid(d.X, d.y, g, **args).scores
    m = d.X.shape[0]
    one = 8 * (5 * m * m + (m + 2) * v.X.shape[0])
    monkeypatch.setattr(_memory, "available_memory", lambda: 1.5 * one)      # one γ at a time
    assert _memory.batch_that_fits(one, 3, "", "") == 1
    np.testing.assert_allclose(rj.scale.sharded_kernel_grid(d.X, d.y, g, **args).scores, whole,
                               rtol=1e-10, atol=1e-12)
    monkeypatch.setattr(_memory, "available_memory", lambda: 0.5 * one)
    with pytest.raises(MemoryError, match="sharded_kernel_grid.*Nyström"):
        rj.scale.sharded_kernel_grid(d.X, d.y, g, **args)
