"""``_checks``: remapping, dtype rules, validate-once and seeds, against plain numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rankjax._core.checks import as_float_array, check_seed
from rankjax._core.finite import known_finite
from rankjax._core.queries import Segments, resolve_segments, segment_ids


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


def _reductions():
    """Every check reduction of the package, by name (found, not listed: a new one is tested)."""
    import importlib
    import pkgutil

    import rankjax
    from rankjax._core.host import Reduction
    found = {}
    for info in pkgutil.iter_modules(rankjax.__path__):
        if info.name == "__main__":
            continue
        module = importlib.import_module(f"rankjax.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, Reduction):
                found[f"{info.name}.{name}"] = value
    return found


def _inputs(rng):
    """Inputs the reductions take: vectors, matrices (a symmetric one), label and pair arrays,
    NaN lanes, integers."""
    S = rng.standard_normal((7, 7))
    X = rng.standard_normal((9, 4)) * 3
    lanes = rng.standard_normal((3, 5, 2))
    lanes[1] = np.nan
    lanes[2, 0, 0] = np.nan
    return [X, S, S + S.T, np.abs(X), np.round(np.abs(X)) % 2, lanes, rng.integers(0, 4, (6, 2)),
            rng.integers(-3, 3, (8,)), np.full((2, 3), np.nan), np.zeros((4, 3)),
            np.where(S > 1, np.nan, S), rng.integers(-5, 5, (5, 5))]


@pytest.mark.parametrize("name", sorted(_reductions()))
def test_a_check_reduction_gives_on_the_host_what_its_program_gives(name):
    """The CPU path (numpy views of the arrays, no program per shape) against the jitted one,
    on every input it accepts."""
    from rankjax._core.host import host_view, reduce_concrete
    fn = _reductions()[name]
    tried = 0
    for a in _inputs(np.random.default_rng(0)):
        try:                                 # inputs outside a reduction's domain: skipped
            device = jax.device_get(fn.device(jnp.asarray(a)))
            host = fn.host(a)
        except (TypeError, ValueError, IndexError):
            continue
        tried += 1
        for d, h in zip(jax.tree.leaves(device), jax.tree.leaves(host)):
            np.testing.assert_allclose(np.asarray(h, np.float64), np.asarray(d, np.float64),
                                       rtol=1e-12, atol=0)
        x = jnp.asarray(a)
        assert host_view(x) is not None and np.shares_memory(host_view(x), np.asarray(x))
        for d, h in zip(jax.tree.leaves(device), jax.tree.leaves(reduce_concrete(fn, x))):
            np.testing.assert_allclose(np.asarray(h, np.float64), np.asarray(d, np.float64),
                                       rtol=1e-12, atol=0)
    assert tried >= 3


def test_host_view_is_for_concrete_arrays_on_one_cpu_device_only():
    from rankjax._core.host import host_view, lane
    x = jnp.arange(6.0).reshape(2, 3)
    assert host_view(x).ctypes.data == x.unsafe_buffer_pointer()      # a view, not a copy
    assert host_view([1.0]) is None
    jax.jit(lambda v: (host_view(v) is None) or pytest.fail("a tracer has no host view"))(x)
    np.testing.assert_array_equal(lane(x, 1), x[1])
    np.testing.assert_array_equal(lane(x, slice(0, 1)), x[:1])
    assert isinstance(lane(x, 1), jax.Array)


def test_the_variance_on_the_host_is_numpys_in_blocks():
    from rankjax.kernels.kernel import _variance_host, scale_gamma
    X = np.random.default_rng(1).standard_normal((301, 7)) * 5 + 1e3
    np.testing.assert_allclose(_variance_host(X, block=64), X.var(), rtol=1e-12)
    assert scale_gamma(jnp.asarray(X)) == pytest.approx(1 / (7 * X.var()), rel=1e-12)
