"""monoT5's one decoder step with its cross-attention folded (`t5rank.models.network.Attention`):
the same scores as the projected keys and values, for the FLOPs `t5rank.benchmarking.monot5_flops`
counts, which XLA's own count of the compiled step confirms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.benchmarking import monot5_flops
from t5rank.models import monot5
from t5rank.models.config import get_config
from t5rank.models.network import T5, init_params
from t5rank.testing import micro_config, random_params

TARGETS = (1176, 6136)


def _unfolded_log_p(params, tokens, config):
  """log P(true) with the decoder run over two positions: its cross-attention then projects keys
  and values at every encoder position (the fold applies to one position only), and the first
  position's logits are causal, so they are the one-step logits computed the long way."""
  def two_steps(module):
    encoded = module.encode(tokens)
    return module.decode(encoded, tokens, jnp.zeros((tokens.shape[0], 2), jnp.int32),
                         vocab_ids=jnp.asarray(TARGETS))

  logits = T5(config).apply({"params": params}, method=two_steps)[:, 0]
  return jax.nn.log_softmax(logits, axis=-1)[:, 0]


@pytest.mark.parametrize("sizes", [{}, dict(d_model=48, d_ff=96, num_heads=4, d_kv=12,
                                            num_encoder_layers=2, num_decoder_layers=2,
                                            feed_forward="gated-gelu")])
def test_folded_cross_attention_scores_as_projected_keys_and_values(sizes):
  config = micro_config(**sizes)
  params = random_params(config)
  tokens = jnp.asarray(np.random.default_rng(0).integers(2, 500, (4, 24)), jnp.int32)
  tokens = tokens.at[1, 15:].set(0).at[3, 5:].set(0)  # padding masked in the folded logits too
  folded, _ = monot5.monot5_score(params, tokens, config=config, target_ids=TARGETS)
  np.testing.assert_allclose(np.asarray(folded), np.asarray(_unfolded_log_p(params, tokens, config)),
                             atol=1e-5)


def test_monot5_flops_by_hand():
  """A 1+1-layer model of d_model 4, 1 head of 2, d_ff 8, relu, 3 tokens, worked out by hand:
  encoder 3·(4·4·2 + 2·4·8) + 2·3·3·2 = 324 multiply-adds; decoder self-attention 4·4·2 + 2·2 = 36,
  cross q and out 2·4·2 = 16, folded keys 1·2·4 + logits and context 2·1·4·3 + values 1·4·2 = 40,
  MLP 2·4·8 = 64: 156; two vocabulary rows 8; in all 2 · 488 = 976."""
  config = get_config("tiny", d_model=4, num_heads=1, d_kv=2, d_ff=8, num_encoder_layers=1,
                      num_decoder_layers=1, feed_forward="relu")
  assert monot5_flops(config, 3) == 976
  # unfolded: keys and values projected at 3 positions (2·3·4·2 = 48) and attended (2·3·2 = 12)
  assert monot5_flops(config, 3, folded=False) == 976 + 2 * (48 + 12 - 40)


def test_xla_counts_the_flops_counted_and_the_fold_saves_them():
  """XLA's cost analysis of the compiled T5-small step (8 pairs of 256 tokens, shapes only: no
  weights are made) is within 3% of `monot5_flops`, whose remainder is the norms, softmax and
  activations; the unfolded count is 1.6 GFLOP (15%) more per pair."""
  config = get_config("t5_small")
  params = jax.eval_shape(lambda: init_params(config, jax.random.PRNGKey(0)))
  tokens = jax.ShapeDtypeStruct((8, 256), jnp.int32)
  step = jax.jit(lambda p, t: monot5.monot5_score(p, t, config=config, target_ids=TARGETS))
  xla = step.lower(params, tokens).compile().cost_analysis()["flops"] / 8
  counted = monot5_flops(config, 256)
  assert counted <= xla <= 1.03 * counted, (xla, counted)
  saved = monot5_flops(config, 256, folded=False) - counted
  assert 1.5e9 < saved < 1.7e9 and 0.14 < saved / counted < 0.16
