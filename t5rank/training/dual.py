"""The dual encoder's training (`t5rank.models.dual_encoder`), a `Trainable`:

    InsuranceQA training pairs (question → each relevant answer; `PAIR_SOURCES`: English, Chinese,
      or both languages by the cross-lingual paper's merged or mixed strategy; English with
      pseudo-queries over the answers, `insuranceqa_en_pseudo`), or XPI's sentence pairs (a
      sentence → its translation or paraphrase, `t5rank.data.xpi`)
      -> `distinct_batches`: seeded epochs, no answer and no question twice in a batch (several
         questions share answers: a repeat would be an in-batch false negative; in both languages
         a question or answer and its translation count as the same)
      -> word ids {query (B, ≤30), document (B, ≤256)} (+ `label` for the cross_entropy loss,
         whose batches hold half positive pairs, half pool negatives)
      -> the config's loss over the B × B similarity matrix

The paper (section 2.2): momentum SGD at a fixed learning rate of .01 (`momentum_sgd`; momentum .9,
the paper gives no value), batches of 1000, no dropout, early stopping on in-batch precision@1 on a
tuning set (`InBatchEval` on InsuranceQA's validation pairs, `trainer.Loop.keep_best = "p@1"`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
from typing import Any, Iterator, Mapping, Optional, Sequence

import jax
import numpy as np
import optax

from t5rank.models import dual_encoder
from t5rank.models.dual_encoder import DualEncoderConfig, T5DualEncoderConfig
from t5rank.models.words import WordVocabulary, load_words
from t5rank.training.trainable import DatasetFn, Trainable, query_document_lengths

MODEL_NAME, T5_MODEL_NAME = "dual_encoder", "t5_dual_encoder"
LENGTH_BUCKET = 32
# task name -> (language of the word list and the evaluation, the pairs' cross-lingual strategy)
PAIR_SOURCES = {"insuranceqa_en": ("en", "en"), "insuranceqa_zh": ("zh", "zh"),
                "insuranceqa_enzh_merged": ("enzh", "merged"),
                "insuranceqa_enzh_mixed": ("enzh", "mixed"), "xpi_enzh": ("enzh", "xpi"),
                "insuranceqa_en_pseudo": ("en", "pseudo")}
PSEUDO_FRACTION = 0.3  # the share of pseudo-query pairs in insuranceqa_en_pseudo's training pairs


def momentum_sgd(learning_rate, momentum: float = 0.9) -> optax.GradientTransformation:
  """The paper's optimizer: SGD with momentum (`learning_rate` .01 in the run gin)."""
  return optax.sgd(learning_rate, momentum=momentum)


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

  @property
  def batch_keys(self) -> list[tuple[int, int]]:
    return self.keys if self.keys is not None else self.pairs

  @classmethod
  def insuranceqa(cls, split: str, language: str = "en") -> "Pairs":
    """InsuranceQA's `split`: each question with each relevant answer; its pool negatives."""
    from t5rank.data.insuranceqa import load_split

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
    from t5rank.data.cross_lingual import pair_layouts, relevant_rows
    from t5rank.data.insuranceqa import load_split

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
    """InsuranceQA's English `split`; for train, with pseudo-queries over the answers
    (`t5rank.data.pseudo_queries.pseudo_query_table`: a few idf-drawn words of one answer after a
    training question's opening, positive that answer, negative a random one) added until they are
    `fraction` of the pairs. The answers are the collection's (every answer a first stage indexes;
    their text only, no relevance); the other splits are returned as they are."""
    from t5rank.data.pseudo_queries import pseudo_query_table

    data = cls.insuranceqa(split, "en")
    if split != "train" or fraction == 0.0:
      return data
    if not 0.0 < fraction < 1.0:
      raise ValueError(f"fraction must be in [0, 1), got {fraction}")
    count = round(len(data.pairs) * fraction / (1.0 - fraction))
    openings = sorted({" ".join(q.split()[:2]) for q in data.questions if len(q.split()) > 2})
    pseudo = cls.of_table(pseudo_query_table(data.answers, count, seed=seed, openings=openings,
                                             language="en"))
    offset = len(data.questions)
    return cls(data.questions + pseudo.questions, data.answers,
               data.pairs + [(offset + q, a) for q, a in pseudo.pairs],
               data.negatives + pseudo.negatives)

  @classmethod
  def xpi(cls, split: str, seed: int = 0) -> "Pairs":
    """XPI's rows (`t5rank.data.xpi.xpi_table`, random negatives): each meaning group's sentence x
    with its positive y (a translation for half the groups, else a paraphrase or x itself); the
    negatives of x, its row's pool. Texts are interned, so a batch never holds one text twice."""
    from t5rank.data.xpi import xpi_table
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
  def source(cls, task_name: str, split: str) -> "Pairs":
    """The pairs of `split` a `PAIR_SOURCES` task trains on."""
    language, strategy = PAIR_SOURCES[task_name]
    if language == strategy:
      return cls.insuranceqa(split, language)
    if strategy == "xpi":
      return cls.xpi(split)
    if strategy == "pseudo":
      return cls.with_pseudo_queries(split)
    return cls.cross_lingual(split, strategy)


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
    width = min(-(-max(max((len(r) for r in rows), default=1), 1) // LENGTH_BUCKET)
                * LENGTH_BUCKET, length)
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
  pooled = config.loss == "in_batch_softmax_pool"
  if pooled and num_shards > 1:
    raise ValueError("the in_batch_softmax_pool loss needs each question's positive in its own "
                     "column of one batch: train it on one host")
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
      answers += pool_negatives(data, chosen, np.random.default_rng([seed, step, 2]), relevant)
    mine = slice(shard_index * rows, (shard_index + 1) * rows)
    # The whole global batch is encoded (cached per text), so that every host pads to one width.
    documents = encoder([data.answers[a] for a in answers], config.max_document_length)
    batch = {"query": encoder([data.questions[q] for q in questions],
                              config.max_query_length)[mine],
             "document": documents if pooled else documents[mine]}
    if labelled:
      batch["label"] = np.asarray(labels[mine], np.int32)
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
  """One negative answer per (question, answer) pair of a batch, for `in_batch_softmax_pool`:
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
    from t5rank.models.vocab import EOS_ID
    return np.asarray(list(self.vocabulary.encode(text))[:length - 1] + [EOS_ID], np.int32)


class DualEncoder(Trainable):
  """The word-averaging dual encoder trained on question → answer pairs. `Init.checkpoint` may be
  a `t5rank embeddings` directory (its vectors start the embeddings) or a dual encoder checkpoint."""

  def __init__(self, config: DualEncoderConfig):
    self.config = config
    self.vocabulary = load_words(config)

  def check(self, task_name: str, init, optimization, loop) -> None:
    if task_name not in PAIR_SOURCES:
      raise ValueError(f"the dual encoder trains on the pairs of {tuple(PAIR_SOURCES)}, "
                       f"got {task_name!r}")
    language, strategy = PAIR_SOURCES[task_name]
    if strategy == "mixed" and getattr(self.config, "loss", None) == "cross_entropy":
      raise ValueError("the cross_entropy loss draws negatives from the question's pool, in the "
                       "question's language: with the mixed strategy's pairs the language would "
                       "tell the positive answer from the negatives; use an in-batch loss")
    evaluated = getattr(loop.eval_fn, "language", language)
    if evaluated != language:
      raise ValueError(f"task {task_name} trains on {language} pairs but the evaluation reads "
                       f"{evaluated} ones; set LANGUAGE = {language!r} in the run gin")
    if init.term_matching_heads:
      raise ValueError("term_matching_heads is a T5 initialization; the dual encoder has no heads")
    if optimization.dropout_rate:
      raise ValueError(f"the dual encoder trains without dropout (the paper's setting), but the "
                       f"run sets dropout_rate {optimization.dropout_rate}")

  def init_params(self, rng: jax.Array, init) -> Any:
    params = dual_encoder.init_params(self.config, rng)
    if init.checkpoint is None:
      return params
    from t5rank.checkpoints import native
    from t5rank.models.words import load_embeddings

    if native.is_native_checkpoint(init.checkpoint):
      config, loaded = native.restore_model(init.checkpoint, DualEncoderConfig)
      shape = ("vocabulary_sha256", "vocab_size", "embedding_dim", "shared")
      if any(getattr(config, f) != getattr(self.config, f) for f in shape):
        raise ValueError(f"{init.checkpoint} is a dual encoder of another word list or shape "
                         f"({', '.join(shape)} differ)")
      return loaded
    vocabulary, vectors = load_embeddings(init.checkpoint)
    if vocabulary.sha256 != self.vocabulary.sha256 or vectors.shape[1] != self.config.embedding_dim:
      raise ValueError(f"the embeddings in {init.checkpoint} ({vectors.shape[1]}-d) are not of the "
                       f"model's word list and size ({self.config.words}, "
                       f"{self.config.embedding_dim}-d)")
    params = jax.tree.map(np.asarray, params)
    for side in ("query", "document"):
      if side in params:
        params[side]["embedding"] = vectors.astype(np.float32)
    return params

  def param_axes(self) -> Any:
    return dual_encoder.param_axes(jax.eval_shape(
        functools.partial(dual_encoder.init_params, self.config), jax.random.PRNGKey(0)))

  def loss_and_metrics(self, params, batch, dropout_rng):
    del dropout_rng
    loss, accuracy = dual_encoder.loss_and_accuracy(params, self.config, batch["query"],
                                                    batch["document"], batch.get("label"))
    return loss, {"loss": loss, "accuracy": accuracy, "scale": params["scale"],
                  "bias": params["bias"]}

  def batch_counts(self, batch) -> tuple[int, int]:
    return len(batch["query"]), int((batch["query"] > 0).sum() + (batch["document"] > 0).sum())

  def dataset_fn(self) -> DatasetFn:
    def dataset(task_name: str, *, batch_size: int, feature_lengths: Mapping[str, int], seed: int,
                start_step: int = 0, pack: bool = False, shard_index: int = 0,
                num_shards: int = 1):
      query_document_lengths("the dual encoder", self.config, feature_lengths, pack)
      return pair_batches(Pairs.source(task_name, "train"),
                          self.text_encoder(), self.config, batch_size=batch_size, seed=seed,
                          start_step=start_step, shard_index=shard_index, num_shards=num_shards)
    return dataset

  def text_encoder(self) -> Encoder:
    return Encoder(self.vocabulary)

  def export(self, directory: str, params, metadata: dict) -> None:
    """A dual encoder checkpoint: words.tsv, the parameters, metadata `model: dual_encoder`."""
    from t5rank.checkpoints import save_checkpoint
    from t5rank.models.words import WORDS_FILE

    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      self.vocabulary.save(os.path.join(directory, WORDS_FILE))
    save_checkpoint(directory, params, self.config, dict(metadata, model=MODEL_NAME))


class T5DualEncoder(DualEncoder):
  """The T5-encoder variant (`dual_encoder.T5DualEncoderConfig`): T5's encoder mean-pooled, trained
  like the averaged-embedding model. `Init.checkpoint`: a T5 checkpoint of the config's
  architecture (any format t5rank loads), a T5 dual encoder checkpoint, or None (random)."""

  def __init__(self, config: T5DualEncoderConfig):
    from t5rank.models.vocab import Vocabulary
    self.config = config
    self.vocabulary = Vocabulary(config.vocabulary, extra_ids=0)
    if config.vocabulary_sha256 and self.vocabulary.sha256 != config.vocabulary_sha256:
      raise ValueError(f"{config.vocabulary} is not the vocabulary this T5 dual encoder was built "
                       "with")

  def init_params(self, rng: jax.Array, init) -> Any:
    from t5rank.checkpoints import load_checkpoint, native
    from t5rank.models.network import init_params

    head = {"scale": np.float32(self.config.scale_init), "bias": np.float32(0.0)}
    if init.checkpoint is None:
      return {"t5": init_params(self.config.t5, rng), **head}
    if native.read_metadata(init.checkpoint).get("model") == T5_MODEL_NAME:
      config, loaded = native.restore_model(init.checkpoint, T5DualEncoderConfig)
      if config.t5 != self.config.t5:
        raise ValueError(f"{init.checkpoint} is a T5 dual encoder of another architecture")
      return loaded
    return {"t5": load_checkpoint(init.checkpoint, config=self.config.t5)[1], **head}

  def param_axes(self) -> Any:
    from jax.sharding import PartitionSpec

    from t5rank.models.network import param_axes
    return {"t5": param_axes(self.config.t5), "scale": PartitionSpec(), "bias": PartitionSpec()}

  def loss_and_metrics(self, params, batch, dropout_rng):
    del dropout_rng  # trained without dropout, as the paper's dual encoder
    q = dual_encoder.t5_mean(params["t5"], self.config.t5, batch["query"])
    d = dual_encoder.t5_mean(params["t5"], self.config.t5, batch["document"])
    loss, accuracy = dual_encoder.vector_loss(q, d, params["scale"], params["bias"],
                                              self.config.loss, self.config.margin,
                                              batch.get("label"))
    return loss, {"loss": loss, "accuracy": accuracy, "scale": params["scale"],
                  "bias": params["bias"]}

  def text_encoder(self) -> Encoder:
    return PieceEncoder(self.vocabulary)

  def export(self, directory: str, params, metadata: dict) -> None:
    """A T5 dual encoder checkpoint: the SentencePiece model (copied in first), the parameters,
    metadata `model: t5_dual_encoder`."""
    import shutil

    from t5rank.checkpoints import save_checkpoint
    name = os.path.basename(self.config.vocabulary)
    if jax.process_index() == 0:
      os.makedirs(directory, exist_ok=True)
      shutil.copyfile(self.config.vocabulary, os.path.join(directory, name))
    save_checkpoint(directory, params, self.config.replace(vocabulary=name),
                    dict(metadata, model=T5_MODEL_NAME))


class InBatchEval:
  """The paper's early-stopping measure: in-batch precision@1 over fixed batches of `batch_size`
  distinct (question, answer) pairs of an InsuranceQA split (seed 0; or of `data`; `language`
  en, zh, or enzh for the mixed strategy's pairs in both languages), the share of questions whose
  own answer scores highest of the batch's answers (`p@1`), and the in-batch softmax loss
  (`loss`, at the model's α and β). Gin: `trainer.Loop.eval_fn = @dual.InBatchEval()`."""

  def __init__(self, split: str = "validation", batch_size: int = 1000, language: str = "en",
               max_batches: int = 4, data: Optional[Pairs] = None):
    self.language = language
    if data is None:  # "enzh": the mixed strategy's pairs, half of them across languages
      data = (Pairs.cross_lingual(split, "mixed") if language == "enzh"
              else Pairs.insuranceqa(split, language))
    self.data = data
    order = distinct_batches(self.data.batch_keys, batch_size, seed=0)
    total = len(self.data.pairs) // batch_size
    self.batches = [next(order) for _ in range(max(1, min(max_batches, total)))]
    self._encoded: dict = {}

  def __call__(self, params, config: DualEncoderConfig) -> Mapping[str, float]:
    if config not in self._encoded:
      encoder = (PieceEncoder(T5DualEncoder(config).vocabulary)
                 if isinstance(config, T5DualEncoderConfig) else Encoder(load_words(config)))
      self._encoded = {config: [
          (encoder([self.data.questions[self.data.pairs[i][0]] for i in batch],
                   config.max_query_length),
           encoder([self.data.answers[self.data.pairs[i][1]] for i in batch],
                   config.max_document_length)) for batch in self.batches]}
    t5 = config.t5 if isinstance(config, T5DualEncoderConfig) else None
    values = [_in_batch(params, q, d, t5=t5) for q, d in self._encoded[config]]
    return {"p@1": float(np.mean([v[0] for v in values])),
            "loss": float(np.mean([v[1] for v in values]))}


@functools.partial(jax.jit, static_argnames="t5")
def _in_batch(params, query_ids, document_ids, *, t5=None):
  if t5 is None:
    cos = dual_encoder.cosines(params, query_ids, document_ids)
  else:
    cos = (dual_encoder.t5_mean(params["t5"], t5, query_ids)
           @ dual_encoder.t5_mean(params["t5"], t5, document_ids).T)
  return (dual_encoder.in_batch_precision_at_1(cos),
          dual_encoder.in_batch_softmax(params["scale"] * cos + params["bias"]))
