"""`t5rank train`: fine-tune a monoT5 reranker from gin files, in t5x's style.

    t5rank train --gin_file=gin/experiments/monot5_base_msmarco.gin \\
        --gin.MODEL_DIR=gs://bucket/monot5_base --gin.TRAIN_STEPS=1000

Gin files are layered as in t5x: `gin/models/*.gin` (architecture), `gin/runs/finetune.gin` (the
recipe), `gin/experiments/*.gin` (includes plus a few macros). `--gin.NAME=VALUE` overrides a macro or
a binding (`--gin.trainer.train.seed=3`); a value that is not a gin literal is taken as a string, so
`--gin.MODEL_DIR=/tmp/run` works. The macros of the recipe:

  MIXTURE_OR_TASK_NAME  SeqIO task, e.g. msmarco_passage_monot5_true_false
  TASK_FEATURE_LENGTHS  {"inputs": 512, "targets": 2}
  TRAIN_STEPS           total optimizer steps (100000 in the paper)
  BATCH_SIZE            global batch (128 in the paper)
  MODEL_DIR             checkpoints, TensorBoard events, config.json; an existing run is resumed
  INIT_CHECKPOINT       starting weights (any format t5rank reads), or None for random weights
  LEARNING_RATE, DROPOUT_RATE, MESH_SHAPE (data, model), PACK

Running the same command again after the process was killed resumes from the last checkpoint.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import logging
import os
import re
import tokenize
from typing import Optional, Sequence

MODEL_DIR_PLACEHOLDER = "MODEL_DIR"  # in a recipe (`recipe`): wherever the run is


def _gin_root() -> str:
  """The directory `gin/experiments/x.gin` and a gin file's `include 'gin/models/y.gin'` resolve
  in from any working directory: the installed package (t5rank/gin/...), else the checkout whose
  top level holds gin/ beside t5rank/."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return package if os.path.isdir(os.path.join(package, "gin")) else os.path.dirname(package)


GIN_ROOT = _gin_root()


def gin_bindings(extra: list[str]) -> list[str]:
  """`--gin.NAME=VALUE` flags -> gin binding strings `NAME = VALUE`; bare words become strings."""
  bindings = []
  for flag in extra:
    if not flag.startswith("--gin.") or "=" not in flag:
      raise SystemExit(f"t5rank: unrecognized argument {flag!r}; expected --gin.NAME=VALUE")
    name, value = flag[len("--gin."):].split("=", 1)
    bindings.append(f"{name} = {_gin_value(value)}")
  return bindings


def _gin_value(value: str) -> str:
  if value.startswith(("@", "%")) or value in ("None", "True", "False"):
    return value
  try:
    ast.literal_eval(value)
    return value
  except (ValueError, SyntaxError):
    return repr(value)


def parse_gin(gin_files: list[str], bindings: list[str], search_paths: list[str] = ()) -> None:
  """Loads gin files and then `bindings` (from `--gin.NAME=VALUE`), each file looked up in the
  current directory, then in `search_paths`, then in the package (GIN_ROOT: `gin/...`). A binding of a macro that no gin file defines (a misspelling such as
  TRAIN_STEP) is refused, as gin refuses an unknown configurable; a syntax error, an `import` of a
  module that is not there, a macro left `%gin.REQUIRED`, or a macro of WHOLE_NUMBER_MACROS that is
  not a whole number (`--gin.TRAIN_STEPS=2.5`) raises ValueError naming the file and line or the
  flag, before any work."""
  import gin

  import t5rank.tasks  # noqa: F401  (registers the tasks and their gin-configurable data locations)
  for path in [*search_paths, GIN_ROOT]:
    gin.add_config_file_search_path(path)
  if not gin_files:
    raise SystemExit("t5rank train: give at least one --gin_file (e.g. "
                     "gin/experiments/tiny_insuranceqa_bm25_cpu.gin)")
  _quiet_gin_lookups()
  gin.clear_config()  # a process may train more than once (the demo, tests)
  try:
    gin.parse_config_files_and_bindings(gin_files, [], finalize_config=False)
    _check_macros(bindings)
    gin.parse_config_files_and_bindings([], bindings)
  except SyntaxError as e:
    raise ValueError(f"{e.filename}:{e.lineno}: gin syntax error: {e.msg}") from None
  except tokenize.TokenError as e:  # an unclosed bracket: gin's tokenizer names no file
    raise ValueError(f"gin syntax error: {e.args[0]} at line {e.args[1][0]} of "
                     f"{' or '.join(gin_files)} (or a file it includes)") from None
  except ImportError as e:  # `import x` in a gin file; gin adds the file and line on more lines
    where = re.search(r'In file "(.+)", line (\d+)', str(e))
    missing = re.match(r"No module named '([^']+)'", str(e))
    place = f"{where[1]}:{where[2]}" if where else " or ".join(gin_files)
    if not missing:  # the module is there and its own import failed
      raise ValueError(f"{place}: gin's import failed: {str(e).splitlines()[0]}") from None
    raise ValueError(f"{place}: gin cannot import {missing[1]}: no such module in this Python (a "
                     "misspelling, or a package to install)") from None
  except ValueError as e:
    required = re.match(r"(\w+)/macro\.value set to `%gin.REQUIRED`", str(e))
    if required:
      raise ValueError(f"{required[1]} is required by the gin files: give "
                       f"--gin.{required[1]}=VALUE") from None
    raise
  _check_whole_numbers(bindings)


class _GinLookups(logging.Filter):
  """Drops gin's "Path not found" errors: it logs one for every search path a file is not in
  before it finds the file in the next (ours, the package, comes after the working directory)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not (record.module == "resource_reader" and record.msg.startswith("Path not found"))


def _quiet_gin_lookups() -> None:
  root = logging.getLogger()
  if not any(isinstance(f, _GinLookups) for f in root.filters):
    root.addFilter(_GinLookups())


def _check_macros(bindings: list[str]) -> None:
  """Raises ValueError for a binding `NAME = ...` of a macro the parsed gin files do not define."""
  import gin

  defined = re.findall(r"^([A-Za-z_]\w*) = ", gin.config_str(), flags=re.M)
  for binding in bindings:
    name = binding.split("=", 1)[0].strip()
    if "." in name or "/" in name:
      continue  # a configurable's parameter: gin itself refuses an unknown one
    try:
      gin.query_parameter(f"%{name}")
    except ValueError:
      close = difflib.get_close_matches(name, defined, n=1)
      raise ValueError(f"--gin.{name}: no gin file defines the macro {name}"
                       + (f"; did you mean {close[0]}?" if close else
                          f" (they define {', '.join(sorted(defined))})")) from None


# the macros of the run gins that the trainer takes as whole numbers, and the least each may be
WHOLE_NUMBER_MACROS = {"TRAIN_STEPS": 1, "BATCH_SIZE": 1, "CHECKPOINT_EVERY": 1,
                       "KEEP_CHECKPOINTS": 1, "LOG_EVERY": 1, "EVAL_EVERY": 0, "WARMUP_STEPS": 0,
                       "QUERY_LENGTH": 1, "DOCUMENT_LENGTH": 1, "SEED": 0}


def _check_whole_numbers(bindings: list[str]) -> None:
  """Raises ValueError naming the binding when a macro of WHOLE_NUMBER_MACROS that the parsed gin
  files define is not a whole number at least its least (`--gin.TRAIN_STEPS=2.5` would train 3
  steps; `abc` would fail only once the data is ready): before any work."""
  import gin

  flags = {b.split("=", 1)[0].strip() for b in bindings}
  for name, least in WHOLE_NUMBER_MACROS.items():
    try:
      value = gin.query_parameter(f"%{name}")
    except ValueError:
      continue  # not defined by these gin files
    if type(value).__module__.startswith("gin"):
      continue  # a reference to another macro or a configurable
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
      where = f"--gin.{name}" if name in flags else f"{name} in the gin files"
      raise ValueError(f"{where}: {name} must be a whole number of at least {least}, got "
                       f"{value!r}")


def recipe(gin_files: Sequence[str], bindings: Sequence[str]) -> dict[str, str]:
  """{"gin": the resolved gin configuration with MODEL_DIR left out, "sha256": its hash}: what
  decides the trained model, wherever its directory is."""
  import gin

  gin.clear_config()
  try:
    parse_gin(list(gin_files), [*bindings, f"MODEL_DIR = {MODEL_DIR_PLACEHOLDER!r}"])
    text = gin.config_str()
  finally:
    gin.clear_config()
  return {"gin": text, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


INIT_PLACEHOLDER = "INIT_CHECKPOINT"  # in a model's recipe: the model it starts from, by its hash
TEACHER_PLACEHOLDER = "TEACHER_SCORES"  # in a distilled model's recipe: its teacher's, by hash
DATA_PACKAGES = ("insuranceqa-data",)  # the data a shipped model is trained on, by version


def model_recipe(gin_files: Sequence[str], bindings: Sequence[str], *,
                 init_sha256: Optional[str] = None, teacher_sha256: Optional[str] = None) -> dict:
  """What decides a trained model, as `recipe` plus what the gin text cannot hold: the recipe
  hash of the model it starts from (`init_sha256`: the INIT_CHECKPOINT binding's path is then
  left out, so the model's recipe is the same wherever that model lies), for a distilled model the
  hash of what made its teacher's scores (`teacher_sha256`: `t5rank.data.teacher.
  teacher_recipe_sha256`; the TEACHER_SCORES path is left out likewise) and the versions of the
  data packages.
  {"gin_sha256", "init_sha256", ["teacher_sha256",] "data", "sha256": the hash of the others}."""
  from importlib import metadata

  if init_sha256 is not None:
    bindings = [*bindings, f"INIT_CHECKPOINT = {INIT_PLACEHOLDER!r}"]
  if teacher_sha256 is not None:
    bindings = [*bindings, f"TEACHER_SCORES = {TEACHER_PLACEHOLDER!r}"]
  data = {}
  for package in DATA_PACKAGES:
    try:
      data[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      data[package] = None
  parts = {"gin_sha256": recipe(gin_files, bindings)["sha256"], "init_sha256": init_sha256,
           "data": data}
  if teacher_sha256 is not None:
    parts["teacher_sha256"] = teacher_sha256
  text = json.dumps(parts, sort_keys=True)
  return {**parts, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def train_configured(record: dict[str, str] = {}) -> dict[str, float]:
  """Runs `t5rank.training.trainer.train` with the gin configuration loaded by `parse_gin`, which
  is recorded in MODEL_DIR/config.gin (with `record`'s other files) once the trainer has checked
  that MODEL_DIR is new or holds this run; returns its last reported metrics."""
  import gin

  from t5rank.training import trainer as train_lib

  train_with_gin = gin.get_configurable(train_lib.train)  # registered by the gin files
  return train_with_gin(record={"config.gin": gin.config_str(), **record})
