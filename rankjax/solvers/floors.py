r"""What a dtype resolves: the λ floors of the dual shortcuts, mixed-precision refinement, and
the one warning that names the λ refused (docs/precision.md).

A float32 ``eigh`` of a system ``G`` is the exact decomposition of ``G + E`` with ``E`` a few
``eps`` times its largest eigenvalue, so its solutions are off by up to ``eps Γ / λ``: the
floors (:func:`lam_floor`) refuse the λ below what a shortcut resolves, refinement
(:func:`refined_coords`) recovers the float64 answer above them with residuals formed in
float64, and :func:`check_spectrum` names, in one warning, every λ refused.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._core.backend import wide_dtype
from .._core.host import is_concrete
from .._core.linalg import Eigh, spectral_filter
from .._core.log import user_stacklevel
from .._core.products import HI, tdot
from .._core.resolved import UnresolvedLambdaWarning

__all__ = ["RESOLVE_RTOL", "HOLDOUT_SQRT_EPS", "lam_floor", "REFINE_STEPS", "REFINE_RTOL",
           "refines", "refined_coords", "spread", "ROUNDING_RTOL", "rounding_signs", "check_spectrum"]


RESOLVE_RTOL = {"path": 1000.0, "refined": 100.0, "pairs": 200.0}
r"""How far above the rounding of its spectrum (``rtol eps`` times the largest eigenvalue) a λ must
lie for a dual shortcut to give it to 1 % (float32 against float64, Gaussian and linear kernels,
m = 1,000 and 3,000); below :func:`lam_floor` a NaN lane. ``"path"``: :math:`(S K S + \lambda
I)^{-1}` from one ``eigh`` (a relative error up to :math:`\epsilon \Gamma / \lambda`), in a dtype
with no wider one to refine in; ``"refined"``: the same, refined (:func:`refined_coords`), which
says a posteriori which lanes settled; at 100 eps Γ the rounding of ``S K S`` itself moves a
solution by at most 1 % (:math:`\lVert \delta G \rVert / \lambda`; the rounding probe of
``K``, :func:`~rankjax.solvers.dual.rounding_settled`, refuses the lanes it moves more);
``"pairs"``: leave-pair-out's ``1 - (m-2) σ / ((m-2) σ + λ)``. The hold-out's floor is
:data:`HOLDOUT_SQRT_EPS` :math:`\sqrt{\epsilon}\, \Gamma`: its fold formula, even without the
cancellation of ``K_UU``'s, errs as :math:`1.4\, \epsilon (\Gamma / \lambda)^2` on a kernel
near its constant (``make_interaction_data``'s rank columns, float64: 3 % at λ = 1e-7 Γ),
which the fold blocks' refinement would remove (open)."""

HOLDOUT_SQRT_EPS = 3.5
r"""The dual hold-out's floor in units of :math:`\sqrt{\epsilon}` times the largest eigenvalue
(:data:`RESOLVE_RTOL`)."""


def lam_floor(largest, dtype, kind: str):
    """Traced: the smallest λ ``dtype`` resolves for a shortcut given its ``largest`` eigenvalue
    (:data:`RESOLVE_RTOL`; a path in a dtype :func:`refines` takes ``"refined"``)."""
    if kind == "path" and refines(dtype):
        kind = "refined"
    eps = float(jnp.finfo(dtype).eps)
    rtol = HOLDOUT_SQRT_EPS * eps ** 0.5 if kind == "holdout" else RESOLVE_RTOL[kind] * eps
    return rtol * largest


REFINE_STEPS = 4
r"""Refinement steps of :func:`refined_coords`: each shrinks the ``eigh``'s error (about
:math:`c\, \epsilon \Gamma / \lambda` of the solution) by that factor again; the last one's
correction measures what is left (:data:`REFINE_RTOL`)."""

REFINE_RTOL = 1e-3
r"""A refined lane is answered when its last correction is at most this share of its solution
(on the system's norm :math:`\sqrt{x^T G x}`, the spread of the fitted scores): a tenth of the
precision rule's :math:`10^{-2}`; else NaN (:func:`refined_coords`)."""


def refines(dtype) -> bool:
    """Whether a solve in ``dtype`` is refined in a wider one
    (:func:`~rankjax._core.backend.wide_dtype`: float32 on the CPU and GPUs; float64 has none)."""
    return jnp.finfo(wide_dtype()).bits > jnp.finfo(dtype).bits


def refined_coords(eig: Eigh, G, rhs, lams, steps: int = REFINE_STEPS):
    r"""``(coords [L, r(, k)], settled [L])``: every λ's solution of :math:`(G + \lambda I) x = b`
    in the eigenvectors' coordinates, :math:`x = U c`, from the decomposition ``eig`` of ``G``
    (``[p, p]``; ``rhs`` ``[p(, k)]`` in its range).

    Mixed-precision iterative refinement (Wilkinson's; LAPACK's ``dsposv``): :math:`c_0 = D U^T b`,
    :math:`D = \operatorname{diag}(1 / (\Gamma + \lambda))`, then ``steps`` times
    :math:`r = b - (G + \lambda I) U c` formed in the wide dtype (``G`` as stored, its products
    exact to float64) and :math:`c \mathrel{+}= D U^T r`. The decomposition is the exact one of a
    system :math:`G + E`, :math:`\lVert E \rVert \approx c\, \epsilon \Gamma_{\max}`, so each
    step shrinks the error by about :math:`\lVert E \rVert / \lambda`: the float32 ``eigh``
    answers to float32's own rounding of ``G`` wherever λ stands above its rounding.
    ``settled``: the last correction's spread :math:`\sqrt{\delta^T \Gamma \delta}` at most
    :data:`REFINE_RTOL` of the solution's (an a posteriori check: a lane whose refinement did
    not converge is refused, never answered). :math:`O(L p^2)` wide flops a step, beside the
    :math:`O(p^3)` decomposition; where the dtype has no wider one (:func:`refines`), or with
    ``steps=0``, one application and every lane settled. ``U`` may span a subspace holding
    ``G``'s range (:func:`~rankjax.solvers.reduced.reduced_eigh`)."""
    U = eig.vectors
    dtype = U.dtype
    D = spectral_filter(eig.values[None, :], lams[:, None])                  # [L, r]
    scale = lambda t: D.reshape(D.shape + (1,) * (t.ndim - 2)) * t          # noqa: E731
    c = scale(jnp.broadcast_to(tdot(U, rhs), (lams.shape[0],) + (U.shape[1],) + rhs.shape[1:]))
    settled = jnp.ones(lams.shape, bool)
    if not refines(dtype) or steps == 0:
        return c, settled
    wide = wide_dtype()
    with jax.enable_x64(wide == jnp.float64):
        Gw, bw, Uw = G.astype(wide), rhs.astype(wide), U.astype(wide)
        lw = lams.astype(wide).reshape((-1,) + (1,) * rhs.ndim)
        for _ in range(steps):
            x = jnp.einsum("pr,lr...->lp...", Uw, c.astype(wide), precision=HI)
            r = bw[None] - lw * x - jnp.einsum("pq,lq...->lp...", Gw, x, precision=HI)
            delta = scale(jnp.einsum("pr,lp...->lr...", Uw, r, precision=HI).astype(dtype))
            c = c + delta

        settled = (spread(eig.values, delta.astype(wide))
                   <= REFINE_RTOL ** 2 * spread(eig.values, c.astype(wide)))
    return c, settled


def spread(values, coords):
    r"""``[L]``: :math:`\sum_i \Gamma_i c_i^2` of every lane of ``coords [L, r(, k)]`` in the
    eigenvectors' coordinates of a system with eigenvalues ``values [r]`` (:math:`x^T G x`:
    the squared spread of the fitted scores), in ``coords``' dtype."""
    w = values.astype(coords.dtype).reshape((1, -1) + (1,) * (coords.ndim - 2))
    return jnp.sum((w * coords * coords).reshape(coords.shape[0], -1), axis=1)


ROUNDING_RTOL = 2e-3
"""A dual path lane is answered only when the rounding of ``K`` in its dtype moves it by at
most this share (:func:`~rankjax.solvers.dual.rounding_settled`; a fifth of the
precision rule's 1e-2: the probe measures the typical effect of a rounding, not its
worst)."""


def rounding_signs(shape, dtype):
    """``[p, q]`` pseudo-random ±1, symmetric where square (a hash of ``i j`` and ``i + j``, no
    key): the signs of a perturbation of rounding size (the rounding probes of
    :func:`~rankjax.solvers.dual.rounding_settled`)."""
    i = jnp.arange(shape[0], dtype=jnp.uint32)[:, None]
    j = jnp.arange(shape[1], dtype=jnp.uint32)[None, :]
    h = i * j * jnp.uint32(2654435761) + (i + j) * jnp.uint32(40503)
    h = h ^ (h >> 15)
    return (1 - 2 * ((h >> 7) & 1).astype(jnp.int32)).astype(dtype)


def check_spectrum(flags, lams, where, name="K", ok=None):
    """Outside jit: a ValueError when the kernel matrix was found indefinite, and one
    :class:`UnresolvedLambdaWarning` naming the λ below the dtype's floor (NaN lanes,
    :data:`rankjax.solvers.floors.RESOLVE_RTOL`) and those above it that ``ok`` ``[L]`` refused
    after the solve (a refinement that did not settle, the rounding probe of ``K``, a
    hold-out within its fold formula's rounding)."""
    psd, low, high, floor = flags
    if not all(is_concrete(v) for v in (psd, low, high, floor, lams, ok)):
        return                          # under a trace (jit, or grad's tangents): unchecked
    if not bool(psd):
        raise ValueError(f"{name} is not positive semidefinite: its system has the eigenvalue "
                         f"{float(low):.3g} against a largest {float(high):.3g} (beyond "
                         "rounding); a kernel matrix must be PSD: check the kernel and its "
                         "parameters")
    lams = np.asarray(lams)
    below = lams < float(floor)
    after = ~below & (False if ok is None else ~np.asarray(ok))
    shown = lambda v: ", ".join(f"{x:.3g}" for x in v)                   # noqa: E731
    parts = []
    if below.any():
        parts.append(f"lams {shown(lams[below])} are below {float(floor):.3g}, the smallest λ "
                     f"that {lams.dtype} resolves against the largest eigenvalue "
                     f"{float(high):.3g} of the system")
    if after.any():
        parts.append(f"lams {shown(lams[after])} are not resolved in {lams.dtype}: the "
                     "rounding of K moves them beyond the precision rule, their refinement did "
                     "not settle, or their hold-out predictions lie within the fold formula's "
                     "rounding (a kernel near the identity)")
    if parts:
        warnings.warn(f"{where}: {'; '.join(parts)}; their results are NaN. Use float64 "
                      "(jax_enable_x64) or larger λ", UnresolvedLambdaWarning,
                      stacklevel=user_stacklevel())
