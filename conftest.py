"""Test and doctest set-up: float64 everywhere (the library itself follows its inputs' dtype),
and one on-disk cache of compiled programs for the whole run.

Compiling dominates the suite. Compiled programs are dropped after every test module (one
process compiles thousands and each keeps its code mapped), and the README's commands,
the examples and the command-line tests run in their own processes: without a shared cache
each of them compiles the same programs again. ``JAX_COMPILATION_CACHE_DIR`` (set here
unless given, a fresh folder per run, inherited by every subprocess and pytest-xdist
worker) makes a program compiled once anywhere in the run a disk read everywhere else.

For the same reason every program of the suite compiles as the library's kept programs do
on the CPU (``rankjax.runtime.programs.CPU_OPTIONS``, XLA's older loop emitters; a test
holds the two equal), through ``XLA_FLAGS`` (:data:`TEST_XLA_FLAGS`, inherited by every
subprocess, appended only where the caller's flags do not set them): its programs are small
and run in milliseconds, their compilation is most of the run (the CHANGELOG's entry of
issue 78 has the measurement).
"""
import os
import sys
import tempfile

TEST_XLA_FLAGS = ("--xla_cpu_use_fusion_emitters=false",)
_FLAGS = os.environ.get("XLA_FLAGS", "")
for _flag in TEST_XLA_FLAGS:
    if _flag.split("=")[0] not in _FLAGS:
        _FLAGS = f"{_FLAGS} {_flag}".strip()
os.environ["XLA_FLAGS"] = _FLAGS

import jax  # noqa: E402  (after XLA_FLAGS: JAX reads them when its backend starts)
import pytest  # noqa: E402

if os.environ.get("RANKJAX_MUTATION_ROOT"):      # the mutation check's scratch copy first
    sys.path.insert(0, os.environ["RANKJAX_MUTATION_ROOT"])
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="rankjax-jit-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
jax.config.update("jax_persistent_cache_min_entry_size_bytes",
                  int(os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))
# RANKJAX_X64=0 runs a module as a default JAX user would (x64 off; many float64
# assertions then fail by design: tests/test_float32.py is the float32 pass)
jax.config.update("jax_enable_x64", os.environ.get("RANKJAX_X64", "1") != "0")


def pytest_sessionstart(session):
    """Under the mutation check (``tests/mutations.py``) the package must be its scratch copy."""
    root = os.environ.get("RANKJAX_MUTATION_ROOT")
    if root:
        import rankjax
        if not os.path.abspath(rankjax.__file__).startswith(os.path.abspath(root)):
            raise pytest.UsageError(f"the mutation check imports {rankjax.__file__}, not the copy "
                                    f"in {root}")


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_cache():
    """Drops compiled programs after every test module: one process compiles
    thousands of programs over the suite and each keeps its code mapped (the on-disk
    cache above gives them back without compiling)."""
    yield
    jax.clear_caches()
