"""TK in bfloat16 is mixed precision as T5 is (`t5rank.models.tk`'s docstring), read from the
programs JAX writes and compiles, so that a machine without bfloat16 instructions proves it too:
every matrix product (feed-forward, attention projections and weights, the match matrix) takes
bfloat16 operands and returns float32; only the two products with the kernel weights W₁, W₂ (a
vector of 11) stay float32, as the stream does; no weight matrix is converted at a call. The
shipped TK in bfloat16 ranks as in float32, to rounding."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import t5rank
from t5rank.models import tk
from t5rank.models.tk_reranker import cast_matrices
from t5rank.testing import compiled_products

CONFIG = tk.TKConfig(vocab_size=300, embedding_dim=40, num_layers=2, num_heads=2, head_dim=12,
                     ff_dim=24, max_query_length=8, max_document_length=32)
QUERY = jnp.asarray(np.random.default_rng(0).integers(2, 300, (3, 8)), jnp.int32)
DOCUMENT = jnp.asarray(np.random.default_rng(1).integers(2, 300, (3, 32)), jnp.int32)


def score(dtype: str):
  return jax.jit(lambda p, q, d: tk.TKNetwork(CONFIG, dtype).apply({"params": p}, q, d))


@pytest.fixture(scope="module")
def programs():
  params = cast_matrices(tk.init_tk_params(CONFIG, jax.random.PRNGKey(0)), "bfloat16")
  lowered = score("bfloat16").lower(params, QUERY, DOCUMENT)
  return lowered.as_text(), lowered.compile().as_text()


def test_every_matrix_product_is_bf16_operands_to_f32(programs):
  stablehlo, _ = programs
  products = re.findall(r"stablehlo\.dot_general[^\n]*:\s*\((tensor<[^>]*>), (tensor<[^>]*>)\)"
                        r"\s*->\s*(tensor<[^>]*>)", stablehlo)
  vectors = [p for p in products if p[1] == "tensor<11xf32>"]  # s_logᵏ·W₁, s_lenᵏ·W₂ (9)
  matrices = [p for p in products if p not in vectors]
  # per layer and side (query, document): ff_in, ff_out, q, k, v, out and the two attention
  # einsums; then the match matrix
  assert len(vectors) == 2 and len(matrices) == 2 * CONFIG.num_layers * 8 + 1
  for lhs, rhs, out in matrices:
    assert lhs.endswith("xbf16>") and rhs.endswith("xbf16>") and out.endswith("xf32>"), (
        lhs, rhs, out)


def test_no_weight_matrix_is_converted_in_the_compiled_program(programs):
  """Each kernel (bfloat16, as stored) goes, directly or reshaped (a bitcast), into a fused
  matrix product (XLA:CPU's YNNPACK fusion) whose operands are bfloat16 and whose result is
  float32, and nothing converts it."""
  _, hlo = programs
  start = hlo.index("\nENTRY ")
  entry = hlo[start:].split("\n}", 1)[0].splitlines()[1:]
  kernels = {m[1]: m[2] for line in entry if (m := re.match(
      r"\s*(%\S+) = (\w+)\[[\d,]*\]\S* parameter\(\d+\)", line)) and "kernel" in m[1]}
  assert len(kernels) == CONFIG.num_layers * 6 and set(kernels.values()) == {"bf16"}
  names = set(kernels)
  for line in entry:  # a kernel's reshapes are the kernel
    m = re.match(r"\s*(%\S+) = \S+ bitcast\((%\S+)\)", line)
    if m and m[2] in names:
      names.add(m[1])
  readers = 0
  for line in entry:
    if not any(re.search(re.escape(n) + r"[,)]", line) for n in names):
      continue
    if " parameter(" in line or " bitcast(" in line:
      continue
    readers += 1
    assert "__ynn_fusion" in line or "ynn_fusion" in line, line[:200]
    called = re.search(r"calls=(%[\w.]+)", line)[1]
    fused = hlo[hlo.index(f"\n{called} ") + 1:].split("\n}", 1)[0]
    assert " convert(" not in fused, fused
    assert re.search(r"\(param_0\.\d+: bf16\[[\d,]*\], param_1\.\d+: bf16\[[\d,]*\]\) -> f32\[",
                     fused.splitlines()[0]), fused.splitlines()[0]
  assert readers >= len(kernels)  # each kernel read at least once, by a product


def test_every_product_of_the_compiled_program_reads_bf16_at_tks_widths():
  """What XLA:CPU runs: at the shipped TK's widths (128, 4 heads of 32) every matrix product of the
  compiled program takes bfloat16 and returns float32, but the two with the kernel weights (a
  vector of 11). The attention products did not while they were transposed heads first in
  bfloat16: XLA copied their operands in float32 and ran both in float32."""
  config = tk.TKConfig(vocab_size=300, embedding_dim=128, num_layers=1, num_heads=4, head_dim=32,
                       ff_dim=100, max_query_length=8, max_document_length=32)
  params = cast_matrices(tk.init_tk_params(config, jax.random.PRNGKey(0)), "bfloat16")
  network = lambda p, q, d: tk.TKNetwork(config, "bfloat16").apply({"params": p}, q, d)
  products = compiled_products(
      jax.jit(network).lower(params, QUERY, DOCUMENT).compile().as_text())
  attention = [p for p in products if "/attention/..." in p[3]]
  assert len(attention) == 2 * 2 * config.num_layers  # two per layer and side
  assert all(p[:3] == ("f32", "bf16", "bf16") for p in attention), attention
  # per layer and side ff_in, ff_out, q, k, v, out and the two einsums; the match matrix; W₁, W₂
  assert len(products) == 2 * config.num_layers * 8 + 1 + 2
  others = [p for p in products if p[:3] != ("f32", "bf16", "bf16")]
  kernels = len(config.kernel_mus)  # W₁ and W₂ each weigh the 11 kernels
  assert len(others) == 2, others
  assert all(p[1:3] == ("f32", "f32") and kernels in p[4] + p[5] for p in others), others


def test_float32_is_the_network_it_was_and_bfloat16_stays_close():
  params = tk.init_tk_params(CONFIG, jax.random.PRNGKey(0))
  full = np.asarray(score("float32")(params, QUERY, DOCUMENT))
  before = np.asarray(jax.jit(lambda p, q, d: tk.TKNetwork(CONFIG).apply({"params": p}, q, d))(
      params, QUERY, DOCUMENT))
  np.testing.assert_array_equal(full, before)
  half = np.asarray(score("bfloat16")(cast_matrices(params, "bfloat16"), QUERY, DOCUMENT))
  assert half.dtype == np.float32 and np.abs(half - full).max() < 0.01


def test_the_shipped_tk_in_bfloat16_ranks_as_in_float32():
  texts = ["term life insurance pays a death benefit", "car insurance covers theft of the car",
           "homeowners insurance protects your house", "an annuity pays an income for life",
           "health insurance covers doctor visits", "life insurance for smokers costs more"]
  full = t5rank.load("shipped:tk")
  half = t5rank.load("shipped:tk", dtype="bfloat16")
  assert "bfloat16 products" in half.reranker.describe()
  assert half.reranker.fingerprint()["dtype"] == "bfloat16"
  assert "dtype" not in full.reranker.fingerprint()  # float32 jobs begun before still resume
  pairs = [("does life insurance cover smokers", t) for t in texts]
  a, b = full.predict(pairs), half.predict(pairs)
  assert np.abs(a - b).max() < 0.05 * np.abs(a).max()
  assert list(np.argsort(-a)[:3]) == list(np.argsort(-b)[:3])
  with pytest.raises(ValueError, match="TK's dtype must be one of float32, bfloat16"):
    tk_reranker_with("float16")


def tk_reranker_with(dtype: str):
  from t5rank.models.tk_reranker import TK

  ranker = t5rank.load("shipped:tk")
  return TK(ranker.reranker.config, ranker.reranker.vocabulary, dtype)
