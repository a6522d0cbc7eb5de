"""t5rank's T5 computes what Hugging Face transformers' PyTorch T5 computes, on the same weights.

The references in tests/golden/ were written by scripts/make_hf_goldens.py (torch, float32): hf_* by
transformers 4.57.1, hf5_* by transformers 5.x as it saves T5 configs (hf5_goldens.json records the
version); this test needs neither torch nor transformers.
"""

import os

import jax
import numpy as np
import pytest

from t5rank.models.monot5 import score_step
from t5rank.models.network import T5, relative_position_buckets
from t5rank.models.t5_weights.hf import load_hf_checkpoint

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")
TARGET_IDS = (1176, 6136)
ATOL = 1e-5


# directory -> (feed-forward, head tied, decoder output scaled)
# transformers 5.x ties the head of every T5 it builds: its own "v1.1" is tied and unscaled, and an
# untied head comes only with an `lm_head.weight` in the file (scripts/make_hf_goldens.py).
GOLDENS = {"hf_v1_0": ("relu", True, True), "hf_v1_1": ("gated-gelu", False, False),
           "hf5_v1_0": ("relu", True, True), "hf5_v1_1": ("gated-gelu", True, False),
           "hf5_v1_1_untied": ("gated-gelu", False, False),
           # transformers 5.x's MT5: config.json says tie_word_embeddings true, never scaled
           "hf5_mt5": ("gated-gelu", True, False), "hf5_mt5_untied": ("gated-gelu", False, False)}


def test_both_generations_have_goldens():
  assert sorted(d for d in os.listdir(GOLDEN_DIR) if d.startswith("hf") and "." not in d) == \
      sorted([*GOLDENS, "hf_duot5", "hf_rankt5"])  # tests/test_duot5.py, test_rankt5_published.py


@pytest.fixture(scope="module", params=sorted(GOLDENS))
def golden(request):
  directory = os.path.join(GOLDEN_DIR, request.param)
  config, params = load_hf_checkpoint(directory)
  return request.param, config, params, dict(np.load(os.path.join(directory, "reference.npz")))


def test_golden_checkpoints_are_the_intended_architectures(golden):
  name, config, _, reference = golden
  assert (config.feed_forward, config.tie_embeddings, config.scale_decoder_outputs) == GOLDENS[name]
  lengths = reference["attention_mask"].sum(axis=1)
  assert lengths.max() > 128 and lengths.min() < lengths.max()  # far buckets, and padding


def test_full_logits_match_transformers(golden):
  _, config, params, reference = golden
  logits = jax.jit(T5(config).apply)({"params": params}, reference["input_ids"],
                                     reference["decoder_input_ids"])  # (B, T, V)
  assert logits.shape == reference["logits"].shape
  # float32 rounding grows with the logits: a tied head without the d_model**-0.5 scale (5.x's own
  # v1.1) gives logits ~6x larger, so the bound is 2e-6 of the largest logit (about 16 float32 ulps;
  # the two computations sum in different orders) when that is above ATOL.
  atol = max(ATOL, 2e-6 * float(np.abs(reference["logits"]).max()))
  np.testing.assert_allclose(np.asarray(logits), reference["logits"], rtol=0, atol=atol)


def test_monot5_score_matches_transformers(golden):
  _, config, params, reference = golden
  log_p, p = score_step(params, reference["input_ids"], config=config, target_ids=TARGET_IDS)
  np.testing.assert_allclose(np.asarray(log_p), reference["log_p_true"], rtol=0, atol=ATOL)
  np.testing.assert_allclose(np.asarray(p), reference["p_true"], rtol=0, atol=ATOL)
  # Not vacuous: the rows' scores differ and none is saturated at log P = 0 within 10 x ATOL (5.x's
  # tied, unscaled v1.1 and mT5 have logits ~6x larger: P(true) from 1e-4 to 0.9992, where log P
  # still tells the rows apart).
  assert np.ptp(reference["log_p_true"]) > 0.1 and reference["log_p_true"].max() < -10 * ATOL


def test_relative_position_buckets_match_transformers():
  tables = np.load(os.path.join(GOLDEN_DIR, "relative_position_buckets.npz"))
  relative = tables["relative_position"]  # -600..600
  span = int(relative.max())
  assert relative.min() == -span
  for key in tables.files:
    if key == "relative_position":
      continue
    kind, num_buckets, max_distance = key.split("_")
    ours = relative_position_buckets(span + 1, span + 1, kind == "bidirectional",
                                     int(num_buckets), int(max_distance))
    mismatch = np.flatnonzero(ours != tables[key])
    assert mismatch.size == 0, (f"{key}: relative positions {relative[mismatch][:10]} get buckets "
                                f"{ours[mismatch][:10]}, transformers {tables[key][mismatch][:10]}")
