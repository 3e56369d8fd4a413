"""The host side of a sharded layout: this process's rows to and from the layout, arrays put
on and read from the mesh, sizes agreed between processes (``jax.distributed``), a device's
own block inside ``shard_map``."""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding


def slots(rows):
    """``[m]`` the slot of every original row in the flattened layout of ``rows``."""
    flat = rows.reshape(-1)
    out = np.empty(int(np.count_nonzero(flat >= 0)), np.int32)
    out[flat[flat >= 0]] = np.flatnonzero(flat >= 0)
    return out


def one_process(what):
    if jax.process_count() > 1:
        raise NotImplementedError(f"{what} runs with one process: with several "
                                  "(jax.distributed), call the verbs outside jit")



def to_layout(rows, v):
    """``[m, ...]`` host rows -> ``[D_local P, ...]`` host layout of ``rows [D_local, P]``
    (0 on padding)."""
    flat = rows.reshape(-1)
    out = np.zeros((flat.size,) + v.shape[1:], v.dtype)
    out[flat >= 0] = v[flat[flat >= 0]]
    return out


def local_rows(v, row_axis):
    """This process's part of a row-sharded array, its shards in mesh order."""
    if not isinstance(v, jax.Array) or v.is_fully_addressable:
        return np.asarray(v)
    ax = row_axis % v.ndim
    shards = sorted(v.addressable_shards, key=lambda s: s.index[ax].start or 0)
    seen, parts = set(), []
    for s in shards:
        key = s.index[ax].start
        if key not in seen:
            seen.add(key)
            parts.append(np.asarray(s.data))
    return np.concatenate(parts, axis=ax)


def put_rows(local, mesh, spec):
    """Host block of this process -> global array (one process: a plain device_put)."""
    sharding = NamedSharding(mesh, spec)
    if jax.process_count() == 1:
        return jax.device_put(local, sharding)
    ax = list(spec).index(mesh.axis_names[0])                 # the sharded (row) axis
    shape = list(local.shape)
    shape[ax] = shape[ax] * mesh.devices.size // local_device_count(mesh)
    return jax.make_array_from_process_local_data(sharding, local, tuple(shape))


def local_device_count(mesh):
    return sum(d.process_index == jax.process_index() for d in mesh.devices.flat)


def agree_across_processes(*sizes):
    """Maximum of host integers over all processes."""
    a = np.asarray(sizes, np.int64)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        a = np.asarray(multihost_utils.process_allgather(a)).reshape(-1, a.size).max(0)
    return [int(s) for s in a]



def local_block(tree):
    """The device's own block of arrays stacked along a leading device axis."""
    return jax.tree.map(lambda a: a[0], tree)

