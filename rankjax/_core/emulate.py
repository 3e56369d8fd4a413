"""Reduced-precision products emulated on any backend, so that a product missing the
precision rule (:mod:`rankjax._core.products`) fails on the CPU too.

An H100 runs a float32 product at default precision in TF32 (operands rounded to 10
mantissa bits), a TPU in bfloat16 passes (7 bits); the CPU computes it exactly, so a bare
product can never fail a CPU test. :func:`reduced_precision` wraps a function: it is traced
to a jaxpr, and every ``dot_general`` without ``HIGHEST`` precision on float32 (or
narrower) operands, at any depth (inside ``jit``, ``while``, ``scan``, ``cond``, custom
derivatives, linear solves), gets its operands rounded to the reduced mantissa before the
product, as the accelerator would. ``HIGHEST`` products and float64 products are left
alone. The wrapped function is jitted: it runs as one program, not eqn by eqn.

Used by ``tests/test_float32.py`` and ``benchmarks/accelerator_check.py``.

Example:
  >>> import jax.numpy as jnp, numpy as np
  >>> from jax import lax
  >>> a = jnp.full((1, 1), 1 + 2.0 ** -12, jnp.float32)
  >>> float(reduced_precision(lambda x: x @ x)(a)[0, 0]) == 1.0          # precision: example
  True
  >>> hi = lambda x: jnp.matmul(x, x, precision=lax.Precision.HIGHEST)
  >>> float(reduced_precision(hi)(a)[0, 0]) > 1.0
  True
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core

MANTISSA = {"tf32": 10, "bf16": 7}
"""Mantissa bits kept by each emulated format (float32 has 23)."""


def round_mantissa(x, bits: int):
    """``x`` (float32 or narrower) rounded to nearest with ``bits`` mantissa bits (ties
    away from zero), exponent range unchanged; other dtypes unchanged."""
    if x.dtype != jnp.float32:          # float16 / bfloat16: through float32, same dtype back
        if jnp.finfo(x.dtype).nmant <= bits:
            return x
        return round_mantissa(x.astype(jnp.float32), bits).astype(x.dtype)
    drop = 23 - bits
    u = lax.bitcast_convert_type(x, jnp.uint32)
    u = (u + jnp.uint32(1 << (drop - 1))) & jnp.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)
    return jnp.where(jnp.isfinite(x), lax.bitcast_convert_type(u, jnp.float32), x)


def _reduced(params) -> bool:
    prec = params.get("precision")
    if prec is None:
        return True
    if isinstance(prec, tuple):
        return any(p != lax.Precision.HIGHEST for p in prec)
    return prec != lax.Precision.HIGHEST


def _eval(jaxpr, consts, args, bits):
    env = {}

    def read(v):
        return np.asarray(v.val, v.aval.dtype) if isinstance(v, core.Literal) else env[v]

    for var, val in zip(jaxpr.constvars, consts):
        env[var] = val
    for var, val in zip(jaxpr.invars, args):
        env[var] = val
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        params = {k: _rewrite(v, bits) for k, v in eqn.params.items()}
        if eqn.primitive.name == "dot_general" and _reduced(params):
            if all(jnp.issubdtype(v.dtype, jnp.floating) and jnp.finfo(v.dtype).bits <= 32
                   for v in invals):
                invals = [round_mantissa(v, bits) for v in invals]
        bind = eqn.primitive.get_bind_params(params)
        subfuns, bind = bind if isinstance(bind, tuple) else ((), bind)   # jax < 0.7: a pair
        with eqn.ctx.manager, _x64_for(v.aval for v in (*eqn.invars, *eqn.outvars)):
            out = eqn.primitive.bind(*subfuns, *invals, **bind)
        out = out if eqn.primitive.multiple_results else [out]
        for var, val in zip(eqn.outvars, out):
            if not isinstance(var, core.DropVar):
                env[var] = val
    return [read(v) for v in jaxpr.outvars]


def _x64_for(avals):
    """x64 on where one of ``avals`` is 64-bit (a float64 step of a float32 program, as
    :func:`~rankjax._core.backend.wide_dtype` traces it: an equation is bound, and a
    sub-program traced, so that its values and literals keep their dtype), else as set."""
    wide = any(np.dtype(getattr(a, "dtype", np.float32)).itemsize == 8 for a in avals)
    return jax.enable_x64(wide or jax.config.jax_enable_x64)


def _rewrite(value, bits):
    """A parameter with its sub-jaxprs emulated (tuples and named tuples walked)."""
    if isinstance(value, core.ClosedJaxpr):
        return _emulated_jaxpr(value, bits)
    if isinstance(value, core.Jaxpr) and not value.constvars:
        return _emulated_jaxpr(core.ClosedJaxpr(value, []), bits).jaxpr
    if isinstance(value, tuple) and value:
        items = [_rewrite(v, bits) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def _emulated_jaxpr(closed, bits):
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.in_avals]
    fn = functools.partial(_eval, closed.jaxpr, closed.consts, bits=bits)
    with _x64_for((*closed.in_avals, *closed.out_avals)):
        return jax.make_jaxpr(lambda *xs: fn(list(xs)))(*specs)


def reduced_precision(fn, fmt: str = "tf32"):
    """``fn`` with its non-``HIGHEST`` float32 products at ``fmt``'s mantissa
    (``"tf32"``: 10 bits, an H100's default; ``"bf16"``: 7 bits, a TPU's), jitted.
    Arguments are arrays or pytrees of arrays (close over anything static)."""
    if fmt not in MANTISSA:
        raise ValueError(f"fmt must be one of {sorted(MANTISSA)}, got {fmt!r}")
    bits = MANTISSA[fmt]

    @jax.jit
    def wrapped(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        out = _eval(closed.jaxpr, closed.consts, jax.tree.leaves(args), bits)
        return jax.tree.unflatten(jax.tree.structure(shape), out)

    return wrapped
