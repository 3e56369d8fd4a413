r"""The Nyström model's row-block passes (Pahikkala et al. 2009, §3.5, on batches of whole
folds): the system :math:`\Phi^T L \Phi` summed over batches of rows, the hold-out's second pass,
fit and path without ``K_mR`` whole, and the sharded hold-out (a ``psum`` of the first
pass over devices). O(rows b) memory, :math:`O(m b^2)` time. The solver is
:class:`~rankjax.solvers.nystrom.Nystrom`; the route and memory plan are
:mod:`~rankjax.solvers.nystrom_plan`.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from .._core.traced import nan_unless
from .._core.backend import paths
from .._core.log import compiled
from .._core.linalg import gram_blocks, spectral_filter
from .._core.products import HI, tdot
from ..graphs.folds import each_slice
from ..kernels.basis import (BasisRows, coef_from, features,
                             wide_coef)
from ..scale.hosts import local_block
from jax.sharding import PartitionSpec as P
from .fold_batches import BATCH_ROWS, batch_rows, fold_map, fold_scan
from .holdout import fold_constant, woodbury_rows
from .models import path_scores
from .ridge import eigh_path, features_floor, ridge_solve, wide_eigh

__all__ = ["basis_coef", "blocked_system", "blocked_holdout", "holdout_blocked",
           "holdout_sharded", "fit_blocked", "path_blocked", "UNRESOLVED_WIDE"]


def basis_coef(C, W, axis):
    r"""Basis coefficients :math:`a = C^{-T} w` of weights whose basis axis is ``axis``."""
    return jnp.moveaxis(coef_from(C, jnp.moveaxis(W, axis, 0)), 0, axis)


def _batch_features(X, basis: BasisRows, C, idx, mask, live=None):
    r"""``[bs, P, b_pad]`` the features :math:`\Phi_U = K_{UR} C^{-T}` of a batch of folds (padding
    rows zero; columns scaled by ``live``), one kernel block and one triangular solve of
    ``bs P`` rows."""
    bs, P = idx.shape
    Phi = features(basis.block(X[idx.reshape(-1)]) * mask.reshape(-1, 1).astype(X.dtype), C)
    return (Phi if live is None else Phi * live).reshape(bs, P, -1)


def blocked_system(X, y, graph, basis: BasisRows, C, folds, rows, L=1):
    r"""``(G, rhs, top)``: :math:`\Phi^T L \Phi` and :math:`\Phi^T L y` summed over batches of whole folds in
    root form (:math:`Z = B^T \Phi_U` per fold, :math:`B B^T = L_{UU}`; ``L`` is block-diagonal over
    folds of whole queries) and the column maxima of ``|Φ|``; ``Φ`` is never whole, O(rows b)
    memory, :math:`O(m b^2)` time."""
    dt, bp, tail = X.dtype, C.shape[0], y.shape[1:]

    def update(acc, idx, mask):
        G, r, top = acc
        Phi = _batch_features(X, basis, C, idx, mask)
        Z = batch_rows(graph, idx, mask, Phi).reshape(-1, bp)
        zy = batch_rows(graph, idx, mask, y[idx]).reshape((-1,) + tail)
        return (G + gram_blocks(Z), r + tdot(Z, zy),
                jnp.maximum(top, jnp.max(jnp.abs(Phi), axis=(0, 1))))

    init = (jnp.zeros((bp, bp), dt), jnp.zeros((bp,) + tail, dt), jnp.zeros(bp, dt))
    return fold_scan(folds, rows, update, init, L, bp, "first pass, block")


@compiled(static_argnames=("rows",))
def holdout_blocked(X, y, graph, basis: BasisRows, lams, folds, rows=BATCH_ROWS):
    """:func:`blocked_holdout` on one device."""
    return blocked_holdout(X, y, graph, basis, lams, folds, rows)


UNRESOLVED_WIDE = "λ below the rounding of the basis system's float64 eigendecomposition"


def blocked_holdout(X, y, graph, basis: BasisRows, lams, folds, rows=BATCH_ROWS, reduce=None,
                    m=None):
    r"""``(predictions [L, m(, k)], coef [L, b_pad(, k)])`` of :func:`_nystrom_holdout` in
    row blocks of whole folds (``K_mR`` and ``Φ`` never whole): a first pass sums
    :math:`G = \Phi^T L \Phi` (:func:`blocked_system`); one ``eigh`` of ``G`` in float64
    (:func:`~rankjax.solvers.ridge.wide_eigh`: every λ of the grid from it, none from a
    factor of its own); a second pass forms each batch's ``K_UR`` again and its folds'
    eq. 33-34 predictions of the whole λ grid from :math:`P_U = K_{UR} C^{-T} V` (one product
    with :math:`C^{-T} V`, formed in float64) and one product ``[P, b] x [b, L P]`` per fold
    for every λ's fold system (:func:`~rankjax.solvers.holdout.woodbury_rows`). A λ below
    the float64 floor gives a NaN lane. Sharded (:meth:`Nystrom.holdout`): ``reduce``
    joins every device's ``(G, rhs, top)``, ``m`` counts the rows of every device."""
    C = basis.factor()
    dt, bp, tail, L = X.dtype, C.shape[0], y.shape[1:], lams.shape[0]
    m = X.shape[0] if m is None else m
    G, rhs, top = blocked_system(X, y, graph, basis, C, folds, rows, L)
    if reduce is not None:                # the rows of other devices: the global system
        G, rhs, top = reduce(G, rhs, top)
    live = (jnp.diagonal(G) > m * (4 * jnp.finfo(dt).eps * top) ** 2).astype(dt)
    eig, floor = wide_eigh(G)
    c = tdot(eig.vectors, rhs)
    D = spectral_filter(eig.values[None, :], lams[:, None])                  # [L, b]
    Dc = D.reshape(D.shape + (1,) * len(tail)) * c[None]
    W = jnp.einsum("nr,lr...->ln...", eig.vectors, Dc, precision=HI)
    Mv = wide_coef(C, live[:, None] * eig.vectors)                  # C^{-T} diag(live) V
    u = basis.constant_row(C)            # the row the shifted rows lack, in V's coordinates
    shift = None if u is None else fold_constant(u * live, eig.vectors, Dc)

    def one(idx, mask):
        bs, P = idx.shape
        K = basis.block(X[idx.reshape(-1)]) * mask.reshape(-1, 1).astype(dt)
        Pf = jnp.matmul(K, Mv, precision=HI).reshape(bs, P, bp)        # (Φ_U live) V
        Fu = jnp.einsum("fps,ls...->flp...", Pf, Dc, precision=HI)      # [bs, L, P(, k)]
        small = paths().row_block_small_solve
        fold = lambda i, k, p, f: woodbury_rows(graph, i, k, p, f, D, lams, y,  # noqa: E731
                                                by_segments=True, small_solve=small,
                                                shift=shift)
        res = (each_slice(fold, idx, mask, Pf, Fu) if paths().serial(P, small)
               else jax.vmap(fold)(idx, mask, Pf, Fu))
        return jnp.moveaxis(res, 0, 1)                                  # [L, bs, P(, k)]

    pred = fold_map(folds, rows, one, L, bp, tail, dt, "second pass, block")
    ok = lams >= jnp.maximum(floor, features_floor(G))
    return nan_unless(ok, (pred, basis_coef(C, W, 1)))


@partial(jax.jit, static_argnames="layout")
def holdout_sharded(X, y, graph, basis: BasisRows, lams, folds, m, layout):
    """:func:`blocked_holdout` on the devices of a mesh: each device's batches of its own
    queries, the system joined by one ``psum`` (the column maxima by ``pmax``), the ``b x b``
    algebra replicated; leave-query-out, each device holding out its own queries.
    ``layout``: ``(mesh, axis, rows)``."""
    mesh, axis, rows = layout

    def local(X, y, graph, lams, folds, basis, m):
        def reduce(G, r, t):
            return lax.psum(G, axis), lax.psum(r, axis), lax.pmax(t, axis)
        return blocked_holdout(X, y, local_block(graph), basis, lams, local_block(folds),
                               rows, reduce, m)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P(), spec, P(), P()),
                         out_specs=(P(None, axis), P()), check_vma=False)(
        X, y, graph, lams, folds, basis, m)


@partial(jax.jit, static_argnames="rows")
def fit_blocked(X, y, graph, basis: BasisRows, lam, folds, rows=BATCH_ROWS):
    C = basis.factor()
    G, rhs, _ = blocked_system(X, y, graph, basis, C, folds, rows)
    lam = jnp.asarray(lam, G.dtype)
    return nan_unless(lam >= features_floor(G), coef_from(C, ridge_solve(G, rhs, lam)))


@partial(jax.jit, static_argnames="rows")
def path_blocked(X, y, graph, basis: BasisRows, lams, folds, X_valid, rows=BATCH_ROWS):
    """``(coef [L, b(, k)], validation scores [L, m_valid(, k)] or None)`` of every λ from
    the row-block system (:func:`blocked_system`) and one float64 ``eigh`` of it
    (:func:`~rankjax.solvers.ridge.wide_eigh`; NaN below its floor)."""
    C = basis.factor()
    G, rhs, _ = blocked_system(X, y, graph, basis, C, folds, rows)
    eig, floor = wide_eigh(G)
    coef = nan_unless(lams >= jnp.maximum(floor, features_floor(G)),
                      basis_coef(C, eigh_path(eig, rhs, lams), 1))
    return coef, None if X_valid is None else (path_scores(basis.block(X_valid), coef)
                                               + basis.offset(coef, 1))
