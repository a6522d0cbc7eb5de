"""The InsuranceQA jobs' data and first stage, shared by the single-model job
(`t5rank.pipelines.insuranceqa`) and the cascades (`t5rank.pipelines.insuranceqa_cascade`): which
pools (`Job`: `ENGLISH`, the paper's setting, or `CROSS_LINGUAL`, their XPR construction), their
export to a work directory, BM25 over each query's pool, and the breakdown by query and answer
language of the cross-lingual runs."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

from t5rank.data.readers import Document, Run
from t5rank.files import atomic_write
from t5rank.pipelines.stages import Record
from t5rank.retrieval.bm25 import BM25, DEFAULT_B, DEFAULT_K1

DEFAULT_WORKDIR = os.path.join("runs", "insuranceqa")
DEFAULT_GIN_FILE = "gin/experiments/tiny_insuranceqa_bm25_cpu.gin"
XPR_SEED = 0
METRICS = ("MRR", "MRR@10", "P@1", "nDCG@10", "MAP")
XPR_METRICS = ("P@1", "acc@10", "MRR", "MAP")
BM25_K1, BM25_B = DEFAULT_K1, DEFAULT_B
TUNE_QUERIES = 200  # the validation queries a job tunes its fusion weights on


def _export_english(out_dir: str, split: str) -> dict[str, str]:
  from t5rank.data.insuranceqa import export_insuranceqa
  return export_insuranceqa(out_dir, split=split, language="en")


def _export_xpr(out_dir: str, split: str) -> dict[str, str]:
  from t5rank.data.xpr import export_xpr
  return export_xpr(out_dir, split=split, seed=XPR_SEED)


@dataclasses.dataclass(frozen=True)
class Job:
  """What differs between the jobs: the data (`export(out_dir, split)` writes queries.tsv,
  corpus.jsonl, qrels.txt and pool.run, plus xpr.json for XPR pools), BM25's analyzer, the training
  recipe (and the pre-training before it, if any), the metrics and the default work directory."""
  name: str
  export: Callable[[str, str], dict[str, str]]
  bm25_language: str
  gin_file: str
  workdir: str
  metrics: tuple[str, ...]
  pretrain_gin_file: Optional[str] = None
  cross_lingual: bool = False
  # a dual encoder trained by `dense_gin_file` after a first stage of it with
  # `dense_pretrain_bindings` added, ranking the same candidates as a fourth system (None: none)
  dense_gin_file: Optional[str] = None
  dense_pretrain_bindings: tuple[str, ...] = ()


ENGLISH = Job(name="InsuranceQA v2, test split, English (answer pools)", export=_export_english,
              bm25_language="en", gin_file=DEFAULT_GIN_FILE, workdir=DEFAULT_WORKDIR,
              metrics=METRICS)
CROSS_LINGUAL = Job(
    name=f"InsuranceQA v2, test split, XPR construction (seed {XPR_SEED}): English and Chinese",
    export=_export_xpr, bm25_language="zh", gin_file="gin/experiments/xpr_mixed_tiny_cpu.gin",
    workdir=os.path.join("runs", "insuranceqa_xpr"), metrics=XPR_METRICS,
    pretrain_gin_file="gin/experiments/pretrain_tiny_enzh_cpu.gin", cross_lingual=True,
    dense_gin_file="gin/experiments/dual_encoder_xpr_cpu.gin",
    dense_pretrain_bindings=("MIXTURE_OR_TASK_NAME = 'xpi_enzh'", "TRAIN_STEPS = 2000"))


@dataclasses.dataclass
class InsuranceQARecord(Record):
  """What the InsuranceQA jobs' stages share (each job's record adds its own): the files they
  write (`paths`, by name), the export's files (`data`: queries.tsv, corpus.jsonl, qrels.txt,
  pool.run, xpr.json), the test queries, their judgments, the answers and each query's pool
  (`export_stage`); BM25 (`retriever`), its run `bm25`, the number of its candidates (`pairs`) and
  what they are (`candidates`, a phrase for the log and results.json; `bm25_stage`)."""
  paths: dict[str, str] = dataclasses.field(default_factory=dict)
  data: dict[str, str] = dataclasses.field(default_factory=dict)
  queries: dict[str, str] = dataclasses.field(default_factory=dict)
  qrels: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
  corpus: dict[str, Document] = dataclasses.field(default_factory=dict)
  pool: Run = dataclasses.field(default_factory=dict)
  retriever: Optional[BM25] = None
  bm25: Run = dataclasses.field(default_factory=dict)
  pairs: int = 0
  candidates: str = ""


def export_stage(job: Job, num_queries: Optional[int],
                 record: InsuranceQARecord) -> tuple[str, str]:
  """The export stage: the test split's files (WORKDIR/data), its first `num_queries` queries and
  their judgments (WORKDIR/qrels.txt: what the job evaluates)."""
  from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run

  record.data = data = job.export(os.path.join(record.workdir, "data"), "test")
  queries = read_queries(data["queries.tsv"])
  record.queries = queries = dict(list(queries.items())[:num_queries])
  record.qrels = qrels = {qid: docs for qid, docs in read_qrels(data["qrels.txt"]).items()
                          if qid in queries}
  with atomic_write(record.paths["qrels.txt"]) as f:
    f.writelines(f"{qid} 0 {docid} {label}\n" for qid, docs in qrels.items()
                 for docid, label in docs.items())
  record.corpus = read_corpus(data["corpus.jsonl"])
  record.pool = read_run(data["pool.run"])
  return "export", f"{len(queries)} queries, {len(record.corpus)} answers"


def bm25_stage(job: Job, depth: int, record: InsuranceQARecord) -> tuple[str, str]:
  """The BM25 stage: its top `depth` of each query's pool (WORKDIR/bm25.run; the index in
  WORKDIR/index)."""
  from t5rank.data.readers import write_run

  queries, pool = record.queries, record.pool
  record.retriever = BM25.open(record.corpus, os.path.join(record.workdir, "index"),
                               k1=BM25_K1, b=BM25_B, language=job.bm25_language)
  record.bm25 = bm25 = record.retriever.retrieve(queries, k=depth, candidates=pool)
  write_run(record.paths["bm25.run"], bm25, tag="bm25")
  record.pairs = pairs = sum(map(len, bm25.values()))
  whole = all(len(bm25.get(qid, ())) == len(pool[qid]) for qid in queries)
  record.candidates = "each query's whole pool" if whole else f"BM25's top {depth}"
  return "bm25", f"{pairs} candidates ({record.candidates})"


def language_report(qrels, systems, xpr_json: str) -> dict:
  """{system: {"breakdown": rows, "preference": shares}} (`t5rank.evaluation.languages`) of the
  cross-lingual runs `systems`, printed."""
  from t5rank.data.xpr import read_xpr_languages
  from t5rank.evaluation import languages

  query_language = read_xpr_languages(xpr_json)
  out = {}
  for name, run in systems.items():
    rows = languages.language_breakdown(qrels, run, query_language)
    preference = languages.language_preference(qrels, run, query_language)
    print(languages.format_breakdown(name, rows, preference, 10), flush=True)
    out[name] = {"breakdown": rows, "preference": preference}
  return out
