"""t5x checkpoints, whose parameter tree is t5rank's own (`target/encoder/layers_0/...`).

Two layouts of one step, `MODEL_DIR/checkpoint_N/`:
  - t5x's own (t5x.checkpoints.Checkpointer): a msgpack file `checkpoint` holding
    {"version": 3, "optimizer": {"target": params, "state": optimizer state}}, where each large
    array is replaced by the JSON spec of a zarr array that TensorStore wrote beside it
    (`target.encoder.layers_0.attention.query.kernel/`, path relative to the step directory);
  - Orbax's (t5x's OrbaxCheckpointManagerInterface): a PyTree checkpoint {"target", "state"} in
    `checkpoint_N/state/` (or `checkpoint_N/` itself).
Only `target` is read; optimizer state is ignored. t5x checkpoints carry no T5 configuration: the
importer reads what the shapes fix and checks it against the T5Config it is given.

`save_t5x_checkpoint` writes the Orbax layout (`MODEL_DIR/checkpoint_N/state/`, a PyTree
{"target": params, "state": {"step": N}} under t5x's parameter names), which t5x's Orbax checkpoint
manager restores and this module reads back bitwise. No optimizer state is written: t5x starts a
fresh one (docs/training.md says how to continue training there).
"""

from __future__ import annotations

import copy
import os
from typing import Any, Callable, Mapping, Optional

import numpy as np

from t5rank.checkpoints.formats import (MSGPACK_FILE, ORBAX_METADATA, find_step_dir,
                                        is_t5x_msgpack, t5x_orbax_item)
from t5rank.checkpoints.tree import CheckpointError, Params, Shape, flatten, unflatten
from t5rank.models.config import T5Config
from t5rank.models.t5_weights.layout import (Probes, check_params, import_tensors,
                                             infer_architecture, param_shapes, resolve_config)

PROBES = Probes(
    embedding="token_embedder/embedding",
    query="encoder/layers_0/attention/query/kernel",
    relpos="encoder/relpos_bias/rel_embedding",
    wi="encoder/layers_0/mlp/wi/kernel",
    wi_0="encoder/layers_0/mlp/wi_0/kernel",
    logits="decoder/logits_dense/kernel",
    block=r"(encoder|decoder)/layers_(\d+)/.*")


def _is_spec(node: Any) -> bool:
  return isinstance(node, Mapping) and "driver" in node and "kvstore" in node


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Flat name -> array or TensorStore spec (a dict, kept whole)."""
  flat = {}
  for key, value in tree.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping) and not _is_spec(value):
      flat.update(_leaves(value, name + "/"))
    else:
      flat[name] = value
  return flat


def _read_zarr(step_dir: str, spec: Mapping[str, Any]) -> np.ndarray:
  """The array a t5x TensorStore spec points to, read from `step_dir` whatever storage (file, gcs)
  it was written to."""
  import ml_dtypes
  import tensorstore as ts

  spec = copy.deepcopy(dict(spec))
  # Paths are relative to the step directory, in `kvstore.path` (tensorstore >= 0.1.14) or `path`.
  relative = os.path.join(spec["kvstore"].get("path", ""), spec.pop("path", ""))
  spec["kvstore"] = {"driver": "file", "path": os.path.join(os.path.abspath(step_dir), relative)}
  array = ts.open(spec, open=True).result().read().result()
  # Version 2 checkpoints stored bfloat16 as raw uint16.
  return array.view(ml_dtypes.bfloat16) if array.dtype == np.uint16 else array


def _open_msgpack(step_dir: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  from flax import serialization

  path = os.path.join(step_dir, MSGPACK_FILE)
  with open(path, "rb") as f:
    contents = serialization.msgpack_restore(f.read())
  try:
    target = contents["optimizer"]["target"]
  except (KeyError, TypeError):
    raise CheckpointError(f"{path} has no optimizer/target tree; is it a t5x checkpoint?") from None
  leaves = _leaves(target)
  shapes = {name: tuple(leaf["metadata"]["shape"]) if _is_spec(leaf) else np.shape(leaf)
            for name, leaf in leaves.items()}

  def read(name: str) -> np.ndarray:
    leaf = leaves[name]
    return _read_zarr(step_dir, leaf) if _is_spec(leaf) else np.asarray(leaf)

  return shapes, read


def _open_orbax(item_dir: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  import orbax.checkpoint as ocp

  tree = ocp.PyTreeCheckpointer().restore(os.path.abspath(item_dir))
  if "target" not in tree:
    raise CheckpointError(f"Orbax checkpoint {item_dir} has no 'target' tree; its top-level keys "
                          f"are {sorted(tree)}")
  leaves = flatten(tree["target"])
  return {name: np.shape(leaf) for name, leaf in leaves.items()}, leaves.__getitem__


def load_t5x_checkpoint(path: str, config: Optional[T5Config]) -> tuple[T5Config, Params]:
  """(config, float32 params) of the t5x checkpoint at `path` (a `checkpoint_N` directory, its
  `checkpoint` file, or a model directory, whose latest step is read). `config` is required and
  must agree with the tensor shapes; a missing one raises an error naming the configs that fit."""
  step_dir = find_step_dir(path)
  if step_dir is None:
    raise FileNotFoundError(f"{path} holds no t5x checkpoint (a `checkpoint` msgpack file, an "
                            f"Orbax `{ORBAX_METADATA}`, or `checkpoint_N/` directories)")
  if is_t5x_msgpack(step_dir):
    shapes, read = _open_msgpack(step_dir)
  else:
    shapes, read = _open_orbax(t5x_orbax_item(step_dir))
  source = f"t5x checkpoint {step_dir}"
  config = resolve_config(source, infer_architecture(shapes, PROBES), config)
  names = {name: (name, False) for name in param_shapes(config)}
  return config, import_tensors(source, shapes, read, names, config)


def save_t5x_checkpoint(model_dir: str, params: Mapping[str, Any], config: T5Config,
                        step: int = 0) -> str:
  """Writes `params` as step `step` of a t5x model directory (module docstring); returns the step
  directory. t5x ties scaling to the shared embedding (`logits_via_embedding`), so a model whose
  `tie_embeddings` and `scale_decoder_outputs` differ is refused. The directory must not hold that
  step already."""
  import orbax.checkpoint as ocp

  if config.tie_embeddings != config.scale_decoder_outputs:
    raise CheckpointError(f"t5x cannot describe this model (tie_embeddings "
                          f"{config.tie_embeddings}, "
                          f"scale_decoder_outputs {config.scale_decoder_outputs}): its logits via "
                          "the embedding are always scaled, and its separate logits layer never")
  flat = check_params(params, config, "the parameters to export")
  step_dir = os.path.join(os.path.abspath(model_dir), f"checkpoint_{step}")
  if os.path.exists(step_dir):
    raise FileExistsError(f"{step_dir} exists; not overwriting it")
  tree = {"target": unflatten(flat), "state": {"step": np.asarray(step, np.int32)}}
  ocp.PyTreeCheckpointer().save(os.path.join(step_dir, "state"), tree)  # atomic: a temp dir first
  return step_dir
