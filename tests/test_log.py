"""Progress of long calls: ``verbose`` logs through the ``rankjax`` logger while the call
runs (inside compiled loops through host callbacks), and the logger silences it."""
import logging
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax.learners import kpcrank as _kpcrank
from rankjax.kernels import basis as _nystrom
from rankjax import estimators as est

D = rj.make_ranking_data(24, num_features=6, seed=0)
V = rj.make_ranking_data(8, num_features=6, seed=1, first_qid=100)
G = rj.query_graph(D.qid)
EVAL = dict(eval_set=[(V.X, V.y)], eval_qid=[V.qid])
K = rj.kernel_matrix(rj.gaussian_kernel(0.2), D.X)

# name: (call, the number of lines, a word of the first line)
CALLS = {
    "RankBoost": (lambda: est.RankBoost(50, verbose=10).fit(D.X, D.y, qid=D.qid), 5, "RankBoost round 10/50"),
    "RankBoost eval": (
        lambda: est.RankBoost(20, verbose=10).fit(D.X, D.y, qid=D.qid, **EVAL),
        2,
        "RankBoost round 10/20",
    ),
    "RankSVM": (lambda: est.RankSVM(verbose=1).fit(D.X, D.y, qid=D.qid), None, "TRON Newton step"),
    "RankSVM kernel": (
        lambda: est.RankSVM(kernel="gaussian", basis=50, verbose=1).fit(D.X, D.y, qid=D.qid),
        None,
        "TRON Newton step",
    ),
    "CGRankRLS": (
        lambda: est.RankRLS(solver="cg", verbose=1).fit(D.X, D.y, qid=D.qid, **EVAL),
        None,
        "CG iteration 1",
    ),
    "KPCRank": (lambda: est.KPCRank(4, verbose=1).fit(D.X, D.y, qid=D.qid, **EVAL), 3, "KPCRank stage 1/3"),
    "RankRLS": (
        lambda: est.RankRLS(kernel="gaussian", verbose=1).fit(D.X, D.y, qid=D.qid),
        2,
        "exact kernel (basis='auto': ",
    ),
    "RankRLSCV": (
        lambda: est.RankRLSCV(kernel="gaussian", gammas=[0.1, 0.2], basis=40, verbose=1).fit(
            D.X, D.y, qid=D.qid
        ),
        None,
        "screen: ",
    ),
    "tune": (lambda: rj.tune(rj.Problem(D.X, D.y, G), tune_solver(), steps=4, verbose=2), 2, "tune step 2/4"),
    "select": (
        lambda: rj.select(
            rj.Problem(D.X, D.y, D.qid), [rj.Dual(rj.gaussian_kernel(0.1))], lams=[0.1, 1.0], verbose=1
        ),
        None,
        "fold bucket 1/",
    ),
    "holdout Primal": (
        lambda: rj.holdout(rj.Problem(D.X, D.y, G), rj.Primal(), lams=[1.0], folds=3, verbose=1).value,
        None,
        "holdout Primal: started",
    ),
    "holdout Dual": (
        lambda: rj.holdout(rj.Problem(K, D.y, G, precomputed=True), rj.Dual(), lams=[1.0], verbose=1).value,
        None,
        "holdout Dual: started",
    ),
    "holdout Nystrom": (
        lambda: (
            rj.holdout(
                rj.Problem(D.X, D.y, G), rj.Nystrom(rj.gaussian_kernel(0.2), 30), lams=[1.0], verbose=1
            ).value
        ),
        None,
        "holdout Nystrom: started",
    ),
    "rankrls_cg": (
        lambda: rj.fit(rj.Problem(D.X, D.y, G), rj.CG(verbose=1), lam=1.0),
        None,
        "CG iteration 1",
    ),
    "rankrls_cg_dual": (
        lambda: rj.fit(rj.Problem(K, D.y, G, precomputed=True), rj.CG(verbose=1), lam=1.0),
        None,
        "CG iteration 1",
    ),
    "rankrls_falkon": (
        lambda: rj.fit(
            rj.Problem(D.X, D.y, G), rj.Falkon(rj.gaussian_kernel(0.2), 30, options=rj.CG(verbose=1)), lam=1.0
        ),
        None,
        "CG iteration 1",
    ),
    "ranksvm_l2": (lambda: rj.ranksvm_l2(D.X, D.y, D.qid, verbose=1), None, "TRON Newton step"),
    "rankboost": (lambda: rj.rankboost(D.X, D.y, D.qid, rounds=6, verbose=3), 2, "RankBoost round 3/6"),
    "gp_fit": (
        lambda: rj.gp_fit(D.X[:20], np.arange(19), np.arange(1, 20), steps=4, verbose=2),
        2,
        "gp_fit step 2/4",
    ),
    "stream": (
        lambda: rj.path(
            rj.scale.stream(
                [(D.X[:200], D.y[:200], D.qid[:200]), (D.X[200:], D.y[200:], D.qid[200:])]
                if D.qid[199] != D.qid[200]
                else [(D.X, D.y, D.qid)],
                verbose=1,
            ),
            rj.Primal(),
            lams=[1.0],
        ),
        None,
        "stream (normal equations): chunk 1",
    ),
}
# one compiled program each: a line when it starts and one when its result is ready
ONE_PROGRAM = {
    "path Dual": lambda: rj.path(rj.Problem(K, D.y, G, precomputed=True), rj.Dual(), lams=[1.0],
                                 verbose=1).value,
    "path Nystrom": lambda: rj.path(rj.Problem(D.X, D.y, G), rj.Nystrom(rj.gaussian_kernel(0.2), 30),
                                    lams=[1.0], verbose=1).value,
    "fit Dual": lambda: rj.fit(rj.Problem(D.X, D.y, G), rj.Dual(rj.gaussian_kernel(0.2)), lam=1.0,
                               verbose=1).value,
    "kpcrank_path": lambda: _kpcrank.kpcrank_path(K, D.y, G, components=3, verbose=1),
    "nystrom_basis": lambda: _nystrom.nystrom_basis(D.X, 20, kernel=rj.gaussian_kernel(0.2),
                                              method="kmeans++", verbose=1),
}
CALLS.update({name: (call, 2, f"{name}: started") for name, call in ONE_PROGRAM.items()})
CALLS["leave-pair-out Dual"] = (
    lambda: rj.holdout(rj.Problem(K, D.y, rj.global_graph(np.shape(K)[0]), precomputed=True),
                       rj.Dual(), lams=[1.0], folds=rj.LeavePairOut([[0, 1]]), verbose=1).value,
    2, "holdout Dual: started")
CALLS["leave-pair-out Primal"] = (
    lambda: rj.holdout(rj.Problem(D.X, D.y, rj.global_graph(np.shape(D.X)[0])), rj.Primal(),
                       lams=[1.0], folds=rj.LeavePairOut([[0, 1]]), verbose=1).value,
    2, "holdout Primal: started")


class Clock(logging.Handler):
    """Keeps each line with the time it arrived."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append((time.perf_counter(), record.getMessage()))


@pytest.fixture
def clock():
    log = logging.getLogger("rankjax")
    h, level = Clock(), log.level
    log.addHandler(h)
    log.setLevel(logging.INFO)
    yield h
    log.removeHandler(h)
    log.setLevel(level)


@pytest.mark.parametrize("name", list(CALLS))
def test_verbose_logs_while_the_call_runs(name, clock):
    call, count, first = CALLS[name]
    out = call()
    jax.block_until_ready(out if not hasattr(out, "model_") else out.model_)
    returned = time.perf_counter()
    assert clock.lines, name
    assert all(t <= returned for t, _ in clock.lines)
    assert clock.lines[0][1].startswith(first), clock.lines[0][1]
    if count is not None:
        assert len([t for t in clock.lines if not t[1].startswith("[")]) == count, clock.lines
    assert all(") " not in t[1][-3:] for t in clock.lines)


def test_compiled_loop_lines_carry_the_loops_values(clock):
    """The round lines come from inside the scan (their values are the model's), not from a
    report written afterwards."""
    model = rj.rankboost(D.X, D.y, D.qid, rounds=4, verbose=1)
    jax.effects_barrier()
    alphas = [float(t[1].split("alpha ")[1].split(",")[0]) for t in clock.lines]
    np.testing.assert_allclose(alphas, np.asarray(model.alpha), rtol=1e-3)


def test_the_logger_silences_every_line(clock):
    log = logging.getLogger("rankjax")
    log.setLevel(logging.WARNING)
    est.RankBoost(10, verbose=1).fit(D.X, D.y, qid=D.qid)
    rj.tune(rj.Problem(D.X, D.y, G), tune_solver(), steps=2, verbose=1)
    rj.holdout(rj.Problem(D.X, D.y, G), rj.Primal(), lams=[1.0], verbose=1).value
    jax.effects_barrier()
    assert clock.lines == []


def test_verbose_zero_is_silent_and_bad_verbose_is_named(clock):
    est.RankBoost(10).fit(D.X, D.y, qid=D.qid)
    rj.fit(rj.Problem(D.X, D.y, G), rj.CG(), lam=1.0)
    jax.effects_barrier()
    assert clock.lines == []
    for bad in (-1, 1.5, "yes"):
        with pytest.raises(ValueError, match="verbose"):
            rj.tune(rj.Problem(D.X, D.y, G), tune_solver(), steps=2, verbose=bad)


def test_unconfigured_logging_writes_to_stderr():
    """With nothing configured, the first line installs one stderr handler."""
    code = ("import rankjax as rj; d = rj.make_ranking_data(5, num_features=3, seed=0); "
            "rj.rankboost(d.X, d.y, d.qid, rounds=4, verbose=2); import jax; jax.effects_barrier()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [t for t in r.stderr.splitlines() if t.startswith("[rankjax]")]
    assert [t.split(":")[0] for t in lines] == ["[rankjax] RankBoost round 2/4",
                                                 "[rankjax] RankBoost round 4/4"]


def test_warnings_name_the_callers_line():
    """A warning raised several library frames down (``rj.select`` -> the hold-out -> the
    precision rule; ``rj.path`` -> the spectrum check) names the caller's file and line,
    not a line of rankjax (``_log.user_stacklevel``)."""
    from rankjax import UnresolvedLambdaWarning
    X, y = np.asarray(D.X, np.float32), np.asarray(D.y, np.float32)
    p = rj.Problem(X, y, D.qid)
    with pytest.warns(UnresolvedLambdaWarning) as rec:
        rj.select(p, [rj.Dual(rj.gaussian_kernel(1.0))], lams=[1e-9, 1.0])
        rj.path(p, rj.Primal(), lams=[1e-30, 1.0])
    assert rec.list and {r.filename for r in rec.list} == {__file__}
