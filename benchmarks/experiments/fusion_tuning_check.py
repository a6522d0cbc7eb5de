"""Fusion tuning on MRR (`fusion.tune_weights`, every weighting at once) against trec_eval on each
weighting's fused run (`per_query`, the way tuning went before), on a cascade's own runs: every
weighting's value must be the same float, and the time each way.

    python benchmarks/experiments/fusion_tuning_check.py runs/insuranceqa_cascade/valid_cascade \\
        runs/insuranceqa_cascade/data_valid/qrels.txt

The first argument is a `t5rank rerank --tune-fusion` work directory (the demo's validation
cascade), the second its judgments (restricted here to the cascade's queries, as the demo does).
"""

import argparse
import json
import os
import sys
import time

from t5rank.data.readers import read_qrels, read_run
from t5rank.evaluation.metrics import per_query
from t5rank.ranking import fusion
from t5rank.ranking.candidates import split_at_depth


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("workdir")
  parser.add_argument("qrels")
  args = parser.parse_args()
  with open(os.path.join(args.workdir, "results.json")) as f:
    results = json.load(f)
  order = list(results["runs"])  # every row in the cascade's order
  runs = {name: read_run(os.path.join(args.workdir, os.path.basename(path)))
          for name, path in results["runs"].items()}
  qrels = {q: docs for q, docs in read_qrels(args.qrels).items() if q in runs[order[0]]}
  same = True
  for row, entry in results["fusion"].items():
    before = order[order.index(row[:-len("+fusion")]) - 1]  # the ranking the stage reranked
    top, _ = split_at_depth(runs[before], entry["members"][-1]["depth"])
    kept = {q: {d for d, _ in docs} for q, docs in top.items()}
    members = [{q: [(d, s) for d, s in runs[name][q] if d in kept[q]] for q in top}
               for name in entry["runs"]]
    start = time.perf_counter()
    best, values = fusion.tune_weights(qrels, members, metric="MRR")
    fast = time.perf_counter() - start
    start = time.perf_counter()
    fusable = fusion._Fusable(members)
    slow = {g: float(per_query(qrels, fusable.fuse(g), ["MRR"])["MRR"].mean()) for g in values}
    slow_seconds = time.perf_counter() - start
    same &= values == slow
    print(f"{row}: {len(values)} weightings, every value the same: {values == slow}; best "
          f"{list(best)} (the cascade's {entry['weights']}); {fast:.1f} s, with trec_eval on each "
          f"{slow_seconds:.1f} s", flush=True)
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
