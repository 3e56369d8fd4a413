"""``vmap`` over λ of ``rj.fit`` against the solver's own λ path (issue 59): the grid users
vmap over must cost about a path, never a fallback decomposition per lane.

On ``lambdarank_sample`` (float32, x64 off, as on an accelerator) for ``Primal``,
``Dual(gaussian)`` and ``Nystrom(gaussian, 300)``: ``jax.jit(jax.vmap(fit))`` over 8 λ and
``jax.jit(path)`` over the same 8 λ, both giving the ``[8, m]`` training scores. One JSON line
per solver: compile and run seconds of each (median of 3 warm runs, ``block_until_ready``),
their ratio (the acceptance bound is 2), the largest relative difference of the two outputs
(the accuracy check) and the peak resident memory.

    python benchmarks/bench_vmap.py                  # about a minute on a 2-core CPU
"""
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rankjax as rj  # noqa: E402
from _timing import emit, time_jitted  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                    "lambdarank_sample", "rank.train")
LAMS = np.logspace(-1, 2.5, 8).astype(np.float32)


def solvers(X):
    gamma = 1.0 / (X.shape[1] * float(np.var(X)))
    k = rj.gaussian_kernel(gamma)
    return {"Primal": rj.Primal(), "Dual(gaussian)": rj.Dual(k), "Nystrom(gaussian, 300)":
            rj.Nystrom(k, rj.Basis(300, method="uniform"))}


def main():
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


if __name__ == "__main__":
    main()
