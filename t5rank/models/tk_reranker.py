"""TK behind the `Reranker` interface (`t5rank.models.tk` holds the network): the scorer's two-stage
path. Queries are contextualized once (`TK.shard_state`, into a table of term vectors kept from
shard to shard while the parameters are the same); each batch contextualizes its distinct documents
once and matches them against the query terms of their pairs, packed into rows without padding each
query to the longest (`TKNetwork.pool_packed`).

A batch (`TK.batches`) is G independent groups, G = the data-parallel devices, each holding
    documents (Dg, n)          the group's distinct documents, one length bucket of 32 words
    rows (Rg,) of P = 64 terms  row r matches document row_doc[r] against 64 query terms: the real
                               (in-vocabulary) words of that document's pairs' queries, one pair
                               after another (a pair may continue on the next row), padding at the
                               end of each document's last row only
    pairs (Ng,)                each term's pair (a segment id), each pair's row
so that each device scores its own group; the network sees the same cosines and kernel sums as for
one pair at a time, summed over a pair's terms by segments.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from t5rank.checkpoints.resolved import Checkpoint, resolve
from t5rank.models.batching import distinct_rows, pad_rows
from t5rank.models.network import matmul
from t5rank.models.reranker import Batch, Reranker, encode_distinct
from t5rank.models.tk import TKConfig, TKNetwork, init_tk_params, tk_param_axes
from t5rank.models.vectors import unit_vectors
from t5rank.models import registry
from t5rank.models.words import UNK_ID, check_words, load_words

logger = logging.getLogger(__name__)

TERMS_PER_ROW = 64  # P: query terms matched per row (InsuranceQA queries: 7.4 words on average;
# 64 costs less than 32's smaller matrix products on a CPU, HISTORY.md "TK")
DOCUMENT_BUCKET = 32  # documents are padded to a multiple of this many words (or the maximum)
DTYPES = ("float32", "bfloat16")  # float32, or mixed precision (`t5rank.models.tk`)


def _stack_members(params, config: TKConfig):
  """`params` with a leading member axis (an ensemble's already has one)."""
  return params if config.ensemble > 1 else jax.tree.map(lambda x: x[None], params)


def encode_step(params, ids: jax.Array, *, config: TKConfig, dtype: str = "float32") -> jax.Array:
  """(members, B, L, E) contextualized vectors of `ids` (B, L) by each ensemble member, its matrix
  products in `dtype` (`t5rank.models.tk`: mixed precision)."""
  network = TKNetwork(config, dtype)
  return jax.vmap(lambda p: network.apply({"params": p}, ids, method=TKNetwork.encode))(
      _stack_members(params, config))


@functools.partial(jax.jit, static_argnames=("config", "dtype"))
def _query_terms(params, ids, *, config, dtype="float32"):
  """(members, B, L, E) unit vectors of contextualized queries `ids` (B, L); 0 at padding and
  unknown words."""
  return unit_vectors(encode_step(params, ids, config=config, dtype=dtype))


@functools.partial(jax.jit, static_argnames=("config", "dtype"))
def _score_documents(state, doc_ids, row_doc, term_query, term_offset, term_pair, term_mask,
                     pair_row, item_slot, *, config, dtype="float32"):
  """(s, sigmoid(s)) of a batch's items (see the module docstring for the layout). Each group g:
  documents doc_ids[g] (Dg, n), contextualized once; row r matches document row_doc[g, r] against
  the P query terms term (term_query, term_offset) of the shard's queries, read from the state's
  table at query_start[term_query] + term_offset; pair_row[g] (Ng,) each pair's row. Item i's
  score is pair item_slot[i] of the flattened (G·Ng,) pairs."""
  network = TKNetwork(config, dtype)
  members = _stack_members(state["params"], config)
  table = state["terms"]  # (members, T, E) unit vectors of contextualized query terms

  def group(doc_ids, row_doc, term_query, term_offset, term_pair, term_mask, pair_row):
    docs = unit_vectors(encode_step(state["params"], doc_ids, config=config,
                                    dtype=dtype))  # (M, Dg, n, E)
    terms = table[:, state["query_start"][term_query] + term_offset]  # (M, Rg, P, E)
    row_mask = (doc_ids > UNK_ID)[row_doc]  # (Rg, n)

    def member(params, terms, docs):
      match = matmul("rpe,rne->rpn", terms, docs[row_doc], dtype)  # (Rg, P, n)  (4)
      return network.apply({"params": params}, match, row_mask, term_pair, term_mask, pair_row,
                           method=TKNetwork.pool_packed)  # (Ng,)

    return jnp.mean(jax.vmap(member)(members, terms, docs), axis=0)

  score = jax.vmap(group)(doc_ids, row_doc, term_query, term_offset, term_pair, term_mask,
                          pair_row).reshape(-1)[item_slot]
  return score, jax.nn.sigmoid(score)


class _Group:
  """One device's share of a batch, filled document by document (see the module docstring)."""

  def __init__(self):
    self.docs: list[int] = []  # distinct-document indices, by slot
    self.row_doc: list[int] = []  # each row's document slot
    self.terms: list[np.ndarray] = []  # (4, rows·P) chunks: query, offset, pair, mask
    self.pairs: list[int] = []  # example indices, by local pair index
    self.pair_row: list[int] = []

  def add(self, doc: int, pairs: np.ndarray, query_of: np.ndarray, counts: np.ndarray) -> None:
    """Document `doc` (a new slot) and `pairs` (example indices reading it), their query terms
    packed into new rows."""
    queries = query_of[pairs]
    width = np.maximum(counts[queries], 1)  # an empty query still takes one (masked) position
    first = np.cumsum(width) - width  # each pair's first position
    total, rows = int(width.sum()), -(-int(width.sum()) // TERMS_PER_ROW)
    chunk = np.zeros((4, rows * TERMS_PER_ROW), np.int32)
    offset = np.arange(total) - np.repeat(first, width)
    real = offset < np.repeat(counts[queries], width)
    chunk[0, :total] = np.repeat(queries, width)
    chunk[1, :total] = np.where(real, offset, 0)
    chunk[2, :total] = np.repeat(np.arange(len(self.pairs), len(self.pairs) + len(pairs)), width)
    chunk[3, :total] = real
    self.pair_row.extend(len(self.row_doc) + first // TERMS_PER_ROW)
    self.row_doc.extend([len(self.docs)] * rows)
    self.docs.append(doc)
    self.terms.append(chunk)
    self.pairs.extend(int(p) for p in pairs)


class TK(Reranker):
  """TK behind the `Reranker` interface. Examples are (query ids, document ids); the scorer orders
  a job's pairs by passage (`shard_order`), so a shard holds each of its passages' pairs together:
  `shard_state` contextualizes the shard's queries (those not already in the table of the previous
  shard), and each batch holds distinct passages, each contextualized once, and the pairs that read
  them. `score_batch` returns (s, sigmoid(s)); TK's score is not a probability and the second value
  is only a squashing of it."""

  name = "tk"
  shard_order = "passage"

  def __init__(self, config: TKConfig, vocabulary, dtype: str = "float32"):
    check_words(vocabulary, config)
    if dtype not in DTYPES:
      raise ValueError(f"TK's dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    self.config = config
    self.vocabulary = vocabulary
    self.dtype = dtype
    self._table: dict | None = None  # the query-term table of the last shard (`shard_state`)

  @property
  def reads_first_stage(self) -> bool:
    return False

  def encode(self, queries, passages, first_stage=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(query ids, document ids) per pair, cut to the configured lengths; logs the share of
    out-of-vocabulary words (they map to the unknown id and are masked out of matching)."""
    c, encode = self.config, self.vocabulary.encode
    oov = total = 0

    def ids(text: str, length: int) -> np.ndarray:
      nonlocal oov, total
      words, unknown, n = encode(text, length)
      oov, total = oov + unknown, total + n
      return words

    query_ids = encode_distinct(queries, lambda t: ids(t, c.max_query_length))
    document_ids = encode_distinct(passages, lambda t: ids(t, c.max_document_length))
    examples = list(zip(query_ids, document_ids))
    logger.info("TK: %d pairs, %d distinct texts, %.2f%% of their words out of vocabulary",
                len(examples), len(set(queries)) + len(set(passages)), 100.0 * oov / max(total, 1))
    return examples

  def _real_terms(self, queries: list[np.ndarray]) -> np.ndarray:
    """Each query's number of real (in-vocabulary) words: its terms, in order of position."""
    return np.array([int(np.count_nonzero(q > UNK_ID)) for q in queries], np.int64)

  def shard_state(self, params, examples, *, mesh, batch_tokens=None, length_bucket=None):
    """{"params", "terms" (members, T, E), "query_start" (Q,)}: the unit vectors of every real term
    of the shard's distinct queries (in `distinct_rows` order), query q's from row query_start[q] of
    `terms` on. The table is kept from one shard to the next while `params` is the same object (one
    scoring run), so a query read by several shards is contextualized once; it is rebuilt from the
    shard's own queries when new ones would overflow it (its capacity is twice what a shard needs,
    rounded up to a power of two, so a long job keeps it bounded and compiles few shapes). The
    table is built on the host and placed once per shard."""
    from t5rank.partitioning import replicated

    c = self.config
    queries, _ = distinct_rows(examples, 0)
    counts = self._real_terms(queries)
    keys = [q.tobytes() for q in queries]
    old = self._table if self._table is not None and self._table["params"] is params else None
    known = old["start"] if old is not None else {}
    fresh = [i for i, key in enumerate(keys) if key not in known]
    if old is not None and old["used"] + int(counts[fresh].sum()) <= old["terms"].shape[1]:
      terms, start, used = old["terms"], dict(known), old["used"]
    else:  # a new table: this shard's queries, those of the old table copied over
      capacity = max(8, 1 << int(2 * counts.sum() - 1).bit_length())
      terms = np.zeros((c.ensemble, capacity, c.embedding_dim), np.float32)
      start, used = {}, 0
      for i, key in enumerate(keys):
        if key in known:
          terms[:, used:used + counts[i]] = old["terms"][:, known[key]:known[key] + counts[i]]
          start[key], used = used, used + int(counts[i])
    for first in range(0, len(fresh), 1024):  # all at the longest length: one compilation
      chunk = fresh[first:first + 1024]
      ids = np.zeros((pad_rows(len(chunk), 8), c.max_query_length), np.int32)
      for row, q in enumerate(chunk):
        ids[row, :len(queries[q])] = queries[q]
      real_rows, real_positions = np.nonzero(ids > UNK_ID)  # row-major: each query's terms in order
      vectors = np.asarray(_query_terms(params, jax.device_put(ids, replicated(mesh)), config=c,
                                        dtype=self.dtype))
      terms[:, used:used + len(real_rows)] = vectors[:, real_rows, real_positions]
      for q in chunk:
        start[keys[q]], used = used, used + int(counts[q])
    for key in keys:  # queries with no real term
      start.setdefault(key, 0)
    query_start = np.zeros(pad_rows(len(keys), 8), np.int32)
    query_start[:len(keys)] = [start[key] for key in keys]
    self._table = {"params": params, "terms": terms, "start": start, "used": used}
    return {"params": params, "terms": jax.device_put(terms, replicated(mesh)),
            "query_start": jax.device_put(query_start, replicated(mesh))}

  def batches(self, examples, *, batch_tokens: int, row_multiple: int = 1,
              length_bucket: Optional[int] = None) -> list[Batch]:
    """Batches of distinct documents and the query terms of the pairs that read them, packed in
    rows (module docstring): arrays (document ids (G, Dg, n), row_doc (G, Rg), term query, term
    offset, term pair (G, Rg, P) and term mask, pair_row (G, Ng), item_slot (G·Ng,)), G =
    `row_multiple` groups. Documents go by length buckets of 32 words; a group of a bucket holds
    Dg = batch_tokens // n // G documents and Rg rows (the bucket's mean rows per document times
    Dg, rounded up by `pad_rows` so that the shards of a job share few shapes), every batch of
    a bucket the same shape; a document whose pairs do not fit continues in the next group (and is
    contextualized there again)."""
    c, groups = self.config, row_multiple
    queries, query_of = distinct_rows(examples, 0)
    docs, doc_of = distinct_rows(examples, 1)
    counts = self._real_terms(queries)
    width = np.maximum(counts, 1)[query_of]  # positions each pair takes
    order = np.argsort(doc_of, kind="stable")
    bounds = np.searchsorted(doc_of[order], np.arange(len(docs) + 1))
    lengths = np.array([len(d) for d in docs], np.int64)
    step = length_bucket or DOCUMENT_BUCKET
    buckets = np.minimum(-(-np.maximum(lengths, 1) // step) * step, c.max_document_length)
    min_rows = -(-c.max_query_length // TERMS_PER_ROW)  # the longest query fits an empty group
    batches: list[Batch] = []
    for length in np.unique(buckets):
      bucket = np.flatnonzero(buckets == length)
      rows_of = np.array([-(-int(width[order[bounds[d]:bounds[d + 1]]].sum()) // TERMS_PER_ROW)
                          for d in bucket])
      max_docs = max(1, batch_tokens // int(length) // groups)
      max_rows = pad_rows(max(min_rows, int(np.ceil(rows_of.mean() * max_docs))), 8)
      full: list[_Group] = [_Group()]  # the bucket's groups not yet in a batch; the last open

      def close() -> None:  # the open group is done; G done groups make a batch
        if len(full) == groups:
          batches.append(self._arrays(full, docs, int(length), max_docs, max_rows))
          full.clear()
        full.append(_Group())

      for d in bucket:
        pending = order[bounds[d]:bounds[d + 1]]
        while len(pending):
          group = full[-1]
          room = (max_rows - len(group.row_doc)) * TERMS_PER_ROW
          take = int(np.searchsorted(np.cumsum(width[pending]), room, side="right"))
          if len(group.docs) == max_docs or take == 0:  # full, or the next pair does not fit
            close()
            continue
          group.add(int(d), pending[:take], query_of, counts)
          pending = pending[take:]
      if not full[-1].docs:
        full.pop()
      if full:
        batches.append(self._arrays(full + [_Group() for _ in range(groups - len(full))], docs,
                                    int(length), max_docs, max_rows))
    return batches

  def _arrays(self, groups: list[_Group], docs: list[np.ndarray], length: int, max_docs: int,
              max_rows: int) -> Batch:
    """The Batch of `groups` (module docstring), padded to max_docs documents and max_rows rows
    of TERMS_PER_ROW terms, max_rows · TERMS_PER_ROW pairs each."""
    g, max_pairs = len(groups), max_rows * TERMS_PER_ROW
    doc_ids = np.zeros((g, max_docs, length), np.int32)
    row_doc = np.zeros((g, max_rows), np.int32)
    terms = np.zeros((4, g, max_rows * TERMS_PER_ROW), np.int32)
    pair_row = np.zeros((g, max_pairs), np.int32)
    item_slot = np.zeros(g * max_pairs, np.int32)
    items: list[int] = []
    for k, group in enumerate(groups):
      for slot, d in enumerate(group.docs):
        doc_ids[k, slot, :len(docs[d])] = docs[d]
      row_doc[k, :len(group.row_doc)] = group.row_doc
      if group.terms:
        flat = np.concatenate(group.terms, axis=1)
        terms[:, k, :flat.shape[1]] = flat
      pair_row[k, :len(group.pair_row)] = group.pair_row
      item_slot[len(items):len(items) + len(group.pairs)] = k * max_pairs + np.arange(
          len(group.pairs))
      items.extend(group.pairs)
    query, offset, pair, mask = terms.reshape(4, g, max_rows, TERMS_PER_ROW)
    return Batch(np.asarray(items, np.int64), (doc_ids, row_doc, query, offset, pair,
                                               mask.astype(bool), pair_row, item_slot))

  def score_batch(self, state, arrays):
    return _score_documents(state, *arrays, config=self.config, dtype=self.dtype)

  def param_axes(self):
    def shapes(rng):
      params = init_tk_params(self.config, rng)
      return jax.tree.map(lambda x: x[None], params) if self.config.ensemble > 1 else params
    return tk_param_axes(jax.eval_shape(shapes, jax.random.PRNGKey(0)))

  def fingerprint(self) -> dict:
    mixed = {"dtype": self.dtype} if self.dtype != "float32" else {}  # float32 jobs still resume
    return {"model": self.name, "config": json.loads(self.config.to_json()),
            "vocab": self.vocabulary.sha256, **mixed}

  def describe(self) -> str:
    c = self.config
    return (f"TK ({c.vocab_size} words x {c.embedding_dim}, {c.num_layers} layers of "
            f"{c.num_heads} heads, {len(c.kernel_mus)} kernels"
            f"{f', windows {c.windows}' if c.windows else ''}"
            f"{f', ensemble of {c.ensemble}' if c.ensemble > 1 else ''}"
            f"{', bfloat16 products with float32 results' if self.dtype == 'bfloat16' else ''})")

  @classmethod
  def for_evaluation(cls, config: TKConfig, **_) -> "TK":
    """TK as training-time evaluation scores it: its config's word list."""
    return cls(config, load_words(config))


def cast_matrices(params, dtype: str):
  """`params` with every weight matrix (the embedding table, the projections' kernels) in `dtype`;
  the biases, norms, α and the kernel weights stay float32, as mixed precision adds and scales
  with them (`t5rank.models.tk`)."""
  def cast(path, x):
    name = getattr(path[-1], "key", "")
    return x.astype(dtype) if name in ("kernel", "embedding") else x
  return jax.tree_util.tree_map_with_path(cast, params)


def load_tk(checkpoint: Checkpoint, *, dtype: Optional[str] = None,
            **options) -> tuple[TK, dict]:
  """(TK, parameters) of a TK checkpoint (`t5rank train` with a TK gin, or `t5rank ensemble`; a
  name is resolved first), with the word list it carries. `dtype` "bfloat16" stores its matrices
  in bfloat16 and multiplies in mixed precision; TK has no other scoring options, and any given is
  refused by name."""
  from t5rank.checkpoints import native
  from t5rank.models.loading import refuse_options

  checkpoint = resolve(checkpoint)
  refuse_options(checkpoint, "TK", options, "TK reads whole words with its own vocabulary, has no "
                 "target words and reads no first-stage score")
  config, params = native.restore_model(checkpoint.path, TKConfig, TK.name, checkpoint.metadata,
                                        checkpoint.digests)
  model = TK(config, load_words(config, checkpoint.path), dtype or "float32")
  return model, cast_matrices(params, dtype) if dtype and dtype != "float32" else params


registry.register(registry.Family(
    name=TK.name, config=TKConfig, reranker=TK, trainable="t5rank.training.pairwise.PairwiseTK",
    loader=load_tk, explain="t5rank.models.tk_explain.write_explanations",
    description="the Transformer-Kernel reranker (Hofstaetter et al. 2019)"))
