"""benchmarks/step_profile.py: each operation of monoT5's compiled scoring step is put in the part of
the network it came from, and the parts' FLOPs add up to the pair's."""

from __future__ import annotations

import re

import numpy as np
import pytest

from t5rank.benchmarking import monot5_flops
from t5rank.models.config import get_config


@pytest.fixture(scope="module")
def bench(load_benchmark):
  return load_benchmark("step_profile")


def test_parts_of_op_names(bench):
  ff, projections, core, decoder, rest = bench.PARTS
  step = "jit(score_step)/T5.encode/encoder/layers_3/"
  assert bench.part_of(step + "mlp/wi/dot_general") == ff
  assert bench.part_of(step + "mlp/wi_1/dot_general") == ff  # T5 v1.1's gated feed-forward
  assert bench.part_of(step + "mlp/wo/dot_general") == ff
  assert bench.part_of(step + "mlp/jit(relu)/max") == rest
  assert bench.part_of(step + "attention/value/dot_general") == projections
  assert bench.part_of(step + "attention/bhqt,bhtk->bhqk/dot_general") == core
  assert bench.part_of(step + "attention/transpose") == core
  assert bench.part_of("jit(score_step)/T5.encode/encoder/relpos_bias/jit(_take)/gather") == core
  assert bench.part_of(step + "pre_mlp_layer_norm/mul") == rest
  assert bench.part_of("jit(score_step)/T5.decode/decoder/layers_0/mlp/wo/dot_general") == decoder


def test_every_product_of_a_compiled_step_has_its_part(bench):
  from t5rank.models.monot5 import score_step
  from t5rank.testing import random_params

  config = get_config("tiny", dropout_rate=0.0)
  params = random_params(config, 0)
  tokens = np.full((2, 16), 5, np.int32)
  text = score_step.lower(params, tokens, config=config, target_ids=(3, 4)).compile().as_text()
  names = re.findall(r'op_name="([^"]+)"', text)
  products = [n for n in names if n.endswith("dot_general")]
  parts = {bench.part_of(n) for n in products}
  assert parts == set(bench.PARTS[:4])  # every product is in one of the four parts that have some
  assert bench.part_of("jit(score_step)/T5.encode/encoder/layers_0/mlp/wi/dot_general") in parts


def test_part_flops_add_up_to_the_pairs(bench):
  config = get_config("tiny")  # d 128, d_ff 512, 4 heads of 32, 2 + 2 layers, relu
  parts = bench.part_flops(config, batch=3, length=10)
  ff, projections, core, decoder, rest = bench.PARTS
  assert parts[ff] == 2 * 2 * 30 * (2 * 128 * 512)  # 2 FLOPs x layers x positions x multiply-adds
  assert parts[projections] == 2 * 2 * 30 * (4 * 128 * 128)
  assert parts[core] == 2 * 2 * 3 * (2 * 10 * 10 * 128)
  assert parts[rest] == 0
  assert sum(parts.values()) == 3 * monot5_flops(config, 10)
  assert parts[decoder] > 0
