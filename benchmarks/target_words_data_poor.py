"""The paper's Table 4 in miniature: the six target-word variants in the data-poor regime.

For each size n (n positives + n negatives of InsuranceQA's training triples: 2k or 20k examples),
each of the six target-word pairs and each trial, trains the tiny from-scratch model of
gin/experiments/tiny_insuranceqa_cpu.gin (its shape, vocabulary, term-matching heads, inputs 96,
batch 32, Adafactor) for 3 epochs on the task `insuranceqa_en_8k_monot5_{variant}_{1k|10k}_s{trial}`
(the trial is the seed of the sample, of the initialization and of the order), then reranks the
pools of the first --eval_queries validation queries with that variant's own target words
(`t5rank.training.rerank_eval.RerankEval`). Prints and writes the mean MRR@10 over trials with a 95%
confidence interval (t distribution) per variant and size, as a Markdown table and a PNG.

Not the paper's setting, and why: no pretrained T5 exists offline, so the models start from random
weights and the target words carry no prior meaning -- which is the paper's explanation of why the
words matter in this regime. The learning rate is the from-scratch recipe's (--learning_rate, 1e-2)
rather than the paper's 1e-3 for a pretrained model, and no pseudo-queries are mixed in.

  .venv/bin/python benchmarks/target_words_data_poor.py --sizes 1000             # the 2k half
  .venv/bin/python benchmarks/target_words_data_poor.py --sizes 1000,10000       # the whole table
  .venv/bin/python benchmarks/target_words_data_poor.py \
      --gin_file gin/experiments/tiny_insuranceqa_pretrained_cpu.gin \
      --workdir runs/target_words_data_poor_pretrained      # from the pre-trained tiny T5 instead

Each finished run is appended to WORKDIR/results.jsonl (its checkpoints deleted, `final/` kept);
running the command again skips finished runs and resumes an interrupted one from its checkpoint;
`--table-only` tabulates the runs finished so far (the number of trials is in each cell).
Extra `--gin.NAME=VALUE` flags change the recipe as in `t5rank train`.
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
GIN_FILE = os.path.join(REPO, "gin", "experiments", "tiny_insuranceqa_cpu.gin")
LABELS = {"true_false": "true / false", "false_true": "false / true", "hot_cold": "hot / cold",
          "apple_orange": "apple / orange", "hot_orange": "hot / orange", "ab_de": "ab / de"}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--sizes", default="1000,10000",
                      help="n per run: n positives + n negatives (1000 and/or 10000)")
  parser.add_argument("--variants", default=",".join(LABELS), help="target-word variants")
  parser.add_argument("--trials", type=int, default=5, help="trials (seeds 0..T-1; at most 5)")
  parser.add_argument("--eval_queries", type=int, default=50,
                      help="validation queries whose pools are reranked (default: 50)")
  parser.add_argument("--learning_rate", type=float, default=1e-2)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--workdir", default=os.path.join("runs", "target_words_data_poor"))
  parser.add_argument("--gin_file", default=GIN_FILE,
                      help="the recipe (default: the tiny model from random weights; "
                           "gin/experiments/tiny_insuranceqa_pretrained_cpu.gin starts from the "
                           "pre-trained one)")
  parser.add_argument("--table-only", action="store_true",
                      help="train nothing: tabulate and plot the runs finished so far")
  args, extra = parser.parse_known_args(argv)

  from t5rank.training.gin_config import gin_bindings

  bindings = gin_bindings(extra)
  sizes = [int(s) for s in args.sizes.split(",")]
  variants = args.variants.split(",")
  unknown = [v for v in variants if v not in LABELS]
  if unknown or not 1 <= args.trials <= 5 or any(n not in (1000, 10000) for n in sizes):
    parser.error(f"variants must be among {list(LABELS)}, sizes 1000 or 10000 and trials 1-5 "
                 "(the registered data-poor tasks)")
  os.makedirs(args.workdir, exist_ok=True)
  results_path = os.path.join(args.workdir, "results.jsonl")
  results = read_results(results_path)
  runs = [(n, v, t) for n in sizes for t in range(args.trials) for v in variants]
  for i, (n, v, t) in enumerate(runs, 1):
    if (n, v, t) in results or args.table_only:
      continue
    model_dir = os.path.join(args.workdir, f"n{n}", v, f"s{t}")
    print(f"== run {i}/{len(runs)}: {2 * n} examples, {v}, trial {t} -> {model_dir}", flush=True)
    record = run_one(n, v, t, model_dir=model_dir, eval_queries=args.eval_queries,
                     learning_rate=args.learning_rate, batch_size=args.batch_size,
                     bindings=bindings, gin_file=args.gin_file)
    with open(results_path, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")
    shutil.rmtree(os.path.join(model_dir, "checkpoints"), ignore_errors=True)
    results[(n, v, t)] = record
    print(f"== {v}, {2 * n} examples, trial {t}: MRR@10 {record['mrr@10']:.4f} "
          f"({record['seconds']:.0f} s)", flush=True)

  chosen = {k: r for k, r in results.items() if k[0] in sizes and k[1] in variants
            and k[2] < args.trials}
  text, cells = table(chosen, sizes, variants, LABELS)
  chance = random_order_mrr10(args.eval_queries)
  start = ("random weights" if os.path.abspath(args.gin_file) == GIN_FILE
           else os.path.basename(args.gin_file))
  title = (f"InsuranceQA v2, tiny monoT5 from {start}, {EPOCHS} epochs; MRR@10 on the pools "
           f"of {args.eval_queries} validation queries, mean ± 95% CI over trials")
  footer = f"A random order of the same pools: MRR@10 {chance:.4f} (expected value)."
  with open(os.path.join(args.workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(title + "\n\n" + text + "\n\n" + footer + "\n")
  plot(cells, sizes, variants, os.path.join(args.workdir, "table.png"), title, chance, LABELS)
  print(title)
  print(text)
  print(footer)
  print(f"wrote {results_path}, {os.path.join(args.workdir, 'table.md')}, "
        f"{os.path.join(args.workdir, 'table.png')}")
  return 0


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  sys.exit(main())
