"""The float32 pass: the library's solvers with x64 off, as on an accelerator, against
float64 references in numpy, with tolerances from float32's epsilon and the problem's
condition number; and the solvers' convergence under reduced-precision products
(:func:`rankjax._core.emulate.reduced_precision`: TF32 as an H100's default, bfloat16 as a
TPU's), so that a product missing ``precision=HIGHEST`` fails on the CPU too.

A solver in float32 is expected within ``C * eps32 * cond`` of the float64 solution
(``C`` a small constant for the rounding of the data and the products); a TF32 product
(10 mantissa bits) is 8,000 times further off and breaks the bound.
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax._core.emulate import MANTISSA, reduced_precision, round_mantissa
from rankjax._core.products import mm
from reference import dense_laplacian, laplacian_from_pairs, query_pairs, ranksvm_fgh
from precision import within
from registry import LAMS, cases, condition, data, dual_condition, form, solve

EPS32 = float(np.finfo(np.float32).eps)
C = 30.0                      # rounding of the data, the products and the solver's own steps
EMULATIONS = [None, "tf32", "bf16"]
CASES, IDS = cases()


@pytest.fixture(autouse=True, scope="module")
def _x64_off():
    """The whole module runs as on an accelerator: default dtypes 32-bit."""
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", True)


def _run(fn, emulation, *args):
    return fn(*args) if emulation is None else reduced_precision(fn, emulation)(*args)


@pytest.fixture(scope="module")
def problem():
    """LETOR-like data on scales from 1 to 3 and shifted away from 0 (as raw features
    are): ``X^T L X + λ I`` of condition about 10, its float64 solution, and the dense
    query Laplacian."""
    d = rj.make_ranking_data(24, num_features=12, seed=2)
    X = np.asarray(d.X, np.float64) * np.logspace(0, 0.5, 12) + 2.0
    y, qid = np.asarray(d.y, np.float64), np.asarray(d.qid)
    L = laplacian_from_pairs(len(y), query_pairs(qid))
    lam = 1.0
    A = X.T @ L @ X + lam * np.eye(X.shape[1])
    w = np.linalg.solve(A, X.T @ L @ y)
    return dict(X=X, y=y, qid=qid, L=L, lam=lam, w=w, cond=np.linalg.cond(A),
                X32=jnp.asarray(X, jnp.float32), y32=jnp.asarray(y, jnp.float32))


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_x64_is_off_here(problem):
    assert not jax.config.jax_enable_x64
    assert jnp.zeros(1).dtype == jnp.float32 and problem["X32"].dtype == jnp.float32


def test_round_mantissa_keeps_the_stated_bits():
    x = jnp.asarray([1 + 2.0 ** -11, 1 + 2.0 ** -9, -3.0, jnp.inf, 1e-30], jnp.float32)
    t = np.asarray(round_mantissa(x, MANTISSA["tf32"]))
    assert t[0] == 1 + 2.0 ** -10 and t[1] == 1 + 2.0 ** -9 and t[2] == -3.0 and np.isinf(t[3])
    assert abs(t[4] - 1e-30) <= 2.0 ** -11 * 1e-30
    assert np.asarray(round_mantissa(x, MANTISSA["bf16"]))[1] == 1.0
    h = round_mantissa(jnp.asarray([1 + 2.0 ** -9], jnp.float16), MANTISSA["bf16"])
    assert h.dtype == jnp.float16 and float(h[0]) == 1.0


def test_emulation_catches_a_product_without_highest(problem):
    """The check's power: a bare product (default precision) under TF32 emulation is
    about 1e-3 off; the same product at HIGHEST is exact to float32."""
    X = problem["X32"]
    exact = problem["X"].T @ problem["X"]
    bare = reduced_precision(lambda a: a.T @ a)(X)
    hi = reduced_precision(lambda a: mm(a.T, a))(X)
    assert rel(bare, exact) > 100 * EPS32
    within(rel(hi, exact), 10 * EPS32, "HIGHEST product")
    # inside jit, a while loop and a vmap too
    def looped(a):
        return jax.vmap(lambda s: jax.lax.fori_loop(0, 2, lambda i, c: c @ a.T @ a / s, a))(
            jnp.array([1.0, 2.0]))
    ref = np.stack([problem["X"] @ np.linalg.matrix_power(exact / s, 2) for s in (1.0, 2.0)])
    assert rel(reduced_precision(jax.jit(looped))(X), ref) > 100 * EPS32


@pytest.mark.parametrize("emulation", EMULATIONS)
def test_primal_closed_form(problem, emulation):
    g = rj.query_graph(problem["qid"])
    w = _run(
        lambda X, y: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=problem["lam"]).value.weights,
        emulation,
        problem["X32"],
        problem["y32"],
    )
    assert w.dtype == jnp.float32
    within(rel(w, problem["w"]), C * EPS32 * problem["cond"], "primal fit")


@pytest.mark.parametrize("emulation", EMULATIONS)
def test_primal_cg_converges_to_the_solution(problem, emulation):
    """The CG of every iteration at float32 accuracy: it reaches ``tol`` well before
    ``max_iter`` and lies within the bound; a TF32 matrix-vector product stalls above
    ``tol`` and lies ~1e-3 off."""
    g = rj.query_graph(problem["qid"])
    opts = rj.CG(tol=1e-5, max_iter=300)
    res = _run(lambda X, y: rj.fit(rj.Problem(X, y, g), opts, lam=problem['lam']), emulation,
               problem["X32"], problem["y32"])
    assert bool(res.stats["converged"]) and int(res.stats["iterations"]) < 100
    within(rel(res.value.weights, problem["w"]), C * EPS32 * problem["cond"], "primal CG")
    assert 3 < problem["cond"] < 100


@pytest.mark.parametrize("emulation", ["tf32", "bf16"])
def test_primal_cg_without_highest_fails_the_bound(problem, monkeypatch, emulation):
    """The mutation the precision rule guards against, made on the fly: primal CG's
    products at default precision (``rankjax.solvers.cg.mm`` replaced by a bare ``@``) break the
    bound of the test above under emulation."""
    import rankjax.solvers.cg as cg_module
    monkeypatch.setattr(cg_module, "mm", lambda a, b: a @ b)
    jax.clear_caches()
    try:
        g = rj.query_graph(problem["qid"])
        res = reduced_precision(
            lambda X, y: rj.fit(rj.Problem(X, y, g), rj.CG(), lam=problem["lam"]), emulation
        )(problem["X32"], problem["y32"])
        assert rel(res.value.weights, problem["w"]) > 5 * C * EPS32 * problem["cond"]
    finally:
        monkeypatch.undo()
        jax.clear_caches()


@pytest.mark.parametrize("emulation", [None, "tf32"])
def test_path_and_holdout(problem, emulation):
    """The λ path and leave-query-out, against retraining without each query in float64."""
    X, y, qid, L = problem["X"], problem["y"], problem["qid"], problem["L"]
    g = rj.query_graph(qid)
    lams = np.array([0.3, 3.0], np.float32)

    def fn(X, y):
        return (
            rj.path(rj.Problem(X, y, g), rj.Primal(), lams=lams).value.weights,
            rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=lams, folds=rj.make_folds(g)).value.predictions,
        )

    W, H = _run(fn, emulation, problem["X32"], problem["y32"])
    for i, lam in enumerate(lams.astype(np.float64)):
        A = X.T @ L @ X + lam * np.eye(X.shape[1])
        cond = np.linalg.cond(A)
        within(rel(W[i], np.linalg.solve(A, X.T @ L @ y)), C * EPS32 * cond, "primal path")
        ref = np.empty(len(y))
        for q in np.unique(qid):
            r, u = qid != q, qid == q
            Ar = X[r].T @ L[np.ix_(r, r)] @ X[r] + lam * np.eye(X.shape[1])
            ref[u] = X[u] @ np.linalg.solve(Ar, X[r].T @ L[np.ix_(r, r)] @ y[r])
        within(rel(H[i], ref), C * EPS32 * cond, "primal hold-out")


@pytest.mark.parametrize("emulation", [None, "tf32"])
def test_dual_cg_and_closed_form(problem, emulation):
    X, y, qid, L = problem["X"], problem["y"], problem["qid"], problem["L"]
    g = rj.query_graph(qid)
    K = X @ X.T / X.shape[1]
    lam = 1e-1
    a = np.linalg.solve(L @ K + lam * np.eye(len(y)), L @ y)
    ref = K @ a
    cond = dual_condition(L, K, lam)
    K32 = jnp.asarray(K, jnp.float32)

    def fn(K, y):
        cg = rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(tol=1e-05, max_iter=500), lam=lam)
        return (
            mm(K, cg.value.coef),
            cg.stats["converged"],
            rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=lam).value.predict(K),
        )

    f_cg, ok, f_cf = _run(fn, emulation, K32, problem["y32"])
    assert bool(ok)
    # the dual system rounds at λ-relative scale: about 10x the primal amplification
    within(rel(f_cg, ref), 10 * C * EPS32 * cond, "dual CG")
    within(rel(f_cf, ref), 10 * C * EPS32 * cond, "dual fit")


@pytest.mark.parametrize("emulation", [None, "tf32"])
def test_dual_holdout_against_retraining(problem, emulation):
    """The dual hold-out, a cancellation ``(K - K S U D U^T S K) / λ``: within
    ``C eps32 Γ/λ`` (``Γ`` the largest eigenvalue of ``L K``) of retraining without each
    query in float64."""
    X, y, qid, L = problem["X"], problem["y"], problem["qid"], problem["L"]
    g = rj.query_graph(qid)
    K = np.exp(-0.02 * ((X[:, None] - X[None]) ** 2).sum(-1))
    lams = np.array([0.1, 1.0])
    H = _run(
        lambda K, y: (
            rj.holdout(
                rj.Problem(K, y, g, precomputed=True),
                rj.Dual(),
                lams=jnp.asarray(lams, jnp.float32),
                folds=rj.make_folds(g),
            ).value.predictions
        ),
        emulation,
        jnp.asarray(K, jnp.float32),
        problem["y32"],
    )
    gamma = np.max(np.abs(np.linalg.eigvals(L @ K)))
    for i, lam in enumerate(lams):
        ref = np.empty(len(y))
        for q in np.unique(qid):
            r, u = qid != q, qid == q
            Lr = L[np.ix_(r, r)]
            ref[u] = K[np.ix_(u, r)] @ np.linalg.solve(Lr @ K[np.ix_(r, r)] + lam * np.eye(r.sum()),
                                                       Lr @ y[r])
        within(rel(H[i], ref), C * EPS32 * gamma / lam, "dual hold-out")


@pytest.mark.parametrize("emulation", [None, "tf32"])
def test_falkon_reaches_the_nystrom_solution(problem, emulation):
    """FALKON (preconditioned CG on the Nyström system) against the Nyström closed form
    of the same basis rows in float64."""
    X, y, qid, L = problem["X"], problem["y"], problem["qid"], problem["L"]
    g = rj.query_graph(qid)
    kern = rj.gaussian_kernel(0.05)
    R = np.arange(0, len(y), 5)[:60]
    d2 = ((X[:, None, :] - X[None, R, :]) ** 2).sum(-1)
    KmR = np.exp(-0.05 * d2)
    KRR = KmR[R]
    lam = 1e-1
    A = KmR.T @ L @ KmR + lam * KRR
    a = np.linalg.lstsq(A, KmR.T @ L @ y, rcond=None)[0]
    ref = KmR @ a
    model = _run(
        lambda X, y: rj.fit(
            rj.Problem(X, y, g), rj.Falkon(kern, R, options=rj.CG(tol=1e-06, max_iter=200)), lam=lam
        ).value.predict(X),
        emulation,
        problem["X32"],
        problem["y32"],
    )
    within(rel(model, ref), 1e-3, "FALKON")


@pytest.mark.parametrize("emulation", [None, "tf32"])
def test_ranksvm_tron_reaches_a_stationary_point(problem, emulation):
    """TRON in float32: the float64 gradient of the L2-loss RankSVM objective at its
    solution is small against the gradient at 0."""
    from rankjax.learners.ranksvm import _tron_jit, rank_levels
    X, y, qid = problem["X"][:200], problem["y"][:200], problem["qid"][:200]
    if emulation is None:
        w = rj.ranksvm_l2(jnp.asarray(X, jnp.float32), y, qid, C=0.1, tol=1e-4).weights
    else:                    # the compiled TRON loop (ranksvm_l2's host part builds the levels)
        opts = (jnp.float32(0.1), jnp.float32(1e-4), jnp.int32(1000), jnp.float32(0.1),
                jnp.int32(1000), jnp.ones(X.shape[0], jnp.float32))
        w = reduced_precision(lambda X, lv, o: _tron_jit(X, lv, o).weights, emulation)(
            jnp.asarray(X, jnp.float32), rank_levels(y, qid), opts)
    assert w.dtype == jnp.float32
    w = np.asarray(w, np.float64)
    g0 = ranksvm_fgh(np.zeros(X.shape[1]), X, y, qid, 0.1, np.zeros(X.shape[1]))[1]
    g = ranksvm_fgh(w, X, y, qid, 0.1, np.zeros(X.shape[1]))[1]
    within(np.linalg.norm(g) / np.linalg.norm(g0), 1e-3, "RankSVM gradient")


def test_kernel_matrix_far_from_zero_is_exact_on_the_diagonal():
    """Centred distances: features at 1e3 with differences of 1e-2 keep their kernel
    values (the expanded ``|a|^2 + |b|^2 - 2ab`` loses every digit there)."""
    rng = np.random.default_rng(0)
    X = 1e3 + 1e-2 * rng.standard_normal((50, 4))
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(1e3), jnp.asarray(X, jnp.float32)))
    assert K.dtype == np.float32 and np.all(np.diag(K) == 1.0)
    X32 = np.asarray(X, np.float32).astype(np.float64)
    ref = np.exp(-1e3 * ((X32[:, None] - X32[None]) ** 2).sum(-1))
    within(np.max(np.abs(K - ref)), C * EPS32, "kernel matrix")           # entries <= 1


def test_metrics_in_float32(problem):
    from reference import ndcg, pairwise_error
    y, qid = problem["y"], problem["qid"]
    f = problem["X"] @ problem["w"]
    f32 = jnp.asarray(f, jnp.float32)
    # exact pair counts: one rounding of their ratio; NDCG: a mean of per-query float32 sums
    pe = pairwise_error(f, y, qid)
    within(abs(float(rj.pairwise_error(f32, y, qid)) - pe), 2 * EPS32 * pe, "pairwise error")
    nd = ndcg(f, y, qid, k=10, ties="stable")
    within(abs(float(rj.ndcg(f32, y, qid, k=10)) - nd), 3 * EPS32 * nd, "NDCG")


def test_estimators_in_float32(problem):
    """``RankRLSCV`` as a GPU user calls it (numpy float64 inputs, x64 off): float32
    predictions; the linear model is the float64 closed form of the chosen λ on the columns
    standardised as the map does."""
    from rankjax.estimators import RankRLSCV
    X, y, qid, L = problem["X"], problem["y"], problem["qid"], problem["L"]
    est = RankRLSCV().fit(X, y, qid=qid)
    p = est.predict(X)
    assert p.dtype == np.float32
    Xs = X / X.std(axis=0)
    A = Xs.T @ L @ Xs + est.lam_ * np.eye(X.shape[1])
    ref = Xs @ np.linalg.solve(A, Xs.T @ L @ y)
    within(rel(p - p.mean(), ref - ref.mean()), C * EPS32 * np.linalg.cond(A), "RankRLSCV")
    import warnings
    fitted = []
    half = qid < np.unique(qid)[len(np.unique(qid)) // 2]          # the kernel fits on half
    for kw in (dict(kernel="gaussian"), dict(kernel="gaussian", basis=100)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", rj.UnresolvedLambdaWarning)   # the default grid: quiet
            fitted.append(RankRLSCV(**kw).fit(X[half], y[half], qid=qid[half]))
        p = fitted[-1].predict(X)
        assert p.dtype == np.float32 and np.all(np.isfinite(p))
        assert np.isfinite(fitted[-1].best_score_)
    # the exact kernel's smallest λ are below float32's floor: the default grid starts above
    # them (no NaN row in cv_results_), never chosen; a grid the user gives says so and keeps
    # them as NaN rows
    for f in fitted:
        assert np.all(np.isfinite(f.cv_results_["mean_test_score"]))
    r = fitted[0].cv_results_
    assert min(np.asarray(r["param_lam"])[np.asarray(r["param_kernel"]) == "gaussian"]) > min(
        RankRLSCV().lams)
    assert fitted[0].lam_ > 1e-3
    with pytest.warns(rj.UnresolvedLambdaWarning, match="below"):
        given = RankRLSCV(lams=[1e-3, 1.0], kernel="gaussian").fit(X[half], y[half],
                                                                   qid=qid[half])
    assert np.isnan(np.asarray(given.cv_results_["mean_test_score"])).any()


def test_pairwise_gp_in_float32():
    """The Gaussian pairwise GP's posterior (a cancellation ``K_d - V^T V``) against the
    float64 formula; variances are never negative."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 3))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 1e-6 * np.eye(30)
    head, tail = rng.integers(0, 30, 60), rng.integers(0, 30, 60)
    keep = head != tail
    head, tail = head[keep], tail[keep]
    diffs = X[head, 0] - X[tail, 0]
    noise = 1e-2
    A = np.zeros((len(head), 30))
    A[np.arange(len(head)), head], A[np.arange(len(head)), tail] = 1.0, -1.0
    Kd = A @ K @ A.T
    S = np.linalg.inv(Kd + noise * np.eye(len(head)))
    KA = K @ A.T
    mean_ref = KA @ S @ diffs
    var_ref = np.diag(K) - np.einsum("ij,ij->i", KA, KA @ S)
    gp = gp_pairwise_gaussian(jnp.asarray(K, jnp.float32), head, tail,
                                 jnp.asarray(diffs, jnp.float32), noise_var=noise)
    mean, var = rj.gp_predict(gp, jnp.asarray(K, jnp.float32), jnp.asarray(np.diag(K), jnp.float32))
    cond = np.linalg.cond(Kd + noise * np.eye(len(head)))
    within(rel(mean, mean_ref), C / 2 * EPS32 * cond, "GP mean")
    assert np.all(np.asarray(var) >= 0)
    within(np.max(np.abs(np.asarray(var, np.float64) - var_ref)) / np.max(np.diag(K)), C / 2 * EPS32 * cond,
           "GP variance")


AMPLIFICATION = {
    ("primal", "fit"): 15, ("primal", "path"): 20, ("primal", "holdout"): 15,
    ("primal", "leave_pair_out"): 300,
    ("dual", "fit"): 20, ("dual", "path"): 100, ("dual", "holdout"): 200,
    ("dual", "leave_pair_out"): 80,
    ("nystrom", "fit"): 500, ("nystrom", "path"): 500, ("nystrom", "holdout"): 2000,
}
"""The rounding each algorithm adds per unit of its system's condition
(:func:`registry.condition`), measured on the registry problem and set about 10x above the
largest ratio seen (``docs/float32_tests.md``): a direct solve a few eps, a path through one
``eigh`` tens, the hold-out's cancellation and the Nyström basis system hundreds."""


def check_float32_rule(entry, verb):
    """The precision rule for every solver (registry): with x64 off the verb works in
    float32, and each λ lane either agrees with the float64 reference within
    ``A eps32 κ(λ)`` (``κ`` the condition of the system the solver solves,
    :func:`registry.condition`; ``A`` its algorithm's :data:`AMPLIFICATION`) or its result
    code says why not."""
    X, y, qid = data()
    lams = np.atleast_1d(1.0 if verb == "fit" else LAMS)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", rj.UnresolvedLambdaWarning)
        sol, got, want = solve(entry, verb, X.astype(np.float32), y.astype(np.float32), qid,
                               1.0 if verb == "fit" else LAMS.astype(np.float32))
        codes = np.atleast_1d(np.asarray(sol.result))
    assert got.dtype == np.float32, (entry.name, verb, got.dtype)
    L = dense_laplacian(qid) if verb != "leave_pair_out" else dense_laplacian(
        np.zeros(len(y), int), normalized=False)
    amplification = AMPLIFICATION[(form(entry), verb)]
    got, want = got.reshape((lams.size, -1)), want.reshape((lams.size, -1))
    answered = 0
    for lane, lam in enumerate(lams):
        code = rj.RESULTS(int(codes[lane if codes.size > 1 else 0]))
        if code not in (rj.RESULTS.successful, rj.RESULTS.early_stopped):
            assert code in (rj.RESULTS.unresolved_lambda, rj.RESULTS.max_iterations_reached), code
            continue
        answered += 1
        bound = amplification * EPS32 * condition(entry, verb, X, L, lam)
        within(rel(got[lane], want[lane]), bound, f"registry {form(entry)} {verb}")
    assert answered, (entry.name, verb, "no λ of the grid is answered in float32")


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_every_solver_keeps_the_precision_rule(entry, verb):
    check_float32_rule(entry, verb)


FLOOR_CASES = {
    "dual-holdout": (lambda g: rj.Dual(rj.gaussian_kernel(g)), "holdout"),
    "nystrom-path": (lambda g: rj.Nystrom(rj.gaussian_kernel(g), 50), "path"),
    "falkon-fit": (lambda g: rj.Falkon(rj.gaussian_kernel(g), 50), "fit"),
}


@pytest.mark.parametrize("name", sorted(FLOOR_CASES))
def test_a_lane_below_the_float32_floor_never_hides_in_a_gradient(name):
    """``value_and_grad`` of a loss over a grid whose smallest λ float32 refuses (below the
    solver's floor: NaN, ``unresolved_lambda``): the loss is NaN and so is its gradient in
    γ and in the rows (issue 88: it was the finite gradient of the other lanes)."""
    make, verb = FLOOR_CASES[name]
    d = rj.make_ranking_data(20, num_features=5, seed=0)
    X, y = jnp.asarray(d.X, jnp.float32), jnp.asarray(d.y, jnp.float32)
    folds = rj.make_folds(rj.Problem(X, y, d.qid).graph)
    lams = jnp.asarray([1e-7, 1.0], jnp.float32)

    def lanes(gamma, rows):
        p = rj.Problem(rows, y, d.qid)
        if verb == "fit":
            return jax.vmap(lambda lam: rj.predict(rj.fit(p, make(gamma), lam=lam).value,
                                                   rows))(lams), None
        if verb == "path":
            s = rj.path(p, make(gamma), lams=lams)
            return rj.predict(s.value, rows), s.result
        s = rj.holdout(p, make(gamma), lams=lams, folds=folds)
        return s.value.predictions, s.result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred, codes = lanes(0.5, X)
        assert np.isnan(np.asarray(pred[0])).all() and np.isfinite(np.asarray(pred[1])).all()
        loss = lambda g, rows: jnp.sum((lanes(g, rows)[0] - y) ** 2)       # noqa: E731
        value, (dg, dX) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(0.5, X)
    assert np.isnan(float(value)) and np.isnan(float(dg)) and np.isnan(np.asarray(dX)).all()
    if codes is not None:
        assert np.asarray(codes).tolist() == [rj.RESULTS.unresolved_lambda, rj.RESULTS.successful]
