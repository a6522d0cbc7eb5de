"""A scoring job: what a reranker scores for each query's candidates, and how its scores rank them.

    candidates ─► the top `depth` of each query (to rerank) and the rest (kept below, in order)
    top ─► job.pairs: one `Pair` per model input ─► job.inputs(chunk): (query texts, passage
    texts, first-stage scores), as `Reranker.encode` takes them ─► scored rows (pair, score, P)
    ─► job.run(rows): the top candidates ranked by the job's aggregation, the rest below

How a reranker's inputs are made and its scores aggregated is the reranker's own strategy: each
`Reranker` names its job class (`Reranker.job`, a dotted name, since `t5rank.models` imports
nothing above it). `PassageJob`, the default, scores each candidate's sentence windows and
aggregates them (MaxP by default, `t5rank.ranking.passages`); duoT5's
`t5rank.ranking.duo_pairs.PairJob` scores every ordered pair of a query's candidates and aggregates
the pairs. `t5rank score` (`t5rank.ranking.scorer`), the cascade, the Python front door
(`t5rank.ranker`) and `t5rank serve` all plan through `plan_job` and know no family.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
from operator import itemgetter
from typing import Any, ClassVar, Iterable, Mapping, Optional, Sequence

from t5rank.data.readers import Document, Run
from t5rank.models.reranker import Reranker
from t5rank.ranking.candidates import (Pair, append_below, candidate_passages, first_stage_scores,
                                       split_at_depth)
from t5rank.ranking.passages import rank_documents

Row = tuple[Pair, float, float]  # a scored input: (pair, score, P)


@dataclasses.dataclass
class ScoringJob(abc.ABC):
  """The inputs a reranker scores for `top` (each query's candidates to rerank) and how their
  scores become a run. `pairs` are the inputs, `passages` each document's texts as the job reads
  them, `first_stage` each (qid, docid)'s first-stage score for a reranker that reads it, `rest`
  the candidates below the depth (None without a depth); `options` are the scorer's
  (`t5rank.ranking.scorer.ScoringOptions`, which imports this module)."""
  reranker: Reranker
  queries: Mapping[str, str]
  top: Run
  options: Any
  pairs: list[Pair]
  passages: dict[str, list[str]]
  first_stage: Optional[Mapping[tuple[str, str], float]]
  rest: Optional[Run] = None

  # Whether each input is one candidate on its own: a score per (query, text) pair.
  independent: ClassVar[bool] = True

  @classmethod
  @abc.abstractmethod
  def plan(cls, reranker: Reranker, queries: Mapping[str, str], corpus: Mapping[str, Document],
           top: Run, options: Any,
           first_stage: Optional[Mapping[tuple[str, str], float]]) -> "ScoringJob":
    """The job of `top`'s candidates."""

  @staticmethod
  @abc.abstractmethod
  def num_inputs(candidates: int) -> int:
    """How many inputs a query with `candidates` candidates gives, at least (a long document's
    windows add more)."""

  @staticmethod
  @abc.abstractmethod
  def example_input(text: str, first_stage: float) -> tuple[object, object]:
    """(passage, first-stage entry) of one input made of `text`, as `Reranker.encode` takes them
    (warm-up inputs)."""

  @abc.abstractmethod
  def inputs(self, chunk: Sequence[Pair]) -> tuple[list, list, Optional[list]]:
    """(query texts, passage texts, first-stage scores or None) of `chunk`'s pairs."""

  @abc.abstractmethod
  def rank(self, rows: Iterable[Row]) -> Run:
    """The top candidates ranked from the scored rows."""

  @abc.abstractmethod
  def passage_lines(self, rows: Sequence[Row]) -> Iterable[str]:
    """One tab-separated line per scored row (`t5rank score --per-passage-output`)."""

  def run(self, rows: Iterable[Row]) -> Run:
    """The run: the top candidates ranked from the scored rows, then the rest below them."""
    run = self.rank(rows)
    return append_below(run, self.rest) if self.rest is not None else run


class PassageJob(ScoringJob):
  """Each candidate's sentence windows scored on their own (`options.window`, `stride`,
  `language`; window 0: the whole document), a document's score aggregated over its windows
  (`options.passages`, MaxP by default). The per-passage lines are `qid docid window score P
  best` (best: 1 for the window that decided the document's score)."""

  @classmethod
  def plan(cls, reranker, queries, corpus, top, options, first_stage):
    pairs, passages = candidate_passages(top, corpus, window=options.window,
                                         stride=options.stride, language=options.language)
    if reranker.shard_order == "passage":  # each passage's pairs in one shard (TK encodes it once)
      pairs = sorted(pairs, key=itemgetter(1, 2, 0))  # (docid, part, qid)
    return cls(reranker, queries, top, options, pairs, passages, first_stage)

  @staticmethod
  def num_inputs(candidates: int) -> int:
    return candidates

  @staticmethod
  def example_input(text: str, first_stage: float) -> tuple[object, object]:
    return text, first_stage

  def inputs(self, chunk):
    texts = [self.passages[p.docid][p.part] for p in chunk]
    scores = (None if self.first_stage is None
              else [self.first_stage[p.qid, p.docid] for p in chunk])
    return [self.queries[p.qid] for p in chunk], texts, scores

  def rank(self, rows):
    run = rank_documents(rows, self.options.passages)[0]
    return {qid: run[qid] for qid in self.top if qid in run}  # in the candidates' query order

  def passage_lines(self, rows):
    _, winners = rank_documents(rows, self.options.passages)
    for pair, score, p in rows:
      best = int(winners[pair.qid, pair.docid] == pair.part)
      yield f"{pair.qid}\t{pair.docid}\t{pair.part}\t{score!r}\t{p!r}\t{best}\n"


def job_class(reranker: Reranker) -> type[ScoringJob]:
  """The `ScoringJob` class `reranker` names (`Reranker.job`)."""
  module, _, name = reranker.job.rpartition(".")
  cls = getattr(importlib.import_module(module), name)
  if not (isinstance(cls, type) and issubclass(cls, ScoringJob)):
    raise TypeError(f"{type(reranker).__name__}.job names {reranker.job}, not a ScoringJob")
  return cls


def plan_job(reranker: Reranker, queries: Mapping[str, str], corpus: Mapping[str, Document],
             candidates: Run, options: Any, first_stage_run: Optional[Run] = None, *,
             first_stage: Optional[Mapping[tuple[str, str], float]] = None) -> ScoringJob:
  """The job of reranking `candidates` (checked ids) with `reranker`: each query's top
  `options.depth` candidates (all without a depth) planned by the reranker's job class, the rest
  kept for below. A reranker that reads each candidate's first-stage score reads it from
  `first_stage` when given (`top_first_stage_scores`, taken before), else from `first_stage_run`
  when given (the candidates are then another stage's ranking, e.g. duoT5 over monoT5's), else
  from `candidates`; it takes its top candidates in the first stage's order."""
  top, rest = split_at_depth(candidates, options.depth)
  if not reranker.reads_first_stage:
    first_stage = None
  else:
    if first_stage is None:
      first_stage = top_first_stage_scores(top, first_stage_run)
    # Taken in the first stage's order (stable: ties keep the run's), as when the candidates are
    # the first stage's own run: the stage before decides which candidates are scored, not the
    # order they are batched in, so their scores are the same bits either way.
    top = {qid: sorted(docs, key=lambda item, qid=qid: -first_stage[qid, item[0]])
           for qid, docs in top.items()}
  job = job_class(reranker).plan(reranker, queries, corpus, top, options, first_stage)
  job.rest = rest if options.depth is not None else None
  return job


def top_first_stage_scores(top: Run,
                           first_stage_run: Optional[Run] = None) -> dict[tuple[str, str], float]:
  """(qid, docid) -> the first-stage score of each candidate of `top` (the candidates a reranker
  scores) that a reranker reading them takes: `first_stage_run`'s when given, else `top`'s own
  (`first_stage_scores`, which refuses scores no BM25 run has)."""
  return first_stage_scores(top if first_stage_run is None
                            else first_stage_of_candidates(first_stage_run, top))


def first_stage_of_candidates(first_stage_run: Run, candidates: Run) -> Run:
  """`candidates` with each one's score in `first_stage_run` (the first stage's run); a candidate
  that run does not hold raises ValueError naming it."""
  scores = {q: dict(docs) for q, docs in first_stage_run.items()}
  out = {}
  for qid, docs in candidates.items():
    missing = [d for d, _ in docs if d not in scores.get(qid, {})]
    if missing:
      raise ValueError(f"query {qid!r}: {len(missing)} candidate(s) have no first-stage score "
                       f"(e.g. document {missing[0]!r}); the first-stage run must hold every "
                       "candidate")
    out[qid] = [(d, scores[qid][d]) for d, _ in docs]
  return out

