"""Writes docs/cli.md, the reference of every `t5rank` command, from the argparse parsers
themselves (tests/test_cli_reference.py fails when the file is stale):

    .venv/bin/python scripts/make_cli_reference.py          # rewrites docs/cli.md
    .venv/bin/python scripts/make_cli_reference.py --check  # exit 1 when docs/cli.md differs
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "docs", "cli.md")
WIDTH = "100"  # argparse wraps help to $COLUMNS: fixed, so the text is the same on every terminal


def reference() -> str:
  """docs/cli.md's text: each command's `--help`, in the order of `t5rank --help`."""
  os.environ["COLUMNS"] = WIDTH
  from t5rank.cli import COMMANDS, build_parser

  parser = build_parser()
  subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
  parts = ["# Command reference\n",
           "Generated from the parsers by `scripts/make_cli_reference.py`; do not edit by hand.",
           "Every command also answers `t5rank COMMAND --help`. Conventions: kebab-case flags "
           "(t5x's `--gin_file` and `--gin.NAME=VALUE` kept, `--gin-file` accepted too), "
           "`-o/--output` for what a command writes, `--overwrite` to replace it, `--queries` a "
           "file and `--num-queries` a count, `--depth` how many candidates per query, "
           "`--language` a language or BM25 analyzer. Old spellings (`--k`, `--analyzer`, "
           "`--first-depth`, `--sentence-language`, `--workdir`, `--depths`, `--top`, `--n`, "
           "`--queries N`) are accepted for one release with a line naming the new flag.\n",
           "```\n" + parser.format_help().rstrip() + "\n```\n"]
  for name in COMMANDS:
    parts.append(f"## t5rank {name}\n\n```\n{subparsers.choices[name].format_help().rstrip()}\n```\n")
  return "\n".join(parts)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
  args = parser.parse_args(argv)
  text = reference()
  if args.check:
    with open(PATH, encoding="utf-8") as f:
      stale = f.read() != text
    if stale:
      print(f"{PATH} is stale: run scripts/make_cli_reference.py", file=sys.stderr)
    return int(stale)
  with open(PATH + ".tmp", "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(PATH + ".tmp", PATH)
  print(f"wrote {PATH}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
