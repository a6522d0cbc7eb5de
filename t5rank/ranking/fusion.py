"""`t5rank fuse`: interpolate the scores of two or more runs over the same candidates (a hybrid).

    fused(q, d) = (1 - w) * norm(first)(q, d) + w * norm(second)(q, d)

where `norm` rescales each query's scores in each run on their own (`zscore`: minus the query's
mean, over its standard deviation; `minmax`: onto [0, 1]; `none`: as they are), so that BM25
scores and monoT5's log P(true) can be added. `w` = 0 is the first run's ranking, `w` = 1 the
second's. The usual use is BM25 (first) and monoT5 (second) on BM25's top k, with `w` chosen on
held-out queries (`tune_weight`: the grid value with the best mean metric, the smallest such `w` on
ties) and then applied unchanged to the test queries -- never chosen on the queries it is reported
on.

    t5rank fuse bm25.run monot5.run --weight 0.6 -o hybrid.run
    t5rank fuse bm25.run monot5.run --tune valid_qrels.txt valid_bm25.run valid_monot5.run -o hybrid.run

With n runs (several rerankers of the same candidates) the fused score is Σᵢ wᵢ · norm(runᵢ)(q, d),
the weights non-negative and summing to 1; `tune_weights` tries every weighting whose weights are
multiples of .05 (`simplex_grid`: 231 for three runs, 1,771 for four) and keeps the best on the
held-out queries (ties: the one leaning most on the first run, then the second, ...):

    t5rank fuse monot5.run tk.run dense.run --tune valid_qrels.txt valid_monot5.run valid_tk.run \
        valid_dense.run -o fused.run
    t5rank fuse monot5.run tk.run dense.run --weights 0.6,0.3,0.1 -o fused.run

All runs must hold the same candidates for each query (a reranked run and the run it reranked do);
anything else is an error rather than a silent intersection. With `union` (two first stages, e.g.
BM25's and a dense retriever's top 1000 over a whole collection) a query's candidates are those
of either run, and a candidate one run did not return takes that run's lowest score for the query
before normalization (Pyserini's hybrid of sparse and dense runs does the same):

    t5rank fuse bm25.run dense.run --union --tune valid_qrels.txt valid_bm25.run valid_dense.run -o hybrid.run
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from t5rank.data.readers import Run, check_finite_run

NORMALIZATIONS = ("zscore", "minmax", "none")
DEFAULT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def normalize(scores: np.ndarray, method: str = "zscore") -> np.ndarray:
  """One query's scores rescaled (module docstring); constant scores become all 0."""
  scores = np.asarray(scores, np.float64)
  if method not in NORMALIZATIONS:
    raise ValueError(f"unknown normalization {method!r}; expected one of {NORMALIZATIONS}")
  if method == "none":  # normalized before (the cascade's fusions)
    return scores
  if method == "zscore":
    spread = scores.std()
    return (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)
  spread = scores.max() - scores.min() if len(scores) else 0.0
  return (scores - scores.min()) / spread if spread > 0 else np.zeros_like(scores)


def interpolate(first: Run, second: Run, weight: float, *, normalization: str = "zscore",
                union: bool = False) -> Run:
  """The fused run of two runs (module docstring): `interpolate_runs([first, second], [1 - weight,
  weight])`. Raises ValueError when a query's candidates differ between the runs, unless `union`."""
  if not 0.0 <= weight <= 1.0:
    raise ValueError(f"weight must be in [0, 1], got {weight}")
  return interpolate_runs([first, second], [1.0 - weight, weight], normalization=normalization,
                          union=union)


def interpolate_runs(runs: Sequence[Run], weights: Sequence[float], *,
                     normalization: str = "zscore", union: bool = False) -> Run:
  """Σᵢ weights[i] · norm(runs[i]) for each query's candidates, sorted by fused score (descending,
  ties by document id). The weights are non-negative and sum to 1. Raises ValueError when a query's
  candidates differ between the runs, unless `union` (a missing candidate takes its run's lowest
  score of the query)."""
  return _Fusable(runs, normalization=normalization, union=union).fuse(weights)


class _Fusable:
  """Several runs over the same candidates, each query's normalized scores stacked once
  (runs x candidates), so that many weightings are cheap (what tuning needs)."""

  def __init__(self, runs: Sequence[Run], *, normalization: str = "zscore", union: bool = False):
    if len(runs) < 2:
      raise ValueError(f"fusion needs at least two runs, got {len(runs)}")
    runs = list(runs)
    for i, run in enumerate(runs):
      check_finite_run(run, _run_name(i, len(runs)))
    if union:  # a first stage writes nothing for a query it matched no document to
      queries = set().union(*runs)
      runs = [{q: run.get(q, []) for q in queries} for run in runs]
    for i, run in enumerate(runs[1:], 1):
      if set(run) != set(runs[0]):
        only = sorted(set(runs[0]) ^ set(run))
        raise ValueError(f"the runs rank different queries (e.g. {only[:3]}); fuse runs of the "
                         "same queries")
    self.queries: dict[str, tuple[list[str], np.ndarray]] = {}
    for qid in runs[0]:
      scores = [dict(run[qid]) for run in runs]
      if union:
        every = set().union(*scores)
        scores = [_filled(s, every) for s in scores]
      for i, s in enumerate(scores[1:], 1):
        if s.keys() != scores[0].keys():
          raise ValueError(f"query {qid!r}: the runs hold different candidates ({len(scores[0])} vs "
                           f"{len(s)} in {_run_name(i, len(runs))}); fuse a reranked run with the "
                           "run it reranked")
      docids = sorted(scores[0])
      self.queries[qid] = docids, np.stack(
          [normalize([s[d] for d in docids], normalization) for s in scores])
    self.width = len(runs)

  def check(self, weights: Sequence[float]) -> np.ndarray:
    """`check_weights` for this fusion's runs."""
    return check_weights(weights, self.width)

  def fuse(self, weights: Sequence[float]) -> Run:
    weights = self.check(weights)
    fused: Run = {}
    for qid, (docids, normalized) in self.queries.items():
      # A sum in a fixed order, not a matrix product: the same float result as the two-run formula.
      score = sum(w * row for w, row in zip(weights.tolist(), normalized))
      fused[qid] = sorted(zip(docids, np.asarray(score, np.float64).tolist()),
                          key=lambda c: (-c[1], c[0]))
    return fused


def check_weights(weights: Sequence[float], width: int) -> np.ndarray:
  """`weights` as an array; raises ValueError unless they are `width` numbers >= 0 summing to 1."""
  try:
    array = np.asarray(weights, np.float64)
  except (TypeError, ValueError):
    raise ValueError(f"the weights must be {width} numbers >= 0 summing to 1, got "
                     f"{weights!r}") from None
  if (array.shape != (width,) or np.any(array < 0)
      or not math.isclose(array.sum(), 1.0, abs_tol=1e-9)):
    raise ValueError(f"the weights must be {width} numbers >= 0 summing to 1, got "
                     f"{array.tolist() if array.ndim else weights!r}")
  return array


def _run_name(i: int, n: int) -> str:
  return ("the first run", "the second run")[i] if n == 2 else f"run {i + 1}"


def _filled(scores: dict, others) -> dict:
  """`scores` plus every id of `others` it lacks, at its lowest score (0 when it has none)."""
  floor = min(scores.values(), default=0.0)
  return {**{d: floor for d in others}, **scores}


def simplex_grid(n: int, step: float = 0.05) -> list[tuple[float, ...]]:
  """Every weighting of n runs whose weights are multiples of `step` summing to 1, the first
  run's weight largest first (then the second's, ...): the order in which ties are broken."""
  parts = round(1 / step) if step > 0 else 0
  if n < 2 or parts < 1 or not math.isclose(parts * step, 1.0):
    raise ValueError(f"a simplex grid needs n >= 2 runs and a step dividing 1, got {n}, {step}")

  def compositions(total: int, k: int):
    if k == 1:
      yield (total,)
      return
    for head in range(total, -1, -1):
      for tail in compositions(total - head, k - 1):
        yield (head,) + tail

  return [tuple(round(c * step, 10) for c in combo) for combo in compositions(parts, n)]


def tune_weight(qrels: Mapping[str, Mapping[str, int]], first: Run, second: Run, *,
                grid: Sequence[float] = DEFAULT_GRID, metric: str = "MRR",
                normalization: str = "zscore", union: bool = False
                ) -> tuple[float, dict[float, float]]:
  """(the weight of `grid` with the best mean `metric` on these queries, {weight: mean metric}).
  Ties go to the smaller weight (closer to the first run)."""
  if not grid:
    raise ValueError("an empty grid of weights")
  weights = sorted(float(w) for w in grid)
  if not 0.0 <= weights[0] <= weights[-1] <= 1.0:
    raise ValueError(f"weight must be in [0, 1], got {weights[0] if weights[0] < 0 else weights[-1]}")
  best, values = tune_weights(qrels, [first, second], grid=[(1.0 - w, w) for w in weights],
                              metric=metric, normalization=normalization, union=union)
  return best[1], {w: values[(1.0 - w, w)] for w in weights}


def tune_weights(qrels: Mapping[str, Mapping[str, int]], runs: Sequence[Run], *,
                 grid: Sequence[Sequence[float]] | None = None, metric: str = "MRR",
                 normalization: str = "zscore", union: bool = False
                 ) -> tuple[tuple[float, ...], dict[tuple[float, ...], float]]:
  """(the weighting of `grid` with the best mean `metric` on these queries, {weighting: mean
  metric}). The default grid is `simplex_grid(len(runs))`; ties go to the earlier weighting of the
  grid (in the default grid, the one leaning most on the first run, then the second, ...)."""
  from t5rank.evaluation.metrics import per_query

  grid = simplex_grid(len(runs)) if grid is None else [tuple(float(w) for w in g) for g in grid]
  if not grid:
    raise ValueError("an empty grid of weights")
  judged = {q for q, docs in qrels.items() if any(label > 0 for label in docs.values())}
  tuned = judged & set().union(*(run.keys() for run in runs))
  if not tuned:
    raise ValueError(f"the tuning qrels judge a relevant document for {len(judged)} queries, none "
                     "of them a query of the tuning runs: every weight would score 0 (give the "
                     "held-out queries' qrels and runs)")
  fusable = _Fusable(runs, normalization=normalization, union=union)
  if metric == "MRR":  # every weighting at once, the same floats as per_query's
    ranks = _reciprocal_ranks(qrels, fusable, grid)
    values = {g: float(ranks[i].mean()) for i, g in enumerate(grid)}
  else:
    values = {g: float(per_query(qrels, fusable.fuse(g), [metric])[metric].mean()) for g in grid}
  best = max(range(len(grid)), key=lambda i: (values[grid[i]], -i))  # ties: the earlier
  return grid[best], values


def _reciprocal_ranks(qrels: Mapping[str, Mapping[str, int]], fusable: _Fusable,
                      grid: Sequence[Sequence[float]]) -> np.ndarray:
  """(weightings x the queries of `relevant_queries(qrels)`): the reciprocal rank of each query's
  first relevant candidate in `fusable.fuse(weighting)`, for every weighting at once; what
  `per_query(qrels, fusable.fuse(weighting), ["MRR"])` gives (trec_eval's order: score descending,
  then document id descending; 0 for a query without a relevant candidate). The fused scores are
  summed in `fuse`'s order, so they are the same floats, and compared as trec_eval compares them:
  rounded to float32 (its scores are C floats), so scores that round to the same float32 tie."""
  from t5rank.evaluation.metrics import relevant_queries

  weights = np.stack([fusable.check(g) for g in grid]) if len(grid) else np.zeros((0, 0))
  qids = relevant_queries(qrels)
  ranks = np.zeros((len(qids), len(weights)))
  for column, qid in enumerate(qids):
    if qid not in fusable.queries:
      continue
    docids, normalized = fusable.queries[qid]
    relevant = [j for j, d in enumerate(docids) if qrels[qid].get(d, 0) >= 1]
    if not relevant:
      continue
    fused = np.zeros((len(weights), len(docids)))
    for i, row in enumerate(normalized):
      fused = fused + weights[:, i:i + 1] * row
    fused = fused.astype(np.float32)
    ids = np.asarray(docids, dtype=object)
    first = np.full(len(weights), len(docids) + 1)
    for j in relevant:  # ranked above candidate j: a higher score, or the same and a larger id
      above = ((fused > fused[:, j:j + 1]).sum(axis=1)
               + ((fused == fused[:, j:j + 1]) & (ids > docids[j])).sum(axis=1))
      first = np.minimum(first, above + 1)
    ranks[column] = 1.0 / first
  return np.ascontiguousarray(ranks.T)
