"""The suite's registry: every benchmark script by the job of ``report.py`` that runs it
(its REPORT.md section), the README blocks written from committed JSON lines, and the
scripts run by other means (the guard, the accelerator check). ``tests/test_benchmarks.py``
holds every ``bench_*.py`` to one entry here, so nothing in the folder is dead."""

JOBS = [
    ("paper", 14, "Paper experiments: ranking, irrelevant pairs, costs",
     ["bench_paper.py"], ["bench_paper.py"]),
    ("tune", 14, "Learned hyper-parameters against a 20 x 20 grid", ["bench_tune.py"],
     ["bench_tune.py"]),
    ("tune_nystrom", 33, "Learned Nyström hyper-parameters (ARD) and the cost of one step",
     ["bench_tune.py", "--nystrom"], ["bench_tune.py", "--nystrom"]),
    ("noisy", 6, "KPCRank under label noise", ["bench_learners.py", "--only", "noisy"],
     ["bench_learners.py", "--only", "noisy"]),
    ("early", 5, "Early stopping against Tikhonov (RCV1-shaped)",
     ["bench_cg.py", "--only", "b,tikhonov", "--rows", "100000"],
     ["bench_cg.py", "--only", "b,tikhonov"]),
    ("core", 2, "Core operations", ["bench_core.py", "--rows", "500000", "--queries", "4000"],
     ["bench_core.py"]),
    ("path", 3, "Regularization paths and the sparse approximation",
     ["bench_path.py", "--scale", "0.1"], ["bench_path.py"]),
    ("cv", 4, "Exact fast cross-validation", ["bench_cv.py", "--scale", "0.1"],
     ["bench_cv.py"]),
    ("cg", 5, "Sparse products and CG against scipy", ["bench_cg.py", "--only", "matvec,a"],
     ["bench_cg.py", "--only", "matvec,a"]),
    ("svm", 6, "RankSVM on one query of 10^6 rows", ["bench_learners.py", "--only", "svm1m"],
     ["bench_learners.py", "--only", "svm1m"]),
    ("overhead", 10, "Per-call overhead of the public functions", ["bench_overhead.py"],
     ["bench_overhead.py"]),
    ("shortcuts", 10, "The shortcuts through the public functions", ["bench_shortcuts.py"],
     ["bench_shortcuts.py"]),
    ("io", 12, "SVMlight reading and writing against scikit-learn",
     ["bench_io.py", "--rows", "100544"],
     ["bench_io.py"]),
    ("stream", 13, "Out-of-core primal RankRLS",
     ["bench_stream.py", "--rows", "2000000", "--clean", "--dir", "{tmp}/stream"],
     ["bench_stream.py", "--clean", "--dir", "{tmp}/stream"]),
    ("kernel_scale", 22, "Kernel RankRLS at scale: Nyström hold-out, RankRLSCV, FALKON",
     ["bench_kernel_scale.py", "--optimize"], ["bench_kernel_scale.py", "--optimize",
                                                "--large-rows", "1000000"]),
    ("first_screen", 34, "The README's first table: kernel, learned and linear RankRLSCV beside "
     "LightGBM and XGBoost on lambdarank_sample and MQ2008",
     ["bench_first_screen.py", "--readme", "../docs/which_solver.md"],
     ["bench_first_screen.py", "--readme", "../docs/which_solver.md"]),
    ("battery", 74, "The distortion battery: every learner of the first screen on the real sets and "
     "raw web data, each column logged through a random monotone map (five seeds), float32",
     ["bench_battery.py", "--readme", "../docs/which_solver.md"],
     ["bench_battery.py", "--readme", "../docs/which_solver.md"]),
    ("optimize", 43, "RankRLSCV(kernel=\"gaussian\", optimize=True) at 12k rows against 35b8738 "
     "(fresh processes, alternating)", ["bench_optimize.py"], ["bench_optimize.py"]),
    ("default", 86, "The default chosen by the data against the default before it (fresh "
     "processes, alternating) on the first-screen sets, and on data whose relevance acts "
     "through interactions", ["bench_default.py", "--queries", "100"], ["bench_default.py"]),
    ("first_answer", 43, "The first answer: first fit in a fresh process (empty and filled "
     "compilation cache), warm fit, another shape and the programs compiled, beside LightGBM and "
     "XGBoost", ["bench_first_answer.py"], ["bench_first_answer.py"]),
    ("mq2008", 22, "MQ2008 (LETOR 4.0), five folds: every learner beside LightGBM and XGBoost",
     ["bench_mq2008.py"], ["bench_mq2008.py"]),
    ("scaling", 13, "Weak scaling over simulated devices",
     ["bench_scaling.py", "--rows-per-device", "100000"], ["bench_scaling.py"]),
    ("floor", 31, "Every hot path against its floor", ["bench_floor.py"], ["bench_floor.py"]),
    ("precision", 41, "The precision rule: float32 against float64 for every λ-solving function",
     ["bench_precision.py"], ["bench_precision.py"]),
    ("sweep", 75, "The precision rule swept: λ x γ x per-feature scale spreads on two real sets, "
     "every solver", ["bench_sweep.py"], ["bench_sweep.py"]),
    ("mixed", 88, "Mixed precision: float32 hold-outs of Primal, Dual and Nyström against "
     "float64 on two real sets, the lanes each answers and the warm times",
     ["bench_mixed.py"], ["bench_mixed.py"]),
    ("research", 90, "A network's features under the exact hold-out of a RankRLS head, trained "
     "end to end with optax, beside the estimators (lambdarank_sample, float32)",
     ["bench_research.py", "--readme", "../docs/from_rax.md"],
     ["bench_research.py", "--readme", "../docs/from_rax.md"]),
    ("survival", 91, "The survival graph's build and product, and Harrell's C, at 10^4 .. 10^6 "
     "censored rows (float32)", ["bench_survival.py", "--sizes", "10000,100000"],
     ["bench_survival.py"]),
    ("survival_real", 91, "Patients by risk against scikit-survival and lifelines: test Harrell's C "
     "and fit seconds on veterans, whas500, gbsg2 and rossi (five splits), and at 10^5 "
     "censored rows (needs the bench extra)",
     ["bench_survival_real.py", "--readme", "../docs/survival.md"],
     ["bench_survival_real.py", "--large", "100000", "--readme", "../docs/survival.md"]),
    ("vmap", 59, "vmap over λ of rj.fit against the solver's own path",
     ["bench_vmap.py"], ["bench_vmap.py"]),
    ("million", 65, "Kernel RankRLS at 10^6 rows: linear, Nyström (γ grid; learned with ARD), "
     "FALKON beside LightGBM, and the row-block hold-out stage by stage",
     ["bench_million.py", "--save", "lines/million.jsonl"],
     ["bench_million.py", "--full", "--save", "lines/million.jsonl"]),
]
"""The jobs of ``report.py``: key, issue, title, arguments (CPU sizes), arguments with
``--full``."""

BLOCKS = {"first-answer": ("bench_first_answer.py", "first_answer.jsonl"),
          "first-screen": ("bench_first_screen.py", "first_screen.jsonl"),
          "battery": ("bench_battery.py", "battery.jsonl"),
          "million": ("bench_million.py", "million.jsonl"),
          "precision": ("bench_precision.py", "precision.jsonl"),
          "vmap": ("bench_vmap.py", "vmap.jsonl"),
          "sweep": ("bench_sweep.py", "sweep.jsonl"),
          "research": ("bench_research.py", "research.jsonl"),
          "survival": ("bench_survival_real.py", "survival_real.jsonl")}
"""Measured block -> (the benchmark that writes it, its committed JSON lines under
``benchmarks/lines/``)."""

PAGES = {"first-answer": "docs/which_solver.md", "first-screen": "docs/which_solver.md",
         "battery": "docs/which_solver.md", "million": "docs/which_solver.md",
         "precision": "docs/precision.md", "vmap": "docs/jax_transformations.md",
         "sweep": "docs/precision.md", "research": "docs/from_rax.md",
         "survival": "docs/survival.md"}
"""Measured block -> the documentation page that holds it (``--readme`` of its benchmark
writes it there; the README states no measured figure)."""

LINES = {**{f: s for s, f in BLOCKS.values()}, "mixed.jsonl": "bench_mixed.py",
         "default.jsonl": "bench_default.py", "survival.jsonl": "bench_survival.py"}
"""Every committed JSON-lines file under ``benchmarks/lines/`` -> the script that writes it."""

OTHER = {"bench_floor.py": "guard.py (the speed guard's hot paths)",
         "accelerator_check.py": "the first run on a lent accelerator"}
"""Scripts that run outside the report's jobs, and what runs them."""


def scripts():
    """Every script the registry names."""
    named = {j[3][0] for j in JOBS} | {s for s, _ in BLOCKS.values()} | set(OTHER)
    return sorted(named)
