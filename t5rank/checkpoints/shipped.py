"""The trained models that ship inside the package: t5rank/shipped/NAME, each a t5rank checkpoint
with the recipe that made it, so that `t5rank demo` and a first `t5rank rerank` run without
training anything.

    shipped/NAME/           a t5rank checkpoint (config.json, metadata.json, manifest.json, params/,
                            its vocabulary or word list)
    shipped/NAME/recipe.json   the command that trained it, its gin files and bindings, the shipped
                            model it started from (`init`), the data's version, the recipe's hash
                            (`t5rank.training.gin_config.model_recipe`), when, where and how long
    shipped/NAME/slice.json    a few test queries' candidates (texts and BM25 scores) and the
                            model's scores of them when it was shipped (tests/test_shipped.py)

Wherever t5rank asks for a checkpoint (`t5rank score --checkpoint`, `t5rank rerank --stage`,
INIT_CHECKPOINT) `shipped:NAME` names one, e.g. `t5rank rerank ... --stage shipped:monot5@100`.
`scripts/ship_model.py` puts a trained model here.
"""

from __future__ import annotations

import json
import os
from typing import Optional

PREFIX = "shipped:"
DIRECTORY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "shipped")
RECIPE_FILE = "recipe.json"
SLICE_FILE = "slice.json"


def names() -> list[str]:
  """The shipped models' names."""
  if not os.path.isdir(DIRECTORY):
    return []
  return sorted(name for name in os.listdir(DIRECTORY)
                if os.path.isfile(os.path.join(DIRECTORY, name, RECIPE_FILE)))


def path(name: str) -> str:
  """The directory of shipped model `name`; ValueError naming the shipped ones otherwise."""
  if name not in names():
    raise ValueError(f"{PREFIX}{name}: no such shipped model (t5rank ships "
                     f"{', '.join(PREFIX + n for n in names()) or 'none'})")
  return os.path.join(DIRECTORY, name)


def resolve(checkpoint: Optional[str]) -> Optional[str]:
  """`shipped:NAME` -> that model's directory; any other value unchanged."""
  if isinstance(checkpoint, str) and checkpoint.startswith(PREFIX):
    return path(checkpoint[len(PREFIX):])
  return checkpoint


def manifest_sha256(name: str) -> str:
  """The hash of shipped model `name`'s manifest.json (its files' hashes): it changes when the model
  is shipped again with other parameters."""
  from t5rank.checkpoints.native import MANIFEST_FILE
  from t5rank.files import sha256_file

  return sha256_file(os.path.join(path(name), MANIFEST_FILE))


def stale_teacher_members(recipe: dict) -> list[str]:
  """The shipped models that a distilled model's teacher (its recipe.json's `teacher`, teacher.json
  as it was) names with a recipe hash other than theirs today: [] when none, or no teacher."""
  teacher = recipe.get("teacher", {}).get("teacher", {})
  stale = []
  for member in teacher.get("fusion", [teacher] if teacher else []):
    checkpoint = member.get("checkpoint") or ""
    if checkpoint.startswith(PREFIX) and (
        member.get("recipe_sha256") != read_recipe(checkpoint[len(PREFIX):])["sha256"]):
      stale.append(checkpoint)
  return stale


def read_recipe(name: str) -> dict:
  """The recipe.json of shipped model `name`."""
  with open(os.path.join(path(name), RECIPE_FILE), encoding="utf-8") as f:
    return json.load(f)
