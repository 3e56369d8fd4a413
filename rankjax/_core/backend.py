r"""The code paths that depend on the backend, chosen in one place.

XLA:CPU and the accelerators want different programs for the same algebra:

* **small symmetric solves** (the fold systems of the hold-outs, Pahikkala et al. 2009,
  eq. 34): on the CPU, systems up to ``small_solve`` rows are inverted by batched block
  products in plain XLA operations (:func:`~rankjax.solvers.small_solve.spd_inverse`) and larger ones go
  to LAPACK one at a time (:mod:`~rankjax._core.lapack`: jaxlib's batched kernels wait on
  XLA:CPU's intra-op pool, which deadlocked on a 2-thread CPU). A GPU or TPU runs every
  size as one batched factorisation (cuSOLVER / XLA's own).
* **batches of factorisations**: the CPU serialises the folds and λ values of a large fold
  (``lax.map`` with batch 1, one λ at a time); an accelerator batches them (``vmap``).
* **products**: the CPU transposes a wide ``Z`` before :math:`Z^T Z` and multiplies a sparse
  matrix by one vector with a gather and a segment sum; an accelerator contracts in place
  and uses the BCSR kernel.

:func:`paths` returns the choice for :func:`jax.default_backend`. ``RANKJAX_PATHS=cpu`` or
``=accelerator`` and :func:`forced_paths` override it: the tests run the
accelerator paths on the CPU and compare them with the CPU paths. The choice is read when
a program is traced; :func:`forced_paths` drops compiled programs on entry and exit so
that no program of the other choice is reused.

Example:
  >>> paths().name in ("cpu", "accelerator")
  True
  >>> with forced_paths("accelerator"):
  ...     paths().batch_factorisations
  True
"""
from __future__ import annotations

import contextlib
import dataclasses
import os

import jax


@dataclasses.dataclass(frozen=True)
class Paths:
    r"""One backend's code paths (see the module docstring).

    Attributes:
      name: ``"cpu"`` or ``"accelerator"``.
      small_solve: largest symmetric system solved by block inversion in plain XLA
        operations; larger ones go to the backend's factorisation.
      row_block_small_solve: the same for the row-block Nyström hold-out, whose fold
        systems come one fold at a time with every λ: above it one LAPACK factor each
        (faster there than block inversion (benchmarks/design_measurements.md §8)).
      batch_factorisations: batch the folds and λ values of large folds (``vmap``);
        False serialises them (one LAPACK call at a time).
      transpose_wide_gram: transpose a wide ``Z`` before :math:`Z^T Z`.
      csr_vector_gather: multiply a sparse matrix by one vector by gather + segment sum.
    """

    name: str
    small_solve: int
    row_block_small_solve: int
    batch_factorisations: bool
    transpose_wide_gram: bool
    csr_vector_gather: bool

    def serial(self, size: int, limit: int | None = None) -> bool:
        """Whether systems of ``size`` rows are factorised one at a time (the CPU, above
        ``limit``, default :attr:`small_solve`); an accelerator batches every size."""
        return not self.batch_factorisations and size > (self.small_solve if limit is None else limit)


CPU = Paths("cpu", small_solve=256, row_block_small_solve=48, batch_factorisations=False,
            transpose_wide_gram=True, csr_vector_gather=True)
ACCELERATOR = Paths("accelerator", small_solve=0, row_block_small_solve=0,
                    batch_factorisations=True, transpose_wide_gram=False,
                    csr_vector_gather=False)
_BY_NAME = {"cpu": CPU, "accelerator": ACCELERATOR, "gpu": ACCELERATOR, "tpu": ACCELERATOR}


def wide_dtype():
    """The dtype of the small factorisations the precision rule wants wider than the data
    (the ``b x b`` ``eigh`` of the blocked Nyström hold-out): float64, enabled for that
    trace alone when x64 is off, on the CPU and GPUs; a TPU has no float64 ``eigh``:
    float32 there."""
    return jax.numpy.float32 if jax.default_backend() == "tpu" else jax.numpy.float64


def _parse(name, what="code paths") -> Paths | None:
    if name in (None, ""):
        return None
    if name not in _BY_NAME:
        raise ValueError(f"{what} must be one of 'cpu', 'accelerator' (or 'gpu', 'tpu'), got {name!r}")
    return _BY_NAME[name]


_forced: list = [None]


def paths() -> Paths:
    """The code paths of this process: forced (:func:`forced_paths`, then the environment
    variable ``RANKJAX_PATHS``), or :data:`CPU` on the CPU backend and :data:`ACCELERATOR`
    on any other."""
    choice = _forced[-1] or _parse(os.environ.get("RANKJAX_PATHS"), "RANKJAX_PATHS")
    if choice is not None:
        return choice
    return CPU if jax.default_backend() == "cpu" else ACCELERATOR


@contextlib.contextmanager
def forced_paths(name: str):
    """Within the block, :func:`paths` is ``name``'s (``"cpu"`` or ``"accelerator"``);
    compiled programs are dropped on entry and exit (:func:`jax.clear_caches`)."""
    choice = _parse(name)
    jax.clear_caches()
    _forced.append(choice)
    try:
        yield choice
    finally:
        _forced.pop()
        jax.clear_caches()
