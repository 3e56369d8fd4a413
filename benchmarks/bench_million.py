"""Kernel RankRLS at a million rows on one machine: an MSLR-shaped generated set (136
features, 50-150 rows a query, a relevance with interactions a linear model cannot express,
10 relevant features beside 126 irrelevant ones, disjoint test queries), each learner in a
fresh process (its own peak RSS), all in the same run:

* ``linear``: ``RankRLSCV()`` (linear, exact leave-query-out, 13 λ);
* ``lightgbm``: LightGBM's ``LGBMRanker()`` at its defaults (when installed);
* ``nystrom``: ``RankRLSCV(kernel="gaussian", gammas=4, lams=13, basis=b)``: the exact
  leave-query-out of the Nyström model in row blocks (``K_mR`` never whole), then one
  more warm hold-out of the chosen γ's 13 λ timed alone against its ``m b^2`` floor;
* ``ard``: ``RankRLSCV(kernel="gaussian", optimize=True, ard=True, basis=b)``: λ, γ and
  136 feature scales learned by the gradient of the exact hold-out on a whole-query
  subsample the plan sizes, the chosen point held out on every row;
* ``stages``: one γ's row-block hold-out (13 λ, the default basis) stage by stage, each
  against its own flop floor (the table of ``benchmarks/REPORT.md``);
* ``falkon``: ``rj.fit(problem, rj.Falkon(k, 4000), lam)`` and the closed-form Nyström
  model of the same basis (row blocks), the relative difference of their predictions;
* ``ard_rows`` (run it with ``--rows 100000``): the learned model with the gradient on the
  planned subsample against the gradient on every row, test NDCG@10 and seconds of each.

Each line: seconds, peak RSS (GB), test NDCG@10, the float32 GEMM rate measured in the
step's own process (4,096 x 2,048 x 2,048) and a floor at that rate: ``m b^2`` flops per γ
for the Nyström hold-out, one product with ``K_mR`` (``2 m b n`` flops) per FALKON
iteration. A run writes its lines to ``--save`` (committed: ``benchmarks/lines/million.jsonl``)
and the README block is written from saved lines alone (``--lines ... --readme``), byte
for byte the same on any machine (``tests/test_readme.py``).

    python benchmarks/bench_million.py --save benchmarks/lines/million.jsonl   # 10^6 rows (~30 min)
    python benchmarks/bench_million.py --lines benchmarks/lines/million.jsonl --readme docs/which_solver.md
    python benchmarks/bench_million.py --rows 100000       # a tenth
    python benchmarks/bench_million.py --full              # on a GPU: every step, 10^6 rows
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.blocks import add_arguments, from_lines, rewrite, save_lines  # noqa: E402
from lib.million import table  # noqa: E402

STEPS = ("linear", "lightgbm", "nystrom", "ard", "falkon", "stages", "ard_rows")
RELEVANT = 10


def make_million(rows, seed=0, features=136, first_qid=0):
    """``(X float32 [m, 136], y [m] grades 0-4, qid [m])``: queries of 50-150 rows until
    ``rows``; the relevance is a smooth function of three oblique directions of the first
    10 features (a sine, a product, a cosine: interactions no linear model expresses and
    axis-aligned trees approximate by many splits), 126 features irrelevant."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 151, rows // 100 + 10)
    sizes = sizes[:int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    qid = np.repeat(np.arange(first_qid, first_qid + sizes.size), sizes)
    m = qid.size
    X = rng.random((m, features), dtype=np.float32)
    W = np.random.default_rng(7).standard_normal((RELEVANT, 3)) / np.sqrt(RELEVANT)
    z = (X[:, :RELEVANT].astype(np.float64) - 0.5) @ W * 3
    s = (np.sin(2 * z[:, 0]) + z[:, 0] * z[:, 1] + np.cos(2 * z[:, 2])
         + 0.3 * rng.standard_normal(m))
    y = np.digitize(s, np.quantile(s, [0.5, 0.75, 0.9, 0.97])).astype(np.float32)
    return X, y, qid


def peak_rss_gb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)


def gemm_rate():
    """Measured float32 GEMM flop rate of this machine's default device (4096 x 2048 x 2048)."""
    import jax
    import jax.numpy as jnp
    a = jnp.ones((4096, 2048), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    f(a, a.T[:, :2048]).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(5):
        f(a, a.T[:, :2048]).block_until_ready()
    return 2 * 4096 * 2048 * 2048 * 5 / (time.perf_counter() - t0)


def _stages(X, y, qid, a, line):
    """One γ's row-block hold-out (13 λ, the default basis, γ 0.01), stage by stage: each
    stage timed (warm, median of 3) as the difference of cumulative programs, against its
    own flops at the step's GEMM rate."""
    import jax
    import jax.numpy as jnp
    import rankjax as rj
    from rankjax._core.linalg import spectral_filter
    from rankjax.estimators.defaults import auto_basis_size
    from rankjax.graphs.folds import each_slice
    from rankjax._core.backend import paths
    from rankjax._core.products import HI, tdot
    from rankjax.solvers import fold_batches as fb
    from rankjax.solvers.holdout import woodbury_rows
    from rankjax.solvers.nystrom_blocked import blocked_system, features
    from rankjax.solvers.ridge import wide_eigh
    from lib.timing import time_jitted
    m, n = X.shape
    L, rows = 13, fb.BATCH_ROWS
    p = rj.Problem(X, y, qid)
    b = auto_basis_size(m) if a.basis == "auto" else a.basis
    _, B = rj.Nystrom(rj.gaussian_kernel(0.01), b).take(np.asarray(X), pad=None)
    graph, Xd, yd = p.graph, jnp.asarray(X), jnp.asarray(y)
    folds = fb.batch_folds(rj.make_folds(graph), rows, L, b)
    lams = jnp.asarray(np.logspace(-4, 2, L), X.dtype)
    C = jax.jit(lambda B: B.factor())(B)
    padded = sum(int(np.size(i)) for i in folds.index)
    sq = sum(int(i.shape[0]) * int(i.shape[1]) ** 2 for i in folds.index)
    rate = line["gemm_gflops"] * 1e9

    def scan(update):
        return lambda: fb.fold_scan(folds, rows, lambda acc, i, k: acc + update(i, k), 0.0, L, b)

    block = lambda i, k: B.block(Xd[i.reshape(-1)]) * k.reshape(-1, 1)        # noqa: E731
    t = {}
    t["kernel"] = time_jitted(scan(lambda i, k: block(i, k).sum()))[1]
    t["features"] = time_jitted(scan(lambda i, k: features(block(i, k), C).sum()))[1]
    t["pass1"] = time_jitted(lambda: blocked_system(Xd, yd, graph, B, C, folds, rows, L))[1]
    G, rhs, _ = jax.jit(lambda: blocked_system(Xd, yd, graph, B, C, folds, rows, L))()
    t["eigh"] = time_jitted(wide_eigh, G)[1]
    eig, _ = jax.jit(wide_eigh)(G)
    D = spectral_filter(eig.values[None, :], lams[:, None])
    Dc = D * tdot(eig.vectors, rhs)[None]

    def pass2(part):
        def one(idx, mask):
            bs, P = idx.shape
            Pf = jnp.matmul(block(idx, mask), eig.vectors, precision=HI).reshape(bs, P, -1)
            if part == 0:
                return jnp.zeros((L, bs, P), X.dtype) + Pf.sum()
            Fu = jnp.einsum("fps,ls->flp", Pf, Dc, precision=HI)
            small = paths().row_block_small_solve            # as blocked_holdout
            fold = lambda i, k, pf, f: woodbury_rows(graph, i, k, pf, f, D, lams, yd,  # noqa: E731
                                                     by_segments=True, small_solve=small)
            res = (each_slice(fold, idx, mask, Pf, Fu) if paths().serial(P, small)
                   else jax.vmap(fold)(idx, mask, Pf, Fu))
            return jnp.moveaxis(res, 0, 1)
        return lambda: fb.fold_map(folds, rows, one, L, b, (), X.dtype)

    t["pass2_features"] = time_jitted(pass2(0))[1]
    t["pass2"] = time_jitted(pass2(1))[1]
    flops = {"kernel": 2 * padded * b * n, "trsm": padded * b * b,
             "gram": padded * b * b, "eigh": 4 * b ** 3, "pass2_features": 2 * padded * b * b
             + 2 * padded * b * n, "fold_systems": L * sq * b}
    stages = [("pass 1: K_UR (kernel)", t["kernel"], flops["kernel"]),
              ("pass 1: Φ_U = K_UR C^-T (triangular solve)", t["features"] - t["kernel"],
               flops["trsm"]),
              ("pass 1: B^T Φ_U and Φ^T L Φ (Gram, symmetric)", t["pass1"] - t["features"],
               flops["gram"]),
              ("eigh of b x b (float64)", t["eigh"], flops["eigh"]),
              ("pass 2: K_UR and K_UR (C^-T V)", t["pass2_features"], flops["pass2_features"]),
              ("pass 2: every λ's fold systems and solves (eq. 33-34)",
               t["pass2"] - t["pass2_features"], flops["fold_systems"])]
    out = []
    for what, sec, fl in stages:
        out.append(dict(name="million_stage", stage=what, s=round(sec, 3),
                        floor_s=round(fl / rate, 3), flops=float(fl)))
    line.update(basis_rows=b, padded_rows=padded, L=L, stages=out,
                total_s=round(t["pass1"] + t["eigh"] + t["pass2"], 3),
                floor_s=round(m * b * b / rate, 3))
    return line


def step(name, a):
    """One learner in this process: prints its JSON line."""
    import platform
    import jax
    import rankjax as rj
    import rankjax.selection.select as sel
    from rankjax.estimators import RankRLSCV
    from lib.timing import device_name

    X, y, qid = make_million(a.rows, seed=0)
    Xt, yt, qt = make_million(a.test_rows, seed=1, first_qid=10**7)
    line = dict(name=f"million_{name}", device=device_name(), dtype="float32",
                shape=list(X.shape), queries=int(np.unique(qid).size),
                machine=platform.machine(), cores=os.cpu_count(), jax=jax.__version__,
                gemm_gflops=round(gemm_rate() / 1e9, 1))

    def ndcg(scores):
        return float(rj.ndcg(np.asarray(scores), yt, qt, k=10))

    if name == "stages":
        print(json.dumps(_stages(X, y, qid, a, line)), flush=True)
        return
    t0 = time.perf_counter()
    if name == "linear":
        est = RankRLSCV().fit(X, y, qid)
        line.update(lam=est.lam_)
    elif name == "lightgbm":
        import lightgbm
        _, counts = np.unique(qid, return_counts=True)
        est = lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=counts)
        line.update(lightgbm=lightgbm.__version__)
    elif name == "nystrom":
        est = RankRLSCV(kernel="gaussian", gammas=list(a.gammas), basis=a.basis,
                        verbose=a.verbose).fit(X, y, qid)
        b = len(est.basis_)
        line.update(lam=est.lam_, gamma=est.gamma_, basis=a.basis, basis_rows=b, gammas=4,
                    lams=13, floor_flops=4 * X.shape[0] * b ** 2)       # m b^2 per γ
    elif name == "ard":
        if a.tune_work is not None:
            sel.TUNE_WORK = a.tune_work
        est = RankRLSCV(kernel="gaussian", optimize=True, ard=True, basis=a.ard_basis,
                        verbose=a.verbose).fit(X, y, qid)
        from rankjax._core.segments import padded_size
        from rankjax.solvers.models import ScaledModel
        line.update(lam=est.lam_, gamma=est.gamma_, basis=a.ard_basis,
                    basis_rows=len(est.basis_), best_score=est.best_score_,
                    tune_work=sel.TUNE_WORK,
                    subsample_rows=sel.tune_rows(X.shape[0], int(padded_size(
                        min(len(est.basis_), sel.TUNE_BASIS))), 20, np.float32),
                    learned=isinstance(est.model_, ScaledModel))
    elif name == "ard_rows":             # what the subsample costs: learned on u rows, then on m
        from rankjax._core.segments import padded_size
        u = sel.tune_rows(X.shape[0], int(padded_size(a.ard_basis)), 20, np.float32)
        for tag, work in (("subsample", sel.TUNE_WORK), ("all_rows", float("inf"))):
            sel.TUNE_WORK = work
            t1 = time.perf_counter()
            est = RankRLSCV(kernel="gaussian", optimize=True, ard=True, basis=a.ard_basis,
                            verbose=a.verbose).fit(X, y, qid)
            line.update({f"{tag}_s": round(time.perf_counter() - t1, 3),
                         f"{tag}_ndcg10": ndcg(est.predict(Xt))})
        line.update(subsample_rows=u, basis=a.ard_basis, peak_rss_gb=peak_rss_gb())
        print(json.dumps(line), flush=True)
        return
    elif name == "falkon":
        p = rj.Problem(X, y, qid)
        k = rj.gaussian_kernel(a.falkon_gamma)
        sol = rj.fit(p, rj.Falkon(k, a.falkon_basis), lam=a.falkon_lam)
        jax.block_until_ready(sol.value.coef)
        fit_s = time.perf_counter() - t0
        f = np.asarray(rj.predict(sol.value, Xt))
        line.update(fit_s=round(fit_s, 3), peak_rss_gb=peak_rss_gb(), ndcg10=ndcg(f),
                    iterations=int(sol.stats["iterations"]), basis=a.falkon_basis,
                    lam=a.falkon_lam, floor_flops=2 * X.shape[0] * a.falkon_basis * 136
                    * (int(sol.stats["iterations"]) + 1))     # K_mR once an iteration
        t1 = time.perf_counter()
        ref = rj.fit(p, rj.Nystrom(k, a.falkon_basis), lam=a.falkon_lam).value
        g = np.asarray(rj.predict(ref, Xt))
        line.update(closed_form_s=round(time.perf_counter() - t1, 3),
                    rel_diff=float(np.max(np.abs(f - g)) / np.max(np.abs(g))))
        print(json.dumps(line), flush=True)
        return
    fit_s = time.perf_counter() - t0
    line.update(fit_s=round(fit_s, 3), peak_rss_gb=peak_rss_gb(), ndcg10=ndcg(est.predict(Xt)))
    if name == "nystrom":           # one γ's hold-out alone (compiled by the fit), warm
        p = rj.Problem(X, y, qid)
        s = rj.Nystrom(rj.gaussian_kernel(est.gamma_), rj.Basis(rows=np.asarray(est.basis_)))
        lams = np.asarray(RankRLSCV().lams, np.float32)
        runs = []
        for _ in range(3):
            t1 = time.perf_counter()
            jax.block_until_ready(rj.holdout(p, s, lams=lams).value.predictions)
            runs.append(time.perf_counter() - t1)
        line.update(holdout_s=round(float(np.median(runs)), 3))
    print(json.dumps(line), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--basis", type=lambda v: v if v == "auto" else int(v), default="auto",
                    help="of the γ grid: an int, or 'auto' (RankRLSCV's default)")
    ap.add_argument("--ard-basis", type=lambda v: v if v == "auto" else int(v), default="auto",
                    help="of the learned model: an int, or 'auto'")
    ap.add_argument("--tune-work", type=float,
                    help="ard: select.TUNE_WORK for this run (default the library's)")
    ap.add_argument("--gammas", type=float, nargs=4, default=(0.005, 0.01, 0.02, 0.04))
    ap.add_argument("--falkon-basis", type=int, default=4000)
    ap.add_argument("--falkon-gamma", type=float, default=0.01)
    ap.add_argument("--falkon-lam", type=float, default=1.0)
    ap.add_argument("--only", default=",".join(STEPS[:6]), help=",".join(STEPS))
    ap.add_argument("--full", action="store_true", help="10^6 rows whatever --rows (a GPU)")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--verbose", type=int, default=0)
    add_arguments(ap, "million")
    a = ap.parse_args()
    if a.step:
        return step(a.step, a)
    if from_lines(a, "million", table):
        return
    if a.full:
        a.rows = 1_000_000
    steps = a.only.split(",")
    if set(steps) - set(STEPS):
        ap.error(f"--only takes {','.join(STEPS)}")
    args = [x for x in sys.argv[1:] if x not in ("--full",)]
    for flag in ("--readme", "--save"):
        if flag in args:
            i = args.index(flag)
            args = args[:i] + args[i + 2:]
    found = []
    for s in steps:
        if s == "lightgbm":
            try:
                import lightgbm  # noqa: F401
            except ImportError:
                print(json.dumps(dict(name="million_lightgbm", skipped="lightgbm not installed")))
                continue
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--step", s] + args
                             + ["--rows", str(a.rows)], capture_output=True, text=True)
        lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
        if out.returncode or not lines:
            print(json.dumps(dict(name=f"million_{s}", error=(out.stderr.strip().splitlines()
                                                               or ["no output"])[-1])), flush=True)
            continue
        line = json.loads(lines[-1])
        found.append(line)
        print(json.dumps(line), flush=True)
    if a.save:
        save_lines(a.save, found)
    if a.readme:
        rewrite(a.readme, "million", table(found))


if __name__ == "__main__":
    main()
