"""XLA:CPU set-up, applied when rankjax is imported (before JAX starts its CPU backend).

Two settings, each appended only where the caller has not set it:

* XLA:CPU's concurrency-optimised scheduler runs independent parts of one program at
  once on the host thread pool. On a 2-core machine a hold-out program of this library
  (several fold buckets with batched solves, e.g. leave-query-out on 3,005 rows, 201
  queries) never finished: every pool thread idle, the result never ready. With the
  memory-ordered scheduler (``--xla_cpu_enable_concurrency_optimized_scheduler=false``)
  the same program finishes in 2 s.
* XLA:CPU's LAPACK calls (Cholesky, ``eigh``) run in SciPy's OpenBLAS, whose worker
  threads spin for about 2^28 cycles after each call (``OPENBLAS_THREAD_TIMEOUT``,
  default 28). In a program that multiplies after factorising (every closed form here),
  they take the cores from XLA's own threads: 200,000 x 136 ``X^T X`` followed by a
  136 x 136 Cholesky ran 0.13 s instead of 0.07 s (2-core CPU, float64), and repeated
  calls paid it every time. ``OPENBLAS_THREAD_TIMEOUT=4`` lets them sleep at once (a
  3,000 x 3,000 ``eigh`` keeps both threads: 1.8 s). It takes effect only when SciPy's
  OpenBLAS is loaded after rankjax is imported (import rankjax before ``scipy.linalg``).

Neither has an effect on GPU/TPU.
"""
import os

_OPTION = "xla_cpu_enable_concurrency_optimized_scheduler"
_SPIN = "OPENBLAS_THREAD_TIMEOUT"


def _configure(environ=os.environ):
    flags = environ.get("XLA_FLAGS", "")
    if _OPTION not in flags:
        environ["XLA_FLAGS"] = f"{flags} --{_OPTION}=false".strip()
    environ.setdefault(_SPIN, "4")


_configure()
