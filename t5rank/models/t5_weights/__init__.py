"""T5's weights in and out of t5rank, in every checkpoint format it reads.

    config, params = load_checkpoint(path)            # any format below, detected from the files
    save_checkpoint(directory, params, config)        # t5rank's own (Orbax + config.json)

| format | read | write | carries its config |
| --- | --- | --- | --- |
| native: t5rank's Orbax directory (`t5rank.checkpoints.native`) | yes | yes | yes |
| hf: Hugging Face `config.json` + safetensors, Flax msgpack or PyTorch `.bin` (`hf.py`) | yes | yes (safetensors) | yes |
| mesh_tf: TensorFlow checkpoint, Mesh TF names (`mesh_tf.py`) | yes | yes | no |
| t5x: `checkpoint_N/` msgpack + TensorStore, or Orbax (`t5x.py`) | yes | yes (Orbax layout) | no |

Formats without a config need one passed in (`config=` / `--config NAME`); every importer checks
each tensor's name and shape and reports missing, misshaped and unexpected ones by name.
Parameters come back as a nested dict of float32 numpy arrays in t5x naming (`t5rank.models.network`).
TensorFlow, Orbax and TensorStore are imported only when a format needs them. A Hugging Face
directory with several weight formats is read from the first of safetensors, `flax_model.msgpack`,
`pytorch_model.bin`; the last is read without torch and without running its pickle
(`t5rank.checkpoints.torch_pickle`).

The files themselves (which format a path holds, the raw tensors of a Hugging Face directory,
t5rank's Orbax directory) are `t5rank.checkpoints`', which knows no model; what the tensors mean
for T5 (`layout.py`: names, shapes, the checked copy) lives here, beside the network.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from t5rank.checkpoints import native
from t5rank.checkpoints.formats import detect_format
from t5rank.checkpoints.resolved import Checkpoint
from t5rank.checkpoints.tree import Params, unflatten
from t5rank.models.config import T5Config
from t5rank.models.t5_weights.layout import check_params, check_same_architecture

__all__ = ["load_checkpoint", "restore_checkpoint", "save_checkpoint"]


def load_checkpoint(path: Union[str, Checkpoint], config: Optional[T5Config] = None
                    ) -> tuple[T5Config, Params]:
  """(config, params) of the checkpoint at `path` (or of a resolved `Checkpoint`, whose format and
  metadata are not read again), in any of `t5rank.checkpoints.FORMATS`.

  Mesh TF and t5x checkpoints need `config` (their shapes are checked against it). For formats
  that store a config, a given `config` must have the same architecture and is returned as given
  (so that run settings such as `dtype` and `dropout_rate` are the caller's).
  """
  from t5rank.models.t5_weights import hf, mesh_tf, t5x

  metadata = digests = None
  if isinstance(path, Checkpoint):
    path, kind, metadata, digests = path.path, path.format, path.metadata, path.digests
  else:
    kind = detect_format(path)
  if kind == "mesh_tf":
    return mesh_tf.load_mesh_tf_checkpoint(path, config)
  if kind == "t5x":
    return t5x.load_t5x_checkpoint(path, config)
  stored, params = (restore_checkpoint(path, metadata, digests) if kind == "native"
                    else hf.load_hf_checkpoint(path))
  if config is None:
    return stored, params
  check_same_architecture(f"{kind} checkpoint {path}", stored, config)
  return config, params


def save_checkpoint(directory: str, params: Mapping[str, Any], config: Any,
                    extra_metadata: Optional[Mapping[str, Any]] = None) -> None:
  """`t5rank.checkpoints.native.save_checkpoint`, T5 parameters checked against their `T5Config`
  first (and saved as float32 numpy arrays); another model's config and parameters pass as given.
  """
  if isinstance(config, T5Config):
    params = unflatten(check_params(params, config, "the parameters to save"))
  native.save_checkpoint(directory, params, config, extra_metadata)


def restore_checkpoint(directory: str, metadata: Optional[Mapping[str, Any]] = None,
                       digests: Optional[Mapping[str, Mapping]] = None) -> tuple[T5Config, Params]:
  """(config, params) of a T5 checkpoint written by `save_checkpoint`; params are float32 numpy
  arrays in a nested dict, checked against the config. A checkpoint of another model (its
  config.json names one, e.g. "tk") is refused by name. `metadata`, `digests`: its metadata.json
  when the caller read it already (`t5rank.checkpoints.resolved`; `native.check_files`)."""
  config_path = native.config_file(directory)
  with open(config_path, encoding="utf-8") as f:
    text = f.read()
  try:
    config = T5Config.from_json(text)
  except (ValueError, TypeError, KeyError) as e:
    model = native.config_model(text) or (native.read_metadata(directory) if metadata is None
                                          else metadata).get("model")
    if model:
      raise ValueError(f"{directory} is a {model.upper()} checkpoint, not a T5 one: this needs T5 "
                       f"weights (monoT5); a {model.upper()} checkpoint is scored by `t5rank score "
                       "--checkpoint` as it is") from None
    raise ValueError(f"{config_path}: not a T5Config ({type(e).__name__}: {e})") from None
  native.check_files(directory, metadata, digests)
  restored = native.restore_params(directory)
  return config, unflatten(check_params(restored, config, f"checkpoint {directory}"))
