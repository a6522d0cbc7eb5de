"""The paper's Table 3 in miniature: monoT5 against an encoder-only classifier, data-poor.

For each size n (n positives + n negatives of InsuranceQA's training triples: 2k or 20k examples)
and each trial, fine-tunes from the same pre-trained tiny T5 (gin/experiments/
pretrain_tiny_insuranceqa_cpu.gin's final/, --init):
  monot5      gin/experiments/tiny_insuranceqa_pretrained_cpu.gin: T5's decoder answers true/false
  classifier  gin/experiments/classifier_insuranceqa_pretrained_cpu.gin: the "monoBERT" formulation,
              the same encoder with a 2-way head on the first position (t5rank.models.classifier)
for 3 epochs on `insuranceqa_en_8k_monot5_true_false_{1k|10k}_s{trial}` (the trial seeds the
sample, the head's initialization and the order; batch 32, Adafactor 1e-2 as the tiny recipe), then
reranks the pools of the first --eval_queries validation queries
(`t5rank.training.rerank_eval.RerankEval`). Prints and writes mean MRR@10 ± 95% CI (t distribution)
per model and size, a Markdown table and a PNG (`t5rank.benchmarking`'s data-poor trials, as
benchmarks/target_words_data_poor.py).

  .venv/bin/python benchmarks/classifier_data_poor.py --init runs/pretrain_tiny/final
  .venv/bin/python benchmarks/classifier_data_poor.py --init ... --sizes 1000 --trials 3

Each finished run is appended to WORKDIR/results.jsonl (its checkpoints deleted); running the
command again skips finished runs; `--table-only` tabulates what is finished. Extra
`--gin.NAME=VALUE` flags change the recipe of both models as in `t5rank train`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Sequence

from t5rank.benchmarking import EPOCHS, plot, random_order_mrr10, read_results, run_one, table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN_FILES = {"monot5": os.path.join(REPO, "gin", "experiments", "tiny_insuranceqa_pretrained_cpu.gin"),
             "classifier": os.path.join(REPO, "gin", "experiments",
                                        "classifier_insuranceqa_pretrained_cpu.gin")}
LABELS = {"monot5": "monoT5", "classifier": "encoder-only classifier"}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--init", default=os.path.join("runs", "pretrain_tiny", "final"),
                      help="the pre-trained T5 both models start from")
  parser.add_argument("--sizes", default="1000,10000",
                      help="n per run: n positives + n negatives (1000 and/or 10000)")
  parser.add_argument("--models", default="monot5,classifier")
  parser.add_argument("--trials", type=int, default=5, help="trials (seeds 0..T-1; at most 5)")
  parser.add_argument("--eval_queries", type=int, default=50,
                      help="validation queries whose pools are reranked (default: 50)")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-2)
  parser.add_argument("--workdir", default=os.path.join("runs", "classifier_data_poor"))
  parser.add_argument("--table-only", action="store_true",
                      help="train nothing: tabulate and plot the runs finished so far")
  args, extra = parser.parse_known_args(argv)

  from t5rank.training.gin_config import gin_bindings

  bindings = gin_bindings(extra)
  sizes = [int(s) for s in args.sizes.split(",")]
  models = args.models.split(",")
  if (any(m not in GIN_FILES for m in models) or not 1 <= args.trials <= 5
      or any(n not in (1000, 10000) for n in sizes)):
    parser.error(f"models must be among {list(GIN_FILES)}, sizes 1000 or 10000 and trials 1-5 "
                 "(the registered data-poor tasks)")
  if not args.table_only and not os.path.isdir(args.init):
    parser.error(f"--init {args.init} is not a checkpoint directory: pre-train first "
                 "(gin/experiments/pretrain_tiny_insuranceqa_cpu.gin)")
  os.makedirs(args.workdir, exist_ok=True)
  results_path = os.path.join(args.workdir, "results.jsonl")
  results = read_results(results_path)
  others = sorted({r.get("init") for r in results.values()} - {os.path.abspath(args.init)})
  if others and not args.table_only:
    parser.error(f"{results_path} holds runs from another --init ({others}): use another --workdir")
  runs = [(n, m, t) for n in sizes for t in range(args.trials) for m in models]
  for i, (n, m, t) in enumerate(runs, 1):
    if (n, m, t) in results or args.table_only:
      continue
    model_dir = os.path.join(args.workdir, f"n{n}", m, f"s{t}")
    shutil.rmtree(model_dir, ignore_errors=True)  # an interrupted run starts over
    print(f"== run {i}/{len(runs)}: {2 * n} examples, {m}, trial {t} -> {model_dir}", flush=True)
    record = run_one(n, "true_false", t, model_dir=model_dir, eval_queries=args.eval_queries,
                     learning_rate=args.learning_rate, batch_size=args.batch_size,
                     bindings=[f"INIT_CHECKPOINT = {args.init!r}", *bindings],
                     gin_file=GIN_FILES[m])
    record.update(variant=m, init=os.path.abspath(args.init))
    with open(results_path, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")
    shutil.rmtree(model_dir, ignore_errors=True)
    results[(n, m, t)] = record
    print(f"== {m}, {2 * n} examples, trial {t}: MRR@10 {record['mrr@10']:.4f} "
          f"({record['seconds']:.0f} s)", flush=True)

  chosen = {k: r for k, r in results.items() if k[0] in sizes and k[1] in models
            and k[2] < args.trials}
  text, cells = table(chosen, sizes, models, LABELS, heading="model")
  chance = random_order_mrr10(args.eval_queries)
  title = (f"InsuranceQA v2, tiny T5 pre-trained with span corruption ({args.init}), then "
           f"{EPOCHS} epochs; "
           f"MRR@10 on the pools of {args.eval_queries} validation queries, mean ± 95% CI")
  footer = f"A random order of the same pools: MRR@10 {chance:.4f} (expected value)."
  with open(os.path.join(args.workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(title + "\n\n" + text + "\n\n" + footer + "\n")
  plot(cells, sizes, models, os.path.join(args.workdir, "table.png"), title, chance, LABELS)
  print(title)
  print(text)
  print(footer)
  return 0


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  sys.exit(main())
