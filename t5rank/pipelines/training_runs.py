"""A model of a job, by its recipe: reused when a work directory holds one trained by the same gin
recipe, resumed when its training was interrupted, otherwise trained (`prepare_model`); shared by
the InsuranceQA jobs (`t5rank.pipelines.insuranceqa`, `t5rank.pipelines.insuranceqa_cascade`)."""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence

from t5rank.reuse import cached

RECIPE_FILE = "recipe.json"


def prepare_model(model_dir: str, gin_files: Sequence[str], bindings: Sequence[str], *,
                  retrain: bool = False, extra: Optional[dict] = None) -> tuple[str, bool]:
  """(path of the final checkpoint, whether it was trained now), through the stage cache
  (`t5rank.reuse`, keyed on recipe.json): reuses `model_dir/final` when
  `model_dir/recipe.json` holds the same recipe (and `retrain` is off); resumes the run in
  `model_dir` when its recipe is the same but training did not finish; otherwise moves an existing
  `model_dir` aside to `model_dir.previous` (replacing an older one) and trains from the start.
  `extra` goes into recipe.json beside the recipe, and is part of the key."""
  import gin

  from t5rank.training import gin_config
  from t5rank.checkpoints import native

  wanted = {**gin_config.recipe(gin_files, bindings), **(extra or {})}
  final = os.path.join(model_dir, "final")

  def train() -> None:
    gin.clear_config()
    gin_config.parse_gin(list(gin_files), [*bindings, f"MODEL_DIR = {model_dir!r}"])
    try:  # the trainer records recipe.json once it has checked MODEL_DIR, before any checkpoint
      gin_config.train_configured(record={RECIPE_FILE: json.dumps(wanted, indent=1)})
    finally:
      gin.clear_config()

  reused = cached(model_dir, wanted, train, what="the model",
                  rebuild=retrain, complete=lambda _: native.is_native_checkpoint(final),
                  stamp=os.path.join(model_dir, RECIPE_FILE), records_key=True)
  return final, not reused


def best_checkpoint(model_dir: str) -> str:
  """A dual encoder run's early-stopped model; final when no evaluation ran."""
  from t5rank.checkpoints import native

  path = os.path.join(model_dir, "best")
  return path if native.is_native_checkpoint(path) else os.path.join(model_dir, "final")
