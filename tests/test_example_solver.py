"""The solver written in ``examples/eigen_solver.py`` with the public extension API alone
(issue 67): every registry property of every property file holds for it, and it goes
through ``select``, ``tune``, the estimators and ``save_model``/``load_model``. Nothing
under ``rankjax/`` knows it."""
import importlib.util
import pathlib

import numpy as np
import pytest

import rankjax as rj
from registry import Entry, cases, checks

_PATH = pathlib.Path(__file__).resolve().parent.parent / "examples" / "eigen_solver.py"
_spec = importlib.util.spec_from_file_location("eigen_solver", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

ENTRY = Entry("example", example.EigenPrimal(), "features", "linear", rtol=1e-9)
CASES, IDS = cases([ENTRY])
CHECKS = checks()


def test_the_example_serves_every_verb_of_a_linear_solver():
    assert rj.capabilities(ENTRY.solver) == {"fit", "path", "holdout", "cv_predictions"}
    assert ENTRY.verbs() == ["fit", "path", "holdout"]


@pytest.mark.parametrize("name", sorted(CHECKS))
@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_every_registry_property_holds_for_the_example(name, entry, verb):
    CHECKS[name](entry, verb)


def test_select_tune_the_estimator_and_save_load_take_it(tmp_path):
    from rankjax.estimators import RankRLS
    d = rj.make_ranking_data(12, num_features=4, seed=2)
    p = rj.Problem(d.X, d.y, d.qid)
    lams = np.logspace(-2, 2, 5)
    mine, ref = (rj.select(p, [s], lams=lams) for s in (example.EigenPrimal(), rj.Primal()))
    np.testing.assert_allclose(mine.scores, ref.scores, rtol=1e-8)
    assert mine.lam == ref.lam
    r = rj.tune(p, example.EigenPrimal(), lam=1.0, steps=5)
    want = rj.tune(p, rj.Primal(), lam=1.0, steps=5)
    np.testing.assert_allclose(r.loss_history, want.loss_history, rtol=1e-9)
    est = RankRLS(lam=mine.lam, solver=example.EigenPrimal()).fit(d.X, d.y, qid=d.qid)
    rj.io.save_model(tmp_path / "m.rjm", est.model_)
    back, _ = rj.io.load_model(tmp_path / "m.rjm")
    np.testing.assert_allclose(rj.predict(back, d.X), est.predict(d.X), rtol=1e-12)
    np.testing.assert_allclose(est.predict(d.X), RankRLS(lam=mine.lam, solver="primal",
                                                         feature_map=None).fit(
        d.X, d.y, qid=d.qid).predict(d.X), rtol=1e-7, atol=1e-9)
