"""BM25 and BM25+RM3 on InsuranceQA v2: (a) reranking each query's pool (its relevant answers and
200 retrieved negatives, ~202 candidates), (b) retrieval from the full 27,413-answer collection.

  .venv/bin/python benchmarks/bm25_insuranceqa.py [--split test] [--language en] [--out DIR]

Writes the exported files, the index and the four runs under --out (default
/tmp/t5rank_iqa_SPLIT_LANG) and prints a Markdown table: MRR, MRR@10, P@1, nDCG@10, MAP and the
paired t-test of RM3 against BM25 on MRR. The figures, beside the design notes' reference for the
English pool setting with k1=0.9 b=0.4 (Feng et al. 2015's setting): BENCHMARKS.md, "BM25 and
BM25+RM3".
"""

from __future__ import annotations

import argparse
import os
import time

from t5rank.evaluation.metrics import evaluate
from t5rank.data.insuranceqa import export_insuranceqa
from t5rank.data.readers import read_corpus, read_qrels, read_queries, read_run, write_run
from t5rank.retrieval.bm25 import RM3, open_index, retrieve

METRICS = ("MRR", "MRR@10", "P@1", "nDCG@10", "MAP")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--split", default="test")
  parser.add_argument("--language", default="en", choices=("en", "zh"))
  parser.add_argument("--out")
  parser.add_argument("--k1", type=float, default=0.9)
  parser.add_argument("--b", type=float, default=0.4)
  args = parser.parse_args()
  out = args.out or f"/tmp/t5rank_iqa_{args.split}_{args.language}"

  paths = export_insuranceqa(out, args.split, args.language)
  corpus = read_corpus(paths["corpus.jsonl"])
  queries = read_queries(paths["queries.tsv"])
  qrels = read_qrels(paths["qrels.txt"])
  pool = read_run(paths["pool.run"])
  start = time.perf_counter()
  index = open_index(corpus, os.path.join(out, "index"), k1=args.k1, b=args.b,
                     language=args.language)
  print(f"{len(queries)} queries, {len(corpus)} answers, {len(index.vocab)} terms; "
        f"index {time.perf_counter() - start:.1f}s")

  print(f"\n| setting | method | {' | '.join(METRICS)} | MRR p vs BM25 | time |")
  print("|" + " --- |" * (len(METRICS) + 4))
  for setting, candidates in (("pool", pool), ("full", None)):
    runs, seconds = {}, {}
    for method, rm3 in (("BM25", None), ("BM25+RM3", RM3())):
      start = time.perf_counter()
      runs[method] = retrieve(index, queries, k=1000, rm3=rm3, candidates=candidates)
      seconds[method] = time.perf_counter() - start
      write_run(os.path.join(out, f"{setting}_{method.lower().replace('+', '_')}.run"),
                runs[method], tag=method.lower().replace("+", "_"))
    report = evaluate(qrels, runs, METRICS)
    for entry in report["runs"]:
      p = entry.get("vs_baseline", {}).get("MRR", {}).get("p")
      figures = " | ".join(f"{entry['mean'][m]:.3f}" for m in METRICS)
      print(f"| {setting} | {entry['name']} | {figures} | {'' if p is None else f'{p:.1e}'} | "
            f"{seconds[entry['name']]:.1f}s |")


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
