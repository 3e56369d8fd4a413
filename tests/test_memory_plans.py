"""Every memory-planned route at real sizes (issue 77): with the machine's own free memory,
each refuses with :class:`rankjax.MemoryPlanError` before it allocates, its figure at least
what the route must hold (a lower bound counted here from the shapes, independently of the
plan's formula), and the whole Nyström hold-out's plan covers what XLA's memory analysis of
its compiled program holds when the folds are larger than the basis (the route that once
passed its plan and then asked for 2 TB). ``tests/mutations.py`` breaks each formula."""
import re

import jax
import numpy as np
import pytest

import rankjax as rj
from rankjax._core.memory import MemoryPlanError

M = 10 ** 6
GAUSS = rj.gaussian_kernel(0.5)
GiB = 2.0 ** 30


def _rows(n=2, queries=None, seed=0):
    """``[M, n]`` rows in ``queries`` equal queries (default: queries of 100 rows)."""
    X = np.random.default_rng(seed).standard_normal((M, n))
    q = np.repeat(np.arange(M // 100 if queries is None else queries), 100 if queries is None
                  else M // queries)
    return X, X[:, 0].copy(), q


def _cases():
    """``(id, name, call, least bytes the route holds)``."""
    X2, y2, q2 = _rows(queries=2)
    X, y, q = _rows()
    wide = np.random.default_rng(1).standard_normal((4, M))
    return [
        ("nystrom_two_huge_queries",
         "Nyström hold-out, two queries of 500,000 rows (folds larger than the basis)",
         lambda: rj.holdout(rj.Problem(X2, y2, q2), rj.Nystrom(GAUSS, 500), lams=[1.0]),
         524_288 ** 2 * 8),                        # the dense root of a fold's Laplacian block
        ("nystrom_row_blocks", "Nyström hold-out in row blocks, a basis of 200,000",
         lambda: rj.holdout(rj.Problem(X, y, q), rj.Nystrom(GAUSS, 200_000), lams=[1.0]),
         200_000 ** 2 * 8),                        # the b x b decomposition
        ("nystrom_fit", "Nyström fit, a basis of 400,000 (row blocks)",
         lambda: rj.fit(rj.Problem(X, y, q), rj.Nystrom(GAUSS, 400_000), lam=1.0),
         400_000 ** 2 * 8),
        ("dual_fit", "exact kernel fit (Dual)",
         lambda: rj.fit(rj.Problem(X, y, q), rj.Dual(GAUSS), lam=1.0), M * M * 8),
        ("primal_wide", "primal fit on 10^6 features",
         lambda: rj.fit(rj.Problem(wide, np.arange(4.0), np.zeros(4, int)), rj.Primal(), lam=1.0),
         M * M * 8),
        ("select_optimize_exact", "select(optimize=True) with an exact kernel",
         lambda: rj.select(rj.Problem(X, y, q), [rj.Dual(GAUSS)], lams=[1.0], optimize=True),
         M * M * 8),
        ("tune_nystrom", "tune with a Nyström basis of 200,000",
         lambda: rj.tune(rj.Problem(X, y, q), rj.Nystrom(GAUSS, 200_000), lam=1.0, steps=2),
         10 * M * 200_000 * 8),                 # the descent holds ten m x b blocks
        ("falkon", "Falkon with a basis of 500,000",
         lambda: rj.fit(rj.Problem(X, y, q), rj.Falkon(GAUSS, 500_000), lam=1.0),
         500_000 ** 2 * 8),
        ("ranksvm_kernel", "kernel RankSVM on every row",
         lambda: rj.ranksvm_kernel(X, y, q, kernel=GAUSS), M * M * 8),
        ("kernel_matrix", "kernel_matrix of 10^6 rows", lambda: rj.kernel_matrix(GAUSS, X),
         M * M * 8),
        ("gp_pairwise", "pairwise GP with 10^6 comparisons",
         lambda: rj.gp_fit(np.eye(3), np.zeros(M, int), np.ones(M, int), steps=1), M * M * 8),
        # (the GP's 3 x 3 kernel of its items comes first: the plan is on the comparisons)
        ("rankrlscv_exact", "RankRLSCV, exact kernel on 10^6 rows",
         lambda: __import__("rankjax.estimators", fromlist=["RankRLSCV"]).RankRLSCV(
             kernel="gaussian", basis=None, lams=(1.0,), gammas=(0.5,)).fit(X, y, qid=q),
         M * M * 8),
    ]


IDS = [c[0] for c in _cases()]


@pytest.mark.parametrize("i", range(len(IDS)), ids=IDS)
def test_every_planned_route_refuses_at_real_size_before_allocating(i, monkeypatch):
    from rankjax.kernels import basis as _basis, kernel as _kernel
    _, name, call, least = _cases()[i]
    for mod in (_basis, _kernel) if "GP" not in name else ():   # no kernel value before it
        for fn in ("kernel_core", "kernel_block"):
            monkeypatch.setattr(mod, fn, lambda *a, **k: pytest.fail(f"{name}: a kernel value "
                                                                      "computed before the plan"))
    try:
        call()
    except MemoryPlanError as e:
        figure = float(re.search(r"needs about ([0-9.e+]+) GiB", str(e)).group(1)) * GiB
        assert figure >= 0.99 * least, (name, str(e))
    except Exception as e:                          # noqa: BLE001 - any other failure is one
        pytest.fail(f"{name}: {type(e).__name__} instead of MemoryPlanError: {e}")
    else:
        pytest.fail(f"{name}: ran without a refusal")


def test_the_whole_holdout_plan_covers_folds_larger_than_the_basis(monkeypatch):
    """The whole Nyström hold-out with two folds larger than the basis: the plan's figure
    covers what XLA's memory analysis of the compiled program holds (arguments, outputs,
    temporaries)."""
    from rankjax.graphs.folds import premerge
    from rankjax.solvers import nystrom, nystrom_plan as nplan
    rng = np.random.default_rng(0)
    m, n, b = 1200, 3, 8
    X = rng.standard_normal((m, n))
    p = rj.Problem(X, X[:, 0].copy(), np.repeat([0, 1], m // 2))
    lams = np.logspace(-2, 1, 4)
    folds = rj.make_folds(p.graph)
    solver = rj.Nystrom(GAUSS, b)
    seen = []
    monkeypatch.setattr(nplan, "check_memory", lambda need, *a: seen.append(need))
    rows = nplan.nystrom_plan(m, n, b, X.dtype, L=lams.size,
                              fold_rows=max(i.shape[1] for i in folds.index))
    monkeypatch.undo()
    assert rows is None                              # the whole route
    _, B = solver.take(X, pad=True, graph=p.graph)
    merged = premerge(folds, lams.size, B.X.shape[0])
    c = jax.jit(nystrom._nystrom_holdout).lower(X, p.y, p.graph, B, lams, merged).compile()
    a = c.memory_analysis()
    used = a.argument_size_in_bytes + a.output_size_in_bytes + a.temp_size_in_bytes
    assert used <= seen[0], (seen[0], used)


@pytest.mark.parametrize("folds", [None, 4])
def test_a_rankrlscv_fit_plans_once(folds, monkeypatch):
    """One plan a verb call (issue 78): a Nyström ``RankRLSCV`` fit of one γ computes its
    hold-out's plan once, in selection before the folds are drawn (``Nystrom.init``), and
    the hold-out reads it from the state; the estimator plans nothing of its own."""
    from rankjax.estimators import RankRLSCV
    from rankjax.solvers import nystrom
    calls = []
    real = nystrom.nystrom_plan
    monkeypatch.setattr(nystrom, "nystrom_plan", lambda *a, **k: calls.append(a) or real(*a, **k))
    d = rj.make_ranking_data(20, num_features=3, seed=0)
    RankRLSCV(kernel="gaussian", gammas=[0.5], basis=40, folds=folds,
              feature_map="rank").fit(d.X, d.y, d.qid)
    assert len(calls) == 1


def test_a_plan_serves_only_the_holdout_it_covers():
    from rankjax.solvers.nystrom_plan import Plan
    p = Plan(rows=None, L=4, fold_rows=40)
    assert p.serves(4, 40) and p.serves(4, 16)
    assert not p.serves(5, 40) and not p.serves(4, 41)
