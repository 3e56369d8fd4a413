"""XLA:CPU set-up, applied when rankjax is imported (before JAX starts its CPU backend).

XLA:CPU's concurrency-optimised scheduler runs independent parts of one program at once
on the host thread pool. On a 2-core machine a hold-out program of this library (several
fold buckets with batched solves, e.g. leave-query-out on 3,005 rows, 201 queries) never
finished: every pool thread idle, the result never ready. With the memory-ordered
scheduler (``--xla_cpu_enable_concurrency_optimized_scheduler=false``) the same program
finishes in 2 s. rankjax therefore appends that flag to ``XLA_FLAGS`` unless the caller
set the option themselves. It has no effect on GPU/TPU, and none if JAX's CPU backend was
already started before rankjax was imported.
"""
import os

_OPTION = "xla_cpu_enable_concurrency_optimized_scheduler"


def _configure(environ=os.environ):
    flags = environ.get("XLA_FLAGS", "")
    if _OPTION not in flags:
        environ["XLA_FLAGS"] = f"{flags} --{_OPTION}=false".strip()


_configure()
