"""Where scoring runs: the device mesh, parameters placed by the trainer's logical-axis rules, and
one JAX CPU device per core on a CPU.
"""

from __future__ import annotations

import logging
import os
from typing import Optional, Sequence

logger = logging.getLogger(__name__)


def cpu_cores() -> int:
  """The cores this process may run on."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that compute on bfloat16


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
  """The CPU's feature flags (Linux), or an empty set where they cannot be read."""
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        if line.startswith(("flags", "Features")):
          return set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return set()


def bfloat16_note(dtype: Optional[str], platform: str, flags: Optional[set[str]] = None
                  ) -> Optional[str]:
  """A line to print when `dtype` is bfloat16 on a CPU without bfloat16 instructions: there XLA
  emulates bfloat16 with float32 arithmetic and conversions, slower than float32. None otherwise
  (GPUs and TPUs compute on bfloat16; an x86 CPU with avx512_bf16 or amx_bf16 has the
  instructions)."""
  if dtype != "bfloat16" or platform != "cpu":
    return None
  flags = cpu_flags() if flags is None else flags
  if not flags or flags & set(BFLOAT16_FLAGS) or "bf16" in flags:  # unknown, x86 with, or Arm's
    return None
  return ("this CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16 in /proc/cpuinfo): "
          "bfloat16 is emulated here, slower than float32; float32 is the reference and the "
          "faster choice on it")


def precision_problem(precision: Optional[str], platform: str) -> Optional[str]:
  """Why asking for `precision` (`t5rank.ranking.scorer.PRECISIONS`) of float32 matrix products
  means nothing on `platform`, or None where it means something. XLA:CPU computes every float32
  product in float32 whatever precision is asked (tensorfloat32 is an NVIDIA GPU's format, and on
  a TPU both lower precisions take fewer bfloat16 passes); bfloat16 products come from the
  bfloat16 dtype, which makes every product's operands bfloat16 (`t5rank.models.network`)."""
  if precision in (None, "float32") or platform != "cpu":
    return None
  return (f"precision {precision} changes nothing on a CPU: XLA:CPU computes every float32 "
          "product in float32; for bfloat16 products ask for the bfloat16 dtype")


def use_cpu_devices(count: Optional[int] = None) -> int:
  """Makes JAX's CPU backend `count` devices (default: one per core of `cpu_cores`); returns the
  count in effect. The scorer splits each batch over the devices, so on a CPU the batch runs as
  `count` concurrent computations, one per core, instead of one computation whose small matrix
  products XLA spreads thinly over all cores: faster for small models such as tiny, about the same
  for t5_small, the same scores (HISTORY.md, "One CPU device per core"). GPUs and TPUs are
  unaffected (their devices are not the CPU backend's). Takes effect only before JAX starts its
  backends; later it logs a warning and changes nothing."""
  import jax

  count = cpu_cores() if count is None else count
  if count < 1:
    raise ValueError(f"the number of CPU devices must be >= 1, got {count}")
  try:
    jax.config.update("jax_num_cpu_devices", count)
  except RuntimeError:  # the backends already exist
    current = jax.local_device_count("cpu")
    if current != count:
      logger.warning("JAX has started with %d CPU device(s); %d asked for are not used", current,
                     count)
    return current
  return count


def scoring_mesh(mesh_shape: Sequence[int] = (-1, 1)):
  """The (data, model) mesh the scorer runs on, over this host's devices (each host of a pod scores
  its own shards): `mesh_shape` as in training, (-1, 1) = all devices on data (the default)."""
  import jax

  from t5rank.partitioning import create_mesh

  return create_mesh(mesh_shape, jax.local_devices())


# T5-small's d_model: the width at which the CPU's 2048 tokens per batch were measured fastest
CPU_REFERENCE_WIDTH = 512


def default_batch_tokens(mesh, width: Optional[int] = None) -> int:
  """Padded tokens per batch: 2048 per data-parallel group of the mesh on a CPU (small, cache-sized
  batches were fastest there for T5-small), times CPU_REFERENCE_WIDTH // `width` for a narrower
  model (its `Reranker.width`: a batch of the same activation bytes holds more tokens; the demo's
  T5s of width 64 take 16384; BENCHMARKS.md "Batch size on the CPU"); 131072 on a GPU (T5-base's
  step on an H200 reaches a larger share of the bfloat16 peak than at 32768; BENCHMARKS.md "On a
  GPU"), 16384 per TPU core (16 GiB of memory on a v3).
  A group is one device on an (n, 1) mesh; on a (d, m) mesh each of the d groups of m devices
  computes its rows together, each device holding 1/m of the weights."""
  platform = mesh.devices.flat[0].platform
  per_group = {"cpu": 2048, "gpu": 131072}.get(platform, 16384)
  if platform == "cpu" and width:
    per_group *= max(1, CPU_REFERENCE_WIDTH // width)
  return per_group * mesh.shape["data"]


def place_params(params, axes, mesh):
  """`params` on `mesh`, each split by its logical `axes` and t5rank's one table of rules
  (`t5rank.partitioning.LOGICAL_AXIS_RULES`): replicated on a (n, 1) mesh, the wide dimensions
  (vocab, mlp, heads) split over `model` otherwise."""
  import jax

  from t5rank.partitioning import shardings_for

  return jax.device_put(params, shardings_for(params, axes, mesh))
