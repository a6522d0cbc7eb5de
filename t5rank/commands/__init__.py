"""The `t5rank` subcommands, one module each with `add_parser(subparsers)` and `run(args)`: they
parse flags and call the library (`t5rank.ranking`, `t5rank.retrieval`, `t5rank.training`, ...);
`t5rank.cli` dispatches. Heavy libraries are imported inside `run`, so `t5rank --help` stays fast."""

import argparse


def positive_int(text: str) -> int:
  """argparse type: a positive integer."""
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
  return value
