"""SeqIO Tasks for monoT5 training: a triple source plus the preprocessors of `t5rank.data.preprocessors`.

`tasks/__init__.py` calls the functions here to register every task; nothing here registers on
import. Task names are `{dataset}_monot5_{targets}`, e.g. `insuranceqa_en_monot5_hot_cold`; the
data-poor ones add `_{n}_s{seed}`, e.g. `insuranceqa_en_monot5_true_false_1k_s0`. A task tokenizes
with one vocabulary (`t5rank.models.vocab.VOCABULARIES`, T5's by default), held in its output features;
`task_vocabulary` gives it to the trainer, which ships it with the final checkpoint.

Shuffling happens in the source, on triples (each task sets `shuffle_buffer_size=None`), so the
positive and negative of a triple stay next to each other through the preprocessors and every even
batch is class-balanced. Train with `t5rank.data.training_data.training_dataset`.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional, Sequence

import seqio
import tensorflow as tf

from t5rank.data import preprocessors
from t5rank.data.sources import TripleTable
from t5rank.models.vocab import DEFAULT_VOCABULARY, TargetSpec, Vocabulary

TRIPLE_SIGNATURE = {"query": tf.TensorSpec((), tf.string),
                    "positive": tf.TensorSpec((), tf.string),
                    "negative": tf.TensorSpec((), tf.string)}
SCORED_TRIPLE_SIGNATURE = {**TRIPLE_SIGNATURE,  # + the BM25 score of each pair (t5rank.data.bm25_input)
                           "positive_score": tf.TensorSpec((), tf.float64),
                           "negative_score": tf.TensorSpec((), tf.float64)}

# The paper's six (Table 4) and mT5's yes/no.
VARIANTS = ("true_false", "false_true", "hot_cold", "apple_orange", "hot_orange", "ab_de", "yes_no")
_TARGET_WORDS: dict[str, TargetSpec] = {}  # task name -> the target words it was registered with
_BM25_IN_INPUT: set[str] = set()  # tasks whose inputs carry the pair's BM25 score
_MODEL: dict[str, str] = {}  # task name -> the model family it trains, when not monoT5


def task_target_words(task_name: str) -> Optional[TargetSpec]:
  """The target words (a registry name or a pair) a monoT5 task trains, None for other tasks.
  The trainer writes them into the final checkpoint, so that `t5rank score` uses the same words."""
  return _TARGET_WORDS.get(task_name)


def task_bm25_in_input(task_name: str) -> bool:
  """Whether a monoT5 (duoT5) task writes each pair's (document's) BM25 score into its inputs
  (`t5rank.data.bm25_input`). The trainer records it in the final checkpoint, so that `t5rank
  score` reads the same input."""
  return task_name in _BM25_IN_INPUT


def task_model(task_name: str) -> str:
  """The model family a task trains (`t5rank.models.registry`): "duot5" for the pairwise tasks,
  else "monot5". The trainer writes it into the final checkpoint's metadata."""
  return _MODEL.get(task_name, "monot5")


def task_vocabulary(task_name: str) -> Optional[Vocabulary]:
  """The vocabulary a registered task or mixture tokenizes with (t5rank's twin of its SeqIO
  vocabulary: same file, same extra ids), None when no task of that name is registered."""
  if task_name not in seqio.TaskRegistry.names() and task_name not in seqio.MixtureRegistry.names():
    return None
  features = seqio.get_mixture_or_task(task_name).output_features
  return preprocessors.features_vocabulary(features)


class TripleSource(seqio.DataSource):
  """A SeqIO source of `{query, positive, negative}` triples from a `TripleTable` per split.

  `load(split)` is called when a dataset is first asked for (never at registration). With
  `data_poor=(n, seed)` the table is cut to n positives + n negatives drawn with `seed`.
  """

  def __init__(self, load: Callable[[str], TripleTable], splits: Sequence[str],
               data_poor: Optional[tuple[int, int]] = None):
    super().__init__(splits=splits, performs_internal_shuffling=True)
    self.load = load
    self.data_poor = data_poor

  def with_data_poor(self, n: int, seed: int) -> "TripleSource":
    """The same source cut to n positives + n negatives drawn with `seed`."""
    return TripleSource(self.load, self.splits, data_poor=(n, seed))

  @property
  def supports_arbitrary_sharding(self) -> bool:
    return True

  def list_shards(self, split: str) -> Sequence[str]:
    return [split]

  def table(self, split: str) -> TripleTable:
    """The split's table (after data-poor sampling)."""
    if split not in self.splits:
      raise ValueError(f"unknown split {split!r}; this source has {list(self.splits)}")
    table = self.load(split)
    if self.data_poor:
      table = table.subsample(*self.data_poor)
    return table

  def num_input_examples(self, split: str) -> int:
    return len(self.table(split))

  def triples(self, split: str, *, seed: int = 0, shuffle: bool = True, start: int = 0,
              num_epochs: Optional[int] = None, shard_index: int = 0,
              num_shards: int = 1) -> tf.data.Dataset:
    """The triple stream from global position `start` (see `TripleTable.triples`) as a dataset; a
    scored table's triples also carry `positive_score` and `negative_score`."""
    table = self.table(split)
    signature = SCORED_TRIPLE_SIGNATURE if table.scored else TRIPLE_SIGNATURE

    def generate():
      for triple in table.triples(seed=seed, shuffle=shuffle, start=start, num_epochs=num_epochs,
                                  shard_index=shard_index, num_shards=num_shards):
        yield dict(zip(signature, triple))

    return tf.data.Dataset.from_generator(generate, output_signature=signature)

  def get_dataset(self, split: str = "train", shuffle: bool = True, seed: Optional[int] = None,
                  shard_info: Optional[seqio.ShardInfo] = None, *,
                  sequence_length: Optional[Mapping[str, int]] = None, use_cached: bool = False,
                  num_epochs: Optional[int] = 1) -> tf.data.Dataset:
    """One epoch of triples (SeqIO's interface; `Task.get_dataset` repeats it)."""
    del sequence_length, use_cached, num_epochs
    shard = shard_info or seqio.ShardInfo(0, 1)
    return self.triples(split, seed=seed or 0, shuffle=shuffle, num_epochs=1,
                        shard_index=shard.index, num_shards=shard.num_shards)


def monot5_preprocessors(targets: TargetSpec, bm25_in_input: bool = False
                         ) -> list[Callable[..., tf.data.Dataset]]:
  """Triples -> balanced pairs -> monoT5 text -> ids, for a target-word variant (with each pair's
  BM25 score in the input when `bm25_in_input`)."""
  return [preprocessors.split_triples,
          functools.partial(preprocessors.format_monot5, targets=targets,
                            bm25_in_input=bm25_in_input),
          functools.partial(preprocessors.tokenize_monot5, bm25_in_input=bm25_in_input)]


def register_monot5_task(name: str, source: seqio.DataSource, targets: TargetSpec,
                         source_preprocessors: Sequence[Callable[..., tf.data.Dataset]] = (),
                         vocabulary: str = DEFAULT_VOCABULARY,
                         bm25_in_input: bool = False) -> seqio.Task:
  """Registers a monoT5 task on a triple source; `source_preprocessors` turn the source's rows into
  triples when they are not triples already (e.g. `query_records_to_triples` for TFDS InsuranceQA).
  `vocabulary` is a name of `t5rank.models.vocab.VOCABULARIES` or a SentencePiece model path; it is
  resolved here, but no data is read.

  A `seqio.CacheDatasetPlaceholder` marks where the rows are triples: `training_dataset` shuffles
  and skips there. Tasks on a `TripleSource` shuffle triples inside the source; others must be
  trained through `training_dataset` (`Task.get_dataset(shuffle=True)` refuses them).
  `bm25_in_input`: the source's triples carry BM25 scores (a scored `TripleTable`) and the inputs
  write them (`t5rank.data.bm25_input`); the preprocessors refuse triples without them."""
  _TARGET_WORDS[name] = targets
  if bm25_in_input:
    _BM25_IN_INPUT.add(name)
  return seqio.TaskRegistry.add(
      name, source=source, output_features=preprocessors.output_features(vocabulary),
      preprocessors=[*source_preprocessors, seqio.CacheDatasetPlaceholder(),
                     *monot5_preprocessors(targets, bm25_in_input)],
      shuffle_buffer_size=None)


def register_variants(dataset: str, source: seqio.DataSource,
                      source_preprocessors: Sequence[Callable[..., tf.data.Dataset]] = (),
                      variants: Sequence[str] = VARIANTS,
                      vocabulary: str = DEFAULT_VOCABULARY,
                      bm25_in_input: bool = False) -> list[str]:
  """`{dataset}_monot5_{variant}` for each target variant, on `vocabulary`; returns the names."""
  names = []
  for variant in variants:
    names.append(f"{dataset}_monot5_{variant}")
    register_monot5_task(names[-1], source, variant, source_preprocessors, vocabulary,
                         bm25_in_input)
  return names


def register_duot5_task(name: str, source: seqio.DataSource, targets: TargetSpec = "true_false",
                        vocabulary: str = DEFAULT_VOCABULARY,
                        bm25_in_input: bool = False) -> seqio.Task:
  """Registers a duoT5 task on a triple source: each triple's two ordered pairs, the positive
  first then second (`t5rank.data.preprocessors.split_triples_duo`), `targets`' words for "the
  first is the more relevant" and not. `bm25_in_input`: the source's triples carry BM25 scores
  and the inputs write each document's (`t5rank.models.duot5`)."""
  _TARGET_WORDS[name] = targets
  _MODEL[name] = "duot5"
  if bm25_in_input:
    _BM25_IN_INPUT.add(name)
  return seqio.TaskRegistry.add(
      name, source=source, output_features=preprocessors.output_features(vocabulary),
      preprocessors=[seqio.CacheDatasetPlaceholder(), preprocessors.split_triples_duo,
                     functools.partial(preprocessors.format_duot5, targets=targets,
                                       bm25_in_input=bm25_in_input),
                     functools.partial(preprocessors.tokenize_duot5,
                                       bm25_in_input=bm25_in_input)],
      shuffle_buffer_size=None)


def data_poor_name(task_name: str, n: int, seed: int) -> str:
  """`{task}_{n}_s{seed}` with n written as 1k / 10k when a multiple of 1000."""
  size = f"{n // 1000}k" if n % 1000 == 0 else str(n)
  return f"{task_name}_{size}_s{seed}"


def register_data_poor(task_name: str, n: int, seeds: Sequence[int]) -> list[str]:
  """Data-poor copies of a registered `TripleSource` task: n positives + n negatives per seed (the
  paper: n = 1000 or 10000, five trials)."""
  task = seqio.TaskRegistry.get(task_name)
  if not isinstance(task.source, TripleSource):
    raise TypeError(f"{task_name}: data-poor sampling needs a TripleSource task")
  names = []
  for seed in seeds:
    names.append(data_poor_name(task_name, n, seed))
    if task_name in _TARGET_WORDS:
      _TARGET_WORDS[names[-1]] = _TARGET_WORDS[task_name]
    if task_name in _BM25_IN_INPUT:
      _BM25_IN_INPUT.add(names[-1])
    seqio.TaskRegistry.add(names[-1], source=task.source.with_data_poor(n, seed), output_features=task.output_features,
                           preprocessors=task.preprocessors, shuffle_buffer_size=None)
  return names
