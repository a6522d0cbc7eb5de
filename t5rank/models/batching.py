"""Length-bucketed batches: how a reranker's examples become device-shaped arrays.

`bucket_batches` sorts sequences by length into buckets (multiples of BUCKET_STEP up to max_length)
and cuts each bucket into batches of about `batch_tokens` padded tokens, so a job compiles a few
shapes and pads little; `round_up` is the padding rule every model shares.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from t5rank.models.reranker import Batch

BUCKET_STEP = 64  # padded lengths are multiples of this (and max_length): a few shapes, little padding


def bucket_lengths(max_length: int, step: int = BUCKET_STEP) -> list[int]:
  """The padded lengths: multiples of `step` below `max_length`, then `max_length`."""
  return list(range(step, max_length, step)) + [max_length]


def batch_rows(length: int, batch_tokens: int, row_multiple: int = 1) -> list[int]:
  """The row counts a batch of `length`-long sequences may have, largest first: a full batch
  (batch_tokens // length, a multiple of `row_multiple`) and 1/2, 1/4, 1/8 of it for the last,
  partial batch of a bucket, so that small jobs are not mostly padding yet shapes stay few."""
  full = max(row_multiple, batch_tokens // length // row_multiple * row_multiple)
  sizes = [-(-full // 2**j // row_multiple) * row_multiple for j in range(4)]
  return list(dict.fromkeys(sizes))


def bucket_batches(ids: Sequence[Sequence[int]], *, batch_tokens: int, max_length: int,
                   row_multiple: int = 1, step: int = BUCKET_STEP) -> list[Batch]:
  """Sequences sorted by length into buckets (`bucket_lengths`), each bucket cut into full batches
  of batch_tokens // length rows and a last batch of the smallest `batch_rows` size that holds the
  rest; so a job compiles at most 4 shapes per bucket. Rows past a batch's items are all padding;
  each batch's arrays are `(tokens,)`, (B, L) int32."""
  lengths = np.fromiter(map(len, ids), np.int64, len(ids))
  if lengths.size and lengths.max() > max_length:
    raise ValueError(f"a sequence of {lengths.max()} ids exceeds max_length {max_length}")
  order = np.argsort(lengths, kind="stable")
  sorted_lengths = lengths[order]
  batches, start = [], 0
  for length in bucket_lengths(max_length, step):
    stop = int(np.searchsorted(sorted_lengths, length, side="right"))
    sizes = batch_rows(length, batch_tokens, row_multiple)
    for first in range(start, stop, sizes[0]):
      items = order[first:min(first + sizes[0], stop)]
      rows = min(size for size in sizes if size >= len(items))
      tokens = np.zeros((rows, length), np.int32)  # (B, L)
      for row, item in enumerate(items):
        tokens[row, :lengths[item]] = ids[item]
      batches.append(Batch(items, (tokens,)))
    start = stop
  return batches


def round_up(n: int, multiple: int) -> int:
  """The smallest multiple of `multiple` that is >= n (and >= `multiple`): a padded length."""
  return max(multiple, -(-n // multiple) * multiple)
