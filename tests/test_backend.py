"""The backend's code paths (``rankjax/_core/backend.py``): the accelerator paths (batched
factorisations for every fold size, λ values vmapped, no CPU product workarounds) forced on
the CPU give the CPU paths' results in float64 to 1e-10."""
import jax
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax._core.backend import ACCELERATOR, CPU, forced_paths, paths

TOL = 1e-10


@pytest.fixture(scope="module")
def data():
    # 24 queries of 10-40 rows: leave-query-out folds under 256 rows, 2-fold folds of ~300
    # (the CPU's unbatched LAPACK path), 8 features (folds wider than the features: refit)
    d = rj.make_ranking_data(24, num_features=8, seed=1)
    return np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)


def both(fn):
    """``fn()`` on the CPU paths and on the accelerator paths forced (host numpy)."""
    with forced_paths("cpu"):
        a = jax.tree.map(np.asarray, fn())
    with forced_paths("accelerator"):
        b = jax.tree.map(np.asarray, fn())
    return a, b


def assert_same(a, b, tol=TOL):
    for x, z in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        scale = max(1.0, float(np.max(np.abs(x))))
        np.testing.assert_array_less(np.max(np.abs(x - z)) / scale, tol)


def test_paths_follow_the_backend_and_can_be_forced():
    assert paths() is (CPU if jax.default_backend() == "cpu" else ACCELERATOR)
    with forced_paths("gpu") as p:
        assert p is ACCELERATOR and paths() is ACCELERATOR
        with forced_paths("cpu"):
            assert paths() is CPU
        assert paths() is ACCELERATOR
    with pytest.raises(ValueError, match="code paths must be one of"):
        with forced_paths("cuda"):
            pass


@pytest.mark.parametrize("folds", [None, 2, 5])
def test_primal_holdout_same_on_both_paths(data, folds):
    X, y, qid = data
    g = rj.query_graph(qid)
    a, b = both(
        lambda: (
            rj.holdout(
                rj.Problem(X, y, g), rj.Primal(), lams=[0.01, 1.0, 100.0], folds=folds
            ).value.predictions
        )
    )
    assert_same(a, b)


@pytest.mark.parametrize("folds", [None, 2])
def test_dual_holdout_same_on_both_paths(data, folds):
    X, y, qid = data
    g = rj.query_graph(qid)
    K = rj.kernel_matrix(rj.gaussian_kernel(0.2), X)
    a, b = both(lambda: rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=[0.1, 1.0, 100.0],
                                   folds=folds).value.predictions)
    assert_same(a, b)


def test_nystrom_holdout_and_multi_output_same_on_both_paths(data):
    X, y, qid = data
    g = rj.query_graph(qid)
    Y = np.stack([y, -y + 0.3 * X[:, 0]], 1)
    a, b = both(
        lambda: (
            rj.holdout(
                rj.Problem(X, y, g), rj.Nystrom(rj.gaussian_kernel(0.2), 40), lams=[0.1, 10.0], folds=3
            ).value.predictions,
            rj.holdout(rj.Problem(X, Y, g), rj.Primal(), lams=[0.1, 10.0], folds=2).value.predictions,
        )
    )
    assert_same(a, b)


@pytest.mark.parametrize("kernel,folds", [("linear", 2), ("gaussian", None)])
def test_tune_same_on_both_paths(data, kernel, folds):
    X, y, qid = data
    g = rj.query_graph(qid)
    m = 160 if kernel == "gaussian" else X.shape[0]
    g = rj.query_graph(qid[:m]) if kernel == "gaussian" else g
    solver = tune_solver(kernel, gamma=1 / X.shape[1])
    a, b = both(lambda: rj.tune(rj.Problem(X[:m], y[:m], g), solver, lam=1.0, folds=folds,
                                steps=3).loss_history)
    assert_same(a, b)


def test_gradient_of_cv_loss_same_on_both_paths(data):
    X, y, qid = data
    g = rj.query_graph(qid)
    folds = rj.make_folds(g, 2)
    params = {"log_lam": np.log(0.5)}
    a, b = both(lambda: jax.grad(rj.cv_loss)(params, rj.Problem(X, y, g), rj.Primal(), folds))
    assert_same(a, b)


def test_products_same_on_both_paths(rng):
    from rankjax._core.linalg import gram
    Z = rng.standard_normal((600, 520))
    A = rj.to_csr(np.where(rng.random((50, 30)) < 0.2, rng.standard_normal((50, 30)), 0.0))
    v = rng.standard_normal(30)
    a, b = both(lambda: (jax.jit(gram)(Z), A @ v))
    assert_same(a, b)
