"""The survival graph (rankjax.graphs.survival): its products, right-hand side and loss equal
those of the comparable pairs enumerated as an explicit preference graph (the brute-force
twin, float64), and so do the solvers' models on it; Harrell's C is its criterion."""
import jax
import numpy as np
import pytest

import rankjax as rj


def data(seed, m=36):
    rng = np.random.default_rng(seed)
    t = rng.integers(1, 9, m).astype(float)           # tied times
    e = rng.random(m) < 0.6
    s = rng.integers(0, 2, m)
    return rng.normal(size=(m, 5)), t, e, s


def enumerated(t, e, s, normalized=True):
    """The comparable pairs written out: an explicit preference graph of unit margins."""
    head, tail = zip(*[(i, j) for i in range(len(t)) if e[i] for j in range(len(t))
                       if s[i] == s[j] and (t[j] > t[i] or (t[j] == t[i] and not e[j]))])
    w = np.full(len(head), 1 / np.sqrt(len(head)) if normalized else 1.0)
    return rj.preference_graph(np.array(head), np.array(tail), np.ones(len(head)), num_rows=len(t),
                               cost="unit"), w, len(head)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("normalized", [True, False])
def test_products_rhs_and_loss_equal_the_pairs_enumerated(seed, normalized):
    X, t, e, s = data(seed)
    g = rj.survival_graph(t, e, s, normalized=normalized)
    pg, _, pairs = enumerated(t, e, s)
    assert g.num_pairs == pairs
    w = 1 / pairs if normalized else 1.0
    v = np.random.default_rng(seed).normal(size=(t.size, 3))
    np.testing.assert_allclose(g.mv(v), w * np.asarray(pg.mv(v)), atol=1e-12)
    np.testing.assert_allclose(g.rhs(None, np.float64), w * np.asarray(pg.rhs(None, np.float64)),
                               atol=1e-12)
    f = v[:, 0]
    assert float(g.loss(f)) == pytest.approx(w * float(pg.loss(f)), rel=1e-12)
    assert float(jax.jit(lambda g, f: g.loss(f))(g, f)) == pytest.approx(float(g.loss(f)), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_log_time_margins_equal_the_pairs_enumerated_with_their_gaps(seed):
    """margin='log_time': each comparable pair's target is log t_j - log t_i (0 for a tied
    pair whose lower patient is censored): rhs, loss and a fit equal the enumerated
    magnitude-preserving preference graph of those gaps; the Laplacian is the unit margins'."""
    X, t, e, s = data(seed)
    g = rj.survival_graph(t, e, s, margin="log_time", normalized=False)
    head, tail = zip(*[(i, j) for i in range(len(t)) if e[i] for j in range(len(t))
                       if s[i] == s[j] and (t[j] > t[i] or (t[j] == t[i] and not e[j]))])
    gap = np.log(t[list(tail)]) - np.log(t[list(head)])
    pg = rj.preference_graph(np.array(head), np.array(tail), gap, num_rows=len(t))
    v = np.random.default_rng(seed).normal(size=(t.size, 2))
    np.testing.assert_allclose(g.mv(v), pg.mv(v), atol=1e-12)
    np.testing.assert_allclose(g.rhs(None, np.float64), pg.rhs(None, np.float64), atol=1e-12)
    assert float(g.loss(v[:, 0])) == pytest.approx(float(np.sum(
        (v[list(head), 0] - v[list(tail), 0] - gap) ** 2)), rel=1e-12)
    a = rj.fit(rj.Problem(X, None, g), rj.Primal(), lam=0.5).value.weights
    b = rj.fit(rj.Problem(X, None, pg), rj.Primal(), lam=0.5).value.weights
    np.testing.assert_allclose(a, b, atol=1e-10)
    with pytest.raises(ValueError, match="margin must be one of"):
        rj.survival_graph(t, e, margin="log")
    with pytest.raises(ValueError, match="every time > 0"):
        rj.survival_graph(t - t.min(), e, margin="log_time")


def test_every_event_observed_and_one_stratum_each_equal_the_pairs_enumerated():
    X, t, e, s = data(11)
    for ev, st in ((np.ones_like(e), s), (e, np.zeros_like(s)), (e, np.arange(t.size) % 5)):
        g = rj.survival_graph(t, ev, st, normalized=False)
        pg, _, _ = enumerated(t, ev, st)
        v = np.random.default_rng(0).normal(size=t.size)
        np.testing.assert_allclose(g.mv(v), pg.mv(v), atol=1e-12)


def test_models_on_it_equal_the_models_on_the_pairs_enumerated():
    X, t, e, s = data(7, m=48)
    g = rj.survival_graph(t, e, s, normalized=False)
    pg, _, _ = enumerated(t, e, s)
    rows = np.arange(0, 48, 3)
    for solver in (rj.Primal(), rj.Dual(rj.gaussian_kernel(0.4)),
                   rj.Nystrom(rj.gaussian_kernel(0.4), rj.Basis(rows=rows))):
        a = rj.fit(rj.Problem(X, None, g), solver, lam=0.5).value
        b = rj.fit(rj.Problem(X, None, pg), solver, lam=0.5).value
        np.testing.assert_allclose(rj.predict(a, X), rj.predict(b, X), atol=1e-9)
        pa = rj.path(rj.Problem(X, None, g), solver, lams=[0.1, 10.0]).value
        pb = rj.path(rj.Problem(X, None, pg), solver, lams=[0.1, 10.0]).value
        for i in range(2):
            np.testing.assert_allclose(rj.predict(pa.model(i), X), rj.predict(pb.model(i), X),
                                       atol=1e-9)


def test_a_model_on_it_ranks_by_risk_and_its_criterion_is_harrell_c():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    hazard = np.exp(X @ np.array([1.0, -0.5, 0.0, 0.0]))
    t_event, t_cens = rng.exponential(1 / hazard), rng.exponential(2.0, 200)
    t, e = np.minimum(t_event, t_cens), t_event <= t_cens
    g = rj.survival_graph(t, e)
    risk = np.asarray(rj.predict(rj.fit(rj.Problem(X, None, g), rj.Primal(), lam=1.0).value, X))
    c = float(rj.harrell_c(risk, t, e))
    assert c > 0.7                                       # the true risk's C is about 0.75 here
    assert float(g.criterion(None)(risk)) == pytest.approx(1 - c, abs=1e-12)


def test_bad_survival_graphs_are_refused_by_name():
    X, t, e, s = data(1)
    with pytest.raises(ValueError, match="event must have the shape"):
        rj.survival_graph(t, e[:-1])
    with pytest.raises(ValueError, match="event must be bool"):
        rj.survival_graph(t, e * 2.0)
    with pytest.raises(ValueError, match="no comparable pair"):
        rj.survival_graph(t, np.zeros_like(e))
    with pytest.raises(TypeError, match="must be concrete"):
        jax.jit(lambda t: rj.survival_graph(t, e))(t)
    with pytest.raises(ValueError, match="y must be None with a survival graph"):
        rj.Problem(X, t, rj.survival_graph(t, e))
    with pytest.raises(TypeError, match="hold-out.*SurvivalGraph.*SurvivalRankRLSCV"):
        rj.holdout(rj.Problem(X, None, rj.survival_graph(t, e)), rj.Primal(), lams=[1.0])


def test_jit_vmap_and_grad_through_the_graph():
    X, t, e, s = data(5)
    g = rj.survival_graph(t, e, s)
    V = np.random.default_rng(1).normal(size=(4, t.size))
    by_vmap = jax.vmap(g.mv)(V)
    np.testing.assert_allclose(by_vmap, np.stack([g.mv(v) for v in V]), atol=1e-12)
    f = V[0]
    grad = jax.jit(jax.grad(lambda f, g: g.loss(f)))(f, g)
    want = 2 * (np.asarray(g.mv(f)) - np.asarray(g.rhs(None, np.float64)))     # L symmetric
    np.testing.assert_allclose(grad, want, atol=1e-12)


def test_other_times_of_the_same_size_compile_nothing():
    """Only the number of rows is static: another set of patients of the same size (other
    times, events, strata and number of pairs) reuses the programs (issue 91, item 6)."""
    X, t, e, s = data(6)
    fit = jax.jit(lambda X, g: rj.fit(rj.Problem(X, None, g), rj.Primal(), lam=1.0).value.weights)
    loss = jax.jit(lambda f, g: g.loss(f))
    g = rj.survival_graph(t, e, s)
    fit(X, g), loss(X[:, 0], g)
    X2, t2, e2, s2 = data(7)
    g2 = rj.survival_graph(t2, e2, s2)
    assert g2.num_pairs != g.num_pairs
    before = fit._cache_size(), loss._cache_size()
    coef = fit(X2, g2)
    assert (fit._cache_size(), loss._cache_size()) == before
    np.testing.assert_allclose(coef, rj.fit(rj.Problem(X2, None, g2), rj.Primal(), lam=1.0)
                               .value.weights, atol=1e-12)
    assert float(loss(X2[:, 0], g2)) == pytest.approx(float(enumerated_loss(X2[:, 0], t2, e2, s2)),
                                                      abs=1e-10)
    assert loss._cache_size() == before[1]


def enumerated_loss(f, t, e, s):
    """The normalised unit-margin loss over the comparable pairs written out."""
    d = [f[i] - f[j] - 1 for i in range(len(t)) if e[i] for j in range(len(t))
         if s[i] == s[j] and (t[j] > t[i] or (t[j] == t[i] and not e[j]))]
    return np.mean(np.square(d))
