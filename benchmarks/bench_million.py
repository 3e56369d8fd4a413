"""Kernel RankRLS at a million rows on one machine: an MSLR-shaped generated set (136
features, 50-150 rows a query, a relevance with interactions a linear model cannot express,
10 relevant features beside 126 irrelevant ones, disjoint test queries), each learner in a
fresh process (its own peak RSS), all in the same run:

* ``linear``: ``RankRLSCV()`` (linear, exact leave-query-out, 13 λ);
* ``lightgbm``: LightGBM's ``LGBMRanker()`` at its defaults (when installed);
* ``nystrom``: ``RankRLSCV(kernel="gaussian", gammas=4, lams=13, basis=b)``: the exact
  leave-query-out of the Nyström model in row blocks (``K_mR`` never whole);
* ``ard``: ``RankRLSCV(kernel="gaussian", optimize=True, ard=True, basis=b)``: λ, γ and
  136 feature scales learned by the gradient of the exact hold-out on a whole-query
  subsample the plan sizes, the final model on every row;
* ``falkon``: ``rj.fit(problem, rj.Falkon(k, 4000), lam)`` and the closed-form Nyström
  model of the same basis (row blocks), the relative difference of their predictions;
* ``ard_rows`` (run it with ``--rows 100000``): the learned model with the gradient on the
  planned subsample against the gradient on every row, test NDCG@10 and seconds of each.

Each line: seconds, peak RSS (GB), test NDCG@10, and a floor at this machine's measured
float32 GEMM rate: ``m b^2`` flops per γ for the Nyström hold-out, one product with
``K_mR`` (``2 m b n`` flops) per FALKON iteration.

    python benchmarks/bench_million.py                     # 10^6 rows (about 35 min on 2 cores)
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

STEPS = ("linear", "lightgbm", "nystrom", "ard", "falkon", "ard_rows")
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


def step(name, a):
    """One learner in this process: prints its JSON line."""
    import jax
    import rankjax as rj
    from rankjax.estimators import RankRLSCV
    from _timing import device_name

    X, y, qid = make_million(a.rows, seed=0)
    Xt, yt, qt = make_million(a.test_rows, seed=1, first_qid=10**7)
    line = dict(name=f"million_{name}", device=device_name(), dtype="float32",
                shape=list(X.shape), queries=int(np.unique(qid).size))

    def ndcg(scores):
        return float(rj.ndcg(np.asarray(scores), yt, qt, k=10))

    t0 = time.perf_counter()
    if name == "linear":
        est = RankRLSCV().fit(X, y, qid)
        line.update(lam=est.lam_)
    elif name == "lightgbm":
        import lightgbm
        _, counts = np.unique(qid, return_counts=True)
        est = lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=counts)
    elif name == "nystrom":
        est = RankRLSCV(kernel="gaussian", gammas=list(a.gammas), basis=a.basis,
                        verbose=a.verbose).fit(X, y, qid)
        b = len(est.basis_)
        line.update(lam=est.lam_, gamma=est.gamma_, basis=a.basis, basis_rows=b, gammas=4,
                    lams=13, floor_flops=4 * X.shape[0] * b ** 2)       # m b^2 per γ
    elif name == "ard":
        est = RankRLSCV(kernel="gaussian", optimize=True, ard=True, basis=a.ard_basis,
                        verbose=a.verbose).fit(X, y, qid)
        from rankjax._core.segments import padded_size
        from rankjax.selection.select import tune_rows
        from rankjax.solvers.models import ScaledModel
        from rankjax.estimators.base import auto_basis_size
        b = int(padded_size(auto_basis_size(X.shape[0]) if a.ard_basis == "auto" else a.ard_basis))
        line.update(lam=est.lam_, gamma=est.gamma_, basis=a.ard_basis, subsample_rows=tune_rows(
            X.shape[0], b, 20, np.float32),
            learned=isinstance(est.model_, ScaledModel))
    elif name == "ard_rows":             # what the subsample costs: learned on u rows, then on m
        import rankjax.selection.select as sel
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
    print(json.dumps(line), flush=True)


MARK = ("<!-- million: start -->", "<!-- million: end -->")
LEARNERS = {"million_linear": "rankjax RankRLSCV(), linear",
            "million_lightgbm": "LightGBM LGBMRanker(), defaults",
            "million_nystrom": "rankjax RankRLSCV(kernel=\"gaussian\", gammas=4, lams=13, "
                               "basis={basis!r})",
            "million_ard": "rankjax RankRLSCV(kernel=\"gaussian\", optimize=True, ard=True, "
                           "basis={basis}), learned on {subsample_rows:,} rows",
            "million_falkon": "rankjax rj.fit(p, rj.Falkon(k, {basis}), lam={lam})"}


def table(lines):
    """The README table (markdown) of JSON lines of this script."""
    rate = next((ln["gemm_gflops"] for ln in lines if ln["name"] == "million_gemm"), None)
    out = ["| learner | rows | fit s | floor s | peak RSS GB | test NDCG@10 |",
           "| --- | --- | --- | --- | --- | --- |"]
    for ln in lines:
        if ln["name"] not in LEARNERS or "fit_s" not in ln:
            continue
        floor = ln.get("floor_s", "–")
        if ln["name"] == "million_nystrom" and rate:         # m b^2 per γ, 4 γ
            b = ln.get("basis_rows", ln["basis"])
            floor = round(4 * ln["shape"][0] * b ** 2 / (rate * 1e9), 1)
        elif "floor_flops" in ln and rate:
            floor = round(ln["floor_flops"] / (rate * 1e9), 1)
        extra = (f" (closed form {ln['closed_form_s']:.0f} s, predictions within "
                 f"{ln['rel_diff']:.1e})") if "rel_diff" in ln else ""
        out.append(f"| {LEARNERS[ln['name']].format(**ln)}{extra} | {ln['shape'][0]:,} | "
                   f"{ln['fit_s']:.1f} | {floor} | {ln['peak_rss_gb']:.2f} | "
                   f"{ln['ndcg10']:.4f} |")
    return "\n".join(out), rate


def rewrite(readme, lines):
    import pathlib
    import platform
    text = pathlib.Path(readme).read_text()
    if MARK[0] not in text or MARK[1] not in text:
        raise SystemExit(f"{readme} has no {MARK[0]} ... {MARK[1]} markers")
    head, rest = text.split(MARK[0], 1)
    _, tail = rest.split(MARK[1], 1)
    body, rate = table(lines)
    note = (f"{platform.machine()}, {os.cpu_count()} CPU cores, float32, measured float32 GEMM "
            f"rate {rate} GFLOP/s (the floor: `m b^2` flops per γ for the Nyström hold-out, one "
            "`2 m b n` product an iteration for FALKON); each learner in a fresh process; "
            "`python benchmarks/bench_million.py --readme README.md`")
    tmp = pathlib.Path(str(readme) + ".tmp")
    tmp.write_text(head + MARK[0] + f"\n{body}\n\n<sub>{note}.</sub>\n" + MARK[1] + tail)
    tmp.replace(readme)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--test-rows", type=int, default=100_000)
    ap.add_argument("--basis", type=lambda v: v if v == "auto" else int(v), default="auto",
                    help="of the γ grid: an int, or 'auto' (RankRLSCV's default)")
    ap.add_argument("--ard-basis", type=lambda v: v if v == "auto" else int(v), default="auto",
                    help="of the learned model: an int, or 'auto'")
    ap.add_argument("--gammas", type=float, nargs=4, default=(0.005, 0.01, 0.02, 0.04))
    ap.add_argument("--falkon-basis", type=int, default=4000)
    ap.add_argument("--falkon-gamma", type=float, default=0.01)
    ap.add_argument("--falkon-lam", type=float, default=1.0)
    ap.add_argument("--only", default=",".join(STEPS[:5]), help=",".join(STEPS))
    ap.add_argument("--full", action="store_true", help="10^6 rows whatever --rows (a GPU)")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--verbose", type=int, default=0)
    ap.add_argument("--readme", help="rewrite the table of this file from the run")
    ap.add_argument("--lines", nargs="*", help="JSON-line files of earlier runs for --readme "
                    "(no run)")
    a = ap.parse_args()
    if a.step:
        return step(a.step, a)
    if a.lines is not None:
        found = [json.loads(x) for f in a.lines for x in open(f) if x.startswith("{")]
        return rewrite(a.readme, found) if a.readme else print(table(found)[0])
    if a.full:
        a.rows = 1_000_000
    steps = a.only.split(",")
    if set(steps) - set(STEPS):
        ap.error(f"--only takes {','.join(STEPS)}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    rate = gemm_rate()
    print(json.dumps(dict(name="million_gemm", gemm_gflops=round(rate / 1e9, 1))), flush=True)
    args = [x for x in sys.argv[1:] if x not in ("--full",)]
    if a.readme:
        i = args.index("--readme")
        args = args[:i] + args[i + 2:]
    found = [dict(name="million_gemm", gemm_gflops=round(rate / 1e9, 1))]
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
        if "floor_flops" in line:
            line["floor_s"] = round(line["floor_flops"] / rate, 1)
        found.append(line)
        print(json.dumps(line), flush=True)
    if a.readme:
        rewrite(a.readme, found)


if __name__ == "__main__":
    main()
