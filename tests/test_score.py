"""The monoT5 score: two rows of the output projection equal the full-vocabulary computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models.config import get_config
from t5rank.models.inputs import encode_pairs
from t5rank.models.network import T5, init_params
from t5rank.models.monot5 import monot5_score, score_step
from t5rank.models.vocab import load_vocabulary, resolve_target_words

TINY = get_config("tiny", dropout_rate=0.0)
CONFIGS = {"v1.0": TINY, "v1.1": TINY.replace(feed_forward="gated-gelu", tie_embeddings=False)}
PAIRS = [("what is term life insurance?", "Term life insurance covers you for a fixed period."),
         ("does homeowners insurance cover floods?", "No. Flood damage needs a separate policy " * 8),
         ("is whole life a good investment?", "")]


def _batch(ids):
  batch = np.zeros((len(ids), max(map(len, ids))), np.int32)
  for row, seq in enumerate(ids):
    batch[row, :len(seq)] = seq
  return batch


def reference_score(config, params, tokens, target_ids):
  """The definition by the letter: full-vocabulary logits of decoder step 0, then the two entries."""
  logits = T5(config).apply({"params": params}, jnp.asarray(tokens),
                            jnp.zeros((tokens.shape[0], 1), jnp.int32))[:, 0, :]  # (B, V)
  two = logits[:, list(target_ids)]
  return jax.nn.log_softmax(two, axis=-1)[:, 0]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_two_row_score_equals_full_logits(name):
  config = CONFIGS[name]
  vocab = load_vocabulary()
  params = init_params(config, jax.random.PRNGKey(0))
  tokens = _batch(encode_pairs(vocab, *zip(*PAIRS)))
  for variant in ("true_false", "false_true", "hot_cold", "ab_de"):
    target_ids = resolve_target_words(vocab, variant)
    log_p, p = monot5_score(params, tokens, config=config, target_ids=target_ids)
    expected = reference_score(config, params, tokens, target_ids)
    np.testing.assert_allclose(log_p, expected, atol=1e-6)
    np.testing.assert_allclose(p, np.exp(expected), atol=1e-6)


def test_reverse_targets_are_complementary():
  vocab = load_vocabulary()
  params = init_params(TINY, jax.random.PRNGKey(1))
  tokens = _batch(encode_pairs(vocab, *zip(*PAIRS)))
  _, p_true = score_step(params, tokens, config=TINY, target_ids=resolve_target_words(vocab, "true_false"))
  _, p_false = score_step(params, tokens, config=TINY, target_ids=resolve_target_words(vocab, "false_true"))
  np.testing.assert_allclose(np.asarray(p_true) + np.asarray(p_false), 1.0, atol=1e-6)


def test_score_independent_of_batch_and_padding():
  vocab = load_vocabulary()
  params = init_params(TINY, jax.random.PRNGKey(2))
  ids = encode_pairs(vocab, *zip(*PAIRS))
  target_ids = (1176, 6136)
  together, _ = score_step(params, _batch(ids), config=TINY, target_ids=target_ids)
  for row, seq in enumerate(ids):
    alone, _ = score_step(params, np.asarray([seq + [0] * 7], np.int32), config=TINY,
                          target_ids=target_ids)
    np.testing.assert_allclose(alone[0], together[row], atol=1e-6)
