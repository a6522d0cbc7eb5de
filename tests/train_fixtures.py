"""Synthetic monoT5-shaped training data for the trainer tests: tiny vocabulary, learnable labels.

An example is random input ids (3..VOCAB-1) of random length, ending in EOS (1); the target word is
TRUE_ID when token 7 occurs in the input, else FALSE_ID, followed by EOS. Batches are class-balanced
and a pure function of (seed, step, shard), like the real SeqIO training data.
"""

from __future__ import annotations

import os
import time
from typing import Iterator

import numpy as np

VOCAB = 128
TRUE_ID, FALSE_ID, EOS_ID, SIGNAL_ID = 10, 11, 1, 7
TINY_OVERRIDES = dict(vocab_size=VOCAB, d_model=32, d_ff=64, num_heads=4, d_kv=8,
                      num_encoder_layers=2, num_decoder_layers=1)


def make_examples(rng: np.random.Generator, n: int, max_length: int) -> list[tuple[list, list]]:
  """n (input ids, target ids) pairs, half relevant and half not."""
  examples = []
  for i in range(n):
    length = int(rng.integers(3, max_length))
    ids = [int(x) for x in rng.integers(12, VOCAB, size=length - 1)]
    relevant = i % 2 == 0
    if relevant:
      ids[int(rng.integers(0, len(ids)))] = SIGNAL_ID
    examples.append((ids + [EOS_ID], [TRUE_ID if relevant else FALSE_ID, EOS_ID]))
  return examples


def pad_batch(examples, lengths: dict) -> dict[str, np.ndarray]:
  """Unpacked batch: one example per row, padded with 0."""
  b, li, lt = len(examples), lengths["inputs"], lengths["targets"]
  batch = {k: np.zeros((b, n), np.int32) for k, n in [
      ("encoder_input_tokens", li), ("decoder_input_tokens", lt), ("decoder_target_tokens", lt),
      ("decoder_loss_weights", lt)]}
  for row, (inputs, targets) in enumerate(examples):
    batch["encoder_input_tokens"][row, :len(inputs)] = inputs
    batch["decoder_target_tokens"][row, :len(targets)] = targets
    batch["decoder_input_tokens"][row, 1:len(targets)] = targets[:-1]
    batch["decoder_loss_weights"][row, :len(targets)] = 1
  return batch


def pack_batch(examples, lengths: dict, rows: int) -> dict[str, np.ndarray]:
  """Packed batch: examples placed greedily into `rows` rows, with segment ids (1, 2, ...) and
  positions restarting at 0 in each segment, as SeqIO's packing feature converter lays them out."""
  li, lt = lengths["inputs"], lengths["targets"]
  names = ["encoder_input_tokens", "encoder_segment_ids", "encoder_positions"]
  dec = ["decoder_input_tokens", "decoder_target_tokens", "decoder_loss_weights",
         "decoder_segment_ids", "decoder_positions"]
  batch = {k: np.zeros((rows, li), np.int32) for k in names}
  batch.update({k: np.zeros((rows, lt), np.int32) for k in dec})
  fill = [[0, 0, 0] for _ in range(rows)]  # per row: encoder used, decoder used, segments
  for inputs, targets in examples:
    row = next(r for r in range(rows)
               if fill[r][0] + len(inputs) <= li and fill[r][1] + len(targets) <= lt)
    e, d, s = fill[row]
    s += 1
    batch["encoder_input_tokens"][row, e:e + len(inputs)] = inputs
    batch["encoder_segment_ids"][row, e:e + len(inputs)] = s
    batch["encoder_positions"][row, e:e + len(inputs)] = np.arange(len(inputs))
    batch["decoder_target_tokens"][row, d:d + len(targets)] = targets
    batch["decoder_input_tokens"][row, d + 1:d + len(targets)] = targets[:-1]
    batch["decoder_loss_weights"][row, d:d + len(targets)] = 1
    batch["decoder_segment_ids"][row, d:d + len(targets)] = s
    batch["decoder_positions"][row, d:d + len(targets)] = np.arange(len(targets))
    fill[row] = [e + len(inputs), d + len(targets), s]
  return batch


def synthetic_dataset(task_name: str, *, batch_size: int, feature_lengths: dict, seed: int,
                      start_step: int = 0, pack: bool = False, shard_index: int = 0,
                      num_shards: int = 1) -> Iterator[dict[str, np.ndarray]]:
  """The trainer's `dataset_fn` contract (`batch_size` is global; this yields the shard's rows).
  Env T5RANK_TEST_HANG_AT_STEP=N makes the iterator block before yielding the batch of step N
  (1-based), so that a test can kill the process there."""
  del task_name
  hang_at = int(os.environ.get("T5RANK_TEST_HANG_AT_STEP", "0"))
  step = start_step
  while True:
    if hang_at and step + 1 >= hang_at:
      time.sleep(3600)
    rng = np.random.default_rng([seed, step, shard_index])
    rows = batch_size // num_shards
    examples = make_examples(rng, rows * (2 if pack else 1), feature_lengths["inputs"] // 2)
    yield (pack_batch(examples, feature_lengths, rows) if pack
           else pad_batch(examples, feature_lengths))
    step += 1
