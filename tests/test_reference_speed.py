"""benchmarks/reference_speed.py on a micro random T5 and six real InsuranceQA v2 pairs: t5rank's
scorer and the PyTorch reference (transformers' T5 with pygaggle's MonoT5 recipe) give the same
log P(true) to 1e-4, and a disagreement stops the benchmark.

Needs the optional `reference` extra (torch, transformers): skipped without it.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from t5rank.models.config import get_config  # noqa: E402
from test_scoring import MICRO  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "reference_speed.py")
PAIRS = 6  # three length buckets, so three compilations


@pytest.fixture(scope="module")
def bench():
  spec = importlib.util.spec_from_file_location("reference_speed", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # its dataclass looks its module up there
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def scorers(bench, tmp_path_factory):
  """Both scorers of one micro random checkpoint written by t5rank's Hugging Face export."""
  config = get_config("tiny", dropout_rate=0.0, **MICRO)
  return bench.build_scorers(config, str(tmp_path_factory.mktemp("hf")), seed=0)


def test_t5rank_and_the_reference_agree(bench, scorers):
  tokenizer = transformers.T5Tokenizer(vocab_file=scorers.reranker.vocab.path, legacy=True)
  row = bench.compare(scorers, "short", PAIRS, tokenizer=tokenizer)
  assert row["pairs"] == PAIRS
  assert row["max_diff"] < 1e-4
  assert row["score_std"] > 0.01  # the pairs' scores differ: agreement is not vacuous
  # none of these answers reaches 512 tokens, so pygaggle's tokenizer gives t5rank's ids exactly
  assert row["cut"] == 0 and row["same_ids"] == 1.0
  assert row["t5rank"] > 0 and row["reference"] > 0


def test_windows_are_maxp_windows_of_four_answer_documents(bench):
  queries, pairs, passages, options = bench.insuranceqa_pairs("windows", 30)
  assert (options.window, options.stride) == (10, 5) and len(pairs) == 30
  assert list(queries) == ["0"]  # the first test question's pool is enough
  first = [p.part for p in pairs if p.docid == "0-0"]
  assert first == list(range(len(passages["0-0"]))) and len(first) > 2  # several windows each
  assert pairs[len(first)].docid == "0-1"


def test_a_disagreement_stops_the_benchmark(bench, scorers):
  model = copy.deepcopy(scorers.torch_model)
  with torch.no_grad():
    model.decoder.final_layer_norm.weight.mul_(1.01)
  with pytest.raises(bench.AgreementError, match="differ by"):
    bench.compare(dataclasses.replace(scorers, torch_model=model), "short", 4)


def test_flops_per_pair_of_tiny_at_100_tokens(bench):
  # d = h = 128, d_ff = 512, 2 + 2 layers, L = 100:
  # encoder layer 2*100*(4*128*128 + 2*128*512) + 4*100^2*128                   = 44,441,600
  # decoder layer 2*(4*128*128 + 2*128*512) + 2*2*128*128 + 2*100*2*128*128 + 4*100*128
  #                                                                             =  7,063,552
  # two logits 2*128*2 = 512;  2 * 44,441,600 + 2 * 7,063,552 + 512 = 103,010,816
  assert bench.flops_per_pair(get_config("tiny"), 100) == 103_010_816


def test_pairs_option(bench):
  assert bench.parse_pairs(["1000,10000", "t5_small=100"], ["tiny", "t5_small"]) == {
      "tiny": [1000, 10000], "t5_small": [100]}
  with pytest.raises(SystemExit, match="no counts for t5_small"):
    bench.parse_pairs(["tiny=5"], ["tiny", "t5_small"])
