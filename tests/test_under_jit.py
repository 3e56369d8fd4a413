"""The under-jit contract (README, Guarantees): a value that would raise eagerly gives NaN
(or the documented "invalid" stop) when it is traced, across the public functions."""
import jax
import jax.numpy as jnp
import numpy as np

import rankjax as rj
from rankjax._cg import rankrls_cg, rankrls_cg_dual
from rankjax._cg_loop import STOP_REASONS
from rankjax._holdout import holdout_dual, holdout_primal
from rankjax._kpcrank import kpcrank_path
from rankjax._lpo import leave_pair_out_dual
from rankjax._path import rankrls_dual_path, rankrls_nystrom_path, rankrls_primal_path
from rankjax._rankrls import rankrls_dual, rankrls_primal
from surface import LIST_METRICS, PAIR_METRICS, nan


def test_invalid_lambda_lanes_are_nan_under_vmap(surface):
    d = surface
    lams = jnp.array([1.0, -1.0, jnp.nan, 0.0])
    ok = np.array([True, False, False, False])
    W = jax.vmap(lambda lam: rankrls_primal(d.X, d.y, d.g, lam=lam).weights)(lams)
    np.testing.assert_allclose(W[0], rankrls_primal(d.X, d.y, d.g, lam=1.0).weights, rtol=1e-12)
    assert nan(W[~ok])
    A = jax.vmap(lambda lam: rankrls_dual(d.K, d.y, d.g, lam=lam).coef)(lams)
    assert nan(A[~ok]) and not np.any(np.isnan(A[0]))
    for fn in (lambda ls: rankrls_primal_path(d.X, d.y, d.g, lams=ls, train_scores=True),
               lambda ls: rankrls_dual_path(d.K, d.y, d.g, lams=ls),
               lambda ls: rankrls_nystrom_path(d.X, d.y, d.g, lams=ls, kernel=d.kern,
                                                  basis=np.arange(6)),
               lambda ls: holdout_primal(d.X, d.y, d.g, lams=ls, folds=d.folds).predictions,
               lambda ls: holdout_dual(d.K, d.y, d.g, lams=ls, folds=d.folds).predictions,
               lambda ls: leave_pair_out_dual(d.K, d.y, d.lpo.pairs, lams=ls).predictions):
        out = jax.jit(fn)(lams)
        for leaf in jax.tree.leaves(out):
            if leaf.ndim > 1 and leaf.shape[0] == 4:           # results, not the grid itself
                assert nan(leaf[1:]) and not np.any(np.isnan(leaf[0]))
    # a kernel parameter traced out of range: the whole kernel matrix is NaN
    Kg = jax.jit(lambda gm: rj.kernel_matrix(rj.Kernel("gaussian", gamma=gm), d.X))(-1.0)
    assert nan(Kg)
    kp = jax.jit(lambda lam: kpcrank_path(d.K, d.y, d.g, max_components=3, lam=lam))(-1.0)
    assert nan(kp.weights)


def test_invalid_values_under_jit_for_iterative_solvers(surface):
    d = surface
    r = jax.jit(lambda lam: rankrls_cg(d.X, d.y, d.g, lam=lam))(-1.0)
    assert nan(r.weights) and not bool(r.converged)
    assert STOP_REASONS[int(r.stop_reason)] == "invalid" and int(r.iterations) == 0
    r = jax.jit(lambda lam: rankrls_cg_dual(d.K, d.y, d.g, lam=lam))(jnp.inf)
    assert nan(r.weights) and STOP_REASONS[int(r.stop_reason)] == "invalid"
    s = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C, max_iter=5))(-1.0)
    assert nan(s.weights) and not bool(s.converged)
    good = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C))(1.0)
    assert bool(good.converged) and not np.any(np.isnan(good.weights))


def test_traced_indices_and_segment_ids_out_of_range_give_nan(surface):
    d = surface
    seg = jnp.asarray(np.unique(d.qid, return_inverse=True)[1])
    for name in PAIR_METRICS + LIST_METRICS:
        fn = jax.jit(lambda s, f=getattr(rj, name): f(d.y, d.y, s, num_queries=5))
        assert not np.isnan(float(fn(seg))), name
        assert np.isnan(float(fn(seg.at[0].set(5)))), name
        assert np.isnan(float(fn(seg.at[3].set(-1)))), name
    e = jax.jit(lambda h: rj.edge_disagreement_error(d.y, h, jnp.array([1, 2])))
    assert float(e(jnp.array([0, 3]))) in (0.0, 0.5, 1.0) and np.isnan(float(e(jnp.array([0, d.m]))))
    lpo = jax.jit(lambda p: leave_pair_out_dual(d.K, d.y, p, lams=[1.0]).predictions)
    assert nan(lpo(jnp.array([[0, d.m + 3]]))) and not np.any(np.isnan(lpo(jnp.array([[0, 3]]))))
