"""t5rank's own checkpoints: the parameters in Orbax, the model's config as JSON beside them.

    DIRECTORY/
      params/         Orbax (OCDBT) PyTree checkpoint of the float32 parameters
      config.json     the config's to_json() (a T5Config, or another model's such as TKConfig),
                      written last and atomically: its presence marks a complete checkpoint
      metadata.json   optional free-form metadata (step, source, `model` when it is not monoT5, ...)
      manifest.json   the size and sha256 of every file, config.json included (written before
                      it; `t5rank.files`), checked before the checkpoint is read
    (and the files a model reads beside its parameters, copied in before: words.tsv, a vocabulary)
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping, Optional

from t5rank.checkpoints.tree import Params, write_json, write_text
from t5rank.files import check_manifest, file_manifest

PARAMS_DIR = "params"
CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
MANIFEST_FILE = "manifest.json"

# The family of a checkpoint whose files name none (every Hugging Face, Mesh TF and t5x T5): the
# one place this default is written (`t5rank.checkpoints.resolved`, `t5rank.models.registry`).
DEFAULT_FAMILY = "monot5"


def is_native_checkpoint(directory: str) -> bool:
  """Whether `directory` holds a t5rank checkpoint written by `save_checkpoint`."""
  return (os.path.isdir(os.path.join(directory, PARAMS_DIR))
          and os.path.isfile(os.path.join(directory, CONFIG_FILE)))


def save_checkpoint(directory: str, params: Mapping[str, Any], config: Any,
                    extra_metadata: Optional[Mapping[str, Any]] = None) -> None:
  """Writes `params` and `config` (anything with a `to_json()`) to `directory`, which must not
  already hold a checkpoint; the parameters are saved as given (T5's are checked first by
  `t5rank.models.t5_weights.save_checkpoint`). `extra_metadata` (JSON-serializable) goes to
  metadata.json."""
  import orbax.checkpoint as ocp

  params_dir = os.path.abspath(os.path.join(directory, PARAMS_DIR))
  if os.path.exists(params_dir):
    raise FileExistsError(f"{directory} already holds a checkpoint ({params_dir} exists); "
                          "choose a new directory or remove it")
  os.makedirs(directory, exist_ok=True)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(params_dir, params)  # Orbax writes to a temporary name, then renames.
  checkpointer.wait_until_finished()
  if extra_metadata is not None:
    write_json(os.path.join(directory, METADATA_FILE), dict(extra_metadata))
  config_text = _json_text(json.loads(config.to_json()))
  manifest = file_manifest(directory, exclude=(MANIFEST_FILE, CONFIG_FILE))
  manifest[CONFIG_FILE] = {"bytes": len(config_text.encode()),
                           "sha256": hashlib.sha256(config_text.encode()).hexdigest()}
  write_json(os.path.join(directory, MANIFEST_FILE), dict(sorted(manifest.items())))
  write_text(os.path.join(directory, CONFIG_FILE), config_text)  # last: the checkpoint is complete


def _json_text(value: Any) -> str:
  """`value` as `write_json` writes it."""
  return json.dumps(value, indent=2, sort_keys=True) + "\n"


def check_files(directory: str, metadata: Optional[Mapping[str, Any]] = None,
                digests: Optional[Mapping[str, Mapping]] = None) -> None:
  """Raises ValueError naming the first file of the checkpoint in `directory` that is not the one
  it was saved with (size or sha256 against manifest.json; checkpoints written before t5rank
  recorded one are not checked). `metadata`: its metadata.json when the caller read it already,
  `digests` the `t5rank.files.file_digest` of the bytes it was read from (`read_metadata_file`)."""
  path = os.path.join(directory, MANIFEST_FILE)
  if not os.path.isfile(path):
    return
  try:
    with open(path, encoding="utf-8") as f:
      manifest = json.load(f)
  except ValueError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None
  check_manifest(directory, manifest, f"the checkpoint {directory}", digests)
  if CONFIG_FILE not in manifest:  # written before the manifest covered it: its metadata's copy
    _check_config_copy(directory, read_metadata(directory) if metadata is None else metadata)


def _check_config_copy(directory: str, metadata: Mapping[str, Any]) -> None:
  """Raises ValueError when config.json differs from the copy of it the trainer keeps in
  metadata.json (`metadata["config"]`; checkpoints whose manifest predates config.json's entry)."""
  copy = metadata.get("config")
  if not isinstance(copy, str):
    return
  path = os.path.join(directory, CONFIG_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      stored = json.load(f)
    recorded = json.loads(copy)
  except ValueError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None
  if isinstance(stored, dict) and isinstance(recorded, dict):
    # dropout is a run setting; a vocabulary is recorded by path in training, by name once saved
    stored, recorded = ({k: os.path.basename(v) if k == "vocabulary" and isinstance(v, str) else v
                         for k, v in d.items() if k != "dropout_rate"} for d in (stored, recorded))
  if stored != recorded:
    differ = sorted(k for k in set(stored) | set(recorded) if stored.get(k) != recorded.get(k)) \
        if isinstance(stored, dict) and isinstance(recorded, dict) else []
    raise ValueError(f"{path} is not the config the checkpoint was saved with (it differs from "
                     f"metadata.json's copy{' in ' + ', '.join(differ) if differ else ''}): it was "
                     "edited or replaced; restore it")


def restore_model(directory: str, config_class: type, model: str,
                  metadata: Optional[Mapping[str, Any]] = None,
                  digests: Optional[Mapping[str, Mapping]] = None) -> tuple[Any, Params]:
  """(config, params) of a checkpoint of `model` (its metadata's `model`, e.g. "tk"), a model other
  than T5 (whose are `t5rank.models.t5_weights.restore_checkpoint`): `config_class.from_json` of
  its config.json, the parameters as saved (float32 numpy arrays). A checkpoint of another model is
  refused by name. `metadata`, `digests`: its metadata.json when the caller read it already
  (`check_files`)."""
  config_path = config_file(directory)
  metadata = read_metadata(directory) if metadata is None else metadata
  found = metadata.get("model", DEFAULT_FAMILY)
  if found != model:
    raise ValueError(f"{directory} is a {found} checkpoint, not a {model} one")
  config = _read_config(config_path, config_class)
  check_files(directory, metadata, digests)
  return config, restore_params(directory)


def restore_params(directory: str) -> Params:
  """The parameters of the checkpoint in `directory` as Orbax saved them (no check of its files:
  `check_files` first)."""
  import orbax.checkpoint as ocp

  return ocp.StandardCheckpointer().restore(os.path.abspath(os.path.join(directory, PARAMS_DIR)))


def config_file(directory: str) -> str:
  """config.json of the checkpoint in `directory`; FileNotFoundError when it is incomplete."""
  config_path = os.path.join(directory, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise FileNotFoundError(f"{config_path} not found: {directory} is not a complete t5rank "
                            "checkpoint (config.json is written last)")
  return config_path


def config_model(text: str) -> Optional[str]:
  """The `model` a config.json names (the configs of models other than T5 do), or None."""
  try:
    value = json.loads(text)
  except ValueError:
    return None
  model = value.get("model") if isinstance(value, dict) else None
  return model if isinstance(model, str) else None


def _read_config(path: str, config_class: type) -> Any:
  """`config_class.from_json` of the file `path`; a broken or foreign file raises ValueError naming
  it."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  try:
    return config_class.from_json(text)
  except (ValueError, TypeError, KeyError) as e:
    raise ValueError(f"{path}: not a {config_class.__name__} ({type(e).__name__}: {e})") from None


def read_metadata(directory: str) -> dict[str, Any]:
  """The `extra_metadata` saved with the checkpoint in `directory` ({} when none was)."""
  return read_metadata_file(directory)[0]


def read_metadata_file(directory: str) -> tuple[dict[str, Any], dict[str, dict]]:
  """(`read_metadata`, {"metadata.json": the `t5rank.files.file_digest` of the bytes it was read
  from} or {} when there is none): one read, for `check_files` to check against the manifest."""
  path = os.path.join(directory, METADATA_FILE)
  if not os.path.isfile(path):
    return {}, {}
  with open(path, "rb") as f:
    data = f.read()
  try:
    metadata = json.loads(data.decode("utf-8"))
  except ValueError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None
  if not isinstance(metadata, dict):
    raise ValueError(f"{path}: expected a JSON object")
  return metadata, {METADATA_FILE: {"bytes": len(data),
                                    "sha256": hashlib.sha256(data).hexdigest()}}
