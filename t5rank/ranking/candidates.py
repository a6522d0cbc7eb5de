"""Candidates ─► checked ─► passages: the pairs a scoring job scores, before any model is involved.

A candidate run names (query, document) pairs; `check_candidates` refuses (or, asked to, skips)
ids the query and corpus files do not have; `candidate_passages` splits each document once into
its sentence windows (`t5rank.ranking.passages`) and lists one `Pair` per window;
`first_stage_scores` takes the run's own scores for a model that reads them.
"""

from __future__ import annotations

import logging
from typing import Mapping, NamedTuple, Sequence

from t5rank.data.readers import Document, Run
from t5rank.ranking.passages import document_passages

logger = logging.getLogger(__name__)


class Pair(NamedTuple):
  """One scored input of candidate `docid` for query `qid`; `part` is which input of the
  candidate it is, as its job numbers them: the sentence window of the document
  (`t5rank.ranking.jobs.PassageJob`), or the index of the candidate it is compared with
  (duoT5's `t5rank.ranking.duo_pairs.PairJob`)."""
  qid: str
  docid: str
  part: int

class MissingIdsError(ValueError):
  """Candidates that name queries or documents the input files do not have."""

def _first_few(ids: Sequence[str], n: int = 5) -> str:
  shown = ", ".join(repr(i) for i in ids[:n])
  return shown + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def check_candidates(candidates: Run, queries: Mapping[str, str], corpus: Mapping[str, Document], *,
                     skip_missing: bool, sources: tuple[str, str] = ("queries", "corpus")) -> Run:
  """`candidates` without those whose query or document is unknown. Unknown ids raise
  `MissingIdsError` naming the first few and the counts, unless `skip_missing`, which logs them."""
  missing_queries = [qid for qid in candidates if qid not in queries]
  missing_docs = list(dict.fromkeys(docid for docs in candidates.values() for docid, _ in docs
                                    if docid not in corpus))
  if not missing_queries and not missing_docs:
    return candidates
  kept = {qid: [(d, s) for d, s in docs if d in corpus] for qid, docs in candidates.items()
          if qid in queries}
  kept = {qid: docs for qid, docs in kept.items() if docs}
  dropped = sum(map(len, candidates.values())) - sum(map(len, kept.values()))
  problems = []
  if missing_queries:
    problems.append(f"{len(missing_queries)} query id(s) missing from {sources[0]}: "
                    f"{_first_few(missing_queries)}")
  if missing_docs:
    problems.append(f"{len(missing_docs)} document id(s) missing from {sources[1]}: "
                    f"{_first_few(missing_docs)}")
  message = f"{dropped} candidate(s) name unknown ids: " + "; ".join(problems)
  if not skip_missing:
    raise MissingIdsError(message)
  logger.warning("skipping %s", message)
  return kept


def candidate_passages(candidates: Run, corpus: Mapping[str, Document], *, window: int,
                       stride: int, language: str) -> tuple[list[Pair], dict[str, list[str]]]:
  """The pairs to score, in candidate order, and each candidate document's passages (split once)."""
  passages: dict[str, list[str]] = {}
  pairs = []
  make = tuple.__new__  # Pair(qid, docid, w) without its keyword-parsing constructor
  for qid, docs in candidates.items():
    for docid, _ in docs:
      if docid not in passages:
        passages[docid] = document_passages(corpus[docid], window, stride, language)
      pairs.extend(make(Pair, (qid, docid, w)) for w in range(len(passages[docid])))
  return pairs, passages

def first_stage_scores(candidates: Run) -> dict[tuple[str, str], float]:
  """(qid, docid) -> the candidates run's score, for `bm25_in_input`. BM25 scores are >= 0: a run
  with a negative score (e.g. a `qid docid` file, whose candidates are numbered -1, -2, ...) is
  refused."""
  scores = {(qid, docid): score for qid, docs in candidates.items() for docid, score in docs}
  bad = [(key, s) for key, s in scores.items() if not s >= 0 or s == float("inf")]
  if bad:
    (qid, docid), score = bad[0]
    raise ValueError(f"the model reads each candidate's BM25 score, but the candidates run has "
                     f"{len(bad)} score(s) that are not finite numbers >= 0 (query {qid!r}, "
                     f"document {docid!r}: {score!r}); the scores it reads must be BM25 "
                     "scores")
  return scores


def split_at_depth(candidates: Run, depth: int | None) -> tuple[Run, Run]:
  """(each query's top `depth` candidates, the rest), in the run's ranking: by score, descending,
  ties in the run's order (all of them and nothing when `depth` is None)."""
  top, rest = {}, {}
  for qid, docs in candidates.items():
    ranked = sorted(docs, key=lambda item: -item[1])  # stable: ties keep the run's order
    top[qid] = ranked[:depth] if depth is not None else ranked
    rest[qid] = ranked[depth:] if depth is not None else []
  return top, rest


def append_below(reranked: Run, rest: Run) -> Run:
  """Each query's reranked candidates, then the ones below the depth in the run's order, scored
  below the lowest reranked score: min − 1, min − 2, ... (a TREC run is ranked by its scores)."""
  run: Run = {}
  for qid in dict.fromkeys([*reranked, *rest]):
    head = list(reranked.get(qid, []))
    floor = min((s for _, s in head), default=0.0)
    run[qid] = head + [(docid, floor - 1.0 - i) for i, (docid, _) in enumerate(rest.get(qid, []))]
  return run
