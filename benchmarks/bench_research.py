"""Issue 90's research example measured on ``lambdarank_sample`` (float32, x64 off): a network
whose features feed the exact leave-query-out hold-out of a linear RankRLS head, trained
end to end with optax, beside the estimators at their defaults.

* ``network``: the rank map's columns and ``H`` learned ``tanh`` features (one layer) feed
  a linear RankRLS head; the parameters and log λ descend (AdamW) the head's exact hold-out
  loss (:func:`rankjax.cv_loss`, ``Primal``) on 80 % of the training queries; every 10 steps
  the head refitted there is scored on the other 20 % (validation NDCG@10), and the best
  step's features, the head refitted on every training query, give the test NDCG@10.
* ``learned kernel``: ``RankRLSCV(kernel="gaussian", optimize=True, ard=True)`` (the hold-out's
  gradient learns one scale per column, γ and λ);
* ``kernel default`` and ``linear default``: ``RankRLSCV(kernel="gaussian")``, ``RankRLSCV()``.

One JSON line each; ``--readme docs/from_rax.md`` writes the page's block from them.

    python benchmarks/bench_research.py --save benchmarks/lines/research.jsonl   # ~3 min
    python benchmarks/bench_research.py --lines benchmarks/lines/research.jsonl --readme docs/from_rax.md
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lib.shared import SHARED  # noqa: E402
from lib.timing import EMITTED, emit  # noqa: E402

HIDDEN, STEPS, EVERY, LR, DECAY = 16, 100, 10, 3e-3, 0.1


def data():
    import rankjax as rj
    root = SHARED / "lambdarank_sample"
    tr = rj.io.read_svmlight(root / "rank.train")
    te = rj.io.read_svmlight(root / "rank.test", num_features=tr.X.shape[1])
    return [np.asarray(a) for a in (tr.X, tr.y, tr.qid, te.X, te.y, te.qid)]


def network(X, y, q, Xt, yt, qt, seed=0):
    """The end-to-end run: its JSON fields."""
    import optax
    import rankjax as rj
    fm = rj.learn_feature_map(X, kind="rank")
    U, Ut = np.asarray(fm(X), np.float32), np.asarray(fm(Xt), np.float32)
    rng = np.random.default_rng(seed)
    uq = np.unique(q)
    valid = np.isin(q, rng.choice(uq, uq.size // 5, replace=False))
    k1, _ = jax.random.split(jax.random.PRNGKey(seed))
    params = {"W": jax.random.normal(k1, (U.shape[1], HIDDEN)) / np.sqrt(U.shape[1]),
              "b": jnp.zeros(HIDDEN), "log_lam": jnp.array(2.0)}

    def features(p, A):
        return jnp.concatenate([A, jnp.tanh(A @ p["W"] + p["b"])], axis=1)

    train = rj.Problem(U[~valid], y[~valid], q[~valid])
    folds = rj.make_folds(train.graph)

    def loss(p):
        return rj.cv_loss({"log_lam": p["log_lam"]}, rj.Problem(features(p, U[~valid]), train.y,
                                                                  train.graph), rj.Primal(), folds)

    opt = optax.adamw(LR, weight_decay=DECAY)

    @jax.jit
    def step(p, s):
        v, g = jax.value_and_grad(loss)(p)
        upd, s = opt.update(g, s, p)
        return v, optax.apply_updates(p, upd), s

    def ndcg(p, A, ya, qa, B, yb, qb):
        head = rj.fit(rj.Problem(features(p, A), ya, qa), rj.Primal(),
                      lam=float(jnp.exp(p["log_lam"]))).value
        return float(rj.ndcg(np.asarray(rj.predict(head, features(p, B))), yb, qb, k=10))

    state, losses, scores, kept = opt.init(params), [], [], []
    t0 = time.perf_counter()
    for i in range(STEPS + 1):
        if i % EVERY == 0:
            scores.append(ndcg(params, U[~valid], y[~valid], q[~valid], U[valid], y[valid],
                               q[valid]))
            kept.append(params)
        if i < STEPS:
            v, params, state = step(params, state)
            losses.append(float(v))
    best = int(np.argmax(scores))
    return dict(hidden=HIDDEN, steps=STEPS, fit_s=round(time.perf_counter() - t0, 2),
                cv_loss_first=losses[0], cv_loss_last=losses[-1],
                valid_ndcg10_first=scores[0], valid_ndcg10_best=scores[best],
                best_step=best * EVERY,
                ndcg10=ndcg(kept[best], U, y, q, Ut, yt, qt),
                ndcg10_last_step=ndcg(params, U, y, q, Ut, yt, qt))


def run():
    jax.config.update("jax_enable_x64", False)
    from rankjax.estimators import RankRLSCV
    X, y, q, Xt, yt, qt = data()
    shape = list(X.shape)
    emit(name="research", learner="network", dtype="float32", shape=shape,
         **network(X, y, q, Xt, yt, qt))
    for label, kw in (("kernel default", {"kernel": "gaussian"}), ("linear default", {}),
                      ("learned kernel", {"kernel": "gaussian", "optimize": True, "ard": True})):
        t0 = time.perf_counter()
        m = RankRLSCV(**kw).fit(X.astype(np.float32), y, qid=q)
        fit_s = time.perf_counter() - t0
        emit(name="research", learner=label, dtype="float32", shape=shape,
             fit_s=round(fit_s, 2), cv_ndcg10=float(m.best_score_),
             ndcg10=float(m.score(Xt.astype(np.float32), yt, qid=qt)))


def render(lines):
    """The page's block: one row per learner."""
    rows = ["| learner | test NDCG@10 | fit s | what the run showed |", "| --- | --- | --- | --- |"]
    for ln in lines:
        if ln.get("name") != "research":
            continue
        if ln["learner"] == "network":
            what = (f"hold-out loss {ln['cv_loss_first']:.3f} to {ln['cv_loss_last']:.3f}; "
                    f"validation NDCG@10 {ln['valid_ndcg10_first']:.4f} at step 0, best "
                    f"{ln['valid_ndcg10_best']:.4f} at step {ln['best_step']}; the last step's "
                    f"features: test {ln['ndcg10_last_step']:.4f}")
            label = f"network ({ln['hidden']} tanh features) + RankRLS head, end to end"
        else:
            what = f"leave-query-out NDCG@10 {ln['cv_ndcg10']:.4f}"
            label = f"`RankRLSCV`, {ln['learner']}"
        rows.append(f"| {label} | {ln['ndcg10']:.4f} | {ln['fit_s']:.1f} | {what} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    from lib.blocks import add_arguments, from_lines, rewrite, save_lines
    add_arguments(ap, "research")
    args = ap.parse_args()
    if from_lines(args, "research", render):
        return
    run()
    if args.save:
        save_lines(args.save, EMITTED)
    if args.readme:
        rewrite(args.readme, "research", render(EMITTED))


if __name__ == "__main__":
    main()
