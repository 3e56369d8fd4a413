"""No public function takes a keyword it does not use (issue 24, class 2).

Every public callable of ``rankjax``, ``rankjax.io``, ``rankjax.estimators`` and
``rankjax.plot`` either has no ``**kwargs`` or forwards them to something that checks
them (a metric's own options, a model's ``predict``, ``ranksvm_l2``); each of those is
called here with a misspelt option and must raise a ``TypeError`` naming it.
"""
import inspect

import numpy as np
import pytest

import rankjax as rj
from rankjax.selection.cv import cross_validate
from rankjax.metrics.choice import select_lambda
from rankjax import estimators, io, plot

FORWARDED = {"metric_kwargs", "kw", "tron_kw", "meta"}


def _public():
    """Every public callable, and those that left the top level (still reachable)."""
    for mod in (rj, io, estimators, plot, rj.scale):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and not inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj
    for name, obj in INTERNAL.items():
        yield f"rankjax.{name}", obj


def test_only_checked_forwarding_takes_extra_keywords():
    takes = {}
    for name, fn in _public():
        var = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.VAR_KEYWORD]
        if var:
            takes[name] = var[0]
    assert set(takes.values()) <= FORWARDED, takes
    assert set(takes) == set(CALLS) | {"rankjax.io.save_model"}, sorted(set(takes) ^ set(CALLS))


INTERNAL = {"select_lambda": select_lambda, "cross_validate": cross_validate}


@pytest.fixture(scope="module")
def d():
    return rj.make_ranking_data(8, num_features=4, seed=0)


CALLS = {
    "rankjax.select_lambda": lambda d, g: select_lambda(
        [1.0], d.X[:, :1].T, d.y, d.qid, metric=rj.ndcg, maxiter=0
    ),
    "rankjax.cross_validate": lambda d, g: cross_validate(
        rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=[1.0]).value,
        d.y,
        d.qid,
        metric=rj.ndcg,
        maxiter=0,
    ),
    "rankjax.permutation_test": lambda d, g: rj.permutation_test(
        rj.Problem(d.X, d.y, g), rj.Primal(), lams=[1.0], metric=rj.ndcg, num_permutations=2, maxiter=0
    ),
    "rankjax.predict": lambda d, g: rj.predict(rj.LinearModel(np.ones(4)), d.X, maxiter=0),
    "rankjax.ranksvm_kernel": lambda d, g: rj.ranksvm_kernel(
        d.X, d.y, d.qid, kernel=rj.gaussian_kernel(0.1), maxiter=0
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_unknown_keyword_is_a_type_error_naming_it(d, name):
    with pytest.raises(TypeError, match="maxiter"):
        CALLS[name](d, rj.query_graph(d.qid))


def test_metric_options_still_reach_the_metric(d):
    g = rj.query_graph(d.qid)
    h = rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=[0.1, 10.0]).value
    a = cross_validate(h, d.y, d.qid, metric=rj.ndcg, k=3).table
    b = [float(rj.ndcg(p, d.y, d.qid, k=3)) for p in h.predictions]
    np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("cls", [getattr(estimators, n) for n in estimators.__all__
                                 if n not in ("load", "permutation_importance")])
def test_estimators_refuse_unknown_keywords(d, cls):
    with pytest.raises(TypeError, match="maxiter"):
        cls(maxiter=3)
    targets = ({"time": d.y + 1.0, "event": d.y > 0} if issubclass(cls, estimators.SurvivalRankRLS)
               else {"y": d.y, "qid": d.qid})
    with pytest.raises(TypeError, match="maxiter"):
        cls().fit(d.X, **targets, maxiter=3)
