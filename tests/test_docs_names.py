"""The map is right (#68 item 6): every dotted `t5rank.…` name in the package's docstrings and
comments, the scripts, the gin files, README.md, BENCHMARKS.md and docs/ names something that
exists, and a function or class by the module that defines it, unless that module exports it
(`__all__`; `t5rank.load` and `t5rank.Ranker` are the package's own). File names such as
`t5rank.json` are not module paths."""

from __future__ import annotations

import glob
import importlib
import inspect
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = re.compile(r"(?<![\w./-])t5rank(?:\.[A-Za-z_]\w*)+(?![\w/-])")
FILE_SUFFIXES = (".json", ".md", ".py", ".gin", ".tsv", ".model")
SOURCES = ("t5rank/**/*.py", "tasks/*.py", "benchmarks/**/*.py", "scripts/*.py", "gin/**/*.gin",
           "README.md", "BENCHMARKS.md", "docs/*.md")


def problem(dotted: str):
  """None when `dotted` names what it should (module docstring), else why not."""
  parts = dotted.split(".")
  for i in range(len(parts), 0, -1):
    module_name = ".".join(parts[:i])
    try:
      obj = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
      if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
        continue
      raise
    module = obj
    for j, attr in enumerate(parts[i:]):
      if not hasattr(obj, attr):
        last = j == len(parts) - i - 1
        if last and attr in getattr(obj, "__dataclass_fields__", {}):
          return None  # a field of a dataclass
        return f"{'.'.join(parts[:i + j])} has no {attr}"
      obj = getattr(obj, attr)
      exported = attr in getattr(module, "__all__", ()) or module_name == "t5rank"
      if (j == 0 and (inspect.isfunction(obj) or inspect.isclass(obj)) and not exported
          and obj.__module__ != module_name):
        return f"defined in {obj.__module__}"
    return None
  return "no such module"


def test_every_dotted_name_in_docs_and_docstrings_resolves():
  found: dict[str, set[str]] = {}
  for pattern in SOURCES:
    for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
      with open(path, encoding="utf-8") as f:
        for name in NAME.findall(f.read()):
          if not name.endswith(FILE_SUFFIXES):
            found.setdefault(name, set()).add(os.path.relpath(path, ROOT))
  assert len(found) > 100  # the scan reads what it should
  wrong = {f"{name}: {why} ({', '.join(sorted(found[name])[:3])})"
           for name in found for why in [problem(name)] if why}
  assert not wrong, "\n".join(sorted(wrong))
