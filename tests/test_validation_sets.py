"""One validation-set shape (issue 25): every ``valid=`` takes a ``Validation(X, y, queries)``
with query ids, a ``Segments`` or a graph, and the answers equal those of the old tuples."""
import numpy as np
import pytest

import rankjax as rj
from rankjax.graphs import build as _graph_build


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    v = rj.make_ranking_data(5, num_features=4, seed=1)
    return (np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid),
            np.asarray(v.X), np.asarray(v.y), np.asarray(v.qid))


def test_cg_takes_every_form_of_the_queries(data):
    X, y, qid, Xv, yv, qv = data
    g = rj.query_graph(qid, y)
    ref = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(*(Xv, yv, rj.query_graph(qv)))), rj.CG(max_iter=20),
                 lam=1.0)
    for q in (qv, rj.segment_ids(qv), rj.query_graph(qv)):
        r = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(*_graph_build.Validation(Xv, yv, q))),
                   rj.CG(max_iter=20), lam=1.0)
        np.testing.assert_allclose(r.weights, ref.weights, rtol=1e-10)
        np.testing.assert_allclose(r.valid_history, ref.valid_history, rtol=1e-10)
        assert int(r.best_iteration) == int(ref.best_iteration)


def test_kernel_grid_and_stream_take_a_graph_too(data):
    X, y, qid, Xv, yv, qv = data
    g = rj.query_graph(qid, y)
    a = rj.scale.sharded_kernel_grid(X, y, g, lams=[0.1, 1.0], gammas=[0.5], valid=(Xv, yv, qv))
    b = rj.scale.sharded_kernel_grid(X, y, g, lams=[0.1, 1.0], gammas=[0.5],
                               valid=_graph_build.Validation(Xv, yv, rj.query_graph(qv)))
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-10)
    chunks = [(X, y, qid)]
    s1 = rj.scale.rankrls_primal_stream(chunks, lams=[0.1, 1.0], valid=(Xv, yv, qv))
    s2 = rj.scale.rankrls_primal_stream(chunks, lams=[0.1, 1.0], valid=_graph_build.Validation(Xv, yv, qv))
    np.testing.assert_allclose(s1.selection.scores, s2.selection.scores, rtol=1e-10)


def test_a_wrong_shape_names_the_validation_form(data):
    X, y, qid, Xv, yv, qv = data
    with pytest.raises(TypeError, match="Validation"):
        rj.fit(rj.Problem(X, y, rj.query_graph(qid), valid=rj.Problem(*(Xv, yv))), rj.CG(), lam=1.0)
