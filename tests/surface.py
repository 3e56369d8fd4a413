"""The public-surface contract shared by the module tests: every public name driven
through bad and degenerate input (issue 11). Each test module holds the cases of its
own module's public names in a ``BAD_INPUT`` table and runs them with
:func:`surface_test`; ``tests/test_public_surface.py`` checks that every public name
has cases somewhere.

Cases are ``(call, expected)``: ``call(d)`` gets the small problem of :func:`make_problem`
(the ``surface`` fixture of ``conftest.py``); ``expected`` is ``E(ExceptionType,
"regex")`` or ``V(predicate)`` on the result.
"""
from types import SimpleNamespace

import numpy as np
import pytest

import rankjax as rj
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax import io


class E(SimpleNamespace):
    def __init__(self, exc, match):
        super().__init__(exc=exc, match=match)


class V(SimpleNamespace):
    def __init__(self, check):
        super().__init__(check=check)


def nan(x):
    return bool(np.all(np.isnan(np.asarray(x))))


PAIR_METRICS = ("pairwise_error", "cindex", "disagreement_error", "kendall_tau_b")
LIST_METRICS = ("ndcg", "mean_average_precision", "precision_at_k", "mrr")


def make_problem(tmp):
    """The small problem every case gets (``tmp`` a fresh directory)."""
    data = rj.make_ranking_data(5, num_features=4, docs_per_query=(4, 7), seed=0)
    X, y, qid = data.X, data.y, data.qid
    m, n = X.shape
    g = rj.query_graph(qid)
    K = X @ X.T
    pref = rj.preference_graph([0, 1, 2], [1, 2, 3], num_rows=m)
    bad_file = tmp / "bad.txt"
    bad_file.write_text("1 qid:1 1:0.5\n2 qid:1 x:1\n")
    good_file = tmp / "good.txt"
    good_file.write_text("1 qid:1 1:0.5 2:1\n2 qid:1 1:1\n")
    keep = tmp / "keep.txt"
    keep.write_text("old contents\n")
    model_file = tmp / "model.npz"
    io.save_model(model_file, np.ones(n))
    foreign = tmp / "foreign.npz"
    np.savez(foreign, w=np.ones(3))
    lpo = rj.holdout(rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True), rj.Dual(),
                     lams=[1.0], folds=rj.LeavePairOut(rj.differing_pairs(y)[:5])).value
    gp = gp_pairwise_gaussian(K, [0, 1], [1, 2], [1.0, 1.0], noise_var=1.0)
    holdout = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=[1.0, 10.0]).value
    return SimpleNamespace(X=X, y=y, qid=qid, m=m, n=n, g=g, K=K, pref=pref, tmp=tmp,
                           sharded=rj.scale.shard(rj.Problem(X, y, g)),
                           bad_file=bad_file, good_file=good_file, keep=keep,
                           model_file=model_file, foreign=foreign,
                           lpo=lpo, gp=gp, holdout=holdout, folds=rj.make_folds(g),
                           ties=np.zeros(m), nanv=np.r_[np.nan, np.zeros(m - 1)],
                           kern=rj.gaussian_kernel(0.5))


def metric_cases(fn, **kw):
    """The shared table of a per-query metric."""
    return [
        (lambda d: fn(d.nanv, d.y, d.qid, **kw), E(ValueError, "scores contains NaN")),
        (lambda d: fn(d.y, d.y[:-1], d.qid, **kw), E(ValueError, "y must have the shape")),
        (lambda d: fn(d.y, d.y, d.qid[:-1], **kw), E(ValueError, "qid")),
        (lambda d: fn(d.y, d.y, d.qid.astype(float), **kw), E(TypeError, "qid must be an integer")),
        (lambda d: fn(d.y, d.y, d.qid, num_queries=2.5, **kw), E(TypeError, "num_queries")),
        (lambda d: fn(d.y, d.y, d.qid + 100, num_queries=5, **kw), E(ValueError, "segment ids")),
        (lambda d: fn(np.zeros(0), np.zeros(0), **kw), E(ValueError, "scores is empty")),
        (lambda d: fn(d.y[:, None, None], d.y[:, None, None], **kw),
         E(ValueError, "scores must be 1-D")),
        (lambda d: fn(d.y[:, None], d.y[:, None], d.qid, **kw), E(ValueError, r"\[Q, L\] lists")),
        (lambda d: fn(d.y, d.y, d.qid, where=(d.qid > 0) * 1, **kw), E(TypeError, "where must be a bool")),
        (lambda d: fn(d.nanv, d.y, d.qid, where=np.isfinite(d.nanv), **kw),
         V(lambda v: nan(v) or np.isfinite(float(v)))),
        (lambda d: fn(d.y, d.y, d.qid, where=(d.qid > 0)[:-1], **kw), E(ValueError, "where must have")),
        # degenerate: size-1 queries and all-tied labels have no pair / no relevant document
        (lambda d: fn(d.y, np.zeros(d.m), d.qid, **kw), V(nan)),
        (lambda d: fn(d.y, d.y, np.arange(d.m), **kw),
         V(lambda v: nan(v) or 0 <= float(v) <= 1)),
        (lambda d: fn(d.y, d.y, d.qid, per_query=True, **kw),
         V(lambda r: r.values.shape == (5,) and r.valid.dtype == bool)),
    ]



def surface_test(cases):
    """The parametrised test of one module's ``BAD_INPUT`` table (assign it to a
    ``test_*`` name in that module)."""
    @pytest.mark.parametrize("name,i", [(n, i) for n in sorted(cases) for i in range(len(cases[n]))])
    def test_bad_and_degenerate_input(surface, name, i):
        call, expected = cases[name][i]
        if isinstance(expected, E):
            with pytest.raises(expected.exc, match=expected.match):
                call(surface)
        else:
            assert expected.check(call(surface)), f"{name} case {i}: not the documented value"
    return test_bad_and_degenerate_input
