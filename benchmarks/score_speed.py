"""Scorer speed on this machine: bucketed batches vs one pair at a time, same weights, real text.

    .venv/bin/python benchmarks/score_speed.py --write

Pairs are InsuranceQA v2 test questions with their candidate answers (English), formatted and cut to
512 tokens as `t5rank score` does. Weights are random (speed does not depend on them), float32.
For each model config it measures, after compiling every shape once (compilation is not timed):
- bucketed: the reranker's `batches` + `t5rank.ranking.scorer.score_batches`, the device loop of `t5rank score`;
- pipeline: `t5rank.ranking.scorer.score_candidates` end to end (tokenization in its background thread,
  shards written and merged), on the same pairs;
- one at a time: each pair alone, padded to its length bucket (the same few shapes, batch size 1).
pairs/s, real (non-padding) tokens/s and the padding fraction of the device inputs are reported.
`--dtype bfloat16` computes in bfloat16 (parameters cast, as `t5rank score --dtype bfloat16` does)
and reports the largest difference of its log P(true) from float32's on the same pairs and weights.
`--write` puts the table into BENCHMARKS.md under `--section` (default "## Scorer speed").
`--files` takes the pairs from a ranking job's files instead of the insuranceqa-data package. Each
model compiles every shape of its length buckets (and a bfloat16 model float32's again), which on an
accelerator takes longer than the scoring itself; `benchmarks/device_speed.py` measures an
accelerator's step rate on one shape.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from t5rank.benchmarking import (insuranceqa_candidates, machine, padding_fraction,  # noqa: E402
                                 write_section)
from t5rank.models.config import get_config  # noqa: E402
from t5rank.models.monot5 import MonoT5  # noqa: E402
from t5rank.models.reranker import cast_params  # noqa: E402
from t5rank.models.vocab import load_vocabulary, resolve_target_words  # noqa: E402
from t5rank.ranking import devices, scorer  # noqa: E402
from t5rank.models.batching import bucket_batches  # noqa: E402
from t5rank.ranking.candidates import candidate_passages  # noqa: E402
from t5rank.testing import random_params  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where BENCHMARKS.md is
SECTION = "## Scorer speed"


def file_candidates(paths: tuple[str, str, str], num_pairs: int) -> tuple[dict, dict, dict]:
  """`insuranceqa_candidates`' selection from a ranking job's files (queries, corpus, run;
  `t5rank demo` writes them, gzipped or not): the first queries of the run with 16 candidates
  each, `num_pairs` pairs."""
  from t5rank.data.readers import read_corpus, read_queries, read_run

  all_queries, all_corpus, run = read_queries(paths[0]), read_corpus(paths[1]), read_run(paths[2])
  per_query = 16
  queries, candidates = {}, {}
  for qid, ranked in run.items():
    if len(queries) * per_query >= num_pairs:
      break
    queries[qid] = all_queries[qid]
    candidates[qid] = [(d, 0.0) for d, _ in ranked[:per_query]]
  corpus = {d: all_corpus[d] for ranked in candidates.values() for d, _ in ranked}
  return queries, corpus, candidates


def timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def measure(name: str, num_pairs: int, single_pairs: int,
            batch_tokens: int | None, dtype: str = "float32",
            files: tuple[str, str, str] | None = None) -> list[dict]:
  """Rows of figures for the model config `name` computing in `dtype`."""
  config = get_config(name, dropout_rate=0.0, dtype=dtype)
  vocab = load_vocabulary()
  reranker = MonoT5(config, vocab, resolve_target_words(vocab, "true_false"))
  queries, corpus, candidates = (file_candidates(files, num_pairs) if files
                                 else insuranceqa_candidates(num_pairs))
  mesh = devices.scoring_mesh()
  batch_tokens = batch_tokens or devices.default_batch_tokens(mesh)
  rows = mesh.shape["data"]
  # Two shards, so that the pipeline tokenizes the second while the devices score the first.
  options = scorer.ScoringOptions(window=0, batch_tokens=batch_tokens, shard_size=num_pairs // 2)
  pairs, passages = candidate_passages(candidates, corpus, window=0, stride=options.stride,
                                       language="en")
  encode = lambda: reranker.encode([queries[p.qid] for p in pairs],
                                   [passages[p.docid][p.part] for p in pairs])
  tokenize_s = timed(encode)
  ids = encode()
  tokens = sum(map(len, ids))
  float_params = random_params(config, std=0.05)
  raw_params = cast_params(float_params, dtype)
  params = devices.place_params(raw_params, reranker.param_axes(), mesh)
  batches = reranker.batches(ids, batch_tokens=batch_tokens, row_multiple=rows)
  pipeline_batches = [b for k in range(0, len(ids), options.shard_size) for b in
                      reranker.batches(ids[k:k + options.shard_size], batch_tokens=batch_tokens,
                                       row_multiple=rows)]
  singles = bucket_batches(ids[:single_pairs], batch_tokens=1, max_length=reranker.max_length)
  run = functools.partial(scorer.score_batches, reranker, params, mesh=mesh)
  every_shape = {b.arrays[0].shape: b for b in batches + pipeline_batches + singles}
  compile_s = timed(lambda: [run([b], len(ids)) for b in every_shape.values()])
  bucketed_s = timed(lambda: run(batches, len(ids)))
  difference = None
  if dtype != "float32":  # the same pairs and weights in float32: how far the scores move
    reference = MonoT5(config.replace(dtype="float32"), vocab, reranker.target_ids)
    scores = run(batches, len(ids))[0]
    reference_scores = scorer.score_batches(
        reference, devices.place_params(float_params, reranker.param_axes(), mesh), batches,
        len(ids), mesh=mesh)[0]
    difference = float(abs(scores - reference_scores).max())
  single_s = timed(lambda: run(singles, len(ids))) if singles else float("nan")
  single_tokens = sum(len(ids[i]) for b in singles for i in b.items)
  with tempfile.TemporaryDirectory() as tmp:
    pipeline_s = timed(lambda: scorer.score_candidates(
        reranker, raw_params, queries=queries, corpus=corpus, candidates=candidates,
        output=os.path.join(tmp, "run"), options=options, progress=False))
  common = {"model": name, "params": f"{config.num_parameters / 1e6:.1f}M", "dtype": dtype,
            "compile": f"{compile_s:.0f} s", "tokenize": len(ids) / tokenize_s,
            "difference": None}
  shapes = len({b.arrays[0].shape for b in batches})
  figures = [
      {**common, "mode": f"bucketed ({shapes} shapes, {batch_tokens} tokens)", "pairs": len(ids),
       "pairs/s": len(ids) / bucketed_s, "tokens/s": tokens / bucketed_s,
       "padding": padding_fraction(batches), "difference": difference},  # compared on these
      {**common, "mode": "pipeline (score_candidates, 2 shards)", "pairs": len(ids),
       "pairs/s": len(ids) / pipeline_s, "tokens/s": tokens / pipeline_s,
       "padding": padding_fraction(pipeline_batches)},
      {**common, "mode": "one at a time (bucket-padded)", "pairs": len(singles),
       "pairs/s": len(singles) / single_s, "tokens/s": single_tokens / single_s,
       "padding": padding_fraction(singles) if singles else float("nan")},
  ]
  return figures if singles else figures[:2]  # --single-pairs 0: no one-at-a-time row


def report(rows: list[dict], command: str, loads: tuple, elapsed: float, section: str,
           from_files: bool = False) -> str:
  busy = max(loads) > os.cpu_count()
  dtypes = sorted({r["dtype"] for r in rows})
  lines = [
      section, "",
      f"- Date: {datetime.date.today().isoformat()}",
      f"- Machine: {machine()}",
      f"- Load average (1 min): {loads[0]:.1f} at the start, {loads[1]:.1f} at the end"
      + (" (above the core count, other jobs were running: the figures are lower bounds)"
         if busy else ""),
      f"- Whole script: {elapsed:.0f} s", "",
      "```", command, "```", "",
      ("The first 16 candidates of each of the run's first queries (--files)" if from_files else
       "InsuranceQA v2 test questions x candidate answers (English)")
      + ", monoT5 input cut to 512 tokens;",
      f"random weights, computing in {' and '.join(dtypes)} (parameters cast); tokens/s counts real",
      "(non-padding) tokens; padding is the fraction of padding ids in the device inputs;",
      "compilation (every shape once) is not in the rates; tokenize is the host's tokenization",
      "rate alone (SentencePiece threads); max |d log P| is the largest difference of a pair's",
      "log P(true) from float32's on the same pairs and weights.", "",
      "| model | dtype | mode | pairs | pairs/s | tokens/s | padding | compile | tokenize pairs/s "
      "| max \\|d log P\\| |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for r in rows:
    difference = "" if r["difference"] is None else f"{r['difference']:.2g}"
    lines.append(f"| {r['model']} ({r['params']}) | {r['dtype']} | {r['mode']} | {r['pairs']} | "
                 f"{r['pairs/s']:.1f} | {r['tokens/s']:.0f} | {r['padding']:.1%} | {r['compile']} | "
                 f"{r['tokenize']:.0f} | {difference} |")
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="tiny,t5_small")
  parser.add_argument("--pairs", default="384,96", help="pairs per model (bucketed, pipeline)")
  parser.add_argument("--single-pairs", default="48,16",
                      help="pairs per model, one at a time (0: no such row)")
  parser.add_argument("--batch-tokens", type=int, help="default: t5rank score's")
  parser.add_argument("--dtype", default="float32", help="float32, bfloat16, or one per model "
                      "(comma-separated)")
  parser.add_argument("--files", nargs=3, metavar=("QUERIES", "CORPUS", "RUN"),
                      help="take the pairs from these files (e.g. t5rank demo's data/queries.tsv, "
                      "data/corpus.jsonl and bm25.run) instead of the insuranceqa-data package")
  parser.add_argument("--section", default=SECTION, help="BENCHMARKS.md heading for --write")
  parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
  args = parser.parse_args()
  start, load = time.perf_counter(), os.getloadavg()[0]
  rows = []
  models = args.models.split(",")
  dtypes = args.dtype.split(",")
  if len(dtypes) == 1:
    dtypes *= len(models)
  if len(dtypes) != len(models):
    parser.error(f"--dtype gives {len(dtypes)} values for {len(models)} models")
  for name, pairs, singles, dtype in zip(models, args.pairs.split(","),
                                         args.single_pairs.split(","), dtypes):
    rows += measure(name, int(pairs), int(singles), args.batch_tokens, dtype,
                    tuple(args.files) if args.files else None)
    print(rows[-1], flush=True)
  command = ".venv/bin/python benchmarks/score_speed.py " + " ".join(sys.argv[1:])
  section = report(rows, command.strip(), (load, os.getloadavg()[0]),
                   time.perf_counter() - start, args.section, bool(args.files))
  print(section)
  if args.write:
    write_section(os.path.join(REPO, "BENCHMARKS.md"), section)


if __name__ == "__main__":
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # as the t5rank command does
  main()
