"""Values are checked in the compute dtype (issue 24, class 1): finite float64 input
that float32 cannot hold, a Gram matrix that would overflow, and a λ (or C, γ) that
would become 0 or inf in the compute dtype are ValueErrors naming the argument and the
figure — never NaN or all-zero weights. Every entry point that takes them is covered."""
import jax
import numpy as np
import pytest

import rankjax as rj


@pytest.fixture(scope="module")
def d():
    return rj.make_ranking_data(8, num_features=4, seed=0)


def _entry_points(d, X, lam=1.0, C=1.0, gamma=0.1):
    g = rj.query_graph(d.qid)
    return {
        "rankrls_primal": lambda: rj.fit(rj.Problem(X, d.y, g), rj.Primal(), lam=lam).value,
        "rankrls_primal_path": lambda: rj.path(rj.Problem(X, d.y, g), rj.Primal(), lams=[lam]).value,
        "holdout_primal": lambda: rj.holdout(rj.Problem(X, d.y, g), rj.Primal(), lams=[lam]).value,
        "rankrls_cg": lambda: rj.fit(rj.Problem(X, d.y, g), rj.CG(), lam=lam),
        "rankrls_dual": lambda: (
            rj.fit(rj.Problem(np.asarray(X @ X.T), d.y, g, precomputed=True), rj.Dual(), lam=lam).value
        ),
        "rankrls_kernel": lambda: (
            rj.fit(rj.Problem(X, d.y, g), rj.Dual(rj.gaussian_kernel(gamma)), lam=lam).value
        ),
        "ranksvm_l2": lambda: rj.ranksvm_l2(X, d.y, d.qid, C=C),
    }


def test_float64_values_beyond_float32_are_refused_before_the_cast(d):
    X = np.asarray(d.X, np.float64) * 1e39
    with jax.enable_x64(False):
        for name, call in _entry_points(d, X).items():
            with pytest.raises(ValueError, match="range of the float32") as e:
                call()
            assert "X" in str(e.value) or "K" in str(e.value), (name, e.value)
    with jax.enable_x64(True):  # float64 compute holds them
        assert np.all(
            np.isfinite(rj.fit(rj.Problem(X, d.y, rj.query_graph(d.qid)), rj.Primal(), lam=1.0).value.weights)
        )


@pytest.mark.parametrize("name", ["rankrls_primal", "rankrls_primal_path", "holdout_primal"])
def test_a_gram_that_would_overflow_is_refused(d, name):
    X = np.asarray(d.X, np.float32) * np.float32(1e19)
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="would overflow float32"):
            _entry_points(d, X)[name]()


@pytest.mark.parametrize("bad", [1e-50, 1e300])
def test_a_lambda_the_compute_dtype_cannot_hold_is_refused(d, bad):
    X = np.asarray(d.X, np.float32)
    with jax.enable_x64(False):
        for name, call in _entry_points(d, X, lam=bad, C=bad, gamma=bad).items():
            with pytest.raises(ValueError, match="cannot be represented in the float32"):
                call()
    with jax.enable_x64(True):
        w = rj.fit(
            rj.Problem(np.asarray(d.X, np.float64), d.y, rj.query_graph(d.qid)), rj.Primal(), lam=bad
        ).value.weights
        assert np.all(np.isfinite(w))
