import functools
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
import reference as ref
from conftest import random_qids


def data(rng, m=60, levels=3, score_levels=4):
    qid = random_qids(rng, m, num_queries=8, singletons=2)
    y = rng.integers(0, levels, m).astype(float)
    q_allties = np.unique(qid)[0]
    y[qid == q_allties] = 1.0                                   # a query of all-tied labels
    f = rng.integers(0, score_levels, m).astype(float)         # many score ties
    return f, y, qid


@pytest.mark.parametrize("seed", range(4))
def test_pairwise_measures_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    f, y, qid = data(rng)
    assert abs(float(rj.pairwise_error(f, y, qid)) - ref.pairwise_error(f, y, qid)) < 1e-12
    assert abs(float(rj.cindex(f, y, qid)) - (1 - ref.pairwise_error(f, y, qid))) < 1e-12
    assert abs(float(rj.disagreement_error(f, y, qid))
               - ref.pairwise_error(f, y, qid, tie=1.0)) < 1e-12
    assert abs(float(rj.kendall_tau_b(f, y, qid)) - ref.kendall_tau_b(f, y, qid)) < 1e-12
    # global ranking, continuous scores and labels
    g, z = rng.standard_normal(50), rng.standard_normal(50)
    assert abs(float(rj.pairwise_error(g, z)) - ref.pairwise_error(g, z)) < 1e-12
    yb = (z > 0).astype(float)
    assert abs(float(rj.auc(g, yb)) - (1 - ref.pairwise_error(g, yb))) < 1e-12


def test_per_query_values_and_validity(rng):
    f, y, qid = data(rng)
    r = rj.pairwise_error(f, y, qid, per_query=True)
    uq = np.unique(qid)
    for c, q in enumerate(uq):
        rows = qid == q
        expect = ref.pairwise_error(f[rows], y[rows])
        if np.isnan(expect):
            assert not bool(r.valid[c])
        else:
            assert bool(r.valid[c]) and abs(float(r.values[c]) - expect) < 1e-12


def test_kendall_matches_scipy(rng):
    from scipy.stats import kendalltau
    f, y = rng.integers(0, 5, 40).astype(float), rng.integers(0, 3, 40).astype(float)
    assert abs(float(rj.kendall_tau_b(f, y)) - kendalltau(f, y).statistic) < 1e-12


@pytest.mark.parametrize("k", [1, 3, 5, None])
@pytest.mark.parametrize("gain", ["exp2", "linear"])
@pytest.mark.parametrize("ties", ["average", "stable"])
@pytest.mark.parametrize("no_relevant", ["skip", "one", "zero"])
def test_ndcg_equals_brute_force(k, gain, ties, no_relevant):
    rng = np.random.default_rng(3)
    m = 36
    qid = rng.permutation(np.repeat(np.arange(6) * 5 + 11, 6))    # 6 queries of size 6
    y = rng.integers(0, 3, m).astype(float)
    y[qid == 11] = 0                                              # no relevant document
    f = rng.integers(0, 3, m).astype(float)                       # heavy ties
    got = float(rj.ndcg(f, y, qid, k=k, gain=gain, ties=ties, no_relevant=no_relevant))
    assert abs(got - ref.ndcg(f, y, qid, k=k, gain=gain, ties=ties,
                              no_relevant=no_relevant)) < 1e-12


def test_ndcg_matches_sklearn(rng):
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    m = 80
    qid = np.repeat(np.arange(8), 10)
    y = rng.integers(0, 4, m).astype(float)
    f = np.round(rng.standard_normal(m), 1)                       # some ties
    for k in (3, 10):
        per_q = [sklearn_metrics.ndcg_score(y[qid == q][None], f[qid == q][None], k=k)
                 for q in range(8)]
        got = rj.ndcg(f, y, qid, k=k, gain="linear", ties="average", no_relevant="zero")
        assert abs(float(got) - np.mean(per_q)) < 1e-12


@pytest.mark.parametrize("threshold", [1.0, 2.0])
def test_map_and_precision_equal_brute_force(rng, threshold):
    f, y, qid = data(rng)
    got = float(rj.mean_average_precision(f, y, qid, threshold=threshold, ties="stable"))
    assert abs(got - ref.average_precision(f, y, qid, threshold)) < 1e-12
    for k in (1, 3, 10):
        got = float(rj.precision_at_k(f, y, qid, k=k, threshold=threshold, ties="stable"))
        assert abs(got - ref.average_precision(f, y, qid, threshold, k=k)) < 1e-12


def test_map_and_precision_average_ties_equal_the_mean_over_all_orderings(rng):
    # queries of <= 6 rows with heavy score ties: the tie-averaged value is the mean of the
    # stable value over every permutation of the input order (uniform tie-breaking)
    import itertools
    for trial in range(6):
        n = int(rng.integers(2, 7))
        f = rng.integers(0, 2, n).astype(float)
        y = rng.integers(0, 3, n).astype(float)
        if not (y >= 1).any():
            y[0] = 1.0
        for k in (None, 1, 2, 4):
            vals = []
            for perm in itertools.permutations(range(n)):
                p = np.array(perm)
                vals.append(ref.average_precision(f[p], y[p], None, 1.0, k=k))
            fn = (rj.mean_average_precision if k is None
                  else functools.partial(rj.precision_at_k, k=k))
            assert abs(float(fn(f, y)) - np.mean(vals)) < 1e-12, (f, y, k)
    # input order no longer matters: a constant scorer on a file sorted by label
    y = np.array([1, 1, 0, 0.])
    assert float(rj.mean_average_precision(np.zeros(4), y)) == float(
        rj.mean_average_precision(np.zeros(4), y[::-1]))
    assert float(rj.precision_at_k(np.zeros(4), y, k=2)) == 0.5


def test_edge_disagreement(rng):
    f = rng.integers(0, 3, 20).astype(float)
    h, t = rng.integers(0, 20, 50), rng.integers(0, 20, 50)
    expect = np.mean([0.5 * (1 - (1 if f[a] - f[b] > 0 else -1)) for a, b in zip(h, t)])
    assert abs(float(rj.edge_disagreement_error(f, h, t)) - expect) < 1e-12


def test_metrics_under_jit_vmap_and_float32(rng):
    f, y, qid = data(rng)
    s = rj.segment_ids(qid)
    F = np.stack([f, -f, f + rng.standard_normal(len(f))])
    for metric in (rj.pairwise_error, rj.kendall_tau_b, rj.ndcg, rj.mean_average_precision,
                   rj.precision_at_k, rj.disagreement_error):
        fn = jax.jit(lambda a, b, c: metric(a, b, c, num_queries=s.num_queries))
        batched = jax.vmap(fn, in_axes=(0, None, None))(F, y, s.seg)
        eager = [float(metric(row, y, qid)) for row in F]
        np.testing.assert_allclose(batched, eager, rtol=1e-12)
        out32 = fn(jnp.asarray(f, jnp.float32), jnp.asarray(y, jnp.float32), s.seg)
        assert out32.dtype == jnp.float32
        np.testing.assert_allclose(out32, eager[0], rtol=1e-5)


def test_global_pairwise_error_of_a_million_rows_is_linear_memory():
    """10^6 rows in one ranking: an O(m^2) method would need 8 TB; this needs O(m)."""
    rng = np.random.default_rng(1)
    m = 1_000_000
    f = rng.standard_normal(m).astype(np.float32)
    y = (rng.random(m) < 0.3).astype(np.float32)
    f[: m // 10] = 0.0                                           # a block of score ties
    err = float(rj.pairwise_error(jnp.asarray(f), jnp.asarray(y)))
    # exact count by sorting in numpy (positives vs negatives, ties half)
    pos, neg = np.sort(f[y == 1]), np.sort(f[y == 0])
    greater = len(neg) - np.searchsorted(neg, pos, side="right")
    equal = np.searchsorted(neg, pos, side="right") - np.searchsorted(neg, pos, side="left")
    expect = (greater.sum() + 0.5 * equal.sum()) / (len(pos) * len(neg))
    assert abs(err - expect) < 1e-7          # float32 result; the counts themselves are exact


def test_degenerate_inputs_are_defined(rng):
    # one query of size 1 and one of all-tied labels: no pair anywhere -> NaN by definition
    r = rj.pairwise_error([1.0, 2.0, 3.0], [1.0, 1.0, 0.0], [0, 0, 1], per_query=True)
    assert not np.any(np.asarray(r.valid))
    assert np.all(np.isfinite(np.asarray(r.values)))
    assert np.isnan(float(rj.pairwise_error([1.0, 2.0], [1.0, 1.0])))
    # no relevant document
    assert float(rj.ndcg([1.0, 2.0], [0.0, 0.0], no_relevant="one")) == 1.0
    assert float(rj.ndcg([1.0, 2.0], [0.0, 0.0], no_relevant="zero")) == 0.0
    assert np.isnan(float(rj.ndcg([1.0, 2.0], [0.0, 0.0])))


def test_metric_input_errors():
    with pytest.raises(ValueError, match="scores"):
        rj.ndcg([1.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="y"):
        rj.pairwise_error([1.0, 2.0], [0, 1, 2])
    with pytest.raises(TypeError, match="qid"):
        rj.pairwise_error([1.0, 2.0], [0, 1], [0.5, 1.5])
    with pytest.raises(ValueError, match="qid"):
        rj.pairwise_error([1.0, 2.0], [0, 1], [0, 5], num_queries=2)
    with pytest.raises(ValueError, match="k"):
        rj.ndcg([1.0, 2.0], [0, 1], k=0)
    with pytest.raises(ValueError, match="auc"):
        rj.auc([1.0, 2.0], [0, 2])
    with pytest.raises(ValueError, match="empty"):
        rj.ndcg(np.zeros(0), np.zeros(0))


def test_ndcg_labels_must_be_graded_and_large_labels_do_not_overflow():
    with pytest.raises(ValueError, match="y >= 0"):
        rj.ndcg(np.arange(4.0), np.array([-1.0, 1, -1, 1]))
    f = np.array([1.0, 2, 3, 4])
    y = np.array([2.0, 0, 1, 1])
    base = float(rj.ndcg(f, y))
    # 2^y - 1 scaled per query: shifting labels far up changes gains, but never to inf/NaN
    for shift in (100.0, 300.0):
        v = float(rj.ndcg(f.astype(np.float32), (y + shift).astype(np.float32)))
        assert np.isfinite(v) and 0 <= v <= 1
    assert abs(base - 0.7075790686744425) < 1e-12       # worked by hand: 2.9229 / 4.1309


@pytest.mark.slow
@pytest.mark.parametrize("x64", [True, False])
def test_pair_counts_are_exact_in_float32(x64):
    """Counts reach m^2/2; differences of counts are taken in exact integers (int64 with
    x64, base-256 int32 digits without), so float32 scores lose nothing to cancellation."""
    import jax
    import jax.numpy as jnp
    from scipy.stats import kendalltau
    rng = np.random.default_rng(0)
    m = 20000                                    # 2e8 pairs: far beyond float32's 2^24
    y = rng.integers(0, 2, m).astype(np.float32)
    with jax.enable_x64(x64):
        flat = np.zeros(m, np.float32)
        assert float(rj.pairwise_error(flat, y)) == 0.5
        assert float(rj.cindex(flat, y)) == 0.5
        assert float(rj.disagreement_error(flat, y)) == 1.0
        assert np.isnan(float(rj.kendall_tau_b(flat, y)))          # undefined: all scores tie
        f = rng.normal(size=m).astype(np.float32)
        assert abs(float(rj.kendall_tau_b(f, y)) - kendalltau(f, y).statistic) < 1e-6
        one = np.zeros(m + 1, np.float32)
        one[7] = 1                                 # 2e8 tied pairs, 2e4 differing ones
        g = rng.normal(size=m + 1).astype(np.float32)
        exact = np.sum(g > g[7]) / m
        assert abs(float(rj.pairwise_error(g, one)) - exact) < 1e-6   # was 8.6e-5 off
        if not x64:                               # digit sums fit int32 up to 2^23 rows
            s = jax.ShapeDtypeStruct(((1 << 23) + 1,), jnp.float32)
            with pytest.raises(ValueError, match="jax_enable_x64"):
                jax.eval_shape(lambda a, b: rj.pairwise_error(a, b), s, s)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, LIST_METRICS, PAIR_METRICS, V, metric_cases, nan, surface_test  # noqa: E402

BAD_INPUT = {name: metric_cases(getattr(rj, name)) for name in PAIR_METRICS + LIST_METRICS}
BAD_INPUT["auc"] = [
    (lambda d: rj.auc(d.y, d.y, d.qid), E(ValueError, "y")),            # graded labels
    (lambda d: rj.auc(d.nanv, (d.y > 1) * 1.0, d.qid), E(ValueError, "scores contains NaN")),
    (lambda d: rj.auc(d.y, np.ones(d.m)), V(nan)),                       # no negative
    (lambda d: rj.auc(np.zeros(4), np.array([0., 1, 0, 1])), V(lambda v: float(v) == 0.5)),
]
BAD_INPUT["ndcg"] += [
    (lambda d: rj.ndcg(d.y, d.y - 5, d.qid), E(ValueError, "y >= 0")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, k=0), E(ValueError, "k")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, gain="cubic"), E(ValueError, "gain")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, ties="random"), E(ValueError, "ties")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, no_relevant="never"), E(ValueError, "no_relevant")),
    (lambda d: rj.ndcg(d.y, np.zeros(d.m), d.qid, no_relevant="zero"), V(lambda v: float(v) == 0)),
]
BAD_INPUT["precision_at_k"] += [
    (lambda d: rj.precision_at_k(d.y, d.y, d.qid, k=2.5), E((TypeError, ValueError), "k must be")),
    (lambda d: rj.precision_at_k(d.y, d.y, d.qid, threshold=np.nan), E(ValueError, "threshold")),
]
BAD_INPUT["mean_average_precision"] += [
    (lambda d: rj.mean_average_precision(d.ties, (d.y > 1) * 1.0, d.qid, ties="stable"),
     V(lambda v: 0 < float(v) <= 1)),
]
BAD_INPUT["edge_disagreement_error"] = [
        (lambda d: rj.edge_disagreement_error(d.y, [0, d.m], [1, 2]), E(ValueError, "head")),
        (lambda d: rj.edge_disagreement_error(d.y, [0, 1], [1, 2, 3]), E(ValueError, "differ in length")),
        (lambda d: rj.edge_disagreement_error(d.nanv, [0], [1]), E(ValueError, "scores contains NaN")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
