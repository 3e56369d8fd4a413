"""Bad input at the public boundary raises a clear error naming the argument."""
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax.learners.gp import gp_pairwise_gaussian


@pytest.fixture
def good(rng):
    X = rng.standard_normal((6, 2))
    y = rng.standard_normal(6)
    qid = np.array([0, 0, 0, 1, 1, 1])
    return X, y, qid


def test_nan_inf(good):
    X, y, qid = good
    g = rj.query_graph(qid)
    Xn = X.copy(); Xn[1, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        rj.fit(rj.Problem(Xn, y, g), rj.Primal(), lam=1.0).value
    yi = y.copy(); yi[0] = np.inf
    with pytest.raises(ValueError, match="y contains NaN"):
        rj.fit(rj.Problem(X, yi, g), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="K contains NaN"):
        rj.fit(rj.Problem(np.full((6, 6), np.nan), y, g, precomputed=True), rj.Dual(), lam=1.0).value
    with pytest.raises(ValueError, match="y"):
        rj.query_graph(qid, yi, exclude_ties=True)


def test_shapes(good):
    X, y, qid = good
    g = rj.query_graph(qid)
    with pytest.raises(ValueError, match="y has 5 rows"):
        rj.fit(rj.Problem(X, y[:5], g), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="graph is defined on 6 rows"):
        rj.fit(rj.Problem(X[:4], y[:4], g), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="X must be 2-D"):
        rj.fit(rj.Problem(X[:, 0], y, g), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="K must be a square"):
        rj.fit(rj.Problem(X, y, g, precomputed=True), rj.Dual(), lam=1.0).value
    with pytest.raises(ValueError, match="features"):
        rj.predict(rj.LinearModel(np.ones(3)), X)
    with pytest.raises(ValueError, match="y must have shape"):
        rj.fit(rj.Problem(X, y[:, None, None] * np.ones((1, 2, 2)), g), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="y must be None"):
        rj.fit(rj.Problem(X, y, rj.preference_graph([0], [1], num_rows=6)), rj.Primal(), lam=1.0).value


def test_empty(good):
    X, y, qid = good
    with pytest.raises(ValueError, match="X is empty"):
        rj.fit(rj.Problem(np.zeros((0, 2)), np.zeros(0), rj.identity_graph(1)), rj.Primal(), lam=1.0).value
    with pytest.raises(ValueError, match="qid is empty"):
        rj.query_graph(np.zeros(0, int))


def test_qid_type(good):
    X, y, qid = good
    with pytest.raises(TypeError, match="qid must be an integer"):
        rj.query_graph(qid.astype(float))
    # string ids are ids: the same groups as the integers
    assert float(rj.pairwise_error(y, y, qid.astype(str))) == float(rj.pairwise_error(y, y, qid))


@pytest.mark.parametrize("lam", [0.0, -1.0, np.nan, np.inf])
def test_lambda(good, lam):
    X, y, qid = good
    with pytest.raises(ValueError, match="lam"):
        rj.fit(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lam=lam).value
    with pytest.raises(ValueError, match="lam"):
        rj.fit(rj.Problem(X @ X.T, y, rj.query_graph(qid), precomputed=True), rj.Dual(), lam=lam).value


def test_types(good):
    X, y, qid = good
    with pytest.raises(TypeError, match="queries"):
        rj.fit(rj.Problem(X, y, 3), rj.Primal(), lam=1.0).value
    with pytest.raises(TypeError, match="X must be a real"):
        rj.fit(rj.Problem(X.astype(complex), y, rj.query_graph(qid)), rj.Primal(), lam=1.0).value
    with pytest.raises(TypeError, match="lam is required"):
        rj.fit(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lam=None).value
    with pytest.raises(TypeError, match="kernel"):
        rj.kernel_matrix("rbf", X)
    with pytest.raises(ValueError, match="gamma"):
        rj.gaussian_kernel(-1.0)
    with pytest.raises(TypeError, match="model"):
        rj.predict(object(), X)


def _switch_calls(X, y, qid, tmp_path):
    """Every public True/False switch, as ``name -> call(value)``."""
    from rankjax.estimators import RankRLSCV
    g = rj.query_graph(qid)
    p = tmp_path / "d.txt"
    rj.io.write_svmlight(p, X, np.round(np.abs(y)), qid)
    h, t, d = rj.pairs_from_scores(y, qid)
    gp = gp_pairwise_gaussian(X @ X.T, h, t, d, noise_var=1.0)
    return {
        "per_query": lambda v: rj.ndcg(y, np.round(np.abs(y)), qid, per_query=v),
        "higher_is_better": lambda v: rj.Metric(rj.ndcg, higher_is_better=v),
        "normalized": lambda v: rj.query_graph(qid, normalized=v),
        "exclude_ties": lambda v: rj.global_graph(6, y, exclude_ties=v),
        "include_ties": lambda v: rj.pairs_from_scores(y, qid, include_ties=v),
        "throw": lambda v: rj.path(rj.Problem(X, y, g), rj.Primal(), lams=[1.0], throw=v),
        "ard": lambda v: rj.tune(rj.Problem(X, y, g), tune_solver(), ard=v, steps=1),
        "zero_based": lambda v: rj.io.read_svmlight(p, zero_based=v),
        "sparse": lambda v: rj.io.read_svmlight(p, sparse=v),
        "latent": lambda v: rj.gp_preference_probability(
            gp, X[:1] @ X.T, X[1:2] @ X.T, X[:1, 0] ** 2, X[1:2, 0] ** 2, X[:1, 0] * X[1:2, 0],
            latent=v),
        "optimize": lambda v: RankRLSCV(lams=[1.0], optimize=v, optimize_steps=1).fit(
            X, np.round(np.abs(y)), qid=qid),
    }


def test_switches_take_only_true_or_false(good, tmp_path):
    """A string or a number given to a True/False switch is an error naming it (``"no"``
    would otherwise be read as True), and numpy bools are accepted."""
    pytest.importorskip("sklearn")
    for name, call in _switch_calls(*good, tmp_path).items():
        for bad in ("no", 2, None):
            with pytest.raises(TypeError, match=name):
                call(bad)
        call(np.False_)


def test_integer_arguments_refuse_bools(good):
    """``True`` is an int to Python; as a count, a fold number or a cut-off it is a
    mistake (``k=True`` would score NDCG@1), so it is refused like any non-integer."""
    X, y, qid = good
    g = rj.query_graph(qid)
    calls = {"k": lambda v: rj.ndcg(X[:, 0], np.abs(y), qid, k=v),
             "folds": lambda v: rj.make_folds(g, v),
             "num_rows": lambda v: rj.identity_graph(v),
             "block_size": lambda v: rj.kernel_matrix(rj.gaussian_kernel(1.0), X, block_size=v),
             "max_iter": lambda v: rj.fit(rj.Problem(X, y, g), rj.CG(max_iter=v), lam=1.0)}
    for name, call in calls.items():
        with pytest.raises((TypeError, ValueError), match=name):
            call(True)
        call(2)
