"""`t5rank xpr`: the cross-lingual (XPR) construction of InsuranceQA's pools, as ranking-job files.

    t5rank xpr --split test --seed 0 --output runs/xpr_test
    t5rank retrieve --corpus runs/xpr_test/corpus.jsonl --queries runs/xpr_test/queries.tsv \\
        --candidates runs/xpr_test/pool.run --language zh --output runs/xpr_test/bm25.run
    t5rank score --checkpoint CKPT --queries runs/xpr_test/queries.tsv \\
        --corpus runs/xpr_test/corpus.jsonl --run runs/xpr_test/bm25.run --output xpr.run

Chen et al. 2020 (section V-A-2): each query of the split is replaced by its Chinese translation on
a coin toss, and a random half of each query's pool (n // 2 of its n answers) by the answers'
translations. Seeded: the same split and seed give the same files. Writes queries.tsv,
corpus.jsonl (all 27,413 answers in both languages; a Chinese answer's id is `ID:zh`), qrels.txt,
pool.run and xpr.json (the seed and every query's language). The code is `t5rank.data.xpr`.
"""

from __future__ import annotations

import argparse

from t5rank.commands import add_overwrite, positive_int, renamed


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("xpr", help="write InsuranceQA's cross-lingual (XPR) pools: queries "
                            "and half of each pool in Chinese", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--split", choices=("train", "validation", "test"), default="test",
                 help="InsuranceQA split (default: test)")
  p.add_argument("--seed", type=int, default=0, help="the construction's seed (default: 0)")
  p.add_argument("--num-queries", type=positive_int, default=None, metavar="N", dest="queries",
                 help="only the first N queries by id (default: all)")
  renamed(p, "--queries", "--num-queries", "queries", type=positive_int)
  p.add_argument("-o", "--output", required=True, help="directory to write the files to")
  add_overwrite(p)
  p.set_defaults(func=run, files=files)


def files(args: argparse.Namespace):
  """(outputs, inputs) of `t5rank.files.check_outputs`."""
  from t5rank.files import DIRECTORY, Output, holds

  return [Output("--output", args.output, DIRECTORY, holds("xpr.json"))], {}


def run(args: argparse.Namespace) -> int:
  import json

  from t5rank.data.xpr import export_xpr

  paths = export_xpr(args.output, args.split, args.seed, args.queries)
  with open(paths["xpr.json"], encoding="utf-8") as f:
    counts = json.load(f)["counts"]
  print(f"XPR {args.split} (seed {args.seed}): {counts['queries_en']} English and "
        f"{counts['queries_zh']} Chinese queries; candidates {counts['candidates_en']} English, "
        f"{counts['candidates_zh']} Chinese; wrote {', '.join(sorted(paths))} to {args.output}")
  return 0
