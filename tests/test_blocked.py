"""Kernel RankRLS past the memory of ``K_mR``: the Nyström fit and hold-out in row blocks of
whole folds (rankjax/solvers/fold_batches.py), their memory plan (refused up front, before
the folds), kernel models scoring in row blocks, and ``optimize=True, ard=True`` learning on
a whole-query subsample when the plan says so. Every blocked result is asserted equal, in
float64, to the whole computation, itself asserted equal to retraining without each fold
(``test_solvers.py``; the registry's ``nystrom_blocked`` entry runs every property)."""
import subprocess
import sys
import time

import numpy as np
import pytest

import rankjax as rj
import rankjax.solvers.models as models
import rankjax.solvers.nystrom as nystrom
import rankjax.solvers.nystrom_blocked as blocked
import rankjax.solvers.nystrom_plan as nplan
from rankjax._core.memory import MemoryPlanError
from rankjax.estimators import RankRLSCV
from rankjax.selection import refine as refine_mod
from rankjax.selection import select as select_mod
from rankjax.selection.grid import Grid

GAUSS = rj.gaussian_kernel(0.3)
EPS32 = float(np.finfo(np.float32).eps)
LAMS = np.logspace(-6, 2, 7)


@pytest.fixture(scope="module")
def data():
    return rj.make_ranking_data(40, num_features=5, docs_per_query=(3, 30), seed=1)


def _holdout(p, block_rows, folds=None, lams=LAMS, basis=90):
    return rj.holdout(p, rj.Nystrom(GAUSS, basis, block_rows=block_rows), lams=lams,
                      folds=folds).value


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _whole(p, folds, lams=LAMS, basis=90):
    """The hold-out with ``K_mR`` and ``Φ`` whole (the route of folds larger than the basis),
    called directly: ``(predictions, coef [L, b])``."""
    from rankjax.graphs.folds import premerge
    from rankjax.solvers.holdout import two_phase
    s = rj.Nystrom(GAUSS, basis)
    f = premerge(rj.make_folds(p.graph, folds), len(lams), 96)
    index, B = s.take(np.asarray(p.X))
    pred, coef = two_phase(nystrom._nystrom_holdout, np.asarray(p.X), p.y, p.graph, B,
                           np.asarray(lams), f, lams=np.asarray(lams))
    return np.asarray(pred), np.asarray(coef)[:, :index.shape[0]]


@pytest.mark.parametrize("folds", [None, 3])
@pytest.mark.parametrize("graph", ["query", "ties", "outputs"])
def test_blocked_holdout_equals_the_whole_one(data, folds, graph):
    """Leave-query-out and 3-fold, a tie-excluded graph and two outputs, with batches of
    about 32 rows (several folds a batch, several batches a bucket): predictions and every
    λ's basis coefficients equal the whole computation's (float64, 1e-10; λ from 1e-6)."""
    y = data.y if graph != "outputs" else np.c_[data.y, data.X[:, 0]]
    q = rj.query_graph(data.qid, data.y, exclude_ties=True) if graph == "ties" else data.qid
    p = rj.Problem(data.X, y, q)
    pred, coef = _whole(p, folds)
    blocked = _holdout(p, 32, folds)
    assert _rel(blocked.predictions, pred) < 1e-10
    assert _rel(blocked.path.coef, coef) < 1e-10


def test_blocked_fit_equals_the_closed_form(data):
    """The blocked fit against numpy's basis-vector closed form (§3.5, eq. 40-42)."""
    import reference as ref
    rows = np.arange(0, data.X.shape[0], 7)
    m = rj.fit(rj.Problem(data.X, data.y, data.qid), rj.Nystrom(GAUSS, rows, block_rows=40),
               lam=0.5).value
    KR = ref.gaussian(data.X[rows], data.X, 0.3)
    a = ref.fit_nystrom(KR, ref.gaussian(data.X[rows], data.X[rows], 0.3),
                        data.y, ref.dense_laplacian(data.qid), 0.5)
    assert _rel(rj.predict(m, data.X), KR.T @ a) < 1e-8


def test_the_route_follows_the_fold_sizes_and_the_memory(data, monkeypatch):
    """Leave-query-out holds ``K_mR`` whole up to ``WHOLE_ENTRIES`` entries and runs in row
    blocks above; folds larger than the basis (3-fold here) hold it whole and retrain in
    ``b x b``, to the same answer as row blocks forced; with too little memory for either,
    each is refused before any work."""
    p = rj.Problem(data.X, data.y, data.qid)
    called = []
    for name in ("holdout_blocked", "_nystrom_holdout"):
        real = getattr(nystrom, name)
        monkeypatch.setattr(nystrom, name, lambda *a, _r=real, _n=name, **k:
                            called.append(_n) or _r(*a, **k))
    _holdout(p, None)
    assert called == ["_nystrom_holdout"] and data.X.shape[0] * 90 <= nplan.WHOLE_ENTRIES
    monkeypatch.setattr(nplan, "WHOLE_ENTRIES", 0)
    called.clear()
    _holdout(p, None)
    assert called == ["holdout_blocked"]
    whole = _holdout(p, None, folds=3)
    assert called[1:] == ["_nystrom_holdout"]
    assert _rel(_holdout(p, 32, folds=3).predictions, whole.predictions) < 1e-10
    monkeypatch.setattr("rankjax._core.memory.available_memory", lambda: 1e5)
    called.clear()
    with pytest.raises(MemoryPlanError, match="in row blocks of 4096"):
        _holdout(p, None)
    with pytest.raises(MemoryPlanError, match=r"basis rows, folds of up to \d+ rows\)"):
        _holdout(p, None, folds=3)
    assert called == []


def test_an_impossible_plan_is_refused_before_any_work(monkeypatch):
    """10^7 rows and a basis of 20,000: refused from the shapes, before the folds are drawn,
    the basis taken or a kernel value computed, naming the figure and the alternatives as
    they are spelt now."""
    from rankjax.graphs import folds as folds_mod
    for name in ("make_folds", "build_folds"):
        monkeypatch.setattr(folds_mod, name, lambda *a, **k: pytest.fail("folds were drawn"))
    monkeypatch.setattr(nystrom, "take_basis", lambda *a, **k: pytest.fail("basis taken"))
    monkeypatch.setattr("rankjax._core.memory.available_memory", lambda: 16 << 30)  # 24 GB
    m = 10_000_000
    X = np.zeros((m, 1), np.float32)
    qid = np.repeat(np.arange(m // 100), 100)
    p = rj.Problem(X, np.zeros(m, np.float32), qid)
    with pytest.raises(MemoryPlanError) as e:
        rj.select(p, [rj.Nystrom(GAUSS, 20_000)], lams=LAMS)
    msg = str(e.value)
    assert "GiB" in msg and "20480 basis rows" in msg
    for name in ("rj.Nystrom(kernel, basis)", "RankRLSCV(basis=...)", "rj.Falkon(kernel, basis)",
                 "folds=None"):
        assert name in msg
    assert "rankrls_" not in msg


def test_a_script_that_does_not_catch_the_refusal_exits_with_status_1():
    code = ("import numpy as np, rankjax as rj\n"
            "from rankjax.estimators import RankRLSCV\n"
            "m = 2_000_000\n"
            "X = np.zeros((m, 1), np.float32); X[:, 0] = np.arange(m) % 7\n"
            "RankRLSCV(kernel='gaussian', basis=60_000).fit(X, np.arange(m) % 3, "
            "np.repeat(np.arange(m // 100), 100))\n")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "MemoryPlanError" in out.stderr and "basis rows" in out.stderr
    assert time.perf_counter() - t0 < 120


def test_kernel_models_score_in_row_blocks(data, monkeypatch):
    """More test rows than :data:`SCORE_BLOCK_BYTES` of kernel values: scored a block at a
    time, equal to the whole product (Nyström and exact kernel, one and two outputs)."""
    p = rj.Problem(data.X, np.c_[data.y, data.y ** 2], data.qid)
    for solver in (rj.Nystrom(GAUSS, 60), rj.Dual(GAUSS)):
        for model in (rj.fit(p, solver, lam=1.0).value,
                      rj.fit(rj.Problem(data.X, data.y, data.qid), solver, lam=1.0).value):
            whole = np.asarray(rj.predict(model, data.X))
            monkeypatch.setattr(models, "SCORE_BLOCK_BYTES", 8 * 60 * 37)
            blocked = np.asarray(rj.predict(model, data.X))
            monkeypatch.setattr(models, "SCORE_BLOCK_BYTES", 1 << 28)
            assert blocked.shape == whole.shape and _rel(blocked, whole) < 1e-12


def test_tune_rows_plan():
    assert select_mod.tune_rows(10_000, 512, 20, np.float32) is None
    u = select_mod.tune_rows(1_000_000, 512, 20, np.float32)
    assert 2 * 512 <= u < 1_000_000
    assert u * 512 ** 2 * 20 <= select_mod.TUNE_WORK
    assert select_mod.tune_rows(1_000_000, 2048, 20, np.float32) == 2 * 2048   # at least 2 b


def test_ard_beyond_the_plan_learns_on_a_subsample_then_holds_out_every_row(data, monkeypatch):
    """``optimize=True, ard=True`` with a Nyström basis beyond :func:`tune_rows`: the gradient
    runs on whole queries (fewer rows than the data); the learned point (accepted here:
    the comparisons forced) is a :class:`ScaledModel` at a λ of the ladder below its λ times
    ``m / u``, equal to the Nyström fit of every row at the learned γ and scales, and
    ``best_score_`` is that point's hold-out NDCG on every row (not the subsample's)."""
    monkeypatch.setattr(select_mod, "TUNE_WORK", 4 * 300 * 128 ** 2)
    monkeypatch.setattr(Grid, "better", lambda self, a, b: True)
    monkeypatch.setattr(refine_mod, "_gain", lambda grid, new, old, queries: np.ones(len(queries)))
    seen = []
    real = refine_mod._halves
    monkeypatch.setattr(refine_mod, "_halves", lambda p, seed: seen.append(p.X.shape[0])
                        or real(p, seed))                       # the subsample learned on
    est = RankRLSCV(lams=LAMS, kernel="gaussian", gammas=[0.3], basis=100, optimize=True,
                    ard=True, optimize_steps=4, feature_map=None).fit(data.X, data.y, data.qid)
    m, u = data.X.shape[0], seen[0]
    assert u < m
    assert isinstance(est.model_, models.ScaledModel)
    t = est.tune_
    i = int(np.nanargmin(t.loss_history))
    scaled = np.exp(t.params_history["log_lam"][i]) * m / u * select_mod.EVERY_ROW_LADDER
    assert np.min(np.abs(est.lam_ / scaled - 1)) < 1e-6, (est.lam_, scaled)
    s = np.asarray(est.model_.scales)
    p = rj.Problem(data.X * s, data.y, data.qid)
    solver = rj.Nystrom(rj.gaussian_kernel(est.gamma_), 100)
    again = rj.fit(p, solver, lam=est.lam_).value
    assert _rel(est.predict(data.X), rj.predict(again, data.X * s)) < 1e-8
    h = rj.holdout(p, solver, lams=[est.lam_]).value
    assert est.best_score_ == pytest.approx(float(rj.ndcg(h.predictions[0], data.y, data.qid,
                                                          k=10)), rel=1e-9)


def test_every_row_ladder_unresolved_moves_to_the_next_lambdas_above_it(data, monkeypatch):
    """Where the dtype resolves no λ of the every-row ladder (here: forced NaN), the next
    ladder starts one step above its top (contiguous: the least resolved λ is the nearest
    to the learned one, not a decade past it), and the point is chosen from that one."""
    monkeypatch.setattr(select_mod, "TUNE_WORK", 4 * 300 * 128 ** 2)
    monkeypatch.setattr(Grid, "better", lambda self, a, b: True)
    monkeypatch.setattr(refine_mod, "_gain", lambda grid, new, old, queries: np.ones(len(queries)))
    ladders, real_score = [], Grid.score

    def recorded(lams, dtype):
        ladders.append(np.asarray(lams, np.float64))
        return rj._core.host.device_array(lams, dtype)

    def score(self, predictions, lams):
        s = real_score(self, predictions, lams)
        first = len(ladders) == 1 and np.array_equal(np.asarray(lams, np.float64), ladders[0])
        return np.full_like(s, np.nan) if first else s

    monkeypatch.setattr(select_mod, "device_array", recorded)
    monkeypatch.setattr(Grid, "score", score)
    est = RankRLSCV(lams=LAMS, kernel="gaussian", gammas=[0.3], basis=100, optimize=True,
                    ard=True, optimize_steps=4, feature_map=None).fit(data.X, data.y, data.qid)
    every = [a for a in ladders if a.size == select_mod.EVERY_ROW_LADDER.size
             and np.allclose(a / a[0], select_mod.EVERY_ROW_LADDER / 1e-3)]
    assert len(every) >= 2
    first, second = every[0], every[1]
    step = select_mod.EVERY_ROW_LADDER[1] / select_mod.EVERY_ROW_LADDER[0]
    assert second[0] == pytest.approx(first[-1] * step, rel=1e-12)
    assert np.min(np.abs(est.lam_ / second - 1)) < 1e-6, (est.lam_, second)


def test_blocked_equals_whole_below_the_float32_eigh_floor(data):
    """λ below the float32 ``eigh`` floor of the basis system (the lanes the whole hold-out
    answers from a Cholesky factor of their own, the row-block one from its float64
    ``eigh``), γ = 0.2 (the basis system spans more than 1e4): float64, the two equal to
    ``2000 eps64 (κ + κ_C)`` (κ the lane's condition, κ_C the basis factor's); float32: both
    refuse every lane (NaN, named in a warning), since they lie below the features' floor
    ``EIGH_RTOL eps ||Φ^T L Φ||_F`` (they answered 6e-2 to 1.1e-1 off before it, issue 75)."""
    import jax
    import reference as ref
    from rankjax.solvers.ridge import EIGH_RTOL
    p = rj.Problem(data.X, data.y, data.qid)
    gauss = rj.gaussian_kernel(0.2)
    rows = np.sort(np.random.default_rng(0).choice(data.X.shape[0], 90, replace=False))
    K = ref.gaussian(data.X, data.X[rows], 0.2)
    w, V = np.linalg.eigh(K[rows])
    W = V[:, w > 1e-7 * w.max()] / np.sqrt(w[w > 1e-7 * w.max()])
    ev = np.linalg.eigvalsh(W.T @ K.T @ ref.dense_laplacian(data.qid) @ K @ W)
    floor32 = EIGH_RTOL * np.finfo(np.float32).eps * ev.max() - max(ev.min(), 0)
    lams = floor32 * np.array([0.05, 0.2, 0.5, 0.9])
    assert lams.max() < floor32

    def both(p, lams):
        s = rj.Nystrom(gauss, rows, block_rows=16)
        from rankjax.graphs.folds import premerge
        from rankjax.solvers.holdout import two_phase
        index, B = s.take(np.asarray(p.X))
        f = premerge(rj.make_folds(p.graph), len(lams), B.X.shape[0])
        whole, _ = two_phase(nystrom._nystrom_holdout, np.asarray(p.X), p.y, p.graph, B, lams,
                             f, lams=lams)
        return np.asarray(rj.holdout(p, s, lams=lams).value.predictions), np.asarray(whole)

    blocked, whole = both(p, lams)
    # float64's rounding at each lane's condition and at the basis factor's (the two routes
    # form the features differently: sqrt κ(K_RR + ε I)), amplified as the Nyström hold-out
    # amplifies it (test_float32.AMPLIFICATION); seen 1.6e-8 to 6.5e-8, 7 to 15x below
    kappa = (ev.max() + lams) / (max(ev.min(), 0) + lams)
    eps_rr = 96 * np.finfo(float).eps * w.max()
    kappa_c = np.sqrt((w.max() + eps_rr) / (max(w.min(), 0) + eps_rr))
    for lane in range(lams.size):
        assert (_rel(blocked[lane], whole[lane])
                < 2000 * np.finfo(float).eps * (kappa[lane] + kappa_c))
    import warnings
    with jax.enable_x64(False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", rj.UnresolvedLambdaWarning)
        p32 = rj.Problem(data.X.astype(np.float32), data.y.astype(np.float32), data.qid)
        b32, w32 = both(p32, lams.astype(np.float32))
    assert np.isnan(b32).all() and np.isnan(w32).all()
    named = " ".join(str(w.message) for w in caught if issubclass(w.category, rj.UnresolvedLambdaWarning))
    assert all(f"{v:.3g}" in named for v in lams.astype(np.float32)), named


@pytest.mark.parametrize("b,rows", [(200, 512), (100, 1024)])
def test_the_plan_covers_the_compiled_programs(monkeypatch, b, rows):
    """The row-block plan's figure (:func:`nystrom_plan`) covers what XLA's memory analysis
    of each compiled program (hold-out of 13 λ, path, fit) says it holds: arguments,
    outputs and temporaries; the hold-out's, within 4x (seen 1.4x to 1.7x; the path and
    the fit, planned with the hold-out's terms, hold less)."""
    import jax
    from rankjax.solvers.fold_batches import batch_folds
    d = rj.make_ranking_data(60, num_features=8, docs_per_query=(20, 40), seed=2)
    X, y = np.asarray(d.X), np.asarray(d.y)
    p = rj.Problem(X, y, d.qid)
    m, n = X.shape
    largest = int(np.bincount(d.qid).max())
    lams = np.logspace(-3, 2, 13)
    _, B = rj.Nystrom(GAUSS, b).take(X, pad=None)

    def plan(L):
        seen = []
        monkeypatch.setattr(nplan, "check_memory", lambda need, *a: seen.append(need))
        nplan.nystrom_plan(m, n, b, X.dtype, L=L, fold_rows=largest, block_rows=rows)
        monkeypatch.undo()
        return seen[0]

    def held(core, *args, **static):
        c = jax.jit(core, static_argnames=tuple(static)).lower(*args, **static).compile()
        a = c.memory_analysis()
        return a.argument_size_in_bytes + a.output_size_in_bytes + a.temp_size_in_bytes

    folds = batch_folds(rj.make_folds(p.graph), rows, lams.size, b)
    need, used = plan(lams.size), held(blocked.blocked_holdout, X, y, p.graph, B, lams, folds,
                                       rows=rows)
    assert used <= need <= 4 * used, (need, used)
    for need, used in (
            (plan(lams.size), held(blocked.path_blocked.__wrapped__, X, y, p.graph, B,
                                   lams, folds, None, rows=rows)),
            (plan(1), held(blocked.fit_blocked.__wrapped__, X, y, p.graph, B, 1.0,
                           batch_folds(rj.make_folds(p.graph), rows, 1, b), rows=rows))):
        assert used <= need, (need, used)
