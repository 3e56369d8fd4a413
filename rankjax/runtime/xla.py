"""XLA:CPU set-up, applied when rankjax is imported (before JAX starts its CPU backend).

Two settings, each appended only where the caller has not set it:

* XLA:CPU's concurrency-optimised scheduler runs independent parts of one program at
  once on the host thread pool. On a 2-core machine a hold-out program of this library
  (several fold buckets with batched solves, e.g. leave-query-out on 3,005 rows, 201
  queries) never finished: every pool thread idle, the result never ready. With the
  memory-ordered scheduler (``--xla_cpu_enable_concurrency_optimized_scheduler=false``)
  the same program finishes.
* XLA:CPU's LAPACK calls (Cholesky, ``eigh``) run in SciPy's OpenBLAS, whose worker
  threads spin for about :math:`2^{28}` cycles after each call (``OPENBLAS_THREAD_TIMEOUT``,
  default 28). In a program that multiplies after factorising (every closed form here),
  they take the cores from XLA's own threads, and repeated calls paid it every time.
  ``OPENBLAS_THREAD_TIMEOUT=20`` lets them spin about :math:`2^{20}` cycles (a fraction of a
  millisecond) and then sleep: long enough that a loop of small factorisations, one
  unbatched call a matrix (:mod:`rankjax._core.lapack`), finds them awake, short enough
  that the next product has its cores (at 4, sleeping at once, each call of such a loop
  waited milliseconds for a thread to wake: benchmarks/design_measurements.md §8). It
  takes effect only when SciPy's OpenBLAS is loaded after rankjax is imported (import
  rankjax before ``scipy.linalg``).

Neither has an effect on GPU/TPU.

One switch, for the accelerators: ``RANKJAX_DETERMINISTIC=1`` (set before ``import
rankjax``) adds ``--xla_gpu_deterministic_ops=true``. Every Laplacian product, metric and
Gram of segments is a ``segment_sum``, a floating scatter-add that a GPU runs on atomics:
the order of the additions, and so the last bits of a result, may differ from run to run
(CG iterates, early-stopping decisions at a tie). With the switch XLA:GPU uses
deterministic scatters, at some cost in speed; the CPU is deterministic either way.
"""
import os

_OPTION = "xla_cpu_enable_concurrency_optimized_scheduler"
_SPIN = "OPENBLAS_THREAD_TIMEOUT"


_DETERMINISTIC = "xla_gpu_deterministic_ops"


def _configure(environ=os.environ):
    flags = environ.get("XLA_FLAGS", "")
    if _OPTION not in flags:
        flags = f"{flags} --{_OPTION}=false".strip()
    if environ.get("RANKJAX_DETERMINISTIC", "").lower() in ("1", "true", "yes") \
            and _DETERMINISTIC not in flags:
        flags = f"{flags} --{_DETERMINISTIC}=true"
    environ["XLA_FLAGS"] = flags
    environ.setdefault(_SPIN, "20")


_configure()
