"""benchmarks/target_words_data_poor.py (the paper's Table 4 in miniature): its arithmetic by hand
(`t5rank.benchmarking`'s data-poor trials), and the whole loop on one variant, two trials of a
shrunk model trained for 2 steps each, resumed."""

from __future__ import annotations

import json
import math
import os

import pytest

from t5rank import benchmarking

SHRINK = ["--gin.TRAIN_STEPS=2", "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 2}",
          "--gin.config.get_config.d_model=32", "--gin.config.get_config.d_ff=64",
          "--gin.config.get_config.num_heads=2", "--gin.config.get_config.d_kv=16",
          "--gin.config.get_config.num_encoder_layers=1", "--gin.rerank_eval.RerankEval.max_length=64"]


@pytest.fixture(scope="module")
def bench(load_benchmark):
  return load_benchmark("target_words_data_poor")


def test_steps_and_confidence_interval_by_hand():
  assert benchmarking.train_steps(1000, 32) == 188  # 3 x 2,000 / 32 = 187.5
  assert benchmarking.train_steps(10000, 32) == 1875
  mean, half = benchmarking.mean_ci95([1.0, 2.0, 3.0])  # sd 1, t(0.975, 2) = 4.302653
  assert mean == 2.0 and half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
  mean, half = benchmarking.mean_ci95([0.5])
  assert mean == 0.5 and math.isnan(half)


def test_random_order_mrr10_by_hand(monkeypatch):
  import insuranceqa_data

  # pool of 4 with 1 relevant: (1 + 1/2 + 1/3 + 1/4) / 4; pool of 3 with 2 relevant: ranks 1 and 2
  # first with probability 2/3 and 1/3 -> 2/3 + 1/6 = 5/6
  records = {"2": {"en": "q", "zh": "q", "answers": ["1"], "negatives": ["2", "3", "4"]},
             "10": {"en": "q", "zh": "q", "answers": ["1", "2"], "negatives": ["3"]}}
  monkeypatch.setattr(insuranceqa_data, "load_valid", lambda: records)
  monkeypatch.setattr(insuranceqa_data, "load_answers",
                      lambda: {str(i): {"en": "a", "zh": "a"} for i in range(1, 5)})
  assert benchmarking.random_order_mrr10(2) == pytest.approx(
      ((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4 + 5 / 6) / 2)
  assert benchmarking.random_order_mrr10(1) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_table_formats_mean_interval_and_trials(bench):
  results = {(1000, "hot_cold", t): {"mrr@10": v} for t, v in enumerate([0.1, 0.2, 0.3])}
  text, cells = benchmarking.table(results, [1000, 10000], ["hot_cold", "ab_de"], bench.LABELS)
  assert cells[(1000, "hot_cold")][0] == pytest.approx(0.2)
  assert cells[(1000, "hot_cold")][2] == 3
  assert "| hot / cold | 0.200 ± 0.248 (3) |  |" in text
  assert "| ab / de |  |  |" in text


def test_two_trials_then_resume(bench, tmp_path, monkeypatch, capsys):
  workdir = str(tmp_path / "t4")
  args = ["--sizes", "1000", "--variants", "hot_cold", "--trials", "2", "--eval_queries", "2",
          "--workdir", workdir, *SHRINK]
  assert bench.main(args) == 0
  with open(os.path.join(workdir, "results.jsonl")) as f:
    records = [json.loads(line) for line in f]
  assert [(r["variant"], r["trial"], r["task"]) for r in records] == [
      ("hot_cold", 0, "insuranceqa_en_8k_monot5_hot_cold_1k_s0"),
      ("hot_cold", 1, "insuranceqa_en_8k_monot5_hot_cold_1k_s1")]
  assert all(r["steps"] == 2 and 0.0 <= r["mrr@10"] <= 1.0 for r in records)
  final = os.path.join(workdir, "n1000", "hot_cold", "s0", "final")
  with open(os.path.join(final, "metadata.json")) as f:
    assert json.load(f)["target_words"] == "hot_cold"
  assert not os.path.exists(os.path.join(workdir, "n1000", "hot_cold", "s0", "checkpoints"))
  with open(os.path.join(workdir, "table.png"), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  capsys.readouterr()

  def no_training(*a, **k):
    raise AssertionError("a finished run was trained again")

  monkeypatch.setattr(bench, "run_one", no_training)
  assert bench.main(args) == 0
  assert "| hot / cold |" in capsys.readouterr().out
