"""`t5rank teacher`: a teacher's scores of InsuranceQA's training questions, once, for distillation
(`t5rank.pipelines.teacher`).

    t5rank teacher --checkpoint shipped:monot5 -o runs/teacher_monot5
    t5rank teacher --checkpoint bm25 --checkpoint shipped:tk --checkpoint shipped:monot5 \
        --weights 0.05,0.55,0.4 -o runs/teacher_fused          # the cascade's fusion as teacher
    t5rank train --gin_file=gin/experiments/tk_distill_insuranceqa_cpu.gin \\
        --gin.TEACHER_SCORES="'runs/teacher_monot5'" --gin.MODEL_DIR=runs/tk_distilled

Each training question's relevant answers and --negatives non-relevant answers of its pool (drawn
with --seed) are scored by the teacher (any reranker checkpoint; `shipped:NAME` for a shipped one),
with their BM25 scores in the candidate run for a teacher that reads them. OUTPUT holds the data,
candidates.run, scores.run and teacher.json (the teacher, its hashes, the sample, the scores'
hash); an interrupted scoring resumes when the same command runs again. Students read OUTPUT as a
triple source (`tk_triples.teacher_task`, docs/distillation.md). Only the train split is used.
"""

from __future__ import annotations

import argparse
import os

from t5rank.commands import positive_int, renamed


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("teacher", help="a teacher's scores of the training questions, for "
                                            "distillation", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--checkpoint", required=True, action="append",
                 help="the teacher: a reranker checkpoint, or shipped:NAME (e.g. shipped:monot5); "
                      "repeated, with --weights, a fused teacher (`bm25` names the candidates' "
                      "BM25 scores)")
  p.add_argument("--weights", metavar="W,W,...",
                 help="with several --checkpoint: their fusion weights (z-scores per question, "
                      "as `t5rank fuse`), e.g. the cascade's tuned ones")
  p.add_argument("--negatives", type=positive_int, default=20, metavar="N",
                 help="non-relevant answers of each question's pool scored (default 20)")
  p.add_argument("--seed", type=int, default=0, help="the draw of those answers (default 0)")
  p.add_argument("--num-queries", type=positive_int, metavar="N", dest="queries",
                 help="only the first N training questions (default: all 12,889)")
  renamed(p, "--queries", "--num-queries", "queries", type=positive_int)
  p.add_argument("-o", "--output", required=True, help="the directory of the teacher's scores")
  p.add_argument("--overwrite", action="store_true",
                 help="score again from the start in OUTPUT (its earlier scores are replaced); "
                      "without it an interrupted run resumes there")
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`: the directory is the command's own (it
  resumes there) or new."""
  from t5rank.checkpoints.locate import local_path
  from t5rank.data.teacher import CANDIDATES_FILE
  from t5rank.files import WORK, Output, owned_by

  def legacy(path: str) -> bool:  # written before t5rank marked its directories
    return all(os.path.exists(os.path.join(path, name))
               for name in (CANDIDATES_FILE, os.path.join("data", "corpus.jsonl")))

  return ([Output("-o", args.output, WORK, owned_by("teacher", legacy))],
          {f"--checkpoint {c}": local_path(c) for c in args.checkpoint if c != "bm25"})


def run(args: argparse.Namespace) -> int:
  import logging

  from t5rank.pipelines.teacher import build_teacher_scores

  logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
  weights = None
  if args.weights:
    try:
      weights = [float(w) for w in args.weights.split(",")]
    except ValueError:
      raise SystemExit(f"t5rank teacher: --weights takes numbers W,W,..., got {args.weights!r}")
  info = build_teacher_scores(args.output, args.checkpoint, weights=weights,
                              negatives=args.negatives, seed=args.seed, num_queries=args.queries,
                              overwrite=args.overwrite)
  print(f"wrote {args.output}: {info['pairs']} pairs of {info['queries']} training questions "
        f"scored by {' + '.join(args.checkpoint)} in {info['seconds']:.0f} s")
  return 0
