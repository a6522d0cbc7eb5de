"""The main job as a cascade: InsuranceQA v2's test pools through BM25 → the dual encoder → TK →
monoT5 → duoT5, each stage fused with the stages before it by weights tuned on validation queries
(`t5rank demo`).

    test split ─► BM25 over each query's answer pool (k1 0.9, b 0.4), all of it (~200 answers)
    ─► the models: the shipped ones (t5rank/shipped: the dual encoder, TK, monoT5, duoT5 from that
       monoT5) when the repository's recipes are theirs, else trained by those recipes in
       WORKDIR/NAME (reused and resumed as `t5rank train` does; `retrain` trains all four anew,
       duoT5 from the new monoT5)
    ─► the fusion weights: those shipped with the models (t5rank/shipped/
       insuranceqa_cascade_weights.json, tuned on the first 1,000 validation queries) when every
       model is the shipped one, at the shipped depths and number of validation queries (not
       with `distil`); else the cascade on the first
       job.tune_queries validation queries (WORKDIR/valid_cascade): the dual encoder and TK over
       the pool, monoT5 over the fused top DEPTHS[2] (the pool), duoT5 over the fused top
       DEPTHS[3] (10); after each reranker the fusion of it and every stage before it (z-scores,
       weights tuned there: best MRR)
       with `distil`: the teacher, BM25 + TK + monoT5 fused with TEACHER_WEIGHTS, scores each
       training question's relevant answers and 20 of its pool's once (WORKDIR/teacher,
       `t5rank teacher`'s code), TK is trained on its score margins (Margin-MSE,
       tk_distill_insuranceqa_cpu.gin, WORKDIR/tk_distilled) and takes TK's place in the cascade
    ─► the same cascade on the test queries (WORKDIR/cascade), those weights unchanged
    ─► every stage and every fusion evaluated (MRR, MRR@10, P@1, nDCG@10, MAP; paired t-tests
       against BM25 and against the row before, Bonferroni), time and pairs/s per stage
       ─► table, results.json, results.png

The cross-lingual cascade (`XPR_CASCADE`, `t5rank demo --cross-lingual`) is the same job on the XPR
construction of the pools (English and Chinese queries and answers): BM25 with the `zh` analyzer,
then the bilingual dual encoder (XPI's sentence pairs, then the mixed strategy's) over the pool,
then the bilingual monoT5 (fine-tuned from the T5 pre-trained on both languages) over the fused
top DEPTHS[1], evaluated on P@1 (= acc@1), acc@10, MRR and MAP, each row also by query and answer
language. Its four models ship too (xpr_pretrained, xpr_monot5, xpr_dual_encoder_xpi,
xpr_dual_encoder); retrained, monoT5 starts from the pre-trained model and the dual encoder from
its first stage.

`t5rank.pipelines.cascade` runs each cascade (its runs, reuse and resumption); this module chooses
the models and the data. The single-model job (BM25, BM25+monoT5, their hybrid) is
`t5rank.pipelines.insuranceqa`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Optional, Sequence

from t5rank.files import atomic_write, read_json, sha256_file
from t5rank.pipelines.jobs import (BM25_B, BM25_K1, CROSS_LINGUAL, DEFAULT_GIN_FILE, ENGLISH,
                                   METRICS, TUNE_QUERIES, XPR_METRICS, Job, bm25_stage,
                                   export_stage, language_report)
from t5rank.pipelines.stage_cache import cached
from t5rank.pipelines.training_runs import RECIPE_FILE, prepare_model
from t5rank.pipelines.stages import Record, Stage, finite, run_stages

JOB_FILE = "cascade_job.json"  # marks a work directory as a cascade's (written before any work)


TEACHER = "teacher"  # WORKDIR/teacher: the distillation teacher's scores of the training pools
# the teacher: BM25, TK and monoT5 fused with the weights the shipped cascade's validation queries
# gave its monoT5 fusion (BENCHMARKS.md, "Distillation (Margin-MSE)")
TEACHER_MEMBERS = ("bm25", "tk", "monot5")
TEACHER_WEIGHTS = (0.05, 0.55, 0.4)


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
    Model("dual_encoder", "gin/experiments/dual_encoder_insuranceqa_cpu.gin"),
    Model("tk", "gin/experiments/tk_insuranceqa_cpu.gin"),
    # twice the single-model job's 8,000 steps (BENCHMARKS.md, "monoT5 trained 16,000 steps")
    Model("monot5", DEFAULT_GIN_FILE, bindings=("TRAIN_STEPS = 16000",)),
    Model("duot5", "gin/experiments/duot5_bm25_insuranceqa_cpu.gin", init="monot5"),
)
DISTILLED_TK = Model("tk_distilled", "gin/experiments/tk_distill_insuranceqa_cpu.gin",
                     distilled=True)
# the cross-lingual models: the bilingual T5 pre-trained with span corruption and the monoT5
# fine-tuned from it on the mixed strategy's pairs; the dual encoder's first stage on XPI's
# sentence pairs and its second on the mixed strategy's pairs (`t5rank demo --cross-lingual`)
XPR_MODELS = (
    Model("xpr_pretrained", CROSS_LINGUAL.pretrain_gin_file),
    Model("xpr_monot5", CROSS_LINGUAL.gin_file, init="xpr_pretrained"),
    Model("xpr_dual_encoder_xpi", CROSS_LINGUAL.dense_gin_file,
          bindings=CROSS_LINGUAL.dense_pretrain_bindings),
    Model("xpr_dual_encoder", CROSS_LINGUAL.dense_gin_file, init="xpr_dual_encoder_xpi"),
)


@dataclasses.dataclass(frozen=True)
class CascadeJob:
  """What differs between the cascades: the data (`data`: its export and BM25's analyzer), the
  models (prepared in this order, each after the one it starts from), the rerankers of the cascade
  (each a row's name and a model's), their default depths, the metrics, the work directory, the
  validation queries the fusion weights are tuned on, and the file of t5rank/shipped holding the
  weights tuned with the shipped models (`shipped_weights`)."""
  key: str
  data: Job
  models: tuple[Model, ...]
  rerankers: tuple[tuple[str, str], ...]
  depths: tuple[int, ...]
  workdir: str
  metrics: tuple[str, ...] = METRICS
  tune_queries: int = TUNE_QUERIES
  weights_file: Optional[str] = None


# the dual encoder, TK and monoT5: the whole pool (~200; monoT5 over the fused top 100 instead loses
# a sixth of the relevant answers it would rank high: validation MRR .3913 against .4079, before
# the dual encoder joined); duoT5: the top 10. The dual encoder first: validation MRR of monoT5's
# fusion .4280 against .4079 without it (BENCHMARKS.md, "The cascade: `make demo`"). The weights:
# tuned on 1,000 validation queries (on the other 1,000, MRR .4532 against .4345 with weights tuned
# on 200; BENCHMARKS.md, "Fusion weights tuned on 1,000 validation questions"), shipped
ENGLISH_CASCADE = CascadeJob(
    key="t5rank demo: the InsuranceQA cascade", data=ENGLISH, models=MODELS,
    rerankers=(("dual_encoder", "dual_encoder"), ("tk", "tk"), ("monot5", "monot5"),
               ("duot5", "duot5")),
    depths=(1000, 1000, 1000, 10), workdir=os.path.join("runs", "insuranceqa_cascade"),
    tune_queries=1000, weights_file="insuranceqa_cascade_weights.json")
# the dual encoder: the whole pool; monoT5: the fused top 100 (validation MRR of its fusion .211,
# over the pool .210, top 20 .204; half the time of the pool)
XPR_CASCADE = CascadeJob(
    key="t5rank demo --cross-lingual: the XPR cascade", data=CROSS_LINGUAL, models=XPR_MODELS,
    rerankers=(("dual_encoder", "xpr_dual_encoder"), ("monot5", "xpr_monot5")),
    depths=(1000, 100), workdir=os.path.join("runs", "insuranceqa_xpr_cascade"),
    metrics=XPR_METRICS)


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


def run_insuranceqa_cascade(*, workdir: Optional[str] = None,
                            num_queries: Optional[int] = None,
                            depths: Optional[Sequence[int]] = None,
                            gin_bindings: Sequence[str] = (), retrain: bool = False,
                            tune_queries: Optional[int] = None, distil: bool = False,
                            teacher_queries: Optional[int] = None, progress: bool = True,
                            job: CascadeJob = ENGLISH_CASCADE,
                            model_bindings: Optional[dict[str, Sequence[str]]] = None) -> dict:
  """Runs `job` (module docstring; the English cascade by default) in `workdir` (the job's when
  None) on the first `num_queries` test queries (all 2,000 when None); `depths` are the rerankers'
  (the job's when None); `gin_bindings` change every model's recipe (e.g. TRAIN_STEPS for a try),
  `model_bindings` one model's ({name: bindings}, after those); `distil` (the English cascade
  only): the cascade's TK is distilled from the teacher's scores of the first `teacher_queries`
  training questions (all 12,889 when None). Returns what results.json holds."""
  depths = tuple(depths or job.depths)
  tune_queries = job.tune_queries if tune_queries is None else tune_queries
  unknown = set(model_bindings or ()) - {m.name for m in job.models}
  if len(depths) != len(job.rerankers) or min(depths) < 1 or tune_queries < 1 or any(
      n is not None and n < 1 for n in (num_queries, teacher_queries)):
    raise ValueError(f"{len(job.rerankers)} positive depths and positive numbers of queries, got "
                     f"{list(depths)}, {num_queries}, {tune_queries}, {teacher_queries}")
  if unknown or (distil and "tk" not in {m.name for m in job.models}):
    raise ValueError(f"this cascade's models are {[m.name for m in job.models]}, got bindings "
                     f"for {sorted(unknown)}" if unknown else
                     "distillation is the English cascade's (a TK distilled in TK's place)")
  workdir = workdir or job.workdir
  os.makedirs(workdir, exist_ok=True)
  marker = os.path.join(workdir, JOB_FILE)
  found = read_json(marker)
  if found is not None and found.get("job") != job.key:
    raise ValueError(f"{workdir} is the work directory of {found.get('job')!r}, not of "
                     f"{job.key!r}: give this one its own")
  with atomic_write(marker) as f:
    json.dump({"job": job.key}, f)
  record = Record(workdir)
  record["job"] = job
  record["paths"] = {"bm25.run": os.path.join(workdir, "bm25.run"),
                     "qrels.txt": os.path.join(workdir, "qrels.txt")}
  stages = [Stage(f"export: {job.data.name}",
                  functools.partial(export_stage, job.data, num_queries)),
            Stage(f"BM25 (k1 {BM25_K1}, b {BM25_B}, analyzer {job.data.bm25_language}) over "
                  "each query's answer pool", functools.partial(bm25_stage, job.data, 1000))]
  cascade = list(job.rerankers)
  for model in job.models:
    stages.append(Stage(f"model: {model.name}", functools.partial(
        _model, model, [*gin_bindings, *(model_bindings or {}).get(model.name, ())], retrain)))
  if distil:
    stages += [Stage(f"the teacher ({' + '.join(TEACHER_MEMBERS)}, weights "
                     f"{', '.join(map(str, TEACHER_WEIGHTS))}) scores the training pools",
                     functools.partial(_teacher, retrain, teacher_queries)),
               Stage(f"model: {DISTILLED_TK.name}", functools.partial(
                   _model, DISTILLED_TK, list(gin_bindings), retrain))]
    cascade = [(DISTILLED_TK.name, DISTILLED_TK.name) if model == "tk" else (row, model)
               for row, model in cascade]
  record["cascade"] = cascade
  record["cascade_models"] = [name for _, name in cascade]
  stages += [
      Stage(f"the fusion weights: the shipped ones, else the cascade on the first {tune_queries} "
            "validation queries", functools.partial(_cascade, "valid", depths, tune_queries,
                                                    progress)),
      Stage("the cascade on the test queries, those weights unchanged",
            functools.partial(_cascade, "test", depths, tune_queries, progress))]
  run_stages(stages, record)
  return _report(record, depths, tune_queries)


def _model(model: Model, bindings: Sequence[str], retrain: bool, record: Record):
  trained = record.values.setdefault("trained", {})
  checkpoint, info = prepare(model, record.workdir, bindings=bindings, retrain=retrain,
                             trained=trained)
  record.values.setdefault("models", {})[model.name] = info
  return (f"{info['source'] if info['source'] != 'trained' else 'train'} {model.name}",
          checkpoint)


def _teacher(retrain: bool, queries: Optional[int], record: Record):
  """The distillation teacher's scores in WORKDIR/teacher (`t5rank teacher`'s code), through the
  stage cache (`t5rank.pipelines.stage_cache`) keyed on the members' weights (each checkpoint's
  manifest hash), the fusion weights and the number of questions: reused when intact, resumed
  when interrupted, otherwise (the old directory moved to WORKDIR/teacher.previous) made anew."""
  from t5rank.checkpoints import native
  from t5rank.data import teacher as teacher_data
  from t5rank.pipelines import teacher as teacher_pipeline

  trained, models = record["trained"], record["models"]
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
  record["teacher"] = {"directory": directory, "members": checkpoints,
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
    raise ValueError(f"{path}: not JSON ({e}); scripts/ship_fusion_weights.py writes it") from None
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


def _cascade(split: str, depths: Sequence[int], tune_queries: int, progress: bool,
             record: Record) -> tuple[str, str]:
  """One cascade: on the validation queries tuning the fusion weights (unless the weights shipped
  with the models are this run's), on the test queries with them."""
  from t5rank.checkpoints import shipped
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run
  from t5rank.pipelines.cascade import FusionSource, RerankStage, run_cascade

  job = record["job"]
  if split == "valid":
    found = shipped_weights(job, record["cascade"], depths, tune_queries, record["models"])
    if found is not None:
      path = os.path.join(shipped.DIRECTORY, job.weights_file)
      record["valid"] = {"fusion": found["fusion"]["weights"], "shipped": path,
                         "evaluation": found.get("validation")}
      return ("shipped fusion weights", f"{path}: tuned on the first {tune_queries} validation "
              "queries with these models")
    data = job.data.export(os.path.join(record.workdir, "data_valid"), "validation")
    queries = dict(list(read_queries(data["queries.tsv"]).items())[:tune_queries])
    qrels = {q: d for q, d in read_qrels(data["qrels.txt"]).items() if q in queries}
    corpus = read_corpus(data["corpus.jsonl"])
    first = record["retriever"].retrieve(queries, k=1000, candidates=read_run(data["pool.run"]))
  else:
    queries, qrels, corpus, first = (record["queries"], record["qrels"], record["corpus"],
                                     record["bm25"])
  stages = [RerankStage(record["models"][model]["checkpoint"], depth, row, fuse=True)
            for (row, model), depth in zip(record["cascade"], depths)]
  shipped_path = split == "test" and record["valid"].get("shipped")
  weights = None if split == "valid" else FusionSource(
      weights=record["valid"]["fusion"], described=f"the shipped weights ({shipped_path})"
      if shipped_path else "the validation cascade's weights")
  results = run_cascade(
      queries=queries, corpus=corpus, first=first, first_name="bm25", stages=stages,
      workdir=os.path.join(record.workdir, "valid_cascade" if split == "valid" else "cascade"),
      qrels=qrels, tune_fusion=split == "valid", fusion_weights=weights, progress=progress,
      print_table=split == "test", metrics=job.metrics)
  record[split] = results
  return f"{split} cascade", f"{len(queries)} queries"


def _report(record: Record, depths: Sequence[int], tune_queries: int) -> dict:
  """results.json and results.png (WORKDIR); returns the results."""
  from t5rank.pipelines.cascade import plot_cascade

  job, test = record["job"], record["test"]
  rows = [row for row, _ in record["cascade"]]
  results = {
      "dataset": job.data.name, "queries": len(record["queries"]),
      "first_stage": {"bm25": {"k1": BM25_K1, "b": BM25_B, "language": job.data.bm25_language},
                      "candidates": "each query's pool"},
      "depths": dict(zip(record["cascade_models"], depths)), "models": record["models"],
      **({"teacher": record["teacher"]} if "teacher" in record else {}),
      "fusion": {"tuned_on": f"the first {tune_queries} validation queries (MRR)",
                 "tune_queries": tune_queries,
                 **({"shipped": record["valid"]["shipped"]} if "shipped" in record["valid"]
                    else {}),
                 "weights": test["fusion"],
                 "validation": record["valid"].get("evaluation")},
      "evaluation": test["evaluation"], "timings": test["timings"],
      "timings_s": record.timings, "runs": test["runs"],
      "files": {"chart": os.path.join(record.workdir, "results.png"),
                "qrels": record["paths"]["qrels.txt"]}}
  if job.data.cross_lingual:  # each row by query and answer language
    from t5rank.data.readers import read_run
    results["languages"] = language_report(
        record["qrels"], {name: read_run(path) for name, path in test["runs"].items()},
        record["data"]["xpr.json"])
  names = {"tk_distilled": "TK distilled", "tk": "TK", "monot5": "monoT5", "duot5": "duoT5",
           "dual_encoder": "the dual encoder"}
  chain = " → ".join(f"{names.get(row, row)} (top {depth})" for row, depth in zip(rows, depths))
  plot_cascade(test["evaluation"], results["files"]["chart"],
               f"{job.data.name}, {len(record['queries'])} queries:\nBM25 → {chain},\neach fused "
               f"with the stages before it (weights tuned on {tune_queries} validation queries)",
               metric="MRR")
  with atomic_write(os.path.join(record.workdir, "results.json")) as f:
    json.dump(finite(results), f, indent=1, allow_nan=False)
  print(f"wrote {record.workdir}/cascade/ (each stage's run), {record.workdir}/results.json, "
        f"{results['files']['chart']}; total {record.timings['total']:.1f} s", flush=True)
  return finite(results)
