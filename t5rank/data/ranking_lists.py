"""Lists for ranking losses: one relevant document and up to m - 1 negatives per query, from the
same `TripleTable` the monoT5 tasks train on (`t5rank.data.sources`: a positive row and its
negative pool).

    table (a TripleSource task's "train" split) -> epoch permutation of positive rows (seeded)
      -> list at global position p: [its positive, m - 1 negatives drawn without replacement from
         its pool] (fewer when the pool is smaller: the rest is padding, mask False)
      -> this host's lists (p % num_shards == shard_index) -> ids by `encode` (the model's input;
         with a scored table, each pair's first-stage score too: `t5rank.data.bm25_input`)
      -> {"encoder_input_tokens" (b, m, L) int32, "labels" (b, m) float32 (1, 0, ...),
          "mask" (b, m) bool}, b = batch_size // num_shards lists

RankT5 (Zhuang et al. 2023) trains on such lists (the relevant document among sampled negatives);
its authors' T5X recipe (google/rax examples/t5x) reads MS MARCO QnA v2.1's lists as they come
(about ten passages, shuffled, cut to LIST_SIZE). Here the relevant document is always first: every
loss of `t5rank.training.ranking_losses` and the scores (each document scored alone) are the same
under any order of the list. The list at a position is a function of (seed, position) only, so a
resumed run starts at `start_step * batch_size` and gets the lists an uninterrupted run would.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from t5rank.data.sources import TripleTable

# queries, documents, each pair's first-stage score (None for a table without them) -> ids
Encode = Callable[[Sequence[str], Sequence[str], Optional[Sequence[float]]], list[list[int]]]


def ranking_list(table: TripleTable, position: int, *, list_size: int,
                 seed: int) -> tuple[str, list[str], Optional[list[float]]]:
  """(query, [relevant document, negatives...], their first-stage scores or None) of the list at
  global `position`: the positive row the epoch's permutation (`np.random.default_rng([seed,
  epoch])`, as `TripleTable.epoch_entries` orders rows) puts there, and min(list_size - 1, pool
  size) distinct negatives of its pool drawn with `np.random.default_rng([seed, epoch, offset])`;
  the scores are the table's (`TripleTable.scored`), else None."""
  if list_size < 2:
    raise ValueError(f"a list holds the relevant document and at least one negative: list_size "
                     f"must be >= 2, got {list_size}")
  epoch, offset = divmod(position, len(table))
  row = _epoch_order(len(table), seed, epoch)[offset]
  query, positive = table.positives[row]
  pool = table.positive_pools[row]
  start, stop = table.pool_starts[pool], table.pool_starts[pool + 1]
  rng = np.random.default_rng([seed, epoch, offset])
  picks = rng.choice(stop - start, size=min(list_size - 1, stop - start), replace=False)
  negatives = [table.documents[table.pool_docs[start + k]] for k in picks]
  scores = None
  if table.scored:
    scores = [float(table.positive_scores[row])] + [float(table.pool_scores[start + k])
                                                    for k in picks]
  return table.queries[query], [table.documents[positive]] + negatives, scores


@functools.lru_cache(maxsize=2)
def _epoch_order(rows: int, seed: int, epoch: int) -> np.ndarray:
  """The epoch's permutation of the positive rows, computed once per epoch."""
  return np.random.default_rng([seed, epoch]).permutation(rows)


def list_batches(table: TripleTable, encode: Encode, *, batch_size: int, list_size: int,
                 input_length: int, seed: int, start_step: int = 0, shard_index: int = 0,
                 num_shards: int = 1) -> Iterator[dict[str, np.ndarray]]:
  """Endless batches of this host's lists (module docstring), from step `start_step`; `encode` makes
  each (query, document)'s ids (at most `input_length`, padded here with 0), given the pairs'
  first-stage scores when the table has them (None when not)."""
  if not len(table):
    raise ValueError("the training table has no relevant (query, document) pair")
  if batch_size <= 0 or batch_size % num_shards:
    raise ValueError(f"batch_size {batch_size} (lists) must be a positive multiple of the "
                     f"{num_shards} data shards")
  rows = batch_size // num_shards
  step = start_step
  while True:
    tokens = np.zeros((rows, list_size, input_length), np.int32)
    labels = np.zeros((rows, list_size), np.float32)
    mask = np.zeros((rows, list_size), bool)
    for r in range(rows):
      query, documents, scores = ranking_list(
          table, step * batch_size + r * num_shards + shard_index, list_size=list_size, seed=seed)
      for k, ids in enumerate(encode([query] * len(documents), documents, scores)):
        if len(ids) > input_length:
          raise ValueError(f"an input of {len(ids)} ids is longer than the feature length "
                           f"{input_length}; encode must cut it")
        tokens[r, k, :len(ids)] = ids
      labels[r, 0] = 1.0
      mask[r, :len(documents)] = True
    yield {"encoder_input_tokens": tokens, "labels": labels, "mask": mask}
    step += 1
