"""The T5 dual encoder in bfloat16 is mixed precision as monoT5 is (`t5rank.models.network`), read
from the program JAX writes for its scoring step: every matrix product of its T5 encoder (q, k, v,
out and the MLP's two per layer, and the attention's two einsums) takes bfloat16 operands and
returns float32, the weight matrices are stored in bfloat16, and the mean, the cosine, α and β stay
float32. Its cosines stay within bfloat16's rounding of float32's."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import t5rank
from t5rank.models import dual_encoder
from t5rank.testing import micro_config, random_params

QUERIES = ["does life insurance cover smokers", "how much is car insurance", "what is an annuity"]
ANSWERS = ["life insurance for smokers costs more", "car insurance covers theft of the car",
           "an annuity pays an income for life"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  from t5rank.models.t5_weights import save_checkpoint
  from t5rank.training.dual import T5DualEncoder
  from t5rank.training.trainer import Init

  root = tmp_path_factory.mktemp("t5de")
  config = micro_config(num_encoder_layers=2)
  save_checkpoint(str(root / "t5"), random_params(config, std=0.2), config)
  de_config = dual_encoder.t5_dual_encoder_config(str(root / "t5"), max_query_length=16,
                                                  max_document_length=32)
  trainable = T5DualEncoder(de_config)
  trainable.export(str(root / "de"), jax.tree.map(np.asarray, trainable.init_params(
      jax.random.PRNGKey(0), Init(checkpoint=str(root / "t5")))), {"step": 0})
  return str(root / "de")


def test_every_product_of_the_scoring_step_is_bf16_operands_to_f32(checkpoint):
  ranker = t5rank.load(checkpoint, dtype="bfloat16")
  reranker, params = ranker.reranker, ranker.params
  assert "bfloat16 products" in reranker.describe()
  t5 = reranker.config.t5
  kernels = [x for path, x in jax.tree_util.tree_leaves_with_path(params["t5"])
             if getattr(path[-1], "key", "") == "kernel"]
  assert kernels and {str(x.dtype) for x in kernels} == {"bfloat16"}
  assert params["scale"].dtype == params["bias"].dtype == jnp.float32
  ids = np.zeros((4, 32), np.int32)
  ids[:, :5] = 7
  products = []
  for side in ("query", "document"):  # each side's encoder, as the scorer runs it
    stablehlo = dual_encoder.side_step.lower(params, ids, config=reranker.config,
                                             side=side).as_text()
    products += re.findall(r"stablehlo\.dot_general[^\n]*:\s*\((tensor<[^>]*>), "
                           r"(tensor<[^>]*>)\)\s*->\s*(tensor<[^>]*>)", stablehlo)
  # each side (query, document) through the encoder: q, k, v, out, the MLP's two and the two
  # attention einsums per layer
  assert len(products) == 2 * t5.num_encoder_layers * 8
  for lhs, rhs, out in products:
    assert lhs.endswith("xbf16>") and rhs.endswith("xbf16>") and out.endswith("xf32>"), (
        lhs, rhs, out)
  examples = reranker.encode(QUERIES, ANSWERS)
  (batch,) = reranker.batches(examples, batch_tokens=4096)
  state = reranker.shard_state(params, examples, mesh=ranker.mesh)
  cos, p = dual_encoder.cosine_step(state, *batch.arrays)
  assert cos.dtype == p.dtype == jnp.float32


def test_bfloat16_cosines_stay_close_to_float32s(checkpoint):
  full = t5rank.load(checkpoint)
  half = t5rank.load(checkpoint, dtype="bfloat16")
  assert "bfloat16" not in full.reranker.describe()
  assert full.reranker.fingerprint() != half.reranker.fingerprint()  # scores of each kept apart
  pairs = [(q, a) for q in QUERIES for a in ANSWERS]
  a, b = full.predict(pairs), half.predict(pairs)
  assert np.abs(a - b).max() < 0.02  # cosines, in [-1, 1]
  with pytest.raises(ValueError, match="dtype must be"):
    t5rank.load(checkpoint, dtype="float16")
