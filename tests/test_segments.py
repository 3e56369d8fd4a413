"""``_segments``: each primitive against a plain loop or numpy (float64)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rankjax._core.segments import (bucket, count_sum, count_to_float, expand, grid_sums, padded_size,
                               row_sums, run_ids, sandwich, seg_scan, seg_sum)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_seg_sum_is_a_loop_over_segments(rng):
    seg = rng.integers(0, 5, 40)
    v = rng.standard_normal((40, 3))
    want = np.zeros((7, 3))
    for i, s in enumerate(seg):
        want[s] += v[i]
    np.testing.assert_allclose(seg_sum(jnp.asarray(v), jnp.asarray(seg), 7), want, atol=1e-12)


def test_bucket_and_padded_size_cover_and_stay_close():
    for n in range(0, 3000, 7):
        b, p = bucket(n), int(padded_size(n))
        assert b >= max(n, 1) and (b == 1 or b // 2 < n)
        assert p >= max(n, 1) and p <= max(1.25 * n, 16)


def test_run_ids_number_the_runs_of_sorted_keys(rng):
    a = np.sort(rng.integers(0, 4, 30))
    b = rng.integers(0, 2, 30)
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    want, r = [0], 0
    for i in range(1, 30):
        r += (a[i], b[i]) != (a[i - 1], b[i - 1])
        want.append(r)
    np.testing.assert_array_equal(run_ids(jnp.asarray(a), jnp.asarray(b)), want)


def test_count_sum_is_exact_beyond_float32(rng):
    # counts whose sum exceeds 2^24 (float32's mantissa) and 2^31 (int32)
    c = rng.integers(0, 1 << 30, 64).astype(np.int32)
    seg = rng.integers(0, 3, 64).astype(np.int32)
    want = [int(c[seg == s].astype(np.int64).sum()) for s in range(3)]
    with jax.enable_x64(False):
        got = count_to_float(count_sum(jnp.asarray(c), jnp.asarray(seg), 3), jnp.float32)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6)
    with jax.enable_x64(True):
        got64 = count_sum(jnp.asarray(c), jnp.asarray(seg), 3)
    assert [int(v) for v in np.asarray(got64)] == want


def test_seg_scan_restarts_at_every_segment(rng):
    v = rng.standard_normal(20)
    start = np.zeros(20, bool)
    start[[0, 4, 5, 13]] = True
    want, acc = [], 0.0
    for i in range(20):
        acc = v[i] if start[i] else acc + v[i]
        want.append(acc)
    np.testing.assert_allclose(seg_scan(jnp.asarray(v), jnp.asarray(start)), want, atol=1e-12)


def test_expand_broadcasts_against_trailing_axes():
    assert expand(jnp.ones(4), jnp.ones((4, 2, 3))).shape == (4, 1, 1)


def _grid(seg, num):
    from rankjax.solvers.reduced import _grid
    return _grid(np.asarray(seg), num)


@pytest.mark.parametrize("shape", [(), (3,)])
def test_grid_sums_are_a_loop_over_segments(rng, shape):
    """Sums over the padded grid of each segment's rows (unsorted ids, an empty segment)."""
    seg = rng.integers(0, 5, 40)
    v = rng.standard_normal((40,) + shape)
    want = np.zeros((7,) + shape)
    for i, s in enumerate(seg):
        want[s] += v[i]
    np.testing.assert_allclose(grid_sums(jnp.asarray(v), _grid(seg, 7)), want, atol=1e-12)


@pytest.mark.parametrize("grid", [False, True])
@pytest.mark.parametrize("num", [1, 6])
def test_sandwich_is_the_root_applied_on_both_sides(rng, num, grid):
    """``S K S`` in one pass equals the dense product with ``S = sqrt(e_c n_c) (I - 1 1^T /
    n_c)`` per segment: unsorted ids, a one-row segment, a zero-weight segment, an empty
    (padded) segment, and the global graph (one segment)."""
    m = 23
    seg = rng.integers(0, num - 2, m) if num > 1 else np.zeros(m, int)
    if num > 1:
        seg[3] = num - 2                       # a one-row segment; num - 1 stays empty
    A = rng.standard_normal((m, m))
    K = (A @ A.T + (A @ A.T).T) / 2
    n = np.bincount(seg, minlength=num).astype(float)
    e = rng.uniform(0.5, 2.0, num)
    if num > 1:
        e[1] = 0.0                             # a segment of zero weight
    S = np.zeros((m, m))
    for c in range(num):
        rows = np.flatnonzero(seg == c)
        if rows.size:
            S[np.ix_(rows, rows)] = np.sqrt(e[c] * n[c]) * (np.eye(rows.size) - 1 / rows.size)
    rows = _grid(seg, num) if grid else None
    assert (rows is not None) == grid
    got = sandwich(jnp.asarray(K), jnp.asarray(seg), num, jnp.asarray(e * n), jnp.asarray(n),
                   grid=rows)
    np.testing.assert_allclose(got, S @ K @ S, atol=1e-12 * np.abs(K).max() * m)
    assert np.array_equal(np.asarray(got), np.asarray(got).T)      # exactly, for symmetric K


def test_grid_sums_along_columns_are_the_row_sums_of_the_transpose(rng):
    seg = rng.integers(0, 5, 40)
    v = rng.standard_normal((40, 3))
    np.testing.assert_allclose(grid_sums(jnp.asarray(v.T), _grid(seg, 7), axis=1),
                               np.asarray(grid_sums(jnp.asarray(v), _grid(seg, 7))).T, atol=1e-12)


@pytest.mark.parametrize("grid", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_row_sums_along_either_axis_are_a_loop_over_segments(rng, axis, grid):
    """``row_sums`` by segment along rows or columns, with and without the grid (unsorted
    ids, an empty segment), against a loop."""
    seg = rng.integers(0, 5, 40)
    v = rng.standard_normal((40, 3))
    want = np.zeros((7, 3))
    for i, s in enumerate(seg):
        want[s] += v[i]
    x, g = (v if axis == 0 else v.T), _grid(seg, 7)
    assert g is not None
    got = row_sums(jnp.asarray(x), jnp.asarray(seg), 7, g if grid else None, axis=axis)
    np.testing.assert_allclose(got, want if axis == 0 else want.T, atol=1e-12)
