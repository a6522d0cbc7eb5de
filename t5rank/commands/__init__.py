"""The `t5rank` subcommands, one module each with `add_parser(subparsers)` and `run(args)`: they
parse flags and call the library (`t5rank.ranking`, `t5rank.retrieval`, `t5rank.training`, ...);
`t5rank.cli` dispatches. Heavy libraries are imported inside `run`, so `t5rank --help` stays fast.

A command that writes files declares them: `p.set_defaults(files=fn)` with `fn(args)` returning
(outputs, inputs) for `t5rank.files.check_outputs`, which `t5rank.cli` runs before the command
(`add_overwrite` gives it the `--overwrite` flag)."""

import argparse


from t5rank.ranking.options import positive_int  # noqa: E402  (the commands' argparse type)


def resolved(args: argparse.Namespace, flag: str = "checkpoint"):
  """The `t5rank.checkpoints.resolved.Checkpoint` that flag `flag` names (`args.checkpoint`), resolved
  on the first call and kept on `args`: a command's `files` and `run` read it once between them."""
  from t5rank.checkpoints.resolved import resolve

  kept = vars(args).setdefault("_resolved", {})
  if flag not in kept:
    kept[flag] = resolve(getattr(args, flag))
  return kept[flag]


def checkpoint_path(args: argparse.Namespace, flag: str = "checkpoint") -> str:
  """The local path of flag `flag`'s checkpoint for a command's `files` (`resolved`, kept for
  `run`); where it holds no checkpoint, the path as named, and `run` says so after checking its
  options and inputs."""
  from t5rank.checkpoints.locate import local_path

  try:
    return resolved(args, flag).path
  except FileNotFoundError:
    return local_path(getattr(args, flag))


def add_overwrite(parser: argparse.ArgumentParser) -> None:
  """The `--overwrite` flag of a command that writes files."""
  parser.add_argument("--overwrite", action="store_true",
                      help="replace an output that exists (atomically); a directory only when "
                           "this command wrote it")


class _Renamed(argparse.Action):
  """An old spelling of a flag, accepted for one release with a line saying its new name."""

  def __init__(self, option_strings, dest, new: str = "", **kwargs):
    self.new = new
    super().__init__(option_strings, dest, **kwargs)

  def __call__(self, parser, namespace, values, option_string=None):
    import sys

    print(f"t5rank: {option_string} is now {self.new}; the old spelling is accepted until the "
          "next release", file=sys.stderr)
    setattr(namespace, self.dest, True if self.nargs == 0 else values)


def renamed(parser, old: str, new: str, dest: str, **kwargs) -> None:
  """Accepts the flag `old` (hidden from --help) as the flag `new` (whose `dest` it sets), saying
  so on stderr; `kwargs` as the new flag's (`type`, `nargs=0` for a switch)."""
  parser.add_argument(old, action=_Renamed, new=new, dest=dest, help=argparse.SUPPRESS,
                      default=argparse.SUPPRESS, **kwargs)
