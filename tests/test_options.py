"""Solver options as one checked object (issue 25): ``CG(...)`` is accepted by every CG
solver as ``options=`` and gives the answer of the same keywords; it is checked when built."""
import dataclasses
import numpy as np
import pytest

import rankjax as rj
from rankjax.solvers.cg_loop import cg_loop
from rankjax.solvers.cg import rankrls_cg, rankrls_cg_dual
from rankjax.solvers.falkon import rankrls_falkon
from rankjax.graphs.build import Validation


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(10, num_features=4, seed=0)
    v = rj.make_ranking_data(4, num_features=4, seed=1)
    return d, v


def test_options_equal_the_keywords_in_every_solver(data):
    d, v = data
    X, y, g = np.asarray(d.X), np.asarray(d.y), rj.query_graph(d.qid)
    valid = Validation(np.asarray(v.X), np.asarray(v.y), v.qid)
    kw = dict(tol=1e-7, max_iter=30, patience=3, recompute_every=5)
    opts = rj.CG(**kw)
    pairs = [
        (lambda **o: rankrls_cg(X, y, g, lam=1.0, valid=valid, **o).weights),
        (lambda **o: rankrls_cg_dual(X @ X.T, y, g, lam=1.0, **o).weights),
        (lambda **o: rj.scale.sharded_cg(rj.scale.shard_data(X, y, g), lam=1.0, **o).weights),
        (lambda **o: rankrls_falkon(X, y, g, lam=1.0, kernel=rj.gaussian_kernel(0.5),
                                       basis=16, **o).coef),
    ]
    for run in pairs:
        np.testing.assert_allclose(run(options=opts), run(**kw), rtol=1e-10)
    A = np.array([[4.0, 1.0], [1.0, 3.0]])
    a = cg_loop(lambda v_: A @ v_, np.array([1.0, 2.0]), opts, 0.0, None, None)
    np.testing.assert_allclose(a.weights, np.linalg.solve(A, [1.0, 2.0]), rtol=1e-6)


def test_options_are_checked_once_when_built_and_not_mixed(data):
    d, _ = data
    with pytest.raises(TypeError, match="max_iter"):
        rj.CG(max_iter=0.5)
    with pytest.raises(ValueError, match="tol"):
        rj.CG(tol=-1.0)
    with pytest.raises(TypeError, match="not both.*max_iter"):
        rj.fit(rj.Problem(d.X, d.y, rj.query_graph(d.qid)), dataclasses.replace(rj.CG(), max_iter=3),
               lam=0.0)
    with pytest.raises(TypeError, match="rankjax.CG"):
        rj.fit(rj.Problem(d.X, d.y, rj.query_graph(d.qid)), {'tol': 0.001}, lam=0.0)
