"""The CLI's documentation is the CLI's: docs/cli.md is generated from the parsers and fails here
when stale, and every `t5rank ...` command shown in README.md and docs/ parses with the real
parser (an example with a flag the command does not take fails)."""

from __future__ import annotations

import glob
import os
import re
import shlex
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_cli_reference  # noqa: E402


def test_the_cli_reference_is_not_stale():
  with open(make_cli_reference.PATH, encoding="utf-8") as f:
    assert f.read() == make_cli_reference.reference(), (
        "docs/cli.md is stale: run .venv/bin/python scripts/make_cli_reference.py")


def documented_commands() -> list[tuple[str, int, str]]:
  """(file, line, command) of every `t5rank ...` line in a fenced code block of README.md and
  docs/*.md (docs/cli.md excepted), `\\` continuations joined, comments cut; synopses (with
  `[`, `|` or `...`) are not commands and are left out."""
  found = []
  for path in [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                                 "*.md")))]:
    if path.endswith("cli.md"):
      continue
    with open(path, encoding="utf-8") as f:
      lines = f.read().splitlines()
    fenced, i = False, 0
    while i < len(lines):
      line = lines[i]
      if line.lstrip().startswith("```"):
        fenced = not fenced
      elif fenced and re.match(r"\s*(\.venv/bin/)?t5rank\s", line):
        start, text = i, line
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
          i += 1
          text = text.rstrip()[:-1] + " " + lines[i].strip()
        text = re.sub(r"\s+#\s.*$", "", text).strip()
        text = re.sub(r"\s*&$", "", text)  # started in the background
        if not any(mark in text for mark in ("[", "|", "...", "…", "{", "--help")):
          found.append((os.path.relpath(path, ROOT), start + 1, text))
      i += 1
  return found


COMMANDS = documented_commands()


def test_the_docs_show_commands():
  assert len(COMMANDS) > 30


@pytest.mark.parametrize("where, line, command", COMMANDS,
                         ids=[f"{w}:{n}" for w, n, _ in COMMANDS])
def test_each_documented_command_parses(where, line, command, capsys):
  from t5rank.cli import build_parser

  words = shlex.split(command)
  words = words[1:]  # `t5rank` or `.venv/bin/t5rank`
  try:
    args, extra = build_parser().parse_known_args(words)
  except SystemExit:
    pytest.fail(f"{where}:{line}: `{command}` does not parse: {capsys.readouterr().err.strip()}")
  bad = [w for w in extra if not (getattr(args, "accepts_extra", False) and
                                  w.startswith("--gin."))]
  assert not bad, f"{where}:{line}: `{command}`: the command takes no {bad}"
  assert "is now" not in capsys.readouterr().err, f"{where}:{line}: an old flag spelling"
