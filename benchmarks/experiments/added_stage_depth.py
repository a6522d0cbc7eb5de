"""The stage that `cascade_plus_stage.py` added after monoT5, as if it had reranked only the top K
of monoT5's fusion: its fusion row recomputed from that run's files for each K (the stage's scores
of those K candidates, every run's z-scores over the candidates its stage scored, weights tuned on
the validation queries as the cascade tunes them, the rest kept below), validation and test MRR.
What a smaller depth would cost before paying for its scoring; duoT5 after it is not rerun.

    python benchmarks/experiments/cascade_plus_stage.py runs/insuranceqa_cascade \
        rankt5_s0=/tmp/rk32/rankt5_s0/final /tmp/rk32/casc_s0
    python benchmarks/experiments/added_stage_depth.py /tmp/rk32/casc_s0 runs/insuranceqa_cascade
"""

from __future__ import annotations

import argparse
import glob
import os

from t5rank.data.readers import read_qrels, read_run
from t5rank.evaluation.metrics import per_query
from t5rank.pipelines.cascade import scored_zscores
from t5rank.ranking import fusion
from t5rank.ranking.candidates import append_below, split_at_depth

BEFORE = ("00_bm25", "01_dual_encoder", "02_tk", "03_monot5")  # the stages fused with it


def read_runs(directory: str, stage: str) -> tuple[list, dict, dict]:
  """(the runs fused with the stage, monoT5's fusion, the stage's run) of one cascade directory."""
  def read(name):
    return read_run(os.path.join(directory, f"{name}.run"))
  return [read(name) for name in BEFORE], read("03_monot5+fusion"), read(stage)


def fused_at_depth(runs_read, depth: int, qrels=None, weights=None):
  """(weights, run) of the added stage's fusion row had it scored only the top `depth` of
  monoT5's fusion (`runs_read`: `read_runs`'s): weights tuned on `qrels` unless given."""
  own, before, scored = runs_read
  top, rest = split_at_depth(before, depth)
  scored = {q: [(d, s) for d, s in scored[q] if d in {x for x, _ in top[q]}] for q in top}
  runs = [scored_zscores(run, top) for run in own] + [scored_zscores(scored, top)]
  if weights is None:
    weights, _ = fusion.tune_weights(qrels, runs, metric="MRR", normalization="none")
  return weights, append_below(fusion.interpolate_runs(runs, weights, normalization="none"), rest)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("output", help="cascade_plus_stage.py's output directory")
  parser.add_argument("demo", help="the `t5rank demo` work directory it ran from (test qrels)")
  parser.add_argument("--depths", default="1000,100,50,30", help="comma-separated depths")
  args = parser.parse_args()
  valid_dir, test_dir = (os.path.join(args.output, d) for d in ("valid_cascade", "cascade"))
  (stage,) = [os.path.basename(p)[:-4] for p in glob.glob(os.path.join(valid_dir, "04_*.run"))
              if "+fusion" not in p]
  first = read_run(os.path.join(valid_dir, "00_bm25.run"))
  valid_qrels = {q: d for q, d in read_qrels(os.path.join(args.output, "data_valid",
                                                          "qrels.txt")).items() if q in first}
  test_qrels = read_qrels(os.path.join(args.demo, "qrels.txt"))
  print(f"| depth of {stage} | weights (bm25, dual encoder, tk, monot5, {stage[3:]}) | "
        "validation MRR | test MRR |\n| --- | --- | --- | --- |")
  valid_runs, test_runs = read_runs(valid_dir, stage), read_runs(test_dir, stage)  # read once
  for depth in (int(d) for d in args.depths.split(",")):
    weights, valid = fused_at_depth(valid_runs, depth, qrels=valid_qrels)
    _, test = fused_at_depth(test_runs, depth, weights=weights)
    print(f"| {depth} | {', '.join(f'{float(w):.2f}' for w in weights)} | "
          f"{per_query(valid_qrels, valid, ['MRR'])['MRR'].mean():.4f} | "
          f"{per_query(test_qrels, test, ['MRR'])['MRR'].mean():.4f} |", flush=True)


if __name__ == "__main__":
  main()
