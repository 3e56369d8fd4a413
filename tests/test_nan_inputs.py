"""Every float input of the entry points named in issue 24 (class 4) is checked for
NaN/inf outside ``jit``: a ValueError naming it, never a NaN result."""
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax.graphs.build import incidence_mv, incidence_t_mv, laplacian_sqrt_mv
from rankjax.learners.kpcrank import kpcrank_path
from rankjax.metrics.choice import select_lambda
from registry import LAMS, call as verb_call, cases, data, inputs, problem

CASES, IDS = cases()


@pytest.fixture(scope="module")
def d():
    return rj.make_ranking_data(6, num_features=3, seed=0)


def _cases(d):
    g = rj.query_graph(d.qid)
    v = np.ones(len(d.y))
    v[0] = np.nan
    pg = rj.preference_graph([0, 1], [1, 2], num_rows=3)
    X = np.asarray(d.X[:10])
    return {
        "v": lambda: rj.laplacian_mv(g, v),
        "v ": lambda: laplacian_sqrt_mv(g, v),
        "v  ": lambda: incidence_t_mv(pg, np.array([np.nan, 1.0, 2.0])),
        "u": lambda: incidence_mv(pg, np.array([np.nan, 1.0])),
        "x0": lambda: rj.fit(rj.Problem(d.X, d.y, g), rj.CG(x0=np.array([np.nan, 0, 0])), lam=1.0),
        "lams": lambda: select_lambda([np.nan, 1.0], np.stack([np.asarray(d.X[:, 0])] * 2),
                                         d.y, d.qid, metric=rj.ndcg),
        "log_lam": lambda: rj.cv_loss({"log_lam": np.nan}, rj.Problem(d.X, d.y, g), tune_solver(),
                                      rj.make_folds(g)),
        "pairs weight": lambda: rj.cv_loss({"log_lam": 0.0}, rj.Problem(d.X, d.y, g), tune_solver(),
                                           rj.make_folds(g), loss="pairwise",
                                           pairs=(np.array([0]), np.array([1]), np.array([np.nan]))),
        "amplitude": lambda: rj.gp_fit(X, [0, 1], [1, 2], amplitude=-1.0, steps=1),
        "target": lambda: rj.gp_fit(X, [0, 1], [1, 2], [np.nan, 1.0], likelihood="gaussian", steps=1),
        "diffs": lambda: gp_pairwise_gaussian(X @ X.T, [0, 1], [1, 2], [np.nan, 1.0],
                                                 noise_var=0.1),
    }


@pytest.mark.parametrize("name", ["v", "v ", "v  ", "u", "x0", "lams", "log_lam", "pairs weight",
                                  "amplitude", "target", "diffs"])
def test_nan_input_is_an_error_naming_it(d, name):
    with pytest.raises(ValueError, match=name.strip()):
        _cases(d)[name]()


def test_messages_name_the_argument(d):
    """Issue 24, class 8: the message names what is wrong, not a numpy/JAX internal."""
    from rankjax.estimators import RankRLS
    g = rj.query_graph(d.qid)
    cases = [
        (
            lambda: (
                rj.fit(rj.Problem([[1, 2], [3]], [1, 0], rj.query_graph([0, 0])), rj.Primal(), lam=1.0).value
            ),
            "X must be a rectangular",
        ),
        (lambda: rj.io.normalize_per_query(np.ones(4), [0, 0, 1, 1]), "X must be 2-D"),
        (
            lambda: kpcrank_path(np.eye(len(d.y)), np.stack([d.y] * 3, 1), g, components=2),
            "y must be \\[m\\]",
        ),
        (
            lambda: RankRLS(solver="cg").fit(d.X, d.y, qid=d.qid, eval_set=(d.X[:, :2], d.y), eval_qid=d.qid),
            "eval_set's X",
        ),
        (lambda: rj.gp_fit(np.asarray(d.X[:5]), [0, 1], [1, 2], gamma=-1.0, steps=1), "gamma"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()


def test_indefinite_kernel_matrix_is_refused_by_the_eigen_paths(d):
    import jax
    g = rj.query_graph(d.qid)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.5), d.X))
    bad = K - 0.5 * np.eye(len(K))
    for call in (
        lambda K: rj.path(rj.Problem(K, d.y, g, precomputed=True), rj.Dual(), lams=[1.0]).value.coef,
        lambda K: (
            rj.holdout(rj.Problem(K, d.y, g, precomputed=True), rj.Dual(), lams=[1.0]).value.predictions
        ),
    ):
        assert np.all(np.isfinite(np.asarray(call(K))))
        with pytest.raises(ValueError, match="not positive semidefinite"):
            call(bad)
    lin = np.asarray(d.X, np.float32) @ np.asarray(d.X, np.float32).T   # rank 3: rounding only
    assert np.all(np.isfinite(np.asarray(rj.path(rj.Problem(lin, d.y, g, precomputed=True), rj.Dual(),
                                                 lams=[1.0]).value.coef)))
    jitted = jax.jit(
        lambda K: rj.path(rj.Problem(K, d.y, g, precomputed=True), rj.Dual(), lams=[1.0]).value.coef
    )
    assert np.all(np.isnan(np.asarray(jitted(bad))))


def test_stream_refuses_what_a_problem_refuses_and_select_refuses_all_nan(d):
    g = rj.query_graph(d.qid)
    Xb = np.asarray(d.X) > 0
    with pytest.raises(TypeError):
        rj.fit(rj.Problem(Xb, d.y, g), rj.Primal(), lam=1.0).value
    with pytest.raises(TypeError, match="chunk 0: X must be a real numeric"):
        rj.path(rj.scale.stream([(Xb, d.y, d.qid)]), rj.Primal(), lams=[1.0])
    Xn = np.asarray(d.X, float).copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="chunk 0: X contains NaN"):
        rj.path(rj.scale.stream([(Xn, d.y, d.qid)]), rj.Primal(), lams=[1.0])
    flat = np.zeros_like(np.asarray(d.y, float))          # no relevant document anywhere
    with pytest.raises(ValueError, match="undefined"):
        rj.select(rj.Problem(d.X, d.y, g, valid=rj.Problem(d.X, flat, d.qid)),
                  [rj.Dual(rj.gaussian_kernel(0.1))], lams=[1.0])


BAD_LAMBDAS = [([1.0, 2.0], TypeError, "lam must be a scalar"), ("a", TypeError, "lam must be a real"),
               (True, TypeError, "lam must be a real"), (np.nan, ValueError, "lam must be finite"),
               (-1.0, ValueError, "lam"), (np.inf, ValueError, "lam must be finite")]
BAD_GRIDS = [([], ValueError, "lams must be a non-empty"), ([[1.0]], ValueError, "lams must be"),
             ([1.0, np.nan], ValueError, "lams"), ([1.0, -1.0], ValueError, "lams")]


def check_bad_input_is_named(entry, verb):
    """Every solver (registry), eagerly: a bad λ or grid is an error naming ``lam``/``lams``,
    non-finite rows one naming ``X`` (``K``) or ``y``, before any work."""
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    if verb == "fit":
        bad = BAD_LAMBDAS
        go = lambda v: rj.fit(p, entry.solver, lam=v)                            # noqa: E731
    else:
        bad = BAD_GRIDS
        folds = rj.LeavePairOut(rj.differing_pairs(y)[:3]) if verb == "leave_pair_out" else None
        verb_fn = rj.holdout if verb == "leave_pair_out" else getattr(rj, verb)
        kw = {"folds": folds} if folds is not None else {}
        if verb == "leave_pair_out":
            p = problem(entry, X, y, qid, rj.global_graph(X.shape[0]))
        go = lambda v: verb_fn(p, entry.solver, lams=v, **kw)                    # noqa: E731
    for value, error, match in bad:
        with pytest.raises(error, match=match):
            go(value)
    name = "K" if entry.kind == "kernel" else "X"
    for which, pattern in ((0, name), (1, "y")):
        args = [inputs(entry, X).copy(), y.copy()]
        args[which][0] = np.nan
        with pytest.raises(ValueError, match=pattern):
            rj.Problem(args[0], args[1], qid, precomputed=entry.kind == "kernel")


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_every_solver_names_bad_input(entry, verb):
    check_bad_input_is_named(entry, verb)


@pytest.mark.parametrize("times, refused", [(0.5, False), (2.0, True)])
def test_leave_pair_out_dual_refuses_an_indefinite_k_at_its_threshold(times, refused):
    """The README's threshold, tested at its edge: dual leave-pair-out refuses a ``K`` whose
    smallest eigenvalue is ``2x`` below ``-10 m eps32 max|eigenvalue|`` and clips one at half
    of it (rounding noise)."""
    from rankjax._core.linalg import INDEFINITE_RTOL
    m = 40
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((m, m)))[0]
    vals = np.linspace(0.0, 1.0, m)
    vals[0] = -times * INDEFINITE_RTOL * m * float(np.finfo(np.float32).eps)
    K = (V * vals) @ V.T
    K = (K + K.T) / 2
    y = rng.integers(0, 3, m).astype(float)
    pairs = rj.differing_pairs(y)[:20]
    call = lambda: rj.holdout(rj.Problem(K, y, rj.global_graph(m), precomputed=True),  # noqa: E731
                              rj.Dual(), lams=[1.0], folds=rj.LeavePairOut(pairs)).value.predictions
    if refused:
        with pytest.raises(ValueError, match="not positive semidefinite"):
            call()
    else:
        assert np.all(np.isfinite(np.asarray(call())))


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_a_nan_row_under_jit_is_invalid_input_for_every_solver(entry, verb):
    """Issue 75: a non-finite value reaching a solver under ``jit`` (where no check can raise)
    gives the code ``invalid_input`` on every lane and a NaN value, whatever the solver: no
    Nyström model that absorbed the row, no CG zeros, no ``unresolved_lambda``."""
    import jax
    X, y, qid = data()
    X = np.array(X)
    X[3, 1] = np.nan
    lam = 1.0 if verb == "fit" else LAMS
    pairs = np.asarray(rj.differing_pairs(y)[:15]) if verb == "leave_pair_out" else None
    queries = rj.global_graph(X.shape[0]) if verb == "leave_pair_out" else rj.query_graph(qid)

    def go(X):
        sol = verb_call(verb, problem(entry, X, y, qid, queries), entry.solver, lam, pairs)
        return sol.result, sol.value

    result, value = jax.jit(go)(inputs(entry, X))
    assert np.all(np.asarray(result) == int(rj.RESULTS.invalid_input)), np.asarray(result)
    floats = [np.asarray(v) for v in jax.tree.leaves(value) if np.issubdtype(v.dtype, np.inexact)]
    assert floats and all(np.isnan(v).all() for v in floats)
