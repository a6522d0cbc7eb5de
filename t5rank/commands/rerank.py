"""`t5rank rerank`: a cascade in one command: a first stage, then rerankers each over the top of
the stage before (`t5rank.pipelines.cascade`).

    t5rank rerank --queries q.tsv --corpus c.jsonl --bm25 \\
        --stage tk=runs/tk/best@200 --stage monot5=runs/model/final@100 \\
        --stage duot5=runs/duo/final@10 --qrels qrels.txt -o runs/cascade
    t5rank rerank --queries q.tsv --corpus c.jsonl --run bm25.run \\
        --stage monot5-base-msmarco@100 --stage duot5=duot5-base-msmarco@10 --reranker duot5 ...

The first stage is a given run (--run; named by its run tag), BM25 over the corpus or over
--candidates' candidates (--bm25), or a dense index (--dense). Each --stage is [NAME=]CHECKPOINT[@DEPTH]: the checkpoint
(any format t5rank reads; --reranker FAMILY, given after a stage, says what that stage's checkpoint
is when its files do not) reranking the top DEPTH of the stage before (default: all). Every stage
writes OUTPUT/NN_NAME.run; an interrupted cascade resumes where it stopped when the same command is
run again, and a stage whose model and input are unchanged is reused. --fuse after a stage fuses
it with the stages before it (weights tuned on validation queries with --tune-fusion, then given
to the test run with --fusion-weights VALID_OUTPUT/results.json). With --qrels every stage
(each prefix of the cascade) is evaluated against the first stage and the stage before, with each
stage's time and pairs/s; OUTPUT/results.json holds it all.
"""

from __future__ import annotations

import argparse

from t5rank.commands import add_overwrite, positive_int, renamed


class _Stage(argparse.Action):
  """--stage values in order as (text, family, fuse), --reranker and --fuse attached to the stage
  before them."""

  def __call__(self, parser, namespace, values, option_string=None):
    stages = list(getattr(namespace, "stages", None) or [])
    if option_string in ("--reranker", "--fuse"):
      if not stages:
        parser.error(f"{option_string} goes after the --stage it describes")
      text, family, fuse = stages[-1]
      stages[-1] = (text, values, fuse) if option_string == "--reranker" else (text, family, True)
    else:
      stages.append((values, None, False))
    namespace.stages = stages


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("rerank", help="a cascade: a first stage, then rerankers over its top",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--queries", required=True, help="queries: TSV qid<TAB>text, or JSONL")
  p.add_argument("--corpus", required=True, help="corpus: JSONL (id, text, title) or TSV")
  first = p.add_mutually_exclusive_group(required=True)
  first.add_argument("--run", help="the first stage: a given TREC run")
  first.add_argument("--bm25", action="store_true",
                     help="the first stage: BM25 (k1 0.9, b 0.4) over the corpus, or over "
                          "--candidates' candidates of each query")
  first.add_argument("--dense", metavar="INDEX", help="the first stage: a `t5rank index`")
  p.add_argument("--candidates", help="with --bm25: a run whose candidates BM25 ranks (a pool)")
  p.add_argument("--language", default="en", choices=("en", "zh", "zh-jieba"),
                 help="with --bm25: its analyzer (default en)")
  renamed(p, "--analyzer", "--language", "language", choices=("en", "zh", "zh-jieba"))
  p.add_argument("--depth", type=positive_int, default=1000, metavar="N",
                 help="documents the first stage keeps per query (default 1000); each --stage's "
                      "own depth is its @DEPTH")
  renamed(p, "--first-depth", "--depth", "depth", type=positive_int)
  p.add_argument("--stage", action=_Stage, dest="stages", metavar="[NAME=]CHECKPOINT[@DEPTH]",
                 required=True, help="a reranker stage, in order (repeat it)")
  p.add_argument("--reranker", action=_Stage, dest="stages", metavar="FAMILY",
                 help="the model family of the --stage before it, when its checkpoint does not say "
                      "(e.g. duot5 for a Hugging Face duoT5)")
  p.add_argument("--fuse", action=_Stage, dest="stages", nargs=0,
                 help="fuse the --stage before it with the stages before that over the "
                      "candidates it reranked (weighted z-scores, each run's over the candidates "
                      "its own stage scored); the fused ranking goes on to the next stage. Needs "
                      "--tune-fusion or --fusion-weights")
  weights = p.add_mutually_exclusive_group()
  weights.add_argument("--tune-fusion", action="store_true",
                       help="tune the weights of every --fuse on these --qrels (best MRR over "
                            "weightings in steps of .05): run it on validation queries")
  weights.add_argument("--fusion-weights", metavar="RESULTS_JSON",
                       help="the weights tuned by an earlier `t5rank rerank --tune-fusion` with "
                            "the same stages (its results.json), applied unchanged")
  p.add_argument("--qrels", help="judgments: evaluate every stage (over the queries of --queries "
                                 "with a relevant document; judged queries outside them are left "
                                 "out)")
  p.add_argument("--dtype", choices=("float32", "bfloat16"), help="as in `t5rank score`")
  p.add_argument("--batch-tokens", type=positive_int, help="as in `t5rank score`")
  p.add_argument("-o", "--output", required=True, help="the cascade's work directory")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the work directory is the command's own
  (it resumes there) or new."""
  from t5rank.checkpoints.locate import local_path
  from t5rank.files import WORK, Output, holds
  from t5rank.pipelines.cascade import CASCADE_FILE
  from t5rank.pipelines.cascade_spec import parse_stage

  inputs = {"--queries": args.queries, "--corpus": args.corpus, "--run": args.run,
            "--dense": args.dense, "--candidates": args.candidates, "--qrels": args.qrels,
            "--fusion-weights": args.fusion_weights}
  for i, (text, _, _) in enumerate(args.stages or (), 1):
    try:
      inputs[f"--stage {i}"] = local_path(parse_stage(text).checkpoint)
    except ValueError as e:
      raise SystemExit(f"t5rank rerank: --stage {text}: {e}") from None
  return [Output("-o", args.output, WORK, holds(CASCADE_FILE))], inputs


def _tag(path: str) -> str:
  """The first stage's name for a given run: its run tag (the sixth column) when every line has
  the same one and it is a word, else "run"."""
  import re

  from t5rank.data.readers import read_lines

  tags: set = set()
  read_lines(path, lambda line: tags.add(line.split()[5] if len(line.split()) == 6 else ""),
             skip_bad=False)
  tag = tags.pop() if len(tags) == 1 else ""
  return tag if re.fullmatch(r"[\w.-]+", tag) else "run"


def run(args: argparse.Namespace) -> int:
  import dataclasses
  import logging
  import time

  from t5rank.data.readers import check_finite_run, read_corpus, read_qrels, read_queries, read_run
  from t5rank.pipelines.cascade import run_cascade
  from t5rank.pipelines.cascade_spec import check_stages, parse_stage, read_fusion_weights
  from t5rank.ranking.scorer import ScoringOptions

  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  if args.candidates and not args.bm25:
    raise SystemExit("t5rank rerank: --candidates goes with --bm25")
  stages = [dataclasses.replace(parse_stage(text), reranker=family, fuse=fuse)
            for text, family, fuse in args.stages]
  if any(s.fuse for s in stages) != bool(args.tune_fusion or args.fusion_weights):
    raise SystemExit("t5rank rerank: --fuse needs --tune-fusion (with --qrels, on validation "
                     "queries) or --fusion-weights, and those need a --fuse")
  if args.tune_fusion and not args.qrels:
    raise SystemExit("t5rank rerank: --tune-fusion tunes on --qrels: give the judgments")
  first_name = "dense" if args.dense else "bm25" if args.bm25 else _tag(args.run)
  stages = check_stages(stages, first_name)  # before any work; the cascade takes them as they are
  fusion_weights = read_fusion_weights(args.fusion_weights) if args.fusion_weights else None
  queries, corpus = read_queries(args.queries), read_corpus(args.corpus)
  qrels = read_qrels(args.qrels) if args.qrels else None
  if qrels is not None:  # judged queries outside --queries are not this cascade's: left out
    from t5rank.evaluation.metrics import relevant_queries

    outside = len(set(qrels) - set(queries))
    qrels = {q: docs for q, docs in qrels.items() if q in queries}
    averaged = len(relevant_queries(qrels))
    if not averaged:
      raise SystemExit(f"t5rank rerank: --qrels {args.qrels} judges no document relevant to a "
                       "query of --queries: nothing to evaluate or tune on")
    if outside:
      print(f"--qrels: {outside} judged queries are not in --queries and are left out; the "
            f"averages are over the {averaged} queries of --queries with a relevant document",
            flush=True)
  start = time.perf_counter()
  if args.run:
    first = read_run(args.run)
    check_finite_run(first, args.run)
  elif args.bm25:
    from t5rank.retrieval.bm25 import BM25
    retriever = BM25.open(corpus, None, language=args.language)
    candidates = read_run(args.candidates) if args.candidates else None
    first = retriever.retrieve(queries, k=args.depth, candidates=candidates)
  else:
    from t5rank.retrieval.dense import DenseRetriever
    first = DenseRetriever.load(args.dense).retrieve(queries, k=args.depth)
  first = {q: sorted(docs, key=lambda d: -d[1])[:args.depth] for q, docs in first.items()
           if q in queries}
  options = ScoringOptions(window=0, batch_tokens=args.batch_tokens)
  run_cascade(queries=queries, corpus=corpus, first=first, first_name=first_name, stages=stages,
              workdir=args.output, qrels=qrels, options=options, dtype=args.dtype,
              first_seconds=time.perf_counter() - start, tune_fusion=args.tune_fusion,
              fusion_weights=fusion_weights, overwrite=args.overwrite)
  print(f"wrote {args.output}/results.json and each stage's run")
  return 0
