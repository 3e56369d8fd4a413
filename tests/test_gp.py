import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

import rankjax as rj
from rankjax.learners import gp as _gp


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def items(rng, m=40):
    X = rng.uniform(0, 1, (m, 1))
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(8.0), X)) * 4.0 + 1e-9 * np.eye(m)
    return X, K


def test_gaussian_posterior_equals_closed_form_and_dual_rankrls(rng):
    X, K = items(rng)
    m, l, s2 = len(K), 120, 0.3
    head = rng.integers(0, m, l)
    tail = (head + rng.integers(1, m, l)) % m
    diffs = rng.uniform(0.1, 2.0, l)
    gp = _gp.gp_pairwise_gaussian(K, head, tail, diffs, noise_var=s2)
    A = np.zeros((m, l))
    A[head, np.arange(l)] += 1
    A[tail, np.arange(l)] -= 1
    C = A.T @ K @ A + s2 * np.eye(l)
    mean_ref = K @ A @ np.linalg.solve(C, diffs)
    cov_ref = K - K @ A @ np.linalg.solve(C, A.T @ K)
    mean, var = rj.gp_predict(gp, K, np.diag(K))
    assert rel(mean, mean_ref) < 1e-8
    assert rel(var, np.diag(cov_ref)) < 1e-8
    dual = rj.fit(rj.Problem(K, None, rj.preference_graph(head, tail, diffs, num_rows=m), precomputed=True),
                  rj.Dual(), lam=s2).value
    assert rel(mean, K @ np.asarray(dual.coef)) < 1e-8
    logml = multivariate_normal(np.zeros(l), C).logpdf(diffs)
    assert abs(float(gp.log_marginal) - logml) < 1e-8 * abs(logml)


def test_ep_is_exact_for_one_comparison(rng):
    X, K = items(rng, 5)
    gp = _gp.gp_pairwise_probit(K, [0], [3], tol=1e-12)
    kd = K[0, 0] + K[3, 3] - 2 * K[0, 3]
    assert abs(float(gp.log_marginal) - np.log(0.5)) < 1e-10      # p(w = 1) = Φ(0)
    # exact posterior mean of d = f_0 - f_3 under Φ(d) N(d | 0, kd)
    mean_d = kd / np.sqrt(1 + kd) * norm.pdf(0) / norm.cdf(0)
    mean, _ = rj.gp_predict(gp, K, np.diag(K))
    assert abs(float(mean[0] - mean[3]) - mean_d) < 1e-8


def test_ep_converges_and_is_calibrated_on_data_from_the_model():
    rng = np.random.default_rng(3)
    X, K = items(rng, 60)
    f = rng.multivariate_normal(np.zeros(60), K)
    def draw(l):
        h = rng.integers(0, 60, l)
        t = (h + rng.integers(1, 60, l)) % 60
        win = rng.random(l) < norm.cdf(f[h] - f[t])
        return h, t, np.where(win, 1.0, -1.0)
    h, t, w = draw(400)
    gp = _gp.gp_pairwise_probit(K, h, t, w, tol=1e-9, max_iter=500)
    assert int(gp.iterations) < 500
    ht, tt, wt = draw(20000)
    p = np.asarray(rj.gp_preference_probability(gp, K[ht], K[tt], K[ht, ht], K[tt, tt],
                                                K[ht, tt]))
    won = wt > 0
    bins = np.digitize(p, [0.2, 0.4, 0.6, 0.8])
    for b in range(5):
        sel = bins == b
        assert sel.sum() > 500
        assert abs(p[sel].mean() - won[sel].mean()) < 0.04, b
    latent = np.asarray(rj.gp_preference_probability(gp, K[ht], K[tt], K[ht, ht], K[tt, tt],
                                                     K[ht, tt], latent=True))
    assert np.all(np.abs(latent - 0.5) >= np.abs(p - 0.5) - 1e-12)   # eq. 11 is sharper


def test_gp_fit_increases_the_marginal_likelihood(rng):
    X = rng.uniform(0, 1, (30, 1))
    f = np.sin(6 * X[:, 0])
    h = rng.integers(0, 30, 80)
    t = (h + rng.integers(1, 30, 80)) % 30
    d = f[h] - f[t] + 0.1 * rng.standard_normal(80)
    K0 = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(1.0), X))
    before = float(_gp.gp_pairwise_gaussian(K0, h, t, d, noise_var=1.0).log_marginal)
    model, params = rj.gp_fit(X, h, t, d, likelihood="gaussian", steps=150, learning_rate=0.1)
    assert float(model.log_marginal) > before + 10
    model, params = rj.gp_fit(X, h, t, np.sign(d), likelihood="probit", steps=20)
    assert np.isfinite(float(model.log_marginal))


def test_gp_input_errors(rng):
    K = np.eye(4)
    with pytest.raises(ValueError, match="noise_var"):
        _gp.gp_pairwise_gaussian(K, [0], [1], [1.], noise_var=0.0)
    with pytest.raises(ValueError, match="itself"):
        _gp.gp_pairwise_probit(K, [1], [1])
    with pytest.raises(ValueError, match="outside"):
        _gp.gp_pairwise_probit(K, [0], [4])
    with pytest.raises(ValueError, match="direction"):
        _gp.gp_pairwise_probit(K, [0], [1], [0.5])
    with pytest.raises(ValueError, match="likelihood"):
        rj.gp_fit(np.ones((4, 1)), [0], [1], likelihood="logit")


def test_gaussian_gp_noise_var_array_is_a_type_error_and_traced_is_accepted():
    import jax
    K = np.eye(3) + 0.5
    with pytest.raises(TypeError, match="noise_var"):
        _gp.gp_pairwise_gaussian(K, [0, 1], [1, 2], [1., 1.], noise_var=np.array([0.1, 0.2]))
    eager = _gp.gp_pairwise_gaussian(K, [0, 1], [1, 2], [1., 1.], noise_var=0.1)
    traced = jax.jit(lambda s: _gp.gp_pairwise_gaussian(K, [0, 1], [1, 2], [1., 1.], noise_var=s))
    np.testing.assert_allclose(traced(0.1).alpha, eager.alpha, rtol=1e-12)
    assert np.all(np.isnan(traced(-1.0).alpha))             # the under-jit contract: NaN


@pytest.mark.parametrize("fit", ["gaussian", "probit"])
def test_gp_on_an_indefinite_prior_names_k_instead_of_returning_nan(fit):
    K = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -8.0]])
    with pytest.raises(ValueError, match="K is not positive semidefinite"):
        if fit == "gaussian":
            _gp.gp_pairwise_gaussian(K, [0, 1], [1, 2], [1., 1.], noise_var=0.1)
        else:
            _gp.gp_pairwise_probit(K, [0, 1], [1, 2])


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["gp_pairwise_gaussian"] = [
        (lambda d: _gp.gp_pairwise_gaussian(d.K, [0], [1], [1.0], noise_var=0.0), E(ValueError, "noise_var")),
        (lambda d: _gp.gp_pairwise_gaussian(d.K, [0, 1], [1, 2], [1.0], noise_var=1.0),
         E(ValueError, "diffs")),
    ]
BAD_INPUT["gp_pairwise_probit"] = [
        (lambda d: _gp.gp_pairwise_probit(d.K, [0], [d.m]), E(ValueError, "tail")),
        (lambda d: _gp.gp_pairwise_probit(d.K, [0], [1], [0.5]), E(ValueError, "direction")),
    ]
BAD_INPUT["gp_fit"] = [
        (lambda d: rj.gp_fit(d.X, [0], [1], likelihood="logit"), E(ValueError, "likelihood")),
        (lambda d: rj.gp_fit(d.X, [0], [1], steps=-1), E(ValueError, "steps")),
        (lambda d: rj.gp_fit(d.X, [0, 1], [1, 2], [1.0, 0.0]), E(ValueError, "target")),
    ]
BAD_INPUT["gp_predict"] = [
        (lambda d: rj.gp_predict(d.gp, d.K[:2, :1], np.ones(2)), E(ValueError, "K_test")),
        (lambda d: rj.gp_predict(d.gp, d.K[:2], np.ones(3)), E(ValueError, "k_test_diag")),
    ]
BAD_INPUT["gp_preference_probability"] = [
        (lambda d: rj.gp_preference_probability(d.gp, d.K[:2], d.K[:3], np.ones(2), np.ones(3),
                                                np.ones(2)), E(ValueError, "K_b|shape")),
    ]

INTERNAL_INPUT = {k: BAD_INPUT.pop(k) for k in ['gp_pairwise_gaussian', 'gp_pairwise_probit']}
"""Cases of internal functions and of the verbs by solver (not public names: the verbs' own
tables are test_solvers.py's)."""

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
test_internal_bad_input = surface_test(INTERNAL_INPUT)


def test_gaussian_posterior_under_jit_with_a_traced_noise_variance():
    """The posterior at given hyper-parameters (``steps=0``) under the caller's ``jit`` with
    σ² traced equals the eager one, and equals dual RankRLS on the preference graph with
    λ = σ² (module docstring); an invalid σ² is a NaN model there, an error eagerly."""
    import jax
    X = np.random.default_rng(0).standard_normal((7, 3))
    head, tail, diffs = [0, 1, 2, 4], [1, 2, 3, 5], np.array([1.0, 0.5, 2.0, -1.0])
    fit = lambda nv: rj.gp_fit(X, head, tail, diffs, likelihood="gaussian", noise_var=nv,   # noqa
                               steps=0)[0]
    eager = fit(0.5)
    traced = jax.jit(fit)(0.5)
    np.testing.assert_allclose(traced.alpha, eager.alpha, rtol=1e-10)
    np.testing.assert_allclose(traced.log_marginal, eager.log_marginal, rtol=1e-10)
    # the posterior mean: K_d (K_d + σ² I)^{-1} w, K_d = A^T K A
    K = np.exp(-np.sum((X[:, None] - X[None]) ** 2, -1))
    A = np.zeros((7, 4))
    A[head, range(4)], A[tail, range(4)] = 1.0, -1.0
    Kd = A.T @ K @ A
    np.testing.assert_allclose(Kd @ np.asarray(traced.alpha),
                               Kd @ np.linalg.solve(Kd + 0.5 * np.eye(4), diffs), rtol=1e-6)
    assert np.all(np.isnan(np.asarray(jax.jit(fit)(-1.0).alpha)))
    with pytest.raises(ValueError, match="noise_var"):
        fit(-1.0)


def test_probit_directions_must_be_plus_or_minus_one():
    X = np.random.default_rng(0).standard_normal((5, 2))
    for bad in ([1.0, 0.0], [1.0, 2.0], [-0.5, 1.0]):
        with pytest.raises(ValueError, match="target must be ±1"):
            rj.gp_fit(X, [0, 1], [1, 2], bad, likelihood="probit", steps=1)
    with pytest.raises(ValueError, match="target must have the shape of head"):
        rj.gp_fit(X, [0, 1], [1, 2], [1.0, -1.0, 1.0], steps=1)
    import jax
    out = jax.jit(lambda w: rj.gp_fit(X, [0, 1], [1, 2], w, steps=1)[0].alpha)
    assert np.all(np.isnan(out(np.array([1.0, 0.0]))))
    assert np.all(np.isfinite(out(np.array([1.0, -1.0]))))
