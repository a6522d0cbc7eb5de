"""The dual encoder of Gillick, Presta, Tomar, "End-to-End Retrieval in Continuous Space" (2018;
shared/papers/003_*), sections 2-2.2: a first stage that retrieves by meaning.

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
import json
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models.words import UNK_ID

LOSSES = ("in_batch_softmax", "in_batch_cross_entropy", "in_batch_triplet", "cross_entropy")
NORM_FLOOR = 1e-12  # a vector shorter than this (an empty text's zero) stays zero when normalized


@dataclasses.dataclass(frozen=True)
class DualEncoderConfig:
  """Architecture and loss of a word-averaging dual encoder. `vocab_size` counts every id (padding
  and unknown included); `vocabulary_sha256` names the word list (`WordVocabulary.sha256`), `words`
  where training reads it. Build it with `dual_encoder_config(words)`."""
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

  def __post_init__(self):
    for name in ("vocab_size", "embedding_dim", "max_query_length", "max_document_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"DualEncoderConfig.{name} must be positive, got {getattr(self, name)}")
    if self.loss not in LOSSES:
      raise ValueError(f"unknown dual encoder loss {self.loss!r}; choose one of {LOSSES}")

  @property
  def name(self) -> str:
    return "dual_encoder"

  def replace(self, **changes: Any) -> "DualEncoderConfig":
    return dataclasses.replace(self, **changes)

  def to_json(self) -> str:
    return json.dumps(dict(dataclasses.asdict(self), model=self.name), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "DualEncoderConfig":
    fields = json.loads(text)
    fields.pop("model", None)
    return cls(**fields)


def dual_encoder_config(words: str, **fields: Any) -> DualEncoderConfig:
  """The DualEncoderConfig of the word list in `words` (a `t5rank embeddings` directory or a
  words.tsv), other fields as given (gin: `MODEL_CONFIG = @dual_encoder.dual_encoder_config()`)."""
  from t5rank.models.words import WordVocabulary

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
  return params


def param_axes(params) -> Any:
  """Logical axes: embedding rows on `vocab` (split over `model` on a model-parallel mesh)."""
  from jax.sharding import PartitionSpec
  return jax.tree_util.tree_map_with_path(
      lambda path, leaf: PartitionSpec("vocab", None) if np.ndim(leaf) == 2 else PartitionSpec(),
      params)


def unit(vectors: jax.Array) -> jax.Array:
  """Rows scaled to length 1; a zero row stays zero."""
  norm = jnp.linalg.norm(vectors, axis=-1, keepdims=True)
  return vectors / jnp.maximum(norm, NORM_FLOOR)


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
  return unit(average(table["embedding"], ids))


def cosines(params, query_ids: jax.Array, document_ids: jax.Array) -> jax.Array:
  """(B, B) cosine of every query of the batch with every candidate."""
  return encode(params, query_ids, "query") @ encode(params, document_ids, "document").T


def in_batch_softmax(logits: jax.Array) -> jax.Array:
  """mean_i −log softmax(Mᵢ)ᵢ."""
  return -jnp.mean(jnp.diagonal(jax.nn.log_softmax(logits, axis=-1)))


def sigmoid_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """mean of −[y log σ(x) + (1 − y) log(1 − σ(x))], computed stably."""
  return jnp.mean(jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits))))


def in_batch_triplet(cos: jax.Array, margin: float) -> jax.Array:
  """mean_i max(0, δ − cosᵢᵢ + max_{j≠i} cosᵢⱼ): each row's hardest in-batch negative."""
  b = cos.shape[0]
  negatives = jnp.where(jnp.eye(b, dtype=bool), -jnp.inf, cos)
  return jnp.mean(jax.nn.relu(margin - jnp.diagonal(cos) + negatives.max(-1)))


def loss_and_accuracy(params, config: DualEncoderConfig, query_ids: jax.Array,
                      document_ids: jax.Array, labels: Optional[jax.Array] = None
                      ) -> tuple[jax.Array, jax.Array]:
  """(loss, accuracy) of a batch by `config.loss`. In-batch losses: row i of the batch is a positive
  pair and accuracy is in-batch precision@1 (the diagonal is the row's top cell, the paper's
  early-stopping measure). `cross_entropy`: `labels` (B,) 1/0 for each row's pair, accuracy the
  share of pairs on the right side of g = 0."""
  if config.loss == "cross_entropy":
    if labels is None:
      raise ValueError("the cross_entropy loss needs labelled pairs")
    q = encode(params, query_ids, "query")
    d = encode(params, document_ids, "document")
    logits = params["scale"] * jnp.sum(q * d, -1) + params["bias"]
    accuracy = jnp.mean(((logits > 0) == (labels > 0)).astype(jnp.float32))
    return sigmoid_cross_entropy(logits, labels.astype(logits.dtype)), accuracy
  cos = cosines(params, query_ids, document_ids)
  logits = params["scale"] * cos + params["bias"]
  accuracy = in_batch_precision_at_1(cos)
  if config.loss == "in_batch_softmax":
    return in_batch_softmax(logits), accuracy
  if config.loss == "in_batch_cross_entropy":
    return sigmoid_cross_entropy(logits, jnp.eye(len(cos), dtype=logits.dtype)), accuracy
  return in_batch_triplet(cos, config.margin), accuracy


def in_batch_precision_at_1(scores: jax.Array) -> jax.Array:
  """Share of rows whose diagonal cell is strictly above every other cell of the row (a tie
  counts as a miss)."""
  b = scores.shape[0]
  others = jnp.where(jnp.eye(b, dtype=bool), -jnp.inf, scores).max(-1)
  return jnp.mean((jnp.diagonal(scores) > others).astype(jnp.float32))
