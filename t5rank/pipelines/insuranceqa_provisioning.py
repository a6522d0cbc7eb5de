"""The InsuranceQA cascades' models, teacher and fusion weights (`t5rank demo`): each model of
the catalogue (`t5rank.pipelines.insuranceqa_catalogue`) the shipped one when the repository's
recipe is its own, else trained by that recipe in WORKDIR/NAME (`prepare`); the distillation
teacher's scores in WORKDIR/teacher (`teacher_stage`); the fusion weights shipped with the models
when they are a run's (`shipped_weights`). `model_stage` and `teacher_stage` are stages of the job
(`t5rank.pipelines.insuranceqa_cascade`)."""

from __future__ import annotations

import os
from typing import Optional, Sequence

from t5rank.files import read_json, sha256_file
from t5rank.pipelines.insuranceqa_catalogue import (TEACHER_MEMBERS, TEACHER_WEIGHTS, CascadeJob,
                                                    CascadeJobRecord, Model)
from t5rank.reuse import cached
from t5rank.pipelines.training_runs import RECIPE_FILE, prepare_model

TEACHER = "teacher"  # WORKDIR/teacher: the distillation teacher's scores of the training pools


def prepare(model: Model, workdir: str, *, bindings: Sequence[str] = (), retrain: bool = False,
            trained: dict) -> tuple[str, dict]:
  """(the checkpoint of `model`, what it is: {"source": shipped | reused | trained, "recipe_sha256",
  ...}). The shipped model when its recipe is what the repository's gin files give and nothing was
  retrained; else the model of WORKDIR/NAME by that recipe (`prepare_model`: reused, resumed or
  trained). `trained` maps the names of models prepared before to their recipe hashes and
  checkpoints, and TEACHER to the teacher's recipe hash and directory (a model starting from a
  retrained one, or distilled from new teacher scores, is retrained)."""
  from t5rank.checkpoints import native, shipped
  from t5rank.training import gin_config

  init_sha256, init_path, init_new = None, None, False
  if model.init:
    init_sha256, init_path, init_new = trained[model.init]
  teacher_sha256, teacher = None, []
  if model.distilled:
    teacher_sha256, teacher_dir, teacher_new = trained[TEACHER]
    teacher, init_new = [f"TEACHER_SCORES = {teacher_dir!r}"], init_new or teacher_new
  wanted = gin_config.model_recipe([model.gin_file], [*model.bindings, *bindings],
                                   init_sha256=init_sha256, teacher_sha256=teacher_sha256)
  ship = shipped.read_recipe(model.name) if model.name in shipped.names() else None
  model_dir = os.path.join(workdir, model.name)
  own = read_json(os.path.join(model_dir, RECIPE_FILE)) or {}
  if (not retrain and not init_new and ship is not None and ship["sha256"] == wanted["sha256"]
      and own.get("model_sha256") != wanted["sha256"]):
    checkpoint, source = shipped.path(model.name), "shipped"
  else:
    init = [f"INIT_CHECKPOINT = {init_path!r}"] if model.init else []
    checkpoint, now = prepare_model(model_dir, [model.gin_file],
                                    [*model.bindings, *bindings, *init, *teacher],
                                    retrain=retrain or init_new,
                                    extra={"model_sha256": wanted["sha256"]})
    if native.is_native_checkpoint(os.path.join(model_dir, "best")):
      checkpoint = os.path.join(model_dir, "best")  # TK's, the dual encoder's: best on validation
    source = "trained" if now else "reused"
  trained[model.name] = (wanted["sha256"], checkpoint, source == "trained")
  return checkpoint, {"source": source, "checkpoint": checkpoint,
                      "recipe_sha256": wanted["sha256"],
                      "step": native.read_metadata(checkpoint).get("step")}


def model_stage(model: Model, bindings: Sequence[str], retrain: bool,
                record: CascadeJobRecord) -> tuple[str, str]:
  """The stage preparing `model` (`prepare`, with `bindings`) in the record's work directory: what
  it is goes to `record.models`, its recipe hash to `record.trained`; returns (the name its time
  is kept under, its checkpoint)."""
  checkpoint, info = prepare(model, record.workdir, bindings=bindings, retrain=retrain,
                             trained=record.trained)
  record.models[model.name] = info
  return (f"{info['source'] if info['source'] != 'trained' else 'train'} {model.name}",
          checkpoint)


def teacher_stage(retrain: bool, queries: Optional[int], record: CascadeJobRecord):
  """The distillation teacher's scores in WORKDIR/teacher (`t5rank teacher`'s code), through the
  stage cache (`t5rank.reuse`) keyed on the members' weights (each checkpoint's
  manifest hash), the fusion weights and the number of questions: reused when intact, resumed
  when interrupted, otherwise (the old directory moved to WORKDIR/teacher.previous) made anew."""
  from t5rank.checkpoints import native
  from t5rank.data import teacher as teacher_data
  from t5rank.pipelines import teacher as teacher_pipeline

  trained, models = record.trained, record.models
  bm25 = teacher_pipeline.BM25_MEMBER
  checkpoints = [bm25 if name == bm25 else f"shipped:{name}"
                 if models[name]["source"] == "shipped"
                 else os.path.abspath(models[name]["checkpoint"]) for name in TEACHER_MEMBERS]
  # the members by their weights (the hash of each checkpoint's manifest: its files' hashes; a
  # file over files.HASH_LIMIT by its size only), so that a member retrained in place, at the
  # same path and by the same recipe, is seen
  key = {"members": checkpoints, "weights": list(TEACHER_WEIGHTS), "queries": queries,
         "manifests": {name: sha256_file(os.path.join(models[name]["checkpoint"],
                                                      native.MANIFEST_FILE))
                       for name in TEACHER_MEMBERS if name in models}}
  directory = os.path.abspath(os.path.join(record.workdir, TEACHER))

  def complete(path: str) -> bool:  # teacher.json describes intact scores; none yet: unfinished
    try:
      teacher_data.read_teacher(path)
    except ValueError:
      if os.path.exists(os.path.join(path, teacher_data.TEACHER_FILE)):
        raise  # damaged: made anew
      return False
    return True

  def build() -> None:
    teacher_pipeline.build_teacher_scores(directory, checkpoints, weights=TEACHER_WEIGHTS,
                                          num_queries=queries)

  new = not cached(directory, key, build, what="the teacher's scores", rebuild=retrain,
                   complete=complete)
  info = teacher_data.read_teacher(directory)
  trained[TEACHER] = (teacher_data.teacher_recipe_sha256(info), directory, new)
  record.teacher = {"directory": directory, "members": checkpoints,
                       "weights": list(TEACHER_WEIGHTS), "queries": info["queries"],
                       "pairs": info["pairs"], "recipe_sha256": trained[TEACHER][0],
                       "source": "made" if new else "reused"}
  return ("teacher scores" if new else "reused teacher scores",
          f"{info['pairs']} pairs of {info['queries']} training questions")


def weights_identity(job: CascadeJob, cascade: Sequence[tuple[str, str]],
                     depths: Sequence[int], tune_queries: int, models: dict) -> dict:
  """What fusion weights shipped with `job`'s models record of the run that tuned them, and what a
  run must share to use them: the job, the rows and their models, the depths, the number of
  validation queries, each model's recipe hash and the hash of its shipped files (manifest)."""
  from t5rank.checkpoints import shipped

  names = [model for _, model in cascade]
  return {"job": job.key, "cascade": [list(pair) for pair in cascade], "depths": list(depths),
          "tune_queries": tune_queries,
          "recipes": {name: models[name]["recipe_sha256"] for name in names},
          "manifests": {name: shipped.manifest_sha256(name) for name in names}}


def shipped_weights(job: CascadeJob, cascade: Sequence[tuple[str, str]], depths: Sequence[int],
                    tune_queries: int, models: dict) -> Optional[dict]:
  """The fusion weights shipped with `job`'s models (t5rank/shipped/JOB.weights_file,
  scripts/ship_fusion_weights.py) when they are this run's: every model the shipped one and the
  same `weights_identity`; None otherwise (the validation cascade tunes them). ValueError when the
  file is there but is not such weights."""
  from t5rank.checkpoints import shipped

  if not job.weights_file:
    return None
  path = os.path.join(shipped.DIRECTORY, job.weights_file)
  try:
    found = read_json(path)
  except ValueError as e:
    raise ValueError(f"{e}; scripts/ship_fusion_weights.py writes it") from None
  if found is None:
    return None
  if not (isinstance(found, dict) and isinstance(found.get("fusion"), dict)
          and isinstance(found["fusion"].get("weights"), dict)):
    raise ValueError(f"{path}: holds no fusion weights; scripts/ship_fusion_weights.py writes it")
  if (found.get("cascade") != [list(pair) for pair in cascade]
      or any(models[name]["source"] != "shipped" for _, name in cascade)):
    return None  # other models (before hashing their files)
  identity = weights_identity(job, cascade, depths, tune_queries, models)
  if any(found.get(key) != value for key, value in identity.items()):
    return None
  return found
