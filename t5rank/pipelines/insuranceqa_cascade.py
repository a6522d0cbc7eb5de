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


@dataclasses.dataclass(frozen=True)
class Model:
  """A model of the cascade: trained by `gin_file` with `bindings` (and the job's own for monoT5),
  from the model named `init` (its INIT_CHECKPOINT), shipped as shipped:NAME."""
  name: str
  gin_file: str
  bindings: tuple[str, ...] = ()
  init: Optional[str] = None


MODELS = (
    Model("tk", "gin/experiments/tk_insuranceqa_cpu.gin"),
    Model("monot5", DEFAULT_GIN_FILE),
    Model("duot5", "gin/experiments/duot5_insuranceqa_cpu.gin", init="monot5"),
)


def prepare(model: Model, workdir: str, *, bindings: Sequence[str] = (), retrain: bool = False,
            trained: dict) -> tuple[str, dict]:
  """(the checkpoint of `model`, what it is: {"source": shipped | reused | trained, "recipe_sha256",
  ...}). The shipped model when its recipe is what the repository's gin files give and nothing was
  retrained; else the model of WORKDIR/NAME by that recipe (`prepare_model`: reused, resumed or
  trained). `trained` maps the names of models prepared before to their recipe hashes and
  checkpoints (a model starting from a retrained one is retrained)."""
  from t5rank.checkpoints import native, shipped
  from t5rank.training import gin_config

  init_sha256, init_path, init_new = None, None, False
  if model.init:
    init_sha256, init_path, init_new = trained[model.init]
  wanted = gin_config.model_recipe([model.gin_file], [*model.bindings, *bindings],
                                   init_sha256=init_sha256)
  ship = shipped.read_recipe(model.name) if model.name in shipped.names() else None
  model_dir = os.path.join(workdir, model.name)
  own = _read_json(os.path.join(model_dir, RECIPE_FILE)) or {}
  if (not retrain and not init_new and ship is not None and ship["sha256"] == wanted["sha256"]
      and own.get("model_sha256") != wanted["sha256"]):
    checkpoint, source = shipped.path(model.name), "shipped"
  else:
    init = [f"INIT_CHECKPOINT = {init_path!r}"] if model.init else []
    checkpoint, now = prepare_model(model_dir, [model.gin_file],
                                    [*model.bindings, *bindings, *init],
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
                            tune_queries: int = TUNE_QUERIES, progress: bool = True) -> dict:
  """Runs the job (module docstring) in `workdir` (runs/insuranceqa_cascade by default) on the first
  `num_queries` test queries (all 2,000 when None); `depths` are TK's, monoT5's and duoT5's;
  `gin_bindings` change every model's recipe (e.g. TRAIN_STEPS for a try). Returns what
  results.json holds."""
  if len(depths) != len(MODELS) or min(depths) < 1 or tune_queries < 1 or (
      num_queries is not None and num_queries < 1):
    raise ValueError(f"{len(MODELS)} positive depths and positive numbers of queries, got "
                     f"{list(depths)}, {num_queries}, {tune_queries}")
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
  for model in MODELS:
    stages.append(Stage(f"model: {model.name}", functools.partial(
        _model, model, list(gin_bindings), retrain)))
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
  return (f"{info['source'] if info['source'] != 'trained' else 'train'} {model.name}",
          checkpoint)


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
  stages = [RerankStage(info["checkpoint"], depth, name, fuse=True)
            for (name, info), depth in zip(record["models"].items(), depths)]
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
      "depths": dict(zip(record["models"], depths)), "models": record["models"],
      "fusion": {"tuned_on": f"the first {tune_queries} validation queries (MRR)",
                 "weights": test["fusion"],
                 "validation": record["valid"].get("evaluation")},
      "evaluation": test["evaluation"], "timings": test["timings"],
      "timings_s": record.timings, "runs": test["runs"],
      "files": {"chart": os.path.join(record.workdir, "results.png"),
                "qrels": record["paths"]["qrels.txt"]}}
  plot_cascade(test["evaluation"], results["files"]["chart"],
               f"{ENGLISH.name}, {len(record['queries'])} queries: BM25 → TK (top {depths[0]}) → "
               f"monoT5 (top {depths[1]}) → duoT5 (top {depths[2]}),\neach fused with the stages "
               f"before it (weights tuned on {tune_queries} validation queries)")
  with atomic_write(os.path.join(record.workdir, "results.json")) as f:
    json.dump(finite(results), f, indent=1, allow_nan=False)
  print(f"wrote {record.workdir}/cascade/ (each stage's run), {record.workdir}/results.json, "
        f"{results['files']['chart']}; total {record.timings['total']:.1f} s", flush=True)
  return finite(results)
