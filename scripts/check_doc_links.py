"""Checks that every relative Markdown link of the project's pages resolves.

    python scripts/check_doc_links.py            # README.md, BENCHMARKS.md, HISTORY.md, docs/*.md
    python scripts/check_doc_links.py FILE.md ...

A link `[text](path)` or `![alt](path)` must name a file or directory that exists, relative to the
page; `[text](path.md#anchor)` and `[text](#anchor)` must also name a heading of that page, by
GitHub's anchor rule (`anchor`): the heading's text lowercased, every character other than a
letter, a digit, a space, '-' or '_' dropped, spaces turned into '-', and a heading that repeats
an earlier one's anchor suffixed -1, -2, ... Links to the web (`http:`, `https:`, `mailto:`) are
not fetched. Fenced code blocks and `inline code` are not read for links (nor for headings).
Prints one line per broken link (`FILE:LINE: target: why`) and exits 1 when there is one.
Imports nothing beyond the standard library.
"""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ("README.md", "BENCHMARKS.md", "HISTORY.md", "docs/*.md")

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def anchor(heading: str) -> str:
  """GitHub's anchor of a heading's text: `The cascade: \\`make demo\\`` -> `the-cascade-make-demo`."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
  return text.replace(" ", "-")


def outside_fences(text: str):
  """(line number, line) of each line outside fenced code blocks (the fences excluded)."""
  fenced = None
  for number, line in enumerate(text.splitlines(), 1):
    fence = FENCE.match(line)
    if fence:
      if fenced is None:
        fenced = fence.group(1)
      elif fence.group(1) == fenced:
        fenced = None
      continue
    if fenced is None:
      yield number, line


def prose_lines(text: str) -> list[tuple[int, str]]:
  """(line number, line) of the lines outside fenced code blocks, inline code spans blanked."""
  return [(number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line))
          for number, line in outside_fences(text)]


def anchors(text: str) -> set[str]:
  """Every heading anchor of a Markdown page (its headings' inline code read as text), repeats
  suffixed -1, -2, ... as GitHub does."""
  seen: dict[str, int] = {}
  found = set()
  for _, line in outside_fences(text):
    match = HEADING.match(line)
    if not match:
      continue
    slug = anchor(match.group(2))
    if slug in seen:
      seen[slug] += 1
      slug = f"{slug}-{seen[slug]}"
    else:
      seen[slug] = 0
    found.add(slug)
  return found


def check(paths: list[str]) -> list[str]:
  """The broken links of the given Markdown files, one message each."""
  problems = []
  anchor_cache: dict[str, set[str]] = {}

  def anchors_of(path: str) -> set[str]:
    if path not in anchor_cache:
      with open(path, encoding="utf-8") as f:
        anchor_cache[path] = anchors(f.read())
    return anchor_cache[path]

  for page in paths:
    with open(page, encoding="utf-8") as f:
      text = f.read()
    shown = os.path.relpath(page, ROOT)
    for number, line in prose_lines(text):
      for match in LINK.finditer(line):
        target = match.group(1)
        if EXTERNAL.match(target):
          continue
        path_part, _, fragment = target.partition("#")
        destination = (os.path.normpath(os.path.join(os.path.dirname(page), path_part))
                       if path_part else page)
        if not os.path.exists(destination):
          problems.append(f"{shown}:{number}: {target}: no such file")
          continue
        if fragment and destination.endswith(".md"):
          if fragment not in anchors_of(destination):
            problems.append(f"{shown}:{number}: {target}: no heading with anchor "
                            f"#{fragment} in {os.path.relpath(destination, ROOT)}")
  return problems


def default_pages(root: str = ROOT) -> list[str]:
  """README.md, BENCHMARKS.md, HISTORY.md and docs/*.md of the checkout, those that exist."""
  pages = []
  for pattern in PAGES:
    if pattern.endswith("*.md"):
      folder = os.path.join(root, os.path.dirname(pattern))
      if os.path.isdir(folder):
        pages += sorted(os.path.join(folder, name) for name in os.listdir(folder)
                        if name.endswith(".md"))
    elif os.path.exists(os.path.join(root, pattern)):
      pages.append(os.path.join(root, pattern))
  return pages


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  pages = [os.path.abspath(p) for p in argv] or default_pages()
  problems = check(pages)
  for problem in problems:
    print(problem)
  if not problems:
    print(f"{len(pages)} pages, every relative link resolves")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
