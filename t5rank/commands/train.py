"""`t5rank train`: train a model from gin files; how gin is read is `t5rank.training.gin_config`."""

from __future__ import annotations

import argparse

from t5rank.training import gin_config
from t5rank.training.gin_config import gin_bindings, parse_gin, train_configured


def add_parser(subparsers) -> None:
  p = subparsers.add_parser("train", help="fine-tune a monoT5 reranker from gin files",
                            description=gin_config.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--gin_file", "--gin-file", action="append", default=[], metavar="PATH",
                 help="gin file (repeatable; later files override earlier ones). Searched in the "
                      "current directory, then in t5rank's own gin/ (models, runs, experiments)")
  p.add_argument("--gin_search_path", "--gin-search-path", action="append", default=[],
                 metavar="DIR",
                 help="extra directory for gin files and their include lines")
  p.set_defaults(func=run, accepts_extra=True)


def run(args: argparse.Namespace) -> int:
  from t5rank import partitioning

  partitioning.initialize_distributed()
  parse_gin(args.gin_file, gin_bindings(args.extra), args.gin_search_path)
  train_configured()
  return 0
