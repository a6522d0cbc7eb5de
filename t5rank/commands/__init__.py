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


def refuse_overwriting_inputs(command: str, outputs: dict, inputs: dict, *,
                              directories: bool = False) -> None:
  """Exits (status 1) naming both flags when an output path is an input path of the same command
  (or two outputs are one file), before any work: writing it would destroy the input. `outputs` and
  `inputs` map a flag to a path (None: not given); outputs are files unless `directories`."""
  import os

  seen: dict[str, str] = {}
  for flag, path in inputs.items():
    if path:
      seen.setdefault(os.path.realpath(path), flag)
  for flag, path in outputs.items():
    if not path:
      continue
    real = os.path.realpath(path)
    if real in seen:
      raise SystemExit(f"t5rank {command}: {flag} {path} is also {seen[real]}; writing it would "
                       "overwrite that input (or the other output): give another path")
    if os.path.isdir(real) and not directories:
      raise SystemExit(f"t5rank {command}: {flag} {path} is a directory; give a file path")
    seen[real] = flag
