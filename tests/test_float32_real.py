"""The precision rule on real data (issue 41): every function that solves for a λ, in
float32 (x64 off, JAX's default), against the same call in float64, on ``lambdarank_sample``
(3,005 x 300, rank 211, 82 constant columns) and on a near-collinear synthetic problem
(near-duplicate columns, constant columns, features far from 0).

Per λ of ``logspace(-4, 3, 15)`` a lane is either within 1e-2 (relative L2 of the
predictions: training scores for fits and paths, hold-out predictions for hold-outs) of
float64, or NaN for the whole lane with an :class:`UnresolvedLambdaWarning` naming that
λ. Before the rule, the primal path was 7.3 off at λ = 1e-4 and the Nyström hold-out 63x,
without a word.

The real-data fixture (9 minutes on a 2-core CPU) and the kernel estimators on it are marked
``slow`` (``RANKJAX_SLOW=1``); by default the near-collinear problem (rank-deficient, constant
and near-duplicate columns) runs every function and the linear estimator runs on the real data.
"""
import pathlib
import re
import sys

import jax
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from precision import within  # noqa: E402
from lib.precision import LAMS, both, lambdarank as _lambdarank, lane_errors, near_collinear  # noqa: E402

BOUND = 1e-2
TIGHTER = {("near_collinear", "fit Dual"): 3e-3, ("near_collinear", "path Nystrom"): 3e-3,
           ("near_collinear", "holdout Nystrom"): 3e-3, ("lambdarank_sample", "holdout Dual"): 5e-3}
"""Where a function answers far inside the rule (observed at most 8e-5 here, 9e-5 for the dual
hold-out on lambdarank_sample), a bound within 100x of it (docs/float32_tests.md)."""
MOST_REFUSED = {
    ("lambdarank_sample", "path Dual"): 5, ("lambdarank_sample", "holdout Dual"): 7,
    ("lambdarank_sample", "leave-pair-out Primal"): 8,
    ("lambdarank_sample", "leave-pair-out Dual"): 11,
    ("near_collinear", "path Dual"): 3, ("near_collinear", "holdout Dual"): 5,
    ("near_collinear", "leave-pair-out Primal"): 15,
    ("near_collinear", "leave-pair-out Dual"): 10,
    ("lambdarank_sample", "path Nystrom"): 6, ("lambdarank_sample", "holdout Nystrom"): 6,
    ("near_collinear", "path Nystrom"): 5, ("near_collinear", "holdout Nystrom"): 5,
}
"""How many λ of the grid (the smallest) a function may refuse: what it refuses here (the
README's precision table; measured 2, 4, 15 and 9 on the near-collinear problem; the Nyström
path and hold-out below the features' floor, 5 and 4) and one
lane more, a floor that falls the other side of a grid point on another machine; every
other function answers the whole grid (a function refusing every λ fails)."""
NAMES = ["fit Primal", "path Primal", "holdout Primal", "holdout Primal 5-fold",
         "path Nystrom", "holdout Nystrom", "fit Dual", "path Dual",
         "holdout Dual", "leave-pair-out Primal", "leave-pair-out Dual"]


def lambdarank():
    data = _lambdarank()
    if data is None:
        pytest.skip("../shared/data/lambdarank_sample is not beside the repository")
    return data


@pytest.fixture(scope="module", params=[pytest.param("lambdarank_sample", marks=pytest.mark.slow),
                                        "near_collinear"])
def results(request):
    data = lambdarank() if request.param == "lambdarank_sample" else near_collinear()
    return request.param, both(data), data[2]


def _named(messages):
    """The λ values the warnings name."""
    found = set()
    for msg in messages:
        listed = re.search(r"lams (.*?) are", msg).group(1)
        found |= {float(v) for v in listed.split(", ")}
    return found


@pytest.mark.parametrize("name", NAMES)
def test_every_lambda_is_resolved_or_nan_with_a_warning(results, name):
    """Each λ within the bound on the ordering (the scores centred within queries, relative
    L2; leave-pair-out: the pairs' differences) or refused, its lane NaN and named."""
    case, res, qid = results
    out64, out32, messages = res[name][:3]
    assert np.all(np.isfinite(out64)), f"{case} {name}: float64 must resolve the whole grid"
    lanes32 = out32.reshape(len(LAMS), -1)
    nan = np.isnan(lanes32)
    assert np.all(nan.all(1) | ~nan.any(1)), f"{case} {name}: a lane is partly NaN"
    refused = nan.all(1)
    named = _named(messages)
    for lam, off in zip(LAMS, refused):
        assert off == any(abs(lam - v) <= 1e-3 * lam for v in named), (case, name, lam, messages)
    ok = ~refused
    assert not refused[np.argmax(ok):].any() if ok.any() else True, (case, name, refused)
    most = MOST_REFUSED.get((case, name), 0)            # refusals: the smallest λ, as documented
    assert refused.sum() <= most, f"{case} {name}: {refused.sum()} λ refused (at most {most})"
    err = lane_errors(out64, out32, qid)[1][ok]
    for lam, e in zip(LAMS[ok], err):
        within(e, TIGHTER.get((case, name), BOUND), f"{name} ({case})")


def test_the_primal_functions_refuse_nothing_on_lambdarank(results):
    """Where accuracy is cheap it is had: the primal fits, paths and hold-outs answer every
    λ of the grid on the real data (the dual shortcuts and the Nyström features refuse their
    documented floors)."""
    case, res, _ = results
    for name in ("fit Primal", "path Primal", "holdout Primal", "holdout Primal 5-fold",
                 "fit Dual"):
        assert not np.isnan(res[name][1]).any(), (case, name)


@pytest.mark.parametrize("kw", [{}, pytest.param({"kernel": "gaussian"}, marks=pytest.mark.slow),
                                pytest.param({"kernel": "gaussian", "basis": 1000},
                                             marks=pytest.mark.slow)],
                         ids=["linear", "gaussian", "gaussian-basis"])
def test_rankrlscv_chooses_among_resolved_lambdas(kw):
    """``RankRLSCV`` in float32 as a GPU user calls it (numpy float64 inputs, x64 off): its
    ``cv_results_`` match float64's within 1e-2 wherever float32 resolves the λ, the λ it
    does not resolve are NaN there, and the choice is one it resolves."""
    from rankjax.estimators import RankRLSCV
    X, y, qid = lambdarank()
    scores = {}
    for x64 in (True, False):
        with jax.enable_x64(x64):
            est = RankRLSCV(**kw).fit(X, y, qid=qid)
        scores[x64] = np.asarray(est.cv_results_["mean_test_score"], np.float64)
        if not x64:
            chosen = np.flatnonzero(np.asarray(est.cv_results_["rank_test_score"]) == 1)[0]
            assert np.isfinite(scores[False][chosen]) and np.isfinite(est.best_score_)
    assert np.all(np.isfinite(scores[True]))
    ok = np.isfinite(scores[False])
    assert ok.sum() >= len(ok) // 2
    assert np.max(np.abs(scores[False][ok] - scores[True][ok])) < BOUND


MQ2008 = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "mq2008" / "S1.txt.gz"


@pytest.mark.skipif(not MQ2008.exists(), reason="../shared/data is absent")
@pytest.mark.parametrize("spread", [1.5, 3.0])
def test_the_primal_holdout_on_columns_of_spread_scales_is_answered_or_refused(spread):
    """Raw columns of very different scales (MQ2008's first 80 queries, column ``j`` times
    ``exp(spread z_j)``, the sweep's distortion): every float32 hold-out lane is within 1e-2
    of float64 or NaN. A float64 ``eigh`` of ``X^T L X`` whose vectors are applied to the rows
    in float32 answered λ = 1e-5 4,160x off here (docs/precision.md)."""
    import jax.numpy as jnp
    import warnings
    import rankjax as rj
    d = rj.io.read_svmlight(MQ2008)
    q = np.asarray(d.qid)
    keep = np.isin(q, np.unique(q)[:80])
    X, y, q = np.asarray(d.X, float)[keep], np.asarray(d.y, float)[keep], q[keep]
    X = X * np.exp(spread * np.random.default_rng(0).standard_normal(X.shape[1]))
    lams = np.logspace(-5, 2, 6)
    out = {}
    for dt in (np.float64, np.float32):
        with jax.enable_x64(dt == np.float64), warnings.catch_warnings():
            warnings.simplefilter("ignore", rj.UnresolvedLambdaWarning)
            p = rj.Problem(jnp.asarray(X, dt), jnp.asarray(y, dt), rj.query_graph(q))
            out[dt] = np.asarray(rj.holdout(p, rj.Primal(), lams=jnp.asarray(lams, dt))
                                 .value.predictions, np.float64)
    from lib.precision import centred
    c32, c64 = centred(out[np.float32], q), centred(out[np.float64], q)
    answered = np.isfinite(c32).all(axis=1)
    err = np.linalg.norm(np.nan_to_num(c32) - c64, axis=1) / np.linalg.norm(c64, axis=1)
    assert np.all(err[answered] <= BOUND), (err, answered)
