"""`t5rank fuse`: interpolate the scores of two runs over the same candidates (a hybrid ranking).

    fused(q, d) = (1 - w) * norm(first)(q, d) + w * norm(second)(q, d)

where `norm` rescales each query's scores in each run on their own (`zscore`: minus the query's
mean, over its standard deviation; `minmax`: onto [0, 1]), so that BM25 scores and monoT5's log
P(true) can be added. `w` = 0 is the first run's ranking, `w` = 1 the second's. The usual use is
BM25 (first) and monoT5 (second) on BM25's top k, with `w` chosen on held-out queries
(`tune_weight`: the grid value with the best mean metric, the smallest such `w` on ties) and then
applied unchanged to the test queries -- never chosen on the queries it is reported on.

    t5rank fuse bm25.run monot5.run --weight 0.6 -o hybrid.run
    t5rank fuse bm25.run monot5.run --tune valid_qrels.txt valid_bm25.run valid_monot5.run -o hybrid.run

Both runs must hold the same candidates for each query (a reranked run and the run it reranked do);
anything else is an error rather than a silent intersection. With `union` (two first stages, e.g.
BM25's and a dense retriever's top 1000 over a whole collection) a query's candidates are those
of either run, and a candidate one run did not return takes that run's lowest score for the query
before normalization (Pyserini's hybrid of sparse and dense runs does the same):

    t5rank fuse bm25.run dense.run --union --tune valid_qrels.txt valid_bm25.run valid_dense.run -o hybrid.run
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from t5rank.data.readers import Run, check_finite_run

NORMALIZATIONS = ("zscore", "minmax")
DEFAULT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def normalize(scores: np.ndarray, method: str = "zscore") -> np.ndarray:
  """One query's scores rescaled (module docstring); constant scores become all 0."""
  scores = np.asarray(scores, np.float64)
  if method not in NORMALIZATIONS:
    raise ValueError(f"unknown normalization {method!r}; expected one of {NORMALIZATIONS}")
  if method == "zscore":
    spread = scores.std()
    return (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)
  spread = scores.max() - scores.min() if len(scores) else 0.0
  return (scores - scores.min()) / spread if spread > 0 else np.zeros_like(scores)


def interpolate(first: Run, second: Run, weight: float, *, normalization: str = "zscore",
                union: bool = False) -> Run:
  """The fused run (module docstring), each query's candidates sorted by fused score (descending,
  ties by document id). Raises ValueError when a query's candidates differ between the runs,
  unless `union` (a missing candidate takes its run's lowest score of the query)."""
  if not 0.0 <= weight <= 1.0:
    raise ValueError(f"weight must be in [0, 1], got {weight}")
  check_finite_run(first, "the first run")
  check_finite_run(second, "the second run")
  if union:  # a first stage writes nothing for a query it matched no document to
    first = {q: first.get(q, []) for q in set(first) | set(second)}
    second = {q: second.get(q, []) for q in first}
  if set(first) != set(second):
    only = sorted(set(first) ^ set(second))
    raise ValueError(f"the runs rank different queries (e.g. {only[:3]}); fuse runs of the same "
                     "queries")
  fused: Run = {}
  for qid, candidates in first.items():
    a = dict(candidates)
    b = dict(second[qid])
    if union:
      a, b = _filled(a, b.keys()), _filled(b, a.keys())
    if a.keys() != b.keys():
      raise ValueError(f"query {qid!r}: the runs hold different candidates ({len(a)} vs {len(b)}); "
                       "fuse a reranked run with the run it reranked")
    docids = sorted(a)
    score = ((1.0 - weight) * normalize([a[d] for d in docids], normalization)
             + weight * normalize([b[d] for d in docids], normalization))
    fused[qid] = sorted(zip(docids, score.tolist()), key=lambda c: (-c[1], c[0]))
  return fused


def _filled(scores: dict, others) -> dict:
  """`scores` plus every id of `others` it lacks, at its lowest score (0 when it has none)."""
  floor = min(scores.values(), default=0.0)
  return {**{d: floor for d in others}, **scores}


def tune_weight(qrels: Mapping[str, Mapping[str, int]], first: Run, second: Run, *,
                grid: Sequence[float] = DEFAULT_GRID, metric: str = "MRR",
                normalization: str = "zscore", union: bool = False
                ) -> tuple[float, dict[float, float]]:
  """(the weight of `grid` with the best mean `metric` on these queries, {weight: mean metric}).
  Ties go to the smaller weight (closer to the first run)."""
  from t5rank.evaluation.metrics import per_query

  if not grid:
    raise ValueError("an empty grid of weights")
  values = {float(w): float(per_query(qrels, interpolate(first, second, w,
                                                         normalization=normalization, union=union),
                                      [metric])[metric].mean())
            for w in sorted(grid)}
  best = max(values, key=lambda w: (values[w], -w))
  return best, values
