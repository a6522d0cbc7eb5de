"""TensorFlow checkpoints in the Mesh TensorFlow naming of the original T5 and monoT5 releases.

    shared/embedding                                         (V, D)
    encoder/block_000/layer_000/SelfAttention/{q,k,v,o}      (D, H*K), o (H*K, D)
    encoder/block_000/layer_000/SelfAttention/relative_attention_bias   (H, buckets), block 0 only
    encoder/block_000/layer_000/layer_norm/scale             (D,)
    encoder/block_000/layer_001/DenseReluDense/{wi,wo}/kernel  or  {wi_0,wi_1,wo}/kernel
    encoder/final_layer_norm/scale
    decoder/block_000/layer_000/SelfAttention, layer_001/EncDecAttention, layer_002/DenseReluDense
    decoder/final_layer_norm/scale, decoder/logits/kernel (D, V) when untied

Kernels are stored as t5rank stores them (in, out); no transposes. Adafactor slots (`*_slot_vr`,
`*_slot_vc`, `*_slot_v`) and `global_step` are skipped. Such checkpoints carry no configuration:
the importer reads what the shapes fix and checks it against the T5Config it is given.
TensorFlow is imported only inside these functions.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, Optional

from t5rank.checkpoints.formats import STATE_FILE
from t5rank.checkpoints.tree import Params, write_text
from t5rank.models.config import T5Config
from t5rank.models.t5_weights.layout import (Probes, export_tensors, import_tensors,
                                             infer_architecture, module_path, resolve_config,
                                             tensor_names)

PREFIX = "model.ckpt"
PROBES = Probes(
    embedding="shared/embedding",
    query="encoder/block_000/layer_000/SelfAttention/q",
    relpos="encoder/block_000/layer_000/SelfAttention/relative_attention_bias",
    wi="encoder/block_000/layer_001/DenseReluDense/wi/kernel",
    wi_0="encoder/block_000/layer_001/DenseReluDense/wi_0/kernel",
    logits="decoder/logits/kernel",
    block=r"(encoder|decoder)/block_(\d+)/.*")


def mesh_tf_name(name: str) -> tuple[str, bool]:
  """(Mesh TensorFlow variable name, stored transposed) of t5rank parameter `name`."""
  path = module_path(name)
  if path.module == "shared":
    return "shared/embedding", False
  if path.module == "logits":
    return "decoder/logits/kernel", False
  if path.module == "final_layer_norm":
    return f"{path.stack}/final_layer_norm/scale", False
  prefix = f"{path.stack}/block_{path.block:03d}/layer_{path.sublayer:03d}"
  if path.module == "layer_norm":
    return f"{prefix}/layer_norm/scale", False
  if path.module == "DenseReluDense":
    return f"{prefix}/DenseReluDense/{path.weight}/kernel", False
  return f"{prefix}/{path.module}/{path.weight}", False


def is_training_state(name: str) -> bool:
  """Optimizer slots and the step counter, which an import skips."""
  return name == "global_step" or re.search(r"_slot_\w+$", name) is not None


def load_mesh_tf_checkpoint(path: str, config: Optional[T5Config]) -> tuple[T5Config, Params]:
  """(config, float32 params) of the TF checkpoint at `path` (a prefix such as
  `model.ckpt-1000000`, or a directory with a `checkpoint` state file). `config` is required and
  must agree with the tensor shapes; a missing one raises an error naming the configs that fit."""
  import tensorflow as tf

  reader = tf.train.load_checkpoint(path)
  shapes = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
  source = f"Mesh TensorFlow checkpoint {path}"
  config = resolve_config(source, infer_architecture(shapes, PROBES), config)
  params = import_tensors(source, shapes, reader.get_tensor, tensor_names(config, mesh_tf_name),
                          config, ignore=is_training_state)
  return config, params


def save_mesh_tf_checkpoint(directory: str, params: Mapping[str, Any], config: T5Config,
                            step: int = 0) -> str:
  """Writes `params` in the Mesh TensorFlow naming as `DIRECTORY/model.ckpt-STEP` plus the
  `checkpoint` state file (written last), with a `global_step` as T5's checkpoints have one.
  Returns the checkpoint prefix."""
  import numpy as np
  import tensorflow as tf

  tensors = export_tensors(params, config, mesh_tf_name)
  tensors["global_step"] = np.asarray(step, np.int64)
  os.makedirs(directory, exist_ok=True)
  prefix = os.path.join(os.path.abspath(directory), f"{PREFIX}-{step}")
  names = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(tensors[name]) for name in names])
  # The state file in TensorFlow's text format; a relative path keeps the directory movable.
  name = os.path.basename(prefix)
  state = f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
  write_text(os.path.join(directory, STATE_FILE), state)
  return prefix
