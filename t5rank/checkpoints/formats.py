"""The checkpoint formats t5rank reads, as files, before any model is involved: which format a path
holds (`detect_format`), where each keeps its files, and the named tensors of a Hugging Face
directory, read without torch.

| format | what marks it |
| --- | --- |
| native | a directory with `params/` and `config.json` (`t5rank.checkpoints.native`) |
| hf | a directory with `config.json` and one of `WEIGHT_FILES` (or the `.index.json` of its shards) |
| mesh_tf | a TensorFlow checkpoint prefix (`PREFIX.index` beside it), or a directory whose `checkpoint` file names one |
| t5x | `checkpoint_N/` with a msgpack `checkpoint` file or an Orbax `_METADATA` |

A Hugging Face directory may come from anyone (a clone, a download, a tarball), so its weights are
read only from inside it: each weight file and shard index must be a plain file name (no `/`, no
`..`, not absolute) whose real path, links followed, lies inside the directory's real path, or, when
the directory is a Hub cache snapshot (`models--ORG--NAME/snapshots/REVISION`, whose files link to
`../../blobs/SHA`), inside that repository's cache folder `models--ORG--NAME`. Anything else is
refused naming the index and the entry. A whole weight file linked from elsewhere (a git-annex or
DVC link cache, say) is refused too: copy it in. `config.json`, a small JSON file, is read wherever
its link leads. Names from inside a file reach messages through `t5rank.checkpoints.untrusted.
quote`: escaped and bounded.

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
from t5rank.checkpoints.untrusted import quote

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
# the safetensors dtypes read (real, widened to float32); FP8, FP4, complex and bool are refused
SAFETENSORS_DTYPES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64", "U32", "U16",
                      "U8")
# what a file that `git clone` left without `git lfs pull` starts with
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
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
  if os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_FILE)):
    raise FileNotFoundError(_no_weights(path))
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
  `WEIGHT_FILES` that `directory` holds, whole or sharded; None when it holds none. Every file is
  checked to be the directory's own (module docstring); a shard index that names anything else,
  or no file name at all, raises a one-line CheckpointError naming the index and the entry."""
  for name in WEIGHT_FILES:
    index_path = os.path.join(directory, f"{name}.index.json")
    if os.path.isfile(index_path):
      _check_own_file(directory, os.path.basename(index_path), directory)
      try:
        with open(index_path) as f:
          weight_map = json.load(f)["weight_map"]
        entries = list(weight_map.items())
      except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{index_path}: not a shard index with a weight_map "
                              f"({quote(str(e))})") from None
      for key, shard in entries:
        if not _is_file_name(shard):
          raise CheckpointError(
              f"{index_path}: weight_map entry {quote(key)} names {quote(shard)}, not a file "
              "name in the checkpoint's own directory (printable, no '/', no '..', not absolute)")
      shards = sorted({shard for _, shard in entries})
      if not shards:
        raise CheckpointError(f"{index_path}: its weight_map lists no shards")
      for shard in shards:
        _check_own_file(directory, shard, index_path)
      return name, index_path, [os.path.join(directory, shard) for shard in shards]
    if os.path.isfile(os.path.join(directory, name)):
      _check_own_file(directory, name, directory)
      return name, None, [os.path.join(directory, name)]
  return None


def _is_file_name(name: object) -> bool:
  """Whether `name` is a plain file name: a printable string of at most 255 characters without a
  directory part, not `.` or `..` (so that messages may print it as it is)."""
  return (isinstance(name, str) and 0 < len(name) <= 255 and name.isprintable()
          and name not in (".", "..") and "/" not in name and "\\" not in name)


def _check_own_file(directory: str, name: str, listed_in: str) -> None:
  """Refuses file `name` of `directory` (listed in `listed_in`: an index, or the directory) when
  its real path lies outside the directory's own files (module docstring)."""
  real = os.path.realpath(os.path.join(directory, name))
  root = _files_root(directory)
  if os.path.commonpath([real, root]) != root:
    raise CheckpointError(
        f"{listed_in}: {quote(name)} is a link to {quote(real, 120)}, outside {directory}; "
        "t5rank reads weights only from inside a checkpoint's directory: copy the file in")


def _files_root(directory: str) -> str:
  """Where the files of `directory` may lie: its real path, or for a Hub cache snapshot its
  repository's cache folder (models--ORG--NAME, holding the blobs its files link to)."""
  real = os.path.realpath(directory)
  snapshots, repo = os.path.dirname(real), os.path.dirname(os.path.dirname(real))
  if os.path.basename(snapshots) == "snapshots" and os.path.basename(repo).startswith("models--"):
    return repo
  return real


def _no_weights(directory: str) -> str:
  """The refusal of a directory with a Hugging Face config.json and no weights: an incomplete
  download, and how to complete it."""
  real = os.path.realpath(directory)
  repo = os.path.basename(os.path.dirname(os.path.dirname(real)))
  formats = "model.safetensors, flax_model.msgpack or pytorch_model.bin, whole or sharded"
  if os.path.basename(os.path.dirname(real)) == "snapshots" and repo.startswith("models--"):
    hub_id = repo[len("models--"):].replace("--", "/", 1)
    return (f"no checkpoint found at {directory}: this Hugging Face cache snapshot of {hub_id} "
            f"has a config.json but no weights ({formats}), so the download is incomplete; "
            f"complete it with `hf download {hub_id} --revision {os.path.basename(real)}`")
  return (f"no checkpoint found at {directory}: it has a config.json but no weights ({formats}), "
          "so the download or copy is incomplete; fetch the weights beside it (`hf download "
          f"ORG/NAME --local-dir {directory}`, or `git lfs pull` in a git clone)")


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
    _check_not_lfs_pointer(path)
    file_shapes, read = open_file(path)
    shapes.update(file_shapes)
    readers.update(dict.fromkeys(file_shapes, read))

  def read(key: str) -> np.ndarray:
    return np.asarray(readers[key](key), dtype=np.float32)

  return shapes, read


def _check_not_lfs_pointer(path: str) -> None:
  """Refuses a Git LFS pointer in place of a weight file (a clone without `git lfs pull`)."""
  with open(path, "rb") as f:
    if f.read(len(LFS_POINTER)) != LFS_POINTER:
      return
  raise CheckpointError(
      f"{path} is a Git LFS pointer ({os.path.getsize(path)} bytes), not the weights: run `git lfs "
      f"pull` in the git clone it comes from, or download the file itself (`hf download ORG/NAME "
      f"{os.path.basename(path)} --local-dir {os.path.dirname(path) or '.'}`)")


def _open_safetensors(path: str) -> tuple[dict[str, Shape], Callable[[str], np.ndarray]]:
  """Shapes of the tensors in one safetensors file, and a reader of one. The header is parsed
  once: the reader keeps the one handle. Only `SAFETENSORS_DTYPES` are read; a tensor of another
  dtype (FP8, complex, ...) raises a CheckpointError naming it."""
  import ml_dtypes  # noqa: F401  teaches numpy bfloat16, in which safetensors returns BF16 tensors
  from safetensors import safe_open

  shapes = {}
  try:
    handle = safe_open(path, framework="np")
    for key in handle.keys():
      view = handle.get_slice(key)
      if view.get_dtype() not in SAFETENSORS_DTYPES:
        raise CheckpointError(
            f"{path}: tensor {quote(key)} is {quote(view.get_dtype(), 20)}, which t5rank does not "
            f"read (it widens real tensors to float32: {', '.join(SAFETENSORS_DTYPES)}); convert "
            "the checkpoint to one of those")
      shapes[key] = tuple(view.get_shape())
  except (CheckpointError, OSError):
    raise
  except Exception as e:  # safetensors' own errors (a truncated file, say) name no file
    raise CheckpointError(f"{path}: not a readable safetensors file ({quote(str(e), 200)})"
                          ) from None

  def read(key: str) -> np.ndarray:
    return np.asarray(handle.get_tensor(key), dtype=np.float32)

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
    detail = quote(str(e).splitlines()[0], 200) if str(e) else "no detail"
    raise CheckpointError(f"{path}: not a readable Flax msgpack file ({type(e).__name__}: "
                          f"{detail})") from None
  tensors = {}
  for name, value in flat.items():
    if not isinstance(value, np.ndarray):
      raise CheckpointError(f"{path}: {quote(name)} is a {type(value).__name__}, not an array")
    torch_name, transposed = flax_to_torch_name(name)
    tensors[torch_name] = value.T if transposed else value
  return {name: tuple(value.shape) for name, value in tensors.items()}, tensors.__getitem__
