"""Reverse-mode gradients (float64): through CG by implicit differentiation, checked
against central finite differences and the closed form's gradient."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj


def _fd(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.fixture(scope="module")
def prob():
    d = rj.make_ranking_data(12, num_features=5, seed=0)
    v = rj.make_ranking_data(6, num_features=5, seed=1)
    return d, v, rj.query_graph(d.qid), rj.query_graph(v.qid)


def _valid_loss(w, v, gv):
    r = v.y - v.X @ w
    return r @ gv.mv(r)                       # RankRLS loss on validation queries


def test_grad_through_primal_cg_matches_finite_differences_and_closed_form(prob):
    d, v, g, gv = prob

    def cg(loglam):
        w = rj.fit(rj.Problem(d.X, d.y, g), rj.CG(tol=1e-14, max_iter=300), lam=jnp.exp(loglam)).value.weights
        return _valid_loss(w, v, gv)

    def closed(loglam):
        return _valid_loss(
            rj.fit(rj.Problem(d.X, d.y, g), rj.Primal(), lam=jnp.exp(loglam)).value.weights, v, gv
        )

    for x in (-2.0, 0.5, 3.0):
        grad = jax.grad(cg)(x)
        np.testing.assert_allclose(grad, _fd(cg, x), rtol=1e-6)
        np.testing.assert_allclose(grad, jax.grad(closed)(x), rtol=1e-8)


def test_grad_through_cg_wrt_labels_and_features(prob):
    d, v, g, gv = prob

    def cg(y, X):
        return _valid_loss(
            rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-14, max_iter=300), lam=0.7).value.weights, v, gv
        )

    def closed(y, X):
        return _valid_loss(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=0.7).value.weights, v, gv)

    gy, gX = jax.grad(cg, (0, 1))(d.y, d.X)
    cy, cX = jax.grad(closed, (0, 1))(d.y, d.X)
    np.testing.assert_allclose(gy, cy, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(gX, cX, rtol=1e-7, atol=1e-10)


def test_grad_through_dual_cg_and_under_vmap(prob):
    d, v, g, gv = prob
    K = d.X @ d.X.T
    Kv = v.X @ d.X.T

    def dual(loglam):
        a = rj.fit(rj.Problem(K, d.y, g, precomputed=True), rj.CG(tol=1e-14, max_iter=300),
                   lam=jnp.exp(loglam)).value.coef
        r = v.y - Kv @ a
        return r @ gv.mv(r)

    np.testing.assert_allclose(jax.grad(dual)(0.2), _fd(dual, 0.2), rtol=1e-6)
    xs = jnp.array([-1.0, 0.0, 1.0])
    vm = jax.vmap(jax.grad(dual))(xs)
    np.testing.assert_allclose(vm, [jax.grad(dual)(x) for x in xs], rtol=1e-8)


def test_early_stopping_result_is_unchanged(prob):
    d, v, g, gv = prob
    r = rj.fit(rj.Problem(d.X, d.y, g, valid=rj.Problem(*(v.X, v.y, gv))), rj.CG(max_iter=20), lam=0.0)
    best, hist = int(r.stats["best_iteration"]), np.asarray(r.stats["valid_history"])
    assert best >= 1 and best == int(np.nanargmin(hist))
    rerun = rj.fit(rj.Problem(d.X, d.y, g), rj.CG(tol=0.0, max_iter=best), lam=0.0).value.weights
    np.testing.assert_allclose(r.value.weights, rerun, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("verb", ["holdout", "path"])
@pytest.mark.parametrize("make", [lambda k: rj.Nystrom(k, 50), lambda k: rj.Dual(k),
                                  lambda k: rj.Nystrom(k, 48)], ids=["nystrom-padded", "dual", "nystrom"])
def test_grad_in_log_gamma_through_holdout_and_path_eagerly_and_under_jit(verb, make):
    """``jax.grad`` of hold-out predictions and of a path's predictions in log γ: finite and
    equal to central differences, eagerly and under ``jit``, with a basis of 50 rows padded
    to its bucket (the padded columns are exact zeros: repeated eigenvalues, whose generic
    eigenvector derivative is 0/0) and with the dual solver (its spectrum check on the host
    skips the tangents)."""
    d = rj.make_ranking_data(30, num_features=5, seed=0)
    p = rj.Problem(d.X, d.y, rj.query_graph(d.qid))
    lams = jnp.array([0.5, 2.0])

    def f(lg):
        s = make(rj.gaussian_kernel(jnp.exp(lg)))
        out = (rj.holdout(p, s, lams=lams).value.predictions if verb == "holdout"
               else rj.path(p, s, lams=lams).value.predict(d.X))
        return jnp.sum(out ** 2)

    x = jnp.log(0.3)
    fd = _fd(lambda v: float(f(v)), float(x))
    for g in (jax.grad(f), jax.jit(jax.grad(f))):
        got = float(g(x))
        assert np.isfinite(got) and got == pytest.approx(fd, rel=1e-5, abs=1e-6 * abs(fd))
