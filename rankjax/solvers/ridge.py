r"""The shared ridge core: ``(G + λ I) x = b`` for a symmetric PSD ``G``.

Every closed form of the library is ridge regression on a symmetric system
(see ``docs/math.md``):

* primal RankRLS: :math:`G = X^T L X` (:math:`= Z^T Z` with ``Z = S X``), :math:`b = X^T L y`
  (Pahikkala et al. 2009, eq. 28; Airola et al. 2010, eq. 6);
* dual RankRLS: ``G = S K S`` with :math:`S = L^{1/2}` and ``A = S x``
  (Pahikkala et al. 2007, Thm 1; 2009, eq. 17);
* the Nyström (basis-vector) approximation: the primal system on the features
  :math:`\Phi = K_R^T Z^{-T}` (Pahikkala et al. 2009, §3.5).

One λ is solved by Cholesky (falling back to the eigendecomposition when the
factor breaks down in low precision); a λ grid shares one ``eigh`` and applies
the spectral filter ``1 / (Λ + λ)`` per λ. ``psd_root`` is the one PSD
square root, with the one tolerance :data:`PSD_RTOL`.

The builders take a graph and use only its operator methods (``normal_equations``,
``dual_root``), so this module knows no graph type.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import sparse
from .._core import lapack
from .._core.backend import wide_dtype
from .floors import lam_floor, refined_coords
from .._core.products import HI, tdot
from .._core.segments import sandwich
from .._core.sparse import is_bcoo
from .._core.linalg import (Eigh, eigh_psd, eigh_psd_checked, psd_ok, spectral_filter)

__all__ = ["eigh_solve", "eigh_path", "ridge_solve", "ridge_solve_checked", "primal_system",
           "dual_system", "Decomposition", "decompose_dual", "decompose_primal", "EIGH_RTOL",
           "eigh_floor", "features_floor", "wide_eigh", "cholesky_solve", "by_lane"]


EIGH_RTOL = 1e3
"""A λ grid's shared eigendecomposition answers the λ with ``λ + Λmin >= EIGH_RTOL * eps *
Λmax`` (:func:`eigh_floor`); below it each λ is solved by its own Cholesky factor
(:func:`by_lane`). A symmetric ``eigh`` is backward stable only to ``c n eps Λmax``, and
``1 / (Λ + λ)`` turns that into a relative error of at most about ``eps Λmax / (Λmin + λ)``
in the solution (measured on ``lambdarank_sample``, 3,005 x 300, rank 211, float32,
``ssyevd``: predictions 7.3 off float64 at λ = 0.14 eps Λmax): 1e-3 at the floor, a tenth of
the precision rule's 1e-2. The hold-out at the floor (centred per query): 1.2e-4 and 5.9e-5
off on ``lambdarank_sample`` (raw, normalised per query), 3.5e-5 on MQ2008 fold 1 (rank 40
of 46). The Cholesky factor of ``G + λ I`` is accurate to the condition of its diagonally
scaled form (exact zero and constant columns cost nothing): 2.6e-4 at λ = 0.14 eps Λmax."""


def eigh_floor(values, dtype):
    """Traced: the smallest λ the shared ``eigh`` with eigenvalues ``values`` (``[p]``,
    clipped at 0) answers in ``dtype``, ``EIGH_RTOL eps max(values) - min(values)``
    (:data:`EIGH_RTOL`)."""
    return EIGH_RTOL * jnp.finfo(dtype).eps * jnp.max(values) - jnp.min(values)


def features_floor(G):
    r"""Traced: the smallest λ a system of Nyström features :math:`G = \Phi^T L \Phi` resolves in
    its dtype, ``EIGH_RTOL eps ||G||_F`` (:data:`EIGH_RTOL`; the Frobenius norm bounds
    ``Λmax``, within a few times of it on a kernel's decaying spectrum). ``G`` formed in the
    dtype carries ``eps ||G||``; unlike raw features, whose ill-conditioning is mostly their
    columns' scales and which the Cholesky factor below the ``eigh`` floor resolves, the
    features :math:`K_{mR} C^{-T}` are ill-conditioned by the kernel's spectrum itself, so no
    factor answers below this floor."""
    return EIGH_RTOL * jnp.finfo(G.dtype).eps * jnp.linalg.norm(G)


def wide_eigh(G):
    r"""``(Eigh, floor)``: the eigendecomposition of a symmetric PSD ``G`` computed in
    :func:`~rankjax._core.backend.wide_dtype` (float64 even with x64 off: enabled for this
    trace alone) and returned in ``G``'s dtype, and its :func:`eigh_floor` at the wide
    dtype's eps. Each eigenvalue then carries float32's relative rounding instead of the
    ``eps Λmax`` absolute error of a float32 ``eigh``: the λ between the two floors need no
    factor of their own (the precision rule: ``G``, formed in float32, already carries
    :math:`eps32 \lVert G \rVert`; a float32 Cholesky factor of ``G + λ I`` adds as much again).
    :math:`O(p^3)` in float64 (benchmarks/REPORT.md §8)."""
    wide = wide_dtype()
    with jax.enable_x64(wide == jnp.float64):
        eig = eigh_psd(G.astype(wide))
        floor = eigh_floor(eig.values, wide)
        return Eigh(eig.values.astype(G.dtype), eig.vectors.astype(G.dtype)), floor.astype(G.dtype)


def cholesky_solve(G, b, lam):
    r""":math:`(G + \lambda I)^{-1} b` (``G`` ``[p, p]`` symmetric, ``b`` ``[p]`` or ``[p, k]``) by one
    Cholesky factor; NaN when the factor fails (``G + λ I`` not positive definite in the
    dtype: λ below its rounding), never a clipped-spectrum guess."""
    p = G.shape[0]
    C = lapack.cholesky(G + lam * jnp.eye(p, dtype=G.dtype), symmetrize=False)
    return lapack.cho_solve(C, b.reshape(p, -1)).reshape(b.shape)


def _lane_loop(lams, shared, floor, fn, consts):
    """:func:`by_lane` of one problem: ``lax.map`` over λ, a ``cond`` per lane."""
    def one(a):
        lam, x = a
        return lax.cond(lam >= floor, lambda: x,
                        lambda: jax.tree.map(lambda d, s: d.astype(s.dtype), fn(lam, *consts), x))
    return lax.map(one, (lams, shared))


def _lane_batches(n, batched, lams, shared, floor, consts, fn):
    """The batching rule of :func:`by_lane` (``n`` problems at once, a ``vmap`` over γ, scales
    or labels): one λ at a time, a ``cond`` outside the batch that factors only when some
    problem's lane lies below its floor, then that λ's factor for every problem (``vmap``
    would otherwise turn the per-lane ``cond`` into a select that factors in every lane)."""
    lb, sb, fb, cb = batched
    front = lambda v, b: v if b else jnp.broadcast_to(v, (n,) + jnp.shape(v))  # noqa: E731
    lams_n = front(lams, lb)                                                  # [n, L]
    shared_n = jax.tree.map(front, shared, sb)                                # [n, L, ...]
    floor_n = front(floor, fb)                                                # [n]
    axes = [0 if b else None for b in cb]

    def one(a):
        lam, x = a                                                            # [n], [n, ...]
        low = lam < floor_n

        def factor():
            d = jax.vmap(fn, in_axes=(0, *axes))(lam, *consts)
            return jax.tree.map(lambda d, s: jnp.where(
                low.reshape((n,) + (1,) * (s.ndim - 1)), d.astype(s.dtype), s), d, x)
        return lax.cond(jnp.any(low), factor, lambda: x)

    out = lax.map(one, jax.tree.map(lambda v: jnp.moveaxis(v, 1, 0), (lams_n, shared_n)))
    return jax.tree.map(lambda v: jnp.moveaxis(v, 0, 1), out), jax.tree.map(lambda _: True, out)


def _pure(direct, lam):
    """``(fn, consts)``: ``direct`` as a function of ``(lam, *consts)`` of every array it
    closes over (batched and differentiated ones too: ``custom_vmap`` and ``custom_jvp`` take
    no closed-over tracers)."""
    from jax.extend.core import ClosedJaxpr, jaxpr_as_fun
    closed, shape = jax.make_jaxpr(direct, return_shape=True)(lam)
    j = closed.jaxpr
    body = jaxpr_as_fun(ClosedJaxpr(j.replace(constvars=[], invars=[*j.constvars, *j.invars]),
                                    ()))
    tree = jax.tree.structure(shape)
    return (lambda lam, *c: jax.tree.unflatten(tree, body(*c, lam))), list(closed.consts)


def by_lane(lams, shared, direct, floor):
    """``[L, ...]``: lane ``i`` is ``shared[i]`` (the grid's shared decomposition) where
    ``lams[i] >= floor`` and ``direct(lams[i])`` (its own factorisation) below it; one λ at a
    time (``lax.map``), so only the lanes below the floor pay for a factor, under ``vmap`` too
    (a batching rule factors a λ only when some problem of the batch needs it). A tangent
    or gradient factors every lane (a ``cond`` batched inside a derivative cannot be
    transposed; a select of every lane's tangent can)."""
    fn, consts = _pure(direct, lams[0])

    @jax.custom_batching.custom_vmap
    def lanes(lams, shared, floor, consts):
        return _lane_loop(lams, shared, floor, fn, consts)

    lanes.def_vmap(lambda n, batched, *args: _lane_batches(n, batched, *args, fn))

    @jax.custom_jvp
    def run(lams, shared, floor, consts):
        return lanes(lams, shared, floor, consts)

    @run.defjvp
    def _tangent(primals, tangents):
        lams, shared, floor, consts = primals
        dlams, dshared, _, dconsts = tangents
        keep = lams >= floor
        # every lane's factor and a select, no cond: a cond batched inside a derivative
        # selects tangents through stop_gradient, which reverse mode cannot transpose
        dd = lax.map(lambda a: jax.jvp(lambda lam, c: fn(lam, *c), (a[0], consts),
                                       (a[1], dconsts))[1], (lams, dlams))

        def pick(s, t, d):
            if not jnp.issubdtype(s.dtype, jnp.inexact):
                return np.zeros(s.shape, jax.dtypes.float0)
            return jnp.where(keep.reshape(keep.shape + (1,) * (s.ndim - 1)), t, d.astype(s.dtype))
        return run(lams, shared, floor, consts), jax.tree.map(pick, shared, dshared, dd)

    return run(lams, shared, floor, consts)


def eigh_solve(eig: Eigh, b, lam):
    r""":math:`(G + \lambda I)^{-1} b = V \operatorname{diag}(1/(\Lambda +\lambda)) V^T b` from ``G``'s
    eigendecomposition."""
    c = tdot(eig.vectors, b)
    d = spectral_filter(eig.values, lam)
    return jnp.matmul(eig.vectors, c * d.reshape(d.shape + (1,) * (c.ndim - 1)), precision=HI)


def eigh_path(eig: Eigh, b, lams):
    """``[L, p(, k)]`` solutions of ``(G + λ I) x = b`` for every λ of ``lams [L]``."""
    c = tdot(eig.vectors, b)
    D = spectral_filter(eig.values[None, :], lams[:, None])            # [L, p]
    Dc = D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None]
    return jnp.einsum("pq,lq...->lp...", eig.vectors, Dc, precision=HI)


def _by_eigh(G, b, lams, rtol):
    """``(x [L, p(, k)], psd, smallest)`` of every λ of ``lams`` from one ``eigh`` of ``G``:
    the clipped spectrum answers a λ at least ``rtol eps`` times its largest eigenvalue,
    NaN below (λ unresolved in the dtype)."""
    eig, low, high = eigh_psd_checked(G)
    ok = lams >= rtol * jnp.finfo(G.dtype).eps * high
    x = jax.vmap(lambda lam: eigh_solve(eig, b, lam))(lams)
    x = jnp.where(ok.reshape(ok.shape + (1,) * b.ndim), x, jnp.nan)
    return x, psd_ok(low, high, G.shape[0], G.dtype), low


def _eigh_one(G, b, lam, rtol):
    """:func:`_by_eigh` of one λ: ``(x, psd, smallest)``."""
    xe, psd, low = _by_eigh(G, b, lam[None], rtol)
    return xe[0], psd, low


def _solve_one(G, b, lam, rtol):
    G = lax.optimization_barrier(G)
    x = cholesky_solve(G, b, lam)
    return lax.cond(jnp.all(jnp.isfinite(x)),
                    lambda: (x, jnp.bool_(True), jnp.full((), jnp.nan, G.dtype)),
                    lambda: _eigh_one(G, b, lam, rtol))


def _with_fallback(x, good, fallback):
    """``(x, psd, smallest)`` of lanes whose Cholesky solves ``x`` are finite where ``good``
    ``[n]``; ``fallback()`` (the ``eigh`` answers, computed only when some lane failed: a
    ``cond`` outside every batch, so no lane pays for it when none fails) elsewhere."""
    n = good.shape[0]
    return lax.cond(jnp.all(good), lambda: (x, jnp.ones(n, bool), jnp.full(n, jnp.nan, x.dtype)),
                    fallback)


def _solve_lanes(axis_size, in_batched, G, b, lam, rtol):
    """The batching rule of :func:`ridge_solve_checked`: the factorisations are batched
    and the fallback ``eigh`` runs only when some factor fails, for the failing lanes alone
    (``vmap`` never turns the fallback's ``cond`` into a select that runs it in every lane).
    One system and a batch of right-hand sides (stacked label columns): one factor, the
    multi-output solve. A λ grid against one system: one factor per λ and, when some fail,
    one ``eigh`` of ``G`` for them all (``vmap`` over λ costs about a path). A batch of
    systems (``vmap`` over a kernel's γ): one factor per system, the failing systems' own
    ``eigh`` one at a time (``lax.map``)."""
    Gb, bb, lb = in_batched
    n = axis_size
    if not Gb and not lb:                       # one factor for every column
        cols = jnp.moveaxis(b, 0, -1).reshape(b.shape[1], -1)
        x, psd, low = _solve_one(G, cols, lam, rtol)
        x = jnp.moveaxis(x.reshape(b.shape[1:] + (n,)), -1, 0)
        return (x, jnp.broadcast_to(psd, (n,)), jnp.broadcast_to(low, (n,))), (True, True, True)
    lams = lam if lb else jnp.broadcast_to(lam, (n,))
    lanes = lambda v: v.reshape(n, -1)                                           # noqa: E731
    if not Gb:
        G = lax.optimization_barrier(G)
        ax = 0 if bb else None
        x = jax.vmap(lambda b, lam: cholesky_solve(G, b, lam), in_axes=(ax, 0))(b, lams)
        good = jnp.all(jnp.isfinite(lanes(x)), axis=1)

        def fallback():
            if bb:                              # each lane its own right-hand side
                xe, psd, low = jax.vmap(lambda b, lam: _eigh_one(G, b, lam, rtol))(b, lams)
            else:
                xe, psd, low = _by_eigh(G, b, lams, rtol)
            return (jnp.where(good.reshape((-1,) + (1,) * (x.ndim - 1)), x, xe), good | psd,
                    jnp.where(good, jnp.nan, low))

        return _with_fallback(x, good, fallback), (True, True, True)
    bs = b if bb else jnp.broadcast_to(b, (n,) + b.shape)
    G = lax.optimization_barrier(G)
    x = jax.vmap(cholesky_solve)(G, bs, lams)
    good = jnp.all(jnp.isfinite(lanes(x)), axis=1)

    def one(args):
        G, b, lam, x, ok = args
        return lax.cond(ok, lambda: (x, jnp.bool_(True), jnp.full((), jnp.nan, G.dtype)),
                        lambda: _eigh_one(G, b, lam, rtol))

    return (_with_fallback(x, good, lambda: lax.map(one, (G, bs, lams, x, good))),
            (True, True, True))


def _checked_solver(rtol):
    @jax.custom_batching.custom_vmap
    def lanes(G, b, lam):
        return _solve_one(G, b, lam, rtol)

    lanes.def_vmap(lambda n, batched, G, b, lam: _solve_lanes(n, batched, G, b, lam, rtol))

    @jax.custom_jvp
    def solve(G, b, lam):
        return lanes(G, b, lam)

    @solve.defjvp
    def _tangent(primals, tangents):            # dx = (G + λ I)^{-1} (db - dG x - dλ x)
        G, b, lam = primals
        dG, db, dlam = tangents
        x, psd, low = solve(G, b, lam)
        t = db - jnp.matmul(dG, x, precision=HI) - dlam * x
        return (x, psd, low), (cholesky_solve(G, t, lam),
                               np.zeros(jnp.shape(psd), jax.dtypes.float0), jnp.zeros_like(low))

    return solve


_SOLVERS = {}


def ridge_solve_checked(G, b, lam, rtol: float = EIGH_RTOL):
    r"""``(x, psd, smallest)``: :math:`x = (G + \lambda I)^{-1} b` for symmetric ``G`` ``[p, p]`` and
    ``b`` ``[p]``/``[p, k]``, and what the factorisation tells of ``G`` for free.

    Cholesky :math:`G + \lambda I = C C^T`, then ``C z = b`` and :math:`C^T x = z`. ``G`` is materialised
    first (an optimisation barrier): fusing its producer into the factorisation's
    column-major operand made dual RankRLS slower (benchmarks/design_measurements.md §8).
    When the factor breaks down, the eigendecomposition decides: within rounding of PSD (:func:`psd_ok`; low
    precision, tiny λ) it solves with the clipped spectrum where λ is at least ``rtol eps``
    times its largest eigenvalue (default :data:`EIGH_RTOL`; else ``x`` is NaN: λ unresolved
    in the dtype); below rounding of PSD ``G`` is indefinite, ``psd`` is False and
    ``smallest`` its smallest eigenvalue (NaN when the Cholesky succeeded).

    λ may be traced: under ``vmap`` over λ alone the fallback ``eigh`` runs once for the
    failing lanes, not per lane (a custom batching rule), and the gradient is the implicit
    one, :math:`dx = (G + \lambda I)^{-1} (db - dG x - d\lambda x)`, by the same factor.
    """
    if rtol not in _SOLVERS:
        _SOLVERS[rtol] = _checked_solver(rtol)
    return _SOLVERS[rtol](G, b, jnp.asarray(lam, G.dtype))


def ridge_solve(G, b, lam):
    r""":math:`(G + \lambda I)^{-1} b` for symmetric PSD ``G`` (:func:`ridge_solve_checked`)."""
    return ridge_solve_checked(G, b, lam)[0]


# ----------------------------------------------------------------------------
# system builders

def _bcoo_normal_equations(X: sparse.BCOO, y, graph, block: int = 0):
    r""":math:`X^T L X` for sparse X without sparse-sparse products: column blocks of X are
    densified one at a time, :math:`G[:, blk] = X^T (L X[:, blk])`. O(nnz n) work."""
    m, n = X.shape
    b = block or max(1, min(n, (1 << 22) // max(m, 1)))
    nb = -(-n // b)
    rows, cols = X.indices[:, 0], X.indices[:, 1]

    def one(start):
        local = cols - start
        inside = (local >= 0) & (local < b)
        dense = jnp.zeros((m, b), X.dtype).at[rows, jnp.where(inside, local, b)].add(
            jnp.where(inside, X.data, 0), mode="drop")
        return X.T @ graph.mv(dense)  # precision: a sparse operand

    G = lax.map(one, jnp.arange(nb) * b)            # [nb, n, b]
    G = jnp.moveaxis(G, 0, 1).reshape(n, nb * b)[:, :n]
    return (G + G.T) / 2, X.T @ graph.rhs(y, X.dtype)  # precision: a sparse operand


def primal_system(X, y, graph, root: bool = False):
    r"""The normal equations of primal RankRLS: :math:`(G, b) = (X^T L X, X^T L y)`.

    For graphs with a segment root ``S`` the rows are transformed first and
    :math:`G = Z^T Z` with ``Z = S X`` (accurate in float32); otherwise ``X`` is
    centred by a constant that ``L`` annihilates. With preference edges
    :math:`b = X^T M N`. Dense cost :math:`O(m n^2)`, never :math:`O(m^2)`. A query graph takes the
    root-free form (``segment_normal_equations``) where it keeps its accuracy, unless
    ``root`` (features whose system is later amplified, as the Nyström features by
    :math:`C^{-1}`: the root form is exact to rounding in every case).
    """
    if is_bcoo(X):
        return _bcoo_normal_equations(X, y, graph)
    return graph.normal_equations(X, y, root)


class DualSystem(NamedTuple):
    r"""``G = S K S``, its right-hand side :math:`S^+ L y` (``= S y``; :math:`S^+ M N` for
    edges) and the root ``S`` (an object with ``apply``)."""

    G: jax.Array
    rhs: jax.Array
    root: object


def dual_system(K, y, graph, grid=None) -> DualSystem:
    r"""The symmetric dual system :math:`(S K S + \lambda I) B = S^+ L y`, ``A = S B``.

    Follows from ``(L K + λ I) S = S (S K S + λ I)``: ``A`` equals
    :math:`(L K + \lambda I)^{-1} L y` for every graph; ``S`` is a segment operation for
    query graphs and a dense root (``psd_root(L)``) for tie-excluded and
    preference graphs. ``S K S`` is symmetric to rounding (a segment root forms it in one
    pass, :func:`~rankjax._core.segments.sandwich`, its segment sums by ``grid`` where
    given, :func:`~rankjax._core.segments.grid_sums`); its solvers read one triangle.
    """
    root = graph.dual_root(K.dtype)
    form = graph.segment_root(K.dtype)
    G = root.apply(root.apply(K).T) if form is None else sandwich(K, *form, grid=grid)
    return DualSystem(G, root.rhs(y), root)


class Decomposition(NamedTuple):
    r"""A symmetric system decomposed once, :math:`G = U \operatorname{diag}(values) U^T`, with what every
    λ needs (Pahikkala et al. 2009, §3.2: one decomposition, every λ of a grid):
    ``rhs`` (the system's right-hand side), ``root`` (``S`` of the dual, or ``None``)
    and the checks on the spectrum: ``psd`` (within rounding of PSD), the raw
    ``smallest`` / ``largest`` eigenvalues and ``floor``, the smallest λ the dtype
    resolves for its shortcut (:func:`lam_floor`). ``G``: the dual system, whose λ are
    refined (:meth:`coords`). ``system`` is ``G`` itself where the
    λ below :func:`eigh_floor` are solved by their own Cholesky factor (the primal
    systems, ``n x n``), ``None`` where they are refused (the dual shortcuts)."""

    eig: Eigh
    rhs: jax.Array
    root: object
    psd: jax.Array
    smallest: jax.Array
    largest: jax.Array
    floor: jax.Array
    system: object = None
    G: object = None

    def ok(self, lams):
        """Traced ``[L]``: the λ lanes this decomposition answers (PSD, above the floor)."""
        return self.psd & (lams >= self.floor)

    def coords(self, lams):
        """``(coords [L, r(, k)], ok [L])``: every λ's solution in the eigenvectors' coordinates,
        refined (:func:`refined_coords`) where the system ``G`` is kept, and the lanes answered
        (:meth:`ok` and settled)."""
        lams = lams.astype(self.rhs.dtype)
        c, settled = refined_coords(self.eig, self.G, self.rhs, lams)
        return c, self.ok(lams) & settled

    def lift(self, coords):
        r"""``(β, A)``, both ``[L, m(, k)]``: the solutions :math:`\beta = U c` of :meth:`coords`'
        ``c`` and the coefficients :math:`A = root\, \beta`."""
        beta = jnp.einsum("pr,lr...->lp...", self.eig.vectors, coords, precision=HI)
        return beta, jnp.moveaxis(self.root.apply(jnp.moveaxis(beta, 0, -1)), -1, 0)

    def coef_path(self, lams):
        r"""``[L, m(, k)]`` coefficients of every λ: :math:`root (G + \lambda I)^{-1} rhs` (lanes below
        :func:`eigh_floor` of a primal system by Cholesky, NaN where that factor fails)."""
        lams = lams.astype(self.rhs.dtype)
        B = eigh_path(self.eig, self.rhs, lams)
        if self.system is not None:
            B = by_lane(lams, B, lambda lam: cholesky_solve(self.system, self.rhs, lam),
                        eigh_floor(self.eig.values, self.rhs.dtype))
        if self.root is None:
            return B
        return jnp.moveaxis(self.root.apply(jnp.moveaxis(B, 0, -1)), -1, 0)

    def flags(self):
        """``(psd, smallest, largest, floor)`` for the host-side report (``check_spectrum``)."""
        return self.psd, self.smallest, self.largest, self.floor


def decompose_dual(K, y, graph, kind: str, decompose=eigh_psd_checked, grid=None) -> Decomposition:
    """:func:`dual_system` of ``K`` decomposed once (``decompose(G)``, as
    :func:`eigh_psd_checked`), checked for PSD and given the λ floor of the shortcut ``kind``
    (``"path"`` or ``"holdout"``, :data:`RESOLVE_RTOL`); its λ are refined (:meth:`coords`)."""
    system = dual_system(K, y, graph, grid)
    eig, low, high = decompose(system.G)
    return Decomposition(eig, system.rhs, system.root, psd_ok(low, high, K.shape[0], K.dtype),
                         low, high, lam_floor(high, K.dtype, kind), G=system.G)


def decompose_primal(G, b) -> Decomposition:
    r"""The primal system ``(G + λ I) w = b`` (:math:`G = X^T L X`) decomposed once; no root and
    no PSD check (``G`` is a Gram matrix); the λ below :func:`eigh_floor` are solved by
    Cholesky (``G`` is ``n x n``: a factor costs :math:`n^3 / 3`, a fraction of the ``eigh``)."""
    eig = eigh_psd(G)
    zero = jnp.zeros((), G.dtype)
    return Decomposition(eig, b, None, jnp.ones((), bool), zero, jnp.max(eig.values), zero, G)
