"""The smoke test of the oldest supported jax (.ci/oldest-jax): the closed forms, the
hold-outs (on the CPU's and the accelerators' code paths), CG, tune, sharding, the
kernel grid and a compiled loop with progress lines, against each other."""
import pathlib
import sys

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402

d = rj.make_ranking_data(20, num_features=5, seed=0)
g = rj.query_graph(d.qid)
w = np.asarray(rj.rankrls_primal(d.X, d.y, g, lam=1.0).weights)
h = rj.holdout_primal(d.X, d.y, g, lams=[0.1, 1.0])
hd = rj.holdout_dual(rj.kernel_matrix(rj.gaussian_kernel(0.2), d.X), d.y, g, lams=[1.0])
cg = rj.rankrls_cg(d.X, d.y, g, lam=1.0, options=rj.CG(tol=1e-10))
t = rj.tune(rj.Problem(d.X, d.y, g), rj.Primal(), steps=3)
sc = rj.sharded_cg(rj.shard_data(d.X, d.y, g), lam=1.0, options=rj.CG(tol=1e-10))
b = rj.rankboost(d.X, d.y, d.qid, rounds=5, verbose=1)
v = rj.make_ranking_data(6, num_features=5, seed=1)
grid = rj.sharded_kernel_grid(d.X, d.y, g, lams=[0.1, 1.0], gammas=[0.1, 1.0], valid=(v.X, v.y, v.qid))
from rankjax._core.backend import forced_paths  # noqa: E402
with forced_paths("accelerator"):          # the GPU/TPU code paths (batched factorisations)
    ha = rj.holdout_primal(d.X, d.y, g, lams=[0.1, 1.0], folds=2)
hc = rj.holdout_primal(d.X, d.y, g, lams=[0.1, 1.0], folds=2)
assert np.abs(np.asarray(ha.predictions) - np.asarray(hc.predictions)).max() < 1e-10
assert np.isfinite(np.asarray(grid.table)).all()
err = max(float(np.abs(np.asarray(r.weights) - w).max()) for r in (cg, sc))
assert err < 1e-8, err
assert np.all(np.isfinite(np.asarray(h.predictions))) and np.all(np.isfinite(np.asarray(hd.predictions)))
assert np.isfinite(t.loss_history).all() and b.alpha.shape == (5,)
print("smoke ok on jax", jax.__version__, err)
