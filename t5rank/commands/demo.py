"""`t5rank demo`: the main job -- InsuranceQA v2's test pools through the cascade BM25 → the dual
encoder → TK → monoT5 → RankT5 → duoT5, with the models t5rank ships.

    t5rank demo                         # all 2,000 test queries; shipped models (minutes)
    t5rank demo --retrain               # train the five models anew first (about 105 minutes)
    t5rank demo --distil                # the cascade with TK distilled from BM25+TK+monoT5
    t5rank demo --num-queries 200       # a quick try
    t5rank demo --depth 1000,1000,100,20,5   # monoT5 over the fused top 100, RankT5 20, duoT5 5
    t5rank demo --cross-lingual         # English/Chinese queries and answers (XPR): BM25 → the
                                        # dual encoder → monoT5, shipped models (minutes)
    t5rank demo --monot5-only           # the single-model job: BM25 vs BM25+monoT5 vs their hybrid
    t5rank demo --monot5-only --cross-lingual   # the same on XPR, training its models (70 min)

The cascade (`t5rank.pipelines.insuranceqa_cascade`): exports the InsuranceQA v2 test split
(English), ranks each query's answer pool (~200 answers) with BM25 (k1 0.9, b 0.4), reranks all of
it with the dual encoder, then with TK, then with monoT5, the fused top 50 with RankT5 (listwise
softmax loss) and the fused top 10 with duoT5 (--depth, one depth per reranker); after each
reranker its scores are fused with every stage before it (z-scores, `t5rank fuse`), the weights
tuned on the first --tune-queries (1,000) validation queries and applied unchanged to the test
queries: those tuned with the shipped models ship with them
(t5rank/shipped/insuranceqa_cascade_weights.json), else the same cascade runs on the validation
queries first (--retrain, --distil, a --gin binding, another --tune-queries, other --depth). It
prints every stage and every fusion (MRR, MRR@10, P@1, nDCG@10, MAP, paired t-tests against BM25
and against the row before, Bonferroni; time and pairs/s) and writes each stage's run
(WORKDIR/cascade), results.json and results.png. The models are the shipped ones (t5rank/shipped,
`shipped:NAME`: their recipes are the repository's gin files), else, with --retrain or a
--gin.NAME=VALUE binding (it applies to every model's recipe after the model's own, e.g.
--gin.TRAIN_STEPS=20 for a try), trained by those recipes in WORKDIR/dual_encoder, WORKDIR/tk,
WORKDIR/monot5, WORKDIR/rankt5, WORKDIR/duot5 (duoT5 from that monoT5; interrupted training
resumes, a model of the same recipe is reused; on 2 cores the dual encoder trains in about 9
minutes, TK 15, monoT5 (16,000 steps) 18, RankT5 (32,000 steps) 51, duoT5 5, then the
validation cascade tunes the weights in 6). The same command run again reuses every stage that is
done.

--distil puts a distilled TK in TK's place (docs/distillation.md): the teacher, BM25, TK and monoT5
fused with the weights .05, .55, .4, scores each InsuranceQA training question's relevant answers
and 20 answers of its pool once (WORKDIR/teacher, as `t5rank teacher` does; about 6 minutes on 2
cores), then TK is trained on the teacher's score margins (Margin-MSE,
gin/experiments/tk_distill_insuranceqa_cpu.gin, WORKDIR/tk_distilled; about 25 minutes). With
--retrain the teacher's models are retrained first and the teacher and the distilled TK are made
from them. On the test pools it was no better than the shipped TK in the cascade before the
dual encoder joined it (BENCHMARKS.md, "Distillation (Margin-MSE)"), which is why the default
cascade keeps the undistilled one. The results replace the plain cascade's in WORKDIR: give
--distil its own --output to keep both.

--monot5-only runs the single-model job (`t5rank.pipelines.insuranceqa`, default WORKDIR
runs/insuranceqa): trains the tiny monoT5 of gin/experiments/tiny_insuranceqa_bm25_cpu.gin
(its input holds each pair's BM25 score, Askari et al. 2023; `--gin_file` changes the recipe),
reranks BM25's top --depth, interpolates BM25 and monoT5 with a weight tuned on validation queries.

--cross-lingual runs the same kind of cascade on the XPR construction of the same pools (Chen et
al. 2020, seed 0: each query English or Chinese, half of each pool's answers in Chinese; `t5rank
xpr`; default WORKDIR runs/insuranceqa_xpr_cascade): BM25 with the `zh` analyzer (character bigrams,
Latin words lowercased), then the bilingual dual encoder (shipped:xpr_dual_encoder: XPI's sentence
pairs, then the mixed strategy's) over the pool, then the bilingual monoT5 (shipped:xpr_monot5:
a tiny T5 pre-trained with span corruption on InsuranceQA's and Tatoeba's English and Chinese text,
shipped:xpr_pretrained, fine-tuned with yes/no on the mixed strategy's pairs) over the fused top
(--depth DUAL_ENCODER,MONOT5), each fused as above, every row also broken down by query and answer
language; evaluated on P@1 (= acc@1), acc@10, MRR and MAP. About 3 minutes on 2 cores with the
shipped models; --retrain (or a --gin binding) trains the four models by their recipes
(gin/experiments/pretrain_tiny_enzh_cpu.gin, xpr_mixed_tiny_cpu.gin, dual_encoder_xpr_cpu.gin
twice; about 65 minutes more), monoT5 from the pre-trained model and the dual encoder from its
first stage; --pretrain-steps and --dense-steps shorten the pre-training and the dual encoder's two
stages for a try (a model started from a model trained now is trained again too).

--monot5-only --cross-lingual is the single-model job on the XPR pools (default WORKDIR
runs/insuranceqa_xpr): it trains the pre-trained and fine-tuned monoT5 (WORKDIR/pretrain,
WORKDIR/model) and the dual encoder's two stages (WORKDIR/dense_pretrain, WORKDIR/dense; +3
minutes for its word list on first use) itself, about 70 minutes, and compares BM25, monoT5 over
BM25's top --depth, their hybrid and the dual encoder. The code is
`t5rank.pipelines.insuranceqa.run_insuranceqa`.
"""

from __future__ import annotations

import argparse

from t5rank.pipelines.insuranceqa import DEFAULT_DEPTH, TUNE_QUERIES
from t5rank.pipelines.insuranceqa_pools import CROSS_LINGUAL, ENGLISH
from t5rank.pipelines.insuranceqa_catalogue import ENGLISH_CASCADE, XPR_CASCADE
from t5rank.commands import positive_int, renamed


def depths(text: str) -> tuple[int, ...]:
  """`--depth`: positive numbers, one per reranker of the cascade (checked against it in `run`),
  or one with --monot5-only."""
  try:
    values = tuple(int(v) for v in text.split(","))
  except ValueError:
    values = ()
  if not values or min(values) < 1:
    raise argparse.ArgumentTypeError(f"positive numbers separated by commas, got {text!r}")
  return values


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("demo", help="the main job: InsuranceQA v2 through BM25, the dual "
                                         "encoder, TK, monoT5, RankT5, duoT5",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("-o", "--output", dest="workdir", metavar="DIR",
                 help=f"where data, index, models, runs and results go (default: "
                      f"{ENGLISH_CASCADE.workdir}, with --cross-lingual {XPR_CASCADE.workdir}, "
                      f"with --monot5-only {ENGLISH.workdir}, with both {CROSS_LINGUAL.workdir})")
  renamed(p, "--workdir", "--output", "workdir")
  p.add_argument("--depth", type=depths, metavar="K,K,...",
                 help="candidates each reranker reranks per query (default: "
                      f"{','.join(map(str, ENGLISH_CASCADE.depths))}: the dual encoder, TK, monoT5 "
                      "the whole pool of ~200, RankT5 the top 50, duoT5 the top 10; "
                      "with --cross-lingual two, the dual encoder's and monoT5's: "
                      f"{','.join(map(str, XPR_CASCADE.depths))}; with --monot5-only one "
                      f"number, the BM25 candidates monoT5 reranks: {DEFAULT_DEPTH}, every answer "
                      "of the query's pool, ~200)")
  renamed(p, "--depths", "--depth", "depth", type=depths)
  p.add_argument("--monot5-only", action="store_true",
                 help="the single-model job: BM25 vs BM25+monoT5 vs their hybrid")
  p.add_argument("--num-queries", type=positive_int, metavar="N", dest="queries",
                 help="only the first N test queries (default: all 2,000)")
  renamed(p, "--queries", "--num-queries", "queries", type=positive_int)
  p.add_argument("--tune-queries", type=positive_int, metavar="N",
                 help="validation queries the fusion weights (with --monot5-only: the hybrid's "
                      "weight) are tuned on (default: 1000 for the English cascade, whose "
                      "weights tuned so with the shipped models ship with them and are not tuned "
                      f"again; {TUNE_QUERIES} for the other jobs)")
  p.add_argument("--retrain", action="store_true",
                 help="train new models even if WORKDIR holds ones of the same recipes")
  p.add_argument("--gin_file", "--gin-file", action="append", metavar="PATH",
                 help=f"with --monot5-only: the training gin file(s) (default: "
                      f"{ENGLISH.gin_file}, with --cross-lingual {CROSS_LINGUAL.gin_file}); "
                      "repeatable")
  p.add_argument("--distil", action="store_true",
                 help="the cascade with TK distilled from the teacher BM25 + TK + monoT5 (the "
                      "teacher's scores and the distilled TK are made in WORKDIR, ~30 minutes)")
  p.add_argument("--teacher-queries", type=positive_int, metavar="N",
                 help="with --distil: the teacher scores only the first N training questions "
                      "(default: all 12,889)")
  p.add_argument("--cross-lingual", action="store_true",
                 help="the English/Chinese job on XPR pools: BM25, the bilingual dual encoder, "
                      "the pre-trained bilingual monoT5")
  p.add_argument("--pretrain-steps", type=positive_int, metavar="N",
                 help="with --cross-lingual: pre-training steps (default: the gin file's, 3,600; "
                      "the monoT5 fine-tuned from it is then trained again)")
  p.add_argument("--dense-steps", type=positive_int, metavar="N",
                 help="with --cross-lingual: training steps of each of the dual encoder's two "
                      "stages (default: 2,000 on XPI's pairs, then 3,000; both trained anew)")
  p.set_defaults(func=run, files=files, accepts_extra=True, overwrite=False)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the work directory is the demo's own (it
  reuses and resumes what it finds there) or new."""
  import os

  from t5rank.files import WORK, Output, holds
  from t5rank.pipelines.training_runs import RECIPE_FILE
  from t5rank.pipelines.insuranceqa_cascade import JOB_FILE

  cascade = not args.monot5_only
  workdir = args.workdir or _job(args).workdir
  # each job's directory is its own: the cascade's has its JOB_FILE, the single-model job's not
  cascades = holds(JOB_FILE)
  single = holds("results.json", "bm25.run", os.path.join("model", RECIPE_FILE))
  owned = cascades if cascade else (lambda path: single(path) and not cascades(path))
  return ([Output("--output", workdir, WORK, owned)],
          {f"--gin_file {path}": path for path in args.gin_file or ()})


def run(args: argparse.Namespace) -> int:
  import logging

  from t5rank.pipelines.insuranceqa import run_insuranceqa
  from t5rank.training.gin_config import gin_bindings

  bindings = gin_bindings(args.extra)
  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  logging.getLogger("t5rank").setLevel(logging.INFO)
  job = _job(args)
  if (args.pretrain_steps or args.dense_steps) and not args.cross_lingual:
    raise SystemExit("t5rank demo: --pretrain-steps and --dense-steps go with --cross-lingual "
                     "(the English jobs have no pre-training and no dual encoder)")
  if (args.distil or args.teacher_queries) and (args.monot5_only or args.cross_lingual):
    raise SystemExit("t5rank demo: --distil goes with the English cascade (not --monot5-only or "
                     "--cross-lingual)")
  if args.teacher_queries and not args.distil:
    raise SystemExit("t5rank demo: --teacher-queries goes with --distil")
  if not args.monot5_only:
    if args.gin_file:
      raise SystemExit("t5rank demo: --gin_file goes with --monot5-only (the cascade's recipes "
                       "are its models' own; --gin.NAME=VALUE changes every one)")
    if args.depth is not None and len(args.depth) != len(job.rerankers):
      raise SystemExit(f"t5rank demo: --depth: {len(job.rerankers)} numbers, "
                       f"{','.join(row.upper() for row, _ in job.rerankers)}, got "
                       f"{','.join(map(str, args.depth))}")
    from t5rank.pipelines.insuranceqa_cascade import run_insuranceqa_cascade
    _check_gin([([m.gin_file], [*m.bindings, *bindings, *_placeholders(m)])
                for m in job.models])
    steps = {}
    if args.pretrain_steps:
      steps["xpr_pretrained"] = [f"TRAIN_STEPS = {args.pretrain_steps}"]
    if args.dense_steps:
      for name in ("xpr_dual_encoder_xpi", "xpr_dual_encoder"):
        steps[name] = [f"TRAIN_STEPS = {args.dense_steps}"]
    run_insuranceqa_cascade(workdir=args.workdir, num_queries=args.queries, depths=args.depth,
                            gin_bindings=bindings, retrain=args.retrain,
                            tune_queries=args.tune_queries, distil=args.distil,
                            teacher_queries=args.teacher_queries, job=job,
                            model_bindings=steps)
    return 0
  if args.depth is not None and len(args.depth) != 1:
    raise SystemExit("t5rank demo: --depth: with --monot5-only one number, the BM25 candidates "
                     f"monoT5 reranks per query; got {','.join(map(str, args.depth))}")
  _check_gin([(list(args.gin_file or [job.gin_file]), bindings)])
  run_insuranceqa(workdir=args.workdir, depth=args.depth[0] if args.depth else DEFAULT_DEPTH,
                  num_queries=args.queries,
                  gin_files=args.gin_file, gin_bindings=bindings, retrain=args.retrain,
                  tune_queries=args.tune_queries or TUNE_QUERIES, job=job,
                  pretrain_bindings=[f"TRAIN_STEPS = {args.pretrain_steps}"]
                  if args.pretrain_steps else (),
                  dense_bindings=[f"TRAIN_STEPS = {args.dense_steps}"]
                  if args.dense_steps else ())
  return 0


def _check_gin(recipes) -> None:
  """Parses each (gin files, bindings) of the job's models before any work: a misspelt
  --gin.NAME, a bad value or a broken gin file is refused before the data is exported."""
  from t5rank.training.gin_config import recipe

  for gin_files, bindings in recipes:
    recipe(gin_files, bindings)


def _placeholders(model) -> list[str]:
  """The bindings a cascade model gets from the models before it (INIT_CHECKPOINT,
  TEACHER_SCORES), as placeholders: enough to parse its gin."""
  from t5rank.training.gin_config import INIT_PLACEHOLDER, TEACHER_PLACEHOLDER

  return ([f"INIT_CHECKPOINT = {INIT_PLACEHOLDER!r}"] if model.init else []) + (
      [f"TEACHER_SCORES = {TEACHER_PLACEHOLDER!r}"] if model.distilled else [])


def _job(args: argparse.Namespace):
  """The job the flags choose: a cascade (English or XPR) or a single-model job (`Job`)."""
  if args.monot5_only:
    return CROSS_LINGUAL if args.cross_lingual else ENGLISH
  return XPR_CASCADE if args.cross_lingual else ENGLISH_CASCADE
