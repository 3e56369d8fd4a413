"""Scale-out (docs/design.md, "Scale-out"): sharding by whole queries over a device mesh,
and streaming chunks of whole queries from disk.

No edge of a query graph leaves its query, so with every query on one device the
Laplacian is block diagonal over devices and every product splits into per-device terms
joined by one ``psum``: ``X^T L X = sum_d X_d^T L_d X_d`` (Pahikkala et al. 2009, eq. 28),
the CG matvec (Airola et al. 2010, §3), leave-query-out (each device holds out its own
queries, eq. 33-34) and per-query metrics. The same sums over chunks read one after the
other give the stream.

* :mod:`~rankjax.scale.layout` — :class:`ShardedData`, :func:`shard_data`,
  :func:`partition_queries`: the rows of each device, padded to one width;
* :mod:`~rankjax.scale.primal` — normal equations, λ path and hold-out;
* :mod:`~rankjax.scale.solvers` — CG and FALKON;
* :mod:`~rankjax.scale.grid` — metrics and the kernel λ × γ grid;
* :mod:`~rankjax.scale.stream` — the primal path from chunks of whole queries.

The ``sharded_*`` functions are host boundaries (they place data on the mesh and map
rows back); call them outside ``jit``. Their cores are module-level jitted ``shard_map``
programs: new values of the same layout compile nothing. The same code serves several
processes (``jax.distributed``), each holding its own queries on its own devices.
"""
from .grid import GridSearch as GridSearch
from .grid import sharded_kernel_grid as sharded_kernel_grid
from .grid import sharded_metric as sharded_metric
from .layout import AXIS as AXIS
from .layout import QueryPartition as QueryPartition
from .layout import ShardedData as ShardedData
from .layout import partition_queries as partition_queries
from .layout import shard_data as shard_data
from .primal import sharded_holdout as sharded_holdout
from .primal import sharded_normal_equations as sharded_normal_equations
from .primal import sharded_primal_path as sharded_primal_path
from .solvers import sharded_cg as sharded_cg
from .solvers import sharded_falkon as sharded_falkon
from .stream import StreamFit as StreamFit
from .stream import rankrls_primal_stream as rankrls_primal_stream

__all__ = ["AXIS", "QueryPartition", "ShardedData", "StreamFit", "partition_queries",
           "rankrls_primal_stream", "shard_data", "sharded_cg", "sharded_falkon", "sharded_holdout",
           "sharded_kernel_grid", "sharded_metric", "sharded_normal_equations", "sharded_primal_path"]
