"""TK, the Transformer-Kernel ranking model: Hofstätter, Zlabinger, Hanbury, "TU Wien @ TREC Deep
Learning '19 -- Simple Contextualization for Re-ranking" (TREC 2019 notebook paper), section 2.

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
The `TK` reranker (scoring, batching) is in `t5rank.models.tk_reranker`.

Precision (`TKNetwork.dtype`, not part of the config: one checkpoint scores in either): float32
computes everything in float32; bfloat16 is mixed precision as for T5 (`t5rank.models.network`):
every matrix product (the feed-forward and attention projections, the attention weights, the
match matrix) takes bfloat16 operands and returns float32 (`preferred_element_type`), the
parameters may be stored in bfloat16, and the residual stream, layer norms, softmax and kernel
pooling stay float32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models.config import JsonConfig
from t5rank.models.network import matmul
from t5rank.models.vectors import unit_vectors
from t5rank.models.words import UNK_ID

KERNEL_MUS = (1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9)
LOG_FLOOR = 1e-10  # log₂ of a kernel sum is taken of max(sum, LOG_FLOOR)


@dataclasses.dataclass(frozen=True)
class TKConfig(JsonConfig):
  """Architecture of TK. `vocab_size` counts every id (padding and unknown included);
  `vocabulary_sha256` names the word list its ids come from (`WordVocabulary.sha256`) and `words`
  where training reads it (a `t5rank embeddings` directory; a checkpoint carries its own copy).
  Build it with `tk_config(words)`."""
  MODEL: ClassVar[str] = "tk"
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
    return self.MODEL


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


def term_kernels(match: jax.Array, doc_weight: jax.Array, mus: tuple[float, ...],
                 sigma: float) -> jax.Array:
  """Kᵢᵏ (..., K): the kernels of each query term i summed over the last axis of `match` (..., n),
  the document terms, weighted by `doc_weight` (broadcast to `match`; 1 real, 0 padding)."""
  # (5) Kᵢⱼᵏ = exp(−(Mᵢⱼ − μₖ)² / 2σ²) and (6) Kᵢᵏ = Σⱼ Kᵢⱼᵏ, one kernel at a time so that XLA
  # fuses each into its sum instead of writing the (..., n, K) tensor to memory
  return jnp.stack([jnp.sum(jnp.exp(-jnp.square(match - mu) / (2.0 * sigma ** 2)) * doc_weight,
                            axis=-1) for mu in mus], axis=-1)


def kernel_pooling(match: jax.Array, query_mask: jax.Array, doc_mask: jax.Array,
                   mus: tuple[float, ...], sigma: float) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(s_log (B, K), s_len (B, K), Kᵢᵏ (B, m, K)) of the match matrices `match` (B, m, n) over the
  real query and document terms (masks (B, m), (B, n))."""
  q = query_mask.astype(jnp.float32)[..., None]  # (B, m, 1)
  d = doc_mask.astype(jnp.float32)  # (B, n)
  per_term = term_kernels(match, d[:, None, :], mus, sigma)  # (B, m, K)  (5), (6)
  s_log = jnp.sum(jnp.log2(jnp.maximum(per_term, LOG_FLOOR)) * q, axis=1)  # (B, K)  (7)
  d_len = jnp.maximum(jnp.sum(d, axis=-1), 1.0)[:, None]  # (B, 1)
  s_len = jnp.sum(per_term * q, axis=1) / d_len  # (B, K)  (8)
  return s_log, s_len, per_term


def cosine_matrix(query: jax.Array, doc: jax.Array, dtype: str = "float32") -> jax.Array:
  """(B, m, n) cosines of every query and document vector, (4); a zero vector (padding) has cosine
  0 with everything, and a zero gradient (the norm is floored at 1e-13 before dividing). The
  product's operands in `dtype`, its result float32."""
  return matmul("bme,bne->bmn", unit_vectors(query), unit_vectors(doc), dtype)


def mixed_dot_general(dtype: str):
  """A `lax.dot_general` for flax's layers that multiplies in `dtype` and returns float32 (None, the
  layers' own, for float32)."""
  if jnp.dtype(dtype) == jnp.float32:
    return None

  def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    return jax.lax.dot_general(lhs.astype(dtype), rhs.astype(dtype), dimension_numbers,
                               precision=precision, preferred_element_type=jnp.float32)
  return dot_general


# flax's two attention products, heads first: the batch dimensions (B, H) lead both operands, the
# layout XLA:CPU's batched matrix-product kernels take directly (4x faster in float32 at TK's shapes
# than with the heads between the positions and the features, as flax writes them)
_HEADS_FIRST = {"...qhd,...khd->...hqk": ("...hqd,...hkd->...hqk", True, False),
                "...hqk,...khd->...qhd": ("...hqk,...hkd->...hqd", False, True)}


def _attention_einsum(dtype: str):
  """The einsum of flax's dot-product attention (its `..._einsum_cls`), the softmax between the two
  float32. float32: both products with the heads first. Mixed precision: flax's own form, in
  `dtype` returning float32; transposed heads first, the operands are copied by XLA:CPU (jaxlib
  0.10.2) in float32 and both products run in float32 (5% slower at TK's shapes)."""
  mixed = mixed_dot_general(dtype)
  if mixed is not None:
    return lambda: (lambda subscripts, a, b, **_: jnp.einsum(subscripts, a, b, _dot_general=mixed))

  def einsum(subscripts: str, a: jax.Array, b: jax.Array, **_) -> jax.Array:
    heads_first, swap_a, swap_out = _HEADS_FIRST[subscripts]
    a = jnp.swapaxes(a, -3, -2) if swap_a else a
    out = jnp.einsum(heads_first, a, jnp.swapaxes(b, -3, -2))
    return jnp.swapaxes(out, -3, -2) if swap_out else out
  return lambda: einsum


def _uniform(scale: float):
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -scale, scale)


class _Layer(nn.Module):
  """One contextualization layer, (2): FF then multi-head attention (3), each + residual, layer
  norm."""
  config: TKConfig
  dtype: str = "float32"

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    c, dot = self.config, mixed_dot_general(self.dtype)
    ff = nn.Dense(c.embedding_dim, dot_general=dot, name="ff_out")(
        nn.relu(nn.Dense(c.ff_dim, dot_general=dot, name="ff_in")(x)))
    x = nn.LayerNorm(dtype=jnp.float32, name="ff_norm")(ff + x)  # (B, L, E)
    attention = nn.MultiHeadDotProductAttention(
        num_heads=c.num_heads, qkv_features=c.num_heads * c.head_dim, out_features=c.embedding_dim,
        qkv_dot_general=dot, out_dot_general=dot,
        qk_attn_weights_einsum_cls=_attention_einsum(self.dtype),
        attn_weights_value_einsum_cls=_attention_einsum(self.dtype),
        name="attention")(x, mask=nn.make_attention_mask(mask, mask))
    return nn.LayerNorm(dtype=jnp.float32, name="attention_norm")(attention + x)


class TKNetwork(nn.Module):
  """TK's parameters and its two halves: `encode` (ids -> contextualized vectors) and `score`
  (two sides' vectors -> score and its parts); `dtype` the precision of its matrix products
  (module docstring)."""
  config: TKConfig
  dtype: str = "float32"

  def setup(self):
    c = self.config
    k = len(c.kernel_mus)
    self.embedding = nn.Embed(c.vocab_size, c.embedding_dim, name="embedding")
    self.layers = [_Layer(c, self.dtype, name=f"layer_{i}") for i in range(c.num_layers)]
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
    t = self.embedding(ids).astype(jnp.float32) * mask[..., None]  # (B, L, E): rows, not the table
    x = t + positional_encoding(ids.shape[1], self.config.embedding_dim)[None]
    for layer in self.layers:
      x = layer(x, mask)
    return (self.alpha * t + (1.0 - self.alpha) * x) * mask[..., None]

  def score(self, query: jax.Array, query_mask: jax.Array, doc: jax.Array,
            doc_mask: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(s (B,), parts) of contextualized queries (B, m, E) and documents (B, n, E); parts hold M,
    Kᵢᵏ, s_logᵏ, s_lenᵏ, s_log, s_len (whole-document pooling) for explanations."""
    return self.pool(cosine_matrix(query, doc, self.dtype), query_mask, doc_mask)  # (4)

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
    q = query_mask.astype(jnp.float32)

    def over_terms(x: jax.Array) -> jax.Array:  # (B, m, ...) -> (B, ...): the real query terms
      return jnp.sum(x * q.reshape(q.shape + (1,) * (x.ndim - 2)), axis=1)

    return self._windowed(match, doc_mask, doc_mask, over_terms), parts

  def pool_packed(self, match: jax.Array, doc_mask: jax.Array, term_pair: jax.Array,
                  term_mask: jax.Array, pair_row: jax.Array) -> jax.Array:
    """(N,) scores of N pairs whose query terms lie packed in rows: `match` (R, P, n) holds the
    cosines of P query terms with the document of row r (`doc_mask` (R, n)); term (r, p) is one of
    pair term_pair[r, p]'s (0 <= it < N) where `term_mask`; pair k's document is row pair_row[k]'s.
    The same score as `pool` on each pair, the sums over a query's terms (7), (8) taken as
    segment sums, so that no query is padded to the longest."""
    c = self.config
    num_pairs = pair_row.shape[0]
    segments, weight = term_pair.reshape(-1), term_mask.astype(jnp.float32).reshape(-1)

    def over_terms(x: jax.Array) -> jax.Array:  # (R, P, ...) -> (N, ...): each pair's real terms
      flat = x.reshape((-1,) + x.shape[2:])
      return jax.ops.segment_sum(flat * weight.reshape((-1,) + (1,) * (flat.ndim - 1)), segments,
                                 num_segments=num_pairs)

    pair_doc_mask = doc_mask[pair_row]  # (N, n)
    if c.windows:
      return self._windowed(match, doc_mask, pair_doc_mask, over_terms)
    per_term = term_kernels(match, doc_mask.astype(jnp.float32)[:, None, :], c.kernel_mus,
                            c.kernel_sigma)  # (R, P, K)  (5), (6)
    s_log_k = over_terms(jnp.log2(jnp.maximum(per_term, LOG_FLOOR)))  # (N, K)  (7)
    d_len = jnp.maximum(jnp.sum(pair_doc_mask.astype(jnp.float32), axis=-1), 1.0)[:, None]
    return self._combine(s_log_k, over_terms(per_term) / d_len)  # (8)-(10)

  def _combine(self, s_log_k: jax.Array, s_len_k: jax.Array) -> jax.Array:
    """s = β·(s_logᵏ·W₁) + γ·(s_lenᵏ·W₂) over the last (kernel) axis: (9), (10)."""
    return (self.combine[0] * (s_log_k @ self.log_weights)
            + self.combine[1] * (s_len_k @ self.length_weights))

  def _windowed(self, match: jax.Array, doc_mask: jax.Array, pair_doc_mask: jax.Array,
                over_terms) -> jax.Array:
    """TUW19-d3: for each window size, the top `window_top` window scores (sorted) weighted.
    `match` (R, m, n) against row documents `doc_mask` (R, n); `over_terms` sums (R, m, ...) over
    each pair's real query terms into (N, ...); `pair_doc_mask` (N, n) is each pair's document."""
    c = self.config
    rows, terms, n = match.shape
    total = jnp.zeros(pair_doc_mask.shape[0], jnp.float32)
    for i, size in enumerate(c.windows):
      pad = -n % size
      windows = (n + pad) // size
      m = jnp.pad(match, ((0, 0), (0, 0), (0, pad))).reshape(rows, terms, windows, size)
      d = jnp.pad(doc_mask, ((0, 0), (0, pad))).reshape(rows, windows, size)
      per_term = term_kernels(m, d.astype(jnp.float32)[:, None], c.kernel_mus,
                              c.kernel_sigma)  # (R, m, W, K)
      pair_d = jnp.pad(pair_doc_mask, ((0, 0), (0, pad))).reshape(-1, windows, size)  # (N, W, size)
      d_len = jnp.maximum(jnp.sum(pair_d.astype(jnp.float32), axis=-1), 1.0)[..., None]
      scores = self._combine(over_terms(jnp.log2(jnp.maximum(per_term, LOG_FLOOR))),
                             over_terms(per_term) / d_len)  # (N, W): each window as a document
      real = pair_d.any(axis=-1)  # (N, W) windows holding at least one real term
      top = min(c.window_top, windows)
      best, _ = jax.lax.top_k(jnp.where(real, scores, -jnp.inf), top)  # (N, top) sorted
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
