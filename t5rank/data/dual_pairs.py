"""The dual encoder's training data (`t5rank.training.dual` trains on it):

    InsuranceQA training pairs (question → each relevant answer; `PAIR_SOURCES`: English, Chinese,
      or both languages by the cross-lingual paper's merged or mixed strategy; English with
      pseudo-queries over the answers, `insuranceqa_en_pseudo`), or XPI's sentence pairs (a
      sentence → its translation or paraphrase, `t5rank.data.xpi`): `Pairs`
      -> `distinct_batches`: seeded epochs, no answer and no question twice in a batch (several
         questions share answers: a repeat would be an in-batch false negative; in both languages
         a question or answer and its translation count as the same)
      -> `pair_batches`: word ids (`Encoder`; `PieceEncoder` for the T5 variant) {query (B, ≤30),
         document (B, ≤256)}, + `label` for the cross_entropy loss (half positive pairs, half pool
         negatives), or B more documents for in_batch_softmax_pool and
         in_batch_softmax_margin_mse (`pool_negatives`)
    a teacher's scores (`t5rank teacher`'s directory, task `teacher:DIR`: `Pairs.of_teacher`) add
      `positive_score`, `negative_score`, `score_mask` (B,) for in_batch_softmax_margin_mse
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterator, Mapping, Optional, Sequence

import numpy as np

from t5rank.data.cross_lingual import pair_layouts, relevant_rows
from t5rank.data.insuranceqa import load_split
from t5rank.data.pseudo_queries import insuranceqa_with_pseudo_queries
from t5rank.data.teacher import TEACHER_PREFIX
from t5rank.data.xpi import xpi_table
from t5rank.models.batching import round_up
from t5rank.models.dual_encoder import POOL_LOSSES
from t5rank.models.vocab import EOS_ID
from t5rank.models.words import WordVocabulary

LENGTH_BUCKET = 32
# task name -> (language of the word list and the evaluation, the pairs' cross-lingual strategy)
PAIR_SOURCES = {"insuranceqa_en": ("en", "en"), "insuranceqa_zh": ("zh", "zh"),
                "insuranceqa_enzh_merged": ("enzh", "merged"),
                "insuranceqa_enzh_mixed": ("enzh", "mixed"), "xpi_enzh": ("enzh", "xpi"),
                "insuranceqa_en_pseudo": ("en", "pseudo")}
PSEUDO_FRACTION = 0.3  # the share of pseudo-query pairs in insuranceqa_en_pseudo's training pairs


@dataclasses.dataclass
class Pairs:
  """Positive (question, answer) pairs by index into `questions` and `answers`, and each question's
  negatives (answer indices; for the labelled cross-entropy). `keys`, when given, name each pair's
  question and answer by meaning (a text and its translation share a key): batches hold no key
  twice."""
  questions: list[str]
  answers: list[str]
  pairs: list[tuple[int, int]]
  negatives: list[list[int]]
  keys: Optional[list[tuple[int, int]]] = None
  scores: Optional[dict[tuple[int, int], float]] = None  # (question, answer) -> a teacher's score

  @property
  def batch_keys(self) -> list[tuple[int, int]]:
    return self.keys if self.keys is not None else self.pairs

  @classmethod
  def insuranceqa(cls, split: str, language: str = "en") -> "Pairs":
    """InsuranceQA's `split`: each question with each relevant answer; its pool negatives."""

    data = load_split(split, language)
    position = {aid: i for i, aid in enumerate(data.answers)}
    qids = list(data.queries)
    return cls(list(data.queries.values()), list(data.answers.values()),
               [(q, position[aid]) for q, qid in enumerate(qids) for aid in data.relevant[qid]],
               [[position[a] for a in data.negatives[qid]] for qid in qids])

  @classmethod
  def cross_lingual(cls, split: str, strategy: str, seed: int = 0) -> "Pairs":
    """InsuranceQA's `split` in English and Chinese (its translation), each (question, relevant
    answer) row made into pairs by the cross-lingual paper's `strategy`
    (`t5rank.data.cross_lingual.pair_layouts`: merged, both pairs in one language; mixed, one pair
    across languages and one in a language, `seed` choosing which half of the rows gets the Chinese
    answer). Questions: the English ones, then the Chinese; answers likewise; negatives (for the
    labelled cross_entropy loss, refused with mixed by `DualEncoder.check`): each question's pool in
    its own language. Keys: the English question's and answer's index."""

    data = {language: load_split(split, language) for language in ("en", "zh")}
    qids, aids = list(data["en"].queries), list(data["en"].answers)
    if list(data["zh"].queries) != qids or list(data["zh"].answers) != aids:
      raise ValueError(f"InsuranceQA {split}: the Chinese questions or answers are not the "
                       "English ones' translations, id for id")
    position = {aid: i for i, aid in enumerate(aids)}
    offset = {"en": 0, "zh": 1}
    question = {qid: q for q, qid in enumerate(qids)}
    rows = [(question[qid], position[aid]) for qid, aid in relevant_rows(data["en"])]
    pairs, keys = [], []
    for (q, a), layout in zip(rows, pair_layouts(len(rows), strategy, seed)):
      for query_language, answer_language in layout:
        pairs.append((q + offset[query_language] * len(qids),
                      a + offset[answer_language] * len(aids)))
        keys.append((q, a))
    negatives = [[position[a] + offset[language] * len(aids) for a in data["en"].negatives[qid]]
                 for language in ("en", "zh") for qid in qids]
    return cls([t for language in ("en", "zh") for t in data[language].queries.values()],
               [t for language in ("en", "zh") for t in data[language].answers.values()],
               pairs, negatives, keys)

  @classmethod
  def with_pseudo_queries(cls, split: str, fraction: float = PSEUDO_FRACTION,
                          seed: int = 0) -> "Pairs":
    """InsuranceQA's English `split`; for train, the rows of monoT5's pseudo-query mixture
    (`t5rank.data.pseudo_queries.insuranceqa_with_pseudo_queries`: a few idf-drawn words of one of
    the collection's answers after a training question's opening, positive that answer) as pairs,
    `fraction` of them pseudo-queries. The other splits are returned as they are."""
    if split != "train":
      return cls.insuranceqa(split, "en")
    return cls.of_table(insuranceqa_with_pseudo_queries(split, "en", fraction, seed))

  @classmethod
  def xpi(cls, split: str, seed: int = 0) -> "Pairs":
    """XPI's rows (`t5rank.data.xpi.xpi_table`, random negatives): each meaning group's sentence x
    with its positive y (a translation for half the groups, else a paraphrase or x itself); the
    negatives of x, its row's pool. Texts are interned, so a batch never holds one text twice."""
    return cls.of_table(xpi_table(split, "random", seed))

  @classmethod
  def of_table(cls, table) -> "Pairs":
    """A `TripleTable`'s rows as pairs: each row's query and positive; a query's negatives, its
    (last) row's pool."""
    pairs = [(int(q), int(d)) for q, d in table.positives]
    negatives: list[list[int]] = [[] for _ in table.queries]
    for (q, _), pool in zip(pairs, table.positive_pools):
      negatives[q] = table.pool_docs[table.pool_starts[pool]:table.pool_starts[pool + 1]].tolist()
    return cls(list(table.queries), list(table.documents), pairs, negatives)

  @classmethod
  def of_teacher(cls, directory: str) -> "Pairs":
    """The training pairs of a `t5rank teacher` directory (`t5rank.data.teacher.teacher_table`):
    each question with each relevant answer, its negatives the teacher's sample of its pool, and
    `scores` the teacher's score of every one of those (question, answer) pairs."""
    from t5rank.data.teacher import teacher_table

    table = teacher_table(directory)
    data = cls.of_table(table)
    scores = {pair: float(s) for pair, s in zip(data.pairs, table.positive_scores)}
    for pool, query in _pool_queries(table).items():
      start, stop = table.pool_starts[pool], table.pool_starts[pool + 1]
      for answer, score in zip(table.pool_docs[start:stop], table.pool_scores[start:stop]):
        scores[(query, int(answer))] = float(score)
    data.scores = scores
    return data

  @classmethod
  def source(cls, task_name: str, split: str) -> "Pairs":
    """The pairs of `split` a `PAIR_SOURCES` task (or a teacher's, `pair_source`) trains on."""
    language, strategy = pair_source(task_name)
    if strategy == "teacher":
      if split != "train":
        return cls.insuranceqa(split, language)
      return cls.of_teacher(task_name[len(TEACHER_PREFIX):])
    if language == strategy:
      return cls.insuranceqa(split, language)
    if strategy == "xpi":
      return cls.xpi(split)
    if strategy == "pseudo":
      return cls.with_pseudo_queries(split)
    return cls.cross_lingual(split, strategy)


def _pool_queries(table) -> dict[int, int]:
  """A scored table's pool index -> its question."""
  return {int(pool): int(q) for (q, _), pool in zip(table.positives, table.positive_pools)}


def pair_source(task_name: str) -> tuple[str, str]:
  """(language, strategy) of a dual encoder training task: a `PAIR_SOURCES` name, or a teacher
  directory's (`tk_triples.teacher_task`: English InsuranceQA training questions, "teacher")."""
  if task_name.startswith(TEACHER_PREFIX):
    return "en", "teacher"
  if task_name not in PAIR_SOURCES:
    raise ValueError(f"the dual encoder trains on the pairs of {tuple(PAIR_SOURCES)} or on a "
                     f"teacher's (tk_triples.teacher_task), got {task_name!r}")
  return PAIR_SOURCES[task_name]


def distinct_batches(pairs: Sequence[tuple[int, int]], batch_size: int, seed: int
                     ) -> Iterator[list[int]]:
  """Endless batches of indices into `pairs` ((question, answer) keys), epoch after epoch in a
  seeded order, no question and no answer twice in a batch: a pair that would repeat one waits
  (first in line) for the next batch. Every pair comes once per epoch, up to those still waiting
  at the epoch's end, which open the next (and come again in its own order: such a pair is seen
  twice in quick succession)."""
  distinct = min(len({q for q, _ in pairs}), len({a for _, a in pairs}))
  if not 0 < batch_size <= distinct:
    raise ValueError(f"batch_size {batch_size}: the pairs hold {distinct} distinct questions or "
                     "answers; a batch of distinct ones must be positive and at most that")
  waiting: collections.deque[int] = collections.deque()
  epoch = 0
  while True:
    order = np.random.default_rng([seed, epoch]).permutation(len(pairs))
    stream = iter(order.tolist())
    exhausted, made = False, 0
    while not exhausted:
      batch, questions, answers, deferred = [], set(), set(), []
      candidates = list(waiting)
      waiting.clear()
      for i in candidates:
        q, a = pairs[i]
        if len(batch) < batch_size and q not in questions and a not in answers:
          batch.append(i)
          questions.add(q)
          answers.add(a)
        else:
          deferred.append(i)
      while len(batch) < batch_size:
        i = next(stream, None)
        if i is None:
          exhausted = True
          break
        q, a = pairs[i]
        if q in questions or a in answers:
          deferred.append(i)
          continue
        batch.append(i)
        questions.add(q)
        answers.add(a)
      waiting.extend(deferred)
      if len(batch) == batch_size:
        made += 1
        yield batch
      else:  # the epoch ran out: its last pairs open the next one
        waiting.extendleft(reversed(batch))
    if not made and epoch:
      raise ValueError(f"no batch of {batch_size} pairs without a repeated question or answer "
                       "can be formed from these pairs; use a smaller batch")
    epoch += 1


class Encoder:
  """Word ids of texts, padded to a multiple of 32 (at most `length`), cached per text."""

  def __init__(self, vocabulary: WordVocabulary):
    self.vocabulary = vocabulary
    self.cache: dict[tuple[str, int], np.ndarray] = {}
    self.oov = self.words = 0

  def ids(self, text: str, length: int) -> np.ndarray:
    ids, oov, n = self.vocabulary.encode(text, length)
    self.oov += oov
    self.words += n
    return ids

  def __call__(self, texts: Sequence[str], length: int) -> np.ndarray:
    rows = []
    for text in texts:
      key = (text, length)
      if key not in self.cache:
        self.cache[key] = self.ids(text, length)
      rows.append(self.cache[key])
    width = min(round_up(max((len(r) for r in rows), default=1), LENGTH_BUCKET), length)
    ids = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
      ids[i, :len(r)] = r
    return ids


def pair_batches(data: Pairs, encoder, config, *, batch_size: int, seed: int,
                 start_step: int = 0, shard_index: int = 0,
                 num_shards: int = 1) -> Iterator[dict[str, np.ndarray]]:
  """This host's rows of each global batch from global step `start_step` on: `query` and
  `document` ids by `encoder` (an `Encoder` of words or a `PieceEncoder`); for the cross_entropy
  loss half the rows are positive pairs and half (question, pool negative) pairs, with `label`."""
  if batch_size % num_shards:
    raise ValueError(f"batch_size {batch_size} must be a multiple of the data shards {num_shards}")
  labelled = config.loss == "cross_entropy"
  if labelled and batch_size % (2 * num_shards):
    raise ValueError("the cross_entropy loss takes half positive, half negative rows: batch_size "
                     f"{batch_size} must be a multiple of 2 x the data shards ({num_shards})")
  pooled = config.loss in POOL_LOSSES
  if pooled and num_shards > 1:
    raise ValueError(f"the {config.loss} loss needs each question's positive in its own "
                     "column of one batch: train it on one host")
  distilled = config.loss == "in_batch_softmax_margin_mse"
  if distilled and data.scores is None:
    raise ValueError("the in_batch_softmax_margin_mse loss trains on a teacher's scores: set "
                     "MIXTURE_OR_TASK_NAME = @tk_triples.teacher_task() (t5rank teacher's "
                     "directory)")
  relevant = relevant_answers(data) if pooled else None
  rows = batch_size // num_shards
  batches = distinct_batches(data.batch_keys, batch_size // 2 if labelled else batch_size, seed)
  for _ in range(start_step):
    next(batches)
  step = start_step
  while True:
    chosen = [data.pairs[i] for i in next(batches)]
    questions = [q for q, _ in chosen]
    answers = [a for _, a in chosen]
    labels = [1] * len(chosen)
    if labelled:  # one pool negative per question, drawn by (seed, step)
      rng = np.random.default_rng([seed, step, 1])
      questions += questions
      answers += [data.negatives[q][rng.integers(len(data.negatives[q]))]
                  if data.negatives[q] else rng.integers(len(data.answers)) for q, _ in chosen]
      labels += [0] * len(chosen)
    if pooled:  # one pool negative per question, no answer of the batch: (seed, step)
      negatives = pool_negatives(data, chosen, np.random.default_rng([seed, step, 2]), relevant)
      answers += negatives
    mine = slice(shard_index * rows, (shard_index + 1) * rows)
    # The whole global batch is encoded (cached per text), so that every host pads to one width.
    documents = encoder([data.answers[a] for a in answers], config.max_document_length)
    batch = {"query": encoder([data.questions[q] for q in questions],
                              config.max_query_length)[mine],
             "document": documents if pooled else documents[mine]}
    if labelled:
      batch["label"] = np.asarray(labels[mine], np.int32)
    if distilled:  # the teacher's scores of each row's positive and pool negative
      negative = [data.scores.get((q, a)) for (q, _), a in zip(chosen, negatives)]
      batch["positive_score"] = np.asarray([data.scores[p] for p in chosen], np.float32)
      batch["negative_score"] = np.asarray([0.0 if s is None else s for s in negative], np.float32)
      batch["score_mask"] = np.asarray([s is not None for s in negative], np.float32)
    if step == start_step and type(encoder) is Encoder:
      print(f"dual encoder training data: {100.0 * encoder.oov / max(encoder.words, 1):.2f}% of "
            "the first batch's words are out of vocabulary (left out of the average)", flush=True)
    step += 1
    yield batch


def relevant_answers(data: Pairs) -> dict[int, set[int]]:
  """Each question's relevant answers (by index), from the pairs."""
  relevant: dict[int, set[int]] = collections.defaultdict(set)
  for q, a in data.pairs:
    relevant[q].add(a)
  return relevant


def pool_negatives(data: Pairs, chosen: Sequence[tuple[int, int]], rng: np.random.Generator,
                   relevant: Optional[Mapping[int, set[int]]] = None) -> list[int]:
  """One negative answer per (question, answer) pair of a batch, for the `POOL_LOSSES`:
  drawn from the question's pool (InsuranceQA's retrieved non-relevant answers), never an answer
  relevant to a question of the batch (`relevant`: `relevant_answers(data)`) nor another row's
  negative (a random such answer when the pool has none left). Pairs keyed across languages are
  refused: a translation of a batch answer would be another index."""
  if data.keys is not None:
    raise ValueError("in_batch_softmax_pool takes one-language pairs; their keys name texts "
                     "across languages, whose translations the pool negatives could repeat")
  relevant = relevant_answers(data) if relevant is None else relevant
  taken = {a for _, a in chosen}.union(*(relevant.get(q, ()) for q, _ in chosen))
  negatives = []
  for q, _ in chosen:
    pool = [a for a in data.negatives[q] if a not in taken]
    if pool:
      answer = pool[rng.integers(len(pool))]
    else:
      answer = int(rng.integers(len(data.answers)))
      while answer in taken:
        answer = int(rng.integers(len(data.answers)))
    taken.add(answer)
    negatives.append(answer)
  return negatives


class PieceEncoder(Encoder):
  """T5 SentencePiece ids of texts (at most `length` - 1 pieces, then EOS), padded like `Encoder`."""

  def ids(self, text: str, length: int) -> np.ndarray:
    return np.asarray(list(self.vocabulary.encode(text))[:length - 1] + [EOS_ID], np.int32)
