"""`t5rank score`: rerank a candidate run with a checkpoint; the pipeline is in `t5rank.ranking.scorer`."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from t5rank.commands import add_overwrite, checkpoint_path, renamed, resolved
from t5rank.ranking import options, scorer
from t5rank.ranking.scorer import ScoringOptions
from t5rank.ranking.shards import ShardError


def parse_targets(text: str) -> str | tuple[str, str]:
  """`--targets`: a registry name (`true_false`) or a `positive,negative` pair."""
  if "," in text:
    positive, negative = text.split(",", 1)
    return positive, negative
  return text


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("score", help="rerank a candidate run with a reranker checkpoint",
                            description=scorer.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--checkpoint", required=True,
                 help="checkpoint in any format t5rank loads, or shipped:NAME (a model t5rank "
                      "ships: shipped:monot5, shipped:duot5, shipped:tk)")
  p.add_argument("--queries", required=True, help="queries: TSV qid<TAB>text, or JSONL")
  p.add_argument("--corpus", required=True, help="corpus: JSONL (id, text, title) or TSV")
  p.add_argument("--run", required=True, help="candidates: TREC run, or qid docid lines")
  p.add_argument("-o", "--output", required=True, help="the reranked TREC run to write")
  p.add_argument("--first-stage-run", metavar="RUN",
                 help="for a model that reads each candidate's BM25 score in its input (the "
                 "shipped monoT5, RankT5 and duoT5): the BM25 run those scores come from, when "
                 "--run is another stage's ranking (e.g. duoT5 over monoT5's run; default: "
                 "--run's scores)")
  options.add_arguments(p, "corpus")
  renamed(p, "--sentence-language", "--language", "language")
  p.add_argument("--cpu-devices", type=int,
                 help="on a CPU: the devices each batch is split over, each computing its share on "
                 "its own (default: one per core this process may use; 1 gives one device using all "
                 "cores). No effect on GPU/TPU")
  p.add_argument("--shard-size", type=int, default=ScoringOptions.shard_size,
                 help="passages per output shard (the unit of resumption)")
  p.add_argument("--per-passage-output", help="also write qid docid window log_p p winner lines")
  p.add_argument("--skip-missing", action="store_true",
                 help="skip candidates whose query or document is unknown (and report them)")
  p.add_argument("--tag", help="run tag (last column; default: the model family, e.g. monot5)")
  p.add_argument("--distributed", action="store_true",
                 help="call jax.distributed.initialize() first (one process per host)")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the run, the per-passage file and the
  resumable shard directory."""
  from t5rank.files import WORK, Output, holds
  from t5rank.ranking.shards import MANIFEST_FILE

  return ([Output("--output", args.output), Output("--per-passage-output", args.per_passage_output),
           Output("the shard directory", args.output + ".shards", WORK, holds(MANIFEST_FILE))],
          {"--queries": args.queries, "--corpus": args.corpus, "--run": args.run,
           "--first-stage-run": args.first_stage_run,
           "--checkpoint": checkpoint_path(args), "--vocab": args.vocab})


def run(args: argparse.Namespace) -> int:
  import dataclasses
  import time

  import jax

  from t5rank.data.readers import (InputFormatError, check_finite_run, read_corpus, read_queries,
                                   read_run)
  from t5rank.models.loading import load_reranker
  from t5rank.ranking.candidates import MissingIdsError
  from t5rank.ranking.devices import use_cpu_devices

  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  logging.getLogger("t5rank").setLevel(logging.INFO)
  if args.cpu_devices is not None and args.cpu_devices < 1:
    raise SystemExit(f"t5rank score: --cpu-devices must be >= 1, got {args.cpu_devices}")
  started = time.perf_counter()
  use_cpu_devices(args.cpu_devices)
  if args.distributed:
    jax.distributed.initialize()
  try:  # bad options and input fail before the checkpoint is loaded
    options = ScoringOptions(
        passages=args.passages, window=args.window, stride=args.stride, language=args.language,
        batch_tokens=args.batch_tokens, shard_size=args.shard_size,
        skip_missing=args.skip_missing, tag=args.tag or ScoringOptions.tag, mesh_shape=args.mesh,
        precision=args.precision or ("bfloat16" if args.dtype == "bfloat16" else "float32"),
        length_bucket=args.length_bucket, depth=args.depth, aggregate=args.aggregate)
    from t5rank.ranking.devices import precision_problem

    problem = precision_problem(args.precision, jax.devices()[0].platform)
    if problem:
      raise ValueError(f"--{problem}")
    queries, corpus = read_queries(args.queries), read_corpus(args.corpus)
    run = read_run(args.run)
    check_finite_run(run, f"--run {args.run}")
    # resolved once (`files` resolved it before the outputs were checked), its family checked once
    checkpoint = resolved(args).as_family(args.reranker)
    bm25_in_input = args.bm25_in_input
    if bm25_in_input is None:
      bm25_in_input = bool(checkpoint.bm25_in_input)
    first_stage = None
    if args.first_stage_run:
      if not bm25_in_input:
        raise ValueError("--first-stage-run gives the BM25 scores a model reads in its input; "
                         f"{checkpoint.path} reads none (--bm25-in-input makes it)")
      first_stage = read_run(args.first_stage_run)
      check_finite_run(first_stage, f"--first-stage-run {args.first_stage_run}")
    # the scorer's own check, made here once, before the weights load; the scorer takes its result
    inputs = scorer.check_inputs(queries, corpus, run, options=options,
                                 reads_first_stage=bm25_in_input, first_stage_run=first_stage,
                                 sources=(args.queries, args.corpus))
  except MissingIdsError as e:
    raise SystemExit(f"t5rank score: {e} (--skip-missing skips them)") from None
  except (InputFormatError, ValueError) as e:
    raise SystemExit(f"t5rank score: {e}") from None
  reranker, params = load_reranker(checkpoint, config_name=args.config, options={
      "vocab": args.vocab, "targets": parse_targets(args.targets) if args.targets else None,
      "dtype": args.dtype, "max_length": args.max_length, "bm25_in_input": args.bm25_in_input,
      "truncation": args.truncation})
  if args.tag is None:  # the run names its model
    options = dataclasses.replace(options, tag=reranker.name)
  from t5rank.ranking.devices import bfloat16_note

  note = bfloat16_note(args.dtype, jax.devices()[0].platform)
  if note:
    print(f"t5rank score: note: {note}", file=sys.stderr)
  try:
    reranked = scorer.score_candidates(
        reranker, params, queries=queries, corpus=corpus, candidates=inputs,
        output=args.output, options=options, per_passage_output=args.per_passage_output,
        model_id=os.path.abspath(checkpoint.path))
  except (FloatingPointError, ShardError) as e:  # non-finite scores, shards of another job
    if args.debug:
      raise
    raise SystemExit(f"t5rank score: {e}") from None
  except KeyboardInterrupt:
    print(f"\ninterrupted: finished shards are kept in {args.output}.shards; run the same command "
          "again to continue", file=sys.stderr)
    return 130
  if jax.process_index() == 0:
    documents = sum(map(len, reranked.values()))
    seconds = time.perf_counter() - started
    print(f"wrote {documents} documents for {len(reranked)} queries to {args.output} in "
          f"{seconds:.1f} s ({sum(map(len, inputs.candidates.values())) / seconds:.0f} pairs/s, "
          "start-up and compilation included)")
  return 0
