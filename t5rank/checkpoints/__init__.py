"""T5 checkpoints in and out of t5rank.

    config, params = load_checkpoint(path)            # any format below, detected from the files
    save_checkpoint(directory, params, config)        # t5rank's own (Orbax + config.json)

| format | read | write | carries its config |
| --- | --- | --- | --- |
| native: t5rank's Orbax directory (`native.py`) | yes | yes | yes |
| hf: Hugging Face `config.json` + safetensors, Flax msgpack or PyTorch `.bin` (`hf.py`) | yes | yes (safetensors) | yes |
| mesh_tf: TensorFlow checkpoint, Mesh TF names (`mesh_tf.py`) | yes | yes | no |
| t5x: `checkpoint_N/` msgpack + TensorStore, or Orbax (`t5x.py`) | yes | yes (Orbax layout) | no |

Formats without a config need one passed in (`config=` / `--config NAME`); every importer checks
each tensor's name and shape and reports missing, misshaped and unexpected ones by name.
Parameters come back as a nested dict of float32 numpy arrays in t5x naming (`t5rank.models.network`).
TensorFlow, Orbax and TensorStore are imported only when a format needs them. A Hugging Face
directory with several weight formats is read from the first of safetensors, `flax_model.msgpack`,
`pytorch_model.bin`; the last is read without torch and without running its pickle
(`torch_pickle.py`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional, Union

from t5rank.checkpoints.layout import CheckpointError, Params, check_same_architecture
from t5rank.checkpoints.native import save_checkpoint
from t5rank.models.config import T5Config

if TYPE_CHECKING:
  from t5rank.checkpoints.resolved import Checkpoint

FORMATS = ("native", "hf", "mesh_tf", "t5x")

__all__ = ["CheckpointError", "FORMATS", "detect_format", "load_checkpoint", "save_checkpoint"]


def detect_format(path: str) -> str:
  """Which of `FORMATS` the checkpoint at `path` is in; raises FileNotFoundError if none."""
  from t5rank.checkpoints import hf, mesh_tf, native, t5x

  if os.path.isdir(path) and native.is_native_checkpoint(path):
    return "native"
  if os.path.isdir(path) and hf.is_hf_checkpoint(path):
    return "hf"
  if mesh_tf.is_mesh_tf_checkpoint(path):
    return "mesh_tf"
  if t5x.find_step_dir(path) is not None:
    return "t5x"
  raise FileNotFoundError(
      f"no checkpoint found at {path}: expected a t5rank directory (params/ + config.json), a "
      "Hugging Face directory (config.json + model.safetensors, flax_model.msgpack or "
      "pytorch_model.bin, or the .index.json of its shards), a TensorFlow checkpoint prefix or "
      "directory (Mesh TF names), or a t5x checkpoint (checkpoint_N/)")


def load_checkpoint(path: Union[str, Checkpoint], config: Optional[T5Config] = None
                    ) -> tuple[T5Config, Params]:
  """(config, params) of the checkpoint at `path` (or of a resolved `Checkpoint`, whose format and
  metadata are not read again), in any of `FORMATS`.

  Mesh TF and t5x checkpoints need `config` (their shapes are checked against it). For formats
  that store a config, a given `config` must have the same architecture and is returned as given
  (so that run settings such as `dtype` and `dropout_rate` are the caller's).
  """
  from t5rank.checkpoints import hf, mesh_tf, native, t5x
  from t5rank.checkpoints.resolved import Checkpoint

  metadata = digests = None
  if isinstance(path, Checkpoint):
    path, kind, metadata, digests = path.path, path.format, path.metadata, path.digests
  else:
    kind = detect_format(path)
  if kind == "mesh_tf":
    return mesh_tf.load_mesh_tf_checkpoint(path, config)
  if kind == "t5x":
    return t5x.load_t5x_checkpoint(path, config)
  stored, params = (native.restore_checkpoint(path, metadata, digests) if kind == "native"
                    else hf.load_hf_checkpoint(path))
  if config is None:
    return stored, params
  check_same_architecture(f"{kind} checkpoint {path}", stored, config)
  return config, params
