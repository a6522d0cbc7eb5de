"""The cascade's monoT5 + fusion row (BM25, the dual encoder, TK and monoT5, each over the whole
pool) fused with other per-query normalizations than the cascade's z-scores: weights tuned on the
validation cascade's questions (MRR, steps of .05), test MRR, for each work directory given.

    python benchmarks/experiments/fusion_normalizations.py runs/insuranceqa_cascade runs/seed1 \
        runs/seed2

Each argument is a `t5rank demo` work directory that ran a validation cascade (valid_cascade/, so
not one that used the shipped weights alone) and the test cascade (cascade/). Normalizations:
z-score (the cascade's), min-max, -log(rank) z-scored (ranks only), and reciprocal rank fusion
1/(60 + rank) unnormalized.
"""

import argparse
import os
import sys

import numpy as np

from t5rank.data.readers import read_qrels, read_run
from t5rank.evaluation.metrics import per_query
from t5rank.ranking import fusion

RUNS = ("00_bm25.run", "01_dual_encoder.run", "02_tk.run", "03_monot5.run")


def by_rank(run, score):
  """Each query's candidates scored by `score(rank)` (rank 1 = the run's best; ties by id)."""
  out = {}
  for qid, docs in run.items():
    order = sorted(docs, key=lambda d: (-d[1], d[0]))
    out[qid] = [(docid, score(rank)) for rank, (docid, _) in enumerate(order, 1)]
  return out


VARIANTS = (("z-score (the cascade's)", None, "zscore"),
            ("min-max", None, "minmax"),
            ("-log rank, z-scored", lambda r: -np.log(r), "zscore"),
            ("RRF, k 60", lambda r: 1.0 / (60 + r), "none"))


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("workdirs", nargs="+")
  args = parser.parse_args()
  results = {label: [] for label, _, _ in VARIANTS}
  for workdir in args.workdirs:
    valid = [read_run(os.path.join(workdir, "valid_cascade", name)) for name in RUNS]
    test = [read_run(os.path.join(workdir, "cascade", name)) for name in RUNS]
    valid_qrels = {q: d for q, d in read_qrels(os.path.join(workdir, "data_valid", "qrels.txt"))
                   .items() if q in valid[0]}
    test_qrels = {q: d for q, d in read_qrels(os.path.join(workdir, "qrels.txt")).items()
                  if q in test[0]}
    for label, score, normalization in VARIANTS:
      tune = [by_rank(r, score) for r in valid] if score else valid
      apply = [by_rank(r, score) for r in test] if score else test
      weights, _ = fusion.tune_weights(valid_qrels, tune, metric="MRR",
                                       normalization=normalization)
      fused = fusion.interpolate_runs(apply, weights, normalization=normalization)
      mrr = float(per_query(test_qrels, fused, ["MRR"])["MRR"].mean())
      results[label].append(mrr)
      print(f"{workdir}: {label}: weights {' / '.join(f'{w:g}' for w in weights)}, test MRR "
            f"{mrr:.4f}", flush=True)
  print("| normalization | " + " | ".join(args.workdirs) + " | mean |")
  print("| --- |" + " --- |" * (len(args.workdirs) + 1))
  for label, values in results.items():
    print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {np.mean(values):.4f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
