"""Under ``jit`` a metric of NaN scores (or labels) is NaN, never a plausible number
(issue 24, class 5): every query-level metric, pooled and per query; ``auc`` with traced
non-binary labels is NaN."""
import jax
import numpy as np
import pytest

import rankjax as rj

METRICS = [rj.pairwise_error, rj.cindex, rj.auc, rj.disagreement_error, rj.kendall_tau_b,
           rj.ndcg, rj.mean_average_precision, rj.precision_at_k]


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(12, num_features=3, seed=0)
    seg = np.unique(d.qid, return_inverse=True)[1]
    y = (np.asarray(d.y) > 1).astype(float)          # binary: every metric applies
    return np.asarray(d.X[:, 0]), y, seg, int(seg.max()) + 1


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.__name__)
def test_nan_scores_give_nan_under_jit(data, metric):
    f, y, seg, Q = data
    run = jax.jit(lambda f, y, s: metric(f, y, s, num_queries=Q))
    clean = float(run(f, y, seg))
    assert np.isfinite(clean)
    bad = f.copy()
    bad[seg == 3] = np.nan                             # one query's scores
    assert np.isnan(float(run(bad, y, seg)))
    pq = jax.jit(lambda f, y, s: metric(f, y, s, num_queries=Q, per_query=True))(bad, y, seg)
    values = np.asarray(pq.values)
    assert np.isnan(values[3]) and np.all(np.isfinite(values[np.asarray(pq.valid)][:3]))
    ybad = y.copy()
    ybad[0] = np.nan
    assert np.isnan(float(run(f, ybad, seg)))
    with pytest.raises(ValueError, match="NaN"):      # outside jit: an error, as before
        metric(bad, y, seg)


def test_auc_with_traced_non_binary_labels_is_nan(data):
    f, y, seg, Q = data
    graded = y.copy()
    graded[0] = 2.0
    assert np.isnan(float(jax.jit(lambda f, y: rj.auc(f, y))(f, graded)))
    assert np.isfinite(float(jax.jit(lambda f, y: rj.auc(f, y))(f, y)))
