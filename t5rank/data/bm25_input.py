"""monoT5 with the BM25 score in its input (Askari et al., ECIR 2023: "Injecting the BM25 Score as
Text Improves BERT-Based Re-rankers").

    Query: how much is car insurance BM25: 14 Document: The cost of ... Relevant:  ->  true / false

A duoT5 trained this way reads both documents' scores (`t5rank.models.duot5`: `Query: q BM25: 14
Document0: d0 BM25: 9 Document1: d1 Relevant:`; its training source: `insuranceqa_scored`).

The reranker reads the first stage's score of the pair, rounded to an integer, as text
(`t5rank.models.inputs.score_text`); the monoT5 score (the two-logit softmax) is unchanged. For training,
`score_table` attaches to every pair of a `TripleTable` its BM25 score over the table's documents
(the same BM25 as `t5rank retrieve`: `t5rank.retrieval.bm25`, k1 0.9, b 0.4), so that training reads
what scoring will read from the candidates run. A checkpoint trained this way says so in its
metadata.json (`bm25_in_input`), and `t5rank score` then takes each candidate's score from the run.

Why: a from-scratch tiny T5 on CPU learns little exact-term weighting in 30 minutes (it stays
below BM25, docs/training.md); with the score in its input it learns when to trust it and what
to add to it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import numpy as np

from t5rank.retrieval import bm25 as retrieval
from t5rank.data.readers import Document
from t5rank.data import sources
from t5rank.data.sources import TripleTable, mix_tables


def build_index(documents: Sequence[str], language: str = "en") -> retrieval.BM25Index:
  """The BM25 index (t5rank's defaults) of `documents`, ids their positions as strings."""
  return retrieval.BM25Index.build({str(i): Document(text=t) for i, t in enumerate(documents)},
                                   k1=retrieval.DEFAULT_K1, b=retrieval.DEFAULT_B, language=language)


def query_scores(index: retrieval.BM25Index, query: str) -> np.ndarray:
  """BM25 score of every document of `index` for `query` (num_docs,), float64."""
  return index.score(index.query_counts(query)[0]).astype(np.float64)


def score_table(table: TripleTable, language: str = "en") -> TripleTable:
  """`table` with every pair's BM25 score (positives and every pool entry), over `table.documents`.
  Each pool must belong to one query (true of every source's tables)."""
  index = build_index(table.documents, language)
  pool_query = np.full(len(table.pool_starts) - 1, -1, np.int64)
  for (q, _), pool in zip(table.positives, table.positive_pools):
    if pool_query[pool] not in (-1, q):
      raise ValueError(f"pool {pool} is shared by queries {pool_query[pool]} and {q}")
    pool_query[pool] = q
  positive_scores = np.zeros(len(table.positives), np.float64)
  pool_scores = np.zeros(len(table.pool_docs), np.float64)
  rows_of_query: dict[int, list[int]] = {}
  for row, q in enumerate(table.positives[:, 0]):
    rows_of_query.setdefault(int(q), []).append(row)
  pools_of_query: dict[int, list[int]] = {}
  for pool, q in enumerate(pool_query):
    if q >= 0:
      pools_of_query.setdefault(int(q), []).append(pool)
  for q, rows in rows_of_query.items():
    scores = query_scores(index, table.queries[q])
    positive_scores[rows] = scores[table.positives[rows, 1]]
    for pool in pools_of_query[q]:
      entries = slice(table.pool_starts[pool], table.pool_starts[pool + 1])
      pool_scores[entries] = scores[table.pool_docs[entries]]
  return TripleTable(table.queries, table.documents, table.positives, table.positive_pools,
                     table.pool_starts, table.pool_docs, positive_scores, pool_scores)


def top_of_pools(table: TripleTable, depth: int) -> TripleTable:
  """A scored `table` whose pools keep only their `depth` highest-scored entries (ties: the earlier
  entry), the hard negatives of the first stage; pools of at most `depth` entries are kept whole.
  Positives, documents and scores are shared with `table`."""
  if not table.scored:
    raise ValueError("top_of_pools needs a scored table (score_table)")
  if depth < 1:
    raise ValueError(f"depth must be at least 1, got {depth}")
  keep = []
  for pool in range(len(table.pool_starts) - 1):
    start, end = table.pool_starts[pool], table.pool_starts[pool + 1]
    order = np.argsort(-table.pool_scores[start:end], kind="stable")[:depth]
    keep.append(start + np.sort(order))
  entries = np.concatenate(keep) if keep else np.zeros(0, np.int64)
  starts = np.zeros(len(keep) + 1, np.int64)
  starts[1:] = np.cumsum([len(k) for k in keep])
  return TripleTable(table.queries, table.documents, table.positives, table.positive_pools, starts,
                     table.pool_docs[entries], table.positive_scores, table.pool_scores[entries])


def with_top_of_pools(table: TripleTable, depth: int) -> TripleTable:
  """A scored `table`'s rows twice, once against their whole pools and once against the `depth`
  answers of each pool BM25 scores highest (`top_of_pools`): half of the negatives are the first
  stage's hard ones."""
  return mix_tables(table, top_of_pools(table, depth))


@functools.lru_cache(maxsize=8)
def insuranceqa_hard_negatives(split: str, language: str = "en", pool_depth: int = 20
                               ) -> TripleTable:
  """InsuranceQA v2's triples of `split` (`t5rank.data.sources.insuranceqa`); for the train split,
  every row twice (`with_top_of_pools`: half of the negatives among the `pool_depth` answers of the
  pool BM25 scores highest), without the scores. Other splits are returned as they are."""
  if split != "train":
    return sources.insuranceqa(split, language)
  mixed = insuranceqa_scored(split, language, pool_depth)
  return dataclasses.replace(mixed, positive_scores=None, pool_scores=None)


@functools.lru_cache(maxsize=8)
def insuranceqa_scored(split: str, language: str = "en", pool_depth: int = 0) -> TripleTable:
  """InsuranceQA v2's triples of `split` (`t5rank.data.sources.insuranceqa`) with every pair's BM25
  score (`score_table`): the scored duoT5 tasks' source. With `pool_depth` > 0 the train split
  holds every row twice, against its whole pool and against the pool's BM25 top `pool_depth`
  (`with_top_of_pools`)."""
  table = score_table(sources.insuranceqa(split, language), language)
  if split != "train" or pool_depth <= 0:
    return table
  return with_top_of_pools(table, pool_depth)
