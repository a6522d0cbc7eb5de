"""Pseudo-queries: synthetic (query, relevant document) pairs drawn from the corpus itself.

A from-scratch monoT5 has to discover that a query word occurring in the document is evidence of
relevance; real training queries share only a word or two with their answers, and the hard negatives
of InsuranceQA share as many, so that signal is weak. A pseudo-query makes it strong: a few words of
one document, drawn with probability proportional to their idf over the corpus (content words,
not "the"), in the document's order, after a question opening taken from a real training query
("What is", "Does life"), e.g.

    document: "Health insurance can often go into effect within minutes of your application ..."
    pseudo-query: "Can I effect minutes application?"

Each pseudo-query's positive is its document and its negative a random other document, so the pair
is decided by term overlap alone (or, with `hard_negatives=k`, one of the k documents BM25 ranks
highest for the pseudo-query, the positive left out: then the pair is decided by which words match,
not whether any do). Mixed into the real training triples (`mix_tables`), they teach
term matching that the real pairs then refine (docs/training.md has the measurements).

Words are drawn only from the first `max_words` words of the document: monoT5 cuts long inputs, and a
word the model never sees would make the label noise. Terms are the BM25 analyzer's
(`t5rank.data.analysis.tokenize`: lower case, English stopwords removed, Porter stems), so "the" and
"is" are never drawn and "policy"/"policies" count as one term for the idf.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Optional, Sequence

import numpy as np

from t5rank.data import analysis
from t5rank.data import sources
from t5rank.data.sources import TripleTable, mix_tables

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)


def _document_words(text: str, max_words: int, language: str,
                    analyzed: dict[str, Optional[str]]) -> list[tuple[str, str]]:
  """(surface word in lower case, its index term) for the first `max_words` words of `text` that
  have exactly one index term; `analyzed` caches word -> term (None when it has none)."""
  out = []
  for word in _WORD.findall(text)[:max_words]:
    word = word.lower()
    if word not in analyzed:
      terms = analysis.tokenize(word, language)
      analyzed[word] = terms[0] if len(terms) == 1 else None
    if analyzed[word] is not None:
      out.append((word, analyzed[word]))
  return out


def pseudo_query_table(documents: Sequence[str], num_queries: int, *, seed: int,
                       openings: Sequence[str] = (), min_terms: int = 2, max_terms: int = 5,
                       max_words: int = 45, language: str = "en",
                       hard_negatives: int = 0) -> TripleTable:
  """`num_queries` pseudo-query triples over `documents` (see the module docstring): each row's
  positive is the document its words were drawn from, its negative one other document drawn at
  random (fixed per row), or with `hard_negatives=k` > 0 one of the k best other documents by BM25
  for the pseudo-query (a random one when no other document matches). `openings` are prefixed at
  random (e.g. the first two words of real training queries); a document with fewer than
  `min_terms` usable words is never drawn. The table is a pure function of its arguments."""
  if not 1 <= min_terms <= max_terms:
    raise ValueError(f"need 1 <= min_terms <= max_terms, got {min_terms}, {max_terms}")
  documents = documents if isinstance(documents, list) else list(documents)  # shared by mix_tables
  if len(documents) < 2:
    raise ValueError("pseudo-queries need at least two documents (a positive and a negative)")
  analyzed: dict[str, Optional[str]] = {}
  words = [_document_words(text, max_words, language, analyzed) for text in documents]
  document_frequency: dict[str, int] = {}
  for terms in (analysis.tokenize(text, language) for text in documents):
    for term in set(terms):
      document_frequency[term] = document_frequency.get(term, 0) + 1
  n = len(documents)
  idf = {t: math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for t, df in document_frequency.items()}
  usable = np.asarray([i for i, w in enumerate(words) if len({t for _, t in w}) >= min_terms])
  if not len(usable):
    raise ValueError(f"no document has {min_terms} distinct usable words in its first {max_words}")
  index = None
  if hard_negatives > 0:
    from t5rank.data import bm25_input

    index = bm25_input.build_index(documents, language)
  rng = np.random.default_rng(seed)
  queries, rows = [], []
  for _ in range(num_queries):
    doc = int(usable[rng.integers(len(usable))])
    first: dict[str, int] = {}  # term -> position of its first surface word
    for position, (_, term) in enumerate(words[doc]):
      first.setdefault(term, position)
    terms = list(first)
    weights = np.asarray([idf.get(t, 0.0) for t in terms])
    k = min(len(terms), int(rng.integers(min_terms, max_terms + 1)))
    picked = rng.choice(len(terms), size=k, replace=False, p=weights / weights.sum())
    chosen = sorted(first[terms[j]] for j in picked)
    text = " ".join(words[doc][p][0] for p in chosen)
    if openings:
      text = f"{openings[rng.integers(len(openings))]} {text}"
    text += "?"
    others = []
    if index is not None:
      best = index.rank(index.score(index.query_counts(text)[0]), hard_negatives + 1)
      others = [int(d) for d in best if d != doc][:hard_negatives]
    if others:
      negative = others[int(rng.integers(len(others)))]
    else:
      negative = int(rng.integers(n - 1))
      negative += negative >= doc  # any document but the positive
    queries.append(text)
    rows.append((len(queries) - 1, doc, negative))
  array = np.asarray(rows, np.int64).reshape(-1, 3)
  return TripleTable(queries, documents, array[:, :2].copy(), np.arange(len(array)),
                     np.arange(len(array) + 1), array[:, 2].copy())


@functools.lru_cache(maxsize=8)
def insuranceqa_with_pseudo_queries(split: str, language: str = "en", fraction: float = 0.3,
                                    seed: int = 0, hard_negatives: int = 0) -> TripleTable:
  """InsuranceQA v2's triples of `split` (`t5rank.data.sources.insuranceqa`); for the train split, mixed
  with pseudo-queries over the answers so that they are `fraction` of the rows, with openings from
  the split's queries (`hard_negatives`: see `pseudo_query_table`). Other splits are returned as
  they are."""
  if not 0.0 <= fraction < 1.0:
    raise ValueError(f"fraction must be in [0, 1), got {fraction}")
  table = sources.insuranceqa(split, language)
  if split != "train" or fraction == 0.0:
    return table
  count = round(len(table) * fraction / (1.0 - fraction))
  openings = sorted({" ".join(q.split()[:2]) for q in table.queries if len(q.split()) > 2})
  pseudo = pseudo_query_table(table.documents, count, seed=seed, openings=openings,
                              language=language, hard_negatives=hard_negatives)
  return mix_tables(table, pseudo)


@functools.lru_cache(maxsize=8)
def insuranceqa_with_pseudo_queries_scored(split: str, language: str = "en",
                                           fraction: float = 0.3, seed: int = 0,
                                           hard_negatives: int = 0,
                                           pool_depth: int = 0) -> TripleTable:
  """`insuranceqa_with_pseudo_queries` with every pair's BM25 score (`t5rank.data.bm25_input`). With
  `pool_depth` > 0 the train split holds every row twice, once against its whole pool and once
  against the `pool_depth` answers of its pool that BM25 scores highest
  (`bm25_input.top_of_pools`), so that half of the negatives are the first stage's hard ones."""
  from t5rank.data import bm25_input

  table = bm25_input.score_table(
      insuranceqa_with_pseudo_queries(split, language, fraction, seed, hard_negatives), language)
  if split != "train" or pool_depth <= 0:
    return table
  return bm25_input.with_top_of_pools(table, pool_depth)
