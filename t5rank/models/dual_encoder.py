"""The dual encoder of Gillick, Presta, Tomar, "End-to-End Retrieval in Continuous Space" (2018),
sections 2-2.2: a first stage that retrieves by meaning.

    query word ids (B, m) ─► f₁: average of word embeddings ─► unit vector q  (B, E)
    answer word ids (B, n) ─► f₂: average of word embeddings ─► unit vector d  (B, E)
    M = α·(q dᵀ) + β      (B, B): g(X₁, X₂) = α·cos(f₁(X₁), f₂(X₂)) + β for every pair of the batch,
                          the B positive pairs on the diagonal, α and β learned (a logit)

Losses over M (section 2.1; `loss`):
  in_batch_softmax        mean over rows of −log softmax(Mᵢ)ᵢ: each row's positive against the
                          batch's other candidates (the paper's default, after Henderson et al.)
  in_batch_cross_entropy  mean over all B² cells of the sigmoid cross-entropy, label 1 on the
                          diagonal and 0 elsewhere
  in_batch_triplet        mean over rows of max(0, δ − cos⁺ + max_{j≠i} cosᵢⱼ), δ = .5 (`margin`)
  cross_entropy           labelled pairs instead of in-batch negatives: the sigmoid cross-entropy of
                          g on each row's own (query, candidate) pair and its label
  in_batch_softmax_pool   not the paper's (Karpukhin et al. 2020, DPR): the batch's B answers and
                          one pool negative per question (B more candidates, InsuranceQA's retrieved
                          non-relevant answers), M (B, 2B), mean over rows of −log softmax(Mᵢ)ᵢ
  in_batch_softmax_margin_mse
                          distillation, as TAS-B combines them (Hofstätter et al. 2021): the
                          in_batch_softmax over the batch's B answers plus `margin_mse_weight` x
                          Margin-MSE on each row's triple (question, positive, one pool negative,
                          which is not a softmax candidate), mean over rows of
                          (γ·(cosᵢᵢ − cosᵢ,B+ᵢ) − (t⁺ − t⁻))², t the teacher's scores of the two
                          answers (`t5rank teacher`), γ a scale of its own (`margin_scale`, learned,
                          starting at `scale_init`: on α the teacher's margins would hold the
                          softmax's scale down); a row whose negative the teacher did not score is
                          left out of the Margin-MSE

Encoder (section 2): one lowercased unigram vocabulary (`t5rank.models.words`), 300-d embeddings
initialized randomly (normal, standard deviation 1/√E: the paper gives no distribution), one
encoder shared by queries and candidates (`shared`; two otherwise). The average is over in-vocabulary
words; a text with none encodes to the zero vector, whose cosine with anything is 0 (no NaN).
Where the paper is silent: α starts at `scale_init` = 5 and β at 0 (a logit scale that lets the
in-batch softmax learn from the first step; both are learned); the triplet margin is on the cosine
(on α·cos a growing α would satisfy any margin); β does not change the in-batch softmax or triplet
losses (it shifts a whole row) and is learned by the two cross-entropies.
Retrieval needs only the encoders: `t5rank.retrieval.encoders` indexes answers with f₂ and searches
with f₁ by cosine; α, β and the loss are training's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, ClassVar, Optional

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints.resolved import Checkpoint, resolve
from t5rank.models import registry
from t5rank.models.batching import bucket_batches, distinct_rows, pad_rows
from t5rank.models.config import JsonConfig, T5Config
from t5rank.models.network import T5, param_axes as t5_axes
from t5rank.models.reranker import Batch, Reranker, encode_distinct
from t5rank.models.vectors import NORM_FLOOR, unit_vectors
from t5rank.models.vocab import EOS_ID, Vocabulary
from t5rank.models.words import UNK_ID, WordVocabulary, check_words, load_words

LOSSES = ("in_batch_softmax", "in_batch_cross_entropy", "in_batch_triplet", "cross_entropy",
          "in_batch_softmax_pool", "in_batch_softmax_margin_mse")
POOL_LOSSES = ("in_batch_softmax_pool", "in_batch_softmax_margin_mse")  # B more pool candidates


@dataclasses.dataclass(frozen=True)
class DualEncoderConfig(JsonConfig):
  """Architecture and loss of a word-averaging dual encoder. `vocab_size` counts every id (padding
  and unknown included); `vocabulary_sha256` names the word list (`WordVocabulary.sha256`), `words`
  where training reads it. Build it with `dual_encoder_config(words)`."""
  MODEL: ClassVar[str] = "dual_encoder"
  vocab_size: int
  vocabulary_sha256: str = ""
  words: str = ""
  embedding_dim: int = 300
  shared: bool = True
  max_query_length: int = 30
  max_document_length: int = 256
  loss: str = "in_batch_softmax"
  margin: float = 0.5
  scale_init: float = 5.0
  margin_mse_weight: float = 1.0

  def __post_init__(self):
    for name in ("vocab_size", "embedding_dim", "max_query_length", "max_document_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"DualEncoderConfig.{name} must be positive, got {getattr(self, name)}")
    if self.loss not in LOSSES:
      raise ValueError(f"unknown dual encoder loss {self.loss!r}; choose one of {LOSSES}")

  @property
  def name(self) -> str:
    return self.MODEL


def dual_encoder_config(words: str, **fields: Any) -> DualEncoderConfig:
  """The DualEncoderConfig of the word list in `words` (a `t5rank embeddings` directory or a
  words.tsv), other fields as given (gin: `MODEL_CONFIG = @dual_encoder.dual_encoder_config()`)."""

  vocabulary = WordVocabulary.load(words)
  return DualEncoderConfig(vocab_size=vocabulary.size, vocabulary_sha256=vocabulary.sha256,
                           words=words, **fields)


def init_params(config: DualEncoderConfig, rng: jax.Array) -> dict:
  """Random parameters: `query` embeddings (and `document` ones unless `shared`), `scale` α and
  `bias` β. Rows 0 (padding) and 1 (unknown) are never read."""
  keys = jax.random.split(rng, 2)
  shape = (config.vocab_size, config.embedding_dim)
  params = {"query": {"embedding": jax.random.normal(keys[0], shape) / np.sqrt(shape[1])},
            "scale": jnp.asarray(config.scale_init, jnp.float32),
            "bias": jnp.zeros((), jnp.float32)}
  if not config.shared:
    params["document"] = {"embedding": jax.random.normal(keys[1], shape) / np.sqrt(shape[1])}
  if config.loss == "in_batch_softmax_margin_mse":
    params["margin_scale"] = jnp.asarray(config.scale_init, jnp.float32)
  return params


def param_axes(params) -> Any:
  """Logical axes: embedding rows on `vocab` (split over `model` on a model-parallel mesh)."""
  from jax.sharding import PartitionSpec
  return jax.tree_util.tree_map_with_path(
      lambda path, leaf: PartitionSpec("vocab", None) if np.ndim(leaf) == 2 else PartitionSpec(),
      params)


def average(embedding: jax.Array, ids: jax.Array, weights: Optional[jax.Array] = None
            ) -> jax.Array:
  """(B, E) mean of the embeddings of the in-vocabulary ids of each row of `ids` (B, L); with
  `weights` (vocab,), the weighted mean (e.g. IDF). A row without such ids gives zeros."""
  mask = (ids > UNK_ID).astype(embedding.dtype)
  if weights is not None:
    mask = mask * weights[ids]
  total = jnp.einsum("bl,ble->be", mask, embedding[ids])
  return total / jnp.maximum(mask.sum(-1, keepdims=True), NORM_FLOOR)


def encode(params, ids: jax.Array, side: str) -> jax.Array:
  """Unit vectors (B, E) of `ids` by the query encoder f₁ (`side` "query") or the candidate encoder
  f₂ ("document"; f₁ when shared)."""
  table = params["document" if side == "document" and "document" in params else "query"]
  return unit_vectors(average(table["embedding"], ids))


def cosines(params, query_ids: jax.Array, document_ids: jax.Array) -> jax.Array:
  """(B, B) cosine of every query of the batch with every candidate."""
  return encode(params, query_ids, "query") @ encode(params, document_ids, "document").T


def in_batch_softmax(logits: jax.Array) -> jax.Array:
  """mean_i −log softmax(Mᵢ)ᵢ (M (B, C), C ≥ B: row i's positive in column i)."""
  return -jnp.mean(jnp.diagonal(jax.nn.log_softmax(logits, axis=-1)))


def sigmoid_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """mean of −[y log σ(x) + (1 − y) log(1 − σ(x))], computed stably."""
  return jnp.mean(jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits))))


def in_batch_triplet(cos: jax.Array, margin: float) -> jax.Array:
  """mean_i max(0, δ − cosᵢᵢ + max_{j≠i} cosᵢⱼ): each row's hardest in-batch negative."""
  b = cos.shape[0]
  negatives = jnp.where(jnp.eye(b, dtype=bool), -jnp.inf, cos)
  return jnp.mean(jax.nn.relu(margin - jnp.diagonal(cos) + negatives.max(-1)))


def loss_and_accuracy(params, config, query_ids: jax.Array, document_ids: jax.Array,
                      labels: Optional[jax.Array] = None,
                      teacher: Optional[dict] = None) -> tuple[jax.Array, jax.Array]:
  """(loss, accuracy) of a batch of word ids by `config.loss` (`vector_loss`)."""
  return vector_loss(encode(params, query_ids, "query"), encode(params, document_ids, "document"),
                     params["scale"], params["bias"], config.loss, config.margin, labels,
                     teacher, getattr(config, "margin_mse_weight", 1.0),
                     params.get("margin_scale"))


def vector_loss(q: jax.Array, d: jax.Array, scale: jax.Array, bias: jax.Array, loss: str,
                margin: float, labels: Optional[jax.Array] = None,
                teacher: Optional[dict] = None, margin_mse_weight: float = 1.0,
                margin_scale: Optional[jax.Array] = None) -> tuple[jax.Array, jax.Array]:
  """(loss, accuracy) of a batch of unit vectors q, d (B, E) by `loss` (module docstring). In-batch
  losses: row i of the batch is a positive pair and accuracy is in-batch precision@1 (the diagonal
  is the row's top cell, the paper's early-stopping measure). `cross_entropy`: `labels` (B,) 1/0
  for each row's pair, accuracy the share of pairs on the right side of g = 0.
  `in_batch_softmax_margin_mse`: `teacher` {positive_score, negative_score, score_mask} (B,) each,
  the teacher's scores of row i's positive and of its pool negative (column B + i of d);
  `margin_scale` γ scales the student's cosine margins (α when None)."""
  if loss == "cross_entropy":
    if labels is None:
      raise ValueError("the cross_entropy loss needs labelled pairs")
    logits = scale * jnp.sum(q * d, -1) + bias
    accuracy = jnp.mean(((logits > 0) == (labels > 0)).astype(jnp.float32))
    return sigmoid_cross_entropy(logits, labels.astype(logits.dtype)), accuracy
  cos = q @ d.T
  logits = scale * cos + bias
  accuracy = in_batch_precision_at_1(cos)
  if loss in ("in_batch_softmax", "in_batch_softmax_pool"):  # d (B, E) or (2B, E)
    return in_batch_softmax(logits), accuracy
  if loss == "in_batch_softmax_margin_mse":  # d (2B, E): row i's pool negative in column B + i
    if teacher is None:
      raise ValueError("the in_batch_softmax_margin_mse loss needs the teacher's scores; train it "
                       "on a teacher directory's pairs (`tk_triples.teacher_task`)")
    b = len(q)
    student = (scale if margin_scale is None else margin_scale) * (
        jnp.diagonal(cos) - jnp.diagonal(cos[:, b:]))
    distilled = masked_margin_mse(student, teacher["positive_score"] - teacher["negative_score"],
                                  teacher["score_mask"])
    return (in_batch_softmax(logits[:, :b]) + margin_mse_weight * distilled,
            in_batch_precision_at_1(cos[:, :b]))
  if loss == "in_batch_cross_entropy":
    return sigmoid_cross_entropy(logits, jnp.eye(len(cos), dtype=logits.dtype)), accuracy
  if loss == "in_batch_triplet":
    return in_batch_triplet(cos, margin), accuracy
  raise ValueError(f"unknown dual encoder loss {loss!r}; choose one of {LOSSES}")


def masked_margin_mse(student_margin: jax.Array, teacher_margin: jax.Array,
                      mask: jax.Array) -> jax.Array:
  """mean over the rows where `mask` is 1 of (student margin − teacher margin)² (0 with no such
  row): Margin-MSE (Hofstätter et al. 2020) on (B,) margins s⁺ − s⁻ and t⁺ − t⁻."""
  mask = mask.astype(student_margin.dtype)
  error = jnp.square(student_margin - teacher_margin.astype(student_margin.dtype)) * mask
  return error.sum() / jnp.maximum(mask.sum(), 1.0)


def in_batch_precision_at_1(scores: jax.Array) -> jax.Array:
  """Share of rows whose diagonal cell is strictly above every other cell of the row (a tie
  counts as a miss); `scores` (B, C), C ≥ B."""
  others = jnp.where(jnp.eye(*scores.shape, dtype=bool), -jnp.inf, scores).max(-1)
  return jnp.mean((jnp.diagonal(scores) > others).astype(jnp.float32))


# ------------------------------------------------------------------------- the T5-encoder variant


@dataclasses.dataclass(frozen=True)
class T5DualEncoderConfig(JsonConfig):
  """A dual encoder whose f is T5's encoder, mean-pooled over the text's tokens (padding excluded):
  how a T5 checkpoint is used as a retriever today. One encoder for queries and documents; the
  loss, α and β as for the averaged-embedding model. `vocabulary` is the SentencePiece model's
  path (a checkpoint carries its own copy), `vocabulary_sha256` its hash; lengths in pieces."""
  MODEL: ClassVar[str] = "t5_dual_encoder"
  t5: T5Config
  vocabulary: str
  vocabulary_sha256: str = ""
  max_query_length: int = 32
  max_document_length: int = 256
  loss: str = "in_batch_softmax"
  margin: float = 0.5
  scale_init: float = 5.0

  def __post_init__(self):
    if isinstance(self.t5, dict):
      object.__setattr__(self, "t5", T5Config(**self.t5))
    if self.loss not in LOSSES:
      raise ValueError(f"unknown dual encoder loss {self.loss!r}; choose one of {LOSSES}")
    if self.loss == "in_batch_softmax_margin_mse":
      raise ValueError("the T5 dual encoder does not distil (in_batch_softmax_margin_mse is the "
                       "averaged-embedding dual encoder's)")

  @property
  def name(self) -> str:
    return self.MODEL


def t5_mean(t5_params, config, ids: jax.Array) -> jax.Array:
  """Unit vectors (B, d_model): T5's encoder outputs of `ids` (B, L) averaged over non-padding."""

  # float32 whatever the network's dtype: in bfloat16 (mixed precision) the mean and the cosine
  # are not rounded to bfloat16's 8 bits
  encoded = T5(config).apply({"params": t5_params}, ids, method=T5.encode).astype(jnp.float32)
  mask = (ids > 0).astype(encoded.dtype)[..., None]
  return unit_vectors((encoded * mask).sum(1) / jnp.maximum(mask.sum(1), 1.0))


# ------------------------------------------------------------------------------- as rerankers


def side_vectors(params, config, ids: jax.Array, side: str) -> jax.Array:
  """Unit vectors (B, E) of `ids` (B, L) by the model of `config`: the word-average encoder of
  `side` (`encode`), or the T5 variant's mean-pooled encoder (one for both sides)."""
  if isinstance(config, T5DualEncoderConfig):
    return t5_mean(params["t5"], config.t5, ids)
  return encode(params, ids, side)


@functools.partial(jax.jit, static_argnames=("config", "side"))
def side_step(params, ids: jax.Array, *, config, side: str) -> jax.Array:
  """`side_vectors` of `ids` (B, L), compiled: how the scorer encodes a shard's distinct texts."""
  return side_vectors(params, config, ids, side)


@jax.jit
def cosine_step(state, query_index: jax.Array, document_index: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
  """(cos(f₁(q), f₂(d)), σ(α·cos + β)), each (B,), of each row's query and candidate: rows
  `query_index` (B,) of state["queries"] and `document_index` (B,) of state["documents"], the unit
  vectors of a shard's distinct texts (`DualEncoderReranker.shard_state`). The cosine is the score
  (what dense retrieval ranks by); σ(g) only squashes the trained logit."""
  cos = jnp.sum(state["queries"][query_index] * state["documents"][document_index], axis=-1)
  return cos, jax.nn.sigmoid(state["params"]["scale"] * cos + state["params"]["bias"])


class DualEncoderReranker(Reranker):
  """The dual encoder as a `Reranker`: each candidate's cosine with its query (section 3's score),
  so that `t5rank score` scores it and a cascade can use it as a stage. Examples are (query ids,
  candidate ids) cut to the config's lengths. The encoders read no other text, so each distinct
  text of a shard is encoded once (`shard_state`; the scorer orders the pairs by candidate, and an
  InsuranceQA answer is in about 15 pools), by length buckets of 64 ids; the batches are then
  index pairs into those vectors."""

  name = "dual_encoder"
  shard_order = "passage"

  def __init__(self, config: DualEncoderConfig, vocabulary):

    check_words(vocabulary, config)
    self.config, self.vocabulary = config, vocabulary

  @property
  def reads_first_stage(self) -> bool:
    return False

  def _ids(self, texts, length: int) -> list[np.ndarray]:
    return [ids for ids, _, _ in encode_distinct(texts, lambda t: self.vocabulary.encode(t, length))]

  def encode(self, queries, passages, first_stage=None) -> list[tuple[np.ndarray, np.ndarray]]:
    c = self.config
    return list(zip(self._ids(queries, c.max_query_length),
                    self._ids(passages, c.max_document_length)))

  def _sides(self):
    """(state key, example column, side, max length) of the queries and the candidates."""
    c = self.config
    return (("queries", 0, "query", c.max_query_length),
            ("documents", 1, "document", c.max_document_length))

  def _encodings(self, texts, length: int, *, batch_tokens: int, row_multiple: int,
                 length_bucket: Optional[int]) -> list[Batch]:
    """The batches that encode the distinct id sequences `texts` of one side."""
    return bucket_batches(texts, batch_tokens=batch_tokens, max_length=length,
                          row_multiple=row_multiple, step=length_bucket or TEXT_BUCKET)

  def shard_state(self, params, examples, *, mesh, batch_tokens: Optional[int] = None,
                  length_bucket: Optional[int] = None):
    """{"params", "queries" (Q, E), "documents" (D, E)}: the unit vectors of the shard's distinct
    queries and candidates (`distinct_rows` order; rows past them are zeros), each text encoded
    once, lengths padded to multiples of `length_bucket` (default 64 ids) and batches of about
    `batch_tokens` padded tokens (default: the mesh's), replicated over the mesh."""
    from t5rank.partitioning import batch_sharding, replicated
    from t5rank.ranking.devices import default_batch_tokens

    batch_tokens = batch_tokens or default_batch_tokens(mesh, self.width)
    state = {"params": params}
    for key, column, side, length in self._sides():
      texts, _ = distinct_rows(examples, column)
      vectors = np.zeros((pad_rows(len(texts), 8), self.dim), np.float32)  # few table shapes
      for batch in self._encodings(texts, length, batch_tokens=batch_tokens,
                                   row_multiple=mesh.shape["data"], length_bucket=length_bucket):
        ids = jax.device_put(batch.arrays[0], batch_sharding(mesh))
        vectors[batch.items] = np.asarray(
            side_step(params, ids, config=self.config, side=side))[:len(batch.items)]
      state[key] = jax.device_put(vectors, replicated(mesh))
    return state

  def batches(self, examples, *, batch_tokens: int, row_multiple: int = 1,
              length_bucket: Optional[int] = None) -> list[Batch]:
    """Batches of (query index, document index) rows into `shard_state`'s vectors of the
    examples' distinct texts, all of one shape: `batch_tokens` rows, or `pad_rows` of the
    examples when fewer (`length_bucket` is the encoding's, in `shard_state`)."""
    del length_bucket
    index = np.stack([distinct_rows(examples, 0)[1], distinct_rows(examples, 1)[1]])
    rows = min(max(row_multiple, batch_tokens // row_multiple * row_multiple),
               pad_rows(len(examples), row_multiple))
    batches = []
    for first in range(0, len(examples), rows):
      items = np.arange(first, min(first + rows, len(examples)))
      arrays = np.zeros((2, rows), np.int32)
      arrays[:, :len(items)] = index[:, items]
      batches.append(Batch(items, (arrays[0], arrays[1])))
    return batches

  def program_shapes(self, examples, *, batch_tokens: int, row_multiple: int = 1,
                     length_bucket: Optional[int] = None) -> tuple:
    """Each side's encoding (side, (rows, length)) and the cosines' ("cosines", (Q, E), (D, E),
    (rows,)): the programs `shard_state` and `batches` run."""
    shapes, tables = set(), []
    for _, column, side, length in self._sides():
      texts, _ = distinct_rows(examples, column)
      shapes |= {(side, batch.arrays[0].shape) for batch in self._encodings(
          texts, length, batch_tokens=batch_tokens, row_multiple=row_multiple,
          length_bucket=length_bucket)}
      tables.append((pad_rows(len(texts), 8), self.dim))
    shapes |= {("cosines", *tables, batch.arrays[0].shape) for batch in self.batches(
        examples, batch_tokens=batch_tokens, row_multiple=row_multiple)}
    return tuple(sorted(shapes))

  def score_batch(self, state, arrays):
    return cosine_step(state, *arrays)

  @property
  def dim(self) -> int:
    """The length of its vectors."""
    return self.config.embedding_dim

  def param_axes(self):
    return model_axes(self.config)

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocabulary.sha256,
            "text_bucket": TEXT_BUCKET}  # padding moves the cosines by float rounding

  def describe(self) -> str:
    c = self.config
    return (f"dual encoder ({c.vocab_size} words x {c.embedding_dim}, "
            f"{'one encoder' if c.shared else 'two encoders'}; score: cosine)")

  @classmethod
  def for_evaluation(cls, config: DualEncoderConfig, **_) -> "DualEncoderReranker":
    return cls(config, load_words(config))


class T5DualEncoderReranker(DualEncoderReranker):
  """The T5 variant as a `Reranker`: the cosine of T5's mean-pooled encodings (EOS appended)."""

  name = "t5_dual_encoder"

  def __init__(self, config: T5DualEncoderConfig, vocab):
    self.config, self.vocab = config, vocab

  @property
  def width(self) -> int:
    return self.config.t5.d_model

  @property
  def dim(self) -> int:
    return self.config.t5.d_model

  def _ids(self, texts, length: int) -> list[np.ndarray]:
    distinct = list(dict.fromkeys(texts))
    ids = {t: np.asarray(i[:length - 1] + [EOS_ID], np.int32)
           for t, i in zip(distinct, self.vocab.encode_batch(distinct))}
    return [ids[t] for t in texts]

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocab.sha256, "text_bucket": TEXT_BUCKET}

  def describe(self) -> str:
    mixed = ", bfloat16 products" if self.config.t5.dtype == "bfloat16" else ""
    return (f"T5 dual encoder ({self.config.t5.num_parameters / 1e6:.1f}M parameters{mixed}, "
            "mean-pooled encoder; score: cosine)")

  @classmethod
  def for_evaluation(cls, config: T5DualEncoderConfig, **_) -> "T5DualEncoderReranker":
    return cls(config, Vocabulary(config.vocabulary, extra_ids=0))


def model_axes(config) -> Any:
  """Logical axes of a dual encoder's parameters: the word-average model's (`param_axes`), or the
  T5 variant's (T5's own, α and β replicated)."""
  if isinstance(config, T5DualEncoderConfig):
    from jax.sharding import PartitionSpec

    return {"t5": t5_axes(config.t5), "scale": PartitionSpec(), "bias": PartitionSpec()}
  return param_axes(jax.eval_shape(functools.partial(init_params, config), jax.random.PRNGKey(0)))


TEXT_BUCKET = 64  # texts are encoded padded to a multiple of this many words (or ids)


def load_dual_encoder(checkpoint: Checkpoint, **options):
  """(DualEncoderReranker, parameters) of a dual encoder checkpoint (a name is resolved first),
  with the word list it carries; it has no scoring options."""
  from t5rank.checkpoints import native
  from t5rank.models.loading import refuse_options

  checkpoint = resolve(checkpoint)
  refuse_options(checkpoint, "dual encoder", options, "it averages its own word vectors")
  config, params = native.restore_model(checkpoint.path, DualEncoderConfig,
                                        DualEncoderReranker.name, checkpoint.metadata,
                                        checkpoint.digests)
  return DualEncoderReranker(config, load_words(config, checkpoint.path)), params


def load_t5_dual_encoder(checkpoint: Checkpoint, *, dtype: Optional[str] = None, **options):
  """(T5DualEncoderReranker, parameters) of a T5 dual encoder checkpoint (a name is resolved
  first), with the SentencePiece model it carries. `dtype` "bfloat16": its T5 encoder in mixed
  precision as monoT5's (`t5rank.models.network`: bfloat16 weights and products' operands,
  float32 results and stream); the mean, the cosine, α and β stay float32."""
  import os

  from t5rank.checkpoints import native
  from t5rank.models.loading import refuse_options
  from t5rank.models.reranker import cast_params

  checkpoint = resolve(checkpoint)
  refuse_options(checkpoint, "T5 dual encoder", options, "it mean-pools its own T5 encoder")
  if dtype not in (None, "float32", "bfloat16"):
    raise ValueError(f"the T5 dual encoder's dtype must be float32 or bfloat16, got {dtype!r}")
  config, params = native.restore_model(checkpoint.path, T5DualEncoderConfig,
                                        T5DualEncoderReranker.name, checkpoint.metadata,
                                        checkpoint.digests)
  if dtype == "bfloat16":
    config = dataclasses.replace(config, t5=config.t5.replace(dtype=dtype))
    params = {**params, "t5": cast_params(params["t5"], dtype)}
  vocab = Vocabulary(os.path.join(checkpoint.path, config.vocabulary), extra_ids=0)
  if config.vocabulary_sha256 and vocab.sha256 != config.vocabulary_sha256:
    raise ValueError(f"{vocab.path} is not the vocabulary this T5 dual encoder was built with")
  return T5DualEncoderReranker(config, vocab), params


def t5_dual_encoder_config(checkpoint: str, **fields: Any) -> T5DualEncoderConfig:
  """The T5DualEncoderConfig of a T5 checkpoint (any format t5rank loads) and its vocabulary
  (gin: `MODEL_CONFIG = @dual_encoder.t5_dual_encoder_config()`, `checkpoint = %INIT_CHECKPOINT`);
  dropout off (the paper trains without)."""
  from t5rank.models.loading import load_reranker

  reranker, _ = load_reranker(checkpoint)
  if not hasattr(reranker, "vocab") or not isinstance(reranker.config, T5Config):
    raise ValueError(f"{checkpoint} is not a T5 checkpoint")
  return T5DualEncoderConfig(t5=reranker.config.replace(dropout_rate=0.0),
                             vocabulary=reranker.vocab.path,
                             vocabulary_sha256=reranker.vocab.sha256, **fields)


registry.register(registry.Family(
    name=DualEncoderReranker.name, config=DualEncoderConfig, reranker=DualEncoderReranker,
    trainable="t5rank.training.dual.DualEncoder", loader=load_dual_encoder,
    encoder="t5rank.retrieval.encoders.dual_encoder_encoder",
    description="word-average dual encoder, cosine of question and answer (Gillick et al. 2018)"))
registry.register(registry.Family(
    name=T5DualEncoderReranker.name, config=T5DualEncoderConfig, reranker=T5DualEncoderReranker,
    trainable="t5rank.training.dual.T5DualEncoder",
    loader=load_t5_dual_encoder,
    encoder="t5rank.retrieval.encoders.t5_dual_encoder_encoder",
    description="T5's encoder mean-pooled as a dual encoder"))
