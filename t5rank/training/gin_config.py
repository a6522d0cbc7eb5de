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
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
  """Loads gin files and bindings, with the repository root on the search path for includes."""
  import gin

  import t5rank.tasks  # noqa: F401  (registers the tasks and their gin-configurable data locations)
  for path in [*search_paths, REPO_ROOT]:
    gin.add_config_file_search_path(path)
  if not gin_files:
    raise SystemExit("t5rank train: give at least one --gin_file (e.g. "
                     "gin/experiments/tiny_insuranceqa_bm25_cpu.gin)")
  gin.parse_config_files_and_bindings(gin_files, bindings)


def train_configured() -> dict[str, float]:
  """Runs `t5rank.training.trainer.train` with the gin configuration loaded by `parse_gin` (recorded first in
  MODEL_DIR/config.gin); returns its last reported metrics."""
  import gin

  from t5rank.training import trainer as train_lib

  train_with_gin = gin.get_configurable(train_lib.train)  # registered by the gin files
  model_dir = gin.query_parameter("%MODEL_DIR")
  os.makedirs(model_dir, exist_ok=True)
  with open(os.path.join(model_dir, "config.gin"), "w") as f:
    f.write(gin.config_str())
  return train_with_gin()
