"""`t5rank score` on a CPU with one device per core against one device using all cores.

    .venv/bin/python benchmarks/cpu_devices.py
    .venv/bin/python benchmarks/cpu_devices.py --devices 1,2 --models tiny --pairs 2000

JAX's CPU backend is one device by default, and XLA spreads each computation's matrix products over
all cores. `t5rank score` instead makes one CPU device per core
(`t5rank.ranking.devices.use_cpu_devices`) and splits each batch over them. The device count is
fixed when JAX starts, so each count runs in a child process of this script, on the same pairs
(InsuranceQA v2 test questions with their pools, `t5rank.benchmarking.insuranceqa_pairs` as
benchmarks/reference_speed.py takes them: `short` answers whole, `windows` MaxP windows of
4-answer documents), the same random float32 weights (fixed seed) and `t5rank score`'s device loop
(`bucket_batches` with the default token budget for that device count, `score_batches`), every shape
compiled first and not timed; each count is timed twice, best kept. Prints a Markdown table with the
speedup over the first count and the largest |log P(true)| difference from it (must be < 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TOLERANCE = 1e-4


def child(devices: int, models: list[str], kinds: list[str], pairs: dict[str, int],
          directory: str) -> None:
  """Scores every (model, kind) with `devices` CPU devices; prints one JSON line per case and saves
  the log P(true) to `directory`."""
  from t5rank.ranking.devices import (default_batch_tokens, place_params, scoring_mesh,
                                      use_cpu_devices)

  use_cpu_devices(devices)
  import jax

  from t5rank.benchmarking import insuranceqa_pairs, score_timed, scoring_batches
  from t5rank.models.config import get_config
  from t5rank.models.monot5 import MonoT5
  from t5rank.models.vocab import load_vocabulary, resolve_target_words
  from t5rank.testing import random_params

  assert jax.local_device_count() == devices, jax.devices()
  vocab = load_vocabulary()
  target_ids = resolve_target_words(vocab, "true_false")
  mesh = scoring_mesh()
  for name in models:
    config = get_config(name, dropout_rate=0.0)
    reranker = MonoT5(config, vocab, target_ids)
    params = place_params(random_params(config), reranker.param_axes(), mesh)
    for kind in kinds:
      queries, chosen, passages, options = insuranceqa_pairs(kind, pairs[name])
      ids = [np.asarray(x, np.int32) for x in
             reranker.encode([queries[p.qid] for p in chosen],
                             [passages[p.docid][p.part] for p in chosen])]
      batches = scoring_batches(reranker, mesh, ids, options)
      (log_p, compile_s, first), (_, _, second) = (
          score_timed(reranker, params, mesh, batches, len(ids)) for _ in range(2))
      seconds = [first, second]
      np.save(os.path.join(directory, f"{devices}-{name}-{kind}.npy"), log_p)
      print(json.dumps({"devices": devices, "model": name, "kind": kind, "pairs": len(ids),
                        "pairs_s": len(ids) / min(seconds), "compile_s": compile_s,
                        "batch_tokens": default_batch_tokens(mesh)}), flush=True)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--devices", default=None,
                      help="CPU device counts to compare, the first is the baseline "
                      "(default: 1 and the number of cores)")
  parser.add_argument("--models", default="tiny,t5_small")
  parser.add_argument("--kinds", default="short,windows")
  parser.add_argument("--pairs", default="tiny=2000,t5_small=150",
                      help="pairs per model, model=N,...")
  parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--dir", help=argparse.SUPPRESS)
  args = parser.parse_args()
  models, kinds = args.models.split(","), args.kinds.split(",")
  pairs = {m: int(n) for m, n in (entry.split("=") for entry in args.pairs.split(","))}
  if args.child:
    child(args.child, models, kinds, pairs, args.dir)
    return
  from t5rank.ranking.devices import cpu_cores

  counts = [int(c) for c in (args.devices or f"1,{cpu_cores()}").split(",")]
  rows = {}
  with tempfile.TemporaryDirectory() as directory:
    for count in counts:
      out = subprocess.run(
          [sys.executable, os.path.abspath(__file__), "--child", str(count), "--dir", directory,
           "--models", args.models, "--kinds", args.kinds, "--pairs", args.pairs],
          stdout=subprocess.PIPE, text=True, check=True).stdout
      for line in out.splitlines():
        if line.startswith("{"):
          row = json.loads(line)
          rows[count, row["model"], row["kind"]] = row
          print(row, flush=True)
    print(f"\n{cpu_cores()} cores, os.getloadavg() {os.getloadavg()[0]:.1f}\n")
    print("| model | inputs | pairs | " + " | ".join(f"{c} device(s) pairs/s" for c in counts)
          + " | speedup | max abs diff log P |")
    print("| --- " * (5 + len(counts)) + "|")
    failed = False
    for model in models:
      for kind in kinds:
        base = np.load(os.path.join(directory, f"{counts[0]}-{model}-{kind}.npy"))
        diff = max(float(np.max(np.abs(np.load(os.path.join(directory, f"{c}-{model}-{kind}.npy"))
                                       - base))) for c in counts)
        failed |= not diff <= TOLERANCE
        rates = [rows[c, model, kind]["pairs_s"] for c in counts]
        print(f"| {model} | {kind} | {rows[counts[0], model, kind]['pairs']} | "
              + " | ".join(f"{r:.1f}" for r in rates)
              + f" | {rates[-1] / rates[0]:.2f}x | {diff:.1e} |")
  if failed:
    raise SystemExit(f"FAILED: scores differ by more than {TOLERANCE} between device counts")


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
