"""The dual shortcuts in float32 at small λ (issue 24, class 11).

Each shortcut is computed in float32 and in float64 on the same data. A λ below the
float32 floor of its spectrum (``RESOLVE_RTOL[kind] * eps * largest eigenvalue``; the path
refined in float64, ``"refined"``; the hold-out's ``HOLDOUT_SQRT_EPS * sqrt(eps) * largest``)
must give a NaN lane and an
:class:`UnresolvedLambdaWarning` naming it; every other lane must agree with float64 within
1e-2 near the floor, less above it (as eps Γ / λ). Before the floor existed these lanes were
5-170x off without a word.
"""
import warnings

import jax
import numpy as np
import pytest

import rankjax as rj
from rankjax.solvers.floors import HOLDOUT_SQRT_EPS, RESOLVE_RTOL
from rankjax.solvers.ridge import dual_system
from precision import within

EPS32 = float(np.finfo(np.float32).eps)
LAMS = 10.0 ** np.arange(-7.0, 3.5, 0.5)


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(12, num_features=6, seed=3)
    X, y, qid = np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.1), X))
    return X, y, qid, K


def _rel(a, b):
    ax = tuple(range(1, b.ndim))
    return np.linalg.norm(a - b, axis=ax) / np.linalg.norm(b, axis=ax)


def _float32(fn):
    """``fn`` in float32 compute; returns (result as float64, the warnings raised)."""
    with jax.enable_x64(False), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = np.asarray(fn(np.float32), np.float64)
    return out, [x for x in w if issubclass(x.category, rj.UnresolvedLambdaWarning)]


def _check_lanes(out32, out64, floor, caught, what):
    below, above = LAMS < floor / 2, LAMS > floor * 2
    assert np.all(np.isfinite(out64[LAMS > floor / 100])), "float64 resolves the grid near the floor"
    assert below.any() and above.any()                     # the grid straddles the floor
    nan_lane = np.isnan(out32).reshape(len(LAMS), -1).all(1)
    assert nan_lane[below].all()
    # above the floor the rounding probe of K (dual shortcuts) may refuse more lanes, never
    # far above it, and never part of a lane
    assert not nan_lane[LAMS > 100 * floor].any()
    answered = above & ~nan_lane
    assert not np.isnan(out32[answered]).any()
    # the rounding is eps Γ / λ amplified: the README's 1e-2 near the floor, falling above it
    # (measured: as λ^-0.5 to λ^-1) down to the data's own rounding
    errors = _rel(out32[answered], out64[answered])
    for lam, err in zip(LAMS[answered], errors):
        within(err, min(1e-2, 3e-2 * np.sqrt(floor / lam)) + 30 * EPS32, f"{what} above its floor")
    assert len(caught) == 1, [str(w.message) for w in caught]        # one warning per call
    assert "float32" in str(caught[0].message)
    assert f"{LAMS[0]:.3g}" in str(caught[0].message)


def _dual_floor(K, y, qid, kind):
    G = np.asarray(dual_system(K, y, rj.query_graph(qid)).G)
    rtol = (HOLDOUT_SQRT_EPS * np.sqrt(EPS32) if kind == "holdout"
            else RESOLVE_RTOL["refined"] * EPS32)                       # float32 refines a path
    return rtol * np.linalg.eigvalsh(G).max()


def _pairs(y):
    return rj.differing_pairs(y)[:400]


SHORTCUTS = {
    "dual_path": (
        lambda K, y, qid, lams: (
            rj.path(
                rj.Problem(K, y, rj.query_graph(qid), precomputed=True), rj.Dual(), lams=lams
            ).value.train_scores
        ),
        "path",
    ),
    "holdout_dual": (
        lambda K, y, qid, lams: (
            rj.holdout(
                rj.Problem(K, y, rj.query_graph(qid), precomputed=True), rj.Dual(), lams=lams
            ).value.predictions
        ),
        "holdout",
    ),
    "leave_pair_out_dual": (
        lambda K, y, qid, lams: (
            rj.holdout(
                rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True),
                rj.Dual(),
                lams=lams,
                folds=rj.LeavePairOut(_pairs(np.asarray(y, np.float64))),
            ).value.predictions
        ),
        "pairs",
    ),
}


@pytest.mark.parametrize("name", SHORTCUTS)
def test_dual_shortcut_in_float32(data, name):
    X, y, qid, K = data
    run, kind = SHORTCUTS[name]
    out64 = np.asarray(run(K, y, qid, LAMS))
    out32, caught = _float32(lambda t: run(K.astype(t), y.astype(t), qid, LAMS.astype(t)))
    if kind == "pairs":
        floor = RESOLVE_RTOL[kind] * EPS32 * (K.shape[0] - 2) * np.linalg.eigvalsh(K).max()
    else:
        floor = _dual_floor(K, y, qid, kind)
    _check_lanes(out32, out64, floor, caught, name)


def test_leave_pair_out_primal_is_resolved_at_every_lambda(data):
    # full-rank features: no cancellation, so no floor and no NaN lane
    X, y, qid, _ = data
    pairs = rj.differing_pairs(y)[:400]
    out64 = np.asarray(rj.holdout(rj.Problem(X, y, rj.global_graph(np.shape(X)[0])), rj.Primal(), lams=LAMS,
                                  folds=rj.LeavePairOut(pairs)).value.predictions)
    out32, caught = _float32(
        lambda t: (
            rj.holdout(
                rj.Problem(X.astype(t), y.astype(t), rj.global_graph(np.shape(X.astype(t))[0])),
                rj.Primal(),
                lams=LAMS.astype(t),
                folds=rj.LeavePairOut(pairs),
            ).value.predictions
        )
    )
    assert not caught
    within(_rel(out32, out64).max(), 4000 * EPS32, "primal leave-pair-out")


def test_under_jit_the_lanes_are_nan_without_a_warning(data):
    X, y, qid, K = data
    g = rj.query_graph(qid)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jax.jit(lambda K, y, lams: rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(),
                                                    lams=lams).value.predictions)(
            K.astype(np.float32), y.astype(np.float32), LAMS.astype(np.float32))
    out = np.asarray(out)
    assert np.isnan(out[0]).all() and np.isfinite(out[-1]).all()


def test_a_kernel_grid_on_validation_data_is_nan_below_the_floor(data):
    X, y, qid, K = data
    v = rj.make_ranking_data(4, num_features=6, seed=9)
    valid = rj.Problem(np.asarray(v.X, np.float32), np.asarray(v.y, np.float32), np.asarray(v.qid))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore", rj.UnresolvedLambdaWarning)
        grid = rj.select(rj.Problem(X.astype(np.float32), y.astype(np.float32), qid, valid=valid),
                         [rj.Dual(rj.gaussian_kernel(0.1))], lams=LAMS.astype(np.float32),
                         metric=rj.pairwise_error)
    table = np.asarray(grid.scores)                      # one γ: the λ grid
    assert np.isnan(table[LAMS < _dual_floor(K, y, qid, "path") / 2]).all()
    assert np.isfinite(table[LAMS > 2 * _dual_floor(K, y, qid, "path")]).all()
    assert grid.lam > _dual_floor(K, y, qid, "path")
