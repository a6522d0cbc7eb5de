"""TK behind the `Reranker` interface (`t5rank.models.tk` holds the network): the scorer's two-stage
path, in which a shard's queries are contextualized once (`TK.shard_state`) and each batch
contextualizes its distinct documents once and matches them against their pairs' queries in slots.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models.reranker import Batch, Reranker
from t5rank.models.tk import TKConfig, TKNetwork, init_tk_params, tk_param_axes, unit_vectors
from t5rank.models.words import UNK_ID

logger = logging.getLogger(__name__)

SLOTS, ROWS_PER_DOCUMENT = 8, 2  # a scoring batch of D documents: 2·D rows of 8 pairs each
SHORT_QUERY = 16  # scoring matches queries of at most 16 words at that length, longer ones at 30


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
