"""TK, the Transformer-Kernel ranking model: Hofstätter, Zlabinger, Hanbury, "TU Wien @ TREC Deep
Learning '19 -- Simple Contextualization for Re-ranking" (shared/papers/001_*), section 2.

    query ids (B, m), document ids (B, n)      one id per word, `t5rank.models.words`
      ─► embeddings t; hybrid contextualization t̂ = α·t + (1−α)·context(t)        (1)-(3)
         (query and document each on their own, shared weights)
      ─► match matrix M = cos(q̂ᵢ, d̂ⱼ)                                             (4)
      ─► 11 RBF kernels, summed over document terms, log- and length-normalized   (5)-(8)
      ─► s = β·(s_log·W₁) + γ·(s_len·W₂)                                            (9), (10)

Defaults are the paper's section 3.1: 300-d embeddings, 2 Transformer layers of 16 heads of size 32
(the authors' public code uses 10 heads of 30; we follow the paper's text), feed-forward 100, no
dropout, α initialized at .5, kernels μ = 1, .9, .7, ..., −.9 with σ = .1, query ≤ 30 and document
≤ 200 words. Where the paper is silent we follow the authors' code (matchmaker's tk.py): each
Transformer layer is feed-forward then multi-head attention, each with a residual connection and
layer norm (AllenNLP's StackedSelfAttentionEncoder, eq. 2 with its layer norms); padding and
out-of-vocabulary positions are masked out of attention and matching (their embedding is zeroed);
log₂ is taken of kernel sums clamped at 1e-10; W₁, W₂ start uniform in ±0.014. One departure: the
length normalization divides by max(d_len, 1), so an empty document scores finitely.

Windowed kernel pooling (run TUW19-d3, documents up to 800 words; `windows`): the kernel sums are
taken over consecutive non-overlapping windows of each size, each window scored like a document
(its length normalizing s_len), the window scores of each size sorted, and the top `window_top` of
each size weighted by learned weights into the score (the paper states no sizes or counts: ours are
options). An ensemble (TUW19-p3, `ensemble` > 1) holds several instances' parameters stacked on a
leading axis and averages their scores; `t5rank ensemble` builds one from trained checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models.reranker import Batch, Reranker
from t5rank.models.words import UNK_ID

logger = logging.getLogger(__name__)

KERNEL_MUS = (1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9)
LOG_FLOOR = 1e-10  # log₂ of a kernel sum is taken of max(sum, LOG_FLOOR)
SLOTS, ROWS_PER_DOCUMENT = 8, 2  # a scoring batch of D documents: 2·D rows of 8 pairs each
SHORT_QUERY = 16  # scoring matches queries of at most 16 words at that length, longer ones at 30


@dataclasses.dataclass(frozen=True)
class TKConfig:
  """Architecture of TK. `vocab_size` counts every id (padding and unknown included);
  `vocabulary_sha256` names the word list its ids come from (`WordVocabulary.sha256`) and `words`
  where training reads it (a `t5rank embeddings` directory; a checkpoint carries its own copy).
  Build it with `tk_config(words)`."""
  vocab_size: int
  vocabulary_sha256: str = ""
  words: str = ""
  embedding_dim: int = 300
  num_layers: int = 2
  num_heads: int = 16
  head_dim: int = 32
  ff_dim: int = 100
  kernel_mus: tuple[float, ...] = KERNEL_MUS
  kernel_sigma: float = 0.1
  alpha_init: float = 0.5
  max_query_length: int = 30
  max_document_length: int = 200
  windows: tuple[int, ...] = ()
  window_top: int = 3
  ensemble: int = 1

  def __post_init__(self):
    object.__setattr__(self, "kernel_mus", tuple(float(m) for m in self.kernel_mus))
    object.__setattr__(self, "windows", tuple(int(w) for w in self.windows))
    for name in ("vocab_size", "embedding_dim", "num_heads", "head_dim", "ff_dim",
                 "max_query_length", "max_document_length", "window_top", "ensemble"):
      if getattr(self, name) < 1:
        raise ValueError(f"TKConfig.{name} must be positive, got {getattr(self, name)}")
    if self.num_layers < 0 or self.kernel_sigma <= 0 or not self.kernel_mus:
      raise ValueError("TKConfig needs num_layers >= 0, kernel_sigma > 0 and at least one kernel")
    if any(w < 1 for w in self.windows):
      raise ValueError(f"window sizes must be positive, got {self.windows}")

  @property
  def name(self) -> str:
    return "tk"

  def replace(self, **changes: Any) -> "TKConfig":
    return dataclasses.replace(self, **changes)

  def to_json(self) -> str:
    return json.dumps(dict(dataclasses.asdict(self), model="tk"), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "TKConfig":
    fields = json.loads(text)
    fields.pop("model", None)
    return cls(**fields)


def tk_config(words: str, **fields: Any) -> TKConfig:
  """The TKConfig of the word list in `words` (a directory of `t5rank embeddings`, or a
  words.tsv), other fields as given (gin: `MODEL_CONFIG = @tk.tk_config()`)."""
  from t5rank.models.words import WordVocabulary

  vocabulary = WordVocabulary.load(words)
  return TKConfig(vocab_size=vocabulary.size, vocabulary_sha256=vocabulary.sha256, words=words,
                  **fields)


def positional_encoding(length: int, dim: int) -> np.ndarray:
  """(length, dim) sinusoids as AllenNLP's `add_positional_features` (used by the authors' code):
  sin of the first dim/2 timescales, then cos, timescales from 1 to 1e4."""
  half = dim // 2
  timescales = np.exp(np.arange(half) * -(math.log(1.0e4) / max(half - 1, 1)))
  angles = np.arange(length)[:, None] * timescales[None, :]  # (L, dim/2)
  encoding = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
  if dim % 2:
    encoding = np.concatenate([encoding, np.zeros((length, 1))], axis=1)
  return encoding.astype(np.float32)


def kernel_pooling(match: jax.Array, query_mask: jax.Array, doc_mask: jax.Array,
                   mus: tuple[float, ...], sigma: float) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(s_log (B, K), s_len (B, K), Kᵢᵏ (B, m, K)) of the match matrices `match` (B, m, n) over the
  real query and document terms (masks (B, m), (B, n))."""
  q = query_mask.astype(jnp.float32)[..., None]  # (B, m, 1)
  d = doc_mask.astype(jnp.float32)  # (B, n)
  # (5) Kᵢⱼᵏ = exp(−(Mᵢⱼ − μₖ)² / 2σ²) and (6) Kᵢᵏ = Σⱼ Kᵢⱼᵏ, one kernel at a time so that XLA
  # fuses each into its sum instead of writing the (B, m, n, K) tensor to memory
  per_term = jnp.stack([jnp.sum(jnp.exp(-jnp.square(match - mu) / (2.0 * sigma ** 2))
                                * d[:, None, :], axis=2) for mu in mus], axis=-1)  # (B, m, K)
  s_log = jnp.sum(jnp.log2(jnp.maximum(per_term, LOG_FLOOR)) * q, axis=1)  # (B, K)  (7)
  d_len = jnp.maximum(jnp.sum(d, axis=-1), 1.0)[:, None]  # (B, 1)
  s_len = jnp.sum(per_term * q, axis=1) / d_len  # (B, K)  (8)
  return s_log, s_len, per_term


def cosine_matrix(query: jax.Array, doc: jax.Array) -> jax.Array:
  """(B, m, n) cosines of every query and document vector, (4); a zero vector (padding) has cosine
  0 with everything, and a zero gradient (the norm is floored at 1e-13 before dividing)."""
  return jnp.einsum("bme,bne->bmn", unit_vectors(query), unit_vectors(doc))


def unit_vectors(x: jax.Array) -> jax.Array:
  """`x` / |x| along the last axis, 0 for a zero vector (norm floored at 1e-13)."""
  return x / jnp.sqrt(jnp.maximum(jnp.sum(jnp.square(x), axis=-1, keepdims=True), 1e-26))


def _uniform(scale: float):
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -scale, scale)


class _Layer(nn.Module):
  """One contextualization layer, (2): FF then multi-head attention (3), each + residual, layer
  norm."""
  config: TKConfig

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    c = self.config
    ff = nn.Dense(c.embedding_dim, name="ff_out")(nn.relu(nn.Dense(c.ff_dim, name="ff_in")(x)))
    x = nn.LayerNorm(name="ff_norm")(ff + x)  # (B, L, E)
    attention = nn.MultiHeadDotProductAttention(
        num_heads=c.num_heads, qkv_features=c.num_heads * c.head_dim, out_features=c.embedding_dim,
        name="attention")(x, mask=nn.make_attention_mask(mask, mask))
    return nn.LayerNorm(name="attention_norm")(attention + x)


class TKNetwork(nn.Module):
  """TK's parameters and its two halves: `encode` (ids -> contextualized vectors) and `score`
  (two sides' vectors -> score and its parts)."""
  config: TKConfig

  def setup(self):
    c = self.config
    k = len(c.kernel_mus)
    self.embedding = nn.Embed(c.vocab_size, c.embedding_dim, name="embedding")
    self.layers = [_Layer(c, name=f"layer_{i}") for i in range(c.num_layers)]
    self.alpha = self.param("alpha", nn.initializers.constant(c.alpha_init), ())
    self.log_weights = self.param("log_weights", _uniform(0.014), (k,))  # W₁
    self.length_weights = self.param("length_weights", _uniform(0.014), (k,))  # W₂
    self.combine = self.param("combine", _uniform(1 / math.sqrt(2)), (2,))  # (β, γ)
    if c.windows:
      self.window_weights = self.param("window_weights", nn.initializers.constant(1.0),
                                       (len(c.windows), c.window_top))

  def encode(self, ids: jax.Array) -> jax.Array:
    """(B, L, E) hybrid contextualized vectors of `ids` (B, L), (1); zero where the id is padding
    or unknown."""
    mask = ids > UNK_ID  # (B, L)
    t = self.embedding(ids) * mask[..., None]  # (B, L, E)
    x = t + positional_encoding(ids.shape[1], self.config.embedding_dim)[None]
    for layer in self.layers:
      x = layer(x, mask)
    return (self.alpha * t + (1.0 - self.alpha) * x) * mask[..., None]

  def score(self, query: jax.Array, query_mask: jax.Array, doc: jax.Array,
            doc_mask: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(s (B,), parts) of contextualized queries (B, m, E) and documents (B, n, E); parts hold M,
    Kᵢᵏ, s_logᵏ, s_lenᵏ, s_log, s_len (whole-document pooling) for explanations."""
    return self.pool(cosine_matrix(query, doc), query_mask, doc_mask)  # (4)

  def pool(self, match: jax.Array, query_mask: jax.Array, doc_mask: jax.Array
           ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(s (B,), parts) of match matrices (B, m, n): (5)-(10), or the windowed score."""
    c = self.config
    s_log_k, s_len_k, per_term = kernel_pooling(match, query_mask, doc_mask, c.kernel_mus,
                                                c.kernel_sigma)
    s_log, s_len = s_log_k @ self.log_weights, s_len_k @ self.length_weights  # (B,)  (9)
    beta, gamma = self.combine[0], self.combine[1]
    parts = {"match": match, "per_term": per_term, "s_log_k": s_log_k, "s_len_k": s_len_k,
             "s_log": s_log, "s_len": s_len, "beta": beta, "gamma": gamma}
    if not c.windows:
      return beta * s_log + gamma * s_len, parts  # (10)
    return self._windowed(match, query_mask, doc_mask), parts

  def _windowed(self, match: jax.Array, query_mask: jax.Array, doc_mask: jax.Array) -> jax.Array:
    """TUW19-d3: for each window size, the top `window_top` window scores (sorted) weighted."""
    c = self.config
    total = jnp.zeros(match.shape[0], jnp.float32)
    for i, size in enumerate(c.windows):
      n = match.shape[2]
      pad = -n % size
      windows = (n + pad) // size
      m = jnp.pad(match, ((0, 0), (0, 0), (0, pad))).reshape(match.shape[0], match.shape[1],
                                                              windows, size)  # (B, m, W, size)
      d = jnp.pad(doc_mask, ((0, 0), (0, pad))).reshape(doc_mask.shape[0], windows, size)
      flat_m = jnp.moveaxis(m, 2, 1).reshape(-1, match.shape[1], size)  # (B·W, m, size)
      flat_q = jnp.repeat(query_mask, windows, axis=0)
      s_log_k, s_len_k, _ = kernel_pooling(flat_m, flat_q, d.reshape(-1, size), c.kernel_mus,
                                           c.kernel_sigma)
      scores = (self.combine[0] * (s_log_k @ self.log_weights)
                + self.combine[1] * (s_len_k @ self.length_weights)).reshape(-1, windows)
      real = d.any(axis=-1)  # (B, W) windows holding at least one real term
      top = min(c.window_top, windows)
      best, _ = jax.lax.top_k(jnp.where(real, scores, -jnp.inf), top)  # (B, top) sorted
      best = jnp.where(jnp.isfinite(best), best, 0.0)  # a short document has fewer windows: 0
      total = total + best @ self.window_weights[i, :top]
    return total

  def __call__(self, query_ids: jax.Array, doc_ids: jax.Array) -> jax.Array:
    """(B,) scores of id pairs: `encode` both sides, then `score`."""
    score, _ = self.score(self.encode(query_ids), query_ids > UNK_ID, self.encode(doc_ids),
                          doc_ids > UNK_ID)
    return score


def init_tk_params(config: TKConfig, rng: jax.Array) -> dict:
  """Random parameters of `config` (one instance; `config.ensemble` is for stacked checkpoints)."""
  ids = jnp.full((1, 2), UNK_ID + 1, jnp.int32)
  return TKNetwork(config).init(rng, ids, ids)["params"]


def tk_param_axes(params) -> Any:
  """Logical axes of TK parameters: the embedding's rows on `vocab` (split over `model` on a
  model-parallel mesh), everything else replicated; an ensemble's leading axis is replicated."""
  from jax.sharding import PartitionSpec

  def axes(path, leaf):
    names = [getattr(p, "key", str(p)) for p in path]
    spec = [None] * np.ndim(leaf)
    if "embedding" in names and np.ndim(leaf) >= 2:
      spec[-2] = "vocab"
    return PartitionSpec(*spec)

  return jax.tree_util.tree_map_with_path(axes, params)


# ------------------------------------------------------------------------------- the reranker


def _stack_members(params, config: TKConfig):
  """`params` with a leading member axis (an ensemble's already has one)."""
  return params if config.ensemble > 1 else jax.tree.map(lambda x: x[None], params)


def encode_step(params, ids: jax.Array, *, config: TKConfig) -> jax.Array:
  """(members, B, L, E) contextualized vectors of `ids` (B, L) by each ensemble member."""
  network = TKNetwork(config)
  return jax.vmap(lambda p: network.apply({"params": p}, ids, method=TKNetwork.encode))(
      _stack_members(params, config))


@functools.partial(jax.jit, static_argnames="config")
def _encode_queries(params, ids, *, config):
  return encode_step(params, ids, config=config)


@functools.partial(jax.jit, static_argnames="config")
def _score_documents(state, doc_ids, row_doc, slot_query, query_mask, item_slot, *, config):
  """Scores a batch laid out in slots: documents (D, n) contextualized once; row r holds up to S
  pairs of document row_doc[r], slot (r, s) reading the shard's query slot_query[r, s] (cut to the
  batch's query length m = query_mask.shape[2]); item i's score is slot item_slot[i]'s. The
  document vectors are matched against their slots' queries without copying them per pair."""
  network = TKNetwork(config)
  rows, slots, m = query_mask.shape
  docs = encode_step(state["params"], doc_ids, config=config)  # (members, D, n, E)
  queries = state["queries"][:, slot_query, :m]  # (members, R, S, m, E)
  doc_mask = jnp.repeat((doc_ids > UNK_ID)[row_doc], slots, axis=0)  # (R·S, n)

  def member(params, query, doc):
    match = jnp.einsum("rsme,rne->rsmn", unit_vectors(query), unit_vectors(doc[row_doc]))  # (4)
    return network.apply({"params": params}, match.reshape(rows * slots, m, -1),
                         query_mask.reshape(rows * slots, m), doc_mask,
                         method=TKNetwork.pool)[0]  # (R·S,)

  score = jnp.mean(jax.vmap(member)(_stack_members(state["params"], config), queries, docs),
                   axis=0)[item_slot]
  return score, jax.nn.sigmoid(score)


def _pad_rows(n: int, multiple: int) -> int:
  """The padded row count of n rows: the next power of two (at least `multiple`), rounded up to a
  multiple of `multiple`, so that a job compiles few shapes."""
  rows = max(multiple, 1 << max(n - 1, 0).bit_length())
  return -(-rows // multiple) * multiple


class TK(Reranker):
  """TK behind the `Reranker` interface. Examples are (query ids, document ids); the scorer orders
  a job's pairs by passage (`shard_order`), so a shard holds each of its passages' pairs together:
  `shard_state` contextualizes the shard's distinct queries once, and each batch holds distinct
  passages, each contextualized once, and the pairs that read them. `score_batch` returns (s,
  sigmoid(s)); TK's score is not a probability and the second value is only a squashing of it."""

  name = "tk"
  shard_order = "passage"

  def __init__(self, config: TKConfig, vocabulary):
    if vocabulary.size != config.vocab_size or (
        config.vocabulary_sha256 and vocabulary.sha256 != config.vocabulary_sha256):
      raise ValueError(f"the word vocabulary ({vocabulary.size} ids, sha256 "
                       f"{vocabulary.sha256[:12]}) is not the one the model was built for "
                       f"({config.vocab_size} ids, sha256 {config.vocabulary_sha256[:12]})")
    self.config = config
    self.vocabulary = vocabulary

  @property
  def reads_first_stage(self) -> bool:
    return False

  def encode(self, queries, passages, first_stage=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(query ids, document ids) per pair, cut to the configured lengths; logs the share of
    out-of-vocabulary words (they map to the unknown id and are masked out of matching)."""
    c, encode = self.config, self.vocabulary.encode
    cache: dict[str, tuple] = {}
    oov = total = 0

    def ids(text: str, length: int) -> np.ndarray:
      nonlocal oov, total
      if (text, length) not in cache:
        cache[text, length] = encode(text, length)
        oov, total = oov + cache[text, length][1], total + cache[text, length][2]
      return cache[text, length][0]

    examples = [(ids(q, c.max_query_length), ids(d, c.max_document_length))
                for q, d in zip(queries, passages)]
    logger.info("TK: %d pairs, %d distinct texts, %.2f%% of their words out of vocabulary",
                len(examples), len(cache), 100.0 * oov / max(total, 1))
    return examples

  def _distinct(self, examples, side: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct id sequences of one side (0 queries, 1 documents) in order of first
    appearance, and each example's index into them."""
    index: dict[bytes, int] = {}
    distinct, of = [], np.empty(len(examples), np.int32)
    for i, example in enumerate(examples):
      key = example[side].tobytes()
      if key not in index:
        index[key] = len(distinct)
        distinct.append(example[side])
      of[i] = index[key]
    return distinct, of

  def _query_bucket(self, length: int) -> int:
    """The padded length of a query of `length` words: SHORT_QUERY, or the configured maximum."""
    short = min(SHORT_QUERY, self.config.max_query_length)
    return short if length <= short else self.config.max_query_length

  def shard_state(self, params, examples, *, mesh):
    """{"params", "queries" (members, Q, m, E)}: the shard's distinct queries, contextualized
    once, in `_distinct` order (short ones at SHORT_QUERY words, the rest at the maximum, zeros
    past), Q padded to few shapes."""
    from t5rank.partitioning import replicated

    distinct, _ = self._distinct(examples, 0)
    c = self.config
    rows = _pad_rows(len(distinct), 8)
    reps = jnp.zeros((c.ensemble, rows, c.max_query_length, c.embedding_dim), jnp.float32)
    lengths = np.array([self._query_bucket(len(q)) for q in distinct] +
                       [self._query_bucket(0)] * (rows - len(distinct)))
    for length in np.unique(lengths):
      members = np.flatnonzero(lengths == length)
      ids = np.zeros((_pad_rows(len(members), 8), int(length)), np.int32)
      for row, q in enumerate(members):
        if q < len(distinct):
          ids[row, :len(distinct[q])] = distinct[q]
      for first in range(0, len(members), 1024):
        chunk = members[first:first + 1024]
        encoded = _encode_queries(params, jax.device_put(ids[first:first + 1024],
                                                         replicated(mesh)), config=c)
        reps = reps.at[:, chunk, :int(length)].set(encoded[:, :len(chunk)])
    return {"params": params, "queries": jax.device_put(reps, replicated(mesh))}

  def batches(self, examples, *, batch_tokens: int, row_multiple: int = 1) -> list[Batch]:
    """Batches of distinct documents and the pairs that read them, in slots: arrays (document ids
    (D, n), each row's document (R,), each slot's query index (R, S), each slot's query mask
    (R, S, m), each item's slot (P = R·S,)). A document's pairs fill rows of S = 8 slots. Documents
    go by length buckets of 32 words and by their queries' length (m = SHORT_QUERY when all are
    at most that long, else the maximum, 30); every batch of a bucket holds
    D = batch_tokens // n documents and R = 2·D rows, padded (a document read by more pairs than
    fit continues in the next batch), so that a job compiles one shape per bucket."""
    queries, query_of = self._distinct(examples, 0)
    docs, doc_of = self._distinct(examples, 1)
    query_bucket = np.array([self._query_bucket(len(q)) for q in queries])
    query_masks = np.zeros((len(queries), self.config.max_query_length), bool)  # (Q, 30)
    for row, ids in enumerate(queries):
      query_masks[row, :len(ids)] = ids > UNK_ID
    pairs_of: dict[int, list[int]] = {}
    for i, d in enumerate(doc_of):
      pairs_of.setdefault(int(d), []).append(i)
    units = {(int(query_bucket[query_of[pairs]].max()), d): pairs  # (query length, document)
             for d, pairs in pairs_of.items()}
    lengths = np.array([len(d) for d in docs], np.int64)
    buckets = np.minimum(-(-np.maximum(lengths, 1) // 32) * 32, self.config.max_document_length)
    slots = SLOTS
    batches = []
    for (query_length, length) in sorted({(m, int(buckets[d])) for m, d in units}):
      max_docs = max(row_multiple, batch_tokens // length // row_multiple * row_multiple)
      max_rows = ROWS_PER_DOCUMENT * max_docs
      chunk: list[int] = []  # the batch's documents
      rows: list[tuple[int, list[int]]] = []  # (document row, its pairs: at most S)

      def emit() -> None:  # every batch of the bucket has the full shape: one compilation
        doc_ids = np.zeros((max_docs, length), np.int32)
        for row, d in enumerate(chunk):
          doc_ids[row, :lengths[d]] = docs[d]
        size = max_rows
        row_doc, slot_query = np.zeros(size, np.int32), np.zeros((size, slots), np.int32)
        query_mask = np.zeros((size, slots, query_length), bool)
        items, item_slot = [], np.zeros(size * slots, np.int32)
        for r, (doc_row, pairs) in enumerate(rows):
          row_doc[r] = doc_row
          slot_query[r, :len(pairs)] = query_of[pairs]
          query_mask[r, :len(pairs)] = query_masks[query_of[pairs], :query_length]
          item_slot[len(items):len(items) + len(pairs)] = r * slots + np.arange(len(pairs))
          items.extend(pairs)
        batches.append(Batch(np.asarray(items, np.int64),
                             (doc_ids, row_doc, slot_query, query_mask, item_slot)))
        chunk.clear(), rows.clear()

      for (m, d), pending in units.items():
        if m != query_length or buckets[d] != length:
          continue
        while pending:
          if len(chunk) == max_docs or len(rows) == max_rows:
            emit()
          chunk.append(d)
          while pending and len(rows) < max_rows:
            rows.append((len(chunk) - 1, pending[:slots]))
            pending = pending[slots:]
      if chunk:
        emit()
    return batches

  def score_batch(self, state, arrays):
    return _score_documents(state, *arrays, config=self.config)

  def param_axes(self):
    def shapes(rng):
      params = init_tk_params(self.config, rng)
      return jax.tree.map(lambda x: x[None], params) if self.config.ensemble > 1 else params
    return tk_param_axes(jax.eval_shape(shapes, jax.random.PRNGKey(0)))

  def fingerprint(self) -> dict:
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocabulary.sha256}

  def describe(self) -> str:
    c = self.config
    return (f"TK ({c.vocab_size} words x {c.embedding_dim}, {c.num_layers} layers of "
            f"{c.num_heads} heads, {len(c.kernel_mus)} kernels"
            f"{f', windows {c.windows}' if c.windows else ''}"
            f"{f', ensemble of {c.ensemble}' if c.ensemble > 1 else ''})")

  @classmethod
  def load(cls, checkpoint: str, *, config_name: Any = None, **options) -> tuple["TK", Any]:
    """(TK, parameters) of a TK checkpoint (`t5rank train` with a TK gin, or `t5rank ensemble`);
    TK has no scoring options, and any given is refused by name."""
    from t5rank.checkpoints import native
    from t5rank.models.words import WordVocabulary

    if config_name is not None:
      options["config"] = config_name
    if options:
      raise ValueError(f"{checkpoint} is a TK checkpoint; the options "
                       f"{', '.join(sorted(options))} are monoT5's (TK reads whole words with its "
                       "own vocabulary, has no target words and reads no first-stage score)")
    config, params = native.restore_model(checkpoint, TKConfig)
    vocabulary = WordVocabulary.load(checkpoint)
    try:
      return cls(config, vocabulary), params
    except ValueError as e:
      raise ValueError(f"{checkpoint}: {e}") from None
