"""t5rank's T5 computes what Hugging Face transformers' PyTorch T5 computes, on the same weights.

The references in tests/golden/ were written by scripts/make_hf_goldens.py (torch, float32); this
test needs neither torch nor transformers.
"""

import os

import jax
import numpy as np
import pytest

from t5rank.checkpoints.hf import load_hf_checkpoint
from t5rank.models.network import T5, relative_position_buckets
from t5rank.models.monot5 import score_step

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")
TARGET_IDS = (1176, 6136)
ATOL = 1e-5


@pytest.fixture(scope="module", params=["v1_0", "v1_1"])
def golden(request):
  directory = os.path.join(GOLDEN_DIR, f"hf_{request.param}")
  config, params = load_hf_checkpoint(directory)
  return request.param, config, params, dict(np.load(os.path.join(directory, "reference.npz")))


def test_golden_checkpoints_are_the_intended_architectures(golden):
  name, config, _, reference = golden
  assert (config.feed_forward, config.tie_embeddings) == {
      "v1_0": ("relu", True), "v1_1": ("gated-gelu", False)}[name]
  lengths = reference["attention_mask"].sum(axis=1)
  assert lengths.max() > 128 and lengths.min() < lengths.max()  # far buckets, and padding


def test_full_logits_match_transformers(golden):
  _, config, params, reference = golden
  logits = jax.jit(T5(config).apply)({"params": params}, reference["input_ids"],
                                     reference["decoder_input_ids"])  # (B, T, V)
  assert logits.shape == reference["logits"].shape
  np.testing.assert_allclose(np.asarray(logits), reference["logits"], rtol=0, atol=ATOL)


def test_monot5_score_matches_transformers(golden):
  _, config, params, reference = golden
  log_p, p = score_step(params, reference["input_ids"], config=config, target_ids=TARGET_IDS)
  np.testing.assert_allclose(np.asarray(log_p), reference["log_p_true"], rtol=0, atol=ATOL)
  np.testing.assert_allclose(np.asarray(p), reference["p_true"], rtol=0, atol=ATOL)
  assert 0.05 < reference["p_true"].min() and reference["p_true"].max() < 0.95  # not saturated


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
