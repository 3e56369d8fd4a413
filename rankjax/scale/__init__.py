r"""Scale-out (docs/design.md, "Scale-out"): problems larger than one device or than memory,
as kinds of problem the verbs take with the solvers that support them.

* :func:`shard` — a :class:`~rankjax.Problem` laid out by whole queries over the devices of
  a 1-D mesh (:class:`ShardedData`, ``kind == "sharded"``; :func:`partition_queries` says
  which device holds which query). No edge of a query graph leaves its query, so the
  Laplacian is block diagonal over devices and every product splits into per-device terms
  joined by one ``psum``: :math:`X^T L X = \sum_d X_d^T L_d X_d` (Pahikkala et al. 2009, eq. 28),
  the CG matvec (Airola et al. 2010, §3), leave-query-out (each device holds out its own
  queries, eq. 33-34) and per-query metrics (:meth:`ShardedData.score`).
* :func:`stream` — chunks of whole queries read from disk one after the other
  (``kind == "stream"``): the same sums over chunks.

The same code serves several processes (``jax.distributed``), each holding its own queries
on its own devices.
"""
from .layout import AXIS as AXIS
from .layout import QueryPartition as QueryPartition
from .layout import ShardedData as ShardedData
from .layout import partition_queries as partition_queries
from .layout import shard as shard
from .stream import StreamedProblem as StreamedProblem
from .stream import stream as stream

__all__ = ["AXIS", "QueryPartition", "ShardedData", "StreamedProblem", "partition_queries",
           "shard", "stream"]
