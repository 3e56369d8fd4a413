"""Validate once (issue 25): an estimator's ``fit`` and its ``score`` each check every
input once — ``X`` for finiteness, ``y`` for finiteness, the query ids by one remap —
however many public functions they call inside. The counter is
``rankjax._core.finite.VALIDATIONS`` (one count per host finiteness check of an array, by
argument name, and per query-id remap); arrays the library produced itself (kernel
matrices, λ grids, folds, scores) are not inputs and are not counted here.
"""
import warnings

import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax import estimators as E
from rankjax._core.finite import VALIDATIONS

ESTIMATORS = [
    lambda: E.RankRLS(),
    lambda: E.RankRLS(kernel="gaussian"),
    lambda: E.RankRLSCV(),
    lambda: E.RankRLSCV(kernel="gaussian", gammas=[0.1, 1.0]),
    lambda: E.RankRLS(solver='cg'),
    lambda: E.RankSVM(),
    lambda: E.KPCRank(),
    lambda: E.RankBoost(rounds=5),
]
IDS = ["RankRLS", "RankRLS-kernel", "RankRLSCV", "RankRLSCV-kernel", "CGRankRLS", "RankSVM",
       "KPCRank", "RankBoost"]


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(30, num_features=5, seed=0)
    return np.asarray(d.X, np.float64), np.asarray(d.y), np.asarray(d.qid)


def _counts():
    c = dict(VALIDATIONS)
    return {"X": c.get("X", 0) + c.get("X1", 0) + c.get("X2", 0), "y": c.get("y", 0),
            "qid": c.get("qid", 0)}


def _run(call):
    VALIDATIONS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call()
    return _counts()


@pytest.mark.parametrize("make", ESTIMATORS, ids=IDS)
def test_fit_and_score_check_each_input_once(data, make):
    X, y, qid = data
    est = make()
    assert _run(lambda: est.fit(X, y, qid=qid)) == {"X": 1, "y": 1, "qid": 1}
    assert _run(lambda: est.score(X, y, qid=qid)) == {"X": 1, "y": 1, "qid": 1}
    assert _run(lambda: est.predict(X)) == {"X": 1, "y": 0, "qid": 0}


@pytest.mark.parametrize("make", [ESTIMATORS[0], ESTIMATORS[2], ESTIMATORS[7]],
                         ids=["RankRLS", "RankRLSCV", "RankBoost"])
def test_group_sizes_and_pandas_are_checked_once(data, make):
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    sizes = np.bincount(qid)[np.unique(qid)]
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    est = make()
    assert _run(lambda: est.fit(frame, pd.Series(y), group=sizes)) == {"X": 1, "y": 1, "qid": 1}
    assert _run(lambda: est.score(frame, y, group=sizes)) == {"X": 1, "y": 1, "qid": 1}


def test_a_remapped_query_set_is_not_remapped_again(data):
    X, y, qid = data
    s = rj.segment_ids(qid)
    VALIDATIONS.clear()
    g = rj.query_graph(s, y)
    value = rj.ndcg(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=1.0).value.predict(X), y, s)
    assert VALIDATIONS["qid"] == 0 and np.isfinite(float(value))
    assert float(value) == pytest.approx(float(rj.ndcg(
        rj.fit(rj.Problem(X, y, rj.query_graph(qid, y)), rj.Primal(), lam=1.0).value.predict(X), y, qid)))


def test_a_checked_array_is_not_checked_again_but_a_new_one_is(data):
    from rankjax._core.checks import check_matrix
    X, _, _ = data
    VALIDATIONS.clear()
    A = check_matrix(X)
    assert check_matrix(A) is A and VALIDATIONS["X"] == 1
    B = A.at[0, 0].set(np.nan)                    # a new array: checked, and refused
    with pytest.raises(ValueError, match="NaN"):
        check_matrix(B)
    assert VALIDATIONS["X"] == 2


LIBRARY_PATHS = {
    "holdout_primal": lambda X, y, g: rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=[1.0]).value,
    "holdout_nystrom": lambda X, y, g: (
        rj.holdout(rj.Problem(X, y, g), rj.Nystrom(rj.gaussian_kernel(0.5), 20), lams=[1.0]).value
    ),
    "rankrls_nystrom_path": lambda X, y, g: (
        rj.path(
            rj.Problem(X, y, g),
            rj.Nystrom(rj.gaussian_kernel(0.5), rj.Basis(20, method="kmeans++")),
            lams=[1.0],
        ).value
    ),
    "rankrls_falkon": lambda X, y, g: rj.fit(
        rj.Problem(X, y, g), rj.Falkon(rj.gaussian_kernel(0.5), 20), lam=1.0
    ),
    "rankrls_cg": lambda X, y, g: rj.fit(rj.Problem(X, y, g), rj.CG(), lam=1.0),
    "tune": lambda X, y, g: rj.tune(rj.Problem(X, y, g), tune_solver(), steps=1),
    "cv_loss": lambda X, y, g: rj.cv_loss(
        {"log_lam": 0.0}, rj.Problem(X, y, g), tune_solver(), rj.make_folds(g)
    ),
    "select": lambda X, y, g: rj.select(rj.Problem(X, y, g), [rj.Primal()], lams=[1.0]),
    "select-basis": lambda X, y, g: rj.select(
        rj.Problem(X, y, g), [rj.Nystrom(rj.gaussian_kernel(0.5), 20)], lams=[1.0]
    ),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_PATHS))
def test_library_paths_check_each_input_once(data, name):
    # the hold-out, FALKON, tune and selection paths: X and y checked once each, however
    # many inner public functions (check_problem, the basis, the folds) they pass through
    X, y, qid = data
    g = rj.query_graph(qid)
    assert _run(lambda: LIBRARY_PATHS[name](X, y, g))["X"] == 1
    assert _run(lambda: LIBRARY_PATHS[name](X, y, g))["y"] == 1
