"""The `t5rank` command. Each subcommand lives in its own module, which provides
`add_parser(subparsers)`; this file only dispatches. Command modules import heavy libraries (and
never TensorFlow on the scoring path) inside their run functions, so `t5rank --help` stays fast."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# subcommand -> module that defines add_parser(subparsers)
COMMANDS = {
    "demo": "t5rank.commands.demo",
    "convert": "t5rank.commands.convert",
    "train": "t5rank.commands.train",
    "inspect-task": "t5rank.commands.inspect_task",
    "retrieve": "t5rank.commands.retrieve",
    "index": "t5rank.commands.index",
    "pairs-to-retrieval": "t5rank.commands.pairs_to_retrieval",
    "evaluate": "t5rank.commands.evaluate",
    "fuse": "t5rank.commands.fuse",
    "score": "t5rank.commands.score",
    "rerank": "t5rank.commands.rerank",
    "teacher": "t5rank.commands.teacher",
    "topics": "t5rank.commands.topics",
    "xpr": "t5rank.commands.xpr",
    "embeddings": "t5rank.commands.embeddings",
    "explain": "t5rank.commands.explain",
    "ensemble": "t5rank.commands.ensemble",
    "serve": "t5rank.commands.serve",
}


# loggers whose INFO lines are the libraries' own business, not the user's
QUIET_LOGGERS = ("jax._src.xla_bridge", "absl")
# commands that compile JAX programs (t5rank.compilation caches them across runs)
COMPILING_COMMANDS = ("score", "rerank", "train", "demo", "index", "retrieve", "explain",
                      "teacher", "serve")
# commands whose data pipeline imports TensorFlow (SeqIO)
TENSORFLOW_COMMANDS = ("train", "demo", "inspect-task")


def import_tensorflow_quietly() -> None:
  """Imports TensorFlow with the process's stderr sent to /dev/null meanwhile: its C++ libraries
  log start-up lines (oneDNN, no CUDA driver) before TF_CPP_MIN_LOG_LEVEL is read. An import
  error is still raised, after stderr is back."""
  if "tensorflow" in sys.modules:
    return
  sys.stderr.flush()
  saved = os.dup(2)
  try:
    with open(os.devnull, "w") as null:
      os.dup2(null.fileno(), 2)
      import tensorflow  # noqa: F401
  finally:
    os.dup2(saved, 2)
    os.close(saved)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="t5rank",
      description="monoT5 document ranking in JAX: train, score, retrieve, evaluate.")
  parser.add_argument("--debug", action="store_true",
                      help="show the Python traceback of an error instead of its one-line message")
  parser.add_argument("--no-compilation-cache", action="store_true",
                      help="compile every program anew instead of reusing JAX's persistent cache "
                           "(t5rank.compilation; also T5RANK_COMPILATION_CACHE=0)")
  subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
  for module in COMMANDS.values():
    importlib.import_module(module).add_parser(subparsers)
  return parser


def main(argv: list[str] | None = None) -> int:
  from t5rank.allocator import keep_freed_memory

  keep_freed_memory()  # glibc: reuse freed memory instead of page-faulting it back every step
  # jax reports at INFO that it found no TPU library, on every CPU or GPU machine; orbax (through
  # absl's logger) reports ten lines of INFO for every checkpoint it reads
  for name in QUIET_LOGGERS:
    logging.getLogger(name).setLevel(logging.WARNING)
  parser = build_parser()
  args, extra = parser.parse_known_args(argv)
  if extra and not getattr(args, "accepts_extra", False):
    parser.error(f"unrecognized arguments: {' '.join(extra)}")
  if getattr(args, "accepts_extra", False):
    args.extra = extra
  if args.command in TENSORFLOW_COMMANDS:
    import_tensorflow_quietly()
  if args.command in COMPILING_COMMANDS and not args.no_compilation_cache:
    from t5rank.compilation import enable_compilation_cache

    enable_compilation_cache()
  # User errors (bad input, missing files, unreadable checkpoints, refused resumes, NaN stops) end
  # in one line on stderr.
  try:
    files = getattr(args, "files", None)
    if files is not None:  # before any work: no output may destroy an input or a file not ours
      from t5rank.files import check_outputs

      outputs, inputs = files(args)
      check_outputs(outputs, inputs, overwrite=args.overwrite)
    return int(args.func(args) or 0)
  except (ValueError, OSError, RuntimeError, FloatingPointError) as e:
    if args.debug:
      raise
    message = str(e).split("\n  In call to configurable")[0]  # gin's addition: a second line
    message = " ".join(line.strip() for line in message.splitlines())  # one line, always
    raise SystemExit(f"t5rank {args.command}: {message}"
                     + ("" if isinstance(e, (ValueError, FileNotFoundError)) else
                        f" ({type(e).__name__}; --debug shows the traceback)")) from None


if __name__ == "__main__":
  sys.exit(main())
