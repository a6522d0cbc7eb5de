"""A (data, model) device mesh and the one table that maps the network's logical axes onto it.

As in t5x, every parameter names its axes logically (`vocab`, `embed`, `mlp`, `heads`, `joined_kv`,
`relpos_buckets`; see `t5rank.models.network`) and `LOGICAL_AXIS_RULES` says which mesh axis each one is
split over. The batch is split over `data`; the wide dimensions of the weights over `model`:

    mesh (data=8, model=1)   pure data parallelism: weights replicated, batch split in 8
    mesh (data=1, model=8)   pure model parallelism: every weight matrix split in 8 along mlp/heads/vocab
    mesh (data=4, model=2)   both

Multi-host (a TPU pod slice): `initialize_distributed()` first, then every host builds the same mesh
over all devices and reads only its own share of each global batch (`host_data_shard`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec


MESH_AXES = ("data", "model")

# Logical axis -> mesh axis (None: replicated). t5x's standard rules with 1-D parameter partitioning.
LOGICAL_AXIS_RULES: tuple[tuple[str, str | None], ...] = (
    ("batch", "data"),
    ("vocab", "model"),
    ("mlp", "model"),
    ("heads", "model"),
    ("joined_kv", "model"),
    ("kv", None),
    ("embed", None),
    ("relpos_buckets", None),
    ("length", None),
)


def initialize_distributed() -> None:
  """Joins the other hosts of a Cloud TPU pod slice (`jax.distributed.initialize()`); a no-op on a
  single host. Call it before anything else touches JAX devices."""
  hosts = [h for h in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]
  if len(hosts) > 1:
    jax.distributed.initialize()


def create_mesh(mesh_shape: Sequence[int] = (-1, 1),
                devices: Sequence[Any] | None = None) -> Mesh:
  """A mesh with axes ("data", "model") over `devices` (default: all devices of all hosts).

  `mesh_shape` is (data, model); one entry may be -1 for "all remaining devices". The product must
  equal the number of devices. Device order follows the physical topology on TPU.
  """
  devices = list(jax.devices() if devices is None else devices)
  shape = list(mesh_shape)
  if len(shape) != 2 or shape.count(-1) > 1 or any(s == 0 or s < -1 for s in shape):
    raise ValueError(f"mesh_shape must be (data, model) with positive sizes or one -1, got "
                     f"{tuple(mesh_shape)}")
  if -1 in shape:
    known = int(np.prod([s for s in shape if s != -1]))
    if len(devices) % known:
      raise ValueError(f"mesh_shape {tuple(mesh_shape)} does not divide {len(devices)} devices")
    shape[shape.index(-1)] = len(devices) // known
  if int(np.prod(shape)) != len(devices):
    raise ValueError(f"mesh_shape {tuple(shape)} needs {int(np.prod(shape))} devices, "
                     f"but {len(devices)} are given")
  if len(devices) == len(jax.devices()):
    grid = mesh_utils.create_device_mesh(shape, devices)
  else:
    grid = np.asarray(devices, dtype=object).reshape(shape)
  return Mesh(grid, MESH_AXES)


def shardings_for(params, axes, mesh: Mesh,
                  rules: Sequence[tuple[str, str | None]] = LOGICAL_AXIS_RULES):
  """`NamedSharding`s for `params` (arrays or shapes) of any model whose logical `axes` (a pytree of
  logical `PartitionSpec`s, e.g. `Reranker.param_axes()`) follow the rules, after
  `check_param_dims`."""
  check_param_dims(params, axes, dict(mesh.shape), rules)
  return nn.logical_to_mesh_sharding(axes, mesh, rules)


def _dimensions(params, axes, rules):
  """(parameter path, dimension size, logical axis, mesh axis or None) of every dimension."""
  mesh_axis = dict(rules)
  specs = jax.tree.leaves(axes, is_leaf=lambda x: isinstance(x, PartitionSpec))
  for (path, leaf), spec in zip(jax.tree_util.tree_leaves_with_path(params), specs):
    for size, logical in zip(np.shape(leaf), spec):
      yield path, size, logical, mesh_axis.get(logical)


def check_param_dims(params, axes, mesh_shape: Mapping[str, int],
                     rules: Sequence[tuple[str, str | None]] = LOGICAL_AXIS_RULES) -> None:
  """Raises ValueError naming the parameter and the dimension when a dimension of `params` (arrays
  or shapes) that the rules split over a mesh axis is not a multiple of that axis's size in
  `mesh_shape` (e.g. 6 heads on model=4)."""
  for path, size, logical, axis in _dimensions(params, axes, rules):
    if axis is not None and size % mesh_shape[axis]:
      raise ValueError(f"parameter {jax.tree_util.keystr(path)}: dimension {logical}={size} is not "
                       f"divisible by mesh axis {axis}={mesh_shape[axis]}; choose a mesh whose "
                       f"{axis} size divides it")


def param_bytes_per_device(shapes, axes, mesh_shape: Sequence[int], itemsize: int = 4,
                           rules: Sequence[tuple[str, str | None]] = LOGICAL_AXIS_RULES) -> int:
  """The parameter bytes each device of a (data, model) mesh of `mesh_shape` holds when `shapes`
  (a pytree of arrays or ShapeDtypeStructs) are placed by their logical `axes` and the rules:
  worked out from the shapes alone, with no device. A dimension split over an axis holds 1/size
  of it (rounded up, as XLA pads)."""
  sizes = dict(zip(MESH_AXES, mesh_shape))
  counts: dict[str, int] = {}
  for path, size, _, axis in _dimensions(shapes, axes, rules):
    key = jax.tree_util.keystr(path)
    counts[key] = counts.get(key, 1) * (-(-size // sizes[axis]) if axis is not None else size)
  return sum(counts.values()) * itemsize


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Sharding of a batch array (B, ...): rows split over `data`, replicated over `model`."""
  return NamedSharding(mesh, PartitionSpec("data"))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def host_data_shard(mesh: Mesh, global_batch_size: int) -> tuple[int, int]:
  """(shard_index, num_shards) of the data this host must read so that the hosts together feed one
  global batch of `global_batch_size` rows; each host reads `global_batch_size // num_shards` rows.

  Hosts whose devices hold the same rows (model parallelism across hosts) get the same shard.
  """
  if global_batch_size % mesh.shape["data"]:
    raise ValueError(f"batch size {global_batch_size} is not divisible by the mesh's data axis "
                     f"({mesh.shape['data']})")
  indices = batch_sharding(mesh).addressable_devices_indices_map((global_batch_size,))
  starts = sorted({(idx[0].start or 0) for idx in indices.values()})
  stops = sorted({(idx[0].stop or global_batch_size) for idx in indices.values()})
  rows = stops[-1] - starts[0]
  if rows != sum(b - a for a, b in zip(starts, stops)):
    raise ValueError("this host's devices do not hold one contiguous block of the batch; use a mesh "
                     "whose data axis follows the host order")
  return starts[0] // rows, global_batch_size // rows


def global_batch(mesh: Mesh, local_batch: dict[str, np.ndarray],
                 global_batch_size: int) -> dict[str, jax.Array]:
  """This host's rows of a batch -> global arrays split over the mesh's data axis. An array may hold
  a whole multiple of the host's rows (the dual encoder's `in_batch_softmax_pool`: 2B documents for
  B queries, on one data shard only: with several, each host's extra rows would land between the
  other hosts' rows); its global size is its local one times the number of data shards."""
  sharding = batch_sharding(mesh)
  _, shards = host_data_shard(mesh, global_batch_size)
  rows = global_batch_size // shards
  for k, v in local_batch.items():
    if len(v) % rows or (len(v) != rows and shards > 1):
      raise ValueError(f"batch array {k!r} has {len(v)} rows on this host, which reads {rows} of "
                       f"the {global_batch_size}-row batch's {shards} data shard(s)")
  return {k: jax.make_array_from_process_local_data(sharding, v, (len(v) * shards,) + v.shape[1:])
          for k, v in local_batch.items()}
