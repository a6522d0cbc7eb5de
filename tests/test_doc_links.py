"""Every relative link and #anchor of README.md, BENCHMARKS.md, HISTORY.md and docs/*.md resolves
(scripts/check_doc_links.py); the anchor rule checked on headings a person can work out by hand."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checker():
  spec = importlib.util.spec_from_file_location(
      "check_doc_links", os.path.join(ROOT, "scripts", "check_doc_links.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


check_doc_links = _checker()


def test_every_link_of_the_pages_resolves():
  pages = check_doc_links.default_pages(ROOT)
  names = {os.path.relpath(p, ROOT) for p in pages}
  assert {"README.md", "BENCHMARKS.md", "HISTORY.md", "docs/training.md"} <= names
  assert check_doc_links.check(pages) == []


def test_anchor_follows_githubs_rule():
  assert check_doc_links.anchor("The cascade: `make demo`") == "the-cascade-make-demo"
  assert check_doc_links.anchor("BM25 and BM25+RM3") == "bm25-and-bm25rm3"
  assert (check_doc_links.anchor("The XPR cascade: `t5rank demo --cross-lingual`")
          == "the-xpr-cascade-t5rank-demo---cross-lingual")
  assert check_doc_links.anchor("The paper's Table 3, 2,000 steps") == "the-papers-table-3-2000-steps"
  assert check_doc_links.anchor("snake_case kept") == "snake_case-kept"


def test_repeated_headings_are_numbered():
  text = "# A\n## Setup\n```\n## Setup\n```\n## Setup\n"
  assert check_doc_links.anchors(text) == {"a", "setup", "setup-1"}


def test_broken_links_are_reported(tmp_path):
  (tmp_path / "other.md").write_text("# Other page\n## A section\n")
  page = tmp_path / "page.md"
  page.write_text("# Page\n"
                  "[fine](other.md#a-section) [here](#page) [web](https://example.org/x)\n"
                  "[gone](missing.md) [no anchor](other.md#nowhere) [self](#nope)\n"
                  "`[in code](missing_too.md)`\n"
                  "```\n[in a block](missing_three.md)\n```\n")
  problems = check_doc_links.check([str(page)])
  assert len(problems) == 3
  assert "missing.md: no such file" in problems[0]
  assert "other.md#nowhere: no heading" in problems[1]
  assert "#nope: no heading" in problems[2]
  assert all(":3:" in p for p in problems)
