"""The demo's cascade (BM25 → the dual encoder → TK → monoT5 → RankT5 → duoT5, the shipped models)
with one more reranker stage after monoT5, e.g. another RankT5 model: every stage's fusion weights
tuned anew on the first 1,000 InsuranceQA validation queries (as `t5rank demo` tunes them), then
the test queries with those weights. The test cascade starts from a finished `t5rank demo` work
directory, whose first stages (BM25, the dual encoder, TK, monoT5) are reused when run from the
same checkout, so only the new stage and those after it are scored. BENCHMARKS.md's runs of it were
made before RankT5 joined the demo, from the checkout of cd09f3d, whose cascade had no RankT5
stage.

    t5rank demo      # runs/insuranceqa_cascade
    python benchmarks/experiments/cascade_plus_stage.py runs/insuranceqa_cascade \
        rankt5_s0=/tmp/rk8/rankt5_s0/final OUT

Prints the validation and the test tables; OUT/valid_cascade and OUT/cascade hold every stage's
run and results.json.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil

from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run
from t5rank.pipelines.cascade import run_cascade
from t5rank.pipelines.cascade_spec import FusionSource, RerankStage, check_stages, parse_stage
from t5rank.pipelines.insuranceqa_cascade import tuning_set
from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE
from t5rank.pipelines.insuranceqa_pools import BM25_B, BM25_K1
from t5rank.retrieval.bm25 import BM25


def stages(extra: RerankStage) -> list[RerankStage]:
  """The demo's rerankers at its depths, `extra` (all candidates unless it says) after monoT5,
  each fused with the stages before it."""
  job = ENGLISH_CASCADE
  out = []
  for (row, model), depth in zip(job.rerankers, job.depths):
    out.append(RerankStage(f"shipped:{model}", depth, row, fuse=True))
    if row == "monot5":
      out.append(RerankStage(extra.checkpoint, extra.depth or 1000, extra.name or "extra",
                             extra.reranker, fuse=True))
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("demo", help="a finished `t5rank demo` work directory")
  parser.add_argument("stage", help="[NAME=]CHECKPOINT[@DEPTH], the stage after monoT5")
  parser.add_argument("output", help="a new directory")
  args = parser.parse_args()
  job = ENGLISH_CASCADE
  try:  # every checkpoint found and every row named once (the demo's rows are taken), before work
    cascade = check_stages(stages(parse_stage(args.stage)), "bm25")
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(f"cascade_plus_stage: {e}") from None
  if os.path.exists(args.output) and os.listdir(args.output):
    raise SystemExit(f"{args.output} is not empty: give a new directory")
  os.makedirs(args.output, exist_ok=True)

  test_corpus = read_corpus(os.path.join(args.demo, "data", "corpus.jsonl"))
  retriever = BM25.open(test_corpus, os.path.join(args.output, "index"), k1=BM25_K1, b=BM25_B,
                        language=job.data.bm25_language)  # as the demo's: over all the answers
  queries, qrels, corpus, first = tuning_set(job, args.output, job.tune_queries, retriever)
  print(f"== validation: {len(queries)} queries", flush=True)
  valid = run_cascade(queries=queries, corpus=corpus, first=first, first_name="bm25",
                      stages=cascade, workdir=os.path.join(args.output, "valid_cascade"),
                      qrels=qrels, tune_fusion=True, metrics=job.metrics)

  test_dir = os.path.join(args.output, "cascade")
  os.makedirs(test_dir)
  for path in glob.glob(os.path.join(args.demo, "cascade", "0[1-3]_*.run*")):
    if "+fusion" not in path and os.path.isfile(path):  # the stages before the new one
      shutil.copy(path, test_dir)
  test_queries = read_queries(os.path.join(args.demo, "data", "queries.tsv"))
  print(f"== test: {len(test_queries)} queries, the validation cascade's weights", flush=True)
  run_cascade(queries=test_queries, corpus=test_corpus,
              first=read_run(os.path.join(args.demo, "bm25.run")), first_name="bm25",
              stages=cascade, workdir=test_dir,
              qrels=read_qrels(os.path.join(args.demo, "qrels.txt")),
              fusion_weights=FusionSource(weights=valid["fusion"],
                                          described="the validation cascade's weights"),
              metrics=job.metrics)


if __name__ == "__main__":
  main()
