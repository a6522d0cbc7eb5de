"""RankT5's list-wise training (#70 item 2): the lists drawn from a triple table, and
gin/experiments/rankt5_tiny_cpu.gin run for two steps per family through `t5rank train`, its
final model scored by `t5rank.load`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from t5rank import cli
from t5rank.data.sources import pooled_table

TEXTS = {f"d{i}": f"policy {'term ' * (i % 4)}life car rate number {i}" for i in range(12)}


def test_a_list_is_the_positive_and_distinct_negatives_of_its_pool():
  table = pooled_table(["q0", "q1"], [f"doc{i}" for i in range(6)], [(0, 0), (1, 1)],
                       [[2, 3, 4], [5]], [0, 1])
  from t5rank.data.ranking_lists import list_batches, ranking_list

  for position in range(4):
    query, documents, scores = ranking_list(table, position, list_size=3, seed=0)
    assert scores is None  # a table without first-stage scores
    if query == "q0":
      assert documents[0] == "doc0" and len(set(documents[1:])) == 2
      assert set(documents[1:]) <= {"doc2", "doc3", "doc4"}
    else:  # a pool of one: a list of two, the rest padding
      assert documents == ["doc1", "doc5"]
  batch = next(list_batches(table, lambda q, d, s: [[len(t)] for t in d], batch_size=2, list_size=3,
                            input_length=4, seed=0))
  assert batch["encoder_input_tokens"].shape == (2, 3, 4)
  np.testing.assert_array_equal(batch["labels"], [[1, 0, 0], [1, 0, 0]])
  assert sorted(batch["mask"].sum(axis=1).tolist()) == [2, 3]
  resumed = next(list_batches(table, lambda q, d, s: [[len(t)] for t in d], batch_size=2,
                              list_size=3, input_length=4, seed=0, start_step=1))
  second = list_batches(table, lambda q, d, s: [[len(t)] for t in d], batch_size=2, list_size=3,
                        input_length=4, seed=0)
  next(second)
  np.testing.assert_array_equal(next(second)["mask"], resumed["mask"])


def test_list_accuracy_counts_a_list_when_its_relevant_document_scores_strictly_highest():
  from t5rank.training.listwise import list_accuracy

  labels = np.array([[1, 0, 0, 0]] * 4, np.float32)  # the relevant document first, as lists are
  mask = np.array([[1, 1, 1, 1]] * 3 + [[1, 1, 0, 0]], bool)
  scores = np.array([[2.0, 1.0, 0.5, 1.9],  # relevant highest: counted
                     [1.0, 1.0, 0.0, 0.0],  # tied with a negative: a miss
                     [0.0, 0.0, 0.0, 0.0],  # all alike (an untrained model): a miss
                     [1.0, 0.5, 9.0, 9.0]], np.float32)  # the 9s are padding: counted
  assert float(list_accuracy(scores, labels, mask)) == 0.5
  assert float(list_accuracy(np.zeros((3, 36), np.float32), np.eye(36, dtype=np.float32)[[0] * 3],
                             np.ones((3, 36), bool))) == 0.0


def test_a_scored_tables_lists_carry_each_documents_first_stage_score():
  from t5rank.data.ranking_lists import list_batches, ranking_list
  from t5rank.data.sources import TripleTable

  plain = pooled_table(["q0"], [f"doc{i}" for i in range(4)], [(0, 0)], [[1, 2, 3]], [0])
  # doc0 (the positive) 9.5; the pool's doc1, doc2, doc3: 7, 3, 1
  table = TripleTable(**{**plain.__dict__, "positive_scores": np.array([9.5]),
                         "pool_scores": np.array([7.0, 3.0, 1.0])})
  query, documents, scores = ranking_list(table, 0, list_size=3, seed=0)
  by_doc = {"doc0": 9.5, "doc1": 7.0, "doc2": 3.0, "doc3": 1.0}
  assert documents[0] == "doc0" and scores == [by_doc[d] for d in documents]
  seen = []
  next(list_batches(table, lambda q, d, s: seen.append(s) or [[1]] * len(d), batch_size=1,
                    list_size=3, input_length=2, seed=0))
  assert seen == [scores]


def write_files(root):
  (root / "corpus.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in TEXTS.items()))
  queries = {f"t{i}": f"life policy term {i}" for i in range(4)}
  (root / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
  (root / "qrels.txt").write_text("".join(f"{q} 0 d{(3 * k) % 12} 1\n"
                                          for k, q in enumerate(queries)))
  (root / "bm25.run").write_text("".join(f"{q} Q0 d{i} {i + 1} {12.0 - i} bm25\n"
                                         for q in queries for i in range(12)))


def test_each_ranking_loss_is_the_one_the_trainer_minimizes(tmp_path, capsys):
  """The same first step (seed, weights, lists) under RANKING_LOSS = %SOFTMAX, %POLY1 and
  %PAIRWISE_LOGISTIC, as the trainer logs it: Poly-1 is the softmax loss plus epsilon (1) times
  the mean of 1 - p(relevant), which Jensen's inequality bounds by 1 - exp(-softmax loss); the
  pairwise loss lies between the softmax loss and (list size - 1) times it."""
  import re

  write_files(tmp_path)
  first = {}
  for loss in ("SOFTMAX", "POLY1", "PAIRWISE_LOGISTIC"):
    argv = ["train", "--gin_file=gin/experiments/rankt5_tiny_cpu.gin",
            f"--gin.MODEL_DIR={tmp_path / loss}", f"--gin.CORPUS={tmp_path / 'corpus.tsv'}",
            f"--gin.TRAIN_QUERIES={tmp_path / 'queries.tsv'}",
            f"--gin.TRAIN_QRELS={tmp_path / 'qrels.txt'}",
            f"--gin.TRAIN_RUN={tmp_path / 'bm25.run'}", "--gin.TRAIN_STEPS=1",
            "--gin.CHECKPOINT_EVERY=1", "--gin.LOG_EVERY=1", f"--gin.RANKING_LOSS=%{loss}",
            "--gin.config.get_config.d_model=32", "--gin.config.get_config.d_ff=64",
            "--gin.config.get_config.num_heads=2", "--gin.config.get_config.d_kv=16",
            "--gin.config.get_config.num_encoder_layers=1",
            "--gin.config.get_config.num_decoder_layers=1"]
    assert cli.main(argv) == 0
    first[loss] = float(re.search(r"step 1/1  loss (\S+)", capsys.readouterr().out)[1])
  # Poly-1 - softmax = mean(1 - p_i) <= 1 - exp(-mean(-log p_i)) (Jensen), the log's 4 decimals
  assert 0 < first["POLY1"] - first["SOFTMAX"] <= 1 - np.exp(-first["SOFTMAX"]) + 1e-4
  # one relevant among m = 4, x_j = e^(s_j - s_relevant): the softmax loss is log(1 + sum x_j),
  # the pairwise sum_j log(1 + x_j), which lies between it and (m - 1) times it
  assert first["SOFTMAX"] < first["PAIRWISE_LOGISTIC"] <= 3 * first["SOFTMAX"] + 1e-4


@pytest.mark.parametrize("family", ["rankt5", "rankt5_encoder"])
def test_the_tiny_recipe_trains_two_steps_and_scores(tmp_path, capsys, family):
  import t5rank

  write_files(tmp_path)
  model_dir = tmp_path / "model"
  argv = ["train", "--gin_file=gin/experiments/rankt5_tiny_cpu.gin",
          f"--gin.MODEL_DIR={model_dir}", f"--gin.CORPUS={tmp_path / 'corpus.tsv'}",
          f"--gin.TRAIN_QUERIES={tmp_path / 'queries.tsv'}",
          f"--gin.TRAIN_QRELS={tmp_path / 'qrels.txt'}", f"--gin.TRAIN_RUN={tmp_path / 'bm25.run'}",
          "--gin.TRAIN_STEPS=2", "--gin.CHECKPOINT_EVERY=2", "--gin.LOG_EVERY=1",
          "--gin.RANKING_LOSS=%POLY1",
          "--gin.config.get_config.d_model=32", "--gin.config.get_config.d_ff=64",
          "--gin.config.get_config.num_heads=2", "--gin.config.get_config.d_kv=16",
          "--gin.config.get_config.num_encoder_layers=1",
          "--gin.config.get_config.num_decoder_layers=1"]
  if family == "rankt5_encoder":
    argv += [f"--gin.MODEL_FAMILY='{family}'",
             "--gin.MODEL_CONFIG=@rankt5_encoder.RankT5EncoderConfig()"]
  assert cli.main(argv) == 0
  out = capsys.readouterr().out
  assert "step 2/2" in out and "loss" in out
  metadata = json.loads((model_dir / "final" / "metadata.json").read_text())
  assert metadata["model"] == family and metadata["max_length"] == 64
  ranker = t5rank.load(str(model_dir / "final"))
  assert ranker.family == family
  ranked = ranker.rank("life policy term", list(TEXTS.values()))
  assert len(ranked) == 12 and all(np.isfinite(r["score"]) for r in ranked)
