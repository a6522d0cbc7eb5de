"""TK's training data: triples (query, relevant, non-relevant) of a source as word-id batches.

    SOURCES[task] ─► TripleTable ─► tk_batches: query (b, m), positive and negative (b, n) ids,
    n the batch's longest document rounded up to a multiple of 32 (at most the config's length)
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Iterator

import numpy as np

from t5rank.models.batching import round_up
from t5rank.models.tk_reranker import DOCUMENT_BUCKET  # training pads documents as scoring does
from t5rank.models.words import WordVocabulary


def _insuranceqa(language: str):
  def table():
    from t5rank.data.sources import insuranceqa
    return insuranceqa("train", language)
  return table


def _generic():
  from t5rank.data.sources import generic_triples
  return generic_triples("train")


# Triple sources by task name: InsuranceQA's training split (its pools' negatives) and the generic
# queries/corpus/qrels/run form ($T5RANK_QUERIES, $T5RANK_CORPUS, $T5RANK_QRELS, $T5RANK_RUN); a
# teacher's scores (`teacher_task`) add `teacher:DIR`.
SOURCES: dict[str, Callable[[], Any]] = {
    "insuranceqa_en": _insuranceqa("en"), "insuranceqa_zh": _insuranceqa("zh"),
    "generic": _generic}


def teacher_task(directory: str) -> str:
  """The task name of the teacher scores in `directory` (`t5rank teacher`), registered as a
  source whose triples carry the teacher's two scores (`t5rank.data.teacher.teacher_table`): a
  gin recipe says `MIXTURE_OR_TASK_NAME = @tk_triples.teacher_task()` with
  `tk_triples.teacher_task.directory = %TEACHER_SCORES`. The directory is checked now."""
  from t5rank.data.teacher import TEACHER_PREFIX, read_teacher, teacher_table

  directory = os.path.abspath(directory)
  read_teacher(directory)
  name = TEACHER_PREFIX + directory
  SOURCES[name] = functools.partial(teacher_table, directory)
  return name


def tk_batches(table, vocabulary: WordVocabulary, *, batch_size: int, query_length: int,
               document_length: int, seed: int, start_step: int = 0, shard_index: int = 0,
               num_shards: int = 1) -> Iterator[dict[str, np.ndarray]]:
  """Endless batches of this host's `batch_size // num_shards` triples from global step
  `start_step` on (the same stream a run from step 0 reaches there): `query` (b, query_length),
  `positive` and `negative` (b, n) int32 word ids, n the batch's longest document rounded up to a
  multiple of 32 (at most `document_length`); from a scored table (a teacher's) also
  `positive_score` and `negative_score` (b,) float32."""
  if batch_size <= 0 or batch_size % num_shards:
    raise ValueError(f"batch_size {batch_size} must be a positive multiple of the data shards "
                     f"({num_shards})")
  rows = batch_size // num_shards
  cache: dict[tuple[str, int], np.ndarray] = {}
  counts = {"oov": 0, "words": 0}

  def ids(text: str, length: int) -> np.ndarray:
    key = (text, length)
    if key not in cache:
      cache[key], oov, n = vocabulary.encode(text, length)
      counts["oov"] += oov
      counts["words"] += n
    return cache[key]

  triples = table.triples(seed=seed, start=start_step * batch_size, shard_index=shard_index,
                          num_shards=num_shards)
  reported = False
  while True:
    chunk = [next(triples) for _ in range(rows)]
    query = np.zeros((rows, query_length), np.int32)
    docs = [(ids(t[1], document_length), ids(t[2], document_length)) for t in chunk]
    longest = max(max(len(p), len(n)) for p, n in docs)
    length = min(round_up(longest, DOCUMENT_BUCKET), document_length)
    positive = np.zeros((rows, length), np.int32)
    negative = np.zeros((rows, length), np.int32)
    for row, (triple, (p, n)) in enumerate(zip(chunk, docs)):
      q = ids(triple[0], query_length)
      query[row, :len(q)], positive[row, :len(p)], negative[row, :len(n)] = q, p, n
    if not reported:
      print(f"TK training data: {100.0 * counts['oov'] / max(counts['words'], 1):.2f}% of the "
            "first batch's words are out of vocabulary (the unknown id, masked out)", flush=True)
      reported = True
    batch = {"query": query, "positive": positive, "negative": negative}
    if table.scored:
      batch["positive_score"] = np.asarray([t[3] for t in chunk], np.float32)
      batch["negative_score"] = np.asarray([t[4] for t in chunk], np.float32)
    yield batch
