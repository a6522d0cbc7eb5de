"""The one interface every first stage serves: `t5rank retrieve`, the demo and the cascade only talk
to a `Retriever`.

    corpus ─► Retriever.build(corpus, ...) (or .load(directory)) ─► .save(directory)
    queries ─► .retrieve(queries, k=..., candidates=...) ─► a run {qid: [(docid, score)], best first}

BM25 and BM25+RM3 (`t5rank.retrieval.bm25.BM25`) are the first implementations; a dense retriever
is the next. A run with `candidates` reranks each query's candidate list instead of searching the
whole corpus (every candidate kept, whatever its score).
"""

from __future__ import annotations

import abc
from typing import Mapping, Optional

from t5rank.data.readers import Document, Run


class Retriever(abc.ABC):
  """A first-stage ranker over an indexed corpus. `name` is the tag of the runs it writes."""

  name: str = ""

  @classmethod
  @abc.abstractmethod
  def build(cls, corpus: Mapping[str, Document], **options) -> "Retriever":
    """Indexes `corpus` ({docid: Document})."""

  @classmethod
  @abc.abstractmethod
  def load(cls, directory: str, **options) -> "Retriever":
    """Reads an index written by `save`."""

  @abc.abstractmethod
  def save(self, directory: str) -> None:
    """Writes the index to `directory` atomically (built under a temporary name, then renamed)."""

  @abc.abstractmethod
  def retrieve(self, queries: Mapping[str, str], *, k: int = 1000,
               candidates: Optional[Run] = None) -> Run:
    """The top `k` documents of each query, best first (ties by document id); with `candidates`,
    each query's own candidates reranked, queries without candidates left out."""
