"""Programs kept on disk (rankjax.runtime.programs): compiled (CPU) or exported once, read back by a
later process
(here: after this process's memory is cleared), never for traced inputs or unstable keys,
and the same results as the plain jitted function."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rankjax._core.cores import core
from rankjax.runtime import programs as _programs

STORE = _programs.STORE


@pytest.fixture
def store(tmp_path):
    saved = (STORE.folder, dict(STORE.memory), dict(STORE.stats))
    _programs.turn_on(tmp_path)
    STORE.memory.clear()
    yield tmp_path
    STORE.folder = saved[0]
    STORE.memory.clear()
    STORE.memory.update(saved[1])
    STORE.stats.update(saved[2])


def _scaled(x, pair, *, power):
    return {"sum": jnp.sum(x * pair[0]) ** power, "rows": x + pair[1], "none": None}


kept = core(_scaled, static_argnames=("power",))


def _args():
    x = jnp.arange(6.0).reshape(2, 3)
    return x, (jnp.float32(2.0), np.ones(3, np.float32))


def test_a_program_is_exported_once_and_read_back(store):
    want = jax.jit(_scaled, static_argnames="power")(*_args(), power=2)
    before = dict(STORE.stats)
    got = kept(*_args(), power=2)
    assert STORE.stats["exported"] == before["exported"] + 1
    assert len(list(store.glob("*/*.pkl"))) == 1
    STORE.memory.clear()                     # as a fresh process
    again = kept(*_args(), power=2)
    assert STORE.stats["read"] == before["read"] + 1
    for out in (got, again):
        assert jax.tree.structure(out) == jax.tree.structure(want)
        for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(want)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_another_shape_dtype_or_static_argument_is_another_program(store):
    x, pair = _args()
    kept(x, pair, power=2)
    kept(x, pair, power=3)
    kept(x[:1], pair, power=2)
    kept(x.astype(jnp.int32), pair, power=2)
    assert len(list(store.glob("*/*.pkl"))) == 4
    assert float(kept(x, pair, power=3)["sum"]) == pytest.approx(float(jnp.sum(x * 2.0)) ** 3)


def test_traced_inputs_and_unstable_static_arguments_are_not_kept(store):
    x, pair = _args()
    out = jax.jit(lambda x: kept(x, pair, power=2)["sum"])(x)
    assert float(out) == pytest.approx(float(jnp.sum(x * 2.0)) ** 2)
    by_fn = core(lambda x, f: f(x), static_argnums=(1,))
    assert float(by_fn(x, lambda v: jnp.sum(v))) == 15.0          # a lambda: no stable spelling
    assert not list(store.glob("*/*.pkl"))


def test_a_torn_file_is_exported_again(store):
    x, pair = _args()
    kept(x, pair, power=2)
    (path,) = store.glob("*/*.pkl")
    path.write_bytes(b"torn")
    STORE.memory.clear()
    assert float(kept(x, pair, power=2)["sum"]) == pytest.approx(float(jnp.sum(x * 2.0)) ** 2)
    assert path.stat().st_size > 4


def test_an_executable_that_cannot_run_is_never_written_again(store):
    """A read-back executable XLA:CPU cannot run (``_forget``) leaves a mark in place of its
    file: this process and a later one run the plain jitted program and write no file, so
    no later process pays its compilation again to fail on it."""
    if jax.devices()[0].platform != "cpu":
        pytest.skip("executables are kept on the CPU")
    x, pair = _args()
    kept(x, pair, power=2)
    (path,) = store.glob("executables/*.pkl")
    _programs._forget(path.stem)
    STORE.unkept.discard(path.stem)          # as a fresh process
    STORE.memory.clear()
    before = dict(STORE.stats)
    assert float(kept(x, pair, power=2)["sum"]) == pytest.approx(float(jnp.sum(x * 2.0)) ** 2)
    assert STORE.stats == before and not list(store.glob("*/*.pkl"))
    assert path.with_suffix(".refused").exists()


def test_off_by_default_in_the_library():
    if STORE.folder is None:
        assert float(kept(*_args(), power=1)["sum"]) == 30.0


def test_cpu_options_apply_outside_a_trace_and_an_unknown_one_drops_them(monkeypatch):
    """A kept program called at top level compiles with ``CPU_OPTIONS`` on the CPU (the same
    results), under the caller's ``jit`` without them (JAX refuses options on a nested
    ``jit``), and an option XLA refuses leaves the defaults for the process, the call
    answered all the same."""
    want = jax.jit(_scaled, static_argnames="power")(*_args(), power=2)
    fresh = core(_scaled, static_argnames=("power",))
    got = fresh(*_args(), power=2)
    np.testing.assert_array_equal(got["rows"], want["rows"])
    np.testing.assert_allclose(got["sum"], want["sum"], rtol=1e-6)
    if jax.devices()[0].platform == "cpu":
        assert _programs.compile_options() == _programs.CPU_OPTIONS
        assert STORE.tops[fresh] is not fresh.jitted      # the options' own jit object
    inner = jax.jit(lambda x: fresh(x, _args()[1], power=1)["sum"])(_args()[0])
    np.testing.assert_allclose(inner, jnp.sum(_args()[0] * 2.0), rtol=1e-6)
    monkeypatch.setattr(_programs, "CPU_OPTIONS", {"xla_no_such_option_here": 1})
    try:
        other = core(_scaled, static_argnames=("power",))
        np.testing.assert_array_equal(other(*_args(), power=2)["rows"], want["rows"])
        if jax.devices()[0].platform == "cpu":
            assert STORE.refused and _programs.compile_options() is None
    finally:
        STORE.refused = False


def test_a_kept_export_falls_back_when_an_option_is_refused(store, monkeypatch):
    """The store's path (an export called back) answers too when XLA refuses an option."""
    want = jax.jit(_scaled, static_argnames="power")(*_args(), power=3)
    monkeypatch.setattr(_programs, "CPU_OPTIONS", {"xla_no_such_option_here": 1})
    try:
        other = core(_scaled, static_argnames=("power",))
        got = other(*_args(), power=3)
        np.testing.assert_allclose(got["sum"], want["sum"], rtol=1e-6)
        assert any(store.iterdir())                      # it went through the store
        if jax.devices()[0].platform == "cpu":
            assert STORE.refused
    finally:
        STORE.refused = False


def test_exports_where_executables_are_not_kept(store, monkeypatch):
    """Off the CPU, or with a JAX whose LAPACK set-up is unknown, the store keeps exports
    (``exported/``) instead of compiled executables, read back the same way."""
    monkeypatch.setattr(_programs, "_lapack_ready", lambda: False)
    want = jax.jit(_scaled, static_argnames="power")(*_args(), power=4)
    got = kept(*_args(), power=4)
    STORE.memory.clear()
    again = kept(*_args(), power=4)
    assert list((store / "exported").glob("*.pkl")) and not (store / "executables").exists()
    for out in (got, again):
        np.testing.assert_allclose(out["sum"], want["sum"], rtol=1e-6)
        np.testing.assert_array_equal(out["rows"], want["rows"])


def test_the_executables_key_names_the_machine(monkeypatch):
    """A CPU executable is compiled for the host's instruction set: its key carries it, so a
    cache folder shared by two machines never hands one the other's code."""
    if jax.devices()[0].platform != "cpu":
        pytest.skip("CPU only")
    leaves, tree = jax.tree.flatten(_args())
    keys = set()
    for flags in ("flags: avx2", "flags: avx2 avx512f"):
        monkeypatch.setattr(_programs, "_machine", lambda flags=flags: flags)
        keys.add(_programs._key("f", (), tree, leaves))
    assert len(keys) == 2 and _programs._lapack_ready()


def test_a_program_with_a_host_callback_is_not_kept(store):
    """A host callback is a pointer into the process that compiled it: JAX refuses to
    serialise such an executable, and the program is answered by the plain ``jit``, never
    written (a later process would crash on it)."""
    def twice(x):
        return jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    kept_cb = core(twice)
    np.testing.assert_array_equal(kept_cb(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert not list(store.glob("*/*.pkl"))


class _Compiles:
    """Counts XLA compilations while it is installed (JAX's own log lines)."""

    def __enter__(self):
        import logging
        self.n, self.log = 0, logging.getLogger("jax")
        counter = self

        class H(logging.Handler):
            def emit(self, record):
                counter.n += record.getMessage().startswith("Finished XLA compilation")
        self.handler, self.level = H(), self.log.level
        self.log.addHandler(self.handler)
        self.log.setLevel(logging.DEBUG)
        self.saved = jax.config.jax_log_compiles
        jax.config.update("jax_log_compiles", True)
        return self

    def __exit__(self, *exc):
        jax.config.update("jax_log_compiles", self.saved)
        self.log.removeHandler(self.handler)
        self.log.setLevel(self.level)


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_program_compiled_ahead_is_not_compiled_again(on_disk, tmp_path, request):
    if on_disk:
        request.getfixturevalue("store")
    power = 5 if on_disk else 6                   # a program no other test compiled
    ahead = core(_scaled, static_argnames=("power",))
    x, pair = _args()
    with _Compiles() as c:
        ahead.ahead(x, pair, power=power)         # traced here, compiled on a thread
        assert len(STORE.ahead[ahead]) == 1
        got = ahead(x, pair, power=power)         # waits for that thread, compiles nothing
    assert c.n == 1 and not STORE.ahead.get(ahead)
    want = jax.jit(_scaled, static_argnames="power")(x, pair, power=power)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_ahead_leaves_errors_and_traces_to_the_call(store):
    ahead = core(_scaled, static_argnames=("power",))
    x, pair = _args()
    ahead.ahead(x, (pair[0],), power=2)          # a bad pytree: nothing started, no error
    assert not STORE.ahead.get(ahead)
    with pytest.raises(IndexError):
        ahead(x, (pair[0],), power=2)
    jax.jit(lambda x: ahead.ahead(x, pair, power=2) or x)(x)   # under a trace: nothing
    assert not STORE.ahead.get(ahead)


def test_gc_paused_nests_across_threads_and_restores_the_collector():
    import gc
    import threading
    assert gc.isenabled()
    inner = threading.Event()
    release = threading.Event()

    def other():
        with _programs.gc_paused():
            inner.set()
            release.wait()

    t = threading.Thread(target=other)
    with _programs.gc_paused():
        assert not gc.isenabled()
        t.start()
        inner.wait()
    assert not gc.isenabled()                     # the thread's block is still open
    release.set()
    t.join()
    assert gc.isenabled()
    gc.disable()                                  # a collector the user turned off stays off
    try:
        with _programs.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


RAISES_WHILE_COMPILING = """
import numpy as np, rankjax as rj
from rankjax.estimators import RankRLSCV
from rankjax.solvers.primal import Primal

def refuse(self, problem, lams, folds):
    raise MemoryError("refused while the selection compiles ahead")

Primal.holdout = refuse
d = rj.make_ranking_data(60, num_features=8, seed=0)
RankRLSCV().fit(d.X, d.y, qid=d.qid)       # uncaught: the process ends with status 1
"""


def test_an_error_while_a_program_compiles_ahead_exits_with_status_1():
    """A fit that raises while its λ selection compiles on another thread (the scoring
    program is compiled ahead, :meth:`_Kept.ahead`) ends the process with Python's status 1,
    never an abort of XLA torn down under that thread (``terminate called ...``, 134);
    ten fresh processes, each with nothing compiled before."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, RANKJAX_DISK_CACHE="0", JAX_PLATFORMS="cpu")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for _ in range(10):
        r = subprocess.run([sys.executable, "-c", RAISES_WHILE_COMPILING], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 1, (r.returncode, r.stderr[-1500:])
        assert "refused while the selection compiles ahead" in r.stderr


def test_the_suite_compiles_with_the_kept_programs_options():
    """The root ``conftest.py``'s ``XLA_FLAGS`` are :data:`CPU_OPTIONS`, flag for flag."""
    import ast
    import pathlib
    tree = ast.parse((pathlib.Path(__file__).resolve().parents[1] / "conftest.py").read_text())
    flags = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "TEST_XLA_FLAGS")
    want = {f"--{k}={str(v).lower()}" for k, v in _programs.CPU_OPTIONS.items()}
    assert set(flags) == want


def test_a_kept_float32_gaussian_kernel_keeps_small_distances():
    """Compiled with :data:`CPU_OPTIONS` (as a kept program on the CPU), the float32 kernel of
    rows offset by 10^3 is as accurate as under XLA's defaults (its mean-shifted expansion;
    with LLVM's ``-O1`` beside the options it was 1e-4 off)."""
    from rankjax.kernels.kernel import kernel_matrix
    import rankjax as rj
    rng = np.random.default_rng(0)
    X = (1000 + 0.01 * rng.standard_normal((50, 4))).astype(np.float32)
    Xd = X.astype(np.float64)
    ref = np.exp(-100.0 * ((Xd[:, None, :] - Xd[None, :, :]) ** 2).sum(-1))
    k = rj.gaussian_kernel(100.0)
    with jax.enable_x64(False):
        K = np.asarray(jax.jit(lambda X: kernel_matrix(k, X),
                               compiler_options=_programs.CPU_OPTIONS)(jnp.asarray(X)))
    assert K.dtype == np.float32 and np.all(np.diag(K) == 1)
    assert np.abs(K - ref).max() < 1e-6                # float32's distance rounding, ~40 eps
