"""T5's span corruption (Raffel et al. 2020, section 3.1.4 and 3.3) as SeqIO preprocessors and tasks.

A pre-training task chains, as the `t5` package's C4 task does:

    {"text": "..."}                                     one document of a `TextSource`
      -> rekey + seqio tokenize -> {"targets": ids}     no EOS yet
      -> span_corruption                                 (below)
           select_random_chunk   a random window of at most 65,536 tokens of each document
           reduce_concat_tokens  128 documents joined into one token stream (less padding)
           split_tokens          cut into pieces of `tokens_length` (random_spans_helper)
           denoise               15% of the tokens in spans of mean length 3 become the targets
      -> append_eos_after_trim                           EOS on both sides

    "The cat sat on the mat today"  (noise: "sat on", "today")
      -> inputs  "The cat <extra_id_0> the mat <extra_id_1>" + EOS
         targets "<extra_id_0> sat on <extra_id_1> today" + EOS

Sentinels are the vocabulary's extra ids counted down from its top: the first noise span of an
example becomes the last id (`<extra_id_0>` = vocab_size - 1), the next the one below, and so on;
the targets hold each noise span after the same sentinel. The mask alternates spans starting with
kept tokens and ending with noise (the `t5` package's `random_spans_noise_mask` with its default
`random_roll=False`), so the targets end with the last noise span, not with one more sentinel as in
the paper's Figure 2. A vocabulary needs at least as many extra ids as an example has spans (T5's
100; an input of 512 has 28 spans).

The functions below follow the `t5` package's definitions (t5/data/preprocessors.py, version 0.9.4,
Apache 2.0) op for op and draw their random numbers the same way, so that with the same seeds they
give the same examples: scripts/make_span_corruption_goldens.py runs the `t5` package's own code on
literal rows and tests/test_span_corruption.py compares. They are written here because the `t5`
package installs mesh-tensorflow, torch and transformers along with them.
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional, Sequence

import seqio
import tensorflow as tf

AUTOTUNE = tf.data.experimental.AUTOTUNE
NOISE_DENSITY = 0.15
MEAN_NOISE_SPAN_LENGTH = 3.0
MAX_CHUNK = 65536  # select_random_chunk's window, as in T5's span_corruption
CONCAT_DOCUMENTS = 128  # reduce_concat_tokens' batch


def random_spans_helper(inputs_length: int, noise_density: float = NOISE_DENSITY,
                        mean_noise_span_length: float = MEAN_NOISE_SPAN_LENGTH,
                        extra_tokens_per_span_inputs: int = 1,
                        extra_tokens_per_span_targets: int = 1) -> tuple[int, int]:
  """(tokens_length, targets_length): how many raw tokens give inputs of exactly `inputs_length`
  (EOS included) without padding, and the length of the targets they give. T5: 512 -> (568, 114)."""

  def lengths(tokens_length: int) -> tuple[int, int]:
    num_noise_tokens = int(round(tokens_length * noise_density))
    num_nonnoise_tokens = tokens_length - num_noise_tokens
    num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
    # inputs: the non-noise tokens, one sentinel per noise span, EOS
    return (num_nonnoise_tokens + num_noise_spans * extra_tokens_per_span_inputs + 1,
            num_noise_tokens + num_noise_spans * extra_tokens_per_span_targets + 1)

  tokens_length = inputs_length - 1
  while lengths(tokens_length + 1)[0] <= inputs_length:
    tokens_length += 1
  _, targets_length = lengths(tokens_length)
  if noise_density == 0.5 and targets_length > inputs_length:  # T5's: targets = inputs length
    tokens_length -= 1
    targets_length -= 1
  return tokens_length, targets_length


def random_spans_noise_mask(length: tf.Tensor, noise_density: float, seeds,
                            mean_noise_span_length: float = MEAN_NOISE_SPAN_LENGTH) -> tf.Tensor:
  """A boolean mask of `length`: round(length * noise_density) noise tokens (at least 1, at most
  length - 1) in round(noise / mean_noise_span_length) spans (at least 1); spans alternate
  non-noise, noise, beginning with non-noise; all such masks are equally likely. `seeds`: two
  stateless seeds (the noise and the non-noise span lengths)."""
  if noise_density == 0.0:
    return tf.zeros(length, tf.bool)
  orig_length = length
  length = tf.maximum(length, 2)  # avoid degeneracy
  to_int = functools.partial(tf.cast, dtype=tf.int32)
  to_float = functools.partial(tf.cast, dtype=tf.float32)
  num_noise_tokens = to_int(tf.round(to_float(length) * noise_density))
  num_noise_tokens = tf.minimum(tf.maximum(num_noise_tokens, 1), length - 1)
  num_noise_spans = to_int(tf.round(to_float(num_noise_tokens) / mean_noise_span_length))
  num_noise_spans = tf.maximum(num_noise_spans, 1)
  num_nonnoise_tokens = length - num_noise_tokens

  def random_segmentation(num_items, num_segments, seed):
    """`num_items` split at random into `num_segments` non-empty segments: their lengths."""
    first_in_segment = tf.pad(
        seqio.stateless_shuffle(to_int(tf.range(num_items - 1) < num_segments - 1), seed),
        [[1, 0]])
    segment_id = tf.cumsum(first_in_segment)
    return tf.math.segment_sum(tf.ones_like(segment_id), segment_id)

  noise_span_lengths = random_segmentation(num_noise_tokens, num_noise_spans, seeds[0])
  nonnoise_span_lengths = random_segmentation(num_nonnoise_tokens, num_noise_spans, seeds[1])
  interleaved = tf.reshape(tf.stack([nonnoise_span_lengths, noise_span_lengths], axis=1),
                           [num_noise_spans * 2])
  span_starts = tf.cumsum(interleaved)[:-1]
  span_start_indicator = tf.math.unsorted_segment_sum(tf.ones_like(span_starts), span_starts,
                                                      length)
  span_num = tf.cumsum(span_start_indicator)
  return tf.equal(span_num % 2, 1)[:orig_length]


def sentinel_id(vocabulary: seqio.Vocabulary) -> int:
  """`<extra_id_0>`: the vocabulary's last id (pieces + extra ids - 1)."""
  return vocabulary.vocab_size - 1


def noise_span_to_unique_sentinel(tokens: tf.Tensor, noise_mask: tf.Tensor,
                                  vocabulary: seqio.Vocabulary) -> tf.Tensor:
  """Each run of noise tokens -> one sentinel, counting down from `<extra_id_0>`; the rest kept.
  [a b c d e], noise [0 1 1 0 1] -> [a S0 d S1] with S0 = vocab_size - 1, S1 = vocab_size - 2."""
  prev_token_is_noise = tf.pad(noise_mask[:-1], [[1, 0]])
  first_noise_tokens = tf.logical_and(noise_mask, tf.logical_not(prev_token_is_noise))
  subsequent_noise_tokens = tf.logical_and(noise_mask, prev_token_is_noise)
  sentinel = sentinel_id(vocabulary) + 1 - tf.cumsum(tf.cast(first_noise_tokens, tokens.dtype))
  tokens = tf.where(first_noise_tokens, sentinel, tokens)
  return tf.boolean_mask(tokens, tf.logical_not(subsequent_noise_tokens))


def nonnoise_span_to_unique_sentinel(tokens: tf.Tensor, noise_mask: tf.Tensor,
                                     vocabulary: seqio.Vocabulary) -> tf.Tensor:
  """The targets: the same with the roles swapped. [a b c d e], noise [0 1 1 0 1] -> [S0 b c S1 e]."""
  return noise_span_to_unique_sentinel(tokens, tf.logical_not(noise_mask), vocabulary)


def select_random_chunk(dataset: tf.data.Dataset, max_length: int = MAX_CHUNK,
                        feature_key: str = "targets") -> tf.data.Dataset:
  """Drops empty examples; of a longer one keeps one of its `max_length` windows at random."""

  @seqio.map_over_dataset(num_seeds=1)
  def chunk(x, seed):
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed))
    tokens = x[feature_key]
    n_tokens = tf.shape(tokens)[0]
    num_segments = tf.cast(tf.math.ceil(tf.cast(n_tokens, tf.float32) / max_length), tf.int32)
    start = max_length * tf.random.stateless_uniform([], maxval=num_segments, dtype=tf.int32,
                                                     seed=seeds[1])
    return {feature_key: tokens[start:tf.minimum(start + max_length, n_tokens)]}

  return chunk(dataset.filter(lambda x: tf.not_equal(tf.size(x[feature_key]), 0)))


def reduce_concat_tokens(dataset: tf.data.Dataset, feature_key: str = "targets",
                         batch_size: int = CONCAT_DOCUMENTS) -> tf.data.Dataset:
  """Every `batch_size` consecutive examples -> one, their tokens joined (no separator)."""
  dataset = dataset.map(lambda x: {feature_key: x[feature_key]}, num_parallel_calls=AUTOTUNE)
  dataset = dataset.padded_batch(batch_size, padded_shapes={feature_key: [-1]})

  def join(x):
    tokens = tf.reshape(x[feature_key], [-1])
    return {feature_key: tf.boolean_mask(tokens, tf.cast(tokens, tf.bool))}

  return dataset.map(join, num_parallel_calls=AUTOTUNE)


def split_tokens(dataset: tf.data.Dataset, max_tokens_per_segment: int,
                 feature_key: str = "targets") -> tf.data.Dataset:
  """Each example -> pieces of exactly `max_tokens_per_segment` tokens (the last may be shorter)."""

  @seqio.map_over_dataset(num_seeds=1)
  def split(x, seed):
    del seed  # (T5 draws the length from it only with a minimum length; we never give one)
    tokens = x[feature_key]
    length = max_tokens_per_segment
    n_tokens = tf.shape(tokens)[0]
    num_segments = tf.cast(tf.math.ceil(tf.cast(n_tokens, tf.float32) / tf.cast(length, tf.float32)),
                           tf.int32)
    padding = num_segments * length - n_tokens
    lengths = tf.concat([tf.repeat(length, num_segments - 1), [length - padding]], axis=0)
    pieces = tf.reshape(tf.pad(tokens, [[0, padding]]), [-1, length])
    return tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices({feature_key: pieces}),
                                tf.data.Dataset.from_tensor_slices({feature_key: lengths})))

  dataset = dataset.filter(lambda x: tf.not_equal(tf.size(x[feature_key]), 0))
  dataset = split(dataset).flat_map(lambda z: z)
  return dataset.map(lambda pieces, lengths: {k: v[:lengths[k]] for k, v in pieces.items()},
                     num_parallel_calls=AUTOTUNE)


def denoise(dataset: tf.data.Dataset, output_features: Mapping[str, seqio.Feature],
            noise_density: float = NOISE_DENSITY,
            mean_noise_span_length: float = MEAN_NOISE_SPAN_LENGTH) -> tf.data.Dataset:
  """{"targets": tokens} -> {"inputs": noise spans replaced by sentinels, "targets": the noise spans
  after their sentinels} (`random_spans_noise_mask`, the two functions above)."""
  vocabulary = output_features["targets"].vocabulary
  if "inputs" in output_features and output_features["inputs"].vocabulary != vocabulary:
    raise ValueError("span corruption builds inputs from the targets' ids: the task's inputs and "
                     "targets must share one vocabulary")

  @seqio.map_over_dataset(num_seeds=1)
  def corrupt(features, seed):
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 6))
    tokens = features["targets"]
    noise_mask = random_spans_noise_mask(tf.size(tokens), noise_density, seeds[:2],
                                         mean_noise_span_length)
    return {"inputs": noise_span_to_unique_sentinel(tokens, noise_mask, vocabulary),
            "targets": nonnoise_span_to_unique_sentinel(tokens, noise_mask, vocabulary)}

  return corrupt(dataset)


def span_corruption(dataset: tf.data.Dataset, sequence_length: Mapping[str, int],
                    output_features: Mapping[str, seqio.Feature],
                    noise_density: float = NOISE_DENSITY,
                    mean_noise_span_length: float = MEAN_NOISE_SPAN_LENGTH,
                    merge_examples_to_reduce_padding: bool = True) -> tf.data.Dataset:
  """T5's pre-training objective on tokenized `targets` (no EOS): raw pieces sized by
  `random_spans_helper(sequence_length["inputs"])` so that the inputs fill their length exactly,
  then denoised. Raises ValueError when `sequence_length["targets"]` is shorter than the targets
  that gives (T5: inputs 512 -> targets 114), or the vocabulary has fewer extra ids than spans."""
  tokens_length, targets_length = random_spans_helper(sequence_length["inputs"], noise_density,
                                                      mean_noise_span_length)
  if sequence_length["targets"] < targets_length:
    raise ValueError(f"span corruption with inputs of {sequence_length['inputs']} tokens makes "
                     f"targets of {targets_length}; the targets length is "
                     f"{sequence_length['targets']} (set it to {targets_length})")
  spans = int(round(int(round(tokens_length * noise_density)) / mean_noise_span_length))
  extra_ids = getattr(output_features["targets"].vocabulary, "extra_ids", 0)
  if extra_ids < spans:  # one sentinel per noise span
    raise ValueError(f"span corruption with inputs of {sequence_length['inputs']} tokens needs "
                     f"{spans} sentinels; the vocabulary has {extra_ids} extra ids")
  dataset = select_random_chunk(dataset, MAX_CHUNK)
  if merge_examples_to_reduce_padding:
    dataset = reduce_concat_tokens(dataset, batch_size=CONCAT_DOCUMENTS)
  dataset = split_tokens(dataset, tokens_length)
  return denoise(dataset, output_features, noise_density, mean_noise_span_length)


def span_corruption_preprocessors() -> list:
  """A task's preprocessors on a `{"text"}` source, as T5's C4 span-corruption task has them."""
  return [functools.partial(seqio.preprocessors.rekey, key_map={"inputs": None, "targets": "text"}),
          seqio.preprocessors.tokenize,
          seqio.CacheDatasetPlaceholder(),
          span_corruption,
          seqio.preprocessors.append_eos_after_trim]


class TextSource(seqio.DataSource):
  """A SeqIO source of `{"text"}` rows from `load(split) -> list of str`, read on first use; shuffled
  (seeded, again each epoch) when asked."""

  def __init__(self, load, splits: Sequence[str]):
    super().__init__(splits=splits)
    self.load = load
    self._texts: dict[str, list[str]] = {}

  def texts(self, split: str) -> list[str]:
    if split not in self.splits:
      raise ValueError(f"unknown split {split!r}; this source has {list(self.splits)}")
    if split not in self._texts:
      self._texts[split] = [t for t in self.load(split) if t.strip()]
    return self._texts[split]

  @property
  def supports_arbitrary_sharding(self) -> bool:
    return True

  def list_shards(self, split: str) -> Sequence[str]:
    return [split]

  def num_input_examples(self, split: str) -> int:
    return len(self.texts(split))

  def get_dataset(self, split: str = "train", shuffle: bool = True, seed: Optional[int] = None,
                  shard_info: Optional[seqio.ShardInfo] = None, *,
                  sequence_length: Optional[Mapping[str, int]] = None, use_cached: bool = False,
                  num_epochs: Optional[int] = 1) -> tf.data.Dataset:
    del sequence_length, use_cached, num_epochs
    texts = self.texts(split)
    dataset = tf.data.Dataset.from_tensor_slices({"text": tf.constant(texts, tf.string)})
    if shard_info is not None:
      dataset = dataset.shard(shard_info.num_shards, shard_info.index)
    if shuffle:
      dataset = dataset.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    return dataset


def register_span_corruption_task(name: str, source: seqio.DataSource, vocabulary: str,
                                  shuffle_buffer_size: int = 10_000) -> seqio.Task:
  """Registers T5's span corruption on a `{"text"}` source with `vocabulary` (a name of
  `t5rank.models.vocab.VOCABULARIES` or a path; it needs extra ids)."""
  from t5rank.data.preprocessors import output_features

  features = output_features(vocabulary)
  if features["targets"].vocabulary.extra_ids == 0:
    raise ValueError(f"{name}: vocabulary {vocabulary!r} has no extra ids; span corruption needs "
                     "sentinels (e.g. insuranceqa_en_8k_sentinels instead of insuranceqa_en_8k)")
  return seqio.TaskRegistry.add(name, source=source, output_features=features,
                                preprocessors=span_corruption_preprocessors(),
                                shuffle_buffer_size=shuffle_buffer_size)
