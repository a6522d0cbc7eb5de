"""The `t5rank` subcommands, one module each with `add_parser(subparsers)` and `run(args)`: they
parse flags and call the library (`t5rank.ranking`, `t5rank.retrieval`, `t5rank.training`, ...);
`t5rank.cli` dispatches. Heavy libraries are imported inside `run`, so `t5rank --help` stays fast.

A command that writes files declares them: `p.set_defaults(files=fn)` with `fn(args)` returning
(outputs, inputs) for `t5rank.files.check_outputs`, which `t5rank.cli` runs before the command
(`add_overwrite` gives it the `--overwrite` flag)."""

import argparse


def positive_int(text: str) -> int:
  """argparse type: a positive integer."""
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
  return value


def add_overwrite(parser: argparse.ArgumentParser) -> None:
  """The `--overwrite` flag of a command that writes files."""
  parser.add_argument("--overwrite", action="store_true",
                      help="replace an output that exists (atomically); a directory only when "
                           "this command wrote it")
