"""Scorer speed on this machine: bucketed batches vs one pair at a time, same weights, real text.

    .venv/bin/python benchmarks/score_speed.py --write   # about 5.5 minutes on 2 busy cores

Pairs are InsuranceQA v2 test questions with their candidate answers (English), formatted and cut to
512 tokens as `t5rank score` does. Weights are random (speed does not depend on them), float32.
For each model config it measures, after compiling every shape once (compilation is not timed):
- bucketed: `t5rank.scoring.bucket_batches` + `score_batches`, the device loop of `t5rank score`;
- pipeline: `t5rank.scoring.score_candidates` end to end (tokenization in its background thread,
  shards written and merged), on the same pairs;
- one at a time: each pair alone, padded to its length bucket (the same few shapes, batch size 1).
pairs/s, real (non-padding) tokens/s and the padding fraction of the device inputs are reported;
`--write` puts the table into BENCHMARKS.md under "## Scorer speed".
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402

from t5rank import scoring  # noqa: E402
from t5rank.config import get_config  # noqa: E402
from t5rank.network import init_params  # noqa: E402
from t5rank.readers import Document  # noqa: E402
from t5rank.score import score_step  # noqa: E402
from t5rank.vocab import load_vocabulary, resolve_target_words  # noqa: E402

SECTION = "## Scorer speed"


def insuranceqa_candidates(num_pairs: int) -> tuple[dict, dict, dict]:
  """(queries, corpus, candidates) of the first test questions with their ~200 candidates each,
  cut to `num_pairs` pairs, taking answers from many questions so that lengths vary."""
  import insuranceqa_data

  answers, test = insuranceqa_data.load_answers(), insuranceqa_data.load_test()
  per_query = 16
  queries, candidates, corpus = {}, {}, {}
  for qid, item in test.items():
    if len(queries) * per_query >= num_pairs:
      break
    queries[qid] = " ".join(item["en"].split())
    docids = (item["answers"] + item["negatives"])[:per_query]
    candidates[qid] = [(d, 0.0) for d in docids]
    corpus.update({d: Document(answers[d]["en"].strip()) for d in docids})
  return queries, corpus, candidates


def random_params(config, seed: int = 0):
  """Random float32 parameters of `config`'s shapes (shapes traced, values from numpy)."""
  shapes = jax.eval_shape(functools.partial(init_params, config), jax.random.PRNGKey(0))
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: rng.normal(0, 0.05, s.shape).astype(np.float32), shapes)


def padding_fraction(batches) -> float:
  total = sum(b.tokens.size for b in batches)
  return 1 - sum(int((b.tokens != 0).sum()) for b in batches) / total


def timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def measure(name: str, num_pairs: int, single_pairs: int,
            batch_tokens: int | None) -> list[dict]:
  """Rows of figures for the model config `name`."""
  config = get_config(name, dropout_rate=0.0)
  vocab = load_vocabulary()
  targets = resolve_target_words(vocab, "true_false")
  queries, corpus, candidates = insuranceqa_candidates(num_pairs)
  sharding = scoring.data_sharding()
  batch_tokens = batch_tokens or scoring.default_batch_tokens(sharding)
  # Two shards, so that the pipeline tokenizes the second while the devices score the first.
  options = scoring.ScoringOptions(window=0, batch_tokens=batch_tokens, shard_size=num_pairs // 2)
  pairs, passages = scoring.candidate_passages(candidates, corpus, options)
  tokenize_s = timed(lambda: scoring.encode_shard(vocab, pairs, queries, passages,
                                                  options.max_length))
  ids = scoring.encode_shard(vocab, pairs, queries, passages, options.max_length)
  tokens = sum(map(len, ids))
  params = scoring.replicate(random_params(config), sharding)
  batches = scoring.bucket_batches(ids, batch_tokens=batch_tokens, max_length=options.max_length,
                                   row_multiple=sharding.mesh.size)
  pipeline_batches = [b for k in range(0, len(ids), options.shard_size) for b in
                      scoring.bucket_batches(ids[k:k + options.shard_size],
                                             batch_tokens=batch_tokens,
                                             max_length=options.max_length,
                                             row_multiple=sharding.mesh.size)]
  singles = scoring.bucket_batches(ids[:single_pairs], batch_tokens=1,
                                   max_length=options.max_length)
  run = functools.partial(scoring.score_batches, params, config=config, target_ids=targets,
                          sharding=sharding)
  every_shape = {b.tokens.shape: b for b in batches + pipeline_batches + singles}
  compile_s = timed(lambda: [run([b], len(ids)) for b in every_shape.values()])
  bucketed_s = timed(lambda: run(batches, len(ids)))
  single_s = timed(lambda: run(singles, len(ids)))
  single_tokens = sum(len(ids[i]) for b in singles for i in b.items)
  with tempfile.TemporaryDirectory() as tmp:
    pipeline_s = timed(lambda: scoring.score_candidates(
        params, config=config, vocab=vocab, target_ids=targets, queries=queries, corpus=corpus,
        candidates=candidates, output=os.path.join(tmp, "run"), options=options, progress=False))
  common = {"model": name, "params": f"{config.num_parameters / 1e6:.1f}M",
            "compile": f"{compile_s:.0f} s", "tokenize": len(ids) / tokenize_s}
  shapes = len({b.tokens.shape for b in batches})
  return [
      {**common, "mode": f"bucketed ({shapes} shapes, {batch_tokens} tokens)", "pairs": len(ids),
       "pairs/s": len(ids) / bucketed_s, "tokens/s": tokens / bucketed_s,
       "padding": padding_fraction(batches)},
      {**common, "mode": "pipeline (score_candidates, 2 shards)", "pairs": len(ids),
       "pairs/s": len(ids) / pipeline_s, "tokens/s": tokens / pipeline_s,
       "padding": padding_fraction(pipeline_batches)},
      {**common, "mode": "one at a time (bucket-padded)", "pairs": len(singles),
       "pairs/s": len(singles) / single_s, "tokens/s": single_tokens / single_s,
       "padding": padding_fraction(singles)},
  ]


def machine() -> str:
  cpu = "unknown CPU"
  with open("/proc/cpuinfo") as f:
    for line in f:
      if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
  nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
  return (f"nproc {nproc}, {cpu}; Python {platform.python_version()}, jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, {jax.local_device_count()} device(s)")


def report(rows: list[dict], command: str, loads: tuple, elapsed: float) -> str:
  lines = [
      SECTION, "",
      f"- Date: {datetime.date.today().isoformat()}",
      f"- Machine: {machine()}",
      f"- Load average (1 min): {loads[0]:.1f} at the start, {loads[1]:.1f} at the end (above the",
      "  core count, other sessions were running: the figures are lower bounds)",
      f"- Whole script: {elapsed:.0f} s", "",
      "```", command, "```", "",
      "InsuranceQA v2 test questions x candidate answers (English), monoT5 input cut to 512 tokens;",
      "random float32 weights; tokens/s counts real (non-padding) tokens; padding is the fraction",
      "of padding ids in the device inputs; compilation (every shape once) is not in the rates;",
      "tokenize is the host's tokenization rate alone (SentencePiece threads).", "",
      "| model | mode | pairs | pairs/s | tokens/s | padding | compile | tokenize pairs/s |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for r in rows:
    lines.append(f"| {r['model']} ({r['params']}) | {r['mode']} | {r['pairs']} | "
                 f"{r['pairs/s']:.1f} | {r['tokens/s']:.0f} | {r['padding']:.1%} | {r['compile']} | "
                 f"{r['tokenize']:.0f} |")
  return "\n".join(lines) + "\n"


def write_section(path: str, section: str) -> None:
  """Replaces the section of `path` whose heading is `section`'s first line (or appends it), leaving
  the other sections as they are."""
  text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
  heading = section.split("\n", 1)[0]
  pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
  if pattern.search(text):
    text = pattern.sub(lambda _: section + "\n", text, count=1)
  else:
    text = text.rstrip("\n") + ("\n\n" if text else "") + section
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="tiny,t5_small")
  parser.add_argument("--pairs", default="384,96", help="pairs per model (bucketed, pipeline)")
  parser.add_argument("--single-pairs", default="48,16", help="pairs per model, one at a time")
  parser.add_argument("--batch-tokens", type=int, help="default: t5rank score's")
  parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
  args = parser.parse_args()
  start, load = time.perf_counter(), os.getloadavg()[0]
  rows = []
  for name, pairs, singles in zip(args.models.split(","), args.pairs.split(","),
                                  args.single_pairs.split(",")):
    rows += measure(name, int(pairs), int(singles), args.batch_tokens)
    print(rows[-3:], flush=True)
  command = ".venv/bin/python benchmarks/score_speed.py " + " ".join(sys.argv[1:])
  section = report(rows, command.strip(), (load, os.getloadavg()[0]),
                   time.perf_counter() - start)
  print(section)
  if args.write:
    write_section(os.path.join(ROOT, "BENCHMARKS.md"), section)


if __name__ == "__main__":
  main()
