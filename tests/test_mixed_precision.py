"""bfloat16 is mixed precision (`t5rank.models.network`'s docstring), read from the programs JAX
compiles, so that a machine without bfloat16 instructions proves the policy too: every matrix
product takes bfloat16 operands and returns float32, and no weight matrix is converted to float32
at a call. float32 keeps computing exactly what it did.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from t5rank.models import monot5
from t5rank.models.reranker import cast_params
from t5rank.testing import compiled_products, micro_config, random_params

# Sizes chosen so that no activation has a weight matrix's shape (B*L = 3*16 = 48 rows would);
# 2 + 2 layers so that a layer's products are not all the first of their kind.
SIZES = dict(d_model=40, d_ff=72, d_kv=24, num_heads=2, num_encoder_layers=2,
             num_decoder_layers=2)
BATCH, LENGTH = 3, 16
TARGETS = (1176, 6136)


def _scoring_step(dtype: str, sizes: dict = SIZES, batch: int = BATCH, length: int = LENGTH):
  config = micro_config(**sizes, dtype=dtype)
  params = cast_params(random_params(config), dtype)
  tokens = jnp.asarray(np.random.default_rng(0).integers(1, 500, (batch, length)), jnp.int32)
  step = jax.jit(lambda p, t: monot5.monot5_score(p, t, config=config, target_ids=TARGETS))
  return step, params, tokens, config


def _weight_matrices(config) -> int:
  """The products with a weight matrix in a monoT5 scoring step: q, k, v, out and the MLP's two
  per attention block and layer, and the vocabulary rows."""
  mlp = 2 if config.feed_forward == "relu" else 3
  return (config.num_encoder_layers * (4 + mlp) + config.num_decoder_layers * (8 + mlp) + 1)


@pytest.fixture(scope="module")
def bf16_programs():
  step, params, tokens, config = _scoring_step("bfloat16")
  lowered = step.lower(params, tokens)
  return lowered.as_text(), lowered.compile().as_text(), config


def test_every_product_of_the_written_program_is_bf16_operands_to_f32(bf16_programs):
  stablehlo, _, config = bf16_programs
  products = re.findall(r"stablehlo\.dot_general[^\n]*:\s*\((tensor<[^>]*>), (tensor<[^>]*>)\)"
                        r"\s*->\s*(tensor<[^>]*>)", stablehlo)
  # the weight products and the encoder's and decoder's two attention einsums per block
  attention = 2 * (config.num_encoder_layers + 2 * config.num_decoder_layers)
  assert len(products) == _weight_matrices(config) + attention
  for lhs, rhs, out in products:
    assert lhs.endswith("xbf16>") and rhs.endswith("xbf16>") and out.endswith("xf32>"), (
        lhs, rhs, out)


def _entry(hlo: str) -> list[str]:
  start = hlo.index("\nENTRY ")
  return hlo[start:].split("\n}", 1)[0].splitlines()[1:]


def _computation(hlo: str, name: str) -> str:
  start = hlo.index(f"\n{name} ")
  return hlo[start + 1:].split("\n}", 1)[0]


def test_no_weight_matrix_is_converted_in_the_compiled_step(bf16_programs):
  """Each weight matrix (stored in bfloat16) goes straight into a product that reads bfloat16: in
  XLA:CPU's compiled program, a fused matrix product (YNNPACK's) whose operands are bfloat16 and
  whose result is float32, or (the decoder's folded keys and values) a copy laid out per head,
  in bfloat16; nothing converts a kernel. The one other weight read is the embedding table's, by
  row (a gather)."""
  _, hlo, config = bf16_programs
  entry = _entry(hlo)
  weights = {}  # parameter name -> type
  for line in entry:
    m = re.match(r"\s*(%\S+) = (\w+)\[([\d,]*)\]\S* parameter\(\d+\)", line)
    if m and "kernel" in m[1]:
      weights[m[1]] = m[2]
  assert len(weights) == _weight_matrices(config) - 1  # the vocabulary rows are the embedding's
  assert set(weights.values()) == {"bf16"}
  readers = products = 0
  for line in entry:
    used = [w for w in weights if re.search(re.escape(w) + r"[,)]", line)]
    if not used or " parameter(" in line:
      continue
    readers += len(used)
    calls = re.search(r"calls=(%[\w.]+)", line)
    assert calls, line[:200]
    fused = _computation(hlo, calls[1])
    header = fused.splitlines()[0]
    assert " convert(" not in fused, fused
    if "__ynn_fusion" in line:  # the product itself
      assert re.search(r"\(param_0\.\d+: bf16\[[\d,]*\], param_1\.\d+: bf16\[[\d,]*\]\) -> "
                       r"f32\[", header), header
      products += 1
    else:  # the folded keys' and values' kernels, laid out per head: still bfloat16
      assert re.search(r"\) -> bf16\[", header) and "encoder_decoder_attention" in line, line[:200]
  assert readers == len(weights)
  assert products == len(weights) - 2 * config.num_decoder_layers


def test_every_product_of_the_compiled_step_reads_bf16_and_returns_f32():
  """What XLA:CPU runs, not only what t5rank wrote: no pass between turns a product's bfloat16
  operands back into float32 (one did for both attention products of every encoder layer while
  their operands were transposed before the einsums). T5-small's widths, where XLA:CPU's choices
  are those of the real model (at the micro widths above it computes the two vocabulary rows in
  float32 too). One exception: the folded cross-attention's logits, (B, H, D) by (B, T, D) per
  decoder layer, which XLA:CPU computes in float32 whatever the einsum's form; H·D·T multiply-adds
  per pair and layer, 0.1% of T5-small's scoring FLOPs."""
  step, params, tokens, config = _scoring_step(
      "bfloat16", dict(d_model=512, d_ff=2048, d_kv=64, num_heads=8, num_encoder_layers=1,
                       num_decoder_layers=2), batch=4, length=32)
  products = compiled_products(step.lower(params, tokens).compile().as_text())
  # the weights', and two attention products per encoder layer and per (folded) cross-attention;
  # the decoder's self-attention over its one position is elementwise work in the program
  attention = 2 * (config.num_encoder_layers + config.num_decoder_layers)
  assert len(products) == _weight_matrices(config) + attention
  exceptions = 0
  for result, lhs, rhs, source, *_ in products:
    if source.endswith("._folded/bhd,btd->bht/dot_general"):
      exceptions += 1
      continue
    assert (lhs, rhs, result) == ("bf16", "bf16", "f32"), source
  assert exceptions == config.num_decoder_layers


def test_the_old_program_fails_the_check():
  """The check above tells the policy from its absence: products asked for a bfloat16 result
  (what the network did before) make XLA:CPU convert both operands to float32."""
  a = jnp.ones((48, 40), jnp.bfloat16)
  w = jnp.ones((40, 72), jnp.bfloat16)
  old = jax.jit(lambda a, w: jnp.dot(a, w)).lower(a, w).compile().as_text()
  new = jax.jit(lambda a, w: jnp.dot(a, w, preferred_element_type=jnp.float32)).lower(
      a, w).compile().as_text()
  assert re.search(r"f32\[40,72\]\S* convert\(", old)
  assert not re.search(r"f32\[40,72\]\S* convert\(", new)


def test_bfloat16_scores_stay_close_and_keep_the_order():
  step32, params, tokens, config = _scoring_step("float32")
  tokens = jnp.asarray(np.random.default_rng(1).integers(1, 500, (32, LENGTH)), jnp.int32)
  full = np.asarray(step32(params, tokens)[0])
  step16, params16, _, _ = _scoring_step("bfloat16")
  half = np.asarray(step16(params16, tokens)[0])
  assert half.dtype == np.float32
  assert np.abs(half - full).max() < 0.05
  assert np.corrcoef(np.argsort(np.argsort(half)), np.argsort(np.argsort(full)))[0, 1] > 0.95


def test_a_precision_that_means_nothing_on_a_cpu_is_refused(tmp_path):
  """`--precision` changes float32 products on a GPU or TPU only: asked for on a CPU, it is
  refused with one line, from the Python API and the command line, before anything loads."""
  import subprocess
  import sys

  import t5rank
  from t5rank.ranking.devices import precision_problem

  assert precision_problem("tensorfloat32", "gpu") is None
  assert precision_problem("float32", "cpu") is None and precision_problem(None, "cpu") is None
  assert "changes nothing on a CPU" in precision_problem("bfloat16", "cpu")
  with pytest.raises(ValueError, match="precision tensorfloat32 changes nothing on a CPU"):
    t5rank.load(str(tmp_path / "no-such-model"), precision="tensorfloat32")
  for name, text in (("q.tsv", "1\tq\n"), ("c.tsv", "d\tt\n"), ("r.run", "1 Q0 d 1 1.0 bm25\n")):
    (tmp_path / name).write_text(text)
  result = subprocess.run(
      [sys.executable, "-m", "t5rank.cli", "score", "--checkpoint", "shipped:monot5",
       "--queries", str(tmp_path / "q.tsv"), "--corpus", str(tmp_path / "c.tsv"),
       "--run", str(tmp_path / "r.run"), "-o", str(tmp_path / "out.run"),
       "--precision", "tensorfloat32"], capture_output=True, text=True, timeout=300,
      env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1] == (
      "t5rank score: --precision tensorfloat32 changes nothing on a CPU: XLA:CPU computes every "
      "float32 product in float32; for bfloat16 products ask for the bfloat16 dtype")
  assert not (tmp_path / "out.run").exists()
