"""The redesigned core: graph operators only in graphs/graph.py, the symmetric dual against an
extended-precision solve, metric directions, one predict, and compile-free repeat calls."""
import ast
import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from reference import gaussian as ref_gaussian
from rankjax.selection.cv import cross_validate
from rankjax.solvers.models import ScaledModel
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax.graphs.build import incidence_mv
from rankjax.learners.kpcrank import kpcrank_path
from registry import LAMS, call, cases, data, problem

CASES, IDS = cases()

PKG = pathlib.Path(rj.__file__).parent
GRAPH_TYPES = {"QueryGraph", "PreferenceGraph", "IdentityGraph"}


def test_no_graph_type_switch_outside_graph_module():
    offenders = []
    for path in PKG.glob("*.py"):
        if path.name == "graphs/graph.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                if names & GRAPH_TYPES:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"isinstance on graph types outside graphs/graph.py: {offenders}"


def _refined_solve(A, b, steps=6):
    """Solution of A x = b by float64 LU with residuals in extended precision."""
    Al, bl = A.astype(np.longdouble), b.astype(np.longdouble)
    x = np.linalg.solve(A, b).astype(np.longdouble)
    for _ in range(steps):
        r = bl - Al @ x
        x = x + np.linalg.solve(A, r.astype(np.float64)).astype(np.longdouble)
    return x


def test_preference_dual_matches_extended_precision_on_ill_conditioned_problem():
    rng = np.random.default_rng(3)
    m = 40
    X = rng.standard_normal((m, 3))
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.05), X))
    h = rng.integers(0, m, 120)
    t = rng.integers(0, m, 120)
    keep = h != t
    h, t = h[keep], t[keep]
    mag = rng.random(h.size) + 0.5
    g = rj.preference_graph(h, t, mag, num_rows=m)
    L = np.asarray(rj.laplacian_dense(g))
    lam = 1e-4
    A = L @ K + lam * np.eye(m)
    assert np.linalg.cond(A) >= 1e7
    b = np.asarray(incidence_mv(g, g.target))
    ref = _refined_solve(A, b)
    got = np.asarray(
        rj.fit(rj.Problem(K, None, g, precomputed=True), rj.Dual(), lam=lam).value.coef, np.longdouble
    )
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err <= 1e-9, err
    path = rj.path(rj.Problem(K, None, g, precomputed=True), rj.Dual(), lams=[lam, 1.0]).value
    np.testing.assert_allclose(path.coef[0], got.astype(np.float64), rtol=0,
                               atol=1e-9 * float(np.abs(ref).max()))


METRICS = [(rj.pairwise_error, {}), (rj.cindex, {}), (rj.disagreement_error, {}),
           (rj.kendall_tau_b, {}), (rj.ndcg, {"k": 5}), (rj.mean_average_precision, {}),
           (rj.precision_at_k, {"k": 3})]


@pytest.mark.parametrize("metric,kw", METRICS, ids=lambda m: getattr(m, "__name__", ""))
def test_metric_wrappers_choose_like_the_metric(metric, kw):
    d = rj.make_ranking_data(25, num_features=6, seed=4)
    g = rj.query_graph(d.qid)
    lams = np.array([1e-3, 1.0, 1e4])
    h = rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=lams).value
    hib = metric.higher_is_better
    lam_fn = lambda f, y, q, **k: metric(f, y, q, **k)  # noqa: E731
    wrappers = [dict(metric=functools.partial(metric)),
                dict(metric=lam_fn, higher_is_better=hib),
                dict(metric=rj.Metric(lam_fn, higher_is_better=hib))]
    base = cross_validate(h, d.y, d.qid, metric=metric, **kw)
    for w in wrappers:
        cv = cross_validate(h, d.y, d.qid, **w, **kw)
        assert int(cv.best_index) == int(base.best_index)
    with pytest.raises(ValueError, match="higher_is_better"):
        cross_validate(h, d.y, d.qid, metric=lam_fn, **kw)
    if metric not in (rj.pairwise_error, rj.ndcg):  # one metric of each direction suffices
        return
    prob = rj.Problem(d.X, d.y, g)
    p0 = rj.permutation_test(prob, rj.Primal(), lams=lams[1:2], metric=metric, num_permutations=9,
                             **kw).pvalue
    p = rj.permutation_test(prob, rj.Primal(), lams=lams[1:2], num_permutations=9, **wrappers[1],
                            **kw).pvalue
    np.testing.assert_array_equal(p, p0)          # (the direction logic is shared: one wrapper)


def test_predict_works_on_every_model_type():
    d = rj.make_ranking_data(12, num_features=4, seed=1)
    X, y, qid = d.X, d.y, d.qid
    g = rj.query_graph(qid)
    kern = rj.gaussian_kernel(0.3)
    K = np.asarray(rj.kernel_matrix(kern, X))
    Xt = X[:7]
    Kt = K[:7]
    m = X.shape[0]
    lin = rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=1.0).value
    expect = {
        "linear": (lin, Xt, Xt @ np.asarray(lin.weights)),
        "dual": (rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=1.0).value, Kt, None),
        "kernel": (rj.fit(rj.Problem(X, y, g), rj.Dual(kern), lam=1.0).value, Xt, None),
        "primal path": (rj.path(rj.Problem(X, y, g), rj.Primal(), lams=[1.0, 2.0]).value, Xt, None),
        "dual path": (
            rj.path(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=[1.0, 2.0]).value,
            Kt,
            None,
        ),
        "nystrom path": (rj.path(rj.Problem(X, y, g), rj.Nystrom(kern, 10), lams=[1.0, 2.0]).value, Xt, None),
        "cg": (rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-10), lam=1.0).value, Xt, None),
        "cg dual": (rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(tol=1e-10), lam=1.0).value, Kt, None),
        "kpc": (rj.kpcrank(K, y, g, components=5), Kt, None),
        "kpc path": (kpcrank_path(K, y, g, components=5), Kt, None),
        "ranksvm": (rj.ranksvm_l2(X, y, qid, C=0.1), Xt, None),
        "ranksvm kernel": (rj.ranksvm_kernel(X, y, qid, kernel=kern, basis=10), Xt, None),
        "rankboost": (rj.rankboost(X, y, qid, rounds=5), Xt, None),
        "gp": (gp_pairwise_gaussian(K, [0, 1], [2, 3], [1.0, 1.0], noise_var=1.0), Kt, None),
    }
    paths = {"primal path", "dual path", "nystrom path", "kpc path"}

    def gauss(A, B):                                   # the kernel, in numpy
        return ref_gaussian(np.asarray(A, np.float64), np.asarray(B, np.float64), 0.3)

    def ref(name, model):
        """What each model predicts, from its fields by the formula in its docstring."""
        a = {k: (np.asarray(v) if hasattr(v, "shape") else v) for k, v in model._asdict().items()}
        return {
            "linear": lambda: Xt @ a["weights"],
            "dual": lambda: Kt @ a["coef"],
            "kernel": lambda: gauss(Xt, a["X_train"]) @ a["coef"],
            "primal path": lambda: a["weights"] @ Xt.T,
            "dual path": lambda: a["coef"] @ Kt.T,
            "nystrom path": lambda: a["coef"] @ gauss(Xt, a["basis"]).T,
            "nystrom": lambda: gauss(Xt, a["basis"]) @ a["coef"],
            "cg": lambda: Xt @ a["weights"],
            "cg dual": lambda: Kt @ a["coef"],
            "kpc": lambda: Kt @ a["coef"] - a["offset"],
            "kpc path": lambda: a["coef"] @ Kt.T - a["offset"][:, None],
            "ranksvm": lambda: Xt @ a["weights"],
            "ranksvm kernel": lambda: gauss(Xt, a["basis_X"]) @ a["coef"],
            "rankboost": lambda: ((Xt[:, a["feature"]] > a["threshold"]) * a["alpha"]).sum(1),
            "gp": lambda: (Kt[:, a["head"]] - Kt[:, a["tail"]]) @ a["alpha"],
            "scaled": lambda: gauss(Xt * a["scales"], a["model"].X_train) @ np.asarray(a["model"].coef),
        }[name]()

    expect["nystrom"] = (rj.fit(rj.Problem(X, y, g), rj.Nystrom(kern, 10), lam=1.0).value, Xt, None)
    scales = np.array([1.0, 0.5, 2.0, 0.0])
    inner = rj.fit(rj.Problem(X * scales, y, g), rj.Dual(kern), lam=1.0).value
    expect["scaled"] = (ScaledModel(scales, inner), Xt, None)
    assert len({type(mdl) for mdl, _, _ in expect.values()}) >= 14
    for name, (model, inp, _) in expect.items():
        f = np.asarray(rj.predict(model, inp))
        assert f.shape[-1] == 7 and np.all(np.isfinite(f)), name
        assert f.ndim == (2 if name in paths else 1), name
        want = ref(name, model)
        np.testing.assert_allclose(f, want, rtol=1e-9, atol=1e-12 * np.abs(want).max(),
                                   err_msg=name)
    # dual and kernel models agree with K_test @ coef; paths with their single solves
    np.testing.assert_allclose(rj.predict(expect["kernel"][0], Xt),
                               rj.predict(expect["dual"][0], Kt), rtol=1e-8)
    np.testing.assert_allclose(rj.predict(expect["primal path"][0], Xt)[0],
                               rj.predict(lin, Xt), rtol=1e-8)
    with pytest.raises(ValueError, match="features"):
        rj.predict(lin, X[:, :3])
    with pytest.raises(TypeError):
        rj.predict(np.ones(3), Xt)
    assert m > 7


COMPILES = [0]


def _count(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


LOWERED = [0]


def _lowered(event, duration, **kw):
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":     # also before a cache hit
        LOWERED[0] += 1


jax.monitoring.register_event_duration_secs_listener(_lowered)


@pytest.mark.parametrize("kernel", [None, "gaussian"])
def test_a_fit_on_other_rows_makes_two_programs(kernel):
    """Issue 43: ``RankRLSCV.fit`` on a new row count makes its hold-out (the kernel matrix
    inside it) and its selection, nothing more on the CPU (the checks' reductions and the
    chosen λ's lane run on numpy views there, :func:`rankjax._core.checks.reduce_concrete`)."""
    from rankjax.estimators import RankRLSCV
    if jax.devices()[0].platform != "cpu":
        pytest.skip("the reductions are programs on an accelerator")
    X, y, q = _data(3, 31, m=186)
    kw = dict(kernel=kernel, lams=[0.1, 1.0, 10.0])
    RankRLSCV(**kw).fit(X, y, qid=q)
    for rows in (168, 150):                            # 28 and 25 queries of 6 rows
        before = LOWERED[0]
        model = RankRLSCV(**kw).fit(X[:rows], y[:rows], qid=q[:rows])
        assert LOWERED[0] - before <= 2
        assert np.isfinite(model.best_score_)


def _compiles(fn):
    before = COMPILES[0]
    jax.block_until_ready(fn())
    return COMPILES[0] - before


def _data(seed, num_queries, m=240):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, 5))
    y = np.clip(np.round(X[:, 0] + rng.standard_normal(m)) + 3, 0, None)    # graded, >= 0
    return X, y, np.repeat(np.arange(num_queries), m // num_queries)


@pytest.mark.parametrize("name", ["primal", "path", "dual", "lqo", "cv_loss", "cg", "ndcg",
                                  "pairwise", "rankboost"])
def test_new_values_or_query_count_compile_nothing(name):
    lams = np.array([0.1, 1.0, 10.0])
    calls = {
        "primal": lambda X, y, q: rj.fit(rj.Problem(X, y, rj.query_graph(q)), rj.Primal(), lam=1.0).value,
        "path": lambda X, y, q: rj.path(rj.Problem(X, y, rj.query_graph(q), valid=rj.Problem(X, y)),
                                        rj.Primal(), lams=lams).value,
        "dual": lambda X, y, q: rj.fit(rj.Problem(X @ X.T, y, rj.query_graph(q), precomputed=True),
                                       rj.Dual(), lam=1.0).value,
        "lqo": lambda X, y, q: rj.holdout(rj.Problem(X, y, rj.query_graph(q)), rj.Primal(), lams=lams,
                                          folds=3).value,
        "cv_loss": lambda X, y, q: rj.cv_loss({"log_lam": 0.0, "log_gamma": -1.0},
                                              rj.Problem(X, y, rj.query_graph(q)),
                                              tune_solver("gaussian"),
                                              rj.make_folds(rj.query_graph(q), 3)),
        "cg": lambda X, y, q: rj.fit(rj.Problem(X, y, rj.query_graph(q)), rj.CG(), lam=1.0),
        "ndcg": lambda X, y, q: rj.ndcg(X[:, 0], y, q, k=5),
        "pairwise": lambda X, y, q: rj.pairwise_error(X[:, 0], y, q),
        "rankboost": lambda X, y, q: rj.rankboost(X, y, q, rounds=3),
    }
    fn = calls[name]
    _compiles(lambda: fn(*_data(0, 40)))
    assert _compiles(lambda: fn(*_data(1, 40))) == 0           # new values
    if name not in ("lqo", "cv_loss"):       # hold-outs: the fold sizes are array shapes
        assert _compiles(lambda: fn(*_data(2, 48))) == 0       # 48 queries instead of 40


def test_caller_jit_and_vmap_still_work():
    X, y, q = _data(0, 40)
    g = rj.query_graph(q)
    eager = rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=0.5).value.weights
    jitted = jax.jit(lambda X, y, g, lam: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights)
    np.testing.assert_allclose(jitted(X, y, g, 0.5), eager, rtol=1e-10)
    lams = jnp.array([0.5, 2.0])
    batched = jax.vmap(lambda lam: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights)(lams)
    np.testing.assert_allclose(batched[0], eager, rtol=1e-10)
    grad = jax.grad(lambda lam: jnp.sum(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights))(0.5)
    fd = (np.sum(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=0.5 + 1e-06).value.weights)
          - np.sum(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=0.5 - 1e-06).value.weights)) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5)
    with pytest.raises(TypeError, match="scalar"):
        rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=[1.0, 2.0]).value


def test_xla_cpu_scheduler_flag_is_added_once_and_never_overrides_the_caller():
    from rankjax.runtime.xla import _configure
    env = {}
    _configure(env)
    assert env["XLA_FLAGS"] == "--xla_cpu_enable_concurrency_optimized_scheduler=false"
    _configure(env)
    assert env["XLA_FLAGS"].count("concurrency") == 1
    mine = {"XLA_FLAGS": "--xla_cpu_enable_concurrency_optimized_scheduler=true --foo"}
    _configure(mine)
    assert mine["XLA_FLAGS"] == "--xla_cpu_enable_concurrency_optimized_scheduler=true --foo"
    other = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    _configure(other)
    assert other["XLA_FLAGS"].startswith("--xla_force_host_platform_device_count=4 --xla_cpu")


def test_deterministic_switch_adds_xla_gpu_deterministic_ops_once():
    import subprocess
    import sys
    from rankjax.runtime.xla import _configure
    env = {"RANKJAX_DETERMINISTIC": "1"}
    _configure(env)
    _configure(env)
    assert env["XLA_FLAGS"].count("--xla_gpu_deterministic_ops=true") == 1
    mine = {"RANKJAX_DETERMINISTIC": "1", "XLA_FLAGS": "--xla_gpu_deterministic_ops=false"}
    _configure(mine)
    assert "deterministic_ops=true" not in mine["XLA_FLAGS"]
    # XLA knows the flag (an unknown one aborts the process at start-up)
    out = subprocess.run([sys.executable, "-c", "import rankjax as rj, numpy as np; "
                          "print(float(rj.ndcg(np.arange(3.), np.arange(3.))))"],
                         env={**__import__("os").environ, "RANKJAX_DETERMINISTIC": "1"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "1.0", out.stderr[-500:]


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["make_ranking_data"] = [
        (lambda d: rj.make_ranking_data(0), E(ValueError, "num_queries")),
        (lambda d: rj.make_ranking_data(3, levels=1), E(ValueError, "levels")),
        (lambda d: rj.make_ranking_data(3, docs_per_query=(5, 2)), E(ValueError, "docs_per_query")),
    ]
BAD_INPUT["make_sparse_ranking_data"] = [
        (lambda d: rj.make_sparse_ranking_data(0, 100), E(ValueError, "num_rows")),
        (lambda d: rj.make_sparse_ranking_data(10, 5, nnz_per_row=6), E(ValueError, "nnz_per_row")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)


def check_new_values_compile_nothing(entry, verb):
    """Every solver (registry): the verb on a second problem of the same shapes (new
    feature values and targets, the same queries) compiles nothing."""
    X, y, qid = data()
    lam = 1.0 if verb == "fit" else LAMS
    pairs = rj.differing_pairs(y)[:15] if verb == "leave_pair_out" else None
    queries = rj.global_graph(X.shape[0]) if pairs is not None else None
    folds = rj.make_folds(rj.query_graph(qid)) if verb == "holdout" else None
    rng = np.random.default_rng(1)

    def go(X, y):
        p = problem(entry, X, y, qid, queries)
        if verb == "holdout":
            return rj.holdout(p, entry.solver, lams=lam, folds=folds)
        return call(verb, p, entry.solver, lam, pairs)

    _compiles(lambda: go(X, y))
    X2 = X * 1.1 + 0.1 * rng.standard_normal(X.shape)
    assert _compiles(lambda: go(X2, y[::-1].copy())) == 0, (entry.name, verb)


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_every_solver_compiles_once_per_shape(entry, verb):
    check_new_values_compile_nothing(entry, verb)
