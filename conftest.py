"""Test and doctest set-up: float64 everywhere (the library itself follows its inputs' dtype)."""
import jax

jax.config.update("jax_enable_x64", True)
