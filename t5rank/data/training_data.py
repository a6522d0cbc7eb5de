"""The T5 training input pipelines: deterministic for a seed, resumable at any step.

monoT5 (`training_dataset`), class-balanced:
    triples (seeded order, skipped to the start step) -> shard -> positive, negative, positive, ...
      -> monoT5 ids -> EncDecFeatureConverter (optional packing) -> batches of numpy arrays
Pre-training and other seq2seq tasks (`text_to_text_dataset`):
    the task's seeded SeqIO pipeline (e.g. span corruption) -> EncDecFeatureConverter -> batches
`seq2seq_dataset` picks one by the task.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

DEFAULT_FEATURE_LENGTHS = {"inputs": 512, "targets": 2}
DEFAULT_SHUFFLE_BUFFER = 100_000


def training_dataset(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int],
                     seed: int, start_step: int = 0, pack: bool = False, shard_index: int = 0,
                     num_shards: int = 1, split: str = "train",
                     shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER
                     ) -> Iterator[dict[str, np.ndarray]]:
  """Endless training batches of a registered monoT5 task (import `t5rank.tasks` first).

  Args:
    task_name: a task from `t5rank.tasks`, e.g. "insuranceqa_en_monot5_true_false".
    batch_size: the GLOBAL batch in examples (the paper: 128); it must be divisible by
      2 * num_shards, so that each shard's batch holds whole (positive, negative) pairs.
    feature_lengths: task feature lengths, e.g. {"inputs": 512, "targets": 2}; inputs longer than
      `feature_lengths["inputs"]` are cut in the document (`Relevant:` and EOS are kept).
    seed: fixes the order of triples and the negatives drawn, epoch after epoch.
    start_step: the first step to produce; the batches are exactly those an uninterrupted pipeline
      with the same arguments would give at that step, so a resumed run recreates the pipeline with
      `start_step` = the checkpoint's step (nothing goes into the checkpoint). Without packing the
      skip is computed directly (instant for `TripleSource` tasks, a pass over raw triples for TFDS
      tasks); with packing the rows before `start_step` are built and dropped, which takes time.
    pack: pack several examples per row (adds `encoder_segment_ids`, `encoder_positions`,
      `decoder_segment_ids`, `decoder_positions`); the batch is then `batch_size // num_shards`
      ROWS, and class balance holds over the stream rather than exactly per batch.
    shard_index, num_shards: this host's part of every global batch (host i gets the triples at
      global positions p with p % num_shards == i).
    split: the task split ("train"; InsuranceQA also has "validation" and "test").
    shuffle_buffer_size: for tasks whose source is not a `TripleSource` (TFDS), the triple shuffle
      buffer; `TripleSource` tasks shuffle each epoch exactly and ignore it.

  Yields:
    dicts of int32 numpy arrays of shape (batch_size // num_shards, length):
    `encoder_input_tokens`, `decoder_target_tokens`, `decoder_input_tokens`,
    `decoder_loss_weights` (+ the packing features). Without packing, rows 2i and 2i+1 are the
    positive and negative of one triple: every batch is exactly half positives.
  """
  import seqio
  import tensorflow as tf

  from t5rank.data.seqio_tasks import TripleSource

  if batch_size <= 0 or batch_size % (2 * num_shards):
    raise ValueError(f"batch_size {batch_size} must be a positive multiple of 2 * num_shards "
                     f"(= {2 * num_shards}): each shard's batch is whole (positive, negative) pairs")
  if not 0 <= shard_index < num_shards:
    raise ValueError(f"shard_index {shard_index} is not in [0, {num_shards})")
  task = seqio.get_mixture_or_task(task_name)
  if not isinstance(task, seqio.Task):
    raise TypeError(f"{task_name} is a mixture; training_dataset takes a monoT5 task")
  shard_batch = batch_size // num_shards
  skipped_triples = 0 if pack else start_step * batch_size // 2  # global positions
  if isinstance(task.source, TripleSource):
    triples = task.source.triples(split, seed=seed, start=skipped_triples,
                                  shard_index=shard_index, num_shards=num_shards)
  else:
    triples = task.preprocess_precache(task.source.get_dataset(split=split, shuffle=False))
    triples = triples.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    triples = triples.repeat().shard(num_shards, shard_index).skip(skipped_triples // num_shards)
  examples = task.preprocess_postcache(triples, sequence_length=feature_lengths, seed=seed)
  converter = seqio.EncDecFeatureConverter(pack=pack)
  batches = converter(examples, feature_lengths).batch(shard_batch, drop_remainder=True)
  if pack:
    batches = batches.skip(start_step)
  options = tf.data.Options()
  options.deterministic = True
  return batches.with_options(options).prefetch(2).as_numpy_iterator()


def text_to_text_dataset(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int],
                         seed: int, start_step: int = 0, pack: bool = False, shard_index: int = 0,
                         num_shards: int = 1, split: str = "train") -> Iterator[dict[str, np.ndarray]]:
  """Endless training batches of a registered seq2seq task that is not monoT5's (T5's span
  corruption, `t5rank.data.span_corruption`): the task's own pipeline (`Task.get_dataset`, shuffled
  and its random spans drawn from `seed`, repeated epoch after epoch; never cached in memory, which
  for a small source would replay the first epoch's document order), then the
  EncDecFeatureConverter (optional packing) and batches of `batch_size // num_shards` rows. The
  same arguments give the same batches; a resumed run rebuilds the stream and drops the
  `start_step` batches before it (this takes time, nothing goes into the checkpoint)."""
  import seqio
  import tensorflow as tf

  if batch_size <= 0 or batch_size % num_shards:
    raise ValueError(f"batch_size {batch_size} must be a positive multiple of num_shards {num_shards}")
  task = seqio.get_mixture_or_task(task_name)
  examples = task.get_dataset(sequence_length=dict(feature_lengths), split=split, shuffle=True,
                              seed=seed, shard_info=seqio.ShardInfo(shard_index, num_shards),
                              num_epochs=None, try_in_mem_cache=False)
  converter = seqio.EncDecFeatureConverter(pack=pack)
  batches = converter(examples, feature_lengths).batch(batch_size // num_shards, drop_remainder=True)
  options = tf.data.Options()
  options.deterministic = True
  return batches.skip(start_step).with_options(options).prefetch(2).as_numpy_iterator()


def seq2seq_dataset(task_name: str, **kwargs) -> Iterator[dict[str, np.ndarray]]:
  """`training_dataset` for a monoT5 task (it has target words), `text_to_text_dataset` for any
  other registered task (pre-training): the T5 trainer's data."""
  from t5rank.data.seqio_tasks import task_target_words

  if task_target_words(task_name) is not None:
    return training_dataset(task_name, **kwargs)
  return text_to_text_dataset(task_name, **kwargs)
