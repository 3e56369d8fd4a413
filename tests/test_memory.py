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


def _d():
    return rj.make_ranking_data(30, num_features=4, docs_per_query=(5, 20), seed=0)


def _nystrom_paths():
    """Every entry point of a Nyström-sized allocation: ``(name, call, alternative)``."""
    from rankjax.solvers import Nystrom, Falkon
    k = rj.gaussian_kernel(0.3)
    d = _d()
    p = rj.Problem(d.X, d.y, d.qid)
    pg = rj.preference_graph(np.arange(0, 40, 2), np.arange(1, 41, 2), num_rows=d.X.shape[0])
    pp = rj.Problem(d.X, None, pg)
    lams = np.array([0.1, 1.0])
    return [
        ("fit, row blocks", lambda: rj.fit(p, Nystrom(k, 50), lam=1.0), "smaller basis"),
        ("fit, preference graph", lambda: rj.fit(pp, Nystrom(k, 50), lam=1.0), "smaller basis"),
        ("fit, traced", lambda: jax.jit(lambda X: rj.fit(rj.Problem(X, d.y, d.qid), Nystrom(k, 50),
                                                         lam=1.0).value.coef)(d.X), "outside jit"),
        ("path, row blocks", lambda: rj.path(p, Nystrom(k, 50), lams=lams), "smaller basis"),
        ("path, preference graph", lambda: rj.path(pp, Nystrom(k, 50), lams=lams),
         "smaller basis"),
        ("hold-out, row blocks", lambda: rj.holdout(p, Nystrom(k, 50), lams=lams),
         "rj.Falkon"),
        ("hold-out, folds larger than the basis", lambda: rj.holdout(p, Nystrom(k, 20), lams=lams,
                                                                     folds=2), "rj.Falkon"),
        ("ranksvm_kernel, every row", lambda: rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=k),
         "basis="),
        ("Falkon", lambda: rj.fit(p, Falkon(k, 50), lam=1.0), "smaller basis"),
    ]


@pytest.mark.parametrize("i", range(9), ids=[n for n, *_ in _nystrom_paths()])
def test_every_nystrom_path_is_planned_before_any_work(monkeypatch, i):
    """With 10 kB free, every route of a Nyström-sized computation (the fit, path and
    hold-out in row blocks or whole, a preference graph, under jit, the kernel RankSVM's
    map, FALKON) is refused before a kernel value is computed, with the figure in GiB and
    an alternative."""
    from rankjax.kernels import basis as _basis, kernel as _kernel
    name, call, alternative = _nystrom_paths()[i]
    jax.clear_caches()                        # every program traced here: the patches below see it
    monkeypatch.setattr(_memory, "available_memory", lambda: 10_000)
    for mod in (_basis, _kernel):
        for fn in ("kernel_core", "kernel_block"):
            monkeypatch.setattr(mod, fn, lambda *a, **k: pytest.fail("a kernel value computed"))
    with pytest.raises(_memory.MemoryPlanError) as e:
        call()
    assert "GiB" in str(e.value) and alternative in str(e.value), (name, str(e.value))
