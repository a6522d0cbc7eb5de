"""Length-bucketed batches: how a reranker's examples become device-shaped arrays.

`bucket_batches` sorts sequences by length into buckets (multiples of BUCKET_STEP up to max_length)
and cuts each bucket into batches of about `batch_tokens` padded tokens (a bucket's last few
sequences join the next bucket where that pads fewer tokens), so a job compiles a few shapes and pads
little; `round_up` is the padding rule every model shares.
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
  of batch_tokens // length rows. The rest of a bucket (fewer than a full batch) either goes into
  a last batch of the smallest `batch_rows` size that holds it or joins the next bucket, padded to
  its length: whichever pads fewer tokens over the whole job (`_carried`). So a job compiles at
  most 4 shapes per bucket, all from the same few (lengths from `bucket_lengths`, rows from
  `batch_rows`) whatever its data. Rows past a batch's items are all padding; each batch's arrays
  are `(tokens,)`, (B, L) int32."""
  lengths = np.fromiter(map(len, ids), np.int64, len(ids))
  if lengths.size and lengths.max() > max_length:
    raise ValueError(f"a sequence of {lengths.max()} ids exceeds max_length {max_length}")
  order = np.argsort(lengths, kind="stable")
  padded = bucket_lengths(max_length, step)
  stops = np.searchsorted(lengths[order], padded, side="right")
  sizes = [batch_rows(length, batch_tokens, row_multiple) for length in padded]
  carry = _carried(padded, np.diff(stops, prepend=0).tolist(), sizes)
  batches, start = [], 0
  for length, stop, rows, carried in zip(padded, stops, sizes, carry):
    end = int(stop) - carried  # this bucket's sequences and those carried into it
    for first in range(start, end, rows[0]):
      items = order[first:min(first + rows[0], end)]
      tokens = np.zeros((_holding(rows, len(items)), length), np.int32)  # (B, L)
      for row, item in enumerate(items):
        tokens[row, :lengths[item]] = ids[item]
      batches.append(Batch(items, (tokens,)))
    start = end
  return batches


def _holding(sizes: list[int], n: int) -> int:
  """The smallest of a bucket's batch sizes (`batch_rows`) that holds n sequences."""
  return min(size for size in sizes if size >= n)


def _carried(lengths: list[int], counts: list[int], sizes: list[list[int]]) -> list[int]:
  """How many sequences each bucket passes on to the next (its rest, or none), so that the job's
  batches pad the fewest tokens: bucket k, given c sequences from the one before, cuts c +
  counts[k] into full batches of sizes[k][0] rows; a rest of r either takes the smallest of
  sizes[k] that holds it (rows x lengths[k] tokens) or joins bucket k + 1 (ties stay). Dynamic
  programming over (bucket, sequences carried in), of which each bucket adds at most one."""
  def split(k: int, carried_in: int) -> tuple[int, int]:  # (tokens of full batches, rest)
    full, rest = divmod(carried_in + counts[k], sizes[k][0])
    return full * sizes[k][0] * lengths[k], rest

  states = [{0}]
  for k in range(len(lengths)):
    states.append({0} | {split(k, c)[1] for c in states[k]})
  tokens: dict[tuple[int, int], int] = {(len(lengths), 0): 0}  # from bucket k on, given c in
  passed: dict[tuple[int, int], int] = {}
  for k in reversed(range(len(lengths))):
    for c in states[k]:
      full, rest = split(k, c)
      here = full + tokens[k + 1, 0]
      if rest:
        here += _holding(sizes[k], rest) * lengths[k]
      tokens[k, c], passed[k, c] = here, 0
      if rest and k + 1 < len(lengths) and full + tokens[k + 1, rest] < here:
        tokens[k, c], passed[k, c] = full + tokens[k + 1, rest], rest
  carry, c = [], 0
  for k in range(len(lengths)):
    c = passed[k, c]
    carry.append(c)
  return carry


def round_up(n: int, multiple: int) -> int:
  """The smallest multiple of `multiple` that is >= n (and >= `multiple`): a padded length."""
  return max(multiple, -(-n // multiple) * multiple)


def pad_rows(n: int, multiple: int) -> int:
  """The padded row count of n rows: the next of 2^k and 3·2^(k-1) (at least `multiple`; less than
  1.5·n), rounded up to a multiple of `multiple`, so that a job compiles few shapes."""
  rows = max(multiple, 1 << max(n - 1, 0).bit_length())
  if rows >= 4 and 3 * rows // 4 >= n:
    rows = 3 * rows // 4
  return -(-rows // multiple) * multiple


def distinct_rows(examples: Sequence[Sequence[np.ndarray]], side: int
                  ) -> tuple[list[np.ndarray], np.ndarray]:
  """The distinct id sequences of one side of the examples (0 queries, 1 documents, for models
  whose examples are (query ids, document ids)) in order of first appearance, and each example's
  index into them."""
  index: dict[bytes, int] = {}
  distinct, of = [], np.empty(len(examples), np.int32)
  for i, example in enumerate(examples):
    key = example[side].tobytes()
    if key not in index:
      index[key] = len(distinct)
      distinct.append(example[side])
    of[i] = index[key]
  return distinct, of
