"""The under-jit contract (README, Guarantees): a value that would raise eagerly gives NaN
(or the documented "invalid" stop) when it is traced, across the public functions."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.solvers.cg_loop import STOP_REASONS
from rankjax.learners.kpcrank import kpcrank_path
from registry import CASES, IDS, call, data, problem, value_of
from surface import LIST_METRICS, PAIR_METRICS, nan


INVALID = jnp.array([1.0, -1.0, jnp.nan, -jnp.inf])  # lane 0 valid (λ = 0 is CG's early stopping)


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", CASES, ids=IDS)
def test_an_invalid_lambda_is_a_nan_lane_under_jit(name, solver, kind, verb, twin, props):
    """Every solver x verb of the registry: a traced λ that would raise eagerly is a NaN lane
    (``fit`` vmapped over λ; a path or hold-out over its grid), the valid lane untouched; a
    solver that does not run under ``jit`` raises eagerly, naming ``lam``."""
    X, y, qid = data()
    pairs = rj.differing_pairs(y)[:15] if verb == "leave_pair_out" else None
    p = problem(kind, X, y, qid, rj.global_graph(X.shape[0]) if pairs is not None else None)
    folds = rj.make_folds(p.graph) if verb == "holdout" else None   # drawn on the host
    if verb == "fit":
        run = lambda p, ls: jax.vmap(lambda lam: value_of(verb, rj.fit(p, solver, lam=lam)))(ls)  # noqa
    elif verb == "holdout":
        run = lambda p, ls: value_of(verb, rj.holdout(p, solver, lams=ls, folds=folds))  # noqa
    else:
        run = lambda p, ls: value_of(verb, call(verb, p, solver, ls, pairs))  # noqa: E731
    if not props["jit"]:                                    # host-side basis draw: eager
        for bad in np.asarray(INVALID[1:]):
            with pytest.raises(ValueError, match="lam"):
                if verb == "fit":
                    rj.fit(p, solver, lam=float(bad))
                else:
                    run(p, np.array([1.0, bad]))
        return
    if verb == "leave_pair_out":                          # the global graph stays concrete
        jitted = lambda p, ls: jax.jit(lambda ls: run(p, ls))(ls)  # noqa: E731
    else:
        jitted = jax.jit(run)
    out = np.asarray(jitted(p, INVALID))
    assert nan(out[1:]) and not np.any(np.isnan(out[0])), name
    one = np.asarray(run(p, INVALID[:1]))                   # the valid lane alone
    np.testing.assert_allclose(out[0], one[0], rtol=1e-8, atol=1e-10 * np.max(np.abs(one)))


def test_invalid_lambda_lanes_are_nan_under_vmap(surface):
    d = surface
    # a kernel parameter traced out of range: the whole kernel matrix is NaN
    Kg = jax.jit(lambda gm: rj.kernel_matrix(rj.Kernel("gaussian", gamma=gm), d.X))(-1.0)
    assert nan(Kg)
    kp = jax.jit(lambda lam: kpcrank_path(d.K, d.y, d.g, max_components=3, lam=lam))(-1.0)
    assert nan(kp.weights)


def test_invalid_values_under_jit_for_iterative_solvers(surface):
    d = surface
    r = jax.jit(lambda lam: rj.fit(rj.Problem(d.X, d.y, d.g), rj.CG(), lam=lam))(-1.0)
    assert nan(r.weights) and not bool(r.converged)
    assert STOP_REASONS[int(r.stop_reason)] == "invalid" and int(r.iterations) == 0
    r = jax.jit(lambda lam: rj.fit(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.CG(), lam=lam))(jnp.inf)
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
    lpo = jax.jit(lambda p: rj.holdout(rj.Problem(d.K, d.y, rj.global_graph(np.shape(d.K)[0]), precomputed=True),
                                       rj.Dual(), lams=[1.0], folds=rj.LeavePairOut(p)).value.predictions)
    assert nan(lpo(jnp.array([[0, d.m + 3]]))) and not np.any(np.isnan(lpo(jnp.array([[0, 3]]))))
