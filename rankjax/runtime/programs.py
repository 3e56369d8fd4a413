"""Whole programs kept on disk, so that a fresh process neither traces nor lowers them.

JAX's on-disk cache (:mod:`rankjax.runtime.cache`) keeps the compiled code, but a fresh process
still traces and lowers every program before it can look it up: most of a second
process's hold-out (benchmarks/REPORT.md §8). A compiled core
(:class:`rankjax._core.cores.Core`; :func:`install` takes their seat when :mod:`rankjax.runtime`
is imported) is kept the first time it runs with given shapes, in the cache folder:

* on the CPU as its compiled executable (:mod:`jax.experimental.serialize_executable`,
  ``executables/``), read back and called directly (faster than through an export).
  XLA:CPU code is
  compiled for the host's instruction set, so the key names the CPU (:func:`_machine`), and
  LAPACK's kernels are set up first as JAX sets them up (:func:`_lapack_ready`; a JAX
  without that step keeps exports);
* elsewhere as an export (:func:`jax.export.export`, ``exported/``: the lowered StableHLO
  module and its input and output types), which a later process calls
  (:meth:`jax.export.Exported.call`) and JAX's cache then finds compiled.

The store is on exactly when the estimators' cache is (:func:`rankjax.runtime.cache.use_disk_cache`
chose its folder); the library's functions called directly, a cache the user configured,
and ``RANKJAX_DISK_CACHE=0`` leave it off. A program is kept only for concrete inputs on
one device (never under the caller's ``jit``/``vmap``/``grad``: the tracers go to the plain
``jax.jit``) and when every static argument has a stable spelling; its key hashes
rankjax's source files, JAX's version, the backend and its code paths
(:mod:`rankjax._core.backend`), the dtype settings, ``XLA_FLAGS``, the static arguments, the input pytree's
structure and every leaf's shape and dtype, so a program of other source or settings is
never read. A file that cannot be read is kept again.

On the CPU these programs are compiled with :data:`CPU_OPTIONS` (XLA's LLVM code generation is
most of a first fit): they compile faster and run as fast (the work is in LAPACK and
matrix-product calls, which the options do not touch; benchmarks/REPORT.md §8). Other devices,
calls under a trace (JAX takes options only on a top-level ``jit``) and an XLA that refuses an
option use the defaults.

Its state in this process is one object, :data:`STORE`.

Example:
  >>> import jax.numpy as jnp
  >>> from rankjax._core.cores import core
  >>> double = core(lambda x: 2 * x)
  >>> print(double(jnp.arange(3.)))
  [0. 2. 4.]
  >>> STORE.stats["read"] >= 0
  True
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import gc
import hashlib
import os
import pathlib
import sys
import threading
from typing import Optional

import jax
import numpy as np

from .._core.backend import paths
from .._core.cores import Core
from .entries import read_entry, write_entry

@dataclasses.dataclass
class Store:
    """The runtime's state in this process, in one object (:data:`STORE`)."""

    folder: Optional[pathlib.Path] = None
    """The store's folder while it is on (set by :func:`turn_on`)."""
    memory: dict = dataclasses.field(default_factory=dict)
    """key -> (output skeleton, the call on the input leaves) of this process."""
    unkept: set = dataclasses.field(default_factory=set)
    """Keys whose export failed in this process."""
    unchecked: set = dataclasses.field(default_factory=set)
    """Keys read back from the folder, not yet run in this process."""
    stats: dict = dataclasses.field(default_factory=lambda: {"read": 0, "exported": 0})
    """Programs read back from the folder / kept there (this process)."""
    refused: bool = False
    """XLA refused an option of :data:`CPU_OPTIONS` in this process."""
    tops: dict = dataclasses.field(default_factory=dict)
    """core -> its top-level ``jax.jit`` with :func:`compile_options`."""
    ahead: dict = dataclasses.field(default_factory=dict)
    """core -> the compilations :func:`ahead` started for it."""
    running: list = dataclasses.field(default_factory=list)
    """Every compilation ahead started in this process (joined at exit)."""
    paused: list = dataclasses.field(default_factory=lambda: [0, False])
    """Calls inside :func:`gc_paused` now, and whether the collector was on."""


STORE = Store()
_pause_lock = threading.Lock()
_FIELDS_DROPPED = ("in_tree", "out_tree", "_get_vjp")


CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
"""XLA options of the kept programs on the CPU: the older loop emitters. LLVM's ``-O1``
beside them compiled faster still but lost the float32 Gaussian kernel's small distances
(the mean-shifted expansion, 1e-4 off where XLA's defaults are 4e-8 off:
``tests/test_programs.py``); ``-O0`` runs slower; 128-bit vectors
(``xla_cpu_prefer_vector_width``) aborted the process inside LLVM on a float64 hold-out
(measured: benchmarks/REPORT.md §8)."""


def compile_options() -> Optional[dict]:
    """:data:`CPU_OPTIONS` where the first device
    is a CPU and XLA has not refused them in this process (:func:`first_try`), else ``None``."""
    if STORE.refused or jax.devices()[0].platform != "cpu":
        return None
    return dict(CPU_OPTIONS)


def first_try(with_options, plain, *args, **kwargs):
    """``with_options(*args, **kwargs)``, or ``plain(...)`` when XLA refuses an option (an
    XLA that does not know it; then never again in this process): no probe program."""
    if STORE.refused or with_options is plain:
        return plain(*args, **kwargs)
    try:
        return with_options(*args, **kwargs)
    except jax.errors.JaxRuntimeError as e:
        text = str(e).lower()
        if "compile option" not in text and "setting option" not in text:
            raise
        STORE.refused = True
        return plain(*args, **kwargs)


def top_level() -> bool:
    """Whether no trace is active (JAX's own test; ``False`` where it cannot tell)."""
    try:
        from jax._src import core
        return bool(core.trace_state_clean())
    except Exception:             # noqa: BLE001  a JAX without it: as under a trace
        return False


def turn_on(folder) -> None:
    """Keeps programs under ``folder`` (``None`` turns the store off)."""
    STORE.folder = None if folder is None else pathlib.Path(folder)


@functools.lru_cache(maxsize=None)
def _fingerprint() -> str:
    """A hash of rankjax's source files and the versions that shape a lowered program."""
    h = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parent.parent
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
           str(jax.config.jax_numpy_dtype_promotion),
           _machine() if jax.devices()[0].platform == "cpu" else "", os.environ.get("XLA_FLAGS", ""))
    text = repr((_fingerprint(), name, statics, tree, types, cfg))
    return hashlib.sha256(text.encode()).hexdigest()


def _flat(call, in_tree):
    """``(flat, skeleton)``: ``call`` on the input's leaves returning the output's leaves,
    and, once ``flat`` is traced, the output's structure with leaf numbers for leaves."""
    out_tree = []

    def flat(*leaves):
        leaves, tree = jax.tree.flatten(call(jax.tree.unflatten(in_tree, leaves)))
        out_tree.append(tree)
        return leaves

    return flat, lambda: jax.tree.unflatten(out_tree[-1], list(range(out_tree[-1].num_leaves)))


def _stored(key, kind):
    """``(path, contents)`` of ``key``'s file under ``kind/`` of the folder (contents
    ``None`` when the file is absent or cannot be read: :func:`~rankjax.runtime.entries.read_entry`)."""
    path = STORE.folder / kind / (key + ".pkl")
    return path, read_entry(path, key)


def _exported(key, call, dyn_leaves, in_tree):
    """``(output skeleton, call)`` of ``key``'s export: this process's, the folder's, or a
    new export (written to the folder)."""
    if key in STORE.memory:
        return STORE.memory[key]
    path, got = _stored(key, "exported")
    if got is not None:
        fields, skeleton = got
        out_tree = jax.tree.structure(skeleton)
        exp = jax.export.Exported(in_tree=jax.tree.structure((tuple(dyn_leaves), {})),
                                  out_tree=jax.tree.structure([0] * out_tree.num_leaves),
                                  _get_vjp=None, **fields)
        STORE.stats["read"] += 1
        return _remember(key, skeleton, exp)
    flat, skeleton_of = _flat(call, in_tree)
    exp = jax.export.export(jax.jit(flat))(*dyn_leaves)      # options apply at compilation
    skeleton = skeleton_of()
    fields = {f.name: getattr(exp, f.name) for f in dataclasses.fields(exp)
              if f.name not in _FIELDS_DROPPED}
    write_entry(path, key, fields, skeleton)
    STORE.stats["exported"] += 1
    return _remember(key, skeleton, exp)


@functools.lru_cache(maxsize=None)
def _machine() -> str:
    """The host CPU's model and instruction-set flags (XLA:CPU code is compiled for them)."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
        return repr(sorted({ln for ln in lines if ln.startswith(("model name", "flags"))}))
    except OSError:
        import platform
        return f"{platform.machine()} {platform.processor()}"


@functools.lru_cache(maxsize=None)
def _lapack_ready() -> bool:
    """LAPACK's kernels set up as JAX sets them up when it first lowers a linear-algebra op: a
    CPU executable read back calls them directly (without this, a segmentation fault).
    ``False`` where this JAX has no such step: the store then keeps exports."""
    try:
        from jax._src.lax import linalg
        linalg.initialize_lapack()
        return True
    except Exception:             # noqa: BLE001  another JAX: exports instead
        return False


def _without_jax_cache():
    """A context in which JAX's on-disk cache is off (this thread), or a no-op where this
    JAX has no such switch: writing the kept executables there too slowed a first fit
    (benchmarks/REPORT.md §8)."""
    try:
        from jax._src import config
        return config.enable_compilation_cache(False)
    except Exception:             # noqa: BLE001  another JAX
        return contextlib.nullcontext()


def _executable(key, call, dyn_leaves, in_tree, later=False):
    """``(output skeleton, compiled)`` of ``key`` on the CPU: this process's, the
    folder's (a serialised executable, :mod:`jax.experimental.serialize_executable`), or
    traced and lowered here, then compiled with :func:`compile_options` and written
    (``later``: returns that last step instead, for another thread). Reading one back
    costs less than calling an export (lowering the call, MLIR's set-up, JAX's cache read;
    benchmarks/REPORT.md §8)."""
    from jax.experimental.serialize_executable import deserialize_and_load
    if key not in STORE.memory:
        path, got = _stored(key, "executables")
        loaded = None
        if got is not None:
            blob, skeleton = got
            with contextlib.suppress(Exception):      # a damaged executable: compiled again
                loaded = deserialize_and_load(*blob)
        if loaded is None:
            finish = _lowered(key, path, call, dyn_leaves, in_tree)
            return finish if later else finish()
        STORE.memory[key] = (skeleton, loaded)
        STORE.unchecked.add(key)
        STORE.stats["read"] += 1
    return (lambda: STORE.memory[key]) if later else STORE.memory[key]


def _lowered(key, path, call, dyn_leaves, in_tree):
    """Traces and lowers ``call`` on this thread; returns the step that compiles it with
    :func:`compile_options`, writes it to ``path`` and keeps it in this process (callable
    from another thread)."""
    flat, skeleton_of = _flat(call, in_tree)
    with _without_jax_cache():
        lowered = jax.jit(flat).lower(*dyn_leaves)
    skeleton = skeleton_of()
    opts = compile_options()

    def finish():
        with _without_jax_cache():         # kept here: JAX's copy would never be read
            compiled = lowered.compile() if opts is None else first_try(
                lambda: lowered.compile(compiler_options=opts), lowered.compile)
        from jax.experimental.serialize_executable import serialize
        write_entry(path, key, serialize(compiled), skeleton)
        STORE.stats["exported"] += 1
        STORE.memory[key] = (skeleton, compiled)
        return STORE.memory[key]
    return finish


def _remember(key, skeleton, exp):
    """``(skeleton, call)`` of an export, kept for this process: ``exp.call`` jitted with
    :func:`compile_options`, answered by the plain ``exp.call`` where XLA refuses one."""
    opts = compile_options()
    with_options = exp.call if opts is None else jax.jit(exp.call, compiler_options=opts)
    STORE.memory[key] = (skeleton, lambda *leaves: first_try(with_options, exp.call, *leaves))
    return STORE.memory[key]


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off for the block (and back on after the last
    such block of any thread, if it was on): tracing a program allocates objects by the
    hundred thousand, and the collections they set off walk every object of the process
    (measured: benchmarks/REPORT.md §8). Reference counting still frees all that
    is not in a cycle; the cycles wait for the next collection after the block."""
    with _pause_lock:
        if not STORE.paused[0]:
            STORE.paused[1] = gc.isenabled()
            gc.disable()
        STORE.paused[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            STORE.paused[0] -= 1
            if not STORE.paused[0] and STORE.paused[1]:
                gc.enable()


def _options(core):
    """``core`` jitted with :func:`compile_options` (JAX takes options only on a top-level
    ``jit``)."""
    top = STORE.tops.get(core)
    if top is None:
        opts = compile_options()
        top = STORE.tops[core] = core.jitted if opts is None else jax.jit(
            core.__wrapped__, static_argnames=core.static_argnames,
            static_argnums=core.static_argnums, compiler_options=opts)
    return top


def plain(core, args, kwargs):
    """The call outside the store: with :func:`compile_options` outside any trace, else
    ``core.jitted``."""
    if not top_level():
        return core.jitted(*args, **kwargs)
    return first_try(_options(core), core.jitted, *args, **kwargs)


def call(core, args, kwargs):
    """A :class:`~rankjax._core.cores.Core`'s call, through the store when it is on (see the
    module docstring), after any compilation :func:`ahead` started for it."""
    for thread in STORE.ahead.pop(core, []):
        thread.join()
    with gc_paused():
        return _call(core, args, kwargs)


def ahead(core, args, kwargs) -> None:
    """Traces and lowers the call on this thread and compiles it on another, so that
    XLA compiles it while this thread goes on with other work (the next call waits for
    it; nothing runs). Only for concrete inputs outside any trace; errors are left to
    the call. The linear ``RankRLSCV`` first fit compiles its λ selection while it traces
    its hold-out (benchmarks/REPORT.md §8)."""
    with gc_paused():
        try:
            finish = _call(core, args, kwargs, later=True)
        except Exception:     # noqa: BLE001  the call reports it
            return
    if finish is not None:
        thread = threading.Thread(target=_quietly, args=(finish,), daemon=True)
        thread.start()
        STORE.ahead.setdefault(core, []).append(thread)
        STORE.running[:] = [t for t in STORE.running if t.is_alive()] + [thread]


def _call(core, args, kwargs, later=False):
    """The call; ``later``: its compilation step instead (``None`` where there is none
    to move to another thread)."""
    if STORE.folder is None or any(k not in core.static_argnames for k in kwargs):
        if not later:
            return plain(core, args, kwargs)
        return _options(core).lower(*args, **kwargs).compile if top_level() else None
    fixed = {i: args[i] for i in core.static_argnums if i < len(args)}
    dynamic = tuple(a for i, a in enumerate(args) if i not in fixed)
    leaves, in_tree = jax.tree.flatten(dynamic)
    if not all(_leaf_ok(x) for x in leaves):
        return None if later else core.jitted(*args, **kwargs)
    statics = tuple(sorted((str(k), _spelling(v)) for k, v in {**fixed, **kwargs}.items()))
    key = _key(f"{core.__module__}.{core.__qualname__}", statics, in_tree, leaves)
    if key is None or key in STORE.unkept or not top_level() or _refused(key):
        return None if later else plain(core, args, kwargs)
    fn = core.__wrapped__

    def call(dyn):                # the original call with these dynamic arguments
        it = iter(dyn)
        return fn(*[fixed[i] if i in fixed else next(it) for i in range(len(args))], **kwargs)

    native = jax.devices()[0].platform == "cpu" and _lapack_ready()
    if later:
        return _executable(key, call, leaves, in_tree, later=True) if native else None
    try:
        skeleton, run_kept = (_executable if native else _exported)(key, call, leaves, in_tree)
    except Exception:         # noqa: BLE001  not exportable (an effect, a custom call)
        STORE.unkept.add(key)
        return plain(core, args, kwargs)
    out = run_kept(*leaves)
    if key in STORE.unchecked:
        STORE.unchecked.discard(key)
        try:
            out = jax.block_until_ready(out)
        except jax.errors.JaxRuntimeError as e:
            if "not found" not in str(e):
                raise
            _forget(key)
            return plain(core, args, kwargs)
    return jax.tree.unflatten(jax.tree.structure(skeleton), out)


def _forget(key) -> None:
    """Drops a read-back executable that XLA:CPU cannot run (``NOT_FOUND: Function ... not
    found``: a serialised program of many kernels came back without some of them, jaxlib
    0.10.2, a blocked Nyström hold-out of 18,310 rows, the whole one of 2,000 rows): its
    file is replaced by a mark, so that this process and every later one compile it
    outside the store (JAX's own cache) instead of writing it again for the next process
    to fail on."""
    STORE.memory.pop(key, None)
    STORE.unkept.add(key)
    with contextlib.suppress(OSError):
        path = STORE.folder / "executables" / (key + ".pkl")
        path.with_suffix(".refused").touch()
        path.unlink()


def _refused(key) -> bool:
    """Whether a process found ``key``'s executable unrunnable (:func:`_forget`)."""
    return (STORE.folder / "executables" / (key + ".refused")).exists()


@atexit.register
def _join_ahead() -> None:
    """Waits at exit for the compilations :meth:`_Kept.ahead` left running: a process that
    ends (an uncaught error in a fit, say) while XLA compiles on another thread is torn down
    under it and aborts (``terminate called ...``, status 134) instead of exiting with its
    own status."""
    while STORE.running:
        STORE.running.pop().join()


def _quietly(step) -> None:
    """``step()``, its errors left to the call that needs its result."""
    try:
        step()
    except Exception:             # noqa: BLE001
        pass


def install() -> None:
    """Takes the compiled cores' seat (:attr:`rankjax._core.cores.Core.server`): every
    core's call outside a trace is served here from now on."""
    Core.server = sys.modules[__name__]
