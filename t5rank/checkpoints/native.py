"""t5rank's own checkpoints: the parameters in Orbax, the model's config as JSON beside them.

    DIRECTORY/
      params/         Orbax (OCDBT) PyTree checkpoint of the float32 parameters
      config.json     the config's to_json() (a T5Config, or another model's such as TKConfig),
                      written last and atomically: its presence marks a complete checkpoint
      metadata.json   optional free-form metadata (step, source, `model` when it is not monoT5, ...)
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

from t5rank.checkpoints.layout import Params, check_params, unflatten, write_json
from t5rank.models.config import T5Config

PARAMS_DIR = "params"
CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"


def is_native_checkpoint(directory: str) -> bool:
  """Whether `directory` holds a t5rank checkpoint written by `save_checkpoint`."""
  return (os.path.isdir(os.path.join(directory, PARAMS_DIR))
          and os.path.isfile(os.path.join(directory, CONFIG_FILE)))


def save_checkpoint(directory: str, params: Mapping[str, Any], config: Any,
                    extra_metadata: Optional[Mapping[str, Any]] = None) -> None:
  """Writes `params` and `config` to `directory`, which must not already hold a checkpoint; T5
  parameters are checked against their `T5Config` first. `extra_metadata` (JSON-serializable) goes
  to metadata.json."""
  import orbax.checkpoint as ocp

  if isinstance(config, T5Config):
    params = unflatten(check_params(params, config, "the parameters to save"))
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
  write_json(os.path.join(directory, CONFIG_FILE), json.loads(config.to_json()))


def restore_checkpoint(directory: str) -> tuple[T5Config, Params]:
  """(config, params) of a checkpoint written by `save_checkpoint`; params are float32 numpy arrays
  in a nested dict, checked against the config."""
  import orbax.checkpoint as ocp

  config_path = os.path.join(directory, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise FileNotFoundError(f"{config_path} not found: {directory} is not a complete t5rank "
                            "checkpoint (config.json is written last)")
  with open(config_path) as f:
    text = f.read()
  model = json.loads(text).get("model")
  if model is not None:
    raise ValueError(f"{directory} is a {model.upper()} checkpoint, not a T5 one: this needs T5 "
                     f"weights (monoT5); a {model.upper()} checkpoint is scored by `t5rank score "
                     "--checkpoint` as it is")
  config = T5Config.from_json(text)
  params_dir = os.path.abspath(os.path.join(directory, PARAMS_DIR))
  restored = ocp.StandardCheckpointer().restore(params_dir)
  return config, unflatten(check_params(restored, config, f"checkpoint {directory}"))


def restore_model(directory: str, config_class: type) -> tuple[Any, Params]:
  """(config, params) of a checkpoint of a model other than T5: `config_class.from_json` of its
  config.json, the parameters as saved (float32 numpy arrays)."""
  import orbax.checkpoint as ocp

  config_path = os.path.join(directory, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise FileNotFoundError(f"{config_path} not found: {directory} is not a complete t5rank "
                            "checkpoint (config.json is written last)")
  with open(config_path) as f:
    config = config_class.from_json(f.read())
  return config, ocp.StandardCheckpointer().restore(os.path.abspath(os.path.join(directory,
                                                                                  PARAMS_DIR)))


def read_metadata(directory: str) -> dict[str, Any]:
  """The `extra_metadata` saved with the checkpoint in `directory` ({} when none was)."""
  path = os.path.join(directory, METADATA_FILE)
  if not os.path.isfile(path):
    return {}
  with open(path) as f:
    return json.load(f)
