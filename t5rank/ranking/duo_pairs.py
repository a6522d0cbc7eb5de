"""duoT5's scoring job (`PairJob`, the job class `t5rank.models.duot5.DuoT5` names): every ordered
pair of each query's top candidates, and the candidates' scores aggregated from their pairs
(`aggregate`, the paper's four ways).

    top K of a run ─► ordered_pairs: Pair(qid, d_i, part = j) for i ≠ j, K(K−1) per query
      ─► inputs: (query, (d_i, d_j) whole documents[, their two first-stage scores])
      ─► scored like any input (the scorer's shards), row (pair, log p, p): p(d_i > d_j)
      ─► pairwise_run: p (K, K) per query ─► aggregate ─► the K candidates ranked by their scores
"""

from __future__ import annotations

import functools
from typing import Iterable

import numpy as np

from t5rank.data.readers import Run, document_text
from t5rank.ranking.candidates import Pair
from t5rank.ranking.jobs import ScoringJob

AGGREGATIONS = ("sym-sum", "sum", "sym-log-sum", "log-sum")


def aggregate(p: np.ndarray, method: str = "sym-sum") -> np.ndarray:
  """(K,) scores of K candidates from p (K, K), p[i, j] = p(candidate i more relevant than j); the
  diagonal is not read. The aggregations of Pradeep et al. 2021:
    sym-sum      Σ_j p[i, j] + (1 − p[j, i])          (the paper's and pygaggle's default)
    sum          Σ_j p[i, j]
    sym-log-sum  Σ_j log p[i, j] + log(1 − p[j, i])
    log-sum      Σ_j log p[i, j]"""
  if method not in AGGREGATIONS:
    raise ValueError(f"unknown aggregation {method!r}; choose one of {AGGREGATIONS}")
  p = np.asarray(p, np.float64)
  off = ~np.eye(len(p), dtype=bool)
  if method == "sum":
    terms = p
  elif method == "sym-sum":
    terms = p + (1.0 - p.T)
  else:
    with np.errstate(divide="ignore"):
      terms = np.log(p) if method == "log-sum" else np.log(p) + np.log1p(-p.T)
  return np.where(off, terms, 0.0).sum(axis=1)


def ordered_pairs(top: Run) -> list[Pair]:
  """Every ordered pair (d_i, d_j), i ≠ j, of each query's candidates, as Pair(qid, d_i, j): the
  pair's `part` is the index of its second document in the query's list."""
  pairs = []
  for qid, docs in top.items():
    ids = [docid for docid, _ in docs]
    pairs.extend(Pair(qid, a, j) for i, a in enumerate(ids) for j in range(len(ids)) if j != i)
  return pairs


def pairwise_run(rows: Iterable[tuple[Pair, float, float]], top: Run, method: str) -> Run:
  """Each query's candidates of `top` scored by `aggregate(method)` over their pairs' p (from the
  scored `rows`), sorted by score descending, then docid ascending."""
  index = {qid: {docid: i for i, (docid, _) in enumerate(docs)} for qid, docs in top.items()}
  p = {qid: np.full((len(docs), len(docs)), np.nan) for qid, docs in top.items()}
  for pair, _, prob in rows:
    p[pair.qid][index[pair.qid][pair.docid], pair.part] = prob
  run: Run = {}
  for qid, docs in top.items():
    scores = aggregate(p[qid], method) if len(docs) > 1 else np.zeros(len(docs))
    run[qid] = sorted(((docid, float(s)) for (docid, _), s in zip(docs, scores)),
                      key=lambda item: (-item[1], item[0]))
  return run


class PairJob(ScoringJob):
  """Every ordered pair (d_i, d_j) of each query's candidates, whole documents, as one input each
  (`ordered_pairs`); a candidate's score aggregates its pairs (`options.aggregate`,
  `aggregate`). The per-passage lines are `qid d_i d_j log p(d_i > d_j) p`."""

  independent = False

  @classmethod
  def plan(cls, reranker, queries, corpus, top, options, first_stage):
    passages = {docid: [document_text(corpus[docid])] for docs in top.values() for docid, _ in docs}
    return cls(reranker, queries, top, options, ordered_pairs(top), passages, first_stage)

  @functools.cached_property
  def partners(self) -> dict[str, list[str]]:
    """Each query's candidates by index (a pair's `part` is its second document's index)."""
    return {qid: [docid for docid, _ in docs] for qid, docs in self.top.items()}

  @staticmethod
  def num_inputs(candidates: int) -> int:
    return candidates * (candidates - 1)

  @staticmethod
  def example_input(text: str, first_stage: float) -> tuple[object, object]:
    return (text, text), (first_stage, first_stage)

  def inputs(self, chunk):
    texts, scores = [], []
    for p in chunk:
      other = self.partners[p.qid][p.part]
      texts.append((self.passages[p.docid][0], self.passages[other][0]))
      if self.first_stage is not None:
        scores.append((self.first_stage[p.qid, p.docid], self.first_stage[p.qid, other]))
    return ([self.queries[p.qid] for p in chunk], texts,
            scores if self.first_stage is not None else None)

  def rank(self, rows):
    return pairwise_run(rows, self.top, self.options.aggregate)

  def passage_lines(self, rows):
    for pair, log_p, p in rows:
      yield (f"{pair.qid}\t{pair.docid}\t{self.partners[pair.qid][pair.part]}\t{log_p!r}\t"
             f"{p!r}\n")
