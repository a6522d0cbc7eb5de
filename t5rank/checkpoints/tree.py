"""What every checkpoint reader and writer shares, whatever the model: parameters as a nested dict
of arrays and its flat `a/b/c` naming, the error a reader raises for tensors it cannot use, and
atomic writes of small files.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping

Shape = tuple[int, ...]
Params = dict[str, Any]  # nested dict of float32 numpy arrays, as the network takes them


class CheckpointError(ValueError):
  """A checkpoint does not hold the tensors (names, shapes) its configuration asks for, or a file of
  it cannot be read as the format it claims to be."""


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Nested dict -> {"encoder/layers_0/attention/query/kernel": leaf, ...}."""
  flat = {}
  for key, value in params.items():
    name = f"{prefix}{key}"
    if isinstance(value, Mapping):
      flat.update(flatten(value, name + "/"))
    else:
      flat[name] = value
  return flat


def unflatten(flat: Mapping[str, Any]) -> Params:
  """Inverse of `flatten`."""
  tree: Params = {}
  for name, value in flat.items():
    *parents, leaf = name.split("/")
    node = tree
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = value
  return tree


def write_atomically(path: str, write: Callable[[str], None]) -> None:
  """Calls `write(temporary_path)`, then renames the result to `path`, so that `path` is either
  absent or complete."""
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    try:
      write(tmp)
    except (OSError, ValueError):
      raise
    except Exception as e:  # a writer library's own error (safetensors' on a full disk) names no file
      raise OSError(f"{path}: could not be written ({type(e).__name__}: {e})") from None
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # some writers make 0600; an output gets the usual mode
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` atomically."""
  def write(tmp: str) -> None:
    with open(tmp, "w") as f:
      f.write(text)
  write_atomically(path, write)


def write_json(path: str, value: Any) -> None:
  """Writes `value` as indented JSON to `path` atomically."""
  write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")
