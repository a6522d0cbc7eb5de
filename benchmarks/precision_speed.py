"""The whole `t5rank score` command in float32 and in bfloat16, beside this machine's limit.

    .venv/bin/python benchmarks/precision_speed.py --write

One model config (default t5_small) with random T5-like weights from a fixed seed, written as a
t5rank checkpoint; the first `--pairs` InsuranceQA v2 test pairs (16 candidates of each question);
`t5rank score --window 0` run as a user runs it, in a process of its own, once per dtype to fill
the compilation cache, then `--repeats` times per dtype, alternating. For each dtype:
- seconds: the median wall clock of the whole command (start-up, loading, tokenizing, scoring,
  writing), and pairs/s from it;
- Kendall tau of its scores against float32's over all pairs (scipy's tau-b), and the largest
  difference of log P(true);
- the limit: this machine's matrix-product rate measured in the same run (the best of 5 products
  of 2048 x 2048 matrices: float32, and bfloat16 operands with a float32 result, as the network's
  bfloat16 products are) divided by the useful FLOPs per pair
  (`t5rank.benchmarking.monot5_flops` of each pair's real length, without the fold and without
  padding: what the standard computation must execute), and the fraction of it reached. Past 100%
  means fewer FLOPs executed than the standard computation's (the folded decoder step).
A second table counts, for the same pairs, the FLOPs executed with padding (each batch's rows at its
padded length, as `t5rank score` batches them on 2 CPU devices) over the useful ones, and the
shapes compiled, for length buckets of 64 (the default), 32, 16 and 8 tokens.
`--write` puts the tables into BENCHMARKS.md under "## bfloat16 and the machine's limit".
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from t5rank.benchmarking import (insuranceqa_candidates, machine, matmul_peak,  # noqa: E402
                                 monot5_flops, write_section)
from t5rank.models.batching import bucket_batches  # noqa: E402

SECTION = "## bfloat16 and the machine's limit"


def write_inputs(directory: str, num_pairs: int) -> tuple[str, str, str]:
  """queries.tsv, corpus.tsv and candidates.run of the first `num_pairs` InsuranceQA pairs."""
  queries, corpus, candidates = insuranceqa_candidates(num_pairs)
  paths = [os.path.join(directory, name) for name in ("queries.tsv", "corpus.tsv", "candidates.run")]
  with open(paths[0], "w") as f:
    f.writelines(f"{qid}\t{text}\n" for qid, text in queries.items())
  with open(paths[1], "w") as f:
    f.writelines(f"{docid}\t{doc.text}\n" for docid, doc in corpus.items())
  with open(paths[2], "w") as f:
    for qid, docs in candidates.items():
      f.writelines(f"{qid} Q0 {docid} {rank} {-rank} bm25\n"
                   for rank, (docid, _) in enumerate(docs, 1))
  return paths[0], paths[1], paths[2]


def useful_flops(checkpoint: str, queries: str, corpus: str, run: str
                 ) -> tuple[float, int, list[str]]:
  """(mean useful FLOPs per pair, pairs, the padding table's rows): `monot5_flops` (unfolded) of
  each pair's real length, as `t5rank score --window 0` tokenizes it."""
  from t5rank.checkpoints.resolved import resolve
  from t5rank.data.readers import read_corpus, read_queries, read_run
  from t5rank.models.loading import load_reranker
  from t5rank.ranking.candidates import candidate_passages

  reranker, _ = load_reranker(resolve(checkpoint))
  query_texts, documents = read_queries(queries), read_corpus(corpus)
  pairs, passages = candidate_passages(
      {qid: [(d, s) for d, s in docs] for qid, docs in read_run(run).items()}, documents,
      window=0, stride=5, language="en")
  ids = reranker.encode([query_texts[p.qid] for p in pairs],
                        [passages[p.docid][p.part] for p in pairs])
  flops = [monot5_flops(reranker.config, len(x), folded=False) for x in ids]
  useful = sum(monot5_flops(reranker.config, len(x)) for x in ids)  # as executed: folded
  rows = []
  for step in (64, 32, 16, 8):
    batches = bucket_batches(ids, batch_tokens=2 * 2048, max_length=reranker.max_length,
                             row_multiple=2, step=step)
    executed = sum(monot5_flops(reranker.config, b.arrays[0].shape[1]) * b.arrays[0].shape[0]
                   for b in batches)
    shapes = len({b.arrays[0].shape for b in batches})
    rows.append(f"| {step} | {executed / useful:.3f} | {shapes} |")
  return float(np.mean(flops)), len(pairs), rows


def read_scores(path: str) -> dict[tuple[str, str], float]:
  scores = {}
  with open(path) as f:
    for line in f:
      qid, _, docid, _, score, _ = line.split()
      scores[(qid, docid)] = float(score)
  return scores


def score_command(checkpoint: str, inputs: tuple[str, str, str], dtype: str, out: str) -> float:
  """Seconds of one `t5rank score` run (raises on failure)."""
  queries, corpus, run = inputs
  argv = [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", checkpoint, "--queries",
          queries, "--corpus", corpus, "--run", run, "--window", "0", "--dtype", dtype,
          "-o", out]
  start = time.perf_counter()
  result = subprocess.run(argv, capture_output=True, text=True)
  seconds = time.perf_counter() - start
  if result.returncode:
    raise SystemExit(f"t5rank score failed:\n{result.stderr[-3000:]}")
  return seconds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=__doc__.split("\n\n", 2)[2])
  parser.add_argument("--config", default="t5_small", help="model config (t5rank.models.config)")
  parser.add_argument("--pairs", type=int, default=1008, help="InsuranceQA test pairs")
  parser.add_argument("--repeats", type=int, default=3, help="timed runs per dtype")
  parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
  parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
  args = parser.parse_args()

  from scipy.stats import kendalltau

  from t5rank.models.config import get_config
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.testing import random_params

  dtypes = ("float32", "bfloat16")
  with tempfile.TemporaryDirectory() as work:
    config = get_config(args.config, dropout_rate=0.0)
    checkpoint = os.path.join(work, "model")
    save_checkpoint(checkpoint, random_params(config, args.seed), config)
    inputs = write_inputs(work, args.pairs)
    flops, num_pairs, padding = useful_flops(checkpoint, *inputs)
    peak = matmul_peak()
    seconds = {dtype: [] for dtype in dtypes}
    outs = {}
    for repeat in range(args.repeats + 1):  # the first fills the compilation cache, untimed
      for dtype in dtypes:
        out = os.path.join(work, f"{dtype}-{repeat}.run")
        took = score_command(checkpoint, inputs, dtype, out)
        print(f"{dtype} run {repeat}: {took:.1f} s", flush=True)
        if repeat:
          seconds[dtype].append(took)
        outs[dtype] = out
    scores = {dtype: read_scores(outs[dtype]) for dtype in dtypes}
  keys = sorted(scores["float32"])
  full = np.array([scores["float32"][k] for k in keys])
  rows = []
  for dtype in dtypes:
    values = np.array([scores[dtype][k] for k in keys])
    median = statistics.median(seconds[dtype])
    rate = num_pairs / median
    limit = peak[dtype] / flops
    rows.append((dtype, median, rate, rate / (num_pairs / statistics.median(seconds["float32"])),
                 kendalltau(values, full).statistic, float(np.abs(values - full).max()),
                 peak[dtype] / 1e9, limit, rate / limit))
  lines = [
      SECTION, "",
      f"`t5rank score --window 0` on {num_pairs} InsuranceQA v2 test pairs, {args.config} "
      f"(random weights, seed {args.seed}), the whole command's median wall clock of "
      f"{args.repeats} runs per dtype after one that filled the compilation cache; the limit is "
      f"the matrix-product rate measured in the same run over the useful FLOPs per pair "
      f"({flops / 1e9:.2f} GFLOP: the standard computation, unpadded; t5rank's folded decoder "
      "step executes fewer, so past 100% is possible).", "",
      f"`{' '.join(['python', 'benchmarks/precision_speed.py', *sys.argv[1:]])}`, "
      f"{datetime.date.today()}, {machine()}.", "",
      "| dtype | seconds | pairs/s | x float32 | Kendall tau vs float32 | max abs d log P "
      "| product rate (GFLOP/s) | limit (pairs/s) | of the limit |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for dtype, median, rate, speedup, tau, diff, gflops, limit, share in rows:
    lines.append(f"| {dtype} | {median:.1f} | {rate:.1f} | {speedup:.2f} | {tau:.4f} | {diff:.2g} "
                 f"| {gflops:.0f} | {limit:.1f} | {share:.0%} |")
  lines += ["", "Padding, the same pairs (FLOPs executed with padding over those without, both "
            "folded; shapes to compile):", "",
            "| length bucket | executed / useful | shapes |", "| --- | --- | --- |", *padding]
  table = "\n".join(lines) + "\n"
  print(table)
  if args.write:
    write_section(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "BENCHMARKS.md"),
                  table)


if __name__ == "__main__":
  main()
