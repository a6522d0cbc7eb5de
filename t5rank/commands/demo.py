"""`t5rank demo`: the main job -- InsuranceQA v2 end to end (BM25, fine-tuning, monoT5, t-test).

    t5rank demo                                  # all 2,000 test queries, their whole pools reranked
    t5rank demo --depth 100                      # only BM25's top 100 of each pool
    t5rank demo --queries 200 --gin.TRAIN_STEPS=50   # a quick try
    t5rank demo --retrain                        # train again even if runs/insuranceqa/model fits
    t5rank demo --cross-lingual                  # English/Chinese queries and answers (XPR)

Exports the InsuranceQA v2 test split (English), ranks each query's answer pool with BM25 (k1 0.9,
b 0.4), trains the tiny monoT5 of gin/experiments/tiny_insuranceqa_bm25_cpu.gin (as `t5rank train`
does, with MODEL_DIR = WORKDIR/model; an interrupted run resumes, and a model trained by the same gin
recipe is reused; that recipe's model reads each pair's BM25 score in its input, Askari et al. 2023;
`--gin_file=gin/experiments/tiny_insuranceqa_cpu.gin` trains the paper's plain input instead),
reranks BM25's top --depth with `t5rank score`'s code, interpolates BM25's and
monoT5's scores with a weight chosen on --tune-queries validation queries (`t5rank fuse`), and prints
BM25 against BM25+monoT5 and the hybrid (MRR, MRR@10, P@1, nDCG@10, MAP) with paired t-tests. It
writes bm25.run, monot5.run, hybrid.run, results.json and results.png to WORKDIR. `--gin_file` and
`--gin.NAME=VALUE` change the training recipe as in `t5rank train` (MODEL_DIR excepted).

--cross-lingual runs the same job on the XPR construction of the same pools (Chen et al. 2020,
seed 0: each query English or Chinese, half of each pool's answers in Chinese; `t5rank xpr`): BM25
with the `zh` analyzer (character bigrams, Latin words lowercased), a bilingual tiny T5 pre-trained
with span corruption on InsuranceQA's and Tatoeba's English and Chinese text
(gin/experiments/pretrain_tiny_enzh_cpu.gin, in WORKDIR/pretrain, reused like the model; about half
an hour on 2 cores, --pretrain-steps shortens it for a try), then fine-tuned as monoT5 with yes/no
on the "mixed" data (gin/experiments/xpr_mixed_tiny_cpu.gin); beside it the bilingual dual encoder
(gin/experiments/dual_encoder_xpr_cpu.gin: XPI's sentence pairs, 2,000 steps, then the mixed
strategy's pairs, 3,000 steps; about 13 minutes, + 3 for its word list on first use; --dense-steps
shortens both for a try) ranks the same candidates by cosine. Evaluated on P@1 (= acc@1), acc@10,
MRR and MAP with each run broken down by query and answer language (default WORKDIR
runs/insuranceqa_xpr). The code is `t5rank.pipelines.insuranceqa.run_insuranceqa`.
"""

from __future__ import annotations

import argparse

from t5rank.pipelines.insuranceqa import CROSS_LINGUAL, DEFAULT_DEPTH, ENGLISH, TUNE_QUERIES
from t5rank.commands import positive_int


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("demo", help="the main job: InsuranceQA v2 BM25 vs BM25+monoT5 (and hybrid)",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--workdir",
                 help=f"where data, index, model, runs and results go (default: {ENGLISH.workdir}, "
                      f"with --cross-lingual {CROSS_LINGUAL.workdir})")
  p.add_argument("--depth", type=positive_int, default=DEFAULT_DEPTH,
                 help=f"BM25 candidates reranked per query (default: {DEFAULT_DEPTH}, every answer "
                      "of the query's pool: ~200)")
  p.add_argument("--queries", type=positive_int, metavar="N",
                 help="only the first N test queries (default: all 2,000)")
  p.add_argument("--tune-queries", type=positive_int, default=TUNE_QUERIES, metavar="N",
                 help="validation queries the hybrid's interpolation weight is chosen on "
                      f"(default: {TUNE_QUERIES})")
  p.add_argument("--retrain", action="store_true",
                 help="train new models even if WORKDIR holds ones of the same recipes")
  p.add_argument("--gin_file", action="append", metavar="PATH",
                 help=f"training gin file(s) (default: {ENGLISH.gin_file}, with --cross-lingual "
                      f"{CROSS_LINGUAL.gin_file}); repeatable")
  p.add_argument("--cross-lingual", action="store_true",
                 help="the English/Chinese job on XPR pools, with a pre-trained bilingual model")
  p.add_argument("--pretrain-steps", type=positive_int, metavar="N",
                 help="with --cross-lingual: pre-training steps (default: the gin file's, 3,600)")
  p.add_argument("--dense-steps", type=positive_int, metavar="N",
                 help="with --cross-lingual: training steps of each of the dual encoder's two "
                      "stages (default: 2,000 on XPI's pairs, then 3,000)")
  p.set_defaults(func=run, files=files, accepts_extra=True, overwrite=False)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the work directory is the demo's own (it
  reuses and resumes what it finds there) or new."""
  import os

  from t5rank.files import WORK, Output, holds
  from t5rank.pipelines.insuranceqa import RECIPE_FILE

  workdir = args.workdir or (CROSS_LINGUAL if args.cross_lingual else ENGLISH).workdir
  return ([Output("--workdir", workdir, WORK,
                  holds("results.json", "bm25.run", os.path.join("model", RECIPE_FILE)))],
          {f"--gin_file {path}": path for path in args.gin_file or ()})


def run(args: argparse.Namespace) -> int:
  import logging

  from t5rank.pipelines.insuranceqa import run_insuranceqa
  from t5rank.training.gin_config import gin_bindings

  bindings = gin_bindings(args.extra)
  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  logging.getLogger("t5rank").setLevel(logging.INFO)
  if (args.pretrain_steps or args.dense_steps) and not args.cross_lingual:
    raise SystemExit("--pretrain-steps and --dense-steps go with --cross-lingual (the English "
                     "job has no pre-training and no dual encoder)")
  run_insuranceqa(workdir=args.workdir, depth=args.depth, num_queries=args.queries,
                  gin_files=args.gin_file, gin_bindings=bindings, retrain=args.retrain,
                  tune_queries=args.tune_queries,
                  job=CROSS_LINGUAL if args.cross_lingual else ENGLISH,
                  pretrain_bindings=[f"TRAIN_STEPS = {args.pretrain_steps}"]
                  if args.pretrain_steps else (),
                  dense_bindings=[f"TRAIN_STEPS = {args.dense_steps}"]
                  if args.dense_steps else ())
  return 0
