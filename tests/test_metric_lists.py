"""Metrics in rax's list layout (``scores``/``y`` ``[Q, L]``, ``where`` ``[Q, L]``) and with a
``where`` mask on rows: twins of the flat rows with ``qid`` (the masked entries dropped),
brute force (MRR over every tie order), rax itself where it is installed, and under
``jit``/``vmap`` with every input traced."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
import reference as ref

PAIRWISE = (rj.pairwise_error, rj.cindex, rj.disagreement_error, rj.kendall_tau_b)
GRADED = (
    (rj.ndcg, {"k": None}), (rj.ndcg, {"k": 3, "ties": "stable", "no_relevant": "zero"}),
    (rj.ndcg, {"k": 2, "no_relevant": "one", "gain": "linear"}),
    (rj.mean_average_precision, {}), (rj.mean_average_precision, {"ties": "stable"}),
    (rj.precision_at_k, {"k": 3}), (rj.precision_at_k, {"k": 3, "denominator": "retrieved"}),
    (rj.mrr, {}), (rj.mrr, {"k": 2, "ties": "stable", "no_relevant": "zero"}),
)


def lists(seed, Q=7, L=6, levels=3, tie_share=0.4):
    """``(scores, y, where)`` ``[Q, L]``: ties, a list with every entry left out, a list
    with no relevant entry, NaN and -1 in the left-out entries (padding as users write it)."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 4, (Q, L)).astype(float) if tie_share else rng.normal(size=(Q, L))
    y = rng.integers(0, levels, (Q, L)).astype(float)
    w = rng.random((Q, L)) < 0.75
    w[0] = False                               # a list with nothing in it
    w[1, :2] = True
    y[1] = 0.0                                 # no relevant entry
    s = np.where(w, s, np.nan)
    y = np.where(w, y, -1.0)
    return s, y, w


def flat(s, y, w):
    """The kept entries as rows with query ids (list order kept)."""
    q = np.broadcast_to(np.arange(s.shape[0])[:, None], s.shape)
    return s[w], y[w], q[w]


@pytest.mark.parametrize("seed", [0, 1])
def test_lists_equal_the_kept_rows_with_query_ids(seed):
    s, y, w = lists(seed)
    fs, fy, fq = flat(s, y, w)
    for fn in PAIRWISE:
        assert float(fn(s, y, where=w)) == pytest.approx(float(fn(fs, fy, fq)), abs=1e-12), fn
    for fn, kw in GRADED:
        got, want = float(fn(s, y, where=w, **kw)), float(fn(fs, fy, fq, **kw))
        assert got == pytest.approx(want, abs=1e-12), (fn, kw)
        pq = fn(s, y, where=w, per_query=True, **kw)
        fpq = fn(fs, fy, fq, per_query=True, **kw)
        present = np.unique(fq)            # the lists with an entry, in order
        assert pq.values.shape == (s.shape[0],) and not bool(pq.valid[0])
        np.testing.assert_allclose(np.asarray(pq.values)[present], np.asarray(fpq.values),
                                   atol=1e-12)
        np.testing.assert_array_equal(np.asarray(pq.valid)[present], np.asarray(fpq.valid))


def test_where_on_rows_with_query_ids_drops_the_rows():
    s, y, w = lists(3)
    q = np.broadcast_to(np.arange(s.shape[0])[:, None], s.shape).ravel()
    fs, fy, fq = flat(s, y, w)
    for fn, kw in GRADED + tuple((f, {}) for f in PAIRWISE):
        got = float(fn(s.ravel(), y.ravel(), q, where=w.ravel(), **kw))
        assert got == pytest.approx(float(fn(fs, fy, fq, **kw)), abs=1e-12), (fn, kw)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", ["average", "stable"])
@pytest.mark.parametrize("k", [None, 2])
def test_mrr_equals_every_tie_order_enumerated(seed, ties, k):
    rng = np.random.default_rng(seed)
    m = 20
    f = rng.integers(0, 3, m).astype(float)
    y = rng.integers(0, 2, m).astype(float)
    qid = rng.integers(0, 4, m)
    for no_relevant in ("skip", "zero", "one"):
        got = float(rj.mrr(f, y, qid, k=k, ties=ties, no_relevant=no_relevant))
        want = ref.mrr(f, y, qid, k=k, ties=ties, no_relevant=no_relevant)
        assert got == pytest.approx(want, abs=1e-12), (no_relevant, got, want)


def test_lists_under_jit_and_vmap_with_every_input_traced():
    s, y, w = lists(4)
    kw = {"ties": "stable", "no_relevant": "zero"}
    eager = float(rj.ndcg(s, y, where=w, **kw))
    jitted = jax.jit(lambda s, y, w: rj.ndcg(s, y, where=w, **kw))
    assert float(jitted(s, y, w)) == pytest.approx(eager, abs=1e-12)
    lanes = np.stack([s, -s, 2 * s])                    # [lanes, Q, L]
    by_vmap = jax.vmap(lambda a: rj.mrr(a, y, where=w, **kw))(jnp.asarray(lanes))
    loop = [float(rj.mrr(a, y, where=w, **kw)) for a in lanes]
    np.testing.assert_allclose(np.asarray(by_vmap), loop, atol=1e-12)
    # a NaN in a kept entry under jit: NaN, never a plausible number
    bad = s.copy()
    bad[2, np.flatnonzero(w[2])[0]] = np.nan
    assert np.isnan(float(jitted(bad, y, w)))


def test_bad_lists_and_masks_are_refused_by_name():
    s, y, w = lists(5)
    with pytest.raises(TypeError, match="where must be a bool"):
        rj.ndcg(s, y, where=w.astype(int))
    with pytest.raises(ValueError, match="where must have the shape"):
        rj.ndcg(s, y, where=w[:, :-1])
    bad = s.copy()
    bad[3, np.flatnonzero(w[3])[0]] = np.inf
    with pytest.raises(ValueError, match=r"scores contains NaN or inf values where `where` is "
                                         r"True \(list 3, position"):
        rj.ndcg(bad, y, where=w)
    with pytest.raises(ValueError, match="scores contains NaN"):     # no mask: every entry
        rj.ndcg(s, y)
    with pytest.raises(ValueError, match=r"\[Q, L\] lists"):
        rj.ndcg(s, y, np.zeros(s.shape[0]))
    with pytest.raises(ValueError, match="ndcg needs graded relevance labels"):
        rj.ndcg(np.ones((2, 3)), -np.ones((2, 3)))
    with pytest.raises(ValueError, match="denominator must be one of"):
        rj.precision_at_k(s, y, where=w, denominator="n")
    assert np.isnan(float(rj.ndcg(s, y, where=np.zeros_like(w))))      # nothing kept


def test_lists_equal_rax_at_its_conventions():
    rax = pytest.importorskip("rax")
    for seed in range(3):
        s, y, w = lists(seed, Q=9, L=8, levels=4, tie_share=0)
        js, jy, jw = jnp.asarray(np.where(w, s, 0.0)), jnp.asarray(np.where(w, y, 0.0)), jnp.asarray(w)
        conv = {"ties": "stable", "no_relevant": "zero"}
        pairs = [
            (rj.ndcg(s, y, where=w, k=None, **conv), rax.ndcg_metric(js, jy, where=jw)),
            (rj.ndcg(s, y, where=w, k=3, **conv), rax.ndcg_metric(js, jy, where=jw, topn=3)),
            (rj.mrr(s, y, where=w, **conv), rax.mrr_metric(js, jy, where=jw)),
            (rj.mrr(s, y, where=w, k=2, **conv), rax.mrr_metric(js, jy, where=jw, topn=2)),
            (rj.precision_at_k(s, y, where=w, k=3, denominator="retrieved", **conv),
             rax.precision_metric(js, jy, where=jw, topn=3)),
            (rj.mean_average_precision(s, y, where=w, **conv), rax.ap_metric(js, jy, where=jw)),
        ]
        for ours, theirs in pairs:
            assert float(ours) == pytest.approx(float(theirs), abs=1e-6)
        # under jit, every input traced, ragged lists: rax.ndcg_metric(..., topn=10)
        ours = jax.jit(lambda s, y, w: rj.ndcg(s, y, where=w, k=10, **conv))(js, jy, jw)
        theirs = jax.jit(lambda s, y, w: rax.ndcg_metric(s, y, where=w, topn=10))(js, jy, jw)
        assert float(ours) == pytest.approx(float(theirs), abs=1e-6)


def test_the_coming_from_rax_page_runs_and_its_rax_loss_has_the_finite_difference_gradient():
    pytest.importorskip("rax")
    from conftest import run_page
    namespace = run_page("from_rax.md")
    assert np.all(np.isfinite(np.asarray(namespace["held_out_ndcg"](
        jnp.nan_to_num(jnp.asarray(namespace["X"])), namespace["y"], namespace["where"]))))
    lists, folds, listwise = namespace["lists"], namespace["folds"], namespace["listwise"]
    loss = lambda lam: float(rj.cv_loss({"log_lam": lam}, lists, rj.Primal(), folds,  # noqa: E731
                                        loss=listwise))
    h = 1e-3
    fd = (loss(h) - loss(-h)) / (2 * h)
    grad = float(namespace["grad"]["log_lam"])
    eps = float(np.finfo(np.asarray(namespace["value"]).dtype).eps)
    assert np.isfinite(grad) and abs(grad - fd) <= 1e-4 + max(1e-3, 1e3 * eps) * abs(fd), (grad, fd)


def test_a_refused_lane_passed_eagerly_says_what_it_is():
    pred = rj.holdout(rj.Problem(np.eye(6), np.arange(6.0), np.repeat([0, 1, 2], 2)),
                      rj.Primal(), lams=[1.0]).value.predictions
    lane = np.full_like(np.asarray(pred[0]), np.nan)           # as a refused λ's lane
    for fn in (rj.ndcg, rj.pairwise_error, rj.mrr):
        with pytest.raises(ValueError, match="NaN in every row: a lane a solver refused"):
            fn(lane, np.arange(6.0), np.repeat([0, 1, 2], 2))
