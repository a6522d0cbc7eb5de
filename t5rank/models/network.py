"""The T5 encoder-decoder in flax.linen, in t5x's conventions.

Parameter names and nesting follow t5x (`token_embedder/embedding`, `encoder/layers_0/attention/query/
kernel`, `encoder/relpos_bias/rel_embedding`, `decoder/logits_dense/kernel`, ...), so a t5x checkpoint
maps onto this tree one to one. Every parameter carries logical axis names (`vocab`, `embed`,
`joined_kv` = heads x kv, `mlp`, `heads`, `relpos_buckets`) that `t5rank.partitioning` maps onto a
device mesh.

Shapes: B batch, L encoder length, T decoder length, D d_model, H heads, K d_kv, F d_ff, V vocab.

Precision (`config.dtype`): float32 computes everything in float32. bfloat16 is mixed precision, as
`torch.autocast` does it: every matrix product (the dense layers, both attention einsums, the
vocabulary rows) takes bfloat16 operands and accumulates and returns float32
(`preferred_element_type`), so a CPU with bfloat16 instructions (avx512_bf16, amx_bf16), a GPU and a
TPU run their bfloat16 kernels and nothing converts a weight matrix to float32 at each call; the
residual stream, the RMS norms, the softmax and the logits stay float32. Only the operands of
products are rounded to bfloat16: the normed activations, the attention weights, and the weight
matrices (stored so by `t5rank.models.reranker.cast_params`).
"""

from __future__ import annotations

import functools
from typing import Optional

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from t5rank.models.config import T5Config

Array = jax.Array
MASK_VALUE = -1e10  # additive attention bias for masked positions; finite so that softmax never NaNs.


def _param(module: nn.Module, name: str, init, shape, axes):
  """`module.param` with logical axis names. When applying, the given value with its shape checked
  against `shape` here: flax's own check traces the initializer of every parameter in every trace,
  a third of the time it takes to trace a T5 (one trace per input shape)."""
  if module.has_variable("params", name):
    value = nn.meta.unbox(module.get_variable("params", name))
    if np.shape(value) != tuple(shape):
      raise flax.errors.ScopeParamShapeError(name, module.scope.path_text, np.shape(value),
                                             tuple(shape))
    return value
  return module.param(name, nn.with_logical_partitioning(init, axes), shape, jnp.float32)


class RMSNorm(nn.Module):
  """T5 layer norm: scale * x / sqrt(mean(x^2) + eps), no bias, no mean subtraction, in float32."""
  epsilon: float
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, x: Array) -> Array:
    scale = _param(self, "scale", nn.initializers.ones, (x.shape[-1],), ("embed",))
    x = x.astype(jnp.float32)
    x = x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + self.epsilon)
    return (x * scale.astype(jnp.float32)).astype(self.dtype)  # the next product's operand


def matmul(subscripts: str, a: Array, b: Array, dtype: jnp.dtype) -> Array:
  """`einsum(subscripts, a, b)` on operands in `dtype`, accumulated and returned in float32 (the
  module docstring's precision policy)."""
  return jnp.einsum(subscripts, a.astype(dtype), b.astype(dtype),
                    preferred_element_type=jnp.float32)


def attend(subscripts: str, logits: Array, values: Array, dtype: jnp.dtype,
           dropout: Optional[nn.Module] = None) -> Array:
  """softmax(logits) over the last axis, times `values` by `matmul(subscripts, ...)`, with the
  softmax's division after the product: the product is linear in the weights, so dividing each of
  its rows by its weights' sum gives the same numbers (to float rounding) as dividing the weights,
  one pass over the (..., T_k) weights fewer. `subscripts` must keep the logits' leading axes, in
  order, and add one axis of `values` last (`bhqt,bthk->bhqk`: (B, H, T_q) rows of K); `dropout`
  (elementwise, also linear) is applied to the unnormalized weights."""
  peak = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  weights = jnp.exp(logits - peak)
  total = jnp.sum(weights, axis=-1, keepdims=True)
  if dropout is not None:
    weights = dropout(weights, deterministic=False)
  out = matmul(subscripts, weights, values, dtype)
  if out.ndim != logits.ndim or out.shape[:-1] != logits.shape[:-1]:
    raise ValueError(f"attend: {subscripts!r} does not keep the logits' rows {logits.shape[:-1]} "
                     f"first (gives {out.shape})")
  return out / total


class Dense(nn.Module):
  """A bias-free linear map with a 2-D kernel carrying logical axis names; float32 out."""
  features: int
  axes: tuple[str, str]
  dtype: jnp.dtype
  init_scale: float = 1.0

  @nn.compact
  def __call__(self, x: Array) -> Array:
    init = nn.initializers.variance_scaling(self.init_scale, "fan_in", "normal")
    kernel = _param(self, "kernel", init, (x.shape[-1], self.features), self.axes)
    return jnp.dot(x.astype(self.dtype), kernel.astype(self.dtype),
                   preferred_element_type=jnp.float32)


class Kernel(nn.Module):
  """A `Dense` layer's kernel itself (the same name, shape and axes), for a product that uses it
  otherwise than `x @ kernel` (`Attention`'s folded keys and values)."""
  features: int
  axes: tuple[str, str]
  init_scale: float = 1.0

  @nn.compact
  def __call__(self, in_features: int) -> Array:
    init = nn.initializers.variance_scaling(self.init_scale, "fan_in", "normal")
    return _param(self, "kernel", init, (in_features, self.features), self.axes)


@functools.lru_cache(maxsize=64)
def relative_position_buckets(query_length: int, key_length: int, bidirectional: bool,
                              num_buckets: int, max_distance: int) -> np.ndarray:
  """T5's bucket of every relative position `key - query`, as a (query_length + key_length - 1,)
  table indexed by `key - query + query_length - 1`.

  Half the buckets hold exact small distances, the rest grow logarithmically up to `max_distance`.
  Bidirectional (encoder): separate buckets for keys after the query. Causal (decoder): only keys at
  or before the query get distinct buckets. Computed in float32 as Mesh TensorFlow and Hugging Face do.
  """
  relative = np.arange(-(query_length - 1), key_length, dtype=np.int64)
  bucket = np.zeros_like(relative)
  if bidirectional:
    num_buckets //= 2
    bucket += (relative > 0).astype(np.int64) * num_buckets
    n = np.abs(relative)
  else:
    n = -np.minimum(relative, 0)
  max_exact = num_buckets // 2
  is_small = n < max_exact
  with np.errstate(divide="ignore"):
    scaled = (np.log(n.astype(np.float32) / np.float32(max_exact))
              / np.float32(np.log(max_distance / max_exact))
              * np.float32(num_buckets - max_exact))
  large = max_exact + np.where(is_small, 0, scaled).astype(np.int64)
  large = np.minimum(large, num_buckets - 1)
  return bucket + np.where(is_small, n, large)


class RelativePositionBias(nn.Module):
  """Learned scalar bias per (head, relative-position bucket), shared by all layers of a stack."""
  num_buckets: int
  max_distance: int
  num_heads: int
  bidirectional: bool
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, query_positions: Optional[Array], key_positions: Optional[Array],
               query_length: int, key_length: int) -> Array:
    """Returns the bias (1 or B, H, T_q, T_k). Positions (B, T) are given only for packed rows."""
    rel_embedding = _param(self, "rel_embedding",
                           nn.initializers.variance_scaling(1.0, "fan_avg", "uniform"),
                           (self.num_heads, self.num_buckets), ("heads", "relpos_buckets"))
    table = jnp.asarray(relative_position_buckets(
        query_length, key_length, self.bidirectional, self.num_buckets, self.max_distance))
    if query_positions is None:
      relative = np.arange(key_length)[None, :] - np.arange(query_length)[:, None]  # (T_q, T_k)
      buckets = table[relative + query_length - 1][None]  # (1, T_q, T_k)
    else:
      relative = key_positions[:, None, :] - query_positions[:, :, None]  # (B, T_q, T_k)
      buckets = table[jnp.clip(relative + query_length - 1, 0, table.shape[0] - 1)]
    # the (H, buckets) table is widened, not the (H, B, T_q, T_k) bias gathered from it
    bias = jnp.take(rel_embedding.astype(self.dtype), buckets, axis=1)  # (H, 1|B, T_q, T_k)
    return jnp.moveaxis(bias, 0, 1)


class Attention(nn.Module):
  """Multi-head dot-product attention without the 1/sqrt(d_kv) scaling (folded into the init).

  With `fold` and one query position (monoT5's single decoder step over the encoder's outputs),
  keys and values are never projected: per head h, the logits q_h·(H W_k,h)ᵀ are (q_h W_k,hᵀ)·Hᵀ
  and the output softmax·(H W_v,h) is (softmax·H)·W_v,h, the same numbers (to float rounding) for
  about 1/d_kv of the projections' work over T_k positions.
  """
  config: T5Config
  dtype: jnp.dtype
  fold: bool = False

  @nn.compact
  def __call__(self, inputs_q: Array, inputs_kv: Array, bias: Array, deterministic: bool) -> Array:
    cfg = self.config
    inner = cfg.num_heads * cfg.d_kv
    dense = functools.partial(Dense, inner, ("embed", "joined_kv"), self.dtype)
    query = dense(name="query", init_scale=1.0 / cfg.d_kv)(inputs_q)  # (B, T_q, H*K)
    split = lambda x: x.reshape(x.shape[:-1] + (cfg.num_heads, cfg.d_kv))  # (B, T, H, K)
    if self.fold and inputs_q.shape[1] == 1:
      return self._folded(split(query[:, 0]), inputs_kv, bias, deterministic)
    key = dense(name="key")(inputs_kv)  # (B, T_k, H*K)
    value = dense(name="value")(inputs_kv)
    # the products read the projections as they are laid out, (B, T, H, K), and XLA lays out
    # their operands itself, in bfloat16 when they are; transposed here first (jnp.swapaxes),
    # XLA:CPU (jaxlib 0.10.2) copies them in float32 and runs both products in float32
    query, key, value = (split(x) for x in (query, key, value))
    logits = matmul("bqhk,bthk->bhqt", query, key, self.dtype) + bias  # (B, H, T_q, T_k)
    out = attend("bhqt,bthk->bhqk", logits, value, self.dtype,
                 self._dropout(deterministic))  # (B, H, T_q, K)
    out = jnp.swapaxes(out, 1, 2).reshape(inputs_q.shape[:-1] + (inner,))
    return Dense(cfg.d_model, ("joined_kv", "embed"), self.dtype, name="out")(out)

  def _dropout(self, deterministic: bool) -> Optional[nn.Module]:
    """The attention weights' dropout, or None where there is none."""
    if deterministic or self.config.dropout_rate == 0:
      return None
    return nn.Dropout(self.config.dropout_rate)

  def _folded(self, query: Array, inputs_kv: Array, bias: Array, deterministic: bool) -> Array:
    """The one query position's attention over `inputs_kv` (B, T_k, D) with the key and value
    projections folded into the query and the output (class docstring). `query` is (B, H, K)."""
    cfg = self.config
    inner, d_model = cfg.num_heads * cfg.d_kv, inputs_kv.shape[-1]
    heads = (d_model, cfg.num_heads, cfg.d_kv)
    w_key = Kernel(inner, ("embed", "joined_kv"), name="key")(d_model).reshape(heads)
    w_value = Kernel(inner, ("embed", "joined_kv"), name="value")(d_model).reshape(heads)
    query_keys = matmul("bhk,dhk->bhd", query, w_key, self.dtype)  # (B, H, D)
    logits = matmul("bhd,btd->bht", query_keys, inputs_kv, self.dtype) + bias[:, :, 0]  # (B, H, T_k)
    context = attend("bht,btd->bhd", logits, inputs_kv, self.dtype,
                     self._dropout(deterministic))  # (B, H, D)
    out = matmul("bhd,dhk->bhk", context, w_value, self.dtype).reshape(-1, 1, inner)
    return Dense(cfg.d_model, ("joined_kv", "embed"), self.dtype, name="out")(out)


class MlpBlock(nn.Module):
  """T5 feed-forward: relu(x wi) wo (v1.0), or (gelu(x wi_0) * x wi_1) wo (v1.1, mT5)."""
  config: T5Config
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, x: Array, deterministic: bool) -> Array:
    cfg = self.config
    dense_in = functools.partial(Dense, cfg.d_ff, ("embed", "mlp"), self.dtype)
    if cfg.feed_forward == "relu":
      h = jax.nn.relu(dense_in(name="wi")(x))  # (B, T, F)
    else:
      h = jax.nn.gelu(dense_in(name="wi_0")(x), approximate=True) * dense_in(name="wi_1")(x)
    h = nn.Dropout(cfg.dropout_rate)(h, deterministic=deterministic)
    return Dense(cfg.d_model, ("mlp", "embed"), self.dtype, name="wo")(h)


def _dropout(cfg: T5Config, x: Array, deterministic: bool) -> Array:
  return nn.Dropout(cfg.dropout_rate)(x, deterministic=deterministic)


class EncoderLayer(nn.Module):
  config: T5Config
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, x: Array, bias: Array, deterministic: bool) -> Array:
    cfg = self.config
    norm = functools.partial(RMSNorm, cfg.layer_norm_epsilon, self.dtype)
    h = norm(name="pre_attention_layer_norm")(x)
    h = Attention(cfg, self.dtype, name="attention")(h, h, bias, deterministic)
    x = x + _dropout(cfg, h, deterministic)
    h = norm(name="pre_mlp_layer_norm")(x)
    h = MlpBlock(cfg, self.dtype, name="mlp")(h, deterministic)
    return x + _dropout(cfg, h, deterministic)


class DecoderLayer(nn.Module):
  config: T5Config
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, y: Array, encoded: Array, self_bias: Array, cross_bias: Array,
               deterministic: bool) -> Array:
    cfg = self.config
    norm = functools.partial(RMSNorm, cfg.layer_norm_epsilon, self.dtype)
    h = norm(name="pre_self_attention_layer_norm")(y)
    h = Attention(cfg, self.dtype, name="self_attention")(h, h, self_bias, deterministic)
    y = y + _dropout(cfg, h, deterministic)
    h = norm(name="pre_cross_attention_layer_norm")(y)
    h = Attention(cfg, self.dtype, fold=True, name="encoder_decoder_attention")(
        h, encoded, cross_bias, deterministic)
    y = y + _dropout(cfg, h, deterministic)
    h = norm(name="pre_mlp_layer_norm")(y)
    h = MlpBlock(cfg, self.dtype, name="mlp")(h, deterministic)
    return y + _dropout(cfg, h, deterministic)


def attention_mask_bias(query_ok: Array, key_ok: Array, causal: bool = False,
                        query_segments: Optional[Array] = None,
                        key_segments: Optional[Array] = None) -> Array:
  """Additive bias (B, 1, T_q, T_k): 0 where a query may attend to a key, MASK_VALUE elsewhere.

  A key is visible when it is not padding, (if causal) not after the query, and (if packed) in the
  query's segment.
  """
  mask = query_ok[:, :, None] & key_ok[:, None, :]  # (B, T_q, T_k)
  if causal:
    mask = mask & (jnp.arange(key_ok.shape[1])[None, :] <= jnp.arange(query_ok.shape[1])[:, None])
  if query_segments is not None:
    mask = mask & (query_segments[:, :, None] == key_segments[:, None, :])
  return jnp.where(mask, 0.0, MASK_VALUE).astype(jnp.float32)[:, None]


class Encoder(nn.Module):
  """Embedding -> N x (self-attention, MLP) -> RMS norm. Token ids (B, L) -> (B, L, D)."""
  config: T5Config
  shared_embedding: nn.Module

  @nn.compact
  def __call__(self, tokens: Array, segment_ids: Optional[Array], positions: Optional[Array],
               deterministic: bool) -> Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    length = tokens.shape[1]
    ok = tokens > 0
    bias = attention_mask_bias(ok, ok, query_segments=segment_ids, key_segments=segment_ids)
    bias = bias + RelativePositionBias(
        cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance, cfg.num_heads,
        bidirectional=True, dtype=jnp.float32, name="relpos_bias")(positions, positions, length, length)
    x = self.shared_embedding(tokens.astype(jnp.int32)).astype(jnp.float32)  # (B, L, D)
    x = _dropout(cfg, x, deterministic)
    for i in range(cfg.num_encoder_layers):
      x = EncoderLayer(cfg, dtype, name=f"layers_{i}")(x, bias, deterministic)
    x = RMSNorm(cfg.layer_norm_epsilon, dtype, name="encoder_norm")(x)
    return _dropout(cfg, x, deterministic)


class Decoder(nn.Module):
  """Embedding -> N x (causal self-attention, cross-attention, MLP) -> RMS norm -> logits."""
  config: T5Config
  shared_embedding: nn.Module

  @nn.compact
  def __call__(self, encoded: Array, encoder_tokens: Array, decoder_input_tokens: Array,
               decoder_target_tokens: Optional[Array], encoder_segment_ids: Optional[Array],
               decoder_segment_ids: Optional[Array], decoder_positions: Optional[Array],
               vocab_ids: Optional[Array], deterministic: bool) -> Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    length = decoder_input_tokens.shape[1]
    query_ok = (jnp.ones(decoder_input_tokens.shape, bool) if decoder_target_tokens is None
                else decoder_target_tokens > 0)
    self_bias = attention_mask_bias(query_ok, query_ok, causal=True,
                                    query_segments=decoder_segment_ids,
                                    key_segments=decoder_segment_ids)
    self_bias = self_bias + RelativePositionBias(
        cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance, cfg.num_heads,
        bidirectional=False, dtype=jnp.float32, name="relpos_bias")(
            decoder_positions, decoder_positions, length, length)
    cross_bias = attention_mask_bias(query_ok, encoder_tokens > 0,
                                     query_segments=decoder_segment_ids,
                                     key_segments=encoder_segment_ids)
    y = self.shared_embedding(decoder_input_tokens.astype(jnp.int32)).astype(jnp.float32)
    y = _dropout(cfg, y, deterministic)  # (B, T, D)
    for i in range(cfg.num_decoder_layers):
      y = DecoderLayer(cfg, dtype, name=f"layers_{i}")(y, encoded, self_bias, cross_bias,
                                                        deterministic)
    y = RMSNorm(cfg.layer_norm_epsilon, jnp.float32, name="decoder_norm")(y)  # scaled in float32
    y = _dropout(cfg, y, deterministic)  # (B, T, D)
    if cfg.scale_decoder_outputs:
      y = y * (cfg.d_model ** -0.5)
    if cfg.tie_embeddings:
      table = self.shared_embedding.embedding  # (V, D)
      rows = table if vocab_ids is None else jnp.take(table, vocab_ids, axis=0)
      return matmul("btd,vd->btv", y, rows, dtype)
    return LogitsDense(cfg.vocab_size, dtype, name="logits_dense")(y, vocab_ids)


class LogitsDense(nn.Module):
  """Untied output projection (T5 v1.1, mT5): kernel (D, V); `vocab_ids` selects columns."""
  vocab_size: int
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, y: Array, vocab_ids: Optional[Array]) -> Array:
    kernel = _param(self, "kernel", nn.initializers.variance_scaling(1.0, "fan_in", "normal"),
                    (y.shape[-1], self.vocab_size), ("embed", "vocab"))
    if vocab_ids is not None:
      kernel = jnp.take(kernel, vocab_ids, axis=1)  # (D, n)
    return jnp.dot(y.astype(self.dtype), kernel.astype(self.dtype),
                   preferred_element_type=jnp.float32)


class T5(nn.Module):
  """T5 encoder-decoder. `encode` and `decode` are the two halves; `__call__` runs both (training).

  Token id 0 is padding, and the decoder starts from id 0. Segment ids and positions are given only
  for packed rows (several examples in one row); otherwise positions are 0..T-1 and padding is id 0.
  """
  config: T5Config

  def setup(self):
    cfg = self.config
    self.token_embedder = nn.Embed(
        cfg.vocab_size, cfg.d_model, dtype=jnp.dtype(cfg.dtype), param_dtype=jnp.float32,
        embedding_init=nn.with_logical_partitioning(nn.initializers.normal(1.0), ("vocab", "embed")))
    self.encoder = Encoder(cfg, self.token_embedder)
    self.decoder = Decoder(cfg, self.token_embedder)

  def encode(self, encoder_input_tokens: Array, encoder_segment_ids: Optional[Array] = None,
             encoder_positions: Optional[Array] = None, *, deterministic: bool = True) -> Array:
    """Token ids (B, L) -> encoder outputs (B, L, D)."""
    return self.encoder(encoder_input_tokens, encoder_segment_ids, encoder_positions, deterministic)

  def decode(self, encoded: Array, encoder_input_tokens: Array, decoder_input_tokens: Array,
             decoder_target_tokens: Optional[Array] = None,
             encoder_segment_ids: Optional[Array] = None,
             decoder_segment_ids: Optional[Array] = None,
             decoder_positions: Optional[Array] = None, *,
             vocab_ids: Optional[Array] = None, deterministic: bool = True) -> Array:
    """Decoder logits (B, T, V) in float32, or (B, T, len(vocab_ids)) for just the rows `vocab_ids`.

    `decoder_input_tokens` (B, T) are the targets shifted right with start id 0. Queries are valid
    where `decoder_target_tokens > 0` (all positions when it is not given).
    """
    return self.decoder(encoded, encoder_input_tokens, decoder_input_tokens, decoder_target_tokens,
                        encoder_segment_ids, decoder_segment_ids, decoder_positions, vocab_ids,
                        deterministic)

  def __call__(self, encoder_input_tokens: Array, decoder_input_tokens: Array,
               decoder_target_tokens: Optional[Array] = None,
               encoder_segment_ids: Optional[Array] = None,
               decoder_segment_ids: Optional[Array] = None,
               encoder_positions: Optional[Array] = None,
               decoder_positions: Optional[Array] = None, *,
               deterministic: bool = True) -> Array:
    """Full forward pass (teacher forcing): logits (B, T, V) in float32."""
    encoded = self.encode(encoder_input_tokens, encoder_segment_ids, encoder_positions,
                          deterministic=deterministic)
    return self.decode(encoded, encoder_input_tokens, decoder_input_tokens, decoder_target_tokens,
                       encoder_segment_ids, decoder_segment_ids, decoder_positions,
                       deterministic=deterministic)


def _boxed_params(config: T5Config, rng: Array, encoder_length: int = 8, decoder_length: int = 2):
  """`config`'s parameters as flax initializes them: boxed with their logical axis names."""
  return T5(config).init(rng, jnp.ones((1, encoder_length), jnp.int32),
                         jnp.ones((1, decoder_length), jnp.int32))["params"]


def init_params(config: T5Config, rng: Array, encoder_length: int = 8, decoder_length: int = 2):
  """Fresh parameters for `config` as boxed (logically partitioned) pytrees' plain values."""
  return nn.unbox(_boxed_params(config, rng, encoder_length, decoder_length))


def term_matching_init(params, config: T5Config, rng: Array, *, num_heads: int,
                       scale: float = 1.0, self_bias: float = -10.0):
  """Random `params` with the first `num_heads` heads of encoder layer 0 set up to match terms.

  Those heads get query and key projections from the same random orthonormal basis
  (`query = scale * key`), so the attention logit between two positions is `scale` times the dot
  product of their (normalized) embeddings projected onto the head's subspace: about `scale * d_kv`
  for two copies of the same token, near zero on average for different tokens. Their relative-position
  bias for distance 0 is set to `self_bias`, so a token attends to its other copies (in the query:
  to the document's) rather than to itself. Everything stays trainable; only the starting point
  changes. A from-scratch monoT5 needs this: with uniform attention at init, the signal that would
  teach "this query word occurs in the document" is spread over the whole input and training stays
  at chance even on pairs whose query words were copied from the positive (docs/training.md).
  """
  if not 0 < num_heads <= config.num_heads:
    raise ValueError(f"num_heads must be in 1..{config.num_heads}, got {num_heads}")
  width = num_heads * config.d_kv
  if width > config.d_model:
    raise ValueError(f"{num_heads} heads x d_kv {config.d_kv} = {width} exceeds d_model "
                     f"{config.d_model}: their projections cannot be orthonormal")
  basis = jnp.linalg.qr(jax.random.normal(rng, (config.d_model, config.d_model), jnp.float32))[0]
  basis = basis[:, :width]
  encoder = dict(params["encoder"])
  layer = dict(encoder["layers_0"])
  attention = dict(layer["attention"])
  attention["query"] = {"kernel": attention["query"]["kernel"].at[:, :width].set(scale * basis)}
  attention["key"] = {"kernel": attention["key"]["kernel"].at[:, :width].set(basis)}
  layer["attention"] = attention
  encoder["layers_0"] = layer
  self_bucket = int(relative_position_buckets(1, 1, True, config.relative_attention_num_buckets,
                                              config.relative_attention_max_distance)[0])
  bias = encoder["relpos_bias"]["rel_embedding"]
  encoder["relpos_bias"] = {"rel_embedding": bias.at[:num_heads, self_bucket].set(self_bias)}
  return {**params, "encoder": encoder}


@functools.lru_cache(maxsize=16)
def abstract_params(config: T5Config):
  """Every parameter's shape, dtype and logical axes, as boxed `jax.ShapeDtypeStruct`s, from one
  abstract `init` per config (a trace of the whole network, a few tenths of a second for T5-small):
  `param_axes` and `t5rank.models.t5_weights.layout.param_shapes` both read it, so that loading and
  placing a checkpoint traces the network's init once. Shared: do not modify it."""
  return jax.eval_shape(lambda: _boxed_params(config, jax.random.PRNGKey(0)))


def param_axes(config: T5Config):
  """The logical axis names of every parameter, as a pytree of `jax.sharding.PartitionSpec`."""
  return nn.get_partition_spec(abstract_params(config))
