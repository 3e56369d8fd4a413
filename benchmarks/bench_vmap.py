"""``vmap`` of ``rj.fit`` over every traced argument against what it replaces: over λ against
the solver's own λ path (issue 59), over a Gaussian kernel's γ (4 values) against a jitted
loop of fits, over 8 label columns against the loop and the native ``y [m, 8]`` (issue 67).
A batch must cost at most twice its loop, never a fallback decomposition per lane.

On ``lambdarank_sample`` (float32, x64 off, as on an accelerator) for ``Primal``,
``Dual(gaussian)`` and ``Nystrom(gaussian, 300)``: ``jax.jit(jax.vmap(fit))`` over 8 λ and
``jax.jit(path)`` over the same 8 λ, both giving the ``[8, m]`` training scores. One JSON line
per solver: compile and run seconds of each (median of 3 warm runs, ``block_until_ready``),
their ratio (the acceptance bound is 2), the largest relative difference of the two outputs
(the accuracy check) and the peak resident memory. Then one line per solver and axis:
``vmap_gamma`` (``Dual``, ``Nystrom``, ``Falkon``) and ``vmap_labels`` (every solver), the
vmapped and looped run seconds, their ratio and difference (and the native multi-output
fit's seconds where the solver takes one). Last, ``rj.holdout`` (leave-query-out, the 8 λ)
vmapped over 4 γ (``holdout_gamma``: ``Dual``, ``Nystrom``) and over 4 per-feature scale
vectors (``holdout_scales``: ``Primal``, ``Dual``, ``Nystrom``) against a jitted loop of
hold-outs (issue 77).

    python benchmarks/bench_vmap.py --save benchmarks/lines/vmap.jsonl   # about two minutes, 2 cores
    python benchmarks/bench_vmap.py --lines benchmarks/lines/vmap.jsonl --readme docs/jax_transformations.md

``--readme`` rewrites the README's ``vmap`` block (the table of ``docs/jax_transformations.md``)
from the run's lines or from saved ones (``--lines``).
"""
import argparse
import os
import platform
import resource
import sys

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rankjax as rj  # noqa: E402
from lib.blocks import add_arguments, from_lines, rewrite, save_lines  # noqa: E402
from lib.timing import EMITTED, emit, time_jitted  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                    "lambdarank_sample", "rank.train")
LAMS = np.logspace(-1, 2.5, 8).astype(np.float32)


def solvers(X):
    gamma = 1.0 / (X.shape[1] * float(np.var(X)))
    k = rj.gaussian_kernel(gamma)
    return {"Primal": rj.Primal(), "Dual(gaussian)": rj.Dual(k), "Nystrom(gaussian, 300)":
            rj.Nystrom(k, rj.Basis(300, method="uniform"))}


def table(lines):
    """The README's ``vmap`` block: one row per (axis, solver) from the run's lines."""
    what = {"vmap_fit_vs_path": ("λ (8 values)", "its λ path", "path_run_s"),
            "vmap_gamma": ("γ (4 values)", "a jitted loop of fits", "loop_run_s"),
            "vmap_labels": (f"label columns ({LABELS})", "a jitted loop of fits", "loop_run_s"),
            "holdout_gamma": ("γ (4 values), `rj.holdout` of 8 λ", "a jitted loop of hold-outs",
                              "loop_run_s"),
            "holdout_scales": ("feature scales (4 vectors), `rj.holdout` of 8 λ",
                               "a jitted loop of hold-outs", "loop_run_s")}
    rows = ["| `vmap` over | solver | vmapped s | against | its s | ratio | "
            "largest relative difference |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for ln in lines:
        if ln["name"] not in what:
            continue
        axis, against, key = what[ln["name"]]
        rows.append(f"| {axis} | `{ln['solver']}` | {ln['vmap_run_s']:.3f} | {against} | "
                    f"{ln[key]:.3f} | {ln['ratio']:.2f} | {ln['max_rel_diff']:.1e} |")
    info = next((ln for ln in lines if "machine" in ln), {})
    return ("\n".join(rows) + f"\n\n<sub>lambdarank_sample (3,005 x 300), float32, λ = 1 for γ and "
            f"the labels; warm runs, median of 3, `block_until_ready`; {info.get('machine', '?')}, "
            f"{info.get('cores', '?')} CPU cores, jax {info.get('jax', '?')}; `python "
            "benchmarks/bench_vmap.py --lines benchmarks/lines/vmap.jsonl --readme "
            "docs/jax_transformations.md`.</sub>")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, "vmap")
    a = ap.parse_args()
    if from_lines(a, "vmap", table):
        return
    if not os.path.exists(DATA):
        sys.exit(f"{DATA} is not there: the benchmark runs on lambdarank_sample")
    d = rj.io.read_svmlight(DATA)
    X = np.asarray(d.X, np.float32)
    p = rj.Problem(X, np.asarray(d.y, np.float32), np.asarray(d.qid))
    lams = jnp.asarray(LAMS)
    for name, s in solvers(X).items():
        def vmapped(p, lams, s=s):
            return jax.vmap(lambda lam: rj.predict(rj.fit(p, s, lam=lam).value, p.X))(lams)

        def path(p, lams, s=s):
            return rj.predict(rj.path(p, s, lams=lams).value, p.X)

        cv, rv, fv = time_jitted(vmapped, p, lams)
        cp, rp, fp = time_jitted(path, p, lams)
        fv, fp = np.asarray(fv, np.float64), np.asarray(fp, np.float64)
        emit(name="vmap_fit_vs_path", solver=name, dtype="float32", shape=list(X.shape),
             lambdas=len(LAMS), vmap_compile_s=cv, vmap_run_s=rv, path_compile_s=cp,
             path_run_s=rp, ratio=rv / rp, bound=2.0,
             max_rel_diff=float(np.max(np.abs(fv - fp)) / np.max(np.abs(fp))),
             peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3))
    other_axes(X, np.asarray(d.y, np.float32), np.asarray(d.qid))
    holdout_axes(X, np.asarray(d.y, np.float32), np.asarray(d.qid))
    emit(name="vmap_run", machine=platform.machine(), cores=os.cpu_count(), jax=jax.__version__)
    if a.save:
        save_lines(a.save, EMITTED)
    if a.readme:
        rewrite(a.readme, "vmap", table(EMITTED))


GAMMA_FACTORS = (0.5, 1.0, 2.0, 4.0)
LABELS = 8


def line(name, solver, X, vmapped, looped, args, native=None):
    cv, rv, fv = time_jitted(vmapped, *args)
    cl, rl, fl = time_jitted(looped, *args)
    fv, fl = np.asarray(fv, np.float64), np.asarray(fl, np.float64)
    extra = {}
    if native is not None:
        extra["native_run_s"] = time_jitted(native, *args)[1]
    emit(name=name, solver=solver, dtype="float32", shape=list(X.shape), vmap_compile_s=cv,
         vmap_run_s=rv, loop_compile_s=cl, loop_run_s=rl, ratio=rv / rl, bound=2.0,
         max_rel_diff=float(np.max(np.abs(fv - fl)) / np.max(np.abs(fl))), **extra,
         peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3))


def other_axes(X, y, qid):
    """γ and label columns: ``vmap`` against the jitted loop."""
    g0 = 1.0 / (X.shape[1] * float(np.var(X)))
    gammas = jnp.asarray(g0 * np.asarray(GAMMA_FACTORS), jnp.float32)
    basis = rj.Basis(300, method="uniform")
    makers = {"Dual(gaussian)": lambda g: rj.Dual(rj.gaussian_kernel(g)),
              "Nystrom(gaussian, 300)": lambda g: rj.Nystrom(rj.gaussian_kernel(g), basis),
              "Falkon(gaussian, 300)": lambda g: rj.Falkon(rj.gaussian_kernel(g), basis)}
    Xj = jnp.asarray(X)
    for name, make in makers.items():
        def fit(X, g, make=make):
            return rj.predict(rj.fit(rj.Problem(X, y, qid), make(g), lam=1.0).value, X)
        line("vmap_gamma", name, X, lambda X, G, fit=fit: jax.vmap(lambda g: fit(X, g))(G),
             lambda X, G, fit=fit: jnp.stack([fit(X, G[i]) for i in range(G.shape[0])]),
             (Xj, gammas))
    rng = np.random.default_rng(0)
    Y = jnp.asarray(np.stack([y] + [y + rng.standard_normal(y.shape).astype(np.float32)
                                    for _ in range(LABELS - 1)]))
    k = rj.gaussian_kernel(g0)
    every = {"Primal": rj.Primal(), "Dual(gaussian)": rj.Dual(k),
             "Nystrom(gaussian, 300)": rj.Nystrom(k, basis),
             "Falkon(gaussian, 300)": rj.Falkon(k, basis), "CG": rj.CG()}
    for name, s in every.items():
        def fit(X, yy, s=s):
            return rj.predict(rj.fit(rj.Problem(X, yy, qid), s, lam=1.0).value, X)
        native = None if name.startswith(("Falkon", "CG")) else (
            lambda X, Y, s=s: rj.predict(rj.fit(rj.Problem(X, Y.T, qid), s, lam=1.0).value, X).T)
        line("vmap_labels", name, X, lambda X, Y, fit=fit: jax.vmap(lambda yy: fit(X, yy))(Y),
             lambda X, Y, fit=fit: jnp.stack([fit(X, Y[i]) for i in range(Y.shape[0])]),
             (Xj, Y), native)


SCALES = 4


def holdout_axes(X, y, qid):
    """``rj.holdout`` (leave-query-out, the 8 λ) vmapped over 4 γ and over 4 per-feature
    scale vectors against the jitted loop of hold-outs: ``[4, 8, m]`` predictions."""
    g0 = 1.0 / (X.shape[1] * float(np.var(X)))
    gammas = jnp.asarray(g0 * np.asarray(GAMMA_FACTORS), jnp.float32)
    graph = rj.query_graph(qid)
    folds = rj.make_folds(graph)
    lams = jnp.asarray(LAMS)
    basis = rj.Basis(300, method="uniform")
    Xj = jnp.asarray(X)

    def cases():
        for name, make in {"Dual(gaussian)": lambda g: rj.Dual(rj.gaussian_kernel(g)),
                           "Nystrom(gaussian, 300)": lambda g: rj.Nystrom(rj.gaussian_kernel(g),
                                                                          basis)}.items():
            yield "holdout_gamma", name, (lambda X, g, make=make: (X, make(g))), gammas
        rng = np.random.default_rng(1)
        S = jnp.asarray(np.exp(0.3 * rng.standard_normal((SCALES, X.shape[1]))), jnp.float32)
        yield "holdout_scales", "Primal", (lambda X, s: (X * s, rj.Primal())), S
        for name, solver in {"Dual(gaussian)": rj.Dual(rj.gaussian_kernel(g0)),
                             "Nystrom(gaussian, 300)": rj.Nystrom(rj.gaussian_kernel(g0),
                                                                  basis)}.items():
            yield "holdout_scales", name, (lambda X, s, solver=solver: (X * s, solver)), S

    for name, solver, prepare, axis in cases():
        def hold(X, a, prepare=prepare):
            Z, s = prepare(X, a)
            return rj.holdout(rj.Problem(Z, y, graph), s, lams=lams,
                              folds=folds).value.predictions
        line(name, solver, X, lambda X, A, hold=hold: jax.vmap(lambda a: hold(X, a))(A),
             lambda X, A, hold=hold: jnp.stack([hold(X, A[i]) for i in range(A.shape[0])]),
             (Xj, axis))


if __name__ == "__main__":
    main()
