"""Whole programs kept on disk, so that a fresh process neither traces nor lowers them.

JAX's on-disk cache (:mod:`rankjax._cache`) keeps the compiled code, but a fresh process
still traces and lowers every program before it can look it up: 2.2 of the 2.6 s that
the linear ``RankRLSCV`` hold-out on ``lambdarank_sample`` cost in a second process with
that cache filled (0.33 s warm). A core wrapped by :func:`keep` is exported
(:func:`jax.export.export`: the lowered StableHLO module and its input and output types)
the first time it runs with given shapes, the export written to the cache folder, and a
later process calls the export read back (:meth:`jax.export.Exported.call`), whose
compiled code JAX's cache then finds: 0.73 s for that program.

The store is on exactly when the estimators' cache is (:func:`rankjax._cache.use_disk_cache`
chose its folder); the library's functions called directly, a cache the user configured,
and ``RANKJAX_DISK_CACHE=0`` leave it off. A program is kept only for concrete inputs on
one device (never under the caller's ``jit``/``vmap``/``grad``: the tracers go to the plain
``jax.jit``) and when every static argument has a stable spelling; its key hashes
rankjax's source files, JAX's version, the backend and its code paths
(:mod:`rankjax._backend`), the dtype settings, the static arguments, the input pytree's
structure and every leaf's shape and dtype, so a program of other source or settings is
never read. A file that cannot be read is exported again.

Example:
  >>> import jax.numpy as jnp
  >>> double = keep(lambda x: 2 * x)
  >>> print(double(jnp.arange(3.)))
  [0. 2. 4.]
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import pickle
import tempfile
from typing import Optional

import jax
import numpy as np

from ._backend import paths

_folder: list = [None]         # the store's folder while it is on (set by rankjax._cache)
_memory: dict = {}              # key -> (Exported, output skeleton) of this process
_unkept: set = set()            # keys whose export failed in this process
stats = {"read": 0, "exported": 0}   # programs read back from the folder / exported (this process)
_FIELDS_DROPPED = ("in_tree", "out_tree", "_get_vjp")


def turn_on(folder) -> None:
    """Keeps programs under ``folder`` (``None`` turns the store off)."""
    _folder[0] = None if folder is None else pathlib.Path(folder)


@functools.lru_cache(maxsize=None)
def _fingerprint() -> str:
    """A hash of rankjax's source files and the versions that shape a lowered program."""
    h = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    import jaxlib
    h.update(f"{jax.__version__} {jaxlib.__version__} {np.__version__}".encode())
    return h.hexdigest()


def _spelling(v) -> Optional[str]:
    """A static argument's spelling, the same in every process, or ``None`` (not kept)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if isinstance(v, (tuple, list)):
        parts = [_spelling(x) for x in v]
        return None if None in parts else type(v).__name__ + "(" + ",".join(parts) + ")"
    if callable(v) and getattr(v, "__closure__", None) is None:
        name = f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', '')}"
        if name.startswith("rankjax.") and "<" not in name:
            return name
    return None


def _leaf_ok(x) -> bool:
    if isinstance(x, jax.core.Tracer):
        return False
    if isinstance(x, jax.Array):
        return x.is_fully_addressable and len(x.sharding.device_set) == 1 \
            and next(iter(x.sharding.device_set)) == jax.devices()[0]
    return isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))


def _key(name, statics, treedef, leaves) -> Optional[str]:
    tree = str(treedef)
    if " at 0x" in tree or any(spelling is None for _, spelling in statics):
        return None
    types = [(np.shape(x), str(jax.dtypes.result_type(x)), bool(getattr(jax.typeof(x), "weak_type", False)))
             for x in leaves]
    cfg = (jax.devices()[0].platform, jax.devices()[0].device_kind, paths().name,
           bool(jax.config.jax_enable_x64), str(jax.config.jax_default_matmul_precision),
           str(jax.config.jax_numpy_dtype_promotion))
    text = repr((_fingerprint(), name, statics, tree, types, cfg))
    return hashlib.sha256(text.encode()).hexdigest()


def _read(path):
    try:
        with open(path, "rb") as fh:
            fields, skeleton = pickle.load(fh)
        return fields, skeleton
    except Exception:             # noqa: BLE001  a torn or foreign file: export again
        return None


def _write(path, payload) -> None:
    """Atomically (a temporary file renamed); a folder that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(payload, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def _exported(key, call, dyn_leaves, in_tree):
    """``(Exported, output skeleton)`` of ``key``: this process's, the folder's, or a new
    export (written to the folder)."""
    if key in _memory:
        return _memory[key]
    path = _folder[0] / "exported" / (key + ".pkl")
    got = _read(path) if path.exists() else None
    if got is not None:
        fields, skeleton = got
        out_tree = jax.tree.structure(skeleton)
        exp = jax.export.Exported(in_tree=jax.tree.structure((tuple(dyn_leaves), {})),
                                  out_tree=jax.tree.structure([0] * out_tree.num_leaves),
                                  _get_vjp=None, **fields)
        _memory[key] = (exp, skeleton)
        stats["read"] += 1
        return _memory[key]
    out_tree = []

    def flat(*leaves):
        out = call(jax.tree.unflatten(in_tree, leaves))
        leaves, tree = jax.tree.flatten(out)
        out_tree.append(tree)
        return leaves

    exp = jax.export.export(jax.jit(flat))(*dyn_leaves)
    skeleton = jax.tree.unflatten(out_tree[0], list(range(out_tree[0].num_leaves)))
    fields = {f.name: getattr(exp, f.name) for f in dataclasses.fields(exp)
              if f.name not in _FIELDS_DROPPED}
    _write(path, (fields, skeleton))
    _memory[key] = (exp, skeleton)
    stats["exported"] += 1
    return _memory[key]


class _Kept:
    """A jitted function whose calls on concrete inputs go through the store when it is on
    (see the module docstring); every attribute of the ``jax.jit`` object is forwarded."""

    def __init__(self, fn, static_argnames, static_argnums):
        self.jitted = jax.jit(fn, static_argnames=static_argnames, static_argnums=static_argnums)
        self.static_argnames, self.static_argnums = tuple(static_argnames), tuple(static_argnums)
        functools.update_wrapper(self, fn)

    def __getattr__(self, name):
        return getattr(self.jitted, name)

    def __call__(self, *args, **kwargs):
        if _folder[0] is None or any(k not in self.static_argnames for k in kwargs):
            return self.jitted(*args, **kwargs)
        fixed = {i: args[i] for i in self.static_argnums if i < len(args)}
        dynamic = tuple(a for i, a in enumerate(args) if i not in fixed)
        leaves, in_tree = jax.tree.flatten(dynamic)
        if not all(_leaf_ok(x) for x in leaves):
            return self.jitted(*args, **kwargs)
        statics = tuple(sorted((str(k), _spelling(v)) for k, v in {**fixed, **kwargs}.items()))
        key = _key(f"{self.__module__}.{self.__qualname__}", statics, in_tree, leaves)
        if key is None or key in _unkept:
            return self.jitted(*args, **kwargs)
        fn = self.__wrapped__

        def call(dyn):                # the original call with these dynamic arguments
            it = iter(dyn)
            return fn(*[fixed[i] if i in fixed else next(it) for i in range(len(args))], **kwargs)

        try:
            exp, skeleton = _exported(key, call, leaves, in_tree)
        except Exception:         # noqa: BLE001  not exportable (an effect, a custom call)
            _unkept.add(key)
            return self.jitted(*args, **kwargs)
        return jax.tree.unflatten(jax.tree.structure(skeleton), exp.call(*leaves))


def keep(fn=None, *, static_argnames=(), static_argnums=()):
    """``jax.jit(fn, ...)`` whose programs are kept on disk while the store is on (the module
    docstring); usable as ``@keep`` or ``@keep(static_argnames=...)``."""
    if fn is None:
        return lambda f: _Kept(f, static_argnames, static_argnums)
    return _Kept(fn, static_argnames, static_argnums)
