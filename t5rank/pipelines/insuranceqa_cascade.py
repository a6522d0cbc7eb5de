"""The main job as a cascade: InsuranceQA v2's test pools through BM25 → the dual encoder → TK →
monoT5 → RankT5 → duoT5, each stage fused with the stages before it by weights tuned on validation
queries (`t5rank demo`).

    test split ─► BM25 over each query's answer pool (k1 0.9, b 0.4), all of it (~200 answers)
    ─► the models: the shipped ones (t5rank/shipped: the dual encoder, TK, monoT5, RankT5, duoT5
       from that monoT5) when the repository's recipes are theirs, else trained by those recipes
       in WORKDIR/NAME (reused and resumed as `t5rank train` does; `retrain` trains all five anew,
       duoT5 from the new monoT5)
    ─► the fusion weights: those shipped with the models (t5rank/shipped/
       insuranceqa_cascade_weights.json, tuned on the first 1,000 validation queries) when every
       model is the shipped one, at the shipped depths and number of validation queries (not
       with `distil`); else the cascade on the first
       job.tune_queries validation queries (WORKDIR/valid_cascade): the dual encoder and TK over
       the pool, monoT5 over the fused top DEPTHS[2] (the pool), RankT5 over the fused
       top DEPTHS[3] (50), duoT5 over the fused top DEPTHS[4] (10); after each reranker the
       fusion of it and every stage before it (z-scores, weights tuned there: best MRR)
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

This module is the job: it checks the arguments, marks the work directory and wires the stages
(`t5rank.pipelines.stages.run_stages`): the export and BM25 (`t5rank.pipelines.insuranceqa_pools`), the models
and the teacher, then the validation and the test cascades (`t5rank.pipelines.cascade.run_cascade`
runs each: its runs, reuse and resumption). The rest lives in three modules:

    t5rank.pipelines.insuranceqa_catalogue     which models, recipes, cascades, depths and weights
    t5rank.pipelines.insuranceqa_provisioning  shipped or trained models, the teacher, the shipped
                                               fusion weights
    t5rank.pipelines.insuranceqa_report        results.json and results.png

The single-model job (BM25, BM25+monoT5, their hybrid) is `t5rank.pipelines.insuranceqa`.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Optional, Sequence

from t5rank.files import atomic_write, read_json
from t5rank.pipelines.insuranceqa_catalogue import (DISTILLED_TK, ENGLISH_CASCADE, TEACHER_MEMBERS,
                                                    TEACHER_WEIGHTS, CascadeJob, CascadeJobRecord)
from t5rank.pipelines.insuranceqa_provisioning import model_stage, shipped_weights, teacher_stage
from t5rank.pipelines.insuranceqa_report import write_report
from t5rank.pipelines.insuranceqa_pools import BM25_B, BM25_K1, bm25_stage, export_stage
from t5rank.pipelines.stages import Stage, run_stages

JOB_FILE = "cascade_job.json"  # marks a work directory as a cascade's (written before any work)


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
  record = CascadeJobRecord(workdir, job=job)
  record.paths = {"bm25.run": os.path.join(workdir, "bm25.run"),
                     "qrels.txt": os.path.join(workdir, "qrels.txt")}
  stages = [Stage(f"export: {job.data.name}",
                  functools.partial(export_stage, job.data, num_queries)),
            Stage(f"BM25 (k1 {BM25_K1}, b {BM25_B}, analyzer {job.data.bm25_language}) over "
                  "each query's answer pool", functools.partial(bm25_stage, job.data, 1000))]
  cascade = list(job.rerankers)
  for model in job.models:
    stages.append(Stage(f"model: {model.name}", functools.partial(
        model_stage, model, [*gin_bindings, *(model_bindings or {}).get(model.name, ())], retrain)))
  if distil:
    stages += [Stage(f"the teacher ({' + '.join(TEACHER_MEMBERS)}, weights "
                     f"{', '.join(map(str, TEACHER_WEIGHTS))}) scores the training pools",
                     functools.partial(teacher_stage, retrain, teacher_queries)),
               Stage(f"model: {DISTILLED_TK.name}", functools.partial(
                   model_stage, DISTILLED_TK, list(gin_bindings), retrain))]
    cascade = [(DISTILLED_TK.name, DISTILLED_TK.name) if model == "tk" else (row, model)
               for row, model in cascade]
  record.cascade = cascade
  record.cascade_models = [name for _, name in cascade]
  stages += [
      Stage(f"the fusion weights: the shipped ones, else the cascade on the first {tune_queries} "
            "validation queries", functools.partial(_cascade, "valid", depths, tune_queries,
                                                    progress)),
      Stage("the cascade on the test queries, those weights unchanged",
            functools.partial(_cascade, "test", depths, tune_queries, progress))]
  run_stages(stages, record)
  return write_report(record, depths, tune_queries)


def tuning_set(job, workdir: str, tune_queries: int, retriever):
  """What a cascade job's fusion weights are tuned on: (queries, qrels, corpus, first-stage run) of
  the first `tune_queries` validation queries (exported under `workdir`/data_valid), the run
  `retriever`'s (BM25) over each query's answer pool."""
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run

  data = job.data.export(os.path.join(workdir, "data_valid"), "validation")
  queries = dict(list(read_queries(data["queries.tsv"]).items())[:tune_queries])
  qrels = {q: d for q, d in read_qrels(data["qrels.txt"]).items() if q in queries}
  corpus = read_corpus(data["corpus.jsonl"])
  return queries, qrels, corpus, retriever.retrieve(queries, k=1000,
                                                    candidates=read_run(data["pool.run"]))


def _cascade(split: str, depths: Sequence[int], tune_queries: int, progress: bool,
             record: CascadeJobRecord) -> tuple[str, str]:
  """One cascade: on the validation queries tuning the fusion weights (unless the weights shipped
  with the models are this run's), on the test queries with them."""
  from t5rank.checkpoints import shipped
  from t5rank.pipelines.cascade import run_cascade
  from t5rank.pipelines.cascade_spec import FusionSource, RerankStage

  job = record.job
  if split == "valid":
    found = shipped_weights(job, record.cascade, depths, tune_queries, record.models)
    if found is not None:
      path = os.path.join(shipped.DIRECTORY, job.weights_file)
      record.valid = {"fusion": found["fusion"]["weights"], "shipped": path,
                         "evaluation": found.get("validation")}
      return ("shipped fusion weights", f"{path}: tuned on the first {tune_queries} validation "
              "queries with these models")
    queries, qrels, corpus, first = tuning_set(job, record.workdir, tune_queries,
                                               record.retriever)
  else:
    queries, qrels, corpus, first = (record.queries, record.qrels, record.corpus,
                                     record.bm25)
  stages = [RerankStage(record.models[model]["checkpoint"], depth, row, fuse=True)
            for (row, model), depth in zip(record.cascade, depths)]
  shipped_path = split == "test" and record.valid.get("shipped")
  weights = None if split == "valid" else FusionSource(
      weights=record.valid["fusion"], described=f"the shipped weights ({shipped_path})"
      if shipped_path else "the validation cascade's weights")
  results = run_cascade(
      queries=queries, corpus=corpus, first=first, first_name="bm25", stages=stages,
      workdir=os.path.join(record.workdir, "valid_cascade" if split == "valid" else "cascade"),
      qrels=qrels, tune_fusion=split == "valid", fusion_weights=weights, progress=progress,
      print_table=split == "test", metrics=job.metrics)
  if split == "valid":
    record.valid = results
  else:
    record.test = results
  return f"{split} cascade", f"{len(queries)} queries"
