"""Eager calls as a user makes them. Every solver (registry) takes numpy, pandas, JAX and
list inputs and answers alike; eager ``jax.grad`` (no ``jit`` around it) of the
differentiable entry points returns, on a 2-thread CPU, in float32 and float64, twice in a
row.

XLA:CPU runs independent LAPACK calls concurrently on its intra-op pool; jaxlib's
batched kernels then wait on that same pool, and with two threads two batched calls
wait on each other for ever (eager ``jax.grad(cv_loss)`` hung this way). The fold
systems are solved in plain XLA operations (``_small_solve.symmetric_solve``); this test runs
the calls in a subprocess pinned to two CPUs, with a timeout, and checks the gradients
against ``jax.jit(jax.grad(...))`` and finite differences.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from registry import LAMS, cases, data, inputs, predictions

ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import os, sys
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import rankjax as rj

    d = rj.make_ranking_data(100, num_features=10, seed=0)   # hung with LAPACK fold solves
    X64, y64 = np.asarray(d.X, np.float64), np.asarray(d.y, np.float64)
    g = rj.query_graph(d.qid)
    folds = rj.make_folds(g)

    def cases(X, y):
        return {
            "cv_loss": (lambda p: rj.cv_loss(p, rj.Problem(X, y, g), rj.Primal(), folds),
                        {"log_lam": jnp.asarray(0.5, X.dtype)}),
            "holdout_loss": (lambda l: jnp.sum((rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=l,
                                                           folds=folds).value.predictions - y) ** 2),
                             jnp.asarray([0.5, 2.0], X.dtype)),
            "cg": (lambda l: jnp.sum(rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-10), lam=l).value.weights ** 2),
                   jnp.asarray(2.0, X.dtype)),
        }

    for dtype in (np.float32, np.float64):
        X, y = jnp.asarray(X64, dtype), jnp.asarray(y64, dtype)
        for name, (f, p) in cases(X, y).items():
            for call in range(2):
                v = jax.block_until_ready(jax.grad(f)(p))
                leaves = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(v)]
                assert all(np.all(np.isfinite(a)) for a in leaves), (name, dtype, leaves)
            ref = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(jax.jit(jax.grad(f))(p))]
            tol = 1e-3 if dtype == np.float32 else 1e-9
            for a, b in zip(leaves, ref):
                assert np.allclose(a, b, rtol=tol, atol=tol), (name, dtype, a, b)
            print(name, np.dtype(dtype).name, "ok", flush=True)

    # finite differences of the float64 cv_loss gradient
    f = lambda t: rj.cv_loss({"log_lam": t}, rj.Problem(X64, y64, g), rj.Primal(), folds)
    gr = float(jax.grad(f)(0.5)); h = 1e-5
    fd = (float(f(0.5 + h)) - float(f(0.5 - h))) / (2 * h)
    assert abs(gr - fd) <= 1e-6 * max(1.0, abs(fd)), (gr, fd)
    print("finite differences ok")
""")


def test_eager_grad_returns_on_two_threads():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count(" ok") == 7, out.stdout


CASES, IDS = cases(verbs=("fit", "path", "holdout"))


def _as(kind, a):
    if kind == "pandas":
        pd = pytest.importorskip("pandas")
        return pd.DataFrame(a) if a.ndim == 2 else pd.Series(a)
    return {"numpy": np.asarray, "jax": jnp.asarray, "list": lambda v: v.tolist()}[kind](a)


def check_every_input_kind_answers_alike(entry, verb):
    """The verb eagerly on numpy, pandas, JAX and nested-list inputs (λ a Python, numpy or
    JAX scalar; a grid a list, tuple or array) gives the same predictions."""
    if verb not in ("fit", "path", "holdout"):
        return
    X, y, qid = data()
    A = inputs(entry, X)
    lams = [1.0, np.float64(1.0), jnp.asarray(1.0)] if verb == "fit" else [
        LAMS, list(LAMS), tuple(LAMS), jnp.asarray(LAMS)]
    outs = []
    for i, kind in enumerate(("numpy", "pandas", "jax", "list")):
        p = rj.Problem(_as(kind, A), _as(kind, y), _as(kind, qid),
                       precomputed=entry.kind == "kernel")
        lam = lams[i % len(lams)]
        sol = rj.fit(p, entry.solver, lam=lam) if verb == "fit" else getattr(rj, verb)(
            p, entry.solver, lams=lam)
        outs.append(predictions(verb, sol, A))
    for kind, out in zip(("pandas", "jax", "list"), outs[1:]):
        np.testing.assert_allclose(out, outs[0], rtol=1e-12, atol=1e-12 * np.max(np.abs(outs[0])),
                                   err_msg=f"{entry.name} {verb} {kind}")


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_every_solver_takes_every_input_kind(entry, verb):
    check_every_input_kind_answers_alike(entry, verb)
