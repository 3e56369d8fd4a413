"""Every hot path against its floor (issue 31). Prints one JSON line per measurement.

For each path: the library's warm time and, in the same process and interleaved with it,
the time of the operation that bounds it on this machine (the *floor*), and their ratio
``run_s / floor_s``. The floors:

  primal, primal_path   numpy's ``X.T @ X`` of the same matrix (OpenBLAS ``syrk``); the
                        line also gives XLA's own ``X^T X`` (``xla_gram_s``)
  gram_wide             numpy's ``X.T @ X`` of a 12,272 x 2,048 Nyström-shaped block
  lqo_primal            the product count of leave-query-out (per λ and query
                        ``|U|^2 n + |U|^3 / 3`` multiply-adds) at the GEMM rate measured here
  dual, dual_path       one Cholesky / one ``eigh`` of the m x m matrix (scipy, LAPACK)
  lqo_dual, lpo_dual    one ``eigh`` of the m x m matrix (scipy)
  cg                    scipy's CSR ``X v`` and ``X^T u`` times the iterations run
  stream                reading the same ``.npy`` file with numpy plus numpy's ``X^T X``
  falkon                numpy's m x b kernel block once plus ``K v`` and ``K^T u`` per iteration
  ndcg                  one numpy sort of the scores by (query, score)
  fit_*                 a fixed numpy workload (sorting 10^6 floats), a unit of the machine's
                        speed: the warm RankRLSCV fits (linear, kernel, Nyström, optimize=True)

Timing: compile apart, median of >= 3 warm runs with ``block_until_ready``, library and
floor runs interleaved so that a noisy moment hits both; ``ratio`` is the median of the
per-pair ratios (``run_s / floor_s`` where a path is timed once). Every line carries an
accuracy check against an independent numpy/scipy computation.

    python benchmarks/bench_floor.py                 # every path (about 10 minutes, 2-core CPU)
    python benchmarks/bench_floor.py --only primal,gram_wide
    python benchmarks/bench_floor.py --quick         # the guard's subset (benchmarks/guard.py)
"""
import argparse
import inspect
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import rankjax as rj  # noqa: E402  (before scipy.linalg: rankjax's OpenBLAS setting)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg as sla  # noqa: E402

from lib.timing import emit  # noqa: E402


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def paired(lib, floor, repeats):
    """``(lib_s, floor_s, ratio)``: medians of interleaved warm runs (one warm-up each) and
    the median of the per-pair ratios (robust to a machine whose speed drifts during the
    run, as a shared one's does)."""
    jax.block_until_ready(lib())
    floor()
    a, b = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(lib())
        a.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        floor()
        b.append(time.perf_counter() - t0)
    _best[:] = [min(a) / min(b)]
    return statistics.median(a), statistics.median(b), statistics.median(x / y for x, y in zip(a, b))


_best = []
"""The last :func:`paired` run's best ratio (fastest library run over fastest floor run), for
the next :func:`report` line: timings on a shared CPU are bimodal (the same program took 0.17
or 0.235 s in alternate processes), and the guard compares the best of each side."""


def first_call(fn):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def report(path, dtype, shape, lib_s, floor_s, floor, compile_s, graph=None, ratio=None, **extra):
    """Prints the JSON line; returns ``(key, ratio)``, the key naming path, dtype, shape and
    graph (``benchmarks/guard.py`` compares ratios by key)."""
    dtype = np.dtype(dtype).name
    key = "/".join([path, dtype, "x".join(map(str, shape))] + ([graph] if graph else []))
    ratio = lib_s / floor_s if ratio is None else ratio
    if _best:
        extra.setdefault("ratio_best", round(_best.pop(), 3))
    emit(name=f"floor:{path}", path=path, dtype=dtype, shape=shape, graph=graph,
         compile_s=compile_s, run_s=lib_s, floor=floor, floor_s=floor_s,
         ratio=round(ratio, 3), peak_rss_mb=peak_rss_mb(),
         key=key, **extra)
    return key, ratio


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# ----------------------------------------------------------------------------- data

def tall(m, n, dtype, seed=0, rows_per_query=100):
    """LETOR-shaped dense rows in [0, 1), graded labels, queries of ~rows_per_query rows."""
    rng = np.random.default_rng(seed)
    X = rng.random((m, n), dtype=np.float32 if dtype == np.float32 else np.float64)
    y = rng.integers(0, 5, m).astype(dtype)
    qid = np.sort(rng.integers(0, max(2, m // rows_per_query), m))
    return X, y, qid


def normal_equations_numpy(X, y, qid):
    """Brute-force twin in float64: ``Z = S X`` by numpy (rows centred within their query),
    ``Z^T Z``, ``Z^T S y``."""
    order = np.argsort(qid, kind="stable")
    q = np.asarray(qid)[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    counts = np.diff(np.r_[starts, q.size])
    Z = np.asarray(X, np.float64)[order]
    Z -= np.repeat(np.add.reduceat(Z, starts) / counts[:, None], counts, axis=0)
    t = np.asarray(y, np.float64)[order]
    t = t - np.repeat(np.add.reduceat(t, starts) / counts, counts)
    return Z.T @ Z, Z.T @ t


# ----------------------------------------------------------------------------- paths

LAMS31 = np.logspace(-3, 3, 31)


def bench_primal(m, n, dtype, graphs=("query", "global"), repeats=7, path=True):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    X, y, qid = tall(m, n, dtype)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    xla_gram = jax.jit(lambda Z: jax.lax.dot_general(Z, Z, (((0,), (0,)), ((), ())),
                                                     precision=jax.lax.Precision.HIGHEST))
    floor = lambda: X.T @ X                                      # noqa: E731
    xla_s = paired(lambda: xla_gram(Xj), floor, 3)[0]
    out = []
    for kind in graphs:
        g = rj.query_graph(qid) if kind == "query" else rj.global_graph(m)
        G, b = normal_equations_numpy(X, y, qid if kind == "query" else np.zeros(m))
        if kind == "global":                       # unnormalized: L = m I - 1 1^T = m S^2
            G, b = m * G, m * b
        w_ref = {lam: np.linalg.solve(G + lam * np.eye(n), b) for lam in (1.0,)}
        one = lambda: rj.fit(rj.Problem(Xj, yj, g), rj.Primal(), lam=1.0).value.weights          # noqa: E731
        c = first_call(one)
        lib, fl, ratio = paired(one, floor, repeats)
        acc = rel(one(), w_ref[1.0])
        out.append(report("primal", dtype, [m, n], lib, fl, "numpy X.T @ X", c, ratio=ratio, graph=kind,
                          xla_gram_s=xla_s, ratio_to_xla_gram=round(lib / xla_s, 3),
                          rel_err_weights=acc))
        if path:
            lams = jnp.asarray(LAMS31, dtype)
            many = lambda: rj.path(rj.Problem(Xj, yj, g), rj.Primal(), lams=lams).value.weights  # noqa: E731
            c = first_call(many)
            lib, fl, ratio = paired(many, floor, repeats)
            W = np.asarray(many())
            acc = rel(W[15], np.linalg.solve(G + LAMS31[15] * np.eye(n), b))
            out.append(report("primal_path", dtype, [m, n], lib, fl, "numpy X.T @ X", c, ratio=ratio,
                              graph=kind, lambdas=len(LAMS31), xla_gram_s=xla_s,
                              ratio_to_xla_gram=round(lib / xla_s, 3), rel_err_weights=acc))
    return out


def bench_gram_wide(m, n, dtype, repeats=5):
    from rankjax._core.linalg import gram
    jax.config.update("jax_enable_x64", dtype == np.float64)
    X = np.random.default_rng(1).random((m, n)).astype(dtype)
    Xj = jnp.asarray(X)
    f = jax.jit(gram)
    c = first_call(lambda: f(Xj))
    lib, fl, ratio = paired(lambda: f(Xj), lambda: X.T @ X, repeats)
    ref = X.astype(np.float64).T @ X.astype(np.float64)
    return [report("gram_wide", dtype, [m, n], lib, fl, "numpy X.T @ X", c, ratio=ratio,
                   rel_err=rel(f(Xj), ref))]


def gemm_rate(dtype, size=1024):
    """Multiply-adds per second of numpy's square GEMM here (median of 5)."""
    A = np.random.default_rng(0).random((size, size)).astype(dtype)
    A @ A
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        A @ A
        ts.append(time.perf_counter() - t0)
    return size ** 3 / statistics.median(ts)


def bench_lqo_primal(scale, dtype, repeats=3):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    m, n, Q = int(2_270_296 * scale), 136, max(2, int(18_919 * scale))
    rng = np.random.default_rng(0)
    qid = np.sort(rng.integers(0, Q, m))
    X = jnp.asarray(rng.random((m, n), dtype=np.float32), dtype)
    y = jnp.asarray(rng.integers(0, 5, m), dtype)
    g = rj.query_graph(qid)
    folds = rj.make_folds(g)
    lams = jnp.asarray(np.logspace(-2, 3, 20), dtype)
    L = lams.shape[0]
    sizes = np.bincount(np.unique(qid, return_inverse=True)[1]).astype(np.float64)
    madds = float(L * np.sum(sizes ** 2 * n + sizes ** 3 / 3))
    rate = gemm_rate(dtype)
    fn = jax.jit(
        lambda X, y, g, f, l: rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=l, folds=f).value.predictions
    )
    c = first_call(lambda: fn(X, y, g, folds, lams))
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(X, y, g, folds, lams))
        runs.append(time.perf_counter() - t0)
    lib = statistics.median(runs)
    _best[:] = [min(runs) / (madds / rate)]
    # accuracy: one query's hold-out prediction against a refit without it (numpy, float64)
    Xn, yn = np.asarray(X, np.float64), np.asarray(y, np.float64)
    q0 = qid == qid[0]
    G, b = normal_equations_numpy(Xn[~q0], yn[~q0], qid[~q0])
    w = np.linalg.solve(G + float(lams[5]) * np.eye(n), b)
    acc = rel(np.asarray(out)[5][q0], Xn[q0] @ w)
    return [report("lqo_primal", dtype, [m, n], lib, madds / rate, "product count at numpy GEMM rate",
                   c, queries=int(g.num_queries), lambdas=L, multiply_adds=madds,
                   gemm_rate_gmadds=round(rate / 1e9, 2), rel_err_one_query=acc)]


def kernel_data(m, dtype, queries):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    rng = np.random.default_rng(2)
    X = jnp.asarray(rng.standard_normal((m, 20)), dtype)
    y = jnp.asarray(rng.integers(0, 5, m), dtype)
    qid = np.repeat(np.arange(queries), -(-m // queries))[:m]
    K = jax.jit(lambda X: rj.kernel_matrix(rj.gaussian_kernel(0.05), X))(X)
    return K, y, qid, np.asarray(K, np.float64)


def bench_dual(m, dtype, repeats=3):
    K, y, qid, Kn = kernel_data(m, dtype, m // 20)
    g = rj.query_graph(qid)
    Ln = np.asarray(rj.laplacian_dense(g), np.float64)
    Kd = np.asarray(K)
    out = []
    one = lambda: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=1.0).value.coef                      # noqa: E731
    c = first_call(one)
    lib, fl, ratio = paired(one, lambda: sla.cho_factor(Kd + np.eye(m)), repeats)
    A_ref = np.linalg.solve(Ln @ Kn + np.eye(m), Ln @ np.asarray(y, np.float64))
    out.append(report("dual", dtype, [m, m], lib, fl, "scipy cho_factor (m x m)", c, ratio=ratio,
                      rel_err_coef=rel(one(), A_ref)))
    lams = jnp.asarray(np.logspace(-2, 2, 9), dtype)
    many = lambda: rj.path(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=lams).value.coef               # noqa: E731
    c = first_call(many)
    lib, fl, ratio = paired(many, lambda: sla.eigh(Kd), repeats)
    A_ref = np.linalg.solve(Ln @ Kn + 1.0 * np.eye(m), Ln @ np.asarray(y, np.float64))
    out.append(report("dual_path", dtype, [m, m], lib, fl, "scipy eigh (m x m)", c, ratio=ratio, lambdas=9,
                      rel_err_coef=rel(np.asarray(many())[4], A_ref)))
    return out


def bench_lqo_dual(m, dtype, repeats=3):
    K, y, qid, Kn = kernel_data(m, dtype, m // 20)
    g = rj.query_graph(qid)
    folds = rj.make_folds(g)
    lams = jnp.asarray(np.logspace(-2, 3, 20), dtype)
    fn = lambda: (
        rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=lams, folds=folds).value.predictions
    )  # noqa: E731
    c = first_call(fn)
    lib, fl, ratio = paired(fn, lambda: sla.eigh(np.asarray(K)), repeats)
    # accuracy: the first query held out, refit on the rest (numpy, float64)
    q0 = qid == qid[0]
    gr = rj.query_graph(qid[~q0])
    Lr = np.asarray(rj.laplacian_dense(gr), np.float64)
    Kr = Kn[np.ix_(~q0, ~q0)]
    A = np.linalg.solve(Lr @ Kr + lams[5].item() * np.eye(Kr.shape[0]), Lr @ np.asarray(y, np.float64)[~q0])
    acc = rel(np.asarray(fn())[5][q0], Kn[np.ix_(q0, ~q0)] @ A)
    return [report("lqo_dual", dtype, [m, m], lib, fl, "scipy eigh (m x m)", c, ratio=ratio, lambdas=20,
                   rel_err_one_query=acc)]


def bench_lpo_dual(m, dtype, repeats=3):
    K, y, qid, Kn = kernel_data(m, dtype, 1)
    yn = np.asarray(y)
    pairs = jnp.asarray(rj.differing_pairs(yn))
    lams = jnp.asarray(np.logspace(-2, 3, 20), dtype)
    fn = lambda: rj.holdout(rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True), rj.Dual(),
                            lams=lams, folds=rj.LeavePairOut(pairs)).value.predictions      # noqa: E731
    c = first_call(fn)
    lib, fl, ratio = paired(fn, lambda: sla.eigh(np.asarray(K)), repeats)
    # accuracy: the first pair left out, refit with the complete unnormalized graph (numpy)
    i, j = np.asarray(pairs[0])
    keep = np.ones(m, bool)
    keep[[i, j]] = False
    mk = keep.sum()
    Lr = mk * np.eye(mk) - np.ones((mk, mk))
    A = np.linalg.solve(Lr @ Kn[np.ix_(keep, keep)] + lams[5].item() * np.eye(mk),
                        Lr @ np.asarray(y, np.float64)[keep])
    ref = Kn[np.ix_([i, j], keep)] @ A
    acc = rel(np.asarray(fn())[5, 0], ref)
    return [report("lpo_dual", dtype, [m, m], lib, fl, "scipy eigh (m x m)", c, ratio=ratio, lambdas=20,
                   pairs=int(pairs.shape[0]), rel_err_first_pair=acc)]


def bench_cg(rows, dtype, iters=50, repeats=3):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    d = rj.make_sparse_ranking_data(rows, rows // 2, nnz_per_row=75, num_queries=rows // 20, levels=5,
                                    dtype=dtype)
    X, y = d.X, d.y.astype(dtype)
    g = rj.query_graph(d.qid)
    C = rj.to_csr(X)
    yj = jnp.asarray(y)
    opts = rj.CG(tol=0.0, max_iter=iters)
    fn = lambda: rj.fit(rj.Problem(C, yj, g), opts, lam=1.0).weights        # noqa: E731
    c = first_call(fn)
    XT = X.T.tocsr()
    v, u = np.ones(X.shape[1], dtype), np.ones(X.shape[0], dtype)

    def floor():
        for _ in range(iters):
            XT @ (X @ v)
        return u
    lib, fl, ratio = paired(fn, floor, repeats)
    res = rj.fit(rj.Problem(C, yj, g), opts, lam=1.0)
    return [report("cg", dtype, list(X.shape), lib, fl, f"scipy CSR X v + X^T u x {iters}", c, ratio=ratio,
                   nnz=int(X.nnz), iterations=int(res.iterations),
                   final_residual=float(np.asarray(res.residual_history)[int(res.iterations)]))]


def bench_stream(rows, n=136, repeats=3):
    jax.config.update("jax_enable_x64", False)
    X, y, qid = tall(rows, n, np.float32, seed=3)
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, f) for f in ("X.npy", "y.npy", "q.npy")]
        for p, a in zip(paths, (X, y, qid.astype(np.int32))):
            np.save(p, a)
        del X
        lams = np.logspace(-2, 2, 9)
        fn = lambda: rj.path(rj.scale.stream(rj.io.iter_npy(*paths, chunk_rows=1 << 18)),  # noqa: E731
                             rj.Primal(), lams=lams).value.weights

        def floor():
            A = np.load(paths[0])
            return A.T @ A
        c = first_call(fn)
        lib, fl, ratio = paired(fn, floor, repeats)
        A = np.load(paths[0])
        G, b = normal_equations_numpy(A, y, qid)
        acc = rel(np.asarray(fn())[4], np.linalg.solve(G + lams[4] * np.eye(n), b))
    return [report("stream", np.float32, [rows, n], lib, fl, "numpy np.load + X.T @ X", c, ratio=ratio,
                   chunk_rows=1 << 18, rel_err_weights=acc)]


def bench_falkon(rows, basis, dtype, iters=20, repeats=3):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    X, y, qid = tall(rows, 50, dtype, seed=4, rows_per_query=20)
    g = rj.query_graph(qid)
    idx = np.random.default_rng(0).choice(rows, basis, replace=False)
    kern = rj.gaussian_kernel(0.02)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    fn = lambda: rj.fit(rj.Problem(Xj, yj, g), rj.Falkon(kern, idx, options=rj.CG(tol=0.0, max_iter=iters)),
                        lam=1.0).value.coef
    c = first_call(fn)
    XR = X[idx]
    v, u = np.ones(basis, dtype), np.ones(rows, dtype)

    def floor():
        sq = (X * X).sum(1)[:, None] + (XR * XR).sum(1)[None, :] - 2 * X @ XR.T
        K = np.exp(-0.02 * sq)
        for _ in range(iters):
            K.T @ (K @ v)
        return u
    lib, fl, ratio = paired(fn, floor, repeats)
    ref = rj.path(rj.Problem(Xj, yj, g), rj.Nystrom(kern, idx), lams=[1.0]).value
    f_ref = np.asarray(rj.predict(ref, Xj))[0]
    f = np.asarray(
        rj.predict(
            rj.fit(
                rj.Problem(Xj, yj, g), rj.Falkon(kern, idx, options=rj.CG(tol=0.0, max_iter=iters)), lam=1.0
            ),
            Xj,
        )
    )
    return [report("falkon", dtype, [rows, 50], lib, fl,
                   f"numpy m x b kernel block + K v, K^T u x {iters}", c, ratio=ratio, basis=basis,
                   iterations=iters, rel_to_closed_form=rel(f, f_ref))]


def bench_ndcg(rows, dtype, repeats=5):
    jax.config.update("jax_enable_x64", dtype == np.float64)
    rng = np.random.default_rng(5)
    qid = np.sort(rng.integers(0, rows // 100, rows)).astype(np.int32)
    s = rng.standard_normal(rows).astype(dtype)
    y = rng.integers(0, 5, rows).astype(dtype)
    seg = rj.segment_ids(qid)
    sj, yj = jnp.asarray(s), jnp.asarray(y)
    fn = lambda: rj.ndcg(sj, yj, seg, k=10)                                       # noqa: E731
    c = first_call(fn)
    lib, fl, ratio = paired(fn, lambda: np.lexsort((-s, qid)), repeats)
    return [report("ndcg", dtype, [rows], lib, fl, "numpy lexsort (query, -score)", c, ratio=ratio,
                   queries=int(seg.num_queries), ndcg10=float(fn()))]


FITS = {"linear": {}, "kernel": {"kernel": "gaussian"}, "nystrom": {"kernel": "gaussian", "basis": 300},
        "optimize": {"kernel": "gaussian", "basis": 300, "optimize": True}}
PINNED = {"feature_map": None, "gamma": "scale"}
"""The warm fits on the features as given at scikit-learn's γ: the same computation in every
tree since the feature maps' change of defaults (issue 74), so that the guard compares speed
with speed (the default map's own cost is the first answer's: bench_first_answer.py)."""


def bench_fit(kind, queries=100, repeats=3):
    """A small ``RankRLSCV`` fit of each kind (float64, about 2,500 rows x 20), warm; its
    floor is a fixed single-threaded numpy workload (sorting 10^6 floats) timed
    interleaved, a unit of this machine's speed at that moment, so a shared machine's drift
    cancels (a multithreaded ``eigh`` of 500 x 500 varied 0.021-0.035 s between processes
    and moved the ratio of an unchanged fit by 1.4x)."""
    from rankjax.estimators import RankRLSCV
    jax.config.update("jax_enable_x64", True)
    d = rj.make_ranking_data(queries, num_features=20, seed=0)
    X, y, qid = np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)
    u = np.random.default_rng(0).random(1_000_000)
    takes = inspect.signature(RankRLSCV).parameters         # a base older than the option
    est = RankRLSCV(**FITS[kind], **{k: v for k, v in PINNED.items() if k in takes
                                     and (k != "gamma" or "kernel" in FITS[kind])})
    fit = lambda: est.fit(X, y, qid=qid).model_                                  # noqa: E731
    c = first_call(fit)
    lib, fl, ratio = paired(fit, lambda: np.sort(u), repeats)
    return [report(f"fit_{kind}", np.float64, list(X.shape), lib, fl, "numpy sort of 10^6 floats", c,
                   ratio=ratio, lam=float(est.lam_), cv_ndcg=float(est.best_score_))]


# ----------------------------------------------------------------------------- runs

def full():
    f32, f64 = np.float32, np.float64
    return {
        "primal": lambda: (bench_primal(200_000, 136, f64) + bench_primal(200_000, 136, f32)
                           + bench_primal(2_000_000, 136, f32, graphs=("query",), repeats=3)),
        "gram_wide": lambda: bench_gram_wide(12_272, 2_048, f64) + bench_gram_wide(12_272, 2_048, f32),
        "lqo_primal": lambda: bench_lqo_primal(0.1, f32) + bench_lqo_primal(0.1, f64),
        "dual": lambda: bench_dual(3_000, f64),
        "lqo_dual": lambda: bench_lqo_dual(3_000, f64),
        "lpo_dual": lambda: bench_lpo_dual(1_000, f64),
        "cg": lambda: bench_cg(100_000, f32),
        "stream": lambda: bench_stream(2_000_000),
        "falkon": lambda: bench_falkon(100_000, 2_000, f64),
        "ndcg": lambda: bench_ndcg(2_000_000, f32),
        **{f"fit_{k}": (lambda k=k: bench_fit(k)) for k in FITS},
    }


def quick():
    """The guard's subset (about 30 s on the 2-core CPU, compile included; the global graph
    shares the query graph's code path and is left to the full run)."""
    f32, f64 = np.float32, np.float64
    return {
        "primal": lambda: (bench_primal(200_000, 136, f64, graphs=("query",), repeats=7)
                           + bench_primal(600_000, 136, f32, graphs=("query",), repeats=5)),
        "gram_wide": lambda: bench_gram_wide(6_000, 1_024, f64, repeats=5),
        "lqo_primal": lambda: bench_lqo_primal(0.01, f64, repeats=3),
        "dual": lambda: bench_dual(1_500, f64, repeats=5),
        "ndcg": lambda: bench_ndcg(500_000, f32, repeats=7),
        **{f"fit_{k}": (lambda k=k: bench_fit(k)) for k in FITS},
    }


def run(selected, only=None):
    results = []
    for name, fn in selected.items():
        if only and name not in only:
            continue
        results.extend(fn())
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated paths: " + ",".join(full()))
    ap.add_argument("--quick", action="store_true", help="the guard's subset")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    run(quick() if a.quick else full(), only)


if __name__ == "__main__":
    main()
