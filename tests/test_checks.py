"""``_checks``: remapping, dtype rules, validate-once and seeds, against plain numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rankjax._checks import (Segments, as_float_array, check_seed, known_finite, resolve_segments,
                             segment_ids)


def test_segment_ids_is_np_unique_and_passes_segments_through():
    qid = np.array(["b", "a", "c", "b", "a"])
    s = segment_ids(qid)
    u, inv = np.unique(qid, return_inverse=True)
    assert s.num_queries == 3 and s.seg.tolist() == inv.tolist() and s.qids.tolist() == u.tolist()
    assert segment_ids(s) is s
    seg, padded, num = resolve_segments(s, None, 5)
    assert num == 3 and padded >= 3 and np.asarray(seg).tolist() == inv.tolist()


def test_segment_ids_refuses_float_ids():
    with pytest.raises(TypeError, match="qid"):
        segment_ids(np.array([1.5, 2.0]))


def test_as_float_array_dtype_rules():
    with jax.enable_x64(True):
        assert as_float_array(np.arange(3), "x").dtype == jnp.float64
        assert as_float_array(np.ones(2, np.float16), "x").dtype == jnp.float32
    for bad in (np.array([True]), np.array([1 + 1j]), np.array(["1"])):
        with pytest.raises(TypeError, match="x must"):
            as_float_array(bad, "x")


def test_a_checked_array_is_remembered_only_while_it_lives():
    x = as_float_array(np.ones(4), "x", finite=True)
    assert known_finite(x)
    assert not known_finite(jnp.ones(4))                  # never checked
    with pytest.raises(ValueError, match="NaN"):
        as_float_array(np.array([1.0, np.nan]), "x", finite=True)


@pytest.mark.parametrize("seed", [0, np.int64(3)])
def test_seeds(seed):
    assert check_seed(seed) == int(seed)
    with pytest.raises(TypeError, match="seed"):
        check_seed(float(seed))


def test_segments_is_a_namedtuple_of_host_values():
    s = segment_ids([3, 3, 9])
    assert isinstance(s, Segments) and isinstance(s.num_queries, int)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

import rankjax as rj  # noqa: E402
from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["segment_ids"] = [
        (lambda d: rj.segment_ids(d.qid.astype(float)), E(TypeError, "qid must be an integer")),
        (lambda d: rj.segment_ids(d.qid[:, None]), E(ValueError, "1-D")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
