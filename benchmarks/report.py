"""Writes benchmarks/REPORT.md and its plots (benchmarks/report/*.png) from one run of
every benchmark:

    python benchmarks/report.py            # about 25 minutes on a 2-core CPU

Each job below runs as a subprocess of the same Python; its JSON lines are kept in
benchmarks/report/results.jsonl (with the job's command line and wall time) and every
figure of the report is read from them. ``--full`` runs the benchmarks at their own
(paper-scale) defaults, for an accelerator; ``--only KEY,...``, ``--out DIR`` and
``--render-only`` (rewrite REPORT.md from the saved lines of the last run) are for working
on the report (a partial run says so at the top).
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

from lib import million
from lib.registry import JOBS

HERE = pathlib.Path(__file__).resolve().parent


BOUNDS = {
    "primal": "XLA:CPU has no symmetric rank-k product: its X^T X does the full GEMM, twice "
              "numpy's syrk flops (see ratio_to_xla_gram: the rest is one pass of segment sums "
              "and X^T L y). Per CPU: on the AMD EPYC (Zen 4) XLA's GEMM runs at about numpy's "
              "GEMM rate and the path is 1.5-1.8x the syrk; on an Intel Xeon (OpenBLAS "
              "SkylakeX: syrk 0.048 s, GEMM 0.081 s at 200,000 x 136) XLA's GEMM is itself "
              "about 1.7x OpenBLAS's, so the path is 2.9-3.1x the syrk there (docs/design.md: "
              "the alternatives tried)",
    "primal_path": "as primal (one 136 x 136 eigh instead of a Cholesky)",
    "gram_wide": "the plain product after one transpose (the Nyström block)",
    "lqo_primal": "the floor counts |U|^2 n + |U|^3/3 per query and λ at numpy's large-GEMM "
                  "rate; folds are padded to their bucket (up to 25 % more rows, (1.25)^3 in "
                  "the |U|^3 term), the fold systems are inverted (|U|^3 rather than a "
                  "Cholesky's |U|^3/3, in batched products: no batched LAPACK on the CPU) and "
                  "small batched products run below the large-GEMM rate",
    "dual": "forming S K S (two passes over m^2), the Cholesky, two triangular solves and the "
            "finite-factor check beside one bare LAPACK Cholesky",
    "dual_path": "one eigh (LAPACK's): at the floor",
    "lqo_dual": "one eigh of S K S and the fold solves: at the floor",
    "lpo_dual": "beside the one eigh, every λ needs the hat matrix V diag(f(Γ, λ)) V^T at the "
                "pairs (m^3 multiply-adds per λ: 20 x 10^9 at m = 1,000)",
    "cg": "two sparse products per iteration (CSR, XLA's gather and segment sum) plus O(m) "
          "segment work and the validation criterion per iteration",
    "stream": "per chunk: the query ids remapped and the graph built on the host, the rows "
              "padded to a power of two (a copy), one transfer and one Gram; the floor reads "
              "the file from the page cache (its time varies 2x between runs)",
    "falkon": "per iteration K v and K^T u over the kept m x b block, and the preconditioner",
    "ndcg": "two sorts (by score for DCG, by label for the ideal DCG) against the floor's one",
}
"""What bounds each path of the floor table (the figures come from the run)."""


def run_jobs(keys, full, out):
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, issue, title, cpu_args, full_args in JOBS:
            if key not in keys:
                continue
            argv = full_args if full else cpu_args
            args = [a.replace("{tmp}", tmp) for a in argv]
            shown = "python benchmarks/" + " ".join(a.replace("{tmp}", "TMP") for a in argv)
            print(f"[report] {shown}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, *args], cwd=HERE, capture_output=True,
                               text=True)
            lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
            err = p.stderr.strip().splitlines()[-1] if p.returncode and p.stderr.strip() else ""
            results.append({"key": key, "issue": issue, "title": title, "command": shown,
                            "wall_s": round(time.perf_counter() - t0, 1),
                            "returncode": p.returncode, "error": err, "lines": lines})
    path = out / "report" / "results.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    if set(keys) != {k for k, *_ in JOBS} and path.exists():     # a partial run replaces its jobs
        done = {r["key"] for r in results}
        old = [json.loads(x) for x in path.read_text().splitlines()]
        results = [r for r in old if r["key"] not in done] + results
        order = [k for k, *_ in JOBS]
        results.sort(key=lambda r: order.index(r["key"]) if r["key"] in order else len(order))
    write_atomic(path, "".join(json.dumps(r) + "\n" for r in results))
    return results


def write_atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --- formatting ------------------------------------------------------------------------

def fmt(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
            return f"{v:.2e}"
        return f"{v:.4g}" if abs(v) >= 1 else f"{v:.4f}"
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return str(v).replace("|", "\\|")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def generic(lines, skip=("device",)):
    """Every line of a job as one table: the union of the keys (short lists only)."""
    keys = []
    for ln in lines:
        for k, v in ln.items():
            if k not in keys and k not in skip and not (isinstance(v, list) and (
                    len(v) > 8 or any(isinstance(x, list) for x in v))):
                keys.append(k)
    return table(keys, [[ln.get(k, "") for k in keys] for ln in lines])


def million_summary(lines):
    """The README's million table (every learner, its own GEMM rate) and the row-block
    hold-out stage by stage against each stage's floor (``bench_million.py``)."""
    return (million.table(lines) + "\n\nThe row-block Nyström hold-out of one γ, stage "
            "by stage:\n\n" + million.stage_table(lines) + "\n")


def mq2008_summary(lines):
    """Mean test figures over the folds per learner, best NDCG@10 first."""
    rows = [ln for ln in lines if ln.get("name") == "mq2008"]
    keys = ["ndcg1_zero", "ndcg5_zero", "ndcg10_zero", "map_zero", "ndcg10_skip", "map_skip"]
    by = {}
    for ln in rows:
        name = ln["learner"].split(" (components")[0].split(" (C on")[0].split(" (rounds")[0]
        by.setdefault(name, []).append(ln)
    out = []
    for name, lns in by.items():
        out.append([name, len(lns)] + [sum(ln[k] for ln in lns) / len(lns) for k in keys])
    out.sort(key=lambda r: -r[4])
    return ("Mean over folds (test partition; `_zero`: queries without a relevant document "
            "count as 0, as LETOR's tool; `_skip`: left out). The per-fold lines are in the "
            "table above.\n\n" + table(["learner", "folds"] + keys, out))


def floor_summary(lines):
    """The floor table: one row per path, its ratio to the floor and what bounds it."""
    acc = ("rel_err_weights", "rel_err", "rel_err_one_query", "rel_err_coef", "rel_err_first_pair",
           "final_residual", "rel_to_closed_form", "ndcg10")
    rows = []
    for ln in lines:
        if not ln.get("path"):
            continue
        check = next(((k, ln[k]) for k in acc if k in ln), ("", None))
        rows.append([ln["path"], ln.get("graph") or "", ln["dtype"], ln["shape"], ln["run_s"],
                     ln["floor"], ln["floor_s"], ln["ratio"], f"{check[0]} {fmt(check[1])}",
                     BOUNDS.get(ln["path"], "") if ln["ratio"] > 1.5 else ""])
    return ("Summary: the library's warm time against the operation that bounds it, measured "
            "in the same run (interleaved); a ratio above 1.5 names what bounds it.\n\n"
            + table(["path", "graph", "dtype", "shape", "run s", "floor", "floor s", "ratio",
                     "accuracy", "bounded by"], rows))


def devices(lines):
    return ", ".join(sorted({ln["device"] for ln in lines if "device" in ln})) or "none"


def mean_std(m, s):
    """``m ± s``; ``s`` is None for a deterministic selection (no draws)."""
    return f"{m:.4f}" if s is None else f"{m:.4f} ± {s:.4f}"


# --- the paper sections ----------------------------------------------------------------

def ranking_section(paper, tune, plots, plt, tune_nystrom=()):
    rows = [ln for ln in paper if ln["name"] == "ranking"]
    for ln in tune_nystrom:                  # issue 33: learned Nyström rows (bench_tune.py)
        if ln["name"] != "tune_nystrom":
            continue
        rows.append({"learner": f"learned (Nyström b={ln['basis']} k-means++"
                                + (", ARD" if ln["ard"] else "") + "), tune()",
                     "selection": f"exact Nyström leave-query-out squared loss, "
                                  f"{ln['steps']} Cholesky steps",
                     "parameter": "γ, λ" + (" (+ scales)" if ln["ard"] else ""),
                     "chosen": [f"{ln['best_gamma']:.3g}, {ln['best_lam']:.3g}"],
                     "ndcg1": None, "ndcg5": None, "ndcg10": ln["test_ndcg10"], "map": None,
                     "disagreement": None, "ndcg10_std": None, "refit_s": None})
    for ln in tune:
        rows.append({"learner": "RankRLS Gaussian kernel, " + (
            "learned by tune() (Adam)" if ln["name"] == "tune_adam" else "20 x 20 grid"),
            "selection": "exact leave-query-out squared loss" + (
                f", {ln['decompositions']} Cholesky steps" if ln["name"] == "tune_adam"
                else ", 20 eigendecompositions"),
            "parameter": "γ, λ", "chosen": [f"{ln['best_gamma']:.3g}, {ln['best_lam']:.3g}"],
            **{k: ln["test_" + k] for k in ("ndcg1", "ndcg5", "ndcg10", "map", "disagreement")},
            "ndcg10_std": None, "refit_s": None})
    if not rows:
        return "(not run)\n"
    body = table(["learner", "parameter chosen by", "chosen (per draw)", "NDCG@1", "NDCG@5",
                  "NDCG@10 (± std over draws)", "MAP", "disagreement error", "refit s"],
                 [[r["learner"] + (f" {r['version']}" if r.get("version") else ""),
                   r["selection"], f"{r.get('parameter', '')}: " + "; ".join(r["chosen"]),
                   r["ndcg1"], r["ndcg5"],
                   mean_std(r["ndcg10"], r["ndcg10_std"]), r["map"], r["disagreement"],
                   r["refit_s"]] for r in rows])
    top = max(rows, key=lambda r: r["ndcg10"])
    low = min((r for r in rows if r["disagreement"] is not None), key=lambda r: r["disagreement"])
    body += (f"\nHighest test NDCG@10 in this run: {top['learner']} ({top['ndcg10']:.4f}); "
             f"lowest disagreement error: {low['learner']}. "
             "The learned Nyström rows come from `bench_tune.py --nystrom` (their other "
             "metrics are not computed there).\n")
    if plt:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1))
        names = [r["learner"][:48] for r in rows]
        ax.barh(names, [r["ndcg10"] for r in rows], xerr=[r["ndcg10_std"] or 0 for r in rows],
                color="tab:blue")
        ax.set_xlim(min(r["ndcg10"] for r in rows) - 0.03, top["ndcg10"] + 0.02)
        ax.invert_yaxis()
        ax.set_xlabel("test NDCG@10 (lambdarank_sample)")
        plots.save(fig, "ranking.png")
        body += "\n![test NDCG@10 per learner](report/ranking.png)\n"
    return body


def pairs_section(paper, plots, plt):
    fig2 = [ln for ln in paper if ln["name"] == "pairs figure 2"]
    body = ""
    if fig2:
        body += ("The 4-point example of Fig. 2 (two objects, relevant pairs (x1, x2) and "
                 "(x3, x4)):\n\n" + table(
                     ["training pairs", "learnt weight", "relevant pairs ordered right (of 2)"],
                     [[ln["graph"], ln["weight"], ln["relevant_pairs_correct"]]
                      for ln in fig2]) + "\n")
    rows = [ln for ln in paper if ln["name"] == "pairs"]
    for data in dict.fromkeys(r["data"] for r in rows):
        sub = [r for r in rows if r["data"] == data]
        body += f"Linear RankRLS on {data} ({sub[0]['shape'][0]} x {sub[0]['shape'][1]}):\n\n"
        body += table(["training pairs", "test disagreement error (± std)", "test NDCG@10",
                       "λ chosen"],
                      [[r["graph"], mean_std(r["disagreement"], r["disagreement_std"]),
                        r["ndcg10"], ", ".join(r["chosen"])] for r in sub]) + "\n"
        rel = next((r for r in sub if r["graph"].startswith("relevant pairs (")), None)
        alls = [r for r in sub if r["graph"].startswith("all pairs")]
        if rel and alls:
            body += ("Adding the irrelevant pairs changes the test disagreement error by " +
                     " and ".join(f"{r['disagreement'] - rel['disagreement']:+.4f}"
                                  for r in alls) +
                     f" (relevant pairs only: {rel['disagreement']:.4f}).\n\n")
    return body or "(not run)\n"


def costs_section(paper):
    rows = [ln for ln in paper if ln["name"] == "costs"]
    body = ""
    for data in dict.fromkeys(r["data"] for r in rows):
        sub = [r for r in rows if r["data"] == data]
        body += f"On {data} ({sub[0]['shape'][0]} x {sub[0]['shape'][1]}):\n\n"
        body += table(["method", "training edges", "test disagreement error (± std)",
                       "test NDCG@10", "λ / C chosen"],
                      [[r["method"], r.get("edges", ""),
                        mean_std(r["disagreement"], r["disagreement_std"]), r["ndcg10"],
                        ", ".join(r["chosen"])] for r in sub]) + "\n"
        top = min(sub, key=lambda r: r["disagreement"])
        body += f"Lowest test disagreement error: {top['method']} ({top['disagreement']:.4f}).\n\n"
    return body or "(not run)\n"


def noise_section(noisy, plots, plt):
    if not noisy:
        return "(not run)\n"
    sigmas = sorted({ln["sigma"] for ln in noisy})
    names = list(dict.fromkeys(ln["name"].replace("noisy labels ", "") for ln in noisy))
    get = {(ln["name"].replace("noisy labels ", ""), ln["sigma"]): ln for ln in noisy}
    body = table(["learner"] + [f"σ = {s}" for s in sigmas],
                 [[n] + [mean_std(get[n, s]["disagreement_error_mean"],
                                  get[n, s]["disagreement_error_std"]) for s in sigmas]
                  for n in names])
    if plt:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for n in names:
            ax.errorbar(sigmas, [get[n, s]["disagreement_error_mean"] for s in sigmas],
                        yerr=[get[n, s]["disagreement_error_std"] for s in sigmas],
                        marker="o", capsize=3, label=n)
        ax.set_xlabel("label noise σ")
        ax.set_ylabel("test disagreement error")
        ax.legend()
        plots.save(fig, "label_noise.png")
        body += "\n![disagreement error against label noise](report/label_noise.png)\n"
    return body


def early_section(early, plots, plt):
    if not early:
        return "(not run)\n"
    body = generic(early)
    es = next((ln for ln in early if "early stopping" in ln["name"] and "(b)" in ln["name"]),
              None)
    tk = next((ln for ln in early if "Tikhonov" in ln["name"]), None)
    if es and tk:
        body += (f"\nEarly stopping (λ = 0): best validation pairwise error "
                 f"{es['valid_pairwise_error_best']:.4f} at iteration {es['best_iteration']} "
                 f"({es['iterations']} iterations run, {es['total_with_compile_s']:.3g} s with "
                 f"compilation). Tikhonov over {len(tk['lambdas'])} λ: best "
                 f"{tk['valid_pairwise_error_best']:.4f} at λ = {tk['best_lambda']:.3g} "
                 f"({tk['compile_s'] + tk['run_s']:.3g} s, {sum(tk['iterations'])} iterations "
                 f"in all).\n")
    if plt and tk and "valid_histories" in tk:
        fig, ax = plt.subplots(figsize=(6, 4))
        for lam, h in zip(tk["lambdas"], tk["valid_histories"]):
            ax.plot(h, lw=1, label=f"λ = {lam:.0e}")
        if es:
            ax.plot(es["valid_history"], "k--", lw=2, label="λ = 0 (early stopping)")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("CG iteration")
        ax.set_ylabel("validation pairwise error")
        ax.legend(fontsize=7, ncol=2)
        plots.save(fig, "early_stopping.png")
        body += ("\n![validation error against iterations for several λ]"
                 "(report/early_stopping.png)\n")
    return body


def tune_section(tune, plots, plt):
    if not tune:
        return "(not run)\n"
    grid = next((ln for ln in tune if ln["name"] == "tune_grid_20x20"), None)
    ad = next((ln for ln in tune if ln["name"] == "tune_adam"), None)
    body = generic(tune)
    if grid and ad:
        reach = ad["reaches_grid_best_at_step"]
        body += (f"\nGrid: best leave-query-out loss {grid['best_cv_loss']:.6f} from "
                 f"{grid['decompositions']} decompositions; tune(): "
                 f"{ad['best_cv_loss']:.6f} after {ad['decompositions']} Cholesky steps, "
                 + (f"at or below the grid's best from step {reach}" if reach is not None
                    else "never reaching the grid's best") + ".\n")
    if plt and grid and ad and "cv_loss_table" in grid:
        import numpy as np
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        L, G = np.meshgrid(grid["lams"], grid["gammas"])
        cs = ax.contourf(L, G, np.array(grid["cv_loss_table"]), levels=30, cmap="viridis")
        fig.colorbar(cs, label="leave-query-out loss")
        ax.plot(ad["lam_history"], ad["gamma_history"], "w.-", label="tune() trajectory")
        ax.plot(grid["best_lam"], grid["best_gamma"], "r*", ms=12, label="grid best")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(min(grid["gammas"] + ad["gamma_history"]) / 1.2,
                    max(grid["gammas"] + ad["gamma_history"]) * 1.2)
        ax.set_xlabel("λ")
        ax.set_ylabel("γ")
        ax.legend(fontsize=8)
        plots.save(fig, "tune_trajectory.png")
        body += "\n![tune() on the grid's CV surface](report/tune_trajectory.png)\n"
    return body


def scaling_plot(lines, plots, plt):
    pts = [ln for ln in lines if isinstance(ln.get("devices"), int) and ln.get("rows_per_s")]
    if not (plt and pts):
        return ""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot([p["devices"] for p in pts], [p["rows_per_s"] for p in pts], "o-")
    ax.set_xlabel("simulated devices")
    ax.set_ylabel("rows / s")
    plots.save(fig, "scaling.png")
    return "\n![weak scaling](report/scaling.png)\n"


class Plots:
    def __init__(self, out):
        self.dir = out / "report"

    def save(self, fig, name):
        self.dir.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(self.dir / name, dpi=110)
        fig.clf()


def render(results, out, argv, started, total_s, partial):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    import jax
    import numpy as np  # noqa: F401  (the plots need it)
    by = {r["key"]: r for r in results}
    lines = lambda k: by[k]["lines"] if k in by else []  # noqa: E731
    plots = Plots(out)
    dev = jax.devices()[0]
    head = [
        "# rankjax reproduction and benchmark report", "",
        "Produced by one command, from the repository root:", "",
        "```bash", "python benchmarks/report.py" + (" " + " ".join(argv) if argv else ""),
        "```", "",
        f"Run started {started} and took {total_s / 60:.1f} min. Machine: "
        f"{platform.machine()}, {os.cpu_count()} CPU cores, Python "
        f"{platform.python_version()}, jax {jax.__version__}, first device "
        f"`{dev.platform}:{getattr(dev, 'device_kind', '')}`. Every figure below comes from "
        + ("the run its section names" if partial else "this run")
        + "; the raw JSON lines are in `report/results.jsonl`. Each table names the "
        "device its lines ran on; on a CPU-only machine the benchmarks run at the reduced "
        "sizes given in their commands (`--full`: the benchmarks' own, paper-scale sizes).",
        ""]
    if partial:
        head += ["**Partial run**: the command above re-ran only the jobs it names; every other "
                 "section keeps the saved lines of the earlier full run (`python "
                 "benchmarks/report.py`, 25.7 min, the same machine); each section names the "
                 "command and wall time its lines came from. Sections never run say so.", ""]
    failed = [r for r in results if r["returncode"]]
    if failed:
        head += ["**Failed jobs:** " + "; ".join(
            f"`{r['command']}` (exit {r['returncode']}: {r['error']})" for r in failed), ""]
    paper, tune = lines("paper"), lines("tune")
    sections = [
        ("## 1. Document ranking on lambdarank_sample (Pahikkala et al. 2009 §5.3, Table 3)",
         "Training 3,005 rows in 201 queries, test 768 rows in 50 queries, 300 features "
         "normalised to [0, 1] per query (as in the paper). Each learner's parameter is "
         "chosen by NDCG@10 on 40 held-out training queries and the model refit on all "
         "training queries, for 5 draws of the held-out queries (mean ± std); the "
         "leave-query-out and learned rows use only the training set's own exact "
         "cross-validation. LightGBM and XGBoost run with their defaults, only the number "
         "of trees chosen like RankBoost's rounds. The pairwise GP of Tsivtsivadze et al. "
         "is left out: its posterior mean is dual RankRLS on the preference graph with "
         "λ = σ² (cost (21)), and its O(l³) cost in the 13,543 training pairs is the "
         "reason the RankRLS shortcuts exist.",
         [("paper", lambda: ranking_section(paper, tune, plots, plt, lines("tune_nystrom")))]),
        ("## 2. Irrelevant pairs and tied pairs (Pahikkala et al. 2009 §5.1, Fig. 2)",
         "Relevant pairs: two rows of one query with different labels. Ties: same query, "
         "same label (cost (21) with magnitude 0). All pairs: every pair of the training "
         "set, queries ignored (one global ranking). λ chosen by disagreement error on "
         "held-out training queries (5 draws).", [("paper", lambda: pairs_section(
             paper, plots, plt))]),
        ("## 3. Cost functions (20), (21), (22) (Pahikkala et al. 2009 §2.4, Table 2)",
         "RankRLS on explicit preference graphs: (20) ignores magnitudes, (21) keeps them, "
         "(22) weighs each edge by 1/magnitude (an upper bound of the disagreement error). "
         "Magnitudes are label differences; 'all pairs' adds the pairs across queries.",
         [("paper", lambda: costs_section(paper))]),
        ("## 4. KPCRank under label noise (Tsivtsivadze et al., noisy-label experiment)",
         "Generated LETOR-like data, Gaussian label noise on the training labels, clean "
         "test labels, 3 repetitions; p or λ chosen on held-out training queries.",
         [("noisy", lambda: noise_section(lines("noisy"), plots, plt))]),
        ("## 5. Early stopping against Tikhonov regularization (Airola et al. 2010, Table 1)",
         "RCV1-shaped generated sparse data (bipartite global ranking), CG on the primal "
         "system; early stopping at λ = 0 by validation pairwise error against a Tikhonov "
         "grid of 8 λ solved to tol 1e-5 in one vmapped run.",
         [("early", lambda: early_section(lines("early"), plots, plt))]),
        ("## 6. Learned hyper-parameters against grid search",
         "Gaussian-kernel RankRLS on lambdarank_sample, exact leave-query-out squared "
         "RankRLS loss; the grid evaluates every λ of a γ from one eigendecomposition, "
         "tune() takes one Cholesky factorisation (and its gradient) per Adam step.",
         [("tune", lambda: tune_section(tune, plots, plt))]),
    ]
    body = head
    for title, intro, parts in sections:
        body += [title, "", intro, ""]
        for key, fn in parts:
            if key in by:
                body += [f"`{by[key]['command']}` ({by[key]['wall_s']:.0f} s, device: "
                         f"{devices(lines(key))})", ""]
            body += [fn() if key in by else "(not run)\n"]
    body += ["## 7. Benchmark figures of the earlier issues", "",
             "Seconds are medians of at least 3 warm runs with `block_until_ready`, "
             "compilation apart, unless a column says otherwise; every line carries its "
             "accuracy check.", ""]
    for key, issue, title, _, _ in JOBS:
        if key in ("paper", "tune", "noisy", "early"):
            continue
        body += [f"### {title} (issue {issue})", ""]
        if key not in by:
            body += ["(not run)", ""]
            continue
        r = by[key]
        body += [f"`{r['command']}` ({r['wall_s']:.0f} s, device: {devices(r['lines'])})", "",
                 {"floor": floor_summary, "million": million_summary}.get(key, generic)(
                     r["lines"]) if r["lines"] else "(no output)\n"]
        if key == "scaling":
            body += [scaling_plot(r["lines"], plots, plt)]
        if key == "mq2008":
            body += [mq2008_summary(r["lines"])]
    body += [(HERE / "design_measurements.md").read_text()]     # §8, kept by hand
    write_atomic(out / "REPORT.md", "\n".join(body))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="paper-scale sizes (accelerator)")
    ap.add_argument("--only", default=None, help="comma-separated job keys: " +
                    ",".join(k for k, *_ in JOBS))
    ap.add_argument("--out", default=str(HERE), help="directory of REPORT.md")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite REPORT.md from OUT/report/results.jsonl and run.json")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    if a.render_only:
        run = json.loads((out / "report" / "run.json").read_text())
        results = [json.loads(x) for x in
                   (out / "report" / "results.jsonl").read_text().splitlines()]
        render(results, out, run["argv"], run["started"], run["total_s"], run["partial"])
        return
    keys = [k for k, *_ in JOBS]
    only = keys if a.only is None else a.only.split(",")
    unknown = sorted(set(only) - set(keys))
    if unknown:
        ap.error(f"unknown job(s) {unknown}; choose from {keys}")
    started = datetime.datetime.now().isoformat(timespec="minutes")
    t0 = time.perf_counter()
    results = run_jobs(only, a.full, out)
    run = {"argv": sys.argv[1:], "started": started, "total_s": time.perf_counter() - t0,
           "partial": a.only is not None}
    write_atomic(out / "report" / "run.json", json.dumps(run) + "\n")
    render(results, out, **run)
    print(f"[report] wrote {out / 'REPORT.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
