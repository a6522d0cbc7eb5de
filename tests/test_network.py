"""The T5 network: sizes, relative-position buckets, masking, packing, dtype, logical axes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models.config import CONFIGS, T5Config, get_config
from t5rank.models.network import T5, init_params, param_axes, relative_position_buckets, term_matching_init

# A small vocabulary keeps the tiny tests fast; the ids used below stay under it.
TINY = get_config("tiny", vocab_size=512, dropout_rate=0.0)
TINY_V11 = TINY.replace(feed_forward="gated-gelu", tie_embeddings=False)


@pytest.mark.parametrize("name,expected", [
    # model.num_parameters() of the released Hugging Face checkpoints of the same sizes.
    ("t5_small", 60_506_624), ("t5_base", 222_903_552), ("t5_large", 737_668_096),
    ("t5_3B", 2_851_598_336), ("t5_11B", 11_307_321_344), ("t5_1_1_base", 247_577_856),
    ("mt5_small", 300_176_768), ("mt5_base", 582_401_280),
])
def test_published_sizes(name, expected):
  assert CONFIGS[name].num_parameters == expected


def test_parameter_count_matches_tree():
  for config in (TINY, TINY_V11):
    params = init_params(config, jax.random.PRNGKey(0))
    assert sum(x.size for x in jax.tree_util.tree_leaves(params)) == config.num_parameters


def test_config_json_round_trip():
  config = get_config("t5_1_1_xl", dtype="bfloat16")
  assert T5Config.from_json(config.to_json()) == config
  with pytest.raises(ValueError, match="unknown T5Config fields"):
    T5Config.from_json('{"d_model": 8, "n_layers": 2}')


@pytest.mark.parametrize("fields, message", [
    # #58: a config.json with "d_model": "sixty-four" loaded, and jax failed later in a traceback
    ({"d_model": "sixty-four"}, "T5Config.d_model must be an integer, got 'sixty-four'"),
    ({"d_model": 64.0}, "T5Config.d_model must be an integer, got 64.0"),
    ({"num_heads": True}, "T5Config.num_heads must be an integer, got True"),
    ({"dropout_rate": "0.1"}, "T5Config.dropout_rate must be a number, got '0.1'"),
    ({"tie_embeddings": 1}, "T5Config.tie_embeddings must be true or false, got 1"),
    ({"scale_decoder_outputs": "yes"},
     "T5Config.scale_decoder_outputs must be true or false or null, got 'yes'"),
    ({"d_model": 0}, "T5Config.d_model must be positive, got 0"),
    ({"num_decoder_layers": -1}, "T5Config's num_encoder_layers and num_decoder_layers must be >= 0"),
])
def test_config_json_with_a_value_of_the_wrong_type_is_one_value_error(fields, message):
  import json

  text = json.dumps({**json.loads(TINY.to_json()), **fields})
  with pytest.raises(ValueError, match=f"^{message}"):
    T5Config.from_json(text)
  with pytest.raises(ValueError, match="^a T5Config is a JSON object, not list$"):
    T5Config.from_json("[64]")
  # a nested config is checked too; null stays allowed where the field is Optional
  from t5rank.models.classifier import ClassifierConfig

  nested = json.loads(ClassifierConfig(t5=TINY).to_json())
  nested["t5"].update(fields)
  with pytest.raises(ValueError, match=f"^{message}"):
    ClassifierConfig.from_json(json.dumps(nested))
  fine = json.dumps({**json.loads(TINY.to_json()), "scale_decoder_outputs": None})
  assert T5Config.from_json(fine) == TINY


def test_bucket_values_by_hand():
  # Bidirectional, 32 buckets: 16 per direction, 8 exact; key after query adds 16.
  table = relative_position_buckets(200, 200, True, 32, 128)
  bucket = lambda rel: int(table[rel + 199])
  assert [bucket(r) for r in (0, -1, -7, 1, 7)] == [0, 1, 7, 17, 23]
  # log region: 8 + floor(log(n/8) / log(128/8) * 8); n=12 -> 8 + floor(1.169) = 9.
  assert bucket(-12) == 9 and bucket(12) == 25
  assert bucket(-127) == 15 and bucket(-150) == 15 and bucket(150) == 31
  # Causal: only keys at or before the query are told apart; 16 exact, then log up to 31.
  causal = relative_position_buckets(200, 200, False, 32, 128)
  assert int(causal[199 + 5]) == 0  # a key after the query
  assert [int(causal[199 - n]) for n in (0, 1, 15, 16, 127, 199)] == [0, 1, 15, 16, 31, 31]


def test_every_parameter_has_logical_axes():
  for config in (TINY, TINY_V11):
    axes = param_axes(config)
    params = init_params(config, jax.random.PRNGKey(0))
    flat_axes = jax.tree_util.tree_leaves(axes, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    assert len(flat_axes) == len(jax.tree_util.tree_leaves(params))
    names = {name for spec in flat_axes for name in spec}
    assert names <= {"vocab", "embed", "joined_kv", "mlp", "heads", "relpos_buckets"}
    assert axes["token_embedder"]["embedding"] == jax.sharding.PartitionSpec("vocab", "embed")


def _logits(config, params, enc, dec, **kw):
  return T5(config).apply({"params": params}, jnp.asarray(enc), jnp.asarray(dec), **kw)


@pytest.mark.parametrize("config", [TINY, TINY_V11], ids=["v1.0", "v1.1"])
def test_padding_does_not_change_outputs(config):
  params = init_params(config, jax.random.PRNGKey(1))
  enc = np.array([[5, 9, 33, 7, 1]])
  dec = np.array([[0, 44]])
  padded = np.concatenate([enc, np.zeros((1, 6), int)], axis=1)
  np.testing.assert_allclose(_logits(config, params, enc, dec),
                             _logits(config, params, padded, dec), atol=1e-5)


@pytest.mark.parametrize("config", [TINY, TINY_V11], ids=["v1.0", "v1.1"])
def test_packed_row_equals_separate_rows(config):
  params = init_params(config, jax.random.PRNGKey(2))
  a_enc, a_tgt = [5, 9, 33, 1], [44, 1]
  b_enc, b_tgt = [17, 8, 1], [61, 1]
  separate_a = _logits(config, params, [a_enc], [[0, 44]])
  separate_b = _logits(config, params, [b_enc], [[0, 61]])
  packed = _logits(
      config, params, [a_enc + b_enc + [0]], [[0, 44, 0, 61]],
      decoder_target_tokens=jnp.asarray([a_tgt + b_tgt]),
      encoder_segment_ids=jnp.asarray([[1, 1, 1, 1, 2, 2, 2, 0]]),
      decoder_segment_ids=jnp.asarray([[1, 1, 2, 2]]),
      encoder_positions=jnp.asarray([[0, 1, 2, 3, 0, 1, 2, 0]]),
      decoder_positions=jnp.asarray([[0, 1, 0, 1]]))
  np.testing.assert_allclose(packed[0, :2], separate_a[0], atol=1e-5)
  np.testing.assert_allclose(packed[0, 2:], separate_b[0], atol=1e-5)


def test_a_parameter_of_the_wrong_shape_is_named():
  # applying checks each given parameter's shape against the config's (network._param)
  import flax
  params = init_params(TINY, jax.random.PRNGKey(3))
  kernel = params["encoder"]["layers_0"]["mlp"]["wi"]["kernel"]
  params["encoder"]["layers_0"]["mlp"]["wi"]["kernel"] = kernel[:, :-1]
  with pytest.raises(flax.errors.ScopeParamShapeError, match=r"wi.*kernel|kernel.*wi") as error:
    _logits(TINY, params, [[5, 9, 1]], [[0]])
  assert str((TINY.d_model, TINY.d_ff - 1)) in str(error.value)
  assert str((TINY.d_model, TINY.d_ff)) in str(error.value)


def test_decoder_is_causal():
  params = init_params(TINY, jax.random.PRNGKey(3))
  enc = [[5, 9, 33, 1]]
  first = _logits(TINY, params, enc, [[0, 44, 45]])
  changed_later = _logits(TINY, params, enc, [[0, 44, 99]])
  np.testing.assert_allclose(first[0, :2], changed_later[0, :2], atol=1e-6)
  assert not np.allclose(first[0, 2], changed_later[0, 2])


def test_dropout_only_when_not_deterministic():
  config = TINY.replace(dropout_rate=0.5)
  params = init_params(config, jax.random.PRNGKey(4))
  enc, dec = jnp.asarray([[5, 9, 33, 1]]), jnp.asarray([[0, 44]])
  model = T5(config)
  eval_a = model.apply({"params": params}, enc, dec)
  eval_b = model.apply({"params": params}, enc, dec)
  np.testing.assert_array_equal(eval_a, eval_b)
  train = model.apply({"params": params}, enc, dec, deterministic=False,
                      rngs={"dropout": jax.random.PRNGKey(0)})
  assert not np.allclose(train, eval_a)


def test_bfloat16_activations_close_to_float32():
  params = init_params(TINY, jax.random.PRNGKey(5))
  enc, dec = [[5, 9, 33, 7, 1]], [[0, 44]]
  full = _logits(TINY, params, enc, dec)
  half = _logits(TINY.replace(dtype="bfloat16"), params, enc, dec)
  assert jax.tree_util.tree_leaves(params)[0].dtype == jnp.float32
  np.testing.assert_allclose(half, full, atol=0.1 * float(jnp.abs(full).max()))


def _first_layer_attention(params, config, tokens):
  """Encoder layer 0's attention weights (H, L, L) for one unpadded row, computed by hand from the
  parameters: RMS-normalized embeddings, per-head query.key, plus the relative-position bias."""
  x = params["token_embedder"]["embedding"][jnp.asarray(tokens)]
  x = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + config.layer_norm_epsilon)
  x = x * params["encoder"]["layers_0"]["pre_attention_layer_norm"]["scale"]
  attention = params["encoder"]["layers_0"]["attention"]
  split = lambda y: y.reshape(len(tokens), config.num_heads, config.d_kv)
  q, k = split(x @ attention["query"]["kernel"]), split(x @ attention["key"]["kernel"])
  length = len(tokens)
  table = relative_position_buckets(length, length, True, config.relative_attention_num_buckets,
                                    config.relative_attention_max_distance)
  relative = np.arange(length)[None, :] - np.arange(length)[:, None]
  bias = params["encoder"]["relpos_bias"]["rel_embedding"][:, table[relative + length - 1]]
  return jax.nn.softmax(jnp.einsum("qhk,thk->hqt", q, k) + bias, axis=-1)


def test_term_matching_init_sets_only_the_matching_heads():
  config = get_config("tiny")
  params = init_params(config, jax.random.PRNGKey(0))
  matched = term_matching_init(params, config, jax.random.PRNGKey(1), num_heads=2, scale=0.5)
  width = 2 * config.d_kv
  attention = matched["encoder"]["layers_0"]["attention"]
  key = np.asarray(attention["key"]["kernel"][:, :width])
  np.testing.assert_allclose(key.T @ key, np.eye(width), atol=1e-5)  # orthonormal columns
  np.testing.assert_allclose(attention["query"]["kernel"][:, :width], 0.5 * key, atol=1e-7)
  bias = np.asarray(matched["encoder"]["relpos_bias"]["rel_embedding"])
  np.testing.assert_array_equal(bias[:2, 0], [-10.0, -10.0])
  original = np.asarray(params["encoder"]["relpos_bias"]["rel_embedding"])
  np.testing.assert_array_equal(bias[2:], original[2:])
  np.testing.assert_array_equal(bias[:2, 1:], original[:2, 1:])
  old = params["encoder"]["layers_0"]["attention"]
  np.testing.assert_array_equal(attention["query"]["kernel"][:, width:], old["query"]["kernel"][:, width:])
  np.testing.assert_array_equal(attention["value"]["kernel"], old["value"]["kernel"])
  np.testing.assert_array_equal(matched["encoder"]["layers_1"]["attention"]["key"]["kernel"],
                                params["encoder"]["layers_1"]["attention"]["key"]["kernel"])
  with pytest.raises(ValueError, match="num_heads"):
    term_matching_init(params, config, jax.random.PRNGKey(1), num_heads=config.num_heads + 1)


def test_term_matching_heads_attend_to_the_other_copy():
  """A query word that also occurs in the document: the matching heads put almost all of that
  word's attention on its copy; T5's plain init spreads it evenly."""
  config = get_config("tiny")
  params = init_params(config, jax.random.PRNGKey(0))
  matched = term_matching_init(params, config, jax.random.PRNGKey(1), num_heads=2)
  tokens = [3155, 10, 1712, 4039, 11167, 10, 8, 4039, 21, 4842, 5, 31, 1]  # 4039 at 3 and 7
  plain = _first_layer_attention(params, config, tokens)
  weights = _first_layer_attention(matched, config, tokens)
  for head in range(2):
    assert weights[head, 3, 7] > 0.9 and weights[head, 7, 3] > 0.9
    assert weights[head, 3, 3] < 0.01  # not to itself
  assert plain[:, 3, 7].max() < 0.3  # about 1/13 each
  np.testing.assert_allclose(weights[2:], plain[2:], atol=1e-6)  # the other heads are unchanged


def test_attend_is_softmax_then_the_weighted_sum():
  """`attend` divides by the weights' sum after the product; the numbers are softmax's. By hand:
  logits (0, ln 3) weigh the values 4 and 8 by 1/4 and 3/4, 7."""
  import flax.linen as nn
  from t5rank.models.network import attend, matmul

  by_hand = attend("bhqt,bthk->bhqk", jnp.log(jnp.array([1.0, 3.0])).reshape(1, 1, 1, 2),
                   jnp.array([4.0, 8.0]).reshape(1, 2, 1, 1), jnp.float32)
  np.testing.assert_allclose(np.asarray(by_hand).ravel(), [7.0], rtol=1e-6)

  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(2, 3, 4, 5)) * 3, jnp.float32)  # (B, H, T_q, T_k)
  values = jnp.asarray(rng.normal(size=(2, 5, 3, 6)), jnp.float32)  # (B, T_k, H, K)
  logits = logits.at[1, :, :, 3:].set(-1e10)  # masked keys
  reference = lambda l, v: matmul("bhqt,bthk->bhqk", jax.nn.softmax(l, axis=-1), v, jnp.float32)
  late = lambda l, v: attend("bhqt,bthk->bhqk", l, v, jnp.float32)
  np.testing.assert_allclose(late(logits, values), reference(logits, values), atol=1e-6)
  loss = lambda f: lambda l, v: jnp.sum(jnp.sin(f(l, v)))
  for a, b in zip(jax.grad(loss(late), (0, 1))(logits, values),
                  jax.grad(loss(reference), (0, 1))(logits, values)):
    np.testing.assert_allclose(a, b, atol=1e-5)

  class Both(nn.Module):  # the same dropout mask (one module, one rng) before or after dividing
    @nn.compact
    def __call__(self, l, v, divide_late: bool):
      drop = nn.Dropout(0.5)
      if divide_late:
        return attend("bhqt,bthk->bhqk", l, v, jnp.float32, drop)
      return matmul("bhqt,bthk->bhqk", drop(jax.nn.softmax(l, axis=-1), deterministic=False), v,
                    jnp.float32)
  rngs = {"dropout": jax.random.PRNGKey(1)}
  dropped = Both().apply({}, logits, values, True, rngs=rngs)
  np.testing.assert_allclose(dropped, Both().apply({}, logits, values, False, rngs=rngs), atol=1e-6)
  assert not np.allclose(dropped, reference(logits, values), atol=1e-3)

  with pytest.raises(ValueError, match="does not keep the logits' rows"):
    attend("bhqt,bthk->bqhk", logits, values, jnp.float32)
