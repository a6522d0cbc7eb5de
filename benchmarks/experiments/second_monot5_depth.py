"""A second monoT5 after the cascade's monoT5 (the demo's recipe with another seed; tried, not kept:
BENCHMARKS.md, "A second monoT5"), at other depths, from one run of it over the whole pool: a
pair's score does not depend on the depth, so its stage over the fused top D of monoT5 + fusion is
its whole-pool run cut to those candidates, z-scored over them as `t5rank rerank` would. For each
depth the fusion weights (BM25, the dual encoder, TK, monoT5, the second monoT5) are tuned on the
first directory's judged queries (MRR, steps of .05) and applied to the second's; prints the MRR
of the second monoT5's fusion row on both.

    E=runs/valid_exp
    python benchmarks/experiments/second_monot5_depth.py $E/tune1000_m2 $E/tune_qrels.txt \\
        $E/held_w1000_m2 $E/held_qrels.txt --depths 1000,200,150,100,75,50,30,20

Each directory is a `t5rank rerank` output whose stages 01-04 are the dual encoder, TK, monoT5 and
the second monoT5 over the whole pool, each fused (`--stage monot5b=CHECKPOINT@1000 --fuse`; the
commands are in HISTORY.md, "A second monoT5 in the cascade, tried"). Depth 1000 reproduces
the cascade's own fusion row.
"""

import argparse
import os

import numpy as np

from t5rank.data.readers import read_qrels, read_run
from t5rank.evaluation.metrics import per_query
from t5rank.pipelines.cascade import scored_zscores
from t5rank.ranking import fusion
from t5rank.ranking.candidates import append_below, split_at_depth

BEFORE = ("00_bm25.run", "01_dual_encoder.run", "02_tk.run", "03_monot5.run")


def read_runs(directory: str):
  """(the runs of BM25, the dual encoder, TK and monoT5; monoT5 + fusion; the second monoT5)."""
  def read(name):
    return read_run(os.path.join(directory, name))

  return [read(name) for name in BEFORE], read("03_monot5+fusion.run"), read("04_monot5b.run")


def fusable(runs, depth: int):
  """(each run's z-scores over the second monoT5's top `depth`, the candidates below it)."""
  before, reranked, second = runs
  top, rest = split_at_depth(reranked, depth)
  cut = {}
  for qid, docs in top.items():
    kept = {docid for docid, _ in docs}
    cut[qid] = [pair for pair in second[qid] if pair[0] in kept]
  return [scored_zscores(run, top) for run in before] + [scored_zscores(cut, top)], rest


def mrr(qrels, zscores, rest, weights) -> float:
  fused = append_below(fusion.interpolate_runs(zscores, weights, normalization="none"), rest)
  return float(np.mean(per_query(qrels, fused, ["MRR"])["MRR"]))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("tune_dir")
  p.add_argument("tune_qrels")
  p.add_argument("eval_dir")
  p.add_argument("eval_qrels")
  p.add_argument("--depths", default="1000,100,50")
  args = p.parse_args()
  tune_qrels, eval_qrels = read_qrels(args.tune_qrels), read_qrels(args.eval_qrels)
  tune_runs, eval_runs = read_runs(args.tune_dir), read_runs(args.eval_dir)
  print("| depth | weights (BM25 / DE / TK / monoT5 / second) | MRR, tuning queries "
        "| MRR, others |")
  print("| --- | --- | --- | --- |")
  for depth in (int(d) for d in args.depths.split(",")):
    tune, tune_rest = fusable(tune_runs, depth)
    weights, _ = fusion.tune_weights(tune_qrels, tune, metric="MRR", normalization="none")
    held, held_rest = fusable(eval_runs, depth)
    print(f"| {depth} | {' / '.join(f'{w:g}' for w in weights)} | "
          f"{mrr(tune_qrels, tune, tune_rest, weights):.4f} | "
          f"{mrr(eval_qrels, held, held_rest, weights):.4f} |", flush=True)


if __name__ == "__main__":
  main()
