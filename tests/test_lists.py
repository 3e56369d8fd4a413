"""Padded lists as a problem (rax's layout): ``rj.Problem(X [Q, L, n], y [Q, L], where=mask)``
equals the kept entries as rows with query ids (the brute-force twin: the padding dropped on
the host), for every verb, eagerly and under ``jit`` with every input traced; folds come from
the static shape; ``cv_loss`` and its gradient average over the kept rows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj

LAMS = np.array([0.05, 1.0, 20.0])


def padded(seed=0, Q=7, L=6, n=4):
    """``(X, y, where)`` with ragged lists, NaN/-1 padding, a list of one kept entry."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(Q, L, n))
    y = rng.integers(0, 3, (Q, L)).astype(float)
    w = rng.random((Q, L)) < 0.7
    w[:, :2] = True
    w[1, 1:] = False                                  # a list of one entry: no pair
    return np.where(w[..., None], X, np.nan), np.where(w, y, -1.0), w


def flat(X, y, w):
    q = np.broadcast_to(np.arange(w.shape[0])[:, None], w.shape)
    return rj.Problem(X[w], y[w], q[w])


def kept(pred, w):
    """The kept entries of ``[..., Q L]`` predictions, list by list."""
    return np.asarray(pred).reshape(np.shape(pred)[:-1] + w.shape)[..., w]


SOLVERS = {
    "primal": lambda rows: rj.Primal(),
    "dual": lambda rows: rj.Dual(rj.gaussian_kernel(0.3)),
    "nystrom": lambda rows: rj.Nystrom(rj.gaussian_kernel(0.3), rj.Basis(rows=rows)),
}


def basis_rows(w, b=12):
    """The same basis points in both layouts: kept entries (list-layout row indices, and
    their positions among the kept rows)."""
    at = np.flatnonzero(w.ravel())[::2][:b]
    return at, np.searchsorted(np.flatnonzero(w.ravel()), at)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_every_verb_on_lists_equals_the_kept_rows(name):
    X, y, w = padded()
    lists_rows, flat_rows = basis_rows(w)
    p, f = rj.Problem(X, y, where=w), flat(X, y, w)
    sl, sf = SOLVERS[name](lists_rows), SOLVERS[name](flat_rows)
    tol = 1e-9
    h_l, h_f = (rj.holdout(q, s, lams=LAMS).value for q, s in ((p, sl), (f, sf)))
    np.testing.assert_allclose(kept(h_l.predictions, w), h_f.predictions, atol=tol)
    h3_l = rj.holdout(p, sl, lams=LAMS, folds=3, seed=1).value.predictions
    assert np.all(np.isfinite(kept(h3_l, w)))
    Xk = X[w]
    m_l, m_f = rj.fit(p, sl, lam=1.0).value, rj.fit(f, sf, lam=1.0).value
    np.testing.assert_allclose(rj.predict(m_l, Xk), rj.predict(m_f, Xk), atol=tol)
    pa_l, pa_f = rj.path(p, sl, lams=LAMS).value, rj.path(f, sf, lams=LAMS).value
    for i in range(LAMS.size):
        np.testing.assert_allclose(rj.predict(pa_l.model(i), Xk), rj.predict(pa_f.model(i), Xk),
                                   atol=tol)


def test_under_jit_with_traced_lists_features_labels_and_mask():
    X, y, w = padded(1)
    f = flat(X, y, w)
    X0, y0 = np.where(w[..., None], X, 0.0), np.where(w, y, 0.0)
    lams = jnp.asarray(LAMS)
    hold = jax.jit(lambda X, y, m: rj.holdout(rj.Problem(X, y, where=m), rj.Primal(),
                                              lams=lams).value.predictions)
    want = rj.holdout(f, rj.Primal(), lams=LAMS).value.predictions
    np.testing.assert_allclose(kept(hold(X0, y0, w), w), want, atol=1e-9)
    w2 = w.copy()
    w2[3, 2:] = False                       # another mask, same shapes: no new program
    before = hold._cache_size()
    again = hold(X0, y0, w2)
    assert hold._cache_size() == before
    np.testing.assert_allclose(kept(again, w2), rj.holdout(flat(X, y, w2), rj.Primal(),
                                                           lams=LAMS).value.predictions, atol=1e-9)
    fit = jax.jit(lambda X, y, m, Xt: rj.predict(rj.fit(rj.Problem(X, y, where=m), rj.Primal(),
                                                        lam=1.0).value, Xt))
    np.testing.assert_allclose(fit(X0, y0, w, X[w]),
                               rj.predict(rj.fit(f, rj.Primal(), lam=1.0).value, X[w]), atol=1e-9)


def test_cv_loss_and_its_gradient_average_over_the_kept_rows():
    X, y, w = padded(2)
    X0, y0 = np.where(w[..., None], X, 0.0), np.where(w, y, 0.0)
    f = flat(X, y, w)
    ff = rj.make_folds(f.graph)

    def on_lists(X, y, m, lam):
        p = rj.Problem(X, y, where=m)
        return rj.cv_loss({"log_lam": lam}, p, rj.Primal(), rj.make_folds(p.graph))

    v_l, g_l = jax.jit(jax.value_and_grad(on_lists, argnums=3))(X0, y0, w, 0.3)
    v_f, g_f = jax.value_and_grad(lambda a: rj.cv_loss({"log_lam": a}, f, rj.Primal(), ff))(0.3)
    assert float(v_l) == pytest.approx(float(v_f), rel=1e-10)
    assert float(g_l) == pytest.approx(float(g_f), rel=1e-8)


def test_select_on_lists_equals_select_on_the_kept_rows():
    X, y, w = padded(3, Q=10)
    a = rj.select(rj.Problem(X, y, where=w), [rj.Primal()], lams=LAMS)
    b = rj.select(flat(X, y, w), [rj.Primal()], lams=LAMS)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-12)
    assert a.lam == b.lam


def test_bad_lists_are_refused_by_name():
    X, y, w = padded(4)
    with pytest.raises(ValueError, match=r"X contains NaN or inf values in a kept entry \(list"):
        rj.Problem(X, y)                                     # no mask: the NaN padding counts
    with pytest.raises(ValueError, match="their own queries"):
        rj.Problem(X, y, np.zeros(X.shape[0]), where=w)
    with pytest.raises(ValueError, match="where must have the shape"):
        rj.Problem(X, y, where=w[:, :-1])
    with pytest.raises(TypeError, match="where must be a bool"):
        rj.Problem(X, y, where=w.astype(int))
    with pytest.raises(ValueError, match=r"y must be \[Q, L\]"):
        rj.Problem(X, y[:, :-1], where=w)
    with pytest.raises(ValueError, match=r"X must be \[Q, L, n\]"):
        rj.Problem(X[0], y[0], where=w[0])
    bad = np.where(w, y, np.nan)
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match=r"y contains NaN or inf values in a kept entry \(list 0"):
        rj.Problem(X, bad, where=w)


def test_list_graph_is_the_query_graph_of_the_kept_entries():
    _, _, w = padded(5)
    v = np.random.default_rng(0).normal(size=w.size)
    q = np.broadcast_to(np.arange(w.shape[0])[:, None], w.shape)
    for normalized in (True, False):
        g = rj.list_graph(w, normalized=normalized)
        want = np.asarray(rj.query_graph(q[w], normalized=normalized).mv(v[w.ravel()]))
        got = np.asarray(g.mv(v))
        np.testing.assert_allclose(got.reshape(w.shape)[w], want, atol=1e-12)
        assert np.all(got.reshape(w.shape)[~w] == 0)


def test_tune_on_lists_equals_tune_on_the_kept_rows():
    X, y, w = padded(6, Q=12)
    for solver in (rj.Primal(), rj.Dual(rj.gaussian_kernel(0.3))):
        a = rj.tune(rj.Problem(X, y, where=w), solver, steps=2)
        b = rj.tune(flat(X, y, w), solver, steps=2)
        np.testing.assert_allclose(a.loss_history, b.loss_history, rtol=1e-9)
        assert a.lam == pytest.approx(b.lam, rel=1e-9)


def test_float32_lists_under_jit_equal_the_kept_rows_within_float32_rounding():
    X, y, w = padded(7)
    X32, y32 = (np.where(np.expand_dims(w, tuple(range(2, a.ndim))), a, 0).astype(np.float32)
                for a in (X, y))
    lams = jnp.asarray(LAMS, jnp.float32)
    hold = jax.jit(lambda X, y, m: rj.holdout(rj.Problem(X, y, where=m), rj.Primal(),
                                              lams=lams).value.predictions)
    got = kept(hold(X32, y32, w), w)
    q = np.broadcast_to(np.arange(w.shape[0])[:, None], w.shape)
    want = rj.holdout(rj.Problem(X32[w], y32[w], q[w]), rj.Primal(), lams=lams).value.predictions
    assert got.dtype == np.float32
    scale = float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, atol=100 * np.finfo(np.float32).eps * scale)
