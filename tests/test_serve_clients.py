"""docs/serving.md's client examples as printed, against a served shipped:tk on 127.0.0.1: the
`requests` example, and litellm's Cohere rerank against a base URL (when litellm is installed: it
is no dependency of t5rank). The wire shapes themselves are tests/test_serve.py's and
tests/test_serve_guard.py's."""

from __future__ import annotations

import os
import re

import pytest
import requests
from test_serve import Running  # noqa: E402  (tests/ is on the path)

import t5rank

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tk():
  return t5rank.load("shipped:tk")


@pytest.fixture(scope="module")
def served(tk):
  running = Running(tk, warm_up=lambda r: {})
  running.wait_ready(10)
  yield running
  running.stop()


def doc_example(page: str, heading: str, url: str) -> dict:
  """Runs the first ```python block under `heading` of `page` (docs/...) against the server at
  `url` (for the page's http://127.0.0.1:8080); returns its variables."""
  with open(os.path.join(ROOT, page), encoding="utf-8") as f:
    text = f.read()
  code = re.search(r"```python\n(.*?)```", text[text.index(f"\n{heading}\n"):], re.S).group(1)
  variables: dict = {}
  exec(compile(code.replace("http://127.0.0.1:8080", url), f"{page} {heading}", "exec"),
       variables)
  return variables


def test_the_requests_example_of_docs_serving_runs(served, tk):
  example = doc_example("docs/serving.md", "## Python (`requests`)", served.url)
  passages = example["passages"]
  assert example["best"] == [passages[r["corpus_id"]] for r in tk.rank(example["body"]["query"],
                                                                        passages)]


def test_litellm_reranks_through_a_cohere_base_url(served, tk):
  pytest.importorskip("litellm")
  example = doc_example("docs/serving.md", "## litellm", served.url)
  passages = example["passages"]
  expected = tk.rank("does life insurance cover a car accident", passages, top_k=1)
  assert example["best"] == [passages[r["corpus_id"]] for r in expected]
  assert example["answer"].results[0]["relevance_score"] > 0
