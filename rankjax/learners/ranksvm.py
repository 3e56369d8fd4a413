"""Linear RankSVM with the L2 (squared hinge) loss, trained by trust-region
Newton (TRON) with Steihaug CG (docs/math.md; Lee & Lin 2014).

    min_w  f(w) = ½ wᵀw + C Σ_{(i,j) ∈ P} max(0, 1 - wᵀ(x_i - x_j))²

over the pairs ``P`` of one query with ``y_i > y_j``. ``P`` is never enumerated:
f, the gradient and generalised Hessian-vector products come from per-instance
counts and sums over margin-violating partners (``l±``, ``α±``, ``β±``), which
are 2-D dominance sums computed with sorts and segmented scans over the *bits*
of the level index (Lee & Lin 2014 §5.3, "Algorithm B", the pointer-free
form of the selection tree): O(l log l · log K) per function evaluation and
O(l log K) per Hessian-vector product, O(l log K) memory, for any number ``K``
of relevance levels. A pair is *violating* when ``z_lo > fl(z_hi - 1)``
(margin exactly 0 excluded; equal scores included), bit for bit as in
liblinear-ranksvm.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.products import mm
from .._core.checks import check_count, check_positive, check_matrix, host_labels
from .._core.queries import segment_ids
from .._core.traced import finite_positive, nan_unless
from .._core.host import device_array
from .._core.memory import check_memory, compute_dtype
from ..kernels.kernel import Kernel, kernel_matrix
from .._core.log import begin, check_verbose, loop_step
from ..kernels.basis import as_nystrom, coef_from, features, take_basis
from ..solvers.models import (columns_of, LinearModel, check_test_matrix, linear_scores)
from .._core.segments import seg_scan
from .._core.sparse import as_dense, is_csr, to_csr
from .._core.types import saveable
from .._problem import Problem
from ..solvers.cg import as_operator
from ..solvers.cg_loop import static_metric

__all__ = ["RankLevels", "rank_levels", "RankSVMResult", "ranksvm_l2", "ranksvm_kernel",
           "RankSVMKernelModel"]


# ----------------------------------------------------------------------------
# levels (host side)

@functools.partial(jax.tree_util.register_dataclass, data_fields=["seg", "level"],
                   meta_fields=["num_bits"])
@saveable
@dataclasses.dataclass(frozen=True)
class RankLevels:
    """Dense per-query label levels for RankSVM (Lee & Lin 2014 §5.0).

    Attributes:
      seg: ``[l]`` int32 query segment of every instance.
      level: ``[l]`` int32 dense rank of ``y`` within its query (ties share a level).
      num_bits: ``B = ceil(log2 K)``, ``K`` the largest number of levels in a query.
    """

    seg: jax.Array
    level: jax.Array
    num_bits: int


def rank_levels(y, qid=None) -> RankLevels:
    """Levels of ``y`` within each query (host side; ``qid=None``: one query).

    Example:
      >>> lv = rank_levels(np.array([3., 1., 3., 0.5]), np.array([0, 0, 0, 1]))
      >>> lv.level.tolist(), lv.num_bits
      ([1, 0, 1, 0], 1)
    """
    y = host_labels(y)
    seg = np.zeros(y.shape[0], np.int32) if qid is None else segment_ids(qid).seg
    if seg.shape[0] != y.shape[0]:
        raise ValueError(f"qid has {seg.shape[0]} rows but y has {y.shape[0]}")
    order = np.lexsort((y, seg))
    s, v = seg[order], y[order]
    new_q = np.r_[True, s[1:] != s[:-1]]
    step = np.r_[False, (v[1:] > v[:-1]) & ~new_q[1:]].astype(np.int64)
    cum = np.cumsum(step)
    level = np.empty_like(cum)
    level[order] = cum - np.maximum.accumulate(np.where(new_q, cum, 0))
    K = int(level.max()) + 1
    return RankLevels(device_array(seg), device_array(level.astype(np.int32)),
                      int(math.ceil(math.log2(K))) if K > 1 else 0)


# ----------------------------------------------------------------------------
# per-instance dominance sums (device side)

class _Bit(NamedTuple):
    order: jax.Array      # [2l] event permutation for this bit
    start: jax.Array      # [2l] bool: a segment starts at this sorted event
    ends: jax.Array       # [2l] bool: a segment ends here
    plus_point: jax.Array  # [2l] float: C-event of a bit-1 instance (the higher member)
    minus_point: jax.Array  # [2l] float: Z-event of a bit-0 instance (the lower member)
    plus_read: jax.Array   # [l] sorted position of the Z-event of each bit-0 instance, or -1
    minus_read: jax.Array  # [l] sorted position of the C-event of each bit-1 instance, or -1


class SVState(NamedTuple):
    """Cached state of one function evaluation (Lee & Lin 2014 §3 caching contract)."""

    z: jax.Array
    bits: _Bit
    l_plus: jax.Array
    l_minus: jax.Array
    a: jax.Array
    e: jax.Array


def _bits(z, levels: RankLevels) -> _Bit:
    """The sorted events of every bit of the level index, stacked on a leading
    ``[B]`` axis (one vmapped program whatever ``B``)."""
    l = z.shape[0]
    key = jnp.concatenate([z, z - 1.0])
    typ = jnp.concatenate([jnp.zeros(l, jnp.int32), jnp.ones(l, jnp.int32)])
    lev = jnp.concatenate([levels.level, levels.level])
    seg = jnp.concatenate([levels.seg, levels.seg])

    def one(b):
        prefix = lev >> (b + 1)
        bit = (lev >> b) & 1
        order = jnp.lexsort((typ, key, prefix, seg))
        sp, ss = prefix[order], seg[order]
        start = jnp.concatenate([jnp.ones(1, bool), (sp[1:] != sp[:-1]) | (ss[1:] != ss[:-1])])
        ends = jnp.concatenate([start[1:], jnp.ones(1, bool)])
        bo, to = bit[order], typ[order]
        pos = jnp.zeros(2 * l, jnp.int32).at[order].set(jnp.arange(2 * l, dtype=jnp.int32))
        bit_i = bit[:l]
        return _Bit(order, start, ends,
                    ((to == 1) & (bo == 1)).astype(z.dtype),
                    ((to == 0) & (bo == 0)).astype(z.dtype),
                    jnp.where(bit_i == 0, pos[:l], -1),
                    jnp.where(bit_i == 1, pos[l:], -1))

    return jax.vmap(one)(jnp.arange(max(levels.num_bits, 1), dtype=jnp.int32))


def _dominance(bits: _Bit, W):
    """Per instance: sums of ``W`` (``[l, k]``) over violating higher partners
    (plus) and lower partners (minus), accumulated over the level bits."""
    Wev = jnp.concatenate([W, W])

    def one(bt):
        w = Wev[bt.order]
        # forward scan of the C-events and backward scan of the Z-events, as one scan
        vals = jnp.stack([w * bt.plus_point[:, None], (w * bt.minus_point[:, None])[::-1]])
        both = seg_scan(jnp.moveaxis(vals, 0, 1), jnp.stack([bt.start, bt.ends[::-1]], 1))
        fwd, bwd = both[:, 0], both[:, 1][::-1]
        pr, mr = bt.plus_read, bt.minus_read
        return (jnp.where((pr >= 0)[:, None], fwd[jnp.maximum(pr, 0)], 0),
                jnp.where((mr >= 0)[:, None], bwd[jnp.maximum(mr, 0)], 0))

    plus, minus = jax.vmap(one)(bits)
    return plus.sum(0), minus.sum(0)


def _fun(w, X, levels: RankLevels, C):
    z = mm(X, w)
    bits = _bits(z, levels)
    ones = jnp.ones_like(z)
    plus, minus = _dominance(bits, jnp.stack([ones, z], 1))
    lp, ap, lm, am = plus[:, 0], plus[:, 1], minus[:, 0], minus[:, 1]
    a = (lp + lm) * z - ap - am
    e = lm - lp
    f = mm(0.5 * w, w) + jnp.sum(C * (z * (a - 2 * e) + lm))
    return f, SVState(z, bits, lp, lm, a, e)


def _grad(w, X, state: SVState, C):
    return w + 2 * mm(X.T, C * (state.a - state.e))


def _hvp(v, X, state: SVState, C):
    u = mm(X, v)
    plus, minus = _dominance(state.bits, u[:, None])
    return v + 2 * mm(X.T, C * ((state.l_plus + state.l_minus) * u - plus[:, 0] - minus[:, 0]))


# ----------------------------------------------------------------------------
# TRON (Lee & Lin 2014, §4; liblinear-ranksvm)

@saveable
class RankSVMResult(NamedTuple):
    r"""Result of :func:`ranksvm_l2`.

    Attributes:
      weights: ``[n]`` the trained ``w`` (scores ``X @ w``).
      objective: ``f(w)``.
      grad_norm: :math:`\lVert \nabla f(w) \rVert`.
      iterations: accepted Newton steps.
      cg_iterations: total Steihaug-CG iterations.
      converged: :math:`\lVert \nabla f(w) \rVert \le tol \lVert \nabla f(0) \rVert`.
      best_iteration: with ``valid``, the Newton step whose iterate is returned
        (0 = ``w = 0``); else ``iterations``.
      valid_history: with ``valid``, ``[max_iter + 1]`` criterion of every iterate
        (lower is better; NaN after the stop); else None.
    """

    weights: jax.Array
    objective: jax.Array
    grad_norm: jax.Array
    iterations: jax.Array
    cg_iterations: jax.Array
    converged: jax.Array
    best_iteration: jax.Array = None
    valid_history: jax.Array = None

    def predict(self, X):
        return LinearModel(self.weights).predict(X)


_ETA0, _ETA1, _ETA2 = 1e-4, 0.25, 0.75
_SIG1, _SIG2, _SIG3 = 0.25, 0.5, 4.0


def _trcg(hv, g, delta, eps_cg, max_cg):
    """Steihaug truncated CG on ``H s = -g`` inside the radius ``delta``
    (Lee & Lin 2014 §4); returns ``(s, r = -g - H s, iterations, reached_boundary)``."""
    r0 = -g
    cgtol = eps_cg * jnp.linalg.norm(g)

    def cond(c):
        return ~c[5] & (c[4] < max_cg)

    def body(c):
        s, r, d, rr, it, _, _ = c
        Hd = hv(d)
        alpha = rr / (mm(d, Hd))
        over = jnp.linalg.norm(s + alpha * d) > delta
        std, sts, dtd = mm(s, d), mm(s, s), mm(d, d)
        rad = jnp.sqrt(jnp.maximum(std * std + dtd * (delta * delta - sts), 0))
        tau = jnp.where(std >= 0, (delta * delta - sts) / (std + rad), (rad - std) / dtd)
        step = jnp.where(over, tau, alpha)
        s = s + step * d
        r = r - step * Hd
        rr_new = mm(r, r)
        d = r + (rr_new / rr) * d
        return s, r, d, rr_new, it + 1, over | (jnp.sqrt(rr_new) <= cgtol), over

    init = (jnp.zeros_like(g), r0, r0, mm(r0, r0), jnp.int32(0), jnp.linalg.norm(r0) <= cgtol,
            jnp.bool_(False))
    s, r, _, _, it, _, boundary = lax.while_loop(cond, body, init)
    return s, r, it, boundary


def _tron(X, levels, opts, valid_fn=None, patience=0, hist_len=0, verbose=0):
    """TRON (Lin, Weng & Keerthi 2008) on the squared-hinge pairs; ``opts`` the traced
    ``(C, tol, max_iter, eps_cg, max_cg, row_weight)``: every row's pairs weigh
    ``C * row_weight`` (its query's weight; a pair's two rows share it)."""
    C_scalar, tol, max_iter, eps_cg, max_cg, row_weight = opts
    C = C_scalar * row_weight
    n = X.shape[1]
    w0 = jnp.zeros(n, X.dtype)
    f0, st0 = _fun(w0, X, levels, C)
    g0 = _grad(w0, X, st0, C)
    gnorm0 = jnp.linalg.norm(g0)
    # carry: w, f, g, state, delta, it (accepted steps + 1), cg_total, stop, and with a
    # validation criterion (best w, best score, best step, history)
    track = () if valid_fn is None else (
        w0, valid_fn(w0), jnp.int32(0),
        jnp.full(hist_len, jnp.nan, X.dtype).at[0].set(valid_fn(w0)))
    init = (w0, f0, g0, st0, gnorm0, jnp.int32(1), jnp.int32(0), gnorm0 <= tol * gnorm0, track)

    def cond(c):
        return ~c[7] & (c[5] <= max_iter)

    def body(c):
        w, f, g, st, delta, it, cgt, _, track = c
        s, r, cg_it, boundary = _trcg(lambda v: _hvp(v, X, st, C), g, delta, eps_cg, max_cg)
        w_new = w + s
        gs = mm(g, s)
        prered = -0.5 * (gs - mm(s, r))
        f_new, st_new = _fun(w_new, X, levels, C)
        actred = f - f_new
        snorm = jnp.linalg.norm(s)
        delta = jnp.where(it == 1, jnp.minimum(delta, snorm), delta)
        den = f_new - f - gs
        alpha = jnp.where(den <= 0, _SIG3, jnp.maximum(_SIG1, -0.5 * gs / jnp.where(den <= 0, 1, den)))
        delta = jnp.where(
            actred < _ETA0 * prered, jnp.minimum(jnp.maximum(alpha, _SIG1) * snorm, _SIG2 * delta),
            jnp.where(actred < _ETA1 * prered,
                      jnp.maximum(_SIG1 * delta, jnp.minimum(alpha * snorm, _SIG2 * delta)),
                      jnp.where(actred < _ETA2 * prered,
                                jnp.maximum(_SIG1 * delta, jnp.minimum(alpha * snorm, _SIG3 * delta)),
                                jnp.where(boundary, _SIG3 * delta,
                                          jnp.maximum(delta, jnp.minimum(alpha * snorm,
                                                                         _SIG3 * delta))))))
        accept = actred > _ETA0 * prered
        g_new = _grad(w_new, X, st_new, C)
        w = jnp.where(accept, w_new, w)
        f = jnp.where(accept, f_new, f)
        g = jnp.where(accept, g_new, g)
        st = jax.tree.map(lambda a, b: jnp.where(accept, a, b), st_new, st)
        it = it + accept.astype(jnp.int32)
        stop = (accept & (jnp.linalg.norm(g) <= tol * gnorm0)) | (f < -1e32) | (prered <= 0) | (
            (jnp.abs(actred) <= 1e-12 * jnp.abs(f)) & (jnp.abs(prered) <= 1e-12 * jnp.abs(f)))
        if valid_fn is not None:                 # early stopping on the validation criterion
            bw, bs, bi, hist = track
            sc = valid_fn(w)
            better = sc < bs
            track = (jnp.where(better, w, bw), jnp.where(better, sc, bs),
                     jnp.where(better, it - 1, bi), hist.at[it - 1].set(sc))
            stop = stop | (it - 1 - track[2] >= patience)
        loop_step(verbose, "TRON Newton step", None, it - 1, f, jnp.linalg.norm(g) / gnorm0,
                  cgt + cg_it, fmt="objective {0:.6g}, relative gradient {1:.3e}, "
                  "{2:.0f} CG iterations in all")
        return w, f, g, st, delta, it, cgt + cg_it, stop, track

    w, f, g, _, _, it, cgt, _, track = lax.while_loop(cond, body, init)
    gn = jnp.linalg.norm(g)
    ok = finite_positive(C_scalar) & finite_positive(tol) & finite_positive(eps_cg)
    res = RankSVMResult(w, f, gn, it - 1, cgt, ok & (gn <= tol * gnorm0), it - 1, None)
    if valid_fn is not None:
        res = res._replace(weights=track[0], best_iteration=track[2], valid_history=track[3])
    return nan_unless(ok, res)


def ranksvm_l2(X, y, qid=None, *, C=1.0, tol=1e-3, max_iter: int = 1000, eps_cg=0.1,
               max_cg: int = 1000, valid=None, metric="pairwise_error", patience: int = 10,
               metric_kwargs=None, query_weights=None, verbose: int = 0) -> RankSVMResult:
    r"""Linear L2-loss RankSVM by trust-region Newton (docs/math.md; Lee & Lin 2014,
    §1–4): liblinear-ranksvm's ``-s 8`` with its defaults (``C = 1``, ``eps = 1e-3``, stop when
    :math:`\lVert \nabla f(w) \rVert \le tol \lVert \nabla f(0) \rVert`, start ``w = 0``). No
    intercept. Pairs are those of one query with ``y_i > y_j`` (equal labels form no pair);
    ``qid=None`` is one global ranking.

    Cost per Newton step: one sort of ``2l`` events per bit of the level index
    and a few sparse products per CG iteration; memory O(l log K + nnz) — no
    pair array, so one query of :math:`10^{6}` rows is fine.

    Args:
      X: ``[l, n]`` dense, :class:`CSRMatrix` or BCOO.
      y: ``[l]`` labels (any reals; ties share a level).
      qid: ``[l]`` integer query ids, or ``None``.
      C: loss weight (> 0; not divided by the number of pairs).
      query_weights: ``None`` or ``[Q]`` weights >= 0, one per query in the order of the
        sorted distinct ``qid``: the pairs of query ``c`` weigh :math:`C \omega_c`.
      tol: relative gradient-norm tolerance.
      max_iter: Newton iteration cap.
      eps_cg: relative tolerance of each inner CG.
      max_cg: inner CG iteration cap (liblinear has none).
      valid: a :class:`~rankjax.Problem` of validation rows: the criterion ``metric`` (as
        :class:`~rankjax.CG`'s; ``metric_kwargs`` its options) is evaluated on every Newton
        iterate, the best iterate is returned and the loop stops after ``patience``
        steps without improvement (``best_iteration``, ``valid_history``).
      verbose: log every that many Newton steps while the loop runs (0: silent; logger
        ``"rankjax"``).

    Returns:
      a ``RankSVMResult``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> r = rj.ranksvm_l2(d.X, d.y, d.qid, C=0.1)
      >>> bool(r.converged), bool(rj.pairwise_error(d.X @ np.asarray(r.weights), d.y, d.qid) < 0.3)
      (True, True)
    """
    X = check_matrix(X)
    if not (is_csr(X) or isinstance(X, jax.Array)):
        X = to_csr(X)
    levels = rank_levels(y, qid)
    if levels.seg.shape[0] != X.shape[0]:
        raise ValueError(f"y has {levels.seg.shape[0]} rows but X has {X.shape[0]}")
    C = check_positive(C, name="C", scalar=True)
    tol = check_positive(tol, name="tol", scalar=True)
    eps_cg = check_positive(eps_cg, name="eps_cg", scalar=True)
    max_iter, max_cg = check_count(max_iter, "max_iter"), check_count(max_cg, "max_cg")
    opts = (device_array(C, X.dtype), device_array(tol, X.dtype),
            device_array(max_iter, jnp.int32), device_array(eps_cg, X.dtype),
            device_array(max_cg, jnp.int32),
            device_array(row_weights(query_weights, qid, X.shape[0]), X.dtype))
    if metric_kwargs is not None and not isinstance(metric_kwargs, dict):
        raise TypeError(f"metric_kwargs must be a dict, got {type(metric_kwargs).__name__}")
    verbose = check_verbose(verbose)
    if verbose:
        begin()
    if valid is None:
        return _tron_jit(X, levels, opts, verbose=verbose)
    if not isinstance(valid, Problem):
        raise TypeError(f"valid must be a rankjax.Problem of validation rows, got "
                        f"{type(valid).__name__}")
    Xv = as_operator(valid.X, "valid.X")
    if Xv.shape[1] != X.shape[1]:
        raise ValueError(f"valid.X has {Xv.shape[1]} columns but X has {X.shape[1]}")
    spec = (metric, static_metric(metric, dict(metric_kwargs or {}), "ranksvm_l2"))
    return _tron_valid_jit(X, levels, opts, (Xv, valid.y, valid.graph), spec,
                           patience=check_count(patience, "patience"), hist_len=max_iter + 1,
                           verbose=verbose)


def row_weights(query_weights, qid, num_rows):
    """``[l]`` the weight of every row's query (ones for ``None``), from ``[Q]`` query
    weights >= 0 in the order of the sorted distinct query ids (host side: ``qid`` is the
    caller's concrete ids, so this also runs under the caller's ``jit``)."""
    if query_weights is None:
        return np.ones(num_rows)
    seg = np.zeros(num_rows, np.int32) if qid is None else segment_ids(qid).seg
    num_queries = int(seg.max()) + 1
    w = np.asarray(query_weights, dtype=np.float64)
    if w.shape != (num_queries,):
        raise ValueError(f"query_weights must have shape [{num_queries}] (one per distinct "
                         f"qid, sorted), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("query_weights must be finite and >= 0")
    return w[seg]


_tron_jit = jax.jit(_tron, static_argnames="verbose")


@functools.partial(jax.jit, static_argnames=("spec", "patience", "hist_len", "verbose"))
def _tron_valid_jit(X, levels, opts, valid, spec, patience, hist_len, verbose):
    Xv, yv, gv = valid
    crit = gv.criterion(yv, spec[0], None, **dict(spec[1]))
    return _tron(X, levels, opts, lambda w: crit(mm(Xv, w)), patience, hist_len, verbose)


@saveable
class RankSVMKernelModel(NamedTuple):
    """Kernel RankSVM: ``scores = kernel(X_test, basis_X) @ coef``."""

    DIMS = {"coef": ("b", "k?"), "basis_X": ("b", "n")}
    FINITE = ("coef", "basis_X")

    coef: jax.Array
    basis_X: jax.Array
    kernel: Kernel

    num_features = columns_of("basis_X", 1)          # columns of the rows it scores

    def predict(self, X, block_size=None):
        X = check_test_matrix(X, self.basis_X.shape[1])
        return linear_scores(kernel_matrix(self.kernel, X, self.basis_X, block_size=block_size),
                             self.coef)


def ranksvm_kernel(X, y, qid=None, *, kernel: Kernel, C=1.0, basis=None, seed: int = 0,
                   **tron_kw) -> RankSVMKernelModel:
    r"""Kernel RankSVM through an empirical kernel map (Pahikkala et al. 2009 §4.2, §4.4):
    :math:`\Phi = K_{:R} Z^{-T}` with :math:`K_{RR} = Z Z^T` (all rows, or ``basis`` rows /
    an int number of random rows), then :func:`ranksvm_l2` on ``Φ``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> mdl = rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=rj.gaussian_kernel(0.2), basis=100)
      >>> f = rj.predict(mdl, d.X)
      >>> bool(rj.pairwise_error(f, d.y, d.qid) < 0.3)
      True
    """
    X = as_dense(check_matrix(X))
    m = X.shape[0]
    spec = as_nystrom(np.arange(m) if basis is None else basis, seed)
    r = min(int(spec.size), m) if spec.rows is None else int(np.size(spec.rows))
    check_memory((4 * m * r + 3 * r * r) * np.dtype(compute_dtype(X)).itemsize,
                 f"rj.ranksvm_kernel ({m} rows x {r} basis rows: the kernel map and its "
                 "factor)", "give basis= (a few thousand rows: the Nyström kernel map)"
                 if basis is None else "give a smaller basis=")
    index, B = take_basis(X, spec, kernel, seed, pad=False)
    Phi, C_R = _kernel_map(X, B)
    res = ranksvm_l2(Phi, y, qid, C=C, **tron_kw)
    r = index.size
    return RankSVMKernelModel(_coef(C_R, res.weights)[:r], B.X[:r], kernel)


@jax.jit
def _kernel_map(X, basis):
    C = basis.factor()
    return features(basis.block(X), C), C


_coef = jax.jit(coef_from)
