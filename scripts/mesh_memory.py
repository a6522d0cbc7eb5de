"""Parameter memory per device of a model on a (data, model) mesh, from shapes alone (no device).

    .venv/bin/python scripts/mesh_memory.py                      # T5-3B and 11B on a TPU v3-8
    .venv/bin/python scripts/mesh_memory.py --configs t5_base,mt5_xl --devices 4

Each parameter is placed by `t5rank.partitioning.LOGICAL_AXIS_RULES`, as the trainer and
`t5rank score --mesh DATA,MODEL` place it: dimensions named vocab, mlp, heads and joined_kv are
split over `model`, the rest replicated. Prints, per config, mesh and dtype, the bytes the fullest
device holds (GB = 1e9 bytes). Activations, XLA's buffers and (for training) the optimizer state
come on top. docs/cloud_tpu.md has this table for a TPU v3-8 (16 GiB of HBM per core).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

ITEMSIZE = {"float32": 4, "bfloat16": 2}


@functools.cache
def _shapes_and_axes(config_name: str):
  import jax

  from t5rank.models.config import get_config
  from t5rank.models.network import init_params, param_axes

  config = get_config(config_name)
  shapes = jax.eval_shape(functools.partial(init_params, config), jax.random.PRNGKey(0))
  return shapes, param_axes(config)


def per_device_gb(config_name: str, mesh_shape: tuple[int, int], dtype: str = "float32") -> float:
  """GB (1e9 bytes) of parameters on the fullest device of a `mesh_shape` (data, model) mesh."""
  from t5rank import partitioning

  shapes, axes = _shapes_and_axes(config_name)
  sizes = dict(zip(partitioning.MESH_AXES, mesh_shape))
  partitioning.check_param_dims(shapes, axes, sizes)
  return partitioning.param_bytes_per_device(shapes, axes, mesh_shape, ITEMSIZE[dtype]) / 1e9


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--configs", default="t5_3B,t5_11B")
  parser.add_argument("--devices", type=int, default=8, help="devices of the mesh (v3-8: 8)")
  args = parser.parse_args()
  meshes = [(args.devices // m, m) for m in range(1, args.devices + 1) if args.devices % m == 0]
  print("| config | mesh (data, model) | float32 GB per device | bfloat16 GB per device |")
  print("| --- | --- | --- | --- |")
  for name in args.configs.split(","):
    for mesh in meshes:
      try:
        cells = [f"{per_device_gb(name, mesh, dtype):.2f}" for dtype in ITEMSIZE]
      except ValueError as e:
        cells = [f"not divisible ({str(e).split(';')[0].split(', not')[0]})"] * 2
      print(f"| {name} | {mesh} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
  main()
