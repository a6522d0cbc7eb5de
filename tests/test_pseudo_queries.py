"""Pseudo-queries drawn from a hand-written corpus, and mixing triple tables."""

import collections
import itertools

import numpy as np
import pytest

from t5rank.data import analysis
from t5rank.data.pseudo_queries import pseudo_query_table
from t5rank.data.sources import mix_tables
from t5rank.data.sources import TripleTable

DOCS = ["The insurance policy covers flood damage to the basement.",
        "Insurance premiums rise with age and smoking.",
        "A deductible is what you pay before insurance pays the claim.",
        "Annuities convert savings into income; insurance companies sell them."]


def test_words_come_from_the_positive_and_negatives_differ():
  table = pseudo_query_table(DOCS, 200, seed=3, openings=["What is", "Can I"], max_terms=3)
  assert len(table) == 200
  for query, positive, negative in itertools.islice(table.triples(seed=0, shuffle=False), 200):
    opening, words = query[:-1].split(" ", 2)[:2], query[:-1].split(" ", 2)[2].split()
    assert " ".join(opening) in ("What is", "Can I") and query.endswith("?")
    assert 2 <= len(words) <= 3
    positive_words = [w.strip(".;,").lower() for w in positive.split()]
    assert all(w in positive_words for w in words)
    assert [positive_words.index(w) for w in words] == sorted(positive_words.index(w) for w in words)
    assert not set(words) & analysis.ENGLISH_STOPWORDS  # "the", "to", "with" are never drawn
    assert negative != positive


def test_draws_follow_idf():
  """`insurance` is in every document (idf .105), the other words in one each (idf 1.20): drawn
  alone it should come up about .105 / (.105 + 1.20 x words) of the time, a few percent."""
  table = pseudo_query_table(DOCS, 2000, seed=0, min_terms=1, max_terms=1)
  counts = collections.Counter(q[:-1] for q in table.queries)
  assert 0 < counts["insurance"] / 2000 < 0.05
  assert counts["flood"] > counts["insurance"]


def test_same_seed_same_table_and_only_the_first_words():
  a = pseudo_query_table(DOCS, 50, seed=7, max_words=3)
  b = pseudo_query_table(DOCS, 50, seed=7, max_words=3)
  assert a.queries == b.queries and np.array_equal(a.positives, b.positives)
  assert np.array_equal(a.pool_docs, b.pool_docs)
  for query, (_, doc) in zip(a.queries, a.positives):
    first = [w.strip(".;,").lower() for w in DOCS[doc].split()[:3]]
    assert all(w in first for w in query[:-1].split())
  with pytest.raises(ValueError, match="min_terms"):
    pseudo_query_table(DOCS, 5, seed=0, min_terms=3, max_terms=2)


def test_mix_tables_keeps_every_row_and_shares_documents():
  real = TripleTable(["q0", "q1"], DOCS, np.asarray([[0, 0], [1, 1], [1, 2]]), np.asarray([0, 1, 1]),
                     np.asarray([0, 2, 3]), np.asarray([2, 3, 0]))
  pseudo = pseudo_query_table(DOCS, 4, seed=1)
  mixed = mix_tables(real, pseudo)
  assert len(mixed) == 7 and mixed.documents == DOCS  # the documents are stored once
  def rows(table):
    out = collections.Counter()
    for i, (q, p) in enumerate(table.positives):
      pool = table.positive_pools[i]
      negatives = table.pool_docs[table.pool_starts[pool]:table.pool_starts[pool + 1]]
      out[(table.queries[q], table.documents[p], tuple(table.documents[n] for n in negatives))] += 1
    return out
  assert rows(mixed) == rows(real) + rows(pseudo)
  other = TripleTable(["x"], ["d0", "d1"], np.asarray([[0, 1]]), np.asarray([0]), np.asarray([0, 1]),
                      np.asarray([0]))
  both = mix_tables(real, other)
  assert both.documents == DOCS + ["d0", "d1"]
  assert list(itertools.islice(both.triples(seed=0, shuffle=False), 4))[3] == ("x", "d1", "d0")


def test_hard_negatives_are_bm25s_best_other_documents():
  from t5rank.data import bm25_input

  table = pseudo_query_table(DOCS, 100, seed=5, hard_negatives=2)
  random_table = pseudo_query_table(DOCS, 100, seed=5)
  assert table.queries == random_table.queries  # the same pseudo-queries, other negatives
  index = bm25_input.build_index(DOCS)
  for query, (_, doc), negative in zip(table.queries, table.positives, table.pool_docs):
    scores = bm25_input.query_scores(index, query)
    others = [d for d in np.argsort(-scores, kind="stable") if d != doc and scores[d] > 0]
    assert negative != doc
    if others:  # one of the two best-scoring others (ties at the boundary count as best)
      assert scores[negative] >= scores[others[min(1, len(others) - 1)]] > 0


def test_pool_depth_adds_each_real_row_against_bm25s_best_of_its_pool(monkeypatch):
  from t5rank.data import bm25_input
  from t5rank.data import pseudo_queries
  from t5rank.data import sources

  # One real row: "insurance claim", relevant doc 0, pool {1, 2, 3}; BM25 ranks doc 2 (the only one
  # with "claim") first in the pool.
  real = TripleTable(["insurance claim"], DOCS, np.asarray([[0, 0]]), np.asarray([0]),
                     np.asarray([0, 3]), np.asarray([1, 2, 3]))
  monkeypatch.setattr(sources, "insuranceqa", lambda split, language="en": real)
  pseudo_queries.insuranceqa_with_pseudo_queries.cache_clear()
  pseudo_queries.insuranceqa_with_pseudo_queries_scored.cache_clear()
  try:
    plain = pseudo_queries.insuranceqa_with_pseudo_queries_scored("train", fraction=0.5)
    deep = pseudo_queries.insuranceqa_with_pseudo_queries_scored("train", fraction=0.5,
                                                                 pool_depth=1)
    held_out = pseudo_queries.insuranceqa_with_pseudo_queries_scored("validation", pool_depth=1)
  finally:
    pseudo_queries.insuranceqa_with_pseudo_queries.cache_clear()
    pseudo_queries.insuranceqa_with_pseudo_queries_scored.cache_clear()
  assert len(plain) == 2 and len(deep) == 4  # (real + 1 pseudo-query) twice
  assert held_out.pool_docs.tolist() == [1, 2, 3]  # only the train split is changed
  scores = bm25_input.query_scores(bm25_input.build_index(DOCS), "insurance claim")
  assert scores[2] > max(scores[1], scores[3])
  real_negatives = collections.Counter(t[2] for t in deep.triples(num_epochs=40, seed=1)
                                       if t[0] == "insurance claim")
  # the whole pool's draws cover all three; the top-1 copy adds doc 2 every epoch
  assert set(real_negatives) == {DOCS[1], DOCS[2], DOCS[3]}
  assert real_negatives[DOCS[2]] > real_negatives[DOCS[1]] + real_negatives[DOCS[3]]
