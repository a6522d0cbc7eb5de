"""The monoT5 score, defined once: log P(positive word) from the encoder and ONE decoder step.

    encoder(ids) -> decoder([0]) -> logits of the two target words only -> log-softmax over the two

Training-time evaluation, the `t5rank score` command and the benchmarks all call `monot5_score`.
Only the two rows of the output projection are computed, which gives the same numbers as slicing
the full-vocabulary logits (tests/test_score.py checks it to 1e-6).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from t5rank.config import T5Config
from t5rank.network import T5


def monot5_score(params, encoder_input_tokens: jax.Array, *, config: T5Config,
                 target_ids: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
  """(log P(positive), P(positive)), each (B,), for padded encoder ids (B, L) (0 = padding).

  `target_ids` is (positive id, negative id); P is the softmax over those two logits only. A pure,
  jittable function of `params` and the ids.
  """
  model = T5(config)
  tokens = jnp.asarray(encoder_input_tokens)
  decoder_input = jnp.zeros((tokens.shape[0], 1), jnp.int32)  # the start id 0

  def two_logits(module: T5):
    encoded = module.encode(tokens)
    return module.decode(encoded, tokens, decoder_input, vocab_ids=jnp.asarray(target_ids))

  logits = model.apply({"params": params}, method=two_logits)[:, 0, :]  # (B, 2)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return log_probs[:, 0], jnp.exp(log_probs[:, 0])


@functools.partial(jax.jit, static_argnames=("config", "target_ids"))
def score_step(params, encoder_input_tokens: jax.Array, *, config: T5Config,
               target_ids: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
  """`monot5_score` compiled; one compilation per (config, targets, input shape)."""
  return monot5_score(params, encoder_input_tokens, config=config, target_ids=target_ids)
