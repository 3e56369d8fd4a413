"""One validation-set type: every verb's validation data is ``Problem(X_v, y_v, queries)``
(``problem.valid``) with the queries as ids, a ``Segments`` or a graph, and the answers are
the same whichever form is given."""
import numpy as np
import pytest

import rankjax as rj


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    v = rj.make_ranking_data(5, num_features=4, seed=1)
    return (np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid),
            np.asarray(v.X), np.asarray(v.y), np.asarray(v.qid))


def test_cg_takes_every_form_of_the_queries(data):
    X, y, qid, Xv, yv, qv = data
    g = rj.query_graph(qid, y)
    ref = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(Xv, yv, rj.query_graph(qv))),
                 rj.CG(max_iter=20), lam=1.0)
    for q in (qv, rj.segment_ids(qv), rj.query_graph(qv)):
        r = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(Xv, yv, q)), rj.CG(max_iter=20), lam=1.0)
        np.testing.assert_allclose(r.value.weights, ref.value.weights, rtol=1e-10)
        np.testing.assert_allclose(r.stats["valid_history"], ref.stats["valid_history"], rtol=1e-10)
        assert int(r.stats["best_iteration"]) == int(ref.stats["best_iteration"])


def test_path_select_and_stream_take_a_graph_too(data):
    X, y, qid, Xv, yv, qv = data
    solvers = [rj.Dual(rj.gaussian_kernel(0.5))]
    a = rj.select(rj.Problem(X, y, qid, valid=rj.Problem(Xv, yv, qv)), solvers, lams=[0.1, 1.0])
    b = rj.select(rj.Problem(X, y, qid, valid=rj.Problem(Xv, yv, rj.query_graph(qv))), solvers,
                  lams=[0.1, 1.0])
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-10)
    chunks = [(X, y, qid)]
    s1 = rj.path(rj.scale.stream(chunks, valid=rj.Problem(Xv, yv, qv)), rj.Primal(), lams=[0.1, 1.0])
    s2 = rj.path(rj.scale.stream(chunks, valid=rj.Problem(Xv, yv, rj.segment_ids(qv))), rj.Primal(),
                 lams=[0.1, 1.0])
    np.testing.assert_allclose(s1.value.valid_scores, s2.value.valid_scores, rtol=1e-10)


def test_a_validation_set_must_be_a_problem(data):
    X, y, qid, Xv, yv, qv = data
    with pytest.raises(TypeError, match="valid must be a rankjax.Problem"):
        rj.Problem(X, y, qid, valid=(Xv, yv))
    with pytest.raises(ValueError, match="valid.X must have 4 columns"):
        rj.Problem(X, y, qid, valid=rj.Problem(Xv[:, :2], yv, qv))
