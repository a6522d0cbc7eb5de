"""The checkpoint formats t5rank reads, as files, before any model is involved: which format a path
holds (`detect_format`), where each keeps its files, and the named tensors of a Hugging Face
directory, read without torch.

| format | what marks it |
| --- | --- |
| native | a directory with `params/` and `config.json` (`t5rank.checkpoints.native`) |
| hf | a directory with `config.json` and one of `WEIGHT_FILES` (or the `.index.json` of its shards) |
| mesh_tf | a TensorFlow checkpoint prefix (`PREFIX.index` beside it), or a directory whose `checkpoint` file names one |
| t5x | `checkpoint_N/` with a msgpack `checkpoint` file or an Orbax `_METADATA` |

What the tensors mean (T5's names and shapes, its configuration) is the model's to say:
`t5rank.models.t5_weights` reads and writes T5 in each format.
"""

from __future__ import annotations

import json
import os
import re
from typing import Callable, Optional

import numpy as np

from t5rank.checkpoints.native import is_native_checkpoint
from t5rank.checkpoints.tree import CheckpointError, Shape

FORMATS = ("native", "hf", "mesh_tf", "t5x")

# Hugging Face
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FLAX_FILE = "flax_model.msgpack"
TORCH_FILE = "pytorch_model.bin"
# The weight files read, in the one order that decides when a directory holds several (safetensors,
# then Flax's msgpack, then torch's pickle); each may be sharded, its shards listed by
# FILE.index.json.
WEIGHT_FILES = (WEIGHTS_FILE, FLAX_FILE, TORCH_FILE)
# Mesh TensorFlow
STATE_FILE = "checkpoint"  # TensorFlow's text file naming the latest checkpoint of a directory

# t5x
MSGPACK_FILE = "checkpoint"
ORBAX_METADATA = "_METADATA"
ORBAX_ITEMS = ("state", "")  # where t5x's Orbax manager puts the train state, under checkpoint_N/


def detect_format(path: str) -> str:
  """Which of `FORMATS` the checkpoint at `path` is in; raises FileNotFoundError if none."""
  if os.path.isdir(path) and is_native_checkpoint(path):
    return "native"
  if os.path.isdir(path) and is_hf_checkpoint(path):
    return "hf"
  if is_mesh_tf_checkpoint(path):
    return "mesh_tf"
  if find_step_dir(path) is not None:
    return "t5x"
  raise FileNotFoundError(
      f"no checkpoint found at {path}: expected a t5rank directory (params/ + config.json), a "
      "Hugging Face directory (config.json + model.safetensors, flax_model.msgpack or "
      "pytorch_model.bin, or the .index.json of its shards), a TensorFlow checkpoint prefix or "
      "directory (Mesh TF names), or a t5x checkpoint (checkpoint_N/)")


def is_hf_checkpoint(directory: str) -> bool:
  """Whether `directory` holds a Hugging Face config.json and weights in a format t5rank reads
  (`WEIGHT_FILES`, or the index of their shards)."""
  return (os.path.isfile(os.path.join(directory, CONFIG_FILE))
          and weight_files(directory) is not None)


def weight_files(directory: str) -> Optional[tuple[str, Optional[str], list[str]]]:
  """(which of `WEIGHT_FILES`, its shard index or None, the files to read) for the first of
  `WEIGHT_FILES` that `directory` holds, whole or sharded; None when it holds
  none."""
  for name in WEIGHT_FILES:
    index_path = os.path.join(directory, f"{name}.index.json")
    if os.path.isfile(index_path):
      try:
        with open(index_path) as f:
          shards = sorted(set(json.load(f)["weight_map"].values()))
      except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{index_path}: not a shard index with a weight_map ({e})") from None
      return name, index_path, [os.path.join(directory, shard) for shard in shards]
    if os.path.isfile(os.path.join(directory, name)):
      return name, None, [os.path.join(directory, name)]
  return None


def is_mesh_tf_checkpoint(path: str) -> bool:
  """Whether `path` is a TF checkpoint prefix, or a directory whose `checkpoint` state file names
  one."""
  if os.path.isfile(path + ".index"):
    return True
  state = os.path.join(path, STATE_FILE)
  if not os.path.isfile(state):
    return False
  with open(state, "rb") as f:
    return f.read(len(b"model_checkpoint_path")) == b"model_checkpoint_path"


def is_t5x_msgpack(directory: str) -> bool:
  """Whether `directory` holds t5x's msgpack `checkpoint` file (not TensorFlow's state file)."""
  path = os.path.join(directory, MSGPACK_FILE)
  if not os.path.isfile(path):
    return False
  with open(path, "rb") as f:  # a TensorFlow checkpoint directory has a text file of this name
    return f.read(len(b"model_checkpoint_path")) != b"model_checkpoint_path"


def t5x_orbax_item(directory: str) -> Optional[str]:
  """The Orbax checkpoint of a t5x step directory (`ORBAX_ITEMS`), or None."""
  for item in ORBAX_ITEMS:
    if os.path.isfile(os.path.join(directory, item, ORBAX_METADATA)):
      return os.path.join(directory, item)
  return None


def _latest_step_dir(directory: str) -> Optional[str]:
  steps = [(int(m[1]), name) for name in os.listdir(directory)
           for m in [re.fullmatch(r"checkpoint_(\d+)", name)] if m]
  return os.path.join(directory, max(steps)[1]) if steps else None


def find_step_dir(path: str) -> Optional[str]:
  """The t5x step directory `path` denotes: the directory itself, the directory of a `checkpoint`
  msgpack file, or the latest `checkpoint_N` of a model directory; None if it is none of these."""
  if os.path.isfile(path) and os.path.basename(path) == MSGPACK_FILE:
    path = os.path.dirname(path) or "."
  if not os.path.isdir(path):
    return None
  if is_t5x_msgpack(path) or t5x_orbax_item(path):
    return path
  latest = _latest_step_dir(path)
  return latest if latest and (is_t5x_msgpack(latest) or t5x_orbax_item(latest)) else None


def hf_tensors(directory: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  """Shapes of all tensors in the weight file(s) of `directory` (the first format of
  `WEIGHT_FILES` it holds), under their PyTorch names and in PyTorch's layout, and a reader of one.
  """
  found = weight_files(directory)
  if found is None:
    raise FileNotFoundError(f"{directory} holds none of {', '.join(WEIGHT_FILES)}")
  kind, index_path, paths = found
  from t5rank.checkpoints.torch_pickle import open_torch_file

  open_file = {WEIGHTS_FILE: _open_safetensors, FLAX_FILE: _open_flax_msgpack,
               TORCH_FILE: open_torch_file}[kind]
  shapes, readers = {}, {}
  for path in paths:
    if not os.path.isfile(path):
      raise FileNotFoundError(f"{path} not found (listed in {index_path})")
    file_shapes, read = open_file(path)
    shapes.update(file_shapes)
    readers.update(dict.fromkeys(file_shapes, read))

  def read(key: str) -> np.ndarray:
    return np.asarray(readers[key](key), dtype=np.float32)

  return shapes, read


def _open_safetensors(path: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  """Shapes of the tensors in one safetensors file, and a reader of one."""
  from safetensors import safe_open

  shapes, dtypes = {}, {}
  try:
    with safe_open(path, framework="np") as f:
      for key in f.keys():
        shapes[key] = tuple(f.get_slice(key).get_shape())
        dtypes[key] = f.get_slice(key).get_dtype()
  except Exception as e:  # safetensors' own errors (a truncated file, say) name no file
    if isinstance(e, (CheckpointError, OSError)):
      raise
    raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None

  def read(key: str) -> np.ndarray:
    # numpy has no bfloat16: such tensors are read through jax and widened.
    with safe_open(path, framework="flax" if dtypes[key] == "BF16" else "np") as f:
      return np.asarray(f.get_tensor(key), dtype=np.float32)

  return shapes, read


def flax_to_torch_name(name: str) -> tuple[str, bool]:
  """(PyTorch tensor name, whether Flax stores it transposed) of a Hugging Face Flax T5 name
  (`/`-joined): kernels are (in, out) where torch's Linear weights are (out, in); embeddings
  (`shared`, `relative_attention_bias`) and layer-norm weights are stored alike."""
  parts = name.split("/")
  if parts[-1] == "kernel":
    return ".".join(parts[:-1] + ["weight"]), True
  if parts[-1] == "embedding":
    return ".".join(parts[:-1] + ["weight"]), False
  return ".".join(parts), False


def _open_flax_msgpack(path: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  """Shapes of the tensors in a Hugging Face Flax file, under their PyTorch names and in PyTorch's
  layout (`flax_to_torch_name`), and a reader of one."""
  from flax.serialization import msgpack_restore
  from flax.traverse_util import flatten_dict

  with open(path, "rb") as f:
    data = f.read()
  try:
    tree = msgpack_restore(data)
    if not isinstance(tree, dict):
      raise ValueError(f"holds a {type(tree).__name__}, not a tree of parameters")
    flat = flatten_dict(tree, sep="/")
  except Exception as e:  # msgpack's errors (a truncated file, say) name no file
    detail = str(e).splitlines()[0] if str(e) else "no detail"
    raise CheckpointError(f"{path}: not a readable Flax msgpack file ({type(e).__name__}: "
                          f"{detail})") from None
  tensors = {}
  for name, value in flat.items():
    if not isinstance(value, np.ndarray):
      raise CheckpointError(f"{path}: {name!r} is a {type(value).__name__}, not an array")
    torch_name, transposed = flax_to_torch_name(name)
    tensors[torch_name] = value.T if transposed else value
  return {name: tuple(value.shape) for name, value in tensors.items()}, tensors.__getitem__
