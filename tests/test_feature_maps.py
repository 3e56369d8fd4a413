"""The feature maps learned at fit (issue 74): the rank map of the kernel estimators and the
standardisation of the linear ones, each against a twin that enumerates (mid-ranks counted
value by value, correlations query by query, moments column by column); their invariance to
the monotone maps raw logs carry; missing values, infinities and categories; the map carried
through predict, save/load, the command line and ``jax.export``."""
import warnings

import jax
import numpy as np
from scipy.stats import norm
import pytest

import rankjax as rj
from rankjax import cli, estimators
from rankjax.features.maps import KNOTS, map_rows
from rankjax.solvers import MappedModel
from surface import E, V, surface_test


def midranks(col):
    """Mid-rank ECDF of every value of ``col`` among the finite-or-inf values (NaN: 1/2)."""
    ok = ~np.isnan(col)
    v, out = col[ok], np.full(col.shape, 0.5)
    for i in np.flatnonzero(ok):
        out[i] = (np.sum(v < col[i]) + np.sum(v <= col[i])) / (2.0 * v.size)
    return out


def normal_scores(u, col):
    """``Φ^{-1}(u)`` of mid-ranks ``u`` among the training column ``col``, clipped to the
    mid-ranks of its smallest and largest value (a value past them scores as they do)."""
    v = col[~np.isnan(col)]
    if v.size == 0:
        return np.zeros(np.shape(u))
    lo, hi = np.sum(v <= v.min()) / (2.0 * v.size), 1 - np.sum(v >= v.max()) / (2.0 * v.size)
    return norm.ppf(np.clip(u, lo, hi))


def correlations(U, y, qid):
    """``|corr|`` of every column with ``y`` within queries, query by query."""
    cov, uu, yy = np.zeros(U.shape[1]), np.zeros(U.shape[1]), 0.0
    for q in np.unique(qid):
        r = qid == q
        uc, yc = U[r] - U[r].mean(0), y[r] - y[r].mean()
        cov += uc.T @ yc
        uu += (uc * uc).sum(0)
        yy += yc @ yc
    den = np.sqrt(uu * yy)
    return np.where(den > 0, np.abs(cov) / np.where(den > 0, den, 1), 0)


def imputed(V, miss, sweeps=3, ridge=1e-3):
    """Missing entries of ``V`` (at 0) replaced by the ridge regression of their column on
    every other column, one regression per column, ``sweeps`` times (the covariance
    estimated again after each); returns ``(V, W)``."""
    n, width = miss.shape[1], V.shape[1]
    for _ in range(sweeps):
        G = V.T @ V / V.shape[0]
        lam = ridge * np.trace(G) / width + np.finfo(float).eps
        W = np.zeros((width, n))
        for j in range(n):
            o = np.arange(width) != j
            W[o, j] = np.linalg.solve(G[np.ix_(o, o)] + lam * np.eye(width - 1), G[o, j])
        V = np.c_[np.where(miss, V @ W, V[:, :n]), V[:, n:]]
    return V, W


@pytest.fixture(scope="module")
def small():
    d = rj.make_ranking_data(30, num_features=6, docs_per_query=(5, 12), seed=3)
    X = d.X.copy()
    X[::9, 2] = np.nan                                    # a column with missing values
    X[5, 4], X[7, 4] = np.inf, -np.inf
    X[:, 5] = np.round(X[:, 5])                           # ties
    return X, d.y, d.qid


def test_the_rank_map_is_the_mid_rank_ecdf_weighted_by_label_correlation(small):
    """Every training value at its mid-rank (inf at the ends), an indicator column for the
    column with NaN, mapped the same way, centred at 1/2; a missing entry imputed from the
    row's other ranks (ridge regressions, one per column); with ``kind="weighted"`` each
    column scaled by its within-query correlation with the labels, to a root mean square
    of 1 (the default ``kind="rank"`` reads no label: every scale 1). New rows: the same
    ranks and regressions."""
    X, y, q = small
    fm = rj.learn_feature_map(X, y, q, kind="weighted")
    assert fm.kind == "rank" and fm.missing.tolist() == [2]
    plain = rj.learn_feature_map(X, y, q)
    np.testing.assert_array_equal(np.asarray(plain.scale), 1.0)
    np.testing.assert_array_equal(np.asarray(plain.knots), np.asarray(fm.knots))
    Z = np.c_[X, np.isnan(X[:, 2])]
    U, W = imputed(np.column_stack([normal_scores(midranks(c), c) for c in Z.T]), np.isnan(X))
    np.testing.assert_allclose(np.asarray(fm.impute), W, rtol=1e-6, atol=1e-9)
    c = correlations(U, y, q)
    np.testing.assert_allclose(np.asarray(fm.scale), c / np.sqrt(np.mean(c * c)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fm(X)), U * np.asarray(fm.scale), atol=1e-6)
    new = X[:4].copy()
    new[0, [0, 3]] = np.nan
    Zn = np.c_[new, np.isnan(new[:, 2])]

    def among(train, v):                     # the mid-rank of v among the training values
        t = train[~np.isnan(train)]
        return 0.5 if np.isnan(v) else (np.sum(t < v) + np.sum(t <= v)) / (2.0 * t.size)

    V = np.array([[normal_scores(among(Z[:, j], Zn[i, j]), Z[:, j]) for j in range(7)]
                  for i in range(4)])
    want = V.copy()
    for _ in range(3):
        want = np.c_[np.where(np.isnan(new), want @ W, want[:, :6]), want[:, 6:]]
    np.testing.assert_allclose(np.asarray(fm(new)), want * np.asarray(fm.scale), atol=1e-6)
    assert rj.learn_feature_map(X[:, [0, 1]]).impute is None       # no NaN: nothing to impute


def test_beyond_the_knots_the_rank_map_counts_among_order_statistics():
    """More rows than knots: the knots are the order statistics at evenly spaced ranks, a
    value at a knot gets its exact mid-rank and any other value a rank within 1/(2 K) of its
    exact mid-rank among all training values (the mean of its neighbouring knots' shares)."""
    rng = np.random.default_rng(0)
    m = 3 * KNOTS + 7
    col = np.round(rng.lognormal(0, 2, m), 1)
    fm = rj.learn_feature_map(col[:, None])
    s = np.sort(col)
    pos = np.round(np.linspace(0, 1, KNOTS) * (m - 1)).astype(int)
    np.testing.assert_array_equal(np.asarray(fm.knots)[:, 0], s[pos])

    def exact(v):                            # the mid-rank, clipped to the extremes'
        u = (np.searchsorted(s, v, "left") + np.searchsorted(s, v, "right")) / (2 * m)
        return np.clip(u, np.sum(s == s[0]) / (2 * m), 1 - np.sum(s == s[-1]) / (2 * m))

    np.testing.assert_allclose(np.asarray(fm(s[pos][:, None]))[:, 0], norm.ppf(exact(s[pos])),
                               rtol=1e-10, atol=1e-12)
    new = np.r_[rng.lognormal(0, 2, 500), col[:200], -1.0, 1e9]
    got = np.asarray(fm(new[:, None]))[:, 0]
    assert np.max(np.abs(norm.cdf(got) - exact(new))) <= 1 / (2 * KNOTS) + 1 / m
    np.testing.assert_allclose(got[-2:], norm.ppf(exact(s[[0, -1]])), rtol=1e-12)


MONOTONE = {
    "x 1e6": lambda x: x * 1e6,
    "exp": lambda x: np.exp(x),
    "shift": lambda x: 100 * x - 1e4,
    "cube": lambda x: (x - 0.3) ** 3,
    "negated": lambda x: -x,
    "decreasing exp": lambda x: -np.exp(2 * x),
}


@pytest.mark.parametrize("name", sorted(MONOTONE))
def test_the_kernel_default_does_not_see_a_monotone_map_of_a_column(name):
    """Every column through the same strictly monotone map, training and test rows: the map's
    rows are the same (or 1 - u: the same distances), so RankRLSCV(kernel="gaussian") scores
    every candidate alike, chooses the same point and predicts the same scores on new rows
    (float64)."""
    tr = rj.make_ranking_data(25, num_features=5, seed=4)
    te = rj.make_ranking_data(10, num_features=5, seed=5, first_qid=99)
    g = MONOTONE[name]
    lams = (0.1, 1.0, 10.0)
    a = estimators.RankRLSCV(kernel="gaussian", lams=lams).fit(tr.X, tr.y, qid=tr.qid)
    b = estimators.RankRLSCV(kernel="gaussian", lams=lams).fit(g(tr.X), tr.y, qid=tr.qid)
    np.testing.assert_allclose(np.abs(np.asarray(b.feature_map_(g(tr.X)))),
                               np.abs(np.asarray(a.feature_map_(tr.X))), atol=1e-12)
    np.testing.assert_allclose(b.cv_results_["mean_test_score"], a.cv_results_["mean_test_score"],
                               rtol=1e-9)
    assert a.best_params_.keys() == b.best_params_.keys() and a.lam_ == b.lam_
    assert getattr(a, "gamma_", 0) == pytest.approx(getattr(b, "gamma_", 0), rel=1e-12)
    np.testing.assert_allclose(b.predict(g(te.X)), a.predict(te.X), rtol=1e-8, atol=1e-10)


def test_the_standard_map_divides_by_the_standard_deviation_and_imputes_by_regression(small):
    X, y, q = small
    fm = rj.learn_feature_map(X, kind="standard")
    Z = np.c_[X, np.isnan(X[:, 2])]
    fin = np.isfinite(Z)
    mean = np.array([Z[fin[:, j], j].mean() for j in range(Z.shape[1])])
    sd = np.array([Z[fin[:, j], j].std() for j in range(Z.shape[1])])
    V, W = imputed(np.where(fin, Z, mean) / sd - mean / sd, ~np.isfinite(X))
    np.testing.assert_allclose(np.asarray(fm(X)), V + mean / sd, rtol=1e-5, atol=1e-9)
    assert fm.kind == "standard" and fm.missing.tolist() == [2]


def test_categories_are_read_as_their_learned_scores():
    """A categorical column: each category's score is the sum of its rows' within-query
    centred labels over its count plus one; a category not seen in training scores 0, a
    missing one goes to the missing indicator."""
    rng = np.random.default_rng(2)
    q = np.repeat(np.arange(20), 6)
    cat = rng.integers(0, 4, q.size).astype(float)
    y = (cat == 2) * 2.0 + rng.random(q.size)
    cat[::11] = np.nan
    X = np.c_[rng.random(q.size), cat]
    fm = rj.learn_feature_map(X, y, q, categorical=[1])
    yc = y - np.array([y[q == k].mean() for k in q])
    want = [yc[cat == c].sum() / (np.sum(cat == c) + 1) for c in range(4)]
    np.testing.assert_allclose(np.asarray(fm.category_scores)[:4, 0], want, rtol=1e-5)
    from rankjax.features.maps import with_categories
    read = with_categories(np, jax.tree.map(np.asarray, fm), np.array([[0.5, 2.0], [0.5, 7.0]]))
    np.testing.assert_allclose(read[:, 1], [want[2], 0.0], rtol=1e-5)
    assert fm.missing.tolist() == [1]


def test_without_a_map_missing_values_are_refused_naming_the_row_and_column(small):
    X, y, q = small
    for make in (lambda: estimators.RankRLSCV(kernel="gaussian", feature_map=None),
                 lambda: estimators.RankRLS(feature_map=None), lambda: estimators.RankBoost(rounds=3)):
        with pytest.raises(ValueError, match=r"NaN or inf values \(row 0, column 2: nan\)"):
            make().fit(X, y, qid=q)
    with pytest.raises(ValueError, match=r"row 0, column 2"):
        rj.fit(rj.Problem(X, y, q), rj.Primal(), lam=1.0)


def test_the_linear_model_reports_its_weights_on_the_users_features(small):
    """Standardised inside the fit, reported on the user's columns: ``X coef_`` are the
    model's scores; a column in other units changes nothing but its own weight; in float32
    the fit holds whatever the columns' scales (float64 here; float32 in the battery)."""
    X, y, q = small
    X = np.nan_to_num(X, posinf=9.0, neginf=-9.0)
    a = estimators.RankRLSCV().fit(X, y, qid=q)
    np.testing.assert_allclose(a.predict(X), X @ a.coef_, rtol=1e-4, atol=1e-5)
    S = X * np.array([1e6, 1e-4, 1.0, 3e3, 1.0, 1.0])
    b = estimators.RankRLSCV().fit(S, y, qid=q)
    assert b.lam_ == a.lam_
    np.testing.assert_allclose(b.coef_ * np.array([1e6, 1e-4, 1.0, 3e3, 1.0, 1.0]), a.coef_,
                               rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(b.feature_importances_, a.feature_importances_, rtol=2e-3, atol=1e-6)


def test_feature_importances_are_shares_of_every_estimator(small):
    X, y, q = small
    for est in (estimators.RankRLSCV(), estimators.RankRLSCV(kernel="gaussian"),
                estimators.RankRLS(kernel="gaussian"), estimators.RankSVM(),
                estimators.KPCRank(n_components=4), estimators.RankBoost(rounds=5)):
        Xf = X if est.__class__ is not estimators.RankBoost else np.nan_to_num(X, posinf=9, neginf=-9)
        imp = est.fit(Xf, y, qid=q).feature_importances_
        assert imp.shape == (6,) and np.all(imp >= 0) and imp.sum() == pytest.approx(1.0), est


def _frame(X, cat, seed):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    df["colour"] = pd.Categorical(np.random.default_rng(seed).choice(["red", "green", "blue", None],
                                                                     X.shape[0]))
    df["code"] = pd.Categorical(cat)
    return df


def test_distorted_rows_with_nan_and_categories_score_alike_everywhere(tmp_path):
    """Raw-log columns (distorted, NaN among them), a text category and a numbered one:
    ``predict``, ``rj.predict(model_)``, save/load, the command line and ``jax.export``
    apply the same learned map."""
    from jax import export
    tr = rj.make_ranking_data(30, num_features=5, seed=6)
    te = rj.make_ranking_data(12, num_features=5, seed=7, first_qid=500)
    A, B, kinds = rj.distort_like_logs(tr.X, te.X, seed=3, share=0.2)
    A[::7, 0], B[::5, 0] = np.nan, np.nan
    rng = np.random.default_rng(0)
    dtr, dte = _frame(A, rng.integers(0, 5, A.shape[0]), 1), _frame(B, rng.integers(0, 7, B.shape[0]), 2)
    est = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0)).fit(dtr, tr.y, qid=tr.qid)
    assert isinstance(est.model_, MappedModel) and est.feature_map_.categorical.tolist() == [5, 6]
    assert est.categories_ == {"colour": ["blue", "green", "red"], "code": None}
    want = est.predict(dte)
    numeric = dte.assign(colour=dte["colour"].map({"blue": 0, "green": 1, "red": 2}).astype(float),
                         code=dte["code"].astype(float)).to_numpy(float)
    np.testing.assert_allclose(np.asarray(rj.predict(est.model_, numeric)), want, rtol=1e-6)
    est.save(tmp_path / "m.npz")
    back = estimators.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.predict(dte), want)
    rj.io.write_svmlight(tmp_path / "te.txt", numeric, te.y, te.qid)
    out = tmp_path / "s.txt"
    assert cli.main(["--quiet", "--load", str(tmp_path / "m.npz"), "--predict",
                     str(tmp_path / "te.txt"), "--output", str(out)]) == 0
    np.testing.assert_allclose(np.loadtxt(out)[:, 2], want, rtol=1e-5, atol=1e-6)
    spec = jax.ShapeDtypeStruct(numeric.shape, np.float32)
    exp = export.deserialize(export.export(jax.jit(lambda m, X: rj.predict(m, X)))(
        est.model_, spec).serialize())
    np.testing.assert_allclose(np.asarray(exp.call(est.model_, numeric.astype(np.float32))), want,
                               rtol=1e-5, atol=1e-6)


def test_a_query_column_by_name_and_a_warning_for_one_left_among_the_features():
    pd = pytest.importorskip("pandas")
    d = rj.make_ranking_data(10, num_features=3, seed=0)
    df = pd.DataFrame(d.X, columns=["a", "b", "c"]).assign(query_id=d.qid)
    by_name = estimators.RankRLS().fit(df, d.y, qid="query_id")
    assert list(by_name.feature_names_in_) == ["a", "b", "c"]
    want = estimators.RankRLS().fit(d.X, d.y, qid=d.qid).predict(d.X)
    np.testing.assert_allclose(by_name.predict(df.drop(columns="query_id")), want, rtol=1e-6)
    np.testing.assert_allclose(by_name.predict(df), want, rtol=1e-6)       # the column named at fit
    assert by_name.score(df, d.y) == pytest.approx(by_name.score(df, d.y, qid="query_id"))
    with pytest.warns(UserWarning, match="'query_id', which looks like the query ids"):
        estimators.RankRLS().fit(df, d.y, qid=d.qid)
    with pytest.raises(ValueError, match="qid='nope'"):
        estimators.RankRLS().fit(df, d.y, qid="nope")
    with pytest.raises(TypeError, match="column 'a' is categorical"):
        estimators.RankRLS(feature_map=None).fit(df.assign(a=pd.Categorical(["x"] * len(df))),
                                                 d.y, qid="query_id")


def test_the_learned_kernel_says_when_it_did_not_move(small, monkeypatch):
    """optimize=True, ard=True keeps the grid's point when the descent does not improve on
    it, with a warning and ``tune_.moved`` False; True when it moved."""
    from rankjax.selection import refine
    X, y, q = small
    real = refine.descend
    monkeypatch.setattr(refine, "descend", lambda *a, **k: real(*a, **{**k, "steps": 1})._replace(
        loss_history=np.array([1.0, 2.0])))
    with pytest.warns(RuntimeWarning, match="did not move"):
        est = estimators.RankRLSCV(kernel="gaussian", optimize=True, ard=True,
                                   optimize_steps=1).fit(X, y, qid=q)
    assert est.tune_.moved is False


@pytest.fixture(scope="module")
def web():
    tr = rj.make_web_data(40, docs_per_query=(15, 30), seed=1)
    te = rj.make_web_data(40, docs_per_query=(15, 30), seed=2, first_qid=10**6)
    return tr, te


def test_the_generator_ships_raw_heavy_tailed_columns(web):
    tr, _ = web
    X = tr.X
    assert np.abs(X).max(0).max() > 1e4 and (X == 0).mean() > 0.1      # huge values, many zeros
    assert np.any(np.ptp(X, axis=0) == 0)                              # constant columns
    assert np.all(np.diff(tr.qid) >= 0) and set(np.unique(tr.y)) <= {0, 1, 2, 3, 4}
    np.testing.assert_array_equal(rj.make_web_data(40, docs_per_query=(15, 30), seed=1).X, X)


@pytest.mark.parametrize("make", [
    lambda **k: estimators.RankSVM(kernel="gaussian", basis=60, **k),
    lambda **k: estimators.KPCRank(n_components=8, **k),
    lambda **k: estimators.RankRLS(kernel="gaussian", **k),
    lambda **k: estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0, 10.0),
                                     **{"feature_map": "rank", **k}),
    lambda **k: estimators.RankRLSCV(**k),
    lambda **k: estimators.RankSVM(**k),
], ids=["RankSVM", "KPCRank", "RankRLS", "RankRLSCV", "linear RankRLSCV", "linear RankSVM"])
def test_every_estimator_predicts_through_its_training_map(web, make):
    """The map learned on the training rows (``learn_feature_map`` with the labels and
    queries), the model the one of ``feature_map=None`` on the mapped rows, every new row
    scored through the same map."""
    tr, te = web
    X, y, q = tr.X[:300], tr.y[:300], tr.qid[:300]
    est = make().fit(X, y, qid=q)
    kind = "rank" if getattr(est, "kernel", None) not in (None, "linear") else "standard"
    fm = rj.learn_feature_map(X, y, q, kind=kind)
    for a, b in zip(jax.tree.leaves(est.feature_map_), jax.tree.leaves(fm)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    by_hand = make(feature_map=None).fit(np.asarray(map_rows(fm, X)), y, qid=q)   # the same rows
    want = by_hand.predict(np.asarray(fm(te.X)))
    np.testing.assert_allclose(est.predict(te.X), want, rtol=1e-6, atol=1e-9 * np.abs(want).max())


def test_the_eval_set_is_scored_through_the_training_map(web):
    """RankRLSCV with an eval_set chooses λ on the eval rows mapped by the training map:
    the same choice and scores as the mapped features by hand (``feature_map="rank"``; and
    the default's chosen candidate, whose final rows are its path on the eval rows through
    the map it keeps)."""
    tr, te = web
    lams = (0.01, 1.0, 100.0)
    fm = rj.learn_feature_map(tr.X, tr.y, tr.qid)
    a = estimators.RankRLSCV(kernel="gaussian", lams=lams, feature_map="rank").fit(
        tr.X, tr.y, qid=tr.qid, eval_set=(te.X, te.y), eval_qid=te.qid)
    b = estimators.RankRLSCV(kernel="gaussian", lams=lams, feature_map=None).fit(
        np.asarray(fm(tr.X)), tr.y, qid=tr.qid, eval_set=(np.asarray(fm(te.X)), te.y),
        eval_qid=te.qid)
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"],
                               rtol=1e-9)
    d = estimators.RankRLSCV(kernel="gaussian", lams=lams).fit(
        tr.X, tr.y, qid=tr.qid, eval_set=(te.X, te.y), eval_qid=te.qid)
    r = d.cv_results_
    final = (r["stage"] == "final") & (r["param_kernel"] == d.best_params_["kernel"])
    fm = d.feature_map_
    gam = {"kernel": "gaussian", "gamma": d.gamma_} if hasattr(d, "gamma_") else {}
    h = estimators.RankRLSCV(lams=lams, feature_map=None, **gam).fit(
        np.asarray(fm(tr.X)), tr.y, qid=tr.qid, eval_set=(np.asarray(fm(te.X)), te.y),
        eval_qid=te.qid)
    np.testing.assert_allclose(r["mean_test_score"][final], h.cv_results_["mean_test_score"],
                               rtol=1e-9)
    assert d.score(te.X, te.y, qid=te.qid) == pytest.approx(d.best_score_, abs=1e-9)


def test_the_map_is_off_for_a_kernel_object_a_solver_object_and_none(web):
    tr, _ = web
    for kw in ({"kernel": rj.gaussian_kernel(1e-6)}, {"kernel": "gaussian", "feature_map": None},
               {"solver": rj.Primal()}, {"feature_map": None}):
        est = estimators.RankRLS(**kw).fit(tr.X[:200], tr.y[:200], qid=tr.qid[:200])
        assert est.feature_map_ is None and not isinstance(est.model_, MappedModel), kw
    with pytest.raises(ValueError, match="feature_map"):
        estimators.RankRLS(kernel="gaussian", feature_map="log").fit(tr.X, tr.y, qid=tr.qid)


def test_a_spread_the_kernel_cannot_see_is_said_where_the_fit_was_called():
    """feature_map=None, one column 10^9 wide beside [0, 1] ones: a warning naming the column
    and the remedy, at the caller's line; the default map: none."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.uniform(-1e9, 1e9, 200), rng.random((200, 4))]
    y, q = rng.integers(0, 3, 200).astype(float), np.repeat(np.arange(20), 10)
    with pytest.warns(RuntimeWarning, match="column 0's spread .* feature_map='auto'") as rec:
        estimators.RankRLS(kernel="gaussian", feature_map=None).fit(X, y, qid=q)
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimators.RankRLS(kernel="gaussian").fit(X, y, qid=q)


def test_ard_whose_loss_is_never_finite_warns_and_keeps_the_grid_point(web, monkeypatch):
    """A descent whose hold-out loss is NaN at every step: a warning naming the cause, the
    grid's point kept (``tune_.moved`` False), never numpy's All-NaN error."""
    from rankjax.selection import refine
    tr, _ = web
    kw = dict(kernel="gaussian", basis=120, optimize=True, optimize_steps=4, ard=True)
    real = refine.descend
    monkeypatch.setattr(refine, "descend", lambda *a, **k: real(*a, **k)._replace(
        loss_history=np.full(5, np.nan)))
    with pytest.warns(RuntimeWarning, match="every gradient step"):
        est = estimators.RankRLSCV(**kw).fit(tr.X, tr.y, qid=tr.qid)
    r = est.cv_results_                         # the grid's best final point kept
    top = int(np.argmin(r["rank_test_score"]))
    assert r["stage"][top] == "final" and est.lam_ == r["param_lam"][top]
    assert est.best_score_ == pytest.approx(r["mean_test_score"][top])
    assert est.tune_.moved is False


@pytest.mark.parametrize("consistent", [True, False])
def test_the_learned_point_is_kept_only_for_a_gain_beyond_chance(small, monkeypatch, consistent):
    """The refined point replaces the grid's when its cross-fitted per-query hold-out gain
    (each half's learned point on the other half's queries) averages more than MOVE_SE
    standard errors: a gain on every query moves, a gain on one query and losses on the
    rest does not, with the warning."""
    from rankjax.selection import refine, select
    X, y, q = small
    X = np.nan_to_num(X, posinf=9.0, neginf=-9.0)
    rng = np.random.default_rng(0)
    base = y + rng.normal(0, 2.0, y.shape)                    # a poor ranking of every query
    better = y + rng.normal(0, 0.3, y.shape)                  # a good one
    worse = y + rng.normal(0, 4.0, y.shape)                   # a worse one
    lucky = np.where(q == np.unique(q)[0], y * 10, worse)     # but one query ranked perfectly
    real = refine.descend
    monkeypatch.setattr(refine, "descend", lambda *a, **k: real(*a, **{**k, "steps": 1})._replace(
        loss_history=np.array([1.0, 0.5])))
    calls = []

    def predictions(*a):                       # the grid's point first, then the learned ones
        calls.append(1)
        return base if len(calls) == 1 else better if consistent else lucky

    monkeypatch.setattr(refine, "cv_predictions_at", predictions)
    start = refine.Point(rj.Dual(rj.gaussian_kernel(0.1)), 1.0, -1.0, None)
    monkeypatch.setattr(refine, "Point", lambda *a, **k: ("kept", a))
    p = rj.Problem(X, y, q)
    grid = select.Grid(p, rj.ndcg, {"k": 10}, np.array([1.0]), 0)
    if consistent:
        point, r = refine.refine(grid, start, rj.make_folds(p.graph), 1, False, None, fit=False)
        assert r.moved is True and point[0] == "kept"
    else:
        with pytest.warns(RuntimeWarning, match="standard error above none"):
            point, r = refine.refine(grid, start, rj.make_folds(p.graph), 1, False, None, fit=False)
        assert r.moved is False and point is start


BAD_INPUT = {}
BAD_INPUT["learn_feature_map"] = [
    (lambda d: rj.learn_feature_map(d.X[:, 0]), E(ValueError, "2-D")),
    (lambda d: rj.learn_feature_map(np.zeros((0, 3))), E(ValueError, "2-D")),
    (lambda d: rj.learn_feature_map(d.X, kind="log"), E(ValueError, "kind")),
    (lambda d: rj.learn_feature_map(d.X, categorical=[9]), E(ValueError, "categorical")),
    (lambda d: rj.learn_feature_map(d.X, categorical=[0]), E(ValueError, "give y")),
    (lambda d: rj.learn_feature_map(d.X, d.y[:3], d.qid), E(ValueError, "rows")),
    (lambda d: rj.learn_feature_map(np.full((4, 2), 5.0)),          # constant: the middle rank
     V(lambda fm: np.all(np.asarray(fm(np.full((4, 2), 5.0))) == 0))),
    (lambda d: rj.learn_feature_map(np.full((4, 2), np.nan)),       # nothing known: 1/2
     V(lambda fm: np.all(np.isfinite(np.asarray(fm(np.full((4, 2), np.nan))))))),
]
BAD_INPUT["estimators.permutation_importance"] = [
    (lambda d: estimators.permutation_importance(estimators.RankRLS().fit(d.X, d.y, qid=d.qid),
                                                 d.X[:, 0], d.y, d.qid), E(ValueError, "2-D")),
    (lambda d: estimators.permutation_importance(estimators.RankRLS().fit(d.X, d.y, qid=d.qid),
                                                 d.X, d.y, d.qid, n_repeats=0), E(ValueError, "n_repeats")),
    (lambda d: estimators.permutation_importance(estimators.RankRLS(), d.X, d.y, d.qid),
     E(ValueError, "not fitted")),
    (lambda d: estimators.permutation_importance(estimators.RankRLS().fit(d.X, d.y, qid=d.qid),
                                                 d.X, d.y, d.qid), V(lambda v: v.shape == (4,))),
]
BAD_INPUT["distort_like_logs"] = [
    (lambda d: rj.distort_like_logs(d.X, d.X[:, :2]), E(ValueError, "same columns")),
    (lambda d: rj.distort_like_logs(d.X, share=1.0), E(ValueError, "share")),
    (lambda d: rj.distort_like_logs(d.X, seed=1)[0], V(lambda A: A.ndim == 2)),
]
BAD_INPUT["make_web_data"] = [
    (lambda d: rj.make_web_data(0), E(ValueError, "num_queries")),
    (lambda d: rj.make_web_data(3, docs_per_query=(5, 2)), E(ValueError, "docs_per_query")),
    (lambda d: rj.make_web_data(2, docs_per_query=1, num_features=3),
     V(lambda w: w.X.shape == (2, 3) and np.all(np.isfinite(w.X)))),
]
BAD_INPUT["make_interaction_data"] = [
    (lambda d: rj.make_interaction_data(0), E(ValueError, "num_queries")),
    (lambda d: rj.make_interaction_data(3, num_features=39), E(ValueError, "num_features")),
    (lambda d: rj.make_interaction_data(3, docs_per_query=(5, 2)), E(ValueError, "docs_per_query")),
    (lambda d: rj.make_interaction_data(2, docs_per_query=1, num_features=40),
     V(lambda w: w.X.shape == (2, 40) and np.all(np.isfinite(w.X)))),
]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
