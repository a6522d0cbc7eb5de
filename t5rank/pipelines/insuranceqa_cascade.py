"""The main job as a cascade: InsuranceQA v2's test pools through BM25 → TK → monoT5 → duoT5, each
stage fused with the stages before it by weights tuned on validation queries (`t5rank demo`).

    test split ─► BM25 over each query's answer pool (k1 0.9, b 0.4), all of it (~200 answers)
    ─► the models: the shipped ones (t5rank/shipped: TK, monoT5, duoT5 from that monoT5) when the
       repository's recipes are theirs, else trained by those recipes in WORKDIR/NAME (reused and
       resumed as `t5rank train` does; `retrain` trains all three anew, duoT5 from the new monoT5)
    ─► the cascade on the first TUNE_QUERIES validation queries (WORKDIR/valid_cascade): TK over
       the pool, monoT5 over the fused top DEPTHS[1] (the pool), duoT5 over the fused top
       DEPTHS[2] (10); after each reranker the fusion of it and every stage before it (z-scores,
       weights tuned there: best MRR)
       with `distil`: the teacher, BM25 + TK + monoT5 fused with TEACHER_WEIGHTS, scores each
       training question's relevant answers and 20 of its pool's once (WORKDIR/teacher,
       `t5rank teacher`'s code), TK is trained on its score margins (Margin-MSE,
       tk_distill_insuranceqa_cpu.gin, WORKDIR/tk_distilled) and takes TK's place in the cascade
    ─► the same cascade on the test queries (WORKDIR/cascade), the validation weights unchanged
    ─► every stage and every fusion evaluated (MRR, MRR@10, P@1, nDCG@10, MAP; paired t-tests
       against BM25 and against the row before, Bonferroni), time and pairs/s per stage
       ─► table, results.json, results.png

`t5rank.pipelines.cascade` runs each cascade (its runs, reuse and resumption); this module chooses
the models and the data. The single-model job (BM25, BM25+monoT5, their hybrid) is
`t5rank.pipelines.insuranceqa`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
from typing import Optional, Sequence

from t5rank.files import atomic_write
from t5rank.pipelines.insuranceqa import (BM25_B, BM25_K1, DEFAULT_GIN_FILE, ENGLISH, RECIPE_FILE,
                                          _bm25, _export, _read_json, prepare_model)
from t5rank.pipelines.stages import Record, Stage, finite, run_stages

DEFAULT_WORKDIR = os.path.join("runs", "insuranceqa_cascade")
JOB_FILE = "cascade_job.json"  # marks a work directory as this job's (written before any work)
TUNE_QUERIES = 200
# TK and monoT5: the whole pool (~200; monoT5 over the fused top 100 instead loses a sixth of the
# relevant answers it would rank high: validation MRR .3913 against .4079); duoT5: the top 10
DEFAULT_DEPTHS = (1000, 1000, 10)


TEACHER = "teacher"  # WORKDIR/teacher: the distillation teacher's scores of the training pools
# the teacher: BM25, TK and monoT5 fused with the weights the shipped cascade's validation queries
# gave its monoT5 fusion (BENCHMARKS.md, "Distillation (Margin-MSE)")
TEACHER_MEMBERS = ("bm25", "tk", "monot5")
TEACHER_WEIGHTS = (0.05, 0.55, 0.4)
TEACHER_INFO = "teacher_members.json"  # in WORKDIR: the recipes of the models the teacher fused


@dataclasses.dataclass(frozen=True)
class Model:
  """A model of the cascade: trained by `gin_file` with `bindings` (and the job's own for monoT5),
  from the model named `init` (its INIT_CHECKPOINT), on the teacher's scores when `distilled`
  (its TEACHER_SCORES), shipped as shipped:NAME."""
  name: str
  gin_file: str
  bindings: tuple[str, ...] = ()
  init: Optional[str] = None
  distilled: bool = False


MODELS = (
    Model("tk", "gin/experiments/tk_insuranceqa_cpu.gin"),
    Model("monot5", DEFAULT_GIN_FILE),
    Model("duot5", "gin/experiments/duot5_insuranceqa_cpu.gin", init="monot5"),
)
DISTILLED_TK = Model("tk_distilled", "gin/experiments/tk_distill_insuranceqa_cpu.gin",
                     distilled=True)


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
  own = _read_json(os.path.join(model_dir, RECIPE_FILE)) or {}
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
      checkpoint = os.path.join(model_dir, "best")  # TK's: the best validation MRR@10
    source = "trained" if now else "reused"
  trained[model.name] = (wanted["sha256"], checkpoint, source == "trained")
  return checkpoint, {"source": source, "checkpoint": checkpoint,
                      "recipe_sha256": wanted["sha256"],
                      "step": native.read_metadata(checkpoint).get("step")}


def run_insuranceqa_cascade(*, workdir: Optional[str] = None,
                            num_queries: Optional[int] = None,
                            depths: Sequence[int] = DEFAULT_DEPTHS,
                            gin_bindings: Sequence[str] = (), retrain: bool = False,
                            tune_queries: int = TUNE_QUERIES, distil: bool = False,
                            teacher_queries: Optional[int] = None, progress: bool = True) -> dict:
  """Runs the job (module docstring) in `workdir` (runs/insuranceqa_cascade by default) on the first
  `num_queries` test queries (all 2,000 when None); `depths` are TK's, monoT5's and duoT5's;
  `gin_bindings` change every model's recipe (e.g. TRAIN_STEPS for a try); `distil`: the cascade's
  TK is distilled from the teacher's scores of the first `teacher_queries` training questions (all
  12,889 when None). Returns what results.json holds."""
  if len(depths) != len(MODELS) or min(depths) < 1 or tune_queries < 1 or any(
      n is not None and n < 1 for n in (num_queries, teacher_queries)):
    raise ValueError(f"{len(MODELS)} positive depths and positive numbers of queries, got "
                     f"{list(depths)}, {num_queries}, {tune_queries}, {teacher_queries}")
  workdir = workdir or DEFAULT_WORKDIR
  os.makedirs(workdir, exist_ok=True)
  with atomic_write(os.path.join(workdir, JOB_FILE)) as f:
    json.dump({"job": "t5rank demo: the InsuranceQA cascade"}, f)
  record = Record(workdir)
  record["paths"] = {"bm25.run": os.path.join(workdir, "bm25.run"),
                     "qrels.txt": os.path.join(workdir, "qrels.txt")}
  stages = [Stage(f"export: {ENGLISH.name}", functools.partial(_export, ENGLISH, num_queries)),
            Stage(f"BM25 (k1 {BM25_K1}, b {BM25_B}) over each query's answer pool",
                  functools.partial(_bm25, ENGLISH, 1000))]
  cascade = [m.name for m in MODELS]
  for model in MODELS:
    stages.append(Stage(f"model: {model.name}", functools.partial(
        _model, model, list(gin_bindings), retrain)))
  if distil:
    stages += [Stage(f"the teacher ({' + '.join(TEACHER_MEMBERS)}, weights "
                     f"{', '.join(map(str, TEACHER_WEIGHTS))}) scores the training pools",
                     functools.partial(_teacher, retrain, teacher_queries)),
               Stage(f"model: {DISTILLED_TK.name}", functools.partial(
                   _model, DISTILLED_TK, list(gin_bindings), retrain))]
    cascade[0] = DISTILLED_TK.name
  record["cascade_models"] = cascade
  stages += [
      Stage(f"the cascade on the first {tune_queries} validation queries: the fusion weights",
            functools.partial(_cascade, "valid", depths, tune_queries, progress)),
      Stage("the cascade on the test queries, the validation weights unchanged",
            functools.partial(_cascade, "test", depths, tune_queries, progress))]
  run_stages(stages, record)
  return _report(record, depths, tune_queries)


def _model(model: Model, bindings: Sequence[str], retrain: bool, record: Record):
  trained = record.values.setdefault("trained", {})
  checkpoint, info = prepare(model, record.workdir, bindings=bindings, retrain=retrain,
                             trained=trained)
  record.values.setdefault("models", {})[model.name] = info
  if info["source"] == "trained" and model.name in TEACHER_MEMBERS:
    # a teacher member retrained in place (same path, maybe the same recipe): the teacher's
    # scores, if any, are of its old weights and are made again when next asked for
    teacher_info = os.path.join(record.workdir, TEACHER_INFO)
    if os.path.exists(teacher_info):
      os.remove(teacher_info)
  return (f"{info['source'] if info['source'] != 'trained' else 'train'} {model.name}",
          checkpoint)


def _teacher(retrain: bool, queries: Optional[int], record: Record):
  """The distillation teacher's scores in WORKDIR/teacher (`t5rank teacher`'s code): reused when
  they were made from the same models (none trained since) and are intact, resumed when
  interrupted, otherwise (the old directory moved to WORKDIR/teacher.previous) made anew."""
  from t5rank.data.teacher import TEACHER_FILE, read_teacher, teacher_recipe_sha256
  from t5rank.pipelines.teacher import BM25_MEMBER, build_teacher_scores

  trained, models = record["trained"], record["models"]
  checkpoints = [BM25_MEMBER if name == BM25_MEMBER else f"shipped:{name}"
                 if models[name]["source"] == "shipped"
                 else os.path.abspath(models[name]["checkpoint"]) for name in TEACHER_MEMBERS]
  wanted = {"members": checkpoints, "weights": list(TEACHER_WEIGHTS), "queries": queries,
            "recipes": {name: trained[name][0] for name in TEACHER_MEMBERS if name in trained}}
  directory = os.path.abspath(os.path.join(record.workdir, TEACHER))
  info_path = os.path.join(record.workdir, TEACHER_INFO)
  same = _read_json(info_path) == wanted and not retrain and not any(
      trained[name][2] for name in wanted["recipes"])
  info, problem = None, None
  if same:
    try:
      info = read_teacher(directory)
    except ValueError as e:  # not finished (resumed below), or damaged (made again)
      problem = str(e) if os.path.exists(os.path.join(directory, TEACHER_FILE)) else None
  if info is not None:
    new = False
  else:
    if os.path.exists(directory) and (problem or not same):
      previous = directory + ".previous"
      print(f"{directory}: {problem or 'made from other models or questions'}; moving it to "
            f"{previous}", flush=True)
      shutil.rmtree(previous, ignore_errors=True)
      os.rename(directory, previous)
    with atomic_write(info_path) as f:
      json.dump(wanted, f, indent=1)
    info, new = build_teacher_scores(directory, checkpoints, weights=TEACHER_WEIGHTS,
                                     num_queries=queries), True
  trained[TEACHER] = (teacher_recipe_sha256(info), directory, new)
  record["teacher"] = {"directory": directory, "members": checkpoints,
                       "weights": list(TEACHER_WEIGHTS), "queries": info["queries"],
                       "pairs": info["pairs"], "recipe_sha256": trained[TEACHER][0],
                       "source": "made" if new else "reused"}
  return ("teacher scores" if new else "reused teacher scores",
          f"{info['pairs']} pairs of {info['queries']} training questions")


def _cascade(split: str, depths: Sequence[int], tune_queries: int, progress: bool,
             record: Record) -> tuple[str, str]:
  """One cascade: on the validation queries tuning the fusion weights, on the test queries with
  them."""
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run
  from t5rank.pipelines.cascade import FusionSource, RerankStage, run_cascade

  if split == "valid":
    data = ENGLISH.export(os.path.join(record.workdir, "data_valid"), "validation")
    queries = dict(list(read_queries(data["queries.tsv"]).items())[:tune_queries])
    qrels = {q: d for q, d in read_qrels(data["qrels.txt"]).items() if q in queries}
    corpus = read_corpus(data["corpus.jsonl"])
    first = record["retriever"].retrieve(queries, k=1000, candidates=read_run(data["pool.run"]))
  else:
    queries, qrels, corpus, first = (record["queries"], record["qrels"], record["corpus"],
                                     record["bm25"])
  stages = [RerankStage(record["models"][name]["checkpoint"], depth, name, fuse=True)
            for name, depth in zip(record["cascade_models"], depths)]
  weights = None if split == "valid" else FusionSource(
      weights=record["valid"]["fusion"], described="the validation cascade's weights")
  results = run_cascade(
      queries=queries, corpus=corpus, first=first, first_name="bm25", stages=stages,
      workdir=os.path.join(record.workdir, "valid_cascade" if split == "valid" else "cascade"),
      qrels=qrels, tune_fusion=split == "valid", fusion_weights=weights, progress=progress,
      print_table=split == "test")
  record[split] = results
  return f"{split} cascade", f"{len(queries)} queries"


def _report(record: Record, depths: Sequence[int], tune_queries: int) -> dict:
  """results.json and results.png (WORKDIR); returns the results."""
  from t5rank.pipelines.cascade import plot_cascade

  test = record["test"]
  results = {
      "dataset": ENGLISH.name, "queries": len(record["queries"]),
      "first_stage": {"bm25": {"k1": BM25_K1, "b": BM25_B}, "candidates": "each query's pool"},
      "depths": dict(zip(record["cascade_models"], depths)), "models": record["models"],
      **({"teacher": record["teacher"]} if "teacher" in record else {}),
      "fusion": {"tuned_on": f"the first {tune_queries} validation queries (MRR)",
                 "weights": test["fusion"],
                 "validation": record["valid"].get("evaluation")},
      "evaluation": test["evaluation"], "timings": test["timings"],
      "timings_s": record.timings, "runs": test["runs"],
      "files": {"chart": os.path.join(record.workdir, "results.png"),
                "qrels": record["paths"]["qrels.txt"]}}
  plot_cascade(test["evaluation"], results["files"]["chart"],
               f"{ENGLISH.name}, {len(record['queries'])} queries: BM25 → "
               f"{'TK distilled' if 'teacher' in record else 'TK'} (top {depths[0]}) → "
               f"monoT5 (top {depths[1]}) → duoT5 (top {depths[2]}),\neach fused with the stages "
               f"before it (weights tuned on {tune_queries} validation queries)")
  with atomic_write(os.path.join(record.workdir, "results.json")) as f:
    json.dump(finite(results), f, indent=1, allow_nan=False)
  print(f"wrote {record.workdir}/cascade/ (each stage's run), {record.workdir}/results.json, "
        f"{results['files']['chart']}; total {record.timings['total']:.1f} s", flush=True)
  return finite(results)
