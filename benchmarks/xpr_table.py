"""The cross-lingual paper's Table 3 in miniature (Chen et al. 2020): six training recipes of a tiny
bilingual monoT5 on InsuranceQA, plus English-only monoT5 and BM25, on the XPR test pools.

    .venv/bin/python benchmarks/xpr_table.py --workdir runs/xpr_table            # everything
    .venv/bin/python benchmarks/xpr_table.py --rows merged,mixed --dry-run         # the commands

Runs `t5rank` commands, each skipped when its output exists (so the script resumes where it
stopped; `t5rank train` itself resumes an interrupted run):
  1. pre-training: gin/experiments/pretrain_tiny_enzh_cpu.gin -> WORKDIR/pretrain (span corruption on
     InsuranceQA's and Tatoeba's English and Chinese text);
  2. XPI (only for the + XPI rows): gin/experiments/xpi_tiny_cpu.gin from it -> WORKDIR/xpi;
  3. each row (gin/experiments/xpr_tiny_cpu.gin, 8,000 steps of batch 32 each, the same data for
     every strategy): en_only, merged, cascade (4,000 English + 4,000 Chinese), mixed, and
     xpi_merged, xpi_cascade, xpi_mixed (the same from WORKDIR/xpi/final); and mixed_true_false,
     mixed with monoT5's true/false as target words instead of yes/no (not a row of the paper);
     de_merged and de_mixed, not rows of the paper either: the dual encoder (averaged word
     embeddings, gin/experiments/dual_encoder_xpr_cpu.gin, 3,000 steps of batch 1000) trained on
     the merged or the mixed strategy's pairs, its best checkpoint (validation in-batch P@1) kept;
     de_xpi_merged and de_xpi_mixed, the same started from a dual encoder trained first on XPI's
     sentence pairs (task xpi_enzh, 2,000 steps -> WORKDIR/de_xpi);
  4. the XPR construction of the test split (`t5rank xpr --seed SEED`), BM25 over it (character
     bigrams: the `zh` analyzer, Latin words lowercased) as the candidate order and the BM25 row;
  5. `t5rank score` of every row's final model over every pool (403,308 pairs, no windows); for the
     de_ rows, `t5rank index` of the pools' answers and `t5rank retrieve --dense --candidates`;
  6. with --hybrid N: the XPR construction of the first N validation queries, BM25 and every row
     scored on it, and `t5rank fuse --tune` of BM25 with each row (weight chosen there, applied to
     the test pools) -> WORKDIR/hybrid_ROW.run;
  7. `t5rank evaluate` with merged as the baseline (de_merged when merged did not run; paired
     t-tests, Bonferroni) on P@1 (= acc@1),
     acc@10, MRR and MAP, and the breakdown by query and answer language (`--xpr`), written to
     WORKDIR/table.txt; the same with BM25 as the baseline -> WORKDIR/table_vs_bm25.txt.
  8. with --train-seeds 0,1,2: steps 3 and 5 again for each further training seed (the order of the
     training data; the pre-trained start, the pairs and the XPR pools stay the same), as
     WORKDIR/ROW_seedK, then each row's mean and sample standard deviation over the seeds and a
     paired t-test of its per-query values averaged over the seeds against merged's (a dense
     row's against the dense row it changes, `BASELINES`; de_merged's against merged when merged
     ran), Bonferroni over the rows -> WORKDIR/seeds.txt and seeds.json. Steps 6-7
     stay those of seed 0. --seed-rows limits the rows trained again (default: all of --rows).

    .venv/bin/python benchmarks/xpr_table.py --rows merged,mixed --train-seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN = os.path.join(REPO, "gin", "experiments")
TASK = "insuranceqa_xling_{}_monot5_{}"
# row -> [(task strategy, steps, init: "pretrain" | "xpi" | "previous")]
ROWS = {
    "en_only": [("en", 8000, "pretrain")],
    "merged": [("merged", 8000, "pretrain")],
    "cascade": [("en", 4000, "pretrain"), ("zh", 4000, "previous")],
    "mixed": [("mixed", 8000, "pretrain")],
    "xpi_merged": [("merged", 8000, "xpi")],
    "xpi_cascade": [("en", 4000, "xpi"), ("zh", 4000, "previous")],
    "xpi_mixed": [("mixed", 8000, "xpi")],
    "mixed_true_false": [("mixed", 8000, "pretrain")],
}
# dense rows: the dual encoder trained on one cross-lingual strategy's pairs, from random
# embeddings or from the dual encoder trained on XPI's pairs
DENSE_ROWS = {"de_merged": ("merged", None), "de_mixed": ("mixed", None),
              "de_xpi_merged": ("merged", "xpi"), "de_xpi_mixed": ("mixed", "xpi")}
DENSE_XPI_STEPS = 2000
# over seeds, each row is compared with merged (monoT5 without XPI) except these; merged and
# de_merged are the baselines of their kind (de_merged is compared with merged when both ran)
BASELINES = {"de_mixed": "de_merged", "de_xpi_merged": "de_merged", "de_xpi_mixed": "de_mixed"}
ROOTS = ("merged", "de_merged")
ALL_ROWS = [*ROWS, *DENSE_ROWS]
TARGETS = {"mixed_true_false": "true_false"}  # the other rows: yes_no
METRICS = "P@1,acc@10,MRR,MAP"


def t5rank(*args: str) -> list[str]:
  return [os.path.join(os.path.dirname(sys.executable), "t5rank"), *args]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", default=os.path.join("runs", "xpr_table"))
  parser.add_argument("--rows", default=",".join(ALL_ROWS), help=f"among {', '.join(ALL_ROWS)}")
  parser.add_argument("--seed", type=int, default=0, help="the XPR construction's seed")
  parser.add_argument("--hybrid", type=int, default=0, metavar="N",
                      help="also fuse BM25 with each row (`t5rank fuse`), the weight tuned on the XPR "
                           "construction of the first N validation queries (default 0: no hybrids)")
  parser.add_argument("--train-seeds", default="0", metavar="K,K,...",
                      help="training seeds of the rows (default 0); seed 0's are the table's, the "
                           "others go to ROW_seedK and into the summary over seeds")
  parser.add_argument("--seed-rows", metavar="ROW,ROW,...",
                      help="with --train-seeds: the rows trained again for each further seed "
                           "(default: every row of --rows)")
  parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
  args = parser.parse_args(argv)
  rows = args.rows.split(",")
  if any(r not in ALL_ROWS for r in rows):
    parser.error(f"unknown rows {[r for r in rows if r not in ALL_ROWS]}: rows must be among "
                 f"{ALL_ROWS}")
  seed_rows = args.seed_rows.split(",") if args.seed_rows else rows
  if any(r not in rows for r in seed_rows):
    parser.error(f"--seed-rows {[r for r in seed_rows if r not in rows]} are not among --rows")
  try:
    seeds = [int(k) for k in args.train_seeds.split(",")]
  except ValueError:
    parser.error(f"--train-seeds must be comma-separated integers, not {args.train_seeds!r}")
  if seeds[0] != 0 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
    parser.error("--train-seeds must start with 0 (the table's seed), with no repeat and none negative")
  missing = sorted({baseline_of(r) for r in seed_rows if r not in ROOTS} - set(seed_rows))
  if len(seeds) > 1 and missing:
    parser.error(f"the summary over seeds compares each row with its baseline (monoT5 rows with "
                 f"merged, dense rows with de_merged, de_xpi_mixed with de_mixed): add {missing} "
                 "to --rows (and to --seed-rows if you give it)")
  w = args.workdir

  def step(done: str, command: list[str]) -> None:
    print("$ " + shlex.join(command), flush=True)
    if args.dry_run:
      return
    if os.path.exists(done):
      print(f"  (done: {done} exists)", flush=True)
      return
    subprocess.run(command, check=True)

  def train(model_dir: str, gin_file: str, *bindings: str) -> str:
    step(os.path.join(model_dir, "final", "config.json"),
         t5rank("train", f"--gin_file={os.path.join(GIN, gin_file)}", f"--gin.MODEL_DIR={model_dir!r}",
                *[f"--gin.{b}" for b in bindings]))
    return os.path.join(model_dir, "final")

  pretrain = xpi = None  # the monoT5 rows' starts; the dense rows start from random embeddings
  if any(r in ROWS for r in rows):
    pretrain = train(os.path.join(w, "pretrain"), "pretrain_tiny_enzh_cpu.gin")
  if any(ROWS[r][0][2] == "xpi" for r in rows if r in ROWS):
    xpi = train(os.path.join(w, "xpi"), "xpi_tiny_cpu.gin", f"INIT_CHECKPOINT={pretrain!r}")
  dense_xpi = None
  if any(DENSE_ROWS[r][1] == "xpi" for r in rows if r in DENSE_ROWS):
    dense_xpi = os.path.join(w, "de_xpi", "best")
    train(os.path.dirname(dense_xpi), "dual_encoder_xpr_cpu.gin",
          "MIXTURE_OR_TASK_NAME='xpi_enzh'", f"TRAIN_STEPS={DENSE_XPI_STEPS}")

  def train_row(row: str, seed: int) -> str:
    name = row if seed == 0 else f"{row}_seed{seed}"
    if row in DENSE_ROWS:
      strategy, init = DENSE_ROWS[row]
      final = train(os.path.join(w, name), "dual_encoder_xpr_cpu.gin",
                    f"MIXTURE_OR_TASK_NAME={'insuranceqa_enzh_' + strategy!r}",
                    *([f"INIT_CHECKPOINT={dense_xpi!r}"] if init else []),
                    *([f"SEED={seed}"] if seed else []))
      return os.path.join(os.path.dirname(final), "best")
    previous = None
    targets = TARGETS.get(row, "yes_no")
    for i, (strategy, steps, init) in enumerate(ROWS[row]):
      start = {"pretrain": pretrain, "xpi": xpi, "previous": previous}[init]
      previous = train(os.path.join(w, name if len(ROWS[row]) == 1 else f"{name}_{i}_{strategy}"),
                       "xpr_tiny_cpu.gin",
                       f"MIXTURE_OR_TASK_NAME={TASK.format(strategy, targets)!r}",
                       f"rerank_eval.RerankEval.targets={targets!r}",
                       f"TRAIN_STEPS={steps}", f"trainer.Loop.eval_every={steps}",
                       f"INIT_CHECKPOINT={start!r}", *([f"SEED={seed}"] if seed else []))
    return previous

  finals = {row: train_row(row, 0) for row in rows}

  data = os.path.join(w, f"xpr_test_s{args.seed}")
  step(os.path.join(data, "xpr.json"),
       t5rank("xpr", "--split", "test", "--seed", str(args.seed), "--output", data))

  def bm25_run(pool: str, output: str) -> str:
    step(output, t5rank("retrieve", "--corpus", os.path.join(pool, "corpus.jsonl"), "--queries",
                        os.path.join(pool, "queries.tsv"), "--candidates",
                        os.path.join(pool, "pool.run"), "--language", "zh", "--output", output))
    return output

  bm25 = bm25_run(data, os.path.join(w, "bm25.run"))

  def score(row: str, final: str, pool: str, run: str, output: str) -> str:
    if row in DENSE_ROWS:  # a dual encoder (train_row's best checkpoint): its cosines of the pools
      index = os.path.splitext(output)[0] + "_index"
      step(os.path.join(index, "index.json"),
           t5rank("index", "--encoder", final, "--corpus", os.path.join(pool, "corpus.jsonl"),
                  "--output", index))
      step(output, t5rank("retrieve", "--dense", index, "--queries",
                          os.path.join(pool, "queries.tsv"), "--candidates", run,
                          "--output", output))
      return output
    step(output, t5rank("score", "--checkpoint", final, "--queries",
                        os.path.join(pool, "queries.tsv"), "--corpus",
                        os.path.join(pool, "corpus.jsonl"), "--run", run, "--window", "0",
                        "--output", output))
    return output

  runs = {row: score(row, final, data, bm25, os.path.join(w, f"{row}.run"))
          for row, final in finals.items()}
  if args.hybrid:
    # BM25 matches within a language, the model across: interpolate the two (`t5rank fuse`), the
    # weight chosen on validation queries, never on the test queries it is reported on.
    valid = os.path.join(w, f"xpr_validation_s{args.seed}_q{args.hybrid}")
    step(os.path.join(valid, "xpr.json"),
         t5rank("xpr", "--split", "validation", "--seed", str(args.seed), "--queries",
                str(args.hybrid), "--output", valid))
    valid_bm25 = bm25_run(valid, os.path.join(valid, "bm25.run"))
    for row, final in finals.items():
      valid_run = score(row, final, valid, valid_bm25, os.path.join(valid, f"{row}.run"))
      runs[f"hybrid_{row}"] = os.path.join(w, f"hybrid_{row}.run")
      step(runs[f"hybrid_{row}"],
           t5rank("fuse", bm25, runs[row], "--tune", os.path.join(valid, "qrels.txt"), valid_bm25,
                  valid_run, "-o", runs[f"hybrid_{row}"]))

  def evaluate(order: list[str], output: str) -> None:
    command = t5rank("evaluate", "--qrels", os.path.join(data, "qrels.txt"), "--metrics", METRICS,
                     "--xpr", os.path.join(data, "xpr.json"), *order)
    print("$ " + shlex.join(command) + " > " + output, flush=True)
    if not args.dry_run:
      result = subprocess.run(command, check=True, capture_output=True, text=True)
      with open(output, "w", encoding="utf-8") as f:
        f.write(result.stdout)
      print(result.stdout)

  # the paper's comparison: every row against merged without XPI
  first = next((row for row in ROOTS if row in runs), None)  # the table's baseline, else BM25
  evaluate(([runs[first]] if first else []) + [bm25] +
           [r for name, r in runs.items() if name != first], os.path.join(w, "table.txt"))
  # the target "the best row beats BM25": every row against BM25
  evaluate([bm25, *runs.values()], os.path.join(w, "table_vs_bm25.txt"))
  if len(seeds) > 1:
    by_seed = {row: [runs[row]] for row in seed_rows}
    for seed in seeds[1:]:
      for row in seed_rows:
        by_seed[row].append(score(row, train_row(row, seed), data, bm25,
                                  os.path.join(w, f"{row}_seed{seed}.run")))
    if not args.dry_run:
      summary = over_seeds(os.path.join(data, "qrels.txt"), by_seed, seeds)
      with open(os.path.join(w, "seeds.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
      with open(os.path.join(w, "seeds.txt"), "w", encoding="utf-8") as f:
        f.write(format_seeds(summary))
      print(format_seeds(summary))
  return 0


def baseline_of(row: str) -> str:
  """The row each row is compared with over seeds (`BASELINES`, else merged)."""
  return BASELINES.get(row, "merged")


def over_seeds(qrels_path: str, by_seed: dict[str, list[str]], seeds: list[int]) -> dict:
  """Each row's metrics on each seed's run, their mean and sample standard deviation, and a paired
  t-test of the per-query values averaged over the seeds against its `baseline_of` row's
  (Bonferroni over the rows compared)."""
  import numpy as np

  from t5rank.data.readers import read_qrels, read_run
  from t5rank.evaluation.metrics import bonferroni, paired_t_test, per_query

  qrels = read_qrels(qrels_path)
  metrics = METRICS.split(",")
  averaged, summary = {}, {"seeds": seeds, "metrics": metrics, "baseline": "merged", "rows": {}}
  for row, paths in by_seed.items():
    tables = [per_query(qrels, read_run(path), metrics) for path in paths]
    averaged[row] = {m: np.mean([t[m] for t in tables], axis=0) for m in metrics}
    summary["rows"][row] = {}
    for m in metrics:
      per_seed = [float(t[m].mean()) for t in tables]
      summary["rows"][row][m] = {"per_seed": per_seed, "mean": float(np.mean(per_seed)),
                                 "sd": float(np.std(per_seed, ddof=1))}
  others = [row for row in by_seed if row != "merged" and baseline_of(row) in by_seed]
  for row in others:
    summary["rows"][row]["baseline"] = baseline_of(row)
    for m in metrics:
      t, p = paired_t_test(averaged[row][m], averaged[baseline_of(row)][m])
      summary["rows"][row][m].update(t=t, p=p, p_bonferroni=bonferroni(p, len(others)))
  return summary


def format_seeds(summary: dict) -> str:
  metrics = summary["metrics"]
  lines = [f"training seeds {summary['seeds']}: mean ± sample sd over the seeds; p: paired t-test "
           "of the per-query values averaged over the seeds against the row named, Bonferroni",
           "| row | " + " | ".join(metrics) + " | MRR per seed | p (MRR) |",
           "| --- |" + " --- |" * (len(metrics) + 2)]
  for row, values in summary["rows"].items():
    cells = [f"{values[m]['mean']:.4f} ± {values[m]['sd']:.4f}" for m in metrics]
    per_seed = " / ".join(f"{v:.4f}" for v in values["MRR"]["per_seed"])
    p = values["MRR"].get("p_bonferroni")
    lines.append(f"| {row} | " + " | ".join(cells) + f" | {per_seed} | "
                 + ("(baseline)" if p is None else f"{p:.2g} vs {values['baseline']}") + " |")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  sys.exit(main())
