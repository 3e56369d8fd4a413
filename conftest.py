"""Test and doctest set-up: float64 everywhere (the library itself follows its inputs' dtype)."""
import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_cache():
    """Drops compiled programs after every test module: one process compiles
    thousands of programs over the suite and each keeps its code mapped."""
    yield
    jax.clear_caches()
