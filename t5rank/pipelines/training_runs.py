"""A model of a job, by its recipe: reused when a work directory holds one trained by the same gin
recipe, resumed when its training was interrupted, otherwise trained (`prepare_model`); shared by
the InsuranceQA jobs (`t5rank.pipelines.insuranceqa`, `t5rank.pipelines.insuranceqa_cascade`)."""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence

from t5rank.files import move_aside, read_json

RECIPE_FILE = "recipe.json"


def prepare_model(model_dir: str, gin_files: Sequence[str], bindings: Sequence[str], *,
                  retrain: bool = False, extra: Optional[dict] = None) -> tuple[str, bool]:
  """(path of the final checkpoint, whether it was trained now). Reuses `model_dir/final` when
  `model_dir/recipe.json` holds the same recipe (and `retrain` is off); resumes the run in
  `model_dir` when its recipe is the same but training did not finish; otherwise moves an existing
  `model_dir` aside to `model_dir.previous` (replacing an older one) and trains from the start.
  `extra` goes into recipe.json beside the recipe."""
  import gin

  from t5rank.training import gin_config
  from t5rank.checkpoints import native

  wanted = gin_config.recipe(gin_files, bindings)
  final = os.path.join(model_dir, "final")
  recipe_path = os.path.join(model_dir, RECIPE_FILE)
  saved = read_json(recipe_path)
  same = saved is not None and saved.get("sha256") == wanted["sha256"] and all(
      saved.get(k) == v for k, v in (extra or {}).items())  # e.g. the init model's recipe too
  if same and not retrain and native.is_native_checkpoint(final):
    print(f"using the model in {final} (trained by the same recipe, {wanted['sha256'][:12]})",
          flush=True)
    return final, False
  if os.path.exists(model_dir) and (retrain or not same):
    move_aside(model_dir, ("--retrain" if retrain else "it holds no recipe.json" if saved is None
                           else "it was trained by a different recipe") + "; training anew")
  elif same:
    print(f"resuming the unfinished training run in {model_dir}", flush=True)
  gin.clear_config()
  gin_config.parse_gin(list(gin_files), [*bindings, f"MODEL_DIR = {model_dir!r}"])
  try:
    gin_config.train_configured(record={RECIPE_FILE: json.dumps({**wanted, **(extra or {})},
                                                                indent=1)})
  finally:
    gin.clear_config()
  return final, True


def best_checkpoint(model_dir: str) -> str:
  """A dual encoder run's early-stopped model; final when no evaluation ran."""
  from t5rank.checkpoints import native

  path = os.path.join(model_dir, "best")
  return path if native.is_native_checkpoint(path) else os.path.join(model_dir, "final")
