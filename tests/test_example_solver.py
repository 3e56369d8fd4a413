"""The solver written in ``examples/eigen_solver.py`` with the public extension API alone
(issue 67): every registry property of every property file holds for it, and it goes
through ``select``, ``tune``, the estimators and ``save_model``/``load_model``; it and a
second solver class of this file save and load through the estimators, pickle and joblib,
in this process and a fresh one, with no registration step (issue 77). Nothing under
``rankjax/`` knows them."""
import importlib.util
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

import rankjax as rj
from registry import Entry, cases, checks

_PATH = pathlib.Path(__file__).resolve().parent.parent / "examples" / "eigen_solver.py"
_spec = importlib.util.spec_from_file_location("eigen_solver", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)
sys.modules.setdefault("eigen_solver", example)     # as ``import eigen_solver`` would


@rj.solvers.solver
class ShrunkPrimal(rj.AbstractSolver):
    """A second solver of one's own, with a static field: linear RankRLS at ``λ + shift``."""
    shift: float = 0.0

    def fit(self, problem, lam, state):
        return rj.Primal().fit(problem, lam + self.shift, state)

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


@pytest.mark.parametrize("make", [lambda: example.EigenPrimal(), lambda: ShrunkPrimal(0.5)],
                         ids=["EigenPrimal", "ShrunkPrimal"])
def test_a_solver_of_ones_own_saves_and_loads_through_the_estimators(make, tmp_path):
    import joblib
    from rankjax.estimators import RankRLS, load
    d = rj.make_ranking_data(10, num_features=4, seed=3)
    est = RankRLS(lam=2.0, solver=make()).fit(d.X, d.y, qid=d.qid)
    want = est.predict(d.X)
    est.save(tmp_path / "m.npz")
    joblib.dump(est, tmp_path / "m.joblib")
    for back in (load(tmp_path / "m.npz"), pickle.loads(pickle.dumps(est)),
                 joblib.load(tmp_path / "m.joblib")):
        assert back.solver == est.solver and type(back.solver) is type(est.solver)
        np.testing.assert_allclose(back.predict(d.X), want, rtol=1e-12)
        np.testing.assert_allclose(back.fit(d.X, d.y, qid=d.qid).predict(d.X), want, rtol=1e-9)


def test_a_fresh_process_finds_the_solver_in_the_module_it_imported(tmp_path):
    """A model file imports nothing: the fresh process imports the solver's module (or
    passes ``types=``) first; without either the file is refused, the module unrun."""
    from rankjax.estimators import RankRLS
    d = rj.make_ranking_data(6, num_features=3, seed=4)
    est = RankRLS(lam=1.0, solver=example.EigenPrimal()).fit(d.X, d.y, qid=d.qid)
    est.save(tmp_path / "m.npz")
    np.save(tmp_path / "X.npy", np.asarray(d.X))
    code = ("import sys, jax, numpy as np; sys.path.insert(0, sys.argv[1])\n"
            "jax.config.update('jax_enable_x64', True)\n"
            "import eigen_solver\n"
            "from rankjax.estimators import load\n"
            "m = load(sys.argv[2]); print(type(m.solver).__module__, type(m.solver).__name__)\n"
            "np.save(sys.argv[3], m.predict(np.load(sys.argv[4])))\n")
    out = subprocess.run([sys.executable, "-c", code, str(_PATH.parent), str(tmp_path / "m.npz"),
                          str(tmp_path / "p.npy"), str(tmp_path / "X.npy")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["eigen_solver", "EigenPrimal"]
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), est.predict(d.X), rtol=1e-12)
    gone = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[2]); "
                           "from rankjax.estimators import load; load(sys.argv[1])",
                           str(tmp_path / "m.npz"), str(_PATH.parent)],
                          capture_output=True, text=True, timeout=300)
    assert gone.returncode == 1 and "import the module that defines it" in gone.stderr
    assert "a model file imports nothing" in gone.stderr
