"""Issue 91: patients by risk against scikit-survival and lifelines. Test Harrell's C and fit
seconds on scikit-survival's veterans, whas500 and gbsg2 and lifelines' rossi (one-hot,
standardised over every patient, the same matrix for everyone; five stratified 75/25 splits
by the event), float32 for rankjax with x64 off: ``SurvivalRankRLSCV()`` and
``SurvivalRankRLSCV(kernel="gaussian")`` at their defaults (and each with one margin:
``margins="unit"``, ``"log_time"``) beside CoxPH, CoxNet (α by
3-fold GridSearchCV over its own path), FastSurvivalSVM (α by 3-fold GridSearchCV over
2^-12 .. 2^12), FastKernelSurvivalSVM (RBF, defaults), RandomSurvivalForest (100 trees),
gradient boosting (defaults) and lifelines' CoxPHFitter. Each line holds the model's C per
split, its mean, the paired standard error of its difference to the Gaussian default, and
the median fit seconds (tuning included). ``--large M``: ``rj.make_survival_data`` of M rows
(ten columns, the risk through an interaction and a square; 80 % to train) where a kernel
survival SVM cannot go (its kernel matrix is M^2 floats): the two defaults, CoxPH and one
FastSurvivalSVM (α = 1, untuned), their C, seconds and the warnings of our fits.

Needs scikit-survival and lifelines (``pip install -e ".[bench]"``).

    python benchmarks/bench_survival_real.py --save benchmarks/lines/survival_real.jsonl
    python benchmarks/bench_survival_real.py --lines benchmarks/lines/survival_real.jsonl \
        --readme docs/survival.md
"""
import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import numpy as np  # noqa: E402

from lib.timing import EMITTED, emit  # noqa: E402

SETS = ("veterans", "whas500", "gbsg2", "rossi")
OURS = ("rankjax linear", "rankjax gaussian")
"""The defaults, the references of the paired differences."""


def load(name):
    """``(X [m, n] float64 one-hot standardised, event [m] bool, time [m])``."""
    if name == "rossi":
        from lifelines.datasets import load_rossi
        r = load_rossi()
        X = r.drop(columns=["week", "arrest"]).to_numpy(float)
        e, t = r["arrest"].to_numpy(bool), r["week"].to_numpy(float)
    else:
        from sksurv import datasets
        from sksurv.preprocessing import OneHotEncoder
        X, y = {"veterans": datasets.load_veterans_lung_cancer, "whas500": datasets.load_whas500,
                "gbsg2": datasets.load_gbsg2}[name]()
        X = OneHotEncoder().fit_transform(X).to_numpy(float)
        ev, tm = y.dtype.names
        e, t = y[ev].astype(bool), y[tm].astype(float)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1), e, t


def models():
    """``{name: fit(X, y) -> predict(X)}``: each timed with its tuning."""
    from sklearn.model_selection import GridSearchCV
    from sksurv.ensemble import GradientBoostingSurvivalAnalysis, RandomSurvivalForest
    from sksurv.linear_model import CoxnetSurvivalAnalysis, CoxPHSurvivalAnalysis
    from sksurv.svm import FastKernelSurvivalSVM, FastSurvivalSVM

    from rankjax.estimators import SurvivalRankRLSCV

    def ours(**kw):
        return lambda X, y: SurvivalRankRLSCV(**kw).fit(X.astype(np.float32), y).predict

    def coxnet(X, y):
        alphas = CoxnetSurvivalAnalysis(l1_ratio=0.9, alpha_min_ratio=0.01).fit(X, y).alphas_
        gs = GridSearchCV(CoxnetSurvivalAnalysis(l1_ratio=0.9, fit_baseline_model=False),
                          {"alphas": [[a] for a in alphas]}, cv=3, error_score=0.5)
        return gs.fit(X, y).predict

    def svm(X, y):
        return GridSearchCV(FastSurvivalSVM(max_iter=1000, tol=1e-5, random_state=0),
                            {"alpha": 2.0 ** np.arange(-12, 13, 2)}, cv=3).fit(X, y).predict

    def lifelines_cox(X, y):
        import pandas as pd
        from lifelines import CoxPHFitter
        ev, tm = y.dtype.names
        df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
        df["T"], df["E"] = y[tm], y[ev]
        cph = CoxPHFitter(penalizer=0.01).fit(df, "T", "E")
        return lambda Z: cph.predict_partial_hazard(
            pd.DataFrame(Z, columns=df.columns[:-2])).to_numpy()

    plain = lambda est: lambda X, y: est.fit(X, y).predict      # noqa: E731
    return {"rankjax linear": ours(), "rankjax gaussian": ours(kernel="gaussian"),
            **{f"rankjax {k} ({mg} margin)": ours(margins=mg, **kw) for k, kw in (
                ("linear", {}), ("gaussian", {"kernel": "gaussian"})) for mg in ("unit", "log_time")},
            "sksurv CoxPH": plain(CoxPHSurvivalAnalysis()), "sksurv CoxNet": coxnet,
            "sksurv FastSurvivalSVM tuned": svm,
            "sksurv FastKernelSurvivalSVM rbf": plain(FastKernelSurvivalSVM(kernel="rbf",
                                                                             random_state=0)),
            "sksurv RandomSurvivalForest": plain(RandomSurvivalForest(100, random_state=0,
                                                                      n_jobs=1)),
            "sksurv GradientBoosting": plain(GradientBoostingSurvivalAnalysis(random_state=0)),
            "lifelines CoxPHFitter": lifelines_cox}


def real(only, skip):
    from sklearn.model_selection import StratifiedShuffleSplit
    from sksurv.metrics import concordance_index_censored
    from sksurv.util import Surv
    fits = {k: v for k, v in models().items() if k not in skip}
    for name in only:
        X, e, t = load(name)
        got = {k: ([], [], set()) for k in fits}
        splits = StratifiedShuffleSplit(5, test_size=0.25, random_state=0).split(X, e)
        for tr, te in splits:
            y = Surv.from_arrays(e[tr], t[tr])
            for k, fit in fits.items():
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    try:
                        predict = fit(X[tr], y)
                    except Exception as err:        # a competitor that fails is a figure too
                        print(f"{name} {k}: {type(err).__name__}: {err}", file=sys.stderr)
                        got[k][0].append(np.nan)
                        got[k][1].append(time.perf_counter() - t0)
                        continue
                    fit_s = time.perf_counter() - t0
                if k.startswith("rankjax"):
                    got[k][2].update(f"{w.category.__name__}: {str(w.message)[:80]}"
                                     for w in caught)
                risk = np.asarray(predict(X[te]), np.float64)
                got[k][0].append(concordance_index_censored(e[te], t[te], risk)[0])
                got[k][1].append(fit_s)
        refs = {r: np.array(got[r][0]) for r in OURS if r in got}
        for k, (c, s, caught) in got.items():
            paired = {}
            for r, ref in refs.items():
                d = np.array(c) - ref
                tag = r.split()[1]
                paired[f"diff_to_{tag}"] = float(np.mean(d))
                paired[f"paired_se_{tag}"] = float(np.std(d, ddof=1) / np.sqrt(len(d)))
            emit(name="survival_real", data=name, model=k,
                 dtype="float32" if k.startswith("rankjax") else "float64",
                 shape=list(X.shape), events=int(e.sum()), splits=len(c),
                 c=[round(v, 6) for v in c], c_mean=float(np.mean(c)), **paired,
                 fit_s_median=float(np.median(s)), fit_s=[round(v, 4) for v in s],
                 warnings=sorted(caught))


def large(m):
    from sksurv.linear_model import CoxPHSurvivalAnalysis
    from sksurv.metrics import concordance_index_censored
    from sksurv.svm import FastSurvivalSVM
    from sksurv.util import Surv

    import rankjax as rj
    from rankjax.estimators import SurvivalRankRLSCV
    d = rj.make_survival_data(m, seed=0)
    X, e, t = d.X, d.event, d.time
    tr = np.arange(m) < int(0.8 * m)
    y = Surv.from_arrays(e[tr], t[tr])
    runs = {"rankjax linear": lambda: SurvivalRankRLSCV(),
            "rankjax gaussian": lambda: SurvivalRankRLSCV(kernel="gaussian"),
            "sksurv CoxPH": CoxPHSurvivalAnalysis,
            "sksurv FastSurvivalSVM alpha=1": lambda: FastSurvivalSVM(alpha=1.0, max_iter=100,
                                                                      random_state=0)}
    for k, make in runs.items():
        ours = k in OURS
        Xf = X.astype(np.float32) if ours else X
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            est = make().fit(Xf[tr], y)
            fit_s = time.perf_counter() - t0
        risk = np.asarray(est.predict(Xf[~tr]), np.float64)
        extra = {"lam": est.lam_, "margin": est.margin_, "refused_lams": int(np.isnan(
            est.cv_results_["mean_test_score"]).sum())} if ours else {}
        emit(name="survival_large", model=k, dtype="float32" if ours else "float64",
             shape=[int(tr.sum()), X.shape[1]], test_rows=int((~tr).sum()),
             c=concordance_index_censored(e[~tr], t[~tr], risk)[0], fit_s=fit_s,
             warnings=sorted({f"{w.category.__name__}: {str(w.message)[:80]}"
                              for w in caught}) if ours else [], **extra)


def render(lines):
    real_ = [ln for ln in lines if ln["name"] == "survival_real"]
    sets = [s for s in SETS if any(ln["data"] == s for ln in real_)]
    names = list(dict.fromkeys(ln["model"] for ln in real_))
    by = {(ln["data"], ln["model"]): ln for ln in real_}
    rows = ["| model | " + " | ".join(sets) + " |", "| --- |" + " --- |" * len(sets)]
    for k in names:
        cells = []
        for s in sets:
            ln = by.get((s, k))
            if ln is None:
                cells.append("–")
                continue
            diff = "" if k == "rankjax gaussian" else \
                f" ({ln['diff_to_gaussian']:+.3f} ± {ln['paired_se_gaussian']:.3f})"
            cells.append(f"{ln['c_mean']:.3f}{diff} / {ln['fit_s_median']:.2f} s")
        rows.append(f"| {k} | " + " | ".join(cells) + " |")
    out = rows + ["", "<sub>Test Harrell's C, mean of five stratified 75/25 splits (in brackets: "
                  "the mean difference to the Gaussian default and its paired standard error "
                  "over the splits) / median fit seconds, tuning included; rankjax in float32 "
                  "(x64 off), the others in float64; "
                  "`python benchmarks/bench_survival_real.py --save "
                  "benchmarks/lines/survival_real.jsonl`.</sub>"]
    big = [ln for ln in lines if ln["name"] == "survival_large"]
    if big:
        out += ["", "| model | rows (train) | test C | fit s | refused λ | warnings |",
                "| --- | --- | --- | --- | --- | --- |"]
        for ln in big:
            out.append(f"| {ln['model']} | {ln['shape'][0]:,} | {ln['c']:.3f} | "
                       f"{ln['fit_s']:.1f} | {ln.get('refused_lams', '–')} | "
                       f"{len(ln['warnings']) or 'none'} |")
        out += ["", "<sub>Generated: ten columns, the log-hazard through an interaction and a "
                "square, about a third censored; 80 % of the rows train, 20 % test; same "
                "command with `--large`.</sub>"]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(SETS))
    ap.add_argument("--skip", default="", help="models to leave out, comma separated")
    ap.add_argument("--large", type=int, default=0, help="rows of the generated set (0: none)")
    from lib.blocks import add_arguments, from_lines, rewrite, save_lines
    add_arguments(ap, "survival")
    args = ap.parse_args()
    if from_lines(args, "survival", render):
        return
    jax.config.update("jax_enable_x64", False)
    try:
        import lifelines  # noqa: F401
        import sksurv  # noqa: F401
    except ImportError as err:
        raise SystemExit(f"needs scikit-survival and lifelines ({err}): "
                         "pip install -e \".[bench]\"")
    if args.only:
        real([s for s in args.only.split(",") if s], set(filter(None, args.skip.split(","))))
    if args.large:
        large(args.large)
    if args.save:
        save_lines(args.save, EMITTED)
    if args.readme:
        rewrite(args.readme, "survival", render(EMITTED))


if __name__ == "__main__":
    main()
