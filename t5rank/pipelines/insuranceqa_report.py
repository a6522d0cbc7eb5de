"""The InsuranceQA cascades' report (`t5rank demo`): once the job
(`t5rank.pipelines.insuranceqa_cascade`) has run the test cascade, results.json (the data, BM25,
the depths, the models, the teacher, the fusion weights, every row's evaluation, the timings, the
runs; for the cross-lingual cascade each row by query and answer language) and results.png (the
chart of MRR down the cascade) in WORKDIR."""

from __future__ import annotations

import json
import os
from typing import Sequence

from t5rank.files import atomic_write
from t5rank.pipelines.insuranceqa_catalogue import CascadeJobRecord
from t5rank.pipelines.insuranceqa_pools import BM25_B, BM25_K1, language_report
from t5rank.pipelines.stages import finite


def write_report(record: CascadeJobRecord, depths: Sequence[int], tune_queries: int) -> dict:
  """results.json and results.png (WORKDIR) of the cascade `record` holds, run at `depths` with
  fusion weights tuned on `tune_queries` validation queries; returns the results."""
  from t5rank.pipelines.cascade_report import plot_cascade

  job, test = record.job, record.test
  rows = [row for row, _ in record.cascade]
  results = {
      "dataset": job.data.name, "queries": len(record.queries),
      "first_stage": {"bm25": {"k1": BM25_K1, "b": BM25_B, "language": job.data.bm25_language},
                      "candidates": "each query's pool"},
      "depths": dict(zip(record.cascade_models, depths)), "models": record.models,
      **({"teacher": record.teacher} if record.teacher is not None else {}),
      "fusion": {"tuned_on": f"the first {tune_queries} validation queries (MRR)",
                 "tune_queries": tune_queries,
                 **({"shipped": record.valid["shipped"]} if "shipped" in record.valid
                    else {}),
                 "weights": test["fusion"],
                 "validation": record.valid.get("evaluation")},
      "evaluation": test["evaluation"], "timings": test["timings"],
      "timings_s": record.timings, "runs": test["runs"],
      "files": {"chart": os.path.join(record.workdir, "results.png"),
                "qrels": record.paths["qrels.txt"]}}
  if job.data.cross_lingual:  # each row by query and answer language
    from t5rank.data.readers import read_run
    results["languages"] = language_report(
        record.qrels, {name: read_run(path) for name, path in test["runs"].items()},
        record.data["xpr.json"])
  names = {"tk_distilled": "TK distilled", "tk": "TK", "monot5": "monoT5", "rankt5": "RankT5",
           "duot5": "duoT5", "dual_encoder": "the dual encoder"}
  chain = " → ".join(f"{names.get(row, row)} (top {depth})" for row, depth in zip(rows, depths))
  plot_cascade(test["evaluation"], results["files"]["chart"],
               f"{job.data.name}, {len(record.queries)} queries:\nBM25 → {chain},\neach fused "
               f"with the stages before it (weights tuned on {tune_queries} validation queries)",
               metric="MRR")
  with atomic_write(os.path.join(record.workdir, "results.json")) as f:
    json.dump(finite(results), f, indent=1, allow_nan=False)
  print(f"wrote {record.workdir}/cascade/ (each stage's run), {record.workdir}/results.json, "
        f"{results['files']['chart']}; total {record.timings['total']:.1f} s", flush=True)
  return finite(results)
