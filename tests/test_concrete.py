"""Host-side routines called under the caller's ``jit`` (issue 24, class 8): a TypeError
that names the argument and says it must be concrete, never JAX's
``TracerArrayConversionError`` (a numpy conversion deep inside) or a silent value."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.selection import cv as _cv
from rankjax import io

d = rj.make_ranking_data(5, num_features=4, seed=0)
X, y, qid = np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)
m = X.shape[0]

# (name, the traced argument's name, call taking the traced value)
HOST = [
    ("differing_pairs", "y", lambda t: rj.differing_pairs(t)),
    ("positive_negative_pairs", "y", lambda t: rj.positive_negative_pairs(t)),
    ("permuted_labels", "y", lambda t: _cv.permuted_labels(t, num_permutations=2)),
    ("rank_levels", "y", lambda t: rj.rank_levels(t)),
    ("pairs_from_scores", "y", lambda t: rj.pairs_from_scores(t)),
    ("segment_ids", "qid", lambda t: rj.segment_ids(t)),
    ("query_graph", "qid", lambda t: rj.query_graph(t)),
    ("make_folds", "qid", lambda t: rj.make_folds(rj.query_graph(t))),
    ("partition_queries", "qid", lambda t: rj.scale.partition_queries(t, 2)),
    ("preference_graph", "head", lambda t: rj.preference_graph(t, t + 1, num_rows=m)),
    ("preference_graph", "magnitude",
     lambda t: rj.preference_graph([0, 1], [1, 2], t[:2], num_rows=m)),
    ("to_csr", "X", lambda t: rj.to_csr(t)),
    ("rankboost", "X", lambda t: rj.rankboost(t, y, rj.query_graph(qid), rounds=2)),
    ("shard", "X", lambda t: rj.scale.shard(rj.Problem(t, y, qid))),
    ("normalize_per_query", "X", lambda t: io.normalize_per_query(t, qid)),
    ("permutation_test", "y", lambda t: rj.permutation_test(
        rj.Problem(X, t, qid), rj.Primal(), lams=[1.0], metric=rj.ndcg, num_permutations=2)),
    ("select", "y", lambda t: rj.select(rj.Problem(X, t, qid), [rj.Primal()], lams=[1.0])),
]
VALUES = {"y": y, "qid": qid, "head": np.arange(3), "magnitude": y, "X": X}


@pytest.mark.parametrize("name, arg, call", HOST, ids=[f"{n}-{a}" for n, a, _ in HOST])
def test_traced_input_to_a_host_routine_is_a_type_error(name, arg, call):
    with pytest.raises(TypeError, match=rf"{arg}\b.*must be concrete|must be concrete.*{arg}") as e:
        jax.jit(call)(jnp.asarray(VALUES[arg]))
    assert not isinstance(e.value, jax.errors.TracerArrayConversionError)


@pytest.mark.parametrize("seed", [1.5, True, np.array([1, 2]), None])
def test_a_seed_must_be_an_int(seed):
    for call in (lambda: rj.make_ranking_data(3, seed=seed),
                 lambda: rj.make_folds(rj.query_graph(qid), 2, seed=seed),
                 lambda: _cv.permuted_labels(y, qid, num_permutations=2, seed=seed)):
        with pytest.raises(TypeError, match="seed must be an int"):
            call()


def test_a_traced_seed_is_a_type_error():
    with pytest.raises(TypeError, match="seed must be an int"):
        jax.jit(lambda s: rj.make_ranking_data(3, seed=s).X)(0)
