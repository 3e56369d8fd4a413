"""The precision rule's measurement (issue 41), shared by ``bench_precision.py``,
``bench_sweep.py`` and ``tests/test_float32_real.py``: every λ-solving call in float32
against float64, the error of each lane on the ordering (:func:`centred`) and the pairs it
flips."""
import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import rankjax as rj

from .shared import SHARED

LAMS = np.logspace(-4, 3, 15)
DATA = os.path.join(SHARED, "lambdarank_sample", "rank.train")


def near_collinear():
    """LETOR-like rows, six near-duplicate columns (differences of 1e-3), a zero and a ones
    column, then scaled by 3 and shifted by 5: every column far from 0, two constant."""
    d = rj.make_ranking_data(30, num_features=12, seed=4)
    X = np.asarray(d.X, np.float64)
    rng = np.random.default_rng(0)
    near = X[:, :6] + 1e-3 * rng.standard_normal((X.shape[0], 6))
    X = np.hstack([X, near, np.zeros((X.shape[0], 1)), np.ones((X.shape[0], 1))]) * 3 + 5
    return X, np.asarray(d.y, np.float64), np.asarray(d.qid)


def lambdarank():
    """``(X, y, qid)`` of lambdarank_sample's training file, or None when it is absent."""
    if not os.path.exists(DATA):
        return None
    d = rj.io.read_svmlight(DATA)
    return np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)


def calls(X, y, qid, dtype):
    """``{name: () -> [L, ...] predictions}`` of every λ-solving verb and solver in ``dtype``:
    training scores for fits and paths, hold-out predictions for hold-outs; kernels
    Gaussian with γ = 1 / (n var X), the Nyström basis every third row, leave-pair-out on
    at most 500 rows."""
    Xd, yd = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
    g = rj.query_graph(qid)
    folds = rj.make_folds(g)
    kern = rj.gaussian_kernel(1.0 / (X.shape[1] * X.var()))
    basis = np.arange(0, len(y), 3)
    K = rj.kernel_matrix(kern, Xd)
    lams = jnp.asarray(LAMS, dtype)
    sub = np.arange(0, len(y), max(1, len(y) // 500))[:500]
    pairs = rj.differing_pairs(y[sub])[::7]
    return {
        "fit Primal": lambda: jnp.stack(
            [rj.predict(rj.fit(rj.Problem(Xd, yd, g), rj.Primal(), lam=lam).value, Xd) for lam in lams]
        ),
        "path Primal": lambda: rj.predict(rj.path(rj.Problem(Xd, yd, g), rj.Primal(), lams=lams).value, Xd),
        "holdout Primal": lambda: (
            rj.holdout(rj.Problem(Xd, yd, g), rj.Primal(), lams=lams, folds=folds).value.predictions
        ),
        "holdout Primal 5-fold": lambda: (
            rj.holdout(rj.Problem(Xd, yd, g), rj.Primal(), lams=lams, folds=5).value.predictions
        ),
        "path Nystrom": lambda: rj.predict(
            rj.path(rj.Problem(Xd, yd, g), rj.Nystrom(kern, basis), lams=lams).value, Xd
        ),
        "holdout Nystrom": lambda: (
            rj.holdout(
                rj.Problem(Xd, yd, g), rj.Nystrom(kern, basis), lams=lams, folds=folds
            ).value.predictions
        ),
        "fit Dual": lambda: jnp.stack(
            [
                rj.fit(rj.Problem(K, yd, g, precomputed=True), rj.Dual(), lam=lam).value.predict(K)
                for lam in lams
            ]
        ),
        "path Dual": lambda: (
            rj.path(rj.Problem(K, yd, g, precomputed=True), rj.Dual(), lams=lams).value.train_scores
        ),
        "holdout Dual": lambda: (
            rj.holdout(
                rj.Problem(K, yd, g, precomputed=True), rj.Dual(), lams=lams, folds=folds
            ).value.predictions
        ),
        "leave-pair-out Primal": lambda: (
            rj.holdout(
                rj.Problem(Xd[sub], yd[sub], rj.global_graph(np.shape(Xd[sub])[0])),
                rj.Primal(),
                lams=lams,
                folds=rj.LeavePairOut(pairs),
            ).value.predictions
        ),
        "leave-pair-out Dual": lambda: (
            rj.holdout(
                rj.Problem(
                    K[np.ix_(sub, sub)],
                    yd[sub],
                    rj.global_graph(np.shape(K[np.ix_(sub, sub)])[0]),
                    precomputed=True,
                ),
                rj.Dual(),
                lams=lams,
                folds=rj.LeavePairOut(pairs),
            ).value.predictions
        ),
    }


def both(data):
    """``{name: (float64 [L, ...], float32 [L, ...], warning messages, s64, s32)}``."""
    X, y, qid = data
    res = {}
    with jax.enable_x64(True):
        for name, fn in calls(X, y, qid, np.float64).items():
            t0 = time.perf_counter()
            res[name] = [np.asarray(fn(), np.float64), time.perf_counter() - t0]
    with jax.enable_x64(False):
        for name, fn in calls(X, y, qid, np.float32).items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                out = fn()
                s32 = time.perf_counter() - t0
            named = [str(w.message) for w in caught if issubclass(w.category, rj.UnresolvedLambdaWarning)]
            assert out.dtype == jnp.float32, name
            s64 = res[name][1]
            res[name] = (res[name][0], np.asarray(out, np.float64), named, s64, s32)
    return res


def centred(out, qid):
    """``[L, r]``: predictions ``[L, m]`` centred within each query of ``qid``, or the
    differences of leave-pair-out's ``[L, p, 2]`` pair predictions."""
    out = np.asarray(out, np.float64)
    if out.ndim == 3:
        return out[..., 0] - out[..., 1]
    _, inv = np.unique(qid, return_inverse=True)
    means = np.stack([np.bincount(inv, row) for row in out]) / np.bincount(inv)
    return out - means[:, inv]


def flipped(c64, c32, qid):
    """``[L]``: the share of pairs whose order float64 decides (a gap above float32's rounding
    of the lane's scores) and float32 reverses (pairs within a query of ``qid``;
    ``qid=None``: ``c`` are leave-pair-out's pair differences)."""
    tol = 8 * np.finfo(np.float32).eps * np.abs(c64).max(1)          # float32's rounding [L]

    def decided(d):
        return np.sign(d) * (np.abs(d) > tol.reshape((-1,) + (1,) * (d.ndim - 1)))

    if qid is None:
        d64 = decided(c64)
        return (d64 * np.sign(c32) < 0).sum(1) / np.maximum((d64 != 0).sum(1), 1)
    flips, total = np.zeros(len(c64)), np.zeros(len(c64))
    for q in np.unique(qid):
        i = np.flatnonzero(qid == q)
        d64 = decided(c64[:, i, None] - c64[:, None, i])
        d32 = np.sign(c32[:, i, None] - c32[:, None, i])
        flips += ((d64 * d32) < 0).sum((1, 2))
        total += (d64 != 0).sum((1, 2))
    return flips / np.maximum(total, 1)


def lane_errors(out64, out32, qid):
    """``(refused [L] bool, centred relative L2 error [L], flipped pairs [L])``, NaN where
    refused."""
    a, b = centred(out32, qid).reshape(len(LAMS), -1), centred(out64, qid).reshape(len(LAMS), -1)
    refused = np.isnan(a).all(1)
    return (refused, np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1),
            np.where(refused, np.nan, flipped(b, np.nan_to_num(a),
                                              None if np.ndim(out64) == 3 else qid)))


